package weir_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/source"
)

// Scenarios a review of the savepoint engine found broken: each runs the
// counter into memSink, a two-phase-commit sink that counts how often every
// record is committed.

// memSink is a two-phase-commit sink whose transactions live in memory; it
// counts the commits of every record and can fail its writers' Close.
type memSink struct {
	mu        sync.Mutex
	seq       int
	open      map[int][]string
	txns      map[string][]string
	done      map[string]bool
	committed map[string]int
	closeFail atomic.Int32 // >0: Close fails and decrements
	closes    atomic.Int32
}

func newMemSink() *memSink {
	return &memSink{open: map[int][]string{}, txns: map[string][]string{}, done: map[string]bool{}, committed: map[string]int{}}
}

// CreateWriter starts a new transaction for the subtask: what an earlier
// attempt's writer left open is aborted, as a real sink's is.
func (m *memSink) CreateWriter(c weir.SinkContext) (weir.SinkWriter[string], error) {
	m.mu.Lock()
	delete(m.open, c.Subtask)
	m.mu.Unlock()
	return &memW{m: m, sub: c.Subtask}, nil
}

func (m *memSink) Commit(_ weir.SinkContext, txn []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.done[string(txn)] {
		return nil
	}
	m.done[string(txn)] = true
	for _, r := range m.txns[string(txn)] {
		m.committed[r]++
	}
	return nil
}

type memW struct {
	m   *memSink
	sub int
}

func (w *memW) Write(v string) error {
	w.m.mu.Lock()
	defer w.m.mu.Unlock()
	w.m.open[w.sub] = append(w.m.open[w.sub], v)
	return nil
}
func (w *memW) Flush() error { return nil }
func (w *memW) Close() error {
	w.m.closes.Add(1)
	if w.m.closeFail.Add(-1) >= 0 {
		return errors.New("injected close failure after the stop")
	}
	return nil
}
func (w *memW) PreCommit(id int64) ([]byte, error) {
	m := w.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.open[w.sub]) == 0 {
		return nil, nil
	}
	name := fmt.Sprintf("t%d", m.seq)
	m.seq++
	m.txns[name] = m.open[w.sub]
	m.open[w.sub] = nil
	return []byte(name), nil
}

func (m *memSink) stats() (distinct, dups int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range m.committed {
		distinct++
		if c > 1 {
			dups += c - 1
		}
	}
	return
}

func reviewJob(env *weir.Environment, n, keys int64, sk *memSink, reached *atomic.Bool, from int64) {
	nums := weir.FromSource(env, source.Sequence(0, n-1)).UID("numbers")
	slow := weir.Map(nums, func(i int64) int64 {
		if i >= from {
			reached.Store(true)
			time.Sleep(200 * time.Microsecond)
		}
		return i
	}).UID("slow")
	counts := weir.KeyedProcess(weir.KeyBy(slow, func(i int64) int64 { return i % keys }),
		func() weir.KeyedProcessFunction[int64, int64, string] {
			var count *weir.ValueState[int64]
			return weir.KeyedProcessFunc[int64, int64, string](func(ctx *weir.KeyedContext[int64, string], i int64) error {
				if count == nil {
					var err error
					if count, err = weir.GetValueState(ctx, weir.ValueStateDescriptor[int64]{Name: "count"}); err != nil {
						return err
					}
				}
				c, _ := count.Value()
				c++
				count.Update(c)
				ctx.Emit(strconv.FormatInt(ctx.CurrentKey(), 10) + "," + strconv.FormatInt(c, 10))
				return nil
			})
		}).UID("count")
	weir.SinkTo[string](counts, sk).UID("sink")
}

func waitReached(t *testing.T, reached *atomic.Bool, done chan error) {
	deadline := time.Now().Add(time.Minute)
	for !reached.Load() {
		if time.Now().After(deadline) {
			t.Fatal("never reached")
		}
		select {
		case err := <-done:
			t.Fatalf("ended early: %v", err)
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// startReview runs the review job in env until record from went through
// (its context ends with the test) and returns the run's context and the
// channel Execute's outcome arrives on.
func startReview(t *testing.T, env *weir.Environment, n, keys int64, sk *memSink, from int64) (context.Context, chan error) {
	t.Helper()
	var reached atomic.Bool
	reviewJob(env, n, keys, sk, &reached, from)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	done := make(chan error, 1)
	go func() { done <- env.Execute(ctx, "review") }()
	waitReached(t, &reached, done)
	return ctx, done
}

// A failure after a stop-with-savepoint completed (the sinks committed
// it) does not restart from an older checkpoint, which would commit
// records twice: the job fails, naming the savepoint to restore from.
func TestStopFailureAfterSavepointCompleted(t *testing.T) {
	t.Parallel()
	const n, keys = 20000, 50
	dir := t.TempDir()
	sk := newMemSink()
	sk.closeFail.Store(1)
	opts := weir.Options{Parallelism: 1, StateDir: filepath.Join(dir, "state"), Logger: quietLogger(t),
		Checkpoint: weir.CheckpointOptions{Interval: time.Hour, Dir: filepath.Join(dir, "chk"), SavepointDir: filepath.Join(dir, "sp")},
		Restart:    weir.RestartOptions{Type: "fixed-delay", FixedDelayAttempts: 3, FixedDelay: 10 * time.Millisecond}}
	env := weir.NewEnvironment(opts)
	ctx, done := startReview(t, env, n, keys, sk, n/3)
	if _, err := env.TriggerCheckpoint(ctx); err != nil {
		t.Fatal(err)
	}
	path, err := env.StopWithSavepoint(ctx, weir.SavepointOptions{})
	if err == nil || !strings.Contains(err.Error(), "failed while it stopped") || path == "" {
		t.Fatalf("stop whose job failed after the savepoint: path %q, err %v; want the path and an error saying so", path, err)
	}
	if err := <-done; err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("Execute: %v; want an error naming the savepoint %s", err, path)
	}
	if _, dups := sk.stats(); dups > 0 {
		t.Fatalf("%d records committed twice after a failure following a completed stop-with-savepoint", dups)
	}
	if _, err := os.Stat(filepath.Join(path, "_metadata")); err != nil {
		t.Fatal(err)
	}
}

// Stop with drain: the job finishes cleanly, nothing is committed twice.
func TestStopDrainCommitsOnce(t *testing.T) {
	t.Parallel()
	const n, keys = 20000, 50
	dir := t.TempDir()
	sk := newMemSink()
	opts := weir.Options{Parallelism: 2, StateDir: filepath.Join(dir, "state"), Logger: quietLogger(t),
		Checkpoint: weir.CheckpointOptions{Interval: 50 * time.Millisecond, Dir: filepath.Join(dir, "chk"), SavepointDir: filepath.Join(dir, "sp")}}
	env := weir.NewEnvironment(opts)
	ctx, done := startReview(t, env, n, keys, sk, n/3)
	if _, err := env.StopWithSavepoint(ctx, weir.SavepointOptions{Drain: true}); err != nil {
		t.Fatalf("stop --drain: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Execute after stop --drain: %v", err)
	}
	if distinct, dups := sk.stats(); dups > 0 || distinct == 0 {
		t.Fatalf("after stop --drain: %d records committed, %d twice", distinct, dups)
	}
}

// A stop-with-savepoint declined at the source while another subtask is
// still uploading: the job goes on and commits everything once, and no
// file of the savepoint is left in the job's checkpoint directory or in a
// half-written savepoint directory.
func TestStopAbortedLeavesNoFiles(t *testing.T) {
	t.Parallel()
	const n, keys = 8000, 50
	dir := t.TempDir()
	sk := newMemSink()
	opts := weir.Options{Parallelism: 1, StateDir: filepath.Join(dir, "state"), Logger: quietLogger(t),
		Checkpoint: weir.CheckpointOptions{Interval: time.Hour, Dir: filepath.Join(dir, "chk"), SavepointDir: filepath.Join(dir, "sp")}}
	env := weir.NewEnvironment(opts)
	var stopping atomic.Bool
	var spID atomic.Int64
	release := make(chan struct{})
	weir.SetTestHooks(env, weir.TestHooks{Upload: func(vertex, subtask int, id int64) error {
		if !stopping.Load() {
			return nil
		}
		spID.CompareAndSwap(0, id)
		if id != spID.Load() {
			return nil
		}
		if vertex == 0 {
			return errors.New("injected decline of the stop savepoint at the source")
		}
		<-release // upload after the abort
		return nil
	}})
	ctx, done := startReview(t, env, n, keys, sk, n/4)
	stopping.Store(true)
	if path, err := env.StopWithSavepoint(ctx, weir.SavepointOptions{}); err == nil {
		t.Fatalf("the stop succeeded (%s) although its source declined", path)
	}
	close(release)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Execute after an aborted stop: %v", err)
		}
	case <-time.After(90 * time.Second):
		t.Fatal("the job did not finish after the aborted stop")
	}
	if distinct, dups := sk.stats(); int64(distinct) != n || dups > 0 {
		t.Fatalf("after an aborted stop: %d of %d records committed, %d twice", distinct, n, dups)
	}
	if _, err := os.Stat(filepath.Join(dir, "chk", "review", fmt.Sprintf("chk-%d", spID.Load()))); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the aborted savepoint %d left chk-%d in the job directory: %v", spID.Load(), spID.Load(), err)
	}
	if es, _ := os.ReadDir(filepath.Join(dir, "sp")); len(es) != 0 {
		t.Fatalf("the aborted savepoint left %d entries in the savepoint directory", len(es))
	}
}

// A stop with drain whose savepoint fails: the sources had ended, so the
// job restarts from its latest checkpoint instead of finishing with the
// drained state, and commits every record once.
func TestStopDrainAbortedRestarts(t *testing.T) {
	t.Parallel()
	const n, keys = 8000, 50
	dir := t.TempDir()
	sk := newMemSink()
	opts := weir.Options{Parallelism: 1, StateDir: filepath.Join(dir, "state"), Logger: quietLogger(t),
		Checkpoint: weir.CheckpointOptions{Interval: time.Hour, Dir: filepath.Join(dir, "chk"), SavepointDir: filepath.Join(dir, "sp")},
		Restart:    weir.RestartOptions{Type: "fixed-delay", FixedDelayAttempts: 3, FixedDelay: 10 * time.Millisecond}}
	env := weir.NewEnvironment(opts)
	var stopping atomic.Bool
	var spID atomic.Int64
	weir.SetTestHooks(env, weir.TestHooks{Upload: func(vertex, subtask int, id int64) error {
		if stopping.Load() && vertex == 0 && spID.CompareAndSwap(0, id) {
			return errors.New("injected decline of the drain savepoint")
		}
		return nil
	}})
	ctx, done := startReview(t, env, n, keys, sk, n/4)
	stopping.Store(true)
	if path, err := env.StopWithSavepoint(ctx, weir.SavepointOptions{Drain: true}); err == nil {
		t.Fatalf("the drain succeeded (%s) although its source declined", path)
	}
	if err := <-done; err != nil {
		t.Fatalf("Execute after a failed drain: %v", err)
	}
	if distinct, dups := sk.stats(); int64(distinct) != n || dups > 0 {
		t.Fatalf("after a failed drain: %d of %d records committed, %d twice", distinct, n, dups)
	}
}

// A checkpoint restored in NO_CLAIM mode from the job's own directory
// stays in later runs too, resumed with latest.
func TestNoClaimPinOutlivesTheRun(t *testing.T) {
	t.Parallel()
	const n, keys = 6000, 50
	dir := t.TempDir()
	chk := filepath.Join(dir, "chk")
	base := weir.Options{Parallelism: 1, StateDir: filepath.Join(dir, "state"), Logger: quietLogger(t),
		Checkpoint: weir.CheckpointOptions{Interval: time.Hour, Dir: chk}}
	runFor := func(opts weir.Options, cancelAfterCheckpoint bool) {
		t.Helper()
		env := weir.NewEnvironment(opts)
		var reached atomic.Bool
		reviewJob(env, n, keys, newMemSink(), &reached, 0)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- env.Execute(ctx, "review") }()
		if cancelAfterCheckpoint {
			waitReached(t, &reached, done)
			if _, err := env.TriggerCheckpoint(ctx); err != nil {
				t.Fatal(err)
			}
			cancel()
		}
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Fatal(err)
		}
	}
	runFor(base, true)
	b := base
	b.Checkpoint.RestorePath = filepath.Join(chk, "review", "chk-1")
	runFor(b, true)
	c := base
	c.Checkpoint.RestorePath = weir.RestoreLatest
	runFor(c, false)
	if _, err := os.Stat(filepath.Join(chk, "review", "chk-1", "_metadata")); err != nil {
		t.Fatalf("the NO_CLAIM snapshot chk-1 was deleted by a later run: %v", err)
	}
}

// A CLAIM restore that fails before its first checkpoint (a state
// mismatch) with retention NO_EXTERNALIZED_CHECKPOINTS keeps the claimed
// savepoint: it is all there is of the job's state.
func TestClaimedSavepointSurvivesAFailedRestore(t *testing.T) {
	t.Parallel()
	const n, keys = 6000, 50
	dir := t.TempDir()
	sk := newMemSink()
	opts := weir.Options{Parallelism: 1, StateDir: filepath.Join(dir, "state"), Logger: quietLogger(t),
		Checkpoint: weir.CheckpointOptions{Interval: time.Hour, Dir: filepath.Join(dir, "chk"), SavepointDir: filepath.Join(dir, "sp")}}
	env := weir.NewEnvironment(opts)
	ctx, done := startReview(t, env, n, keys, sk, n/4)
	path, err := env.StopWithSavepoint(ctx, weir.SavepointOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	o2 := opts
	o2.Checkpoint.RestorePath = path
	o2.Checkpoint.ClaimMode = weir.ClaimModeClaim
	o2.Checkpoint.Retention = "NO_EXTERNALIZED_CHECKPOINTS"
	env2 := weir.NewEnvironment(o2)
	nums := weir.FromSource(env2, source.Sequence(0, n-1)).UID("numbers")
	weir.SinkTo[string](weir.Map(nums, func(i int64) string { return strconv.FormatInt(i, 10) }), newMemSink()).UID("sink")
	if err := env2.Execute(ctx, "review"); !errors.Is(err, weir.ErrStateMismatch) {
		t.Fatalf("restore into a job without uid count: %v; want a state mismatch", err)
	}
	if _, err := os.Stat(filepath.Join(path, "_metadata")); err != nil {
		t.Fatalf("the claimed savepoint is gone after a failed restore: %v", err)
	}
}
