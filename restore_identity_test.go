package weir_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/internal/checkpoint/metadata"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/sink"
)

// verifyRun runs the counter job like restoreRun, but with a deadline
// (a restore that loops is a failure, not a hang), logs captured, and the
// checkpoint directory as given (a path or a file:// URL). It returns the
// ids of the checkpoints the run completed; onCompleted, if set, sees
// their metadata.
func verifyRun(t *testing.T, dir, chkDir, backend, restore string, stopAfter int, extra func(*weir.Options), onCompleted ...func(*metadata.Checkpoint)) ([]int64, *lockedBuffer, error) {
	t.Helper()
	logs := &lockedBuffer{}
	opts := weir.Options{Parallelism: 2, StateBackend: backend, StateDir: filepath.Join(dir, "state"), Logger: newTextLogger(logs),
		Checkpoint: weir.CheckpointOptions{Interval: 10 * time.Millisecond, Dir: chkDir, RestorePath: restore}}
	if extra != nil {
		extra(&opts)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var (
		mu        sync.Mutex
		completed []int64
		stopped   atomic.Bool
	)
	testHooks := (weir.TestHooks{Completed: func(id int64, cp *metadata.Checkpoint) {
		mu.Lock()
		defer mu.Unlock()
		for _, f := range onCompleted {
			f(cp)
		}
		completed = append(completed, id)
		if stopAfter > 0 && len(completed) == stopAfter {
			stopped.Store(true)
			cancel()
		}
	}})
	env := weir.NewEnvironment(opts)
	weir.SetTestHooks(env, testHooks)
	// As in restoreRun: a run to be canceled after stopAfter checkpoints
	// must not end its input first (as it could on a loaded machine, or
	// beside the package's other parallel tests): past half of the input
	// it goes at 1ms per record until then.
	var h counterHooks
	if stopAfter > 0 {
		var seen atomic.Int64
		h.throttle = func(int64) bool { return seen.Add(1) > 75_000 && !stopped.Load() }
	}
	counterJobWith(env, 150_000, 97, sink.Files(filepath.Join(dir, "out"), func(s string) string { return s }), h)
	err := env.Execute(ctx, "counter")
	if errors.Is(err, context.DeadlineExceeded) {
		lines := strings.SplitAfter(logs.String(), "\n")
		t.Fatalf("the run did not end within a minute (a restore retried forever?); the first log lines:\n%s", strings.Join(lines[:min(len(lines), 12)], ""))
	}
	mu.Lock()
	defer mu.Unlock()
	return slices.Clone(completed), logs, err
}

// completeCheckpoints returns the ids of jobDir's checkpoints that have a
// _metadata, in increasing order.
func completeCheckpoints(t *testing.T, jobDir string) []int64 {
	t.Helper()
	metas, err := filepath.Glob(filepath.Join(jobDir, "chk-*", storage.MetadataName))
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for _, m := range metas {
		id, err := strconv.ParseInt(strings.TrimPrefix(filepath.Base(filepath.Dir(m)), "chk-"), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// A checkpoint directory given as a file:// URL and a restore path given as
// a plain path (or the other way round) name the same storage: the
// restored checkpoint, claimed, is the job's own, so the resumed run builds on its
// changelog instead of uploading the state again, and subsumes it like its
// own checkpoints. It used to be taken for another job's: kept forever,
// and the state materialized and uploaded anew.
func TestRestoreOwnCheckpointAcrossPathAndFileURL(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		urlDir  bool // execution.checkpointing.dir as a file:// URL
		urlFrom bool // the restore path as a file:// URL
	}{
		{"url-dir-path-from", true, false},
		{"path-dir-url-from", false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			abs := filepath.Join(dir, "chk")
			jobDir := filepath.Join(abs, "counter")
			fileURL := func(p string) string { return "file://" + filepath.ToSlash(p) }
			chkDir := abs
			if c.urlDir {
				chkDir = fileURL(abs)
			}
			changelog := func(o *weir.Options) {
				o.Changelog = weir.ChangelogOptions{Enabled: true, MaterializeInterval: time.Hour}
			}
			if _, logs, err := verifyRun(t, dir, chkDir, weir.BackendHashMap, "", 2, changelog); !errors.Is(err, context.Canceled) {
				t.Fatalf("first run: %v\n%s", err, logs)
			}
			ids := completeCheckpoints(t, jobDir)
			if len(ids) != 1 {
				t.Fatalf("checkpoints %v, want 1 retained", ids)
			}
			restored := readCheckpoint(t, jobDir, ids[0])
			from := filepath.Join(jobDir, storage.CheckpointDir(ids[0]))
			if c.urlFrom {
				from = fileURL(from)
			}
			var first *metadata.Checkpoint // the resumed run's first checkpoint
			// Claimed: an explicitly named checkpoint is the job's own only in
			// CLAIM mode (NO_CLAIM, the default, pins it and shares nothing).
			claimed := func(o *weir.Options) {
				changelog(o)
				o.Checkpoint.ClaimMode = weir.ClaimModeClaim
			}
			done, logs, err := verifyRun(t, dir, chkDir, weir.BackendHashMap, from, 0, claimed, func(cp *metadata.Checkpoint) {
				if first == nil {
					first = cp
				}
			})
			if err != nil {
				t.Fatalf("resumed run: %v\n%s", err, logs)
			}
			if len(done) == 0 {
				t.Fatal("the resumed run completed no checkpoint")
			}
			checkCounterOutput(t, filepath.Join(dir, "out"), 150_000, 97)
			// Every subtask's log goes on from the restored one: the first
			// checkpoint references the restored segments.
			segments := func(cp *metadata.Checkpoint) map[string]bool {
				m := map[string]bool{}
				for _, op := range cp.Operators {
					for _, st := range op.Subtasks {
						if st.Changelog != nil {
							for _, g := range st.Changelog.AllSegments() {
								m[g.File.Path] = true
							}
						}
					}
				}
				return m
			}
			old, now := segments(restored), segments(first)
			if len(old) == 0 {
				t.Fatalf("the restored checkpoint %d has no changelog segment", restored.ID)
			}
			for p := range old {
				if !now[p] {
					t.Errorf("the first checkpoint after the restore (%d) does not build on the restored segment %s: the restored checkpoint was not treated as the job's own", first.ID, p)
				}
			}
			// Subsumed like the run's own checkpoints (num-retained 1).
			if left := completeCheckpoints(t, jobDir); slices.Contains(left, ids[0]) {
				t.Errorf("checkpoint %d is still there after the resumed run (left: %v): it was not treated as the job's own", ids[0], left)
			}
		})
	}
}

func readCheckpoint(t *testing.T, jobDir string, id int64) *metadata.Checkpoint {
	t.Helper()
	s, err := storage.Open(context.Background(), filepath.Dir(jobDir))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	payload, err := s.ReadMetadata(context.Background(), filepath.Base(jobDir), id)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := metadata.Decode(payload)
	if err != nil {
		t.Fatal(err)
	}
	return cp
}
