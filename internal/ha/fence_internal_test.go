package ha

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/ha/etcdtest"
)

// TestFenceInEtcd checks the etcd side of fencing alone: a leadership that
// has not noticed its end (its Lost still open) finds its transactions
// refused by etcd once another candidate leads.
func TestFenceInEtcd(t *testing.T) {
	t.Parallel()
	endpoints := etcdtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	cfg := Config{Endpoints: endpoints, ClusterID: "fence", SessionTTL: 2 * time.Second}
	ea, err := Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ea.Close()
	eb, err := Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer eb.Close()

	a, err := ea.Campaign(ctx, "a:1")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.SetCheckpointCounter(ctx, "j", 4); err != nil {
		t.Fatal(err)
	}
	// A copy of a's leadership that is never told of its end.
	stale := &Leadership{e: ea, key: a.key, rev: a.rev, lost: make(chan struct{})}
	if err := a.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	b, err := eb.Campaign(ctx, "b:1")
	if err != nil {
		t.Fatal(err)
	}
	err = stale.SetCheckpointCounter(ctx, "j", 100)
	if !errors.Is(err, ErrNotLeader) {
		t.Fatalf("stale leadership's write: %v; want ErrNotLeader", err)
	}
	t.Logf("stale write refused: %v", err)
	if _, _, err := stale.Job(ctx, "j"); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("stale leadership's read: %v; want ErrNotLeader", err)
	}
	select {
	case <-stale.lost:
	default:
		t.Error("a refused transaction did not end the stale leadership locally")
	}
	if n, err := b.CheckpointCounter(ctx, "j"); err != nil || n != 4 {
		t.Fatalf("counter after the refused write = %d, %v; want 4", n, err)
	}
}
