package weir_test

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/internal/checkpoint/metadata"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/sink"
)

// The snapshot format travels with the trigger to every operator: a
// checkpoint asked for in the canonical format (what a savepoint asks for)
// writes the backend-independent key-group stream even where the job is
// configured for native incremental files and the changelog, and a job on
// another backend restores from it with exactly-once output.
func TestCanonicalFormatFromTheTrigger(t *testing.T) {
	t.Parallel()
	const n, keys = 20_000, 300
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	chk := filepath.Join(dir, "chk")
	var reached atomic.Bool
	opts := weir.Options{Parallelism: 2, StateBackend: weir.BackendPebble, StateDir: filepath.Join(dir, "state"),
		Logger: quietLogger(t), Changelog: weir.ChangelogOptions{Enabled: true, MaterializeInterval: 50 * time.Millisecond},
		Checkpoint: weir.CheckpointOptions{Interval: time.Hour, Dir: chk, Incremental: true}}
	env := weir.NewEnvironment(opts)
	counterJobWith(env, n, keys, sink.Files(out, func(s string) string { return s }), counterHooks{
		throttle: func(i int64) bool {
			if i >= n/3 {
				reached.Store(true)
				return true
			}
			return false
		}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- env.Execute(ctx, "counter") }()
	deadline := time.Now().Add(30 * time.Second)
	for !reached.Load() {
		if time.Now().After(deadline) {
			t.Fatal("the job never reached a third of its input")
		}
		time.Sleep(5 * time.Millisecond)
	}
	var (
		id  int64
		err error
	)
	for attempt := 0; ; attempt++ {
		// The first checkpoint waits for the first materialization.
		if id, err = env.TriggerCanonicalCheckpoint(ctx); err == nil || attempt == 100 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("canonical checkpoint: %v", err)
	}
	cancel()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("first run: %v", err)
	}

	store, err := storage.Open(context.Background(), chk)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	payload, err := store.ReadMetadata(context.Background(), "counter", id)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := metadata.Decode(payload)
	if err != nil {
		t.Fatal(err)
	}
	sts := subtasksOf(cp, "count")
	if len(sts) != 2 {
		t.Fatalf("checkpoint %d has %d subtasks of count, want 2", id, len(sts))
	}
	for _, st := range sts {
		if st.Keyed == nil || st.Native != nil || st.Changelog != nil {
			t.Fatalf("subtask %d of checkpoint %d: keyed %v, native %v, changelog %v; want only the canonical keyed stream",
				st.Index, id, st.Keyed != nil, st.Native != nil, st.Changelog != nil)
		}
	}

	// Resume on the hashmap backend, without the changelog, from it.
	opts2 := weir.Options{Parallelism: 3, StateBackend: weir.BackendHashMap, StateDir: filepath.Join(dir, "state"),
		Logger: quietLogger(t), Checkpoint: weir.CheckpointOptions{Interval: 50 * time.Millisecond, Dir: chk,
			RestorePath: filepath.Join(chk, "counter", "chk-"+strconv.FormatInt(id, 10))}}
	env2 := weir.NewEnvironment(opts2)
	counterJobWith(env2, n, keys, sink.Files(out, func(s string) string { return s }), counterHooks{})
	ctx2, cancel2 := context.WithTimeout(context.Background(), time.Minute)
	defer cancel2()
	if err := env2.Execute(ctx2, "counter"); err != nil {
		t.Fatalf("resume from the canonical checkpoint: %v", err)
	}
	checkCounterOutput(t, out, n, keys)
}
