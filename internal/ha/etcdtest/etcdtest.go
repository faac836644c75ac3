// Package etcdtest starts a real, single-member etcd server inside the test
// process, for the tests of internal/ha and of the cluster mode that uses it.
//
// The server listens on 127.0.0.1 with ports chosen by the operating system
// (client and peer), keeps its data under t.TempDir(), logs only errors, and
// is stopped by t.Cleanup. Start returns its client endpoints; StartServer
// returns a handle whose Stop ends the server early, to test an etcd outage.
//
// Clients reach the server through an in-process TCP proxy, so that Stop
// cuts every client connection at once, as a crash of etcd or a network
// partition does. (Without it, etcd's graceful shutdown would wait up to its
// request timeout, 6 s here, for the clients' open watch and lease
// streams, while still serving them.)
//
// Leak checks: after Stop every goroutine of the server and the proxy has
// ended, so a goleak check in a package that uses this one needs no
// ignore option for them (this package's own TestMain checks it).
package etcdtest

import (
	"fmt"
	"net/url"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// ReadyTimeout is how long Start waits for the server to accept requests
// before it fails the test.
const ReadyTimeout = 20 * time.Second

// Server is a running embedded etcd. Its methods are safe for concurrent use.
type Server struct {
	tb        testing.TB
	e         *embed.Etcd
	proxies   []*proxy
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
		p, err := startProxy(l.Addr().String())
		if err != nil {
			tb.Fatalf("etcdtest: proxy to %s: %v", l.Addr(), err)
		}
		s.proxies = append(s.proxies, p)
		s.endpoints = append(s.endpoints, "http://"+p.addr())
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

// Stop cuts every client connection, then stops the server and waits until
// it has shut down. Later calls do nothing.
func (s *Server) Stop() {
	s.stopOnce.Do(func() {
		for _, p := range s.proxies {
			p.close()
		}
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
