package ha_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/weirstream/weir/internal/ha"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testTTL is the session TTL of the tests: etcd's minimum with the test
// server's timing is 1 s; 2 s leaves room for a loaded machine.
const testTTL = 2 * time.Second

// waitTimeout bounds every wait for a condition in these tests.
const waitTimeout = 15 * time.Second

// open connects to etcd for cluster and closes the connection when the
// test ends.
func open(t *testing.T, endpoints []string, cluster string) *ha.Etcd {
	t.Helper()
	e, err := ha.Open(context.Background(), ha.Config{
		Endpoints:   endpoints,
		ClusterID:   cluster,
		SessionTTL:  testTTL,
		DialTimeout: 5 * time.Second,
		Logger:      slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo})),
	})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return e
}

// rawClient is a plain etcd client, for what the tests do behind the
// package's back (inspect keys, revoke a lease).
func rawClient(t *testing.T, endpoints []string) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("raw client: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// ctxT returns a context that ends with the wait timeout or the test.
func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	t.Cleanup(cancel)
	return ctx
}

// waitFor polls cond until it holds, failing the test with what if it
// does not within waitTimeout.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", waitTimeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// campaignResult is the outcome of a Campaign run in a goroutine.
type campaignResult struct {
	l   *ha.Leadership
	err error
}

func campaignAsync(ctx context.Context, e *ha.Etcd, address string) <-chan campaignResult {
	ch := make(chan campaignResult, 1)
	go func() {
		l, err := e.Campaign(ctx, address)
		ch <- campaignResult{l, err}
	}()
	return ch
}

// candidates counts the candidate keys of cluster.
func candidates(t *testing.T, c *clientv3.Client, cluster string) int64 {
	t.Helper()
	resp, err := c.Get(context.Background(), "/weir/"+cluster+"/leader/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatalf("count candidates: %v", err)
	}
	return resp.Count
}

// nextLeader receives from a WatchLeader channel until it reports want,
// failing the test if it does not within waitTimeout.
func nextLeader(t *testing.T, ch <-chan string, want string) {
	t.Helper()
	timeout := time.NewTimer(waitTimeout)
	defer timeout.Stop()
	for {
		select {
		case got, ok := <-ch:
			if !ok {
				t.Fatalf("WatchLeader channel closed while waiting for %q", want)
			}
			t.Logf("WatchLeader: %q", got)
			if got == want {
				return
			}
		case <-timeout.C:
			t.Fatalf("WatchLeader did not report %q within %v", want, waitTimeout)
		}
	}
}

func mustCampaign(t *testing.T, e *ha.Etcd, address string) *ha.Leadership {
	t.Helper()
	l, err := e.Campaign(ctxT(t), address)
	if err != nil {
		t.Fatalf("campaign %s: %v", address, err)
	}
	return l
}
