package weir_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/internal/checkpoint/metadata"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/runner"
	"github.com/weirstream/weir/sink"
)

// A changelog checkpoint resumes at another parallelism and on the other
// backend: each new subtask restores the materializations of the old
// subtasks whose key groups overlap its own and replays only the log
// records of its key groups.
func TestResumeChangelogRescaled(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		from, to          int
		backend, backend2 string
		incremental       bool
	}{
		{2, 3, weir.BackendHashMap, weir.BackendPebble, false},
		{3, 1, weir.BackendPebble, weir.BackendHashMap, false},
		{2, 4, weir.BackendPebble, weir.BackendPebble, true},
	} {
		t.Run(fmt.Sprintf("p%d-%s-to-p%d-%s-incremental=%v", c.from, c.backend, c.to, c.backend2, c.incremental), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			changelog := func(o *weir.Options) {
				o.Changelog.Enabled = true
				o.Changelog.MaterializeInterval = 15 * time.Millisecond
				o.Checkpoint.Incremental = c.incremental
			}
			if _, err := restoreRun(t, dir, c.from, c.backend, "", 6, changelog); !errors.Is(err, context.Canceled) {
				t.Fatalf("first run: %v, want it canceled after 6 checkpoints", err)
			}
			// The resumed checkpoint must have both parts: a materialization
			// and log records after it.
			store, err := storage.Open(context.Background(), filepath.Join(dir, "chk"))
			if err != nil {
				t.Fatal(err)
			}
			cp, err := store.Latest(context.Background(), "counter", nil)
			store.Close()
			if err != nil {
				t.Fatal(err)
			}
			m, err := metadata.Decode(cp.Payload)
			if err != nil {
				t.Fatal(err)
			}
			if mat, log, recs, ok := m.ChangelogParts(); !ok || mat == 0 || log == 0 || recs == 0 {
				t.Fatalf("latest checkpoint %d: changelog %v, materialized %d bytes, log %d bytes of %d records; want both parts", m.ID, ok, mat, log, recs)
			}
			if _, err := restoreRun(t, dir, c.to, c.backend2, weir.RestoreLatest, 0, changelog); err != nil {
				t.Fatalf("resumed run: %v", err)
			}
			checkCounterOutput(t, filepath.Join(dir, "out"), 150_000, 97)
		})
	}
}

// The changelog metrics of every completed checkpoint: log uploads, the
// materializations, and the two parts' sizes, which add up to what the
// checkpoint references.
func TestChangelogMetrics(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var (
		mu   sync.Mutex
		seen []weir.CompletedCheckpoint
	)
	_, err := restoreRun(t, dir, 2, weir.BackendHashMap, "", 0, func(o *weir.Options) {
		o.Changelog.Enabled = true
		o.Changelog.MaterializeInterval = 20 * time.Millisecond
		o.OnCheckpointComplete = func(c weir.CompletedCheckpoint) {
			mu.Lock()
			seen = append(seen, c)
			mu.Unlock()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) < 3 {
		t.Fatalf("%d checkpoints completed, want at least 3", len(seen))
	}
	var withMat bool
	for i, c := range seen {
		m := c.Changelog
		if m.LastIncSizeMaterialized > m.LastFullSizeMaterialized || m.LastIncSizeNonMaterialized > m.LastFullSizeNonMaterialized {
			t.Errorf("checkpoint %d: incremental sizes above full ones: %+v", c.ID, m)
		}
		// Inline operator state (the source's splits) is the rest.
		if parts := m.LastFullSizeMaterialized + m.LastFullSizeNonMaterialized; parts > c.FullBytes || parts < c.FullBytes-1024 {
			t.Errorf("checkpoint %d: parts %d bytes, full size %d", c.ID, parts, c.FullBytes)
		}
		if i > 0 && m.Uploads < seen[i-1].Changelog.Uploads {
			t.Errorf("checkpoint %d: upload count went down: %d after %d", c.ID, m.Uploads, seen[i-1].Changelog.Uploads)
		}
		if m.CompletedMaterializations > m.StartedMaterializations {
			t.Errorf("checkpoint %d: %d materializations completed of %d started", c.ID, m.CompletedMaterializations, m.StartedMaterializations)
		}
		if m.LastFullSizeMaterialized > 0 {
			withMat = true
			if m.CompletedMaterializations == 0 || m.LastMaterializationDuration <= 0 {
				t.Errorf("checkpoint %d builds on a materialization but the metrics show none: %+v", c.ID, m)
			}
		}
	}
	last := seen[len(seen)-1].Changelog
	if !withMat || last.Uploads == 0 || last.UploadedBytes == 0 || last.UploadLatencyMean <= 0 || last.UploadLatencyMax < last.UploadLatencyMean ||
		last.LastFullSizeNonMaterialized == 0 && last.LastFullSizeMaterialized == 0 {
		t.Errorf("last checkpoint's changelog metrics: %+v (a materialization seen: %v)", last, withMat)
	}
}

// A subtask that fails while one of its checkpoints waits for the first
// materialization after a restore (still uploading) does not hang the job:
// the waiting asynchronous phase learns the materialization's outcome from
// the upload itself, not from the failed task's mailbox. The job restarts
// and its output stays exactly once.
func TestChangelogFailureWhileFirstMaterializationUploads(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const n, keys = 60_000, 97
	out := filepath.Join(dir, "out")
	var failSubtask atomic.Int32
	var fired atomic.Bool // the injected failure happened
	run := func(changelog bool, restore string, stopAfter int64, h weir.TestHooks, fail *atomic.Bool) (runner.Result, error) {
		opts := weir.Options{Parallelism: 2, StateDir: filepath.Join(dir, "state"), Logger: quietLogger(t),
			Checkpoint: weir.CheckpointOptions{Interval: 10 * time.Millisecond, Dir: filepath.Join(dir, "chk"), RestorePath: restore},
			Changelog:  weir.ChangelogOptions{Enabled: changelog, MaterializeInterval: time.Hour},
			Restart:    weir.RestartOptions{Type: "fixed-delay", FixedDelayAttempts: 3, FixedDelay: 10 * time.Millisecond}}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		var done atomic.Int64
		completed := h.Completed
		h.Completed = func(id int64, cp *metadata.Checkpoint) {
			if completed != nil {
				completed(id, cp)
			}
			if stopAfter > 0 && done.Add(1) == stopAfter {
				cancel()
			}
		}
		env := weir.NewEnvironment(opts)
		weir.SetTestHooks(env, h)
		counterJobWith(env, n, keys, sink.Files(out, func(s string) string { return s }), counterHooks{
			// Records stay slow until the injected failure fired: a
			// loaded machine otherwise ended the input before the
			// materialization armed it (seen in CI).
			throttle: func(int64) bool { return fail != nil && !fired.Load() },
			fail: func(subtask int, _ int64) bool {
				if fail != nil && failSubtask.Load() == int32(subtask) && fail.CompareAndSwap(true, false) {
					fired.Store(true)
					return true
				}
				return false
			}})
		res, err := env.ExecuteResult(ctx, "counter")
		if ctx.Err() == context.DeadlineExceeded {
			t.Fatalf("the job did not end within 60 s (hung?)")
		}
		return res, err
	}
	// A checkpoint without the changelog: the resumed run cannot build on
	// it and materializes at once.
	if _, err := run(false, "", 3, weir.TestHooks{}, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("first run: %v, want it canceled after 3 checkpoints", err)
	}
	var (
		fail    atomic.Bool
		held    atomic.Int32
		waiting sync.Map // subtask of the count vertex (1) -> an asynchronous phase started
	)
	h := weir.TestHooks{
		Upload: func(vertex, subtask int, id int64) error {
			if vertex == 1 {
				waiting.Store(subtask, true)
			}
			return nil
		},
		Materialize: func(uid string, subtask int, id int64) error {
			if uid != "count" || held.Add(1) > 1 {
				return nil
			}
			// Wait until this subtask's asynchronous phase of a checkpoint
			// started (it now waits for this materialization), make this
			// subtask's count function fail, and keep uploading a while.
			for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
				if _, ok := waiting.Load(subtask); ok {
					break
				}
			}
			failSubtask.Store(int32(subtask))
			fail.Store(true)
			time.Sleep(time.Second)
			return nil
		},
	}
	res, err := run(true, weir.RestoreLatest, 0, h, &fail)
	if err != nil {
		t.Fatalf("resumed run: %v", err)
	}
	if res.Restarts < 1 || fail.Load() {
		t.Errorf("%d restarts (failure pending: %v), want the injected failure to restart the job", res.Restarts, fail.Load())
	}
	checkCounterOutput(t, out, n, keys)
}
