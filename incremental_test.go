package weir_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/internal/checkpoint/metadata"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/sink"
)

// sharedState lists shared/ and the files the complete checkpoints of the
// job reference.
func sharedState(t *testing.T, s *storage.Storage) (present, referenced map[string]bool) {
	t.Helper()
	ctx := context.Background()
	objs, err := s.ListShared(ctx, "counter")
	if err != nil {
		t.Fatal(err)
	}
	present, referenced = map[string]bool{}, map[string]bool{}
	for _, o := range objs {
		present[o.Key] = true
	}
	entries, err := s.ListCheckpoints(ctx, "counter")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !e.Complete {
			continue
		}
		payload, err := s.ReadMetadata(ctx, "counter", e.ID)
		if err != nil {
			t.Fatal(err)
		}
		cp, err := metadata.Decode(payload)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range cp.SharedFiles() {
			referenced[h.Path] = true
		}
	}
	return present, referenced
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// A long run with incremental checkpoints, random upload failures and
// restarts: after every completed checkpoint every file it references
// exists; when the job ends, every file under shared/ is referenced by a
// retained checkpoint. A later run resumed from the latest checkpoint
// deletes what a killed process left (files of a checkpoint that never
// completed) and keeps the invariant; the output stays exactly once.
func TestIncrementalNoOrphansNoDanglingReferences(t *testing.T) {
	t.Parallel()
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	var rngMu sync.Mutex
	dir := t.TempDir()
	chk := filepath.Join(dir, "chk")
	store, err := storage.Open(context.Background(), chk)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	var dangling atomic.Value
	run := func(n int64, restore string, stopAfter int) (weir.Options, error) {
		opts := weir.Options{Parallelism: 2, StateBackend: weir.BackendPebble, StateDir: filepath.Join(dir, "state"),
			Logger: quietLogger(t),
			Checkpoint: weir.CheckpointOptions{Interval: 5 * time.Millisecond, Dir: chk, Incremental: true, NumRetained: 2,
				TolerableFailures: 1000, RestorePath: restore},
			Restart: weir.RestartOptions{Type: "fixed-delay", FixedDelayAttempts: 1000, FixedDelay: time.Millisecond}}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		completed := 0
		env := weir.NewEnvironment(opts)
		weir.SetTestHooks(env, weir.TestHooks{
			Upload: func(_, _ int, id int64) error {
				rngMu.Lock()
				defer rngMu.Unlock()
				if rng.IntN(8) == 0 {
					return errors.New("injected upload failure")
				}
				return nil
			},
			Completed: func(id int64, cp *metadata.Checkpoint) {
				// Runs on the runner's goroutine: record, do not fail here.
				objs, err := store.ListShared(context.Background(), "counter")
				if err != nil {
					dangling.Store(err.Error())
				}
				present := map[string]bool{}
				for _, o := range objs {
					present[o.Key] = true
				}
				for _, h := range cp.SharedFiles() {
					if !present[h.Path] {
						dangling.Store(fmt.Sprintf("checkpoint %d references missing %s", id, h.Path))
					}
				}
				completed++
				if stopAfter > 0 && completed == stopAfter {
					cancel()
				}
			},
		})
		var failed atomic.Bool
		counterJob(env, n, 500, sink.Files(filepath.Join(dir, "out"), func(s string) string { return s }), n/3, &failed)
		_, err := env.ExecuteResult(ctx, "counter")
		return opts, err
	}
	const n = 300_000
	if _, err := run(n, "", 6); !errors.Is(err, context.Canceled) {
		t.Fatalf("first run: %v", err)
	}
	if d := dangling.Load(); d != nil {
		t.Fatal(d)
	}
	present, referenced := sharedState(t, store)
	for p := range present {
		if !referenced[p] {
			t.Fatalf("after the first run %s is not referenced by a retained checkpoint (present %v, referenced %v)", p, keys(present), keys(referenced))
		}
	}
	// What a killed process leaves: an upload for a checkpoint that never
	// completed, and a chk directory without _metadata.
	for _, orphan := range []string{"op-counter-0-dead-000999.sst", "op-counter-1-dead-000998.sst"} {
		w, err := store.CreateSharedFile(context.Background(), "counter", orphan)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte("left by a killed process"))
		if _, err := w.Finish(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := run(n, weir.RestoreLatest, 0); err != nil {
		t.Fatalf("resumed run: %v", err)
	}
	if d := dangling.Load(); d != nil {
		t.Fatal(d)
	}
	present, referenced = sharedState(t, store)
	for p := range present {
		if !referenced[p] {
			t.Fatalf("after the resumed run %s is not referenced (present %v, referenced %v)", p, keys(present), keys(referenced))
		}
	}
	for p := range referenced {
		if !present[p] {
			t.Fatalf("%s is referenced but missing", p)
		}
	}
	checkCounterOutput(t, filepath.Join(dir, "out"), n, 500)
}
