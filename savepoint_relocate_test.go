package weir_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/sink"
)

// A savepoint is self-contained. A canonical savepoint of the counter job
// (pebble), moved with os.Rename to another root, restores from there; the
// run takes a native savepoint, which is moved to a third root and also
// copied to a fourth one; the copy restores from a file:// URL (into a
// copy of the output as it was at the savepoint) and the moved one from
// its plain path. Both outputs are exactly once. The original locations
// are gone: restoring from one is refused, so nothing read them.
func TestSavepointRelocated(t *testing.T) {
	t.Parallel()
	const n, keys = 30_000, 200
	dir := t.TempDir()
	opts := weir.Options{Parallelism: 2, StateBackend: weir.BackendPebble, StateDir: filepath.Join(dir, "state"), Logger: quietLogger(t),
		Checkpoint: weir.CheckpointOptions{Interval: time.Hour, Dir: filepath.Join(dir, "chk"), SavepointDir: filepath.Join(dir, "savepoints")}}
	run := savepointRun{opts: opts, n: n, keys: keys, out: filepath.Join(dir, "out")}

	move := func(sp string) string {
		t.Helper()
		to := filepath.Join(t.TempDir(), "moved", filepath.Base(sp))
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(sp, to); err != nil {
			t.Fatal(err)
		}
		if exists(t, sp) {
			t.Fatalf("%s is still there after the move", sp)
		}
		return to
	}

	// takeSavepoint runs the counter job (slowly) from restore until it
	// processed a record, and takes the savepoint o: a stop-with-savepoint,
	// or a savepoint and a cancel.
	takeSavepoint := func(restore string, o weir.SavepointOptions, stop bool) string {
		t.Helper()
		var flowing atomic.Bool
		opts := run.opts
		opts.Checkpoint.RestorePath = restore
		j := startJob(t, opts, "counter", func(env *weir.Environment) {
			counterJobWith(env, n, keys, sink.Files(run.out, func(s string) string { return s }), counterHooks{throttle: func(i int64) bool {
				flowing.Store(true)
				return throttled(i)
			}})
		})
		j.await("the first record", flowing.Load)
		sp := j.savepoint(o, stop)
		if !stop {
			j.stop()
		}
		return sp
	}

	// A canonical savepoint, then a cancel.
	sp1 := takeSavepoint("", weir.SavepointOptions{}, false)
	if cp := readSavepoint(t, sp1); cp.Format != weir.SavepointCanonical || len(cp.Files()) == 0 {
		t.Fatalf("savepoint format %q with %d files, want a canonical one with files", cp.Format, len(cp.Files()))
	}
	moved1 := move(sp1)
	if err := run.finish(t, sp1); !errors.Is(err, weir.ErrNoCheckpoint) {
		t.Fatalf("restore from the savepoint's old location: %v, want ErrNoCheckpoint", err)
	}

	// Resume from where it went, and stop with a native savepoint.
	sp2 := takeSavepoint(moved1, weir.SavepointOptions{Format: weir.SavepointNative}, true)
	cp := readSavepoint(t, sp2)
	if cp.Format != weir.SavepointNative || len(cp.Files()) == 0 {
		t.Fatalf("savepoint format %q with %d files, want a native one with files", cp.Format, len(cp.Files()))
	}
	for _, f := range cp.Files() {
		if filepath.IsAbs(f.Path) || strings.Contains(f.Path, "..") {
			t.Fatalf("savepoint file handle %q is not inside the savepoint directory", f.Path)
		}
	}
	moved2 := move(sp2)
	copied := filepath.Join(t.TempDir(), "copies", "copy-of-"+filepath.Base(sp2))
	copyDir(t, moved2, copied)
	outCopy := filepath.Join(dir, "out-copy")
	copyDir(t, run.out, outCopy)

	// The copy, by a file:// URL, into the copy of the output.
	fromCopy := run
	fromCopy.out = outCopy
	if err := fromCopy.finish(t, fileURL(copied)); err != nil {
		t.Fatalf("restore from the copied savepoint %s: %v", fileURL(copied), err)
	}
	checkCounterOutput(t, outCopy, n, keys)

	// The moved one, by its path.
	if err := run.finish(t, sp2); !errors.Is(err, weir.ErrNoCheckpoint) {
		t.Fatalf("restore from the savepoint's old location: %v, want ErrNoCheckpoint", err)
	}
	if err := run.finish(t, moved2); err != nil {
		t.Fatalf("restore from the moved savepoint %s: %v", moved2, err)
	}
	checkCounterOutput(t, run.out, n, keys)
	if exists(t, sp1) || exists(t, sp2) {
		t.Fatal("a moved savepoint is back at its old location")
	}
}
