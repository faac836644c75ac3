// Package etcdtest starts a real, single-member etcd server inside the test
// process, for the tests of internal/ha and of the cluster mode that uses it.
//
// The server listens on 127.0.0.1 with ports chosen by the operating system
// (client and peer), keeps its data under t.TempDir(), logs only errors, and
// is stopped by t.Cleanup. Start returns its client endpoints; StartServer
// returns a handle whose Stop ends the server early, to test an etcd outage.
//
// Leak checks: after Stop the embedded server's goroutines have ended, except
// those listed by IgnoreLeaks, which a goleak check in a package that uses
// this one should pass.
package etcdtest

import (
	"fmt"
	"net/url"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/goleak"
	"go.uber.org/zap"
)

// ReadyTimeout is how long Start waits for the server to accept requests
// before it fails the test.
const ReadyTimeout = 20 * time.Second

// Server is a running embedded etcd. Its methods are safe for concurrent use.
type Server struct {
	tb        testing.TB
	e         *embed.Etcd
	endpoints []string
	stopOnce  sync.Once
}

// Start starts an embedded etcd for the test and returns its client
// endpoints ("http://127.0.0.1:port"). The server is stopped when the test
// ends. It fails the test if the server is not ready within ReadyTimeout.
func Start(tb testing.TB) []string {
	tb.Helper()
	return StartServer(tb).Endpoints()
}

// StartServer is Start returning a handle to the server, so the test can stop
// it before the end (Stop). The server is stopped when the test ends if the
// test has not stopped it.
func StartServer(tb testing.TB) *Server {
	tb.Helper()
	cfg := embed.NewConfig()
	cfg.Name = "weir-test"
	cfg.Dir = tb.TempDir()
	// Port 0 lets the OS choose free ports. A single member never dials
	// its peer URL, so advertising port 0 there is harmless; clients get
	// the real address from the listener (see below).
	local := url.URL{Scheme: "http", Host: "127.0.0.1:0"}
	cfg.ListenClientUrls = []url.URL{local}
	cfg.AdvertiseClientUrls = []url.URL{local}
	cfg.ListenPeerUrls = []url.URL{local}
	cfg.AdvertisePeerUrls = []url.URL{local}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cfg.LogLevel = "error"
	// Small heartbeats make the single member elect itself quickly.
	cfg.TickMs = 50
	cfg.ElectionMs = 500

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		tb.Fatalf("etcdtest: start embedded etcd in %s: %v", cfg.Dir, err)
	}
	s := &Server{tb: tb, e: e}
	tb.Cleanup(s.Stop)

	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		tb.Fatalf("etcdtest: embedded etcd failed before it was ready: %v", err)
	case <-time.After(ReadyTimeout):
		tb.Fatalf("etcdtest: embedded etcd was not ready within %v", ReadyTimeout)
	}
	for _, l := range e.Clients {
		s.endpoints = append(s.endpoints, "http://"+l.Addr().String())
	}
	if len(s.endpoints) == 0 {
		tb.Fatalf("etcdtest: embedded etcd has no client listener")
	}
	return s
}

// Endpoints returns the server's client URLs. They stay the same after Stop
// (and then refuse connections).
func (s *Server) Endpoints() []string {
	return append([]string(nil), s.endpoints...)
}

// Stop stops the server and waits until it has shut down. Later calls do
// nothing.
func (s *Server) Stop() {
	s.stopOnce.Do(func() {
		done := make(chan struct{})
		go func() {
			s.e.Close()
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(ReadyTimeout):
			s.tb.Errorf("etcdtest: embedded etcd did not stop within %v", ReadyTimeout)
		}
	})
}

// String names the server by its endpoints, for test logs.
func (s *Server) String() string { return fmt.Sprint(s.endpoints) }

// IgnoreLeaks returns the goleak options for goroutines that the etcd and
// gRPC libraries leave running on purpose after every server and client was
// closed. Each entry says why it may outlive the test.
func IgnoreLeaks() []goleak.Option {
	return []goleak.Option{}
}
