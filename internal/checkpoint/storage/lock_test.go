package storage

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/clock"
)

var lockEpoch = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// waitFor polls cond until it holds, failing the test after a deadline:
// the scenario must happen, and how long it takes is not asserted.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// tick advances clk by d once the n renewal loops on it have armed their
// timers, and waits until they armed them again (renewed) or, for those
// that lost their lock, ended.
func tick(t *testing.T, clk *clock.Manual, n int, d time.Duration, locks ...*JobLock) {
	t.Helper()
	waitFor(t, "the renewal timers", func() bool { return clk.Waiters() == n })
	clk.Advance(d)
	waitFor(t, "the renewals", func() bool {
		live := 0
		for _, l := range locks {
			select {
			case <-l.done:
			default:
				live++
			}
		}
		return clk.Waiters() == live
	})
}

func memStorage(t *testing.T) *Storage {
	t.Helper()
	s, err := Open(context.Background(), "mem://")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func leaseOpts(clk clock.Clock) LockOptions {
	return LockOptions{Clock: clk, LeaseDuration: 30 * time.Second, RenewInterval: 10 * time.Second, Dir: "mem://"}
}

func mustLock(t *testing.T, s *Storage, o LockOptions) *JobLock {
	t.Helper()
	l, err := s.LockJob(context.Background(), "counter", o)
	if err != nil {
		t.Fatalf("LockJob: %v", err)
	}
	t.Cleanup(func() { l.Release(context.Background()) })
	return l
}

// wantLocked checks that err is the refusal naming holder.
func wantLocked(t *testing.T, err error, holder Holder, dir string) {
	t.Helper()
	if !errors.Is(err, ErrJobLocked) {
		t.Fatalf("err = %v, want ErrJobLocked", err)
	}
	var le *JobLockedError
	if !errors.As(err, &le) || le.Holder.Owner != holder.Owner {
		t.Fatalf("err = %#v, want the holder %+v", err, holder)
	}
	want := fmt.Sprintf("checkpoint directory %s is in use by pid %d on host %s since %s", dir, holder.PID, holder.Host,
		holder.Since.UTC().Format(time.RFC3339))
	if msg := err.Error(); !strings.HasPrefix(msg, want) || !strings.HasSuffix(msg, "; stop that job, or pass --force if it is dead") {
		t.Fatalf("message %q, want it to start with %q", msg, want)
	}
}

// die stops l's renewals without releasing it, as a killed process would.
func die(l *JobLock) {
	l.cancel()
	<-l.done
}

func leaseGens(t *testing.T, s *Storage) []int64 {
	t.Helper()
	le := &lease{b: s.b, prefix: "counter/", dir: "test"}
	gens, err := le.generations(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return gens
}

// A live lease refuses a second holder; a dead holder's lease is taken over
// once it expired, not before, and the dead holder can write nothing after.
func TestLeaseTakenOverOnlyAfterExpiry(t *testing.T) {
	s := memStorage(t)
	clk := clock.NewManual(lockEpoch)
	a := mustLock(t, s, leaseOpts(clk))
	host, _ := os.Hostname()
	if h := a.Holder(); h.PID != os.Getpid() || h.Host != host || !h.Since.Equal(lockEpoch) {
		t.Fatalf("holder %+v", h)
	}
	_, err := s.LockJob(context.Background(), "counter", leaseOpts(clk))
	wantLocked(t, err, a.Holder(), "mem://counter")
	if !strings.Contains(err.Error(), "(its lease runs until 2026-12-01T12:00:30Z unless renewed)") {
		t.Errorf("message %q lacks the expiry", err)
	}

	die(a)
	clk.Advance(29 * time.Second)
	_, err = s.LockJob(context.Background(), "counter", leaseOpts(clk))
	wantLocked(t, err, a.Holder(), "mem://counter")
	if a.Err() != nil {
		t.Fatalf("lease lost before it expired: %v", a.Err())
	}

	clk.Advance(time.Second)
	b := mustLock(t, s, leaseOpts(clk))
	if err := a.Err(); !errors.Is(err, ErrLockLost) {
		t.Fatalf("the dead holder's lock: Err() = %v, want ErrLockLost", err)
	}
	if _, err := a.Storage().CreateSharedFile(context.Background(), "counter", "x"); !errors.Is(err, ErrLockLost) {
		t.Fatalf("a write by the dead holder: %v, want ErrLockLost", err)
	}
	if err := a.Storage().DeleteCheckpoint(context.Background(), "counter", 1); !errors.Is(err, ErrLockLost) {
		t.Fatalf("a delete by the dead holder: %v, want ErrLockLost", err)
	}
	if err := a.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, err = s.LockJob(context.Background(), "counter", leaseOpts(clk))
	wantLocked(t, err, b.Holder(), "mem://counter")
	if gens := leaseGens(t, s); len(gens) != 1 || gens[0] != 2 {
		t.Fatalf("lease generations %v, want [2]", gens)
	}
}

// A holder that renews keeps its lease far beyond one lease duration; after
// Release, the next run takes it at once.
func TestLeaseRenewedThenReleased(t *testing.T) {
	s := memStorage(t)
	clk := clock.NewManual(lockEpoch)
	a := mustLock(t, s, leaseOpts(clk))
	for i := range 10 {
		tick(t, clk, 1, 10*time.Second, a)
		if err := a.Err(); err != nil {
			t.Fatalf("renewal %d: %v", i, err)
		}
		_, err := s.LockJob(context.Background(), "counter", leaseOpts(clk))
		wantLocked(t, err, a.Holder(), "mem://counter")
	}
	if gens := leaseGens(t, s); len(gens) != 1 || gens[0] != 11 {
		t.Fatalf("lease generations %v, want [11]: one per renewal, older ones deleted", gens)
	}
	w, err := a.Storage().CreateSharedFile(context.Background(), "counter", "x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Finish(); err != nil {
		t.Fatalf("the holder cannot write: %v", err)
	}
	if err := a.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	b := mustLock(t, s, leaseOpts(clk))
	if gens := leaseGens(t, s); len(gens) != 1 || gens[0] != 13 {
		t.Fatalf("lease generations %v, want [13]: the released record (12) replaced", gens)
	}
	_ = b
}

// Force takes a live lease over at once; the old holder learns it at its
// next renewal, stops writing, is told through OnLost, and its Release
// leaves the new holder's lease alone.
func TestLeaseForce(t *testing.T) {
	s := memStorage(t)
	clk := clock.NewManual(lockEpoch)
	lost := make(chan error, 1)
	oa := leaseOpts(clk)
	oa.OnLost = func(err error) { lost <- err }
	a := mustLock(t, s, oa)
	ob := leaseOpts(clk)
	ob.Force = true
	b := mustLock(t, s, ob)
	tick(t, clk, 2, 10*time.Second, a, b)
	var err error
	select {
	case err = <-lost:
	default:
		t.Fatalf("OnLost was not called; Err() = %v, gens %v", a.Err(), leaseGens(t, s))
	}
	if !errors.Is(err, ErrLockLost) || !errors.Is(a.Err(), ErrLockLost) || !strings.Contains(err.Error(), "was taken over by") {
		t.Fatalf("lost with %v, Err() = %v", err, a.Err())
	}
	if b.Err() != nil {
		t.Fatalf("the new holder: %v", b.Err())
	}
	if _, err := a.Storage().CreateFile(context.Background(), "counter", 3, "x"); !errors.Is(err, ErrLockLost) {
		t.Fatalf("old holder's write: %v", err)
	}
	a.Release(context.Background())
	_, err = s.LockJob(context.Background(), "counter", leaseOpts(clk))
	wantLocked(t, err, b.Holder(), "mem://counter")
}

// Contenders racing for a free or an expired lease: exactly one wins.
func TestLeaseContendersOneWins(t *testing.T) {
	for _, expired := range []bool{false, true} {
		t.Run(fmt.Sprintf("expired=%v", expired), func(t *testing.T) {
			s := memStorage(t)
			clk := clock.NewManual(lockEpoch)
			if expired {
				die(mustLock(t, s, leaseOpts(clk)))
				clk.Advance(time.Minute)
			}
			var (
				wg   sync.WaitGroup
				won  atomic.Int32
				errs = make(chan error, 8)
			)
			for range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					l, err := s.LockJob(context.Background(), "counter", leaseOpts(clk))
					if err != nil {
						errs <- err
						return
					}
					won.Add(1)
					t.Cleanup(func() { l.Release(context.Background()) })
				}()
			}
			wg.Wait()
			close(errs)
			if won.Load() != 1 {
				t.Fatalf("%d winners", won.Load())
			}
			for err := range errs {
				if !errors.Is(err, ErrJobLocked) {
					t.Fatalf("a loser: %v", err)
				}
			}
		})
	}
}

// failingBucket fails the lease writes while fail is set. It does not offer
// conditional creates: leases over it use check-then-write.
type failingBucket struct {
	Bucket
	fail atomic.Bool
}

func (f *failingBucket) NewWriter(ctx context.Context, key string) (ObjectWriter, error) {
	if f.fail.Load() && strings.Contains(key, leasePfx) {
		return nil, errors.New("injected")
	}
	return f.Bucket.NewWriter(ctx, key)
}

// Failed renewals are retried; the lease is lost only when it ran out
// before one succeeded.
func TestLeaseRenewalFailures(t *testing.T) {
	inner, err := OpenLocation(context.Background(), "mem://")
	if err != nil {
		t.Fatal(err)
	}
	fb := &failingBucket{Bucket: inner}
	s := OpenBucket(fb)
	t.Cleanup(func() { s.Close() })
	clk := clock.NewManual(lockEpoch)
	a := mustLock(t, s, leaseOpts(clk))
	fb.fail.Store(true)
	tick(t, clk, 1, 10*time.Second, a) // 10s: fails, retried 2.5s later
	tick(t, clk, 1, 2500*time.Millisecond, a)
	if a.Err() != nil {
		t.Fatalf("lost while the lease lasts: %v", a.Err())
	}
	fb.fail.Store(false)
	tick(t, clk, 1, 2500*time.Millisecond, a) // 15s: renewed until 45s
	fb.fail.Store(true)
	tick(t, clk, 1, 10*time.Second, a) // 25s: fails
	clk.Advance(19 * time.Second)      // 44s
	if a.Err() != nil {
		t.Fatalf("lost after a renewal: %v", a.Err())
	}
	clk.Advance(time.Second) // 45s: it ran out
	if err := a.Err(); !errors.Is(err, ErrLockLost) || !strings.Contains(err.Error(), "ran out") {
		t.Fatalf("Err() = %v, want the lease to have run out", err)
	}
	if err := a.Storage().WriteMetadata(context.Background(), "counter", 1, []byte("x")); !errors.Is(err, ErrLockLost) {
		t.Fatalf("write after the lease ran out: %v", err)
	}
}

func TestLockOptionsValidated(t *testing.T) {
	s := memStorage(t)
	_, err := s.LockJob(context.Background(), "counter", LockOptions{LeaseDuration: time.Second, RenewInterval: time.Second})
	if err == nil || !strings.Contains(err.Error(), "shorter than the lease duration") {
		t.Fatalf("err = %v", err)
	}
}

// A renewal that stored its generation but was cut short by Release still
// gets released: the next run need not wait for it to expire.
func TestLeaseReleaseAfterAnInterruptedRenewal(t *testing.T) {
	s := memStorage(t)
	clk := clock.NewManual(lockEpoch)
	a := mustLock(t, s, leaseOpts(clk))
	die(a)
	le := a.b.(*lease)
	h := le.me
	h.Expires = clk.Now().Add(30 * time.Second)
	if err := le.create(context.Background(), le.gen+1, h); err != nil { // stored, never recorded
		t.Fatal(err)
	}
	if err := a.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	mustLock(t, s, leaseOpts(clk))
}
