package weir_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/checkpoint/storage/blobtest"
	"github.com/weirstream/weir/sink"
)

// lockRun is one run of the counter job under test.
type lockRun struct {
	env  *weir.Environment
	out  string
	done chan error
}

// startCounter starts the counter job over n records writing to out, with
// checkpoints every 10ms into dir (or the shared store); throttle slows
// every record down while it returns true.
func startCounter(t *testing.T, dir string, store *storage.Storage, out string, n int64, throttle func(int64) bool,
	jl weir.JobLockOptions, hooks weir.TestHooks, onComplete func(weir.CompletedCheckpoint)) *lockRun {
	t.Helper()
	hooks.Storage = store
	opts := weir.Options{Parallelism: 2, Logger: quietLogger(t), JobLock: jl,
		Checkpoint:           weir.CheckpointOptions{Interval: 10 * time.Millisecond, Dir: dir},
		Restart:              weir.RestartOptions{Type: "none"},
		OnCheckpointComplete: onComplete}
	testHooks := (hooks)
	env := weir.NewEnvironment(opts)
	weir.SetTestHooks(env, testHooks)
	counterJobWith(env, n, 97, sink.Files(out, func(s string) string { return s }), counterHooks{throttle: throttle})
	r := &lockRun{env: env, out: out, done: make(chan error, 1)}
	go func() { r.done <- env.Execute(context.Background(), "counter") }()
	return r
}

func (r *lockRun) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-r.done:
		return err
	case <-time.After(2 * time.Minute):
		t.Fatal("the job did not end")
		return nil
	}
}

// objectsUnder lists every object under prefix, with sizes.
func objectsUnder(t *testing.T, b storage.Bucket, prefix string) []string {
	t.Helper()
	objs, err := b.List(context.Background(), prefix, "")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, o := range objs {
		out = append(out, fmt.Sprintf("%s %d", o.Key, o.Size))
	}
	return out
}

// wantRefused checks that err is the refusal of a locked job directory
// naming this process as the holder.
func wantRefused(t *testing.T, err error, dir string) {
	t.Helper()
	if !errors.Is(err, weir.ErrJobLocked) {
		t.Fatalf("second run: err = %v, want it refused with ErrJobLocked", err)
	}
	host, _ := os.Hostname()
	want := fmt.Sprintf("checkpoint directory %s is in use by pid %d on host %s since ", dir, os.Getpid(), host)
	if msg := err.Error(); !strings.HasPrefix(msg, want) || !strings.Contains(msg, "; stop that job, or pass --force if it is dead") {
		t.Fatalf("message %q, want it to start with %q", msg, want)
	}
}

// A second run of a job against the checkpoint directory a running job
// holds is refused and touches nothing: the first run's checkpoint in
// progress (data files written, _metadata not yet) is intact, and its output
// is exactly once. After the first run ended, the next one starts.
func TestSecondRunOfARunningJobIsRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	chk := filepath.Join(dir, "chk")
	const n, keys = 30_000, 97
	var open atomic.Bool
	// Checkpoint 2 or later waits before its _metadata write until the
	// second run was tried.
	hold, held := make(chan struct{}), make(chan int64, 1)
	var holdOnce, releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(hold) }) }
	first := startCounter(t, chk, nil, filepath.Join(dir, "out1"), n, func(int64) bool { return !open.Load() },
		weir.JobLockOptions{}, weir.TestHooks{BeforeMetadata: func(id int64) error {
			if id >= 2 {
				holdOnce.Do(func() { held <- id; <-hold })
			}
			return nil
		}}, nil)
	defer func() { open.Store(true); release() }() // let the first run end whatever happens
	var id int64
	select {
	case id = <-held:
	case err := <-first.done:
		t.Fatalf("the first run ended early: %v", err)
	case <-time.After(3 * time.Minute): // a throttled source takes seconds per checkpoint, minutes on a busy machine
		t.Fatal("no checkpoint reached its _metadata write")
	}
	raw, err := storage.OpenLocation(context.Background(), chk)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	inProgress := fmt.Sprintf("counter/%s/", storage.CheckpointDir(id))
	before := objectsUnder(t, raw, inProgress)
	if len(before) == 0 {
		t.Fatalf("checkpoint %d in progress has no files", id)
	}

	second := startCounter(t, chk, nil, filepath.Join(dir, "out2"), 1000, nil, weir.JobLockOptions{}, weir.TestHooks{}, nil)
	wantRefused(t, second.wait(t), filepath.Join(chk, "counter"))
	if after := objectsUnder(t, raw, inProgress); !slices.Equal(before, after) {
		t.Fatalf("the refused run changed checkpoint %d in progress:\nbefore %v\nafter  %v", id, before, after)
	}
	if _, err := os.Stat(filepath.Join(dir, "out2")); err == nil {
		lines, _ := committedLines(t, filepath.Join(dir, "out2"))
		if len(lines) > 0 {
			t.Fatalf("the refused run wrote output")
		}
	}

	release()
	open.Store(true)
	if err := first.wait(t); err != nil {
		t.Fatalf("first run: %v", err)
	}
	checkCounterOutput(t, first.out, n, keys)
	cps, err := storage.OpenBucket(raw).ListCheckpoints(context.Background(), "counter")
	if err != nil || !slices.ContainsFunc(cps, func(e storage.CheckpointEntry) bool { return e.Complete }) {
		t.Fatalf("checkpoints after the first run: %v, %v", cps, err)
	}

	third := startCounter(t, chk, nil, filepath.Join(dir, "out3"), 1000, nil, weir.JobLockOptions{}, weir.TestHooks{}, nil)
	if err := third.wait(t); err != nil {
		t.Fatalf("the run after the first ended: %v", err)
	}
	checkCounterOutput(t, third.out, 1000, keys)
	if _, err := os.Stat(filepath.Join(chk, "counter", storage.LockFileName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("lock file left behind: %v", err)
	}
}

// firstCheckpoint returns a hook that signals the first completed
// checkpoint on the returned channel.
func firstCheckpoint() (func(weir.CompletedCheckpoint), chan struct{}) {
	ch := make(chan struct{})
	var once sync.Once
	return func(weir.CompletedCheckpoint) { once.Do(func() { close(ch) }) }, ch
}

func waitCheckpoint(t *testing.T, r *lockRun, ch chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case err := <-r.done:
		t.Fatalf("the run ended before its first checkpoint: %v", err)
	case <-time.After(3 * time.Minute): // as in TestSecondRunOfARunningJobIsRefused
		t.Fatal("no checkpoint completed")
	}
}

// On an object store (mem://, shared by the runs through the storage hook)
// the lock is a lease: a second run is refused while the first renews it,
// starts once the first released it, takes over the lease of a holder that
// died once it expired, and with Force takes a live one over at once, which
// stops the old holder.
func TestJobLeaseOnObjectStore(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	inner, err := storage.OpenLocation(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	store := storage.OpenBucket(inner)
	defer store.Close()
	short := weir.JobLockOptions{LeaseDuration: 5 * time.Second, RenewInterval: 20 * time.Millisecond}
	const keys = 97

	t.Run("refused-while-held", func(t *testing.T) {
		var open atomic.Bool
		onc, cp := firstCheckpoint()
		first := startCounter(t, "mem://", store, filepath.Join(dir, "a1"), 20_000, func(int64) bool { return !open.Load() }, short, weir.TestHooks{}, onc)
		defer open.Store(true)
		waitCheckpoint(t, first, cp)
		second := startCounter(t, "mem://", store, filepath.Join(dir, "a2"), 1000, nil, short, weir.TestHooks{}, nil)
		wantRefused(t, second.wait(t), "mem://counter")
		open.Store(true)
		if err := first.wait(t); err != nil {
			t.Fatalf("first run: %v", err)
		}
		checkCounterOutput(t, first.out, 20_000, keys)
		// Released: the next run need not wait for the lease to expire.
		third := startCounter(t, "mem://", store, filepath.Join(dir, "a3"), 1000, nil, short, weir.TestHooks{}, nil)
		if err := third.wait(t); err != nil {
			t.Fatalf("the run after the first ended: %v", err)
		}
		checkCounterOutput(t, third.out, 1000, keys)
	})

	t.Run("dead-holder-expires", func(t *testing.T) {
		// A holder that stops renewing, as a killed process does: every
		// write of its lease fails from now on.
		faults := blobtest.New(inner)
		deadStore := storage.OpenBucket(faults)
		const lease = 2 * time.Second
		start := time.Now()
		dead, err := deadStore.LockJob(ctx, "counter", storage.LockOptions{LeaseDuration: lease, RenewInterval: lease / 4})
		if err != nil {
			t.Fatal(err)
		}
		acquired := time.Now()
		faults.Fail(blobtest.OpNewWriter, "counter/_lease-*", nil, 0)
		faults.Fail(blobtest.OpDelete, "counter/_lease-*", nil, 0)
		defer dead.Release(ctx)
		// The lease runs out between start+lease and acquired+lease: a run
		// that ended before the first was refused, one that began after
		// the second is not.
		deadline := time.Now().Add(time.Minute)
		refused := 0
		for attempt := 1; ; attempt++ {
			began := time.Now()
			r := startCounter(t, "mem://", store, filepath.Join(dir, fmt.Sprintf("b%d", attempt)), 1000, nil, short, weir.TestHooks{}, nil)
			err := r.wait(t)
			ended := time.Now()
			if err == nil {
				if ended.Before(start.Add(lease)) {
					t.Fatalf("attempt %d started while the dead holder's lease lasted", attempt)
				}
				checkCounterOutput(t, r.out, 1000, keys)
				t.Logf("started on attempt %d (%d refused), %v after the holder died", attempt, refused, ended.Sub(acquired).Round(time.Millisecond))
				break
			}
			if !errors.Is(err, weir.ErrJobLocked) {
				t.Fatalf("attempt %d: %v", attempt, err)
			}
			refused++
			if began.After(acquired.Add(lease)) {
				t.Fatalf("attempt %d began after the dead holder's lease ran out and was refused: %v", attempt, err)
			}
			if time.Now().After(deadline) {
				t.Fatal("never started")
			}
			time.Sleep(50 * time.Millisecond) // pace the attempts; nothing is asserted on it
		}
		if !errors.Is(dead.Err(), storage.ErrLockLost) {
			t.Fatalf("the dead holder's lock: Err() = %v", dead.Err())
		}
	})

	t.Run("force", func(t *testing.T) {
		var open atomic.Bool
		onc, cp := firstCheckpoint()
		first := startCounter(t, "mem://", store, filepath.Join(dir, "c1"), 20_000, func(int64) bool { return !open.Load() }, short, weir.TestHooks{}, onc)
		defer open.Store(true)
		waitCheckpoint(t, first, cp)
		forced := short
		forced.Force = true
		second := startCounter(t, "mem://", store, filepath.Join(dir, "c2"), 1000, nil, forced, weir.TestHooks{}, nil)
		if err := second.wait(t); err != nil {
			t.Fatalf("forced run: %v", err)
		}
		checkCounterOutput(t, second.out, 1000, keys)
		err := first.wait(t)
		if !errors.Is(err, weir.ErrJobLockLost) || !strings.Contains(err.Error(), "taken over by") {
			t.Fatalf("the first run after the forced takeover: %v, want ErrJobLockLost", err)
		}
	})
}

// The lease keys reach Options.JobLock; a renew interval not shorter than
// the lease is an error; a lease set alone gets a renew interval that fits.
func TestJobLockOptions(t *testing.T) {
	c, err := config.Load(nil, []string{"execution.checkpointing.lock.lease-duration=6s", "execution.checkpointing.lock.renew-interval=2s"})
	if err != nil {
		t.Fatal(err)
	}
	o := weir.OptionsFromConfig(c)
	if o.JobLock.LeaseDuration != 6*time.Second || o.JobLock.RenewInterval != 2*time.Second || o.JobLock.Force {
		t.Fatalf("JobLock %+v", o.JobLock)
	}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	c, _ = config.Load(nil, nil)
	if o := weir.OptionsFromConfig(c); o.JobLock.LeaseDuration != 30*time.Second || o.JobLock.RenewInterval != 10*time.Second {
		t.Fatalf("defaults %+v", o.JobLock)
	}
	c, _ = config.Load(nil, []string{"execution.checkpointing.lock.lease-duration=6s"})
	o = weir.OptionsFromConfig(c)
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "renew interval 10s must be positive and shorter than the lease duration 6s") {
		t.Fatalf("Validate: %v", err)
	}
	o = weir.Options{JobLock: weir.JobLockOptions{LeaseDuration: 3 * time.Second}}
	o.EnsureDefaults()
	if o.JobLock.RenewInterval != time.Second {
		t.Fatalf("renew interval %v for a 3s lease", o.JobLock.RenewInterval)
	}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
}
