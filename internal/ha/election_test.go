package ha_test

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/weirstream/weir/internal/ha"
	"github.com/weirstream/weir/internal/ha/etcdtest"
)

// TestFailoverAfterCrash is the HA story: two job managers campaign, one
// leads and writes the job's state, the other blocks; the leader crashes
// (its client closes without resigning); the standby leads within the TTL,
// reads what the first leader wrote, and the task managers' watch reports
// the new address.
func TestFailoverAfterCrash(t *testing.T) {
	t.Parallel()
	endpoints := etcdtest.Start(t)
	raw := rawClient(t, endpoints)
	jmA, jmB, tm := open(t, endpoints, "prod"), open(t, endpoints, "prod"), open(t, endpoints, "prod")
	ctx := ctxT(t)

	if _, err := tm.Leader(ctx); !errors.Is(err, ha.ErrNoLeader) {
		t.Fatalf("Leader before any campaign: err = %v, want ErrNoLeader", err)
	}
	watch := tm.WatchLeader(ctx)
	nextLeader(t, watch, "")

	a := mustCampaign(t, jmA, "jm-a:6123")
	nextLeader(t, watch, "jm-a:6123")
	bc := campaignAsync(ctx, jmB, "jm-b:6123")
	// Once B's candidate key exists behind A's, B cannot have won.
	waitFor(t, "two candidates", func() bool { return candidates(t, raw, "prod") == 2 })
	select {
	case r := <-bc:
		t.Fatalf("standby's Campaign returned while the leader leads: %v, %v", r.l, r.err)
	default:
	}
	if got, err := tm.Leader(ctx); err != nil || got != "jm-a:6123" {
		t.Fatalf("Leader = %q, %v; want jm-a:6123", got, err)
	}

	const job = "0a1b2c3d4e5f60718293a4b5c6d7e8f9"
	spec := []byte(`{"name":"counter","parallelism":4}`)
	ptr := ha.Pointer{ID: 7, Path: "s3://bucket/ckpt/" + job + "/chk-7", Time: time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC)}
	if err := a.PutJob(ctx, job, spec); err != nil {
		t.Fatal(err)
	}
	if err := a.SetCheckpointCounter(ctx, job, 8); err != nil {
		t.Fatal(err)
	}
	if err := a.SetLatestCheckpoint(ctx, job, ptr); err != nil {
		t.Fatal(err)
	}

	// Crash: A's connection ends without resigning; its lease expires.
	crashed := time.Now()
	if err := jmA.Close(); err != nil {
		t.Fatal(err)
	}
	var b *ha.Leadership
	select {
	case r := <-bc:
		if r.err != nil {
			t.Fatalf("standby campaign: %v", r.err)
		}
		b = r.l
	case <-time.After(waitTimeout):
		t.Fatalf("standby did not lead within %v of the crash", waitTimeout)
	}
	took := time.Since(crashed)
	t.Logf("standby leads %v after the crash (TTL %v)", took, testTTL)
	// The lease expires at most TTL after the crash; etcd checks expiry
	// every 0.5 s; the rest is slack for a loaded machine.
	if limit := testTTL + 3*time.Second; took > limit {
		t.Errorf("failover took %v, want at most %v", took, limit)
	}
	nextLeader(t, watch, "jm-b:6123")
	if b.Epoch() <= a.Epoch() {
		t.Errorf("new epoch %d not above old epoch %d", b.Epoch(), a.Epoch())
	}

	// The old leadership has ended and is fenced.
	select {
	case <-a.Lost():
	default:
		t.Errorf("crashed leader's Lost is not closed")
	}
	if err := a.SetCheckpointCounter(ctx, job, 100); !errors.Is(err, ha.ErrNotLeader) {
		t.Errorf("old leader's SetCheckpointCounter: err = %v, want ErrNotLeader", err)
	}

	// The new leader resumes from what the old one stored.
	if jobs, err := b.Jobs(ctx); err != nil || len(jobs) != 1 || jobs[0] != job {
		t.Fatalf("Jobs = %v, %v; want [%s]", jobs, err, job)
	}
	if got, ok, err := b.Job(ctx, job); err != nil || !ok || string(got) != string(spec) {
		t.Errorf("Job = %q, %v, %v; want %q", got, ok, err, spec)
	}
	if n, err := b.CheckpointCounter(ctx, job); err != nil || n != 8 {
		t.Errorf("CheckpointCounter = %d, %v; want 8", n, err)
	}
	if p, ok, err := b.LatestCheckpoint(ctx, job); err != nil || !ok || p != ptr {
		t.Errorf("LatestCheckpoint = %+v, %v, %v; want %+v", p, ok, err, ptr)
	}
	if err := b.SetCheckpointCounter(ctx, job, 5); !errors.Is(err, ha.ErrCounterDecrease) {
		t.Errorf("SetCheckpointCounter below the stored value: err = %v, want ErrCounterDecrease", err)
	}
	if err := b.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	nextLeader(t, watch, "")
}

// TestFencedByEtcd revokes the leader's lease behind its back, as etcd
// does when the lease expires while the leader cannot reach it: the
// leadership is lost, its writes fail, and the standby leads at once.
func TestFencedByEtcd(t *testing.T) {
	t.Parallel()
	endpoints := etcdtest.Start(t)
	raw := rawClient(t, endpoints)
	jmA, jmB := open(t, endpoints, "c1"), open(t, endpoints, "c1")
	ctx := ctxT(t)

	a := mustCampaign(t, jmA, "a:1")
	bc := campaignAsync(ctx, jmB, "b:1")
	waitFor(t, "two candidates", func() bool { return candidates(t, raw, "c1") == 2 })

	leases, err := raw.Leases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := raw.Get(ctx, "/weir/c1/leader/", clientv3.WithFirstCreate()...)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("read leader key: %v, %v", resp, err)
	}
	t.Logf("%d leases; revoking the leader's %x", len(leases.Leases), resp.Kvs[0].Lease)
	revoked := time.Now()
	if _, err := raw.Revoke(ctx, clientv3.LeaseID(resp.Kvs[0].Lease)); err != nil {
		t.Fatal(err)
	}

	select {
	case <-a.Lost():
		t.Logf("leader noticed the revocation after %v", time.Since(revoked))
	case <-time.After(waitTimeout):
		t.Fatalf("Lost not closed within %v of the revocation", waitTimeout)
	}
	if err := a.SetLatestCheckpoint(ctx, "job1", ha.Pointer{ID: 1, Path: "p"}); !errors.Is(err, ha.ErrNotLeader) {
		t.Errorf("fenced SetLatestCheckpoint: err = %v, want ErrNotLeader", err)
	}
	if _, _, err := a.Job(ctx, "job1"); !errors.Is(err, ha.ErrNotLeader) {
		t.Errorf("fenced Job: err = %v, want ErrNotLeader", err)
	}
	r := <-bc
	if r.err != nil {
		t.Fatal(r.err)
	}
	t.Logf("standby leads %v after the revocation", time.Since(revoked))
	if addr, err := jmA.Leader(ctx); err != nil || addr != "b:1" {
		t.Errorf("Leader = %q, %v; want b:1", addr, err)
	}
	// Resigning a lost leadership is harmless.
	if err := a.Resign(ctx); err != nil {
		t.Errorf("Resign after loss: %v", err)
	}
	if err := r.l.SetLatestCheckpoint(ctx, "job1", ha.Pointer{ID: 1, Path: "p"}); err != nil {
		t.Errorf("new leader's write: %v", err)
	}
}

// TestResignHandsOver: a resigning leader's standby takes over at once, far
// sooner than the TTL.
func TestResignHandsOver(t *testing.T) {
	t.Parallel()
	endpoints := etcdtest.Start(t)
	raw := rawClient(t, endpoints)
	jmA, jmB := open(t, endpoints, "c2"), open(t, endpoints, "c2")
	ctx := ctxT(t)

	a := mustCampaign(t, jmA, "a:1")
	bc := campaignAsync(ctx, jmB, "b:1")
	waitFor(t, "two candidates", func() bool { return candidates(t, raw, "c2") == 2 })
	start := time.Now()
	if err := a.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-a.Lost():
	default:
		t.Fatal("Lost not closed after Resign")
	}
	r := <-bc
	if r.err != nil {
		t.Fatal(r.err)
	}
	t.Logf("handover after Resign took %v", time.Since(start))
	if err := a.PutJob(ctx, "j", nil); !errors.Is(err, ha.ErrNotLeader) {
		t.Errorf("PutJob after Resign: err = %v, want ErrNotLeader", err)
	}
	if err := a.Resign(ctx); err != nil {
		t.Errorf("second Resign: %v", err)
	}
	if err := r.l.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if n := candidates(t, raw, "c2"); n != 0 {
		t.Errorf("%d candidate keys after both resigned, want 0", n)
	}
}

// TestEtcdOutageEndsLeadership stops etcd under a leader: the leader
// cannot renew its lease and gives up its leadership within the TTL.
func TestEtcdOutageEndsLeadership(t *testing.T) {
	t.Parallel()
	srv := etcdtest.StartServer(t)
	jm := open(t, srv.Endpoints(), "c3")
	l := mustCampaign(t, jm, "a:1")
	stopped := time.Now()
	srv.Stop()
	select {
	case <-l.Lost():
	case <-time.After(waitTimeout):
		t.Fatalf("Lost not closed within %v of the etcd outage", waitTimeout)
	}
	took := time.Since(stopped)
	t.Logf("leadership lost %v after etcd stopped (TTL %v)", took, testTTL)
	if took > testTTL+time.Second {
		t.Errorf("leadership held %v into the outage, want at most the TTL %v (plus 1s slack)", took, testTTL)
	}
	if err := l.PutJob(context.Background(), "j", nil); !errors.Is(err, ha.ErrNotLeader) {
		t.Errorf("PutJob during outage: err = %v, want ErrNotLeader", err)
	}
}

// TestCampaignCanceled: a standby whose context ends withdraws its
// candidacy.
func TestCampaignCanceled(t *testing.T) {
	t.Parallel()
	endpoints := etcdtest.Start(t)
	raw := rawClient(t, endpoints)
	jmA, jmB := open(t, endpoints, "c4"), open(t, endpoints, "c4")
	a := mustCampaign(t, jmA, "a:1")

	ctx, cancel := context.WithCancel(context.Background())
	bc := campaignAsync(ctx, jmB, "b:1")
	waitFor(t, "two candidates", func() bool { return candidates(t, raw, "c4") == 2 })
	cancel()
	r := <-bc
	if !errors.Is(r.err, context.Canceled) {
		t.Fatalf("canceled Campaign: %v, %v; want context.Canceled", r.l, r.err)
	}
	if n := candidates(t, raw, "c4"); n != 1 {
		t.Errorf("%d candidate keys after the standby withdrew, want 1", n)
	}
	select {
	case <-a.Lost():
		t.Fatal("leader lost its leadership when a standby withdrew")
	default:
	}
	if _, err := jmB.Campaign(context.Background(), ""); err == nil {
		t.Error("Campaign with an empty address succeeded")
	}
}

// TestClustersAreIndependent: two cluster ids on one etcd each have their
// own leader and jobs.
func TestClustersAreIndependent(t *testing.T) {
	t.Parallel()
	endpoints := etcdtest.Start(t)
	ctx := ctxT(t)
	one, two := open(t, endpoints, "/one"), open(t, endpoints, "two")
	l1 := mustCampaign(t, one, "one:1")
	l2 := mustCampaign(t, two, "two:1")
	for _, c := range []struct {
		e    *ha.Etcd
		want string
	}{{one, "one:1"}, {two, "two:1"}} {
		if got, err := c.e.Leader(ctx); err != nil || got != c.want {
			t.Errorf("Leader = %q, %v; want %q", got, err, c.want)
		}
	}
	if err := l1.PutJob(ctx, "j", []byte("1")); err != nil {
		t.Fatal(err)
	}
	if jobs, err := l2.Jobs(ctx); err != nil || len(jobs) != 0 {
		t.Errorf("other cluster's Jobs = %v, %v; want none", jobs, err)
	}
	// "one" with and without its leading slash is the same cluster.
	if got, err := open(t, endpoints, "one").Leader(ctx); err != nil || got != "one:1" {
		t.Errorf("Leader of \"one\" = %q, %v; want one:1", got, err)
	}
}

// TestWatchLeaderEnds: the channel closes when its context ends and when
// the connection closes.
func TestWatchLeaderEnds(t *testing.T) {
	t.Parallel()
	endpoints := etcdtest.Start(t)
	e := open(t, endpoints, "c5")
	ctx, cancel := context.WithCancel(context.Background())
	byCtx := e.WatchLeader(ctx)
	byClose := e.WatchLeader(context.Background())
	nextLeader(t, byCtx, "")
	nextLeader(t, byClose, "")
	cancel()
	drained(t, byCtx, "WatchLeader after its context ended")
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	drained(t, byClose, "WatchLeader after Close")
	if _, err := e.Campaign(context.Background(), "a:1"); !errors.Is(err, ha.ErrClosed) {
		t.Errorf("Campaign after Close: %v; want ErrClosed", err)
	}
	drained(t, e.WatchLeader(context.Background()), "WatchLeader called after Close")
}

// drained fails the test unless ch is closed within waitTimeout.
func drained(t *testing.T, ch <-chan string, what string) {
	t.Helper()
	timeout := time.NewTimer(waitTimeout)
	defer timeout.Stop()
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-timeout.C:
			t.Fatalf("%s: channel not closed within %v", what, waitTimeout)
		}
	}
}
