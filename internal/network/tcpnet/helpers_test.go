package tcpnet

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/weirstream/weir/internal/network"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testLogger logs to the test at debug level when -v, else discards.
func testLogger(t testing.TB) *slog.Logger {
	if !testing.Verbose() {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// lostPeers records OnPeerLost calls.
type lostPeers struct {
	mu    sync.Mutex
	peers []string
	errs  []error
}

func (l *lostPeers) record(peer string, err error) {
	l.mu.Lock()
	l.peers = append(l.peers, peer)
	l.errs = append(l.errs, err)
	l.mu.Unlock()
}

func (l *lostPeers) get() ([]string, []error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.peers...), append([]error(nil), l.errs...)
}

// testNode is a node listening on loopback, closed by the test's cleanup,
// that fails the test if it loses a peer unless the test expects it.
type testNode struct {
	*Node
	lost *lostPeers
}

func newNode(t testing.TB, cfg Config) testNode {
	t.Helper()
	lost := &lostPeers{}
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	if cfg.OnPeerLost == nil {
		cfg.OnPeerLost = lost.record
	}
	n, err := Listen(context.Background(), "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Errorf("close %s: %v", n.Addr(), err)
		}
	})
	return testNode{n, lost}
}

// checkNoLoss fails the test if a node lost a peer.
func checkNoLoss(t testing.TB, nodes ...testNode) {
	t.Helper()
	for _, n := range nodes {
		if peers, errs := n.lost.get(); len(peers) > 0 {
			t.Errorf("%s lost peers %v: %v", n.Addr(), peers, errs)
		}
	}
}

// waitFor polls cond until it holds, failing the test with what after 10s.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// quiesce waits until nothing is in flight between nodes: every writer
// idle with nothing queued or buffered, and every byte written read and
// processed by the peer, twice in a row with the same counters (work
// queued between the checks of two connections moves a counter).
func quiesce(t testing.TB, nodes ...*Node) {
	t.Helper()
	last := int64(-1)
	waitFor(t, "the nodes to quiesce", func() bool {
		total, ok := quiet(nodes)
		if !ok {
			last = -1
			return false
		}
		if total != last {
			last = total
			return false
		}
		return true
	})
}

// quiet reports whether nothing is in flight, and the bytes moved so far.
func quiet(nodes []*Node) (int64, bool) {
	var conns []*conn
	for _, n := range nodes {
		n.mu.Lock()
		for c := range n.conns {
			conns = append(conns, c)
		}
		n.mu.Unlock()
	}
	byLocal := map[string]*conn{}
	for _, c := range conns {
		byLocal[c.nc.LocalAddr().String()] = c
	}
	var total int64
	for _, c := range conns {
		c.mu.Lock()
		idle := c.idle && c.control.len() == 0 && c.ready.len() == 0
		c.mu.Unlock()
		peer := byLocal[c.nc.RemoteAddr().String()]
		if !idle || peer == nil {
			return 0, false
		}
		sent := c.sent.Load()
		if sent != peer.recvd.Load() {
			return 0, false
		}
		total += sent
	}
	return total, true
}

// senderCredit is the credit the sender of id to peer holds, -1 if it is
// not bound.
func senderCredit(n *Node, peer string, id ChannelID) int {
	n.mu.Lock()
	sc := n.senders[senderKey{peer, id}]
	n.mu.Unlock()
	if sc == nil {
		return -1
	}
	sc.mu.Lock()
	bound := sc.c != nil
	sc.mu.Unlock()
	if !bound {
		return -1
	}
	return int(sc.credit.Load())
}

// fill requests a buffer of pool and writes data into it.
func fill(t testing.TB, pool *network.Pool, kind network.Kind, data []byte) *network.Buffer {
	t.Helper()
	b := pool.TryRequest()
	if b == nil {
		t.Fatalf("producer pool exhausted")
	}
	b.Kind = kind
	b.Data = append(b.Data, data...)
	return b
}

// pollData polls g until it yields a buffer, failing after 10s.
func pollBuffer(t testing.TB, g *network.InputGate) (int, *network.Buffer) {
	t.Helper()
	var ch int
	var b *network.Buffer
	waitFor(t, "a buffer at the gate", func() bool {
		var ok bool
		ch, b, ok = g.Poll()
		return ok
	})
	return ch, b
}
