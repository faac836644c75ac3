package weir_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/internal/checkpoint/metadata"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/sink"
)

// savepointRun runs the counter job with opts until a third of the next
// records flowed, then takes a savepoint with sp (stop: stop-with-savepoint,
// else a savepoint and then a cancel) and returns its location.
type savepointRun struct {
	opts weir.Options
	n    int64
	keys int64
	out  string
}

// runUntilSavepoint runs the counter job until progress says it is far
// enough, takes the savepoint sp, and returns where it is. With stop the
// job is stopped with it and must end cleanly; otherwise it is canceled
// afterwards.
func (r savepointRun) runUntilSavepoint(t *testing.T, from int64, sp weir.SavepointOptions, stop bool) string {
	t.Helper()
	var reached atomic.Bool
	env := weir.NewEnvironment(r.opts)
	counterJobWith(env, r.n, r.keys, sink.Files(r.out, func(s string) string { return s }), counterHooks{
		throttle: func(i int64) bool {
			if i >= from {
				reached.Store(true)
				return true
			}
			return false
		}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- env.Execute(ctx, "counter") }()
	deadline := time.Now().Add(time.Minute)
	for !reached.Load() {
		if time.Now().After(deadline) {
			t.Fatalf("the job never reached record %d", from)
		}
		select {
		case err := <-done:
			t.Fatalf("the job ended before record %d: %v", from, err)
		case <-time.After(5 * time.Millisecond):
		}
	}
	var (
		path string
		err  error
	)
	if stop {
		path, err = env.StopWithSavepoint(ctx, sp)
	} else {
		path, err = env.TriggerSavepoint(ctx, sp)
		cancel()
	}
	if err != nil {
		t.Fatalf("savepoint: %v", err)
	}
	err = <-done
	if stop && err != nil {
		t.Fatalf("the job stopped with a savepoint returned %v, want nil", err)
	}
	if !stop && err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("run: %v", err)
	}
	return path
}

// finish runs the counter job from the snapshot at path to its end.
func (r savepointRun) finish(t *testing.T, path string) error {
	t.Helper()
	opts := r.opts
	opts.Checkpoint.RestorePath = path
	env := weir.NewEnvironment(opts)
	counterJobWith(env, r.n, r.keys, sink.Files(r.out, func(s string) string { return s }), counterHooks{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return env.Execute(ctx, "counter")
}

func readSavepoint(t *testing.T, path string) *metadata.Checkpoint {
	t.Helper()
	s, snap, err := storage.ResolveSnapshot(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !snap.Savepoint {
		t.Fatalf("%s is not a savepoint", path)
	}
	cp, err := metadata.Decode(snap.Payload)
	if err != nil {
		t.Fatal(err)
	}
	return cp
}

// A canonical savepoint of the counter job on the hashmap backend restores
// on pebble, a canonical savepoint taken there restores on the hashmap
// backend again, and the committed output is exactly once; a native
// pebble savepoint cannot be restored on the hashmap backend and the error
// says to take a canonical one.
func TestSavepointBackendSwitch(t *testing.T) {
	t.Parallel()
	const n, keys = 30_000, 200
	dir := t.TempDir()
	spDir := filepath.Join(dir, "savepoints")
	base := weir.Options{Parallelism: 2, StateDir: filepath.Join(dir, "state"), Logger: quietLogger(t),
		Checkpoint: weir.CheckpointOptions{Interval: time.Hour, Dir: filepath.Join(dir, "chk"), SavepointDir: spDir}}
	run := savepointRun{opts: base, n: n, keys: keys, out: filepath.Join(dir, "out")}

	run.opts.StateBackend = weir.BackendHashMap
	sp1 := run.runUntilSavepoint(t, n/4, weir.SavepointOptions{}, true)
	if !strings.HasPrefix(filepath.Base(sp1), "savepoint-") || filepath.Dir(sp1) != spDir {
		t.Fatalf("savepoint at %s, want %s/savepoint-...", sp1, spDir)
	}
	if cp := readSavepoint(t, sp1); cp.Format != "canonical" {
		t.Fatalf("savepoint format %q, want canonical", cp.Format)
	}

	run.opts.StateBackend = weir.BackendPebble
	run.opts.Checkpoint.RestorePath = sp1
	sp2 := run.runUntilSavepoint(t, n/2, weir.SavepointOptions{}, true)

	// A native savepoint of the pebble backend: refused by the hashmap
	// backend, with the remedy.
	run.opts.Checkpoint.RestorePath = sp2
	sp3 := run.runUntilSavepoint(t, 3*n/4, weir.SavepointOptions{Format: weir.SavepointNative}, true)
	if cp := readSavepoint(t, sp3); cp.Format != "native" {
		t.Fatalf("savepoint format %q, want native", cp.Format)
	}
	run.opts.StateBackend = weir.BackendHashMap
	err := run.finish(t, sp3)
	if !errors.Is(err, weir.ErrStateMismatch) || !strings.Contains(err.Error(), "canonical savepoint") {
		t.Fatalf("restoring a native pebble savepoint on the hashmap backend: %v; want a state mismatch that says to use a canonical savepoint", err)
	}
	run.opts.StateBackend = weir.BackendPebble
	if err := run.finish(t, sp3); err != nil {
		t.Fatalf("resume from the native savepoint on pebble: %v", err)
	}
	checkCounterOutput(t, run.out, n, keys)
	// Savepoints are the user's: every one is still there.
	for _, sp := range []string{sp1, sp2, sp3} {
		if _, err := os.Stat(filepath.Join(sp, "_metadata")); err != nil {
			t.Errorf("savepoint %s: %v", sp, err)
		}
	}
}
