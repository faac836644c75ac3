package weir_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/internal/checkpoint/metadata"
	"github.com/weirstream/weir/sink"
	"github.com/weirstream/weir/source"
)

// A file an operator's state refers to (metadata.Subtask.Refs) lives as
// long as a retained checkpoint lists it, written for an earlier
// checkpoint or not: the sweep after a run keeps it, the resumed run
// restores with it verified, and once no retained checkpoint lists it any
// more it is deleted. Without the reference, a long-open staged file would
// be swept away and the restore that needs it would fail (Arroyo issue
// 802).
func TestReferencedFilesOutliveTheirCheckpoint(t *testing.T) {
	t.Parallel()
	const n = 12000
	dir := t.TempDir()
	chk := filepath.Join(dir, "chk")
	shared := filepath.Join(chk, "stage", "shared")
	type run struct {
		mu     sync.Mutex
		staged []string
		listed map[int64][]string // checkpoint -> referenced files
	}
	start := func(restore string, release int64, r *run, stopWhen func(*run) bool) error {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute) // a hang detector
		defer cancel()
		opts := weir.Options{Parallelism: 1, Logger: quietLogger(t), Checkpoint: weir.CheckpointOptions{Interval: 10 * time.Millisecond,
			Dir: chk, MaxConcurrent: 2, RestorePath: restore}}
		env := weir.NewEnvironment(opts)
		weir.SetTestHooks(env, weir.TestHooks{Completed: func(id int64, cp *metadata.Checkpoint) {
			r.mu.Lock()
			defer r.mu.Unlock()
			for _, op := range cp.Operators {
				for _, st := range op.Subtasks {
					for _, h := range st.Refs {
						r.listed[id] = append(r.listed[id], h.Path)
					}
				}
			}
			if stopWhen != nil && stopWhen(r) {
				cancel()
			}
		}})
		nums := weir.FromSource(env, source.Sequence(0, n-1)).UID("numbers")
		// 100µs per record, slept 1ms at a time: a sleep of 100µs takes a
		// millisecond or more on a busy machine, which made the run take
		// minutes beside the package's other parallel tests.
		slow := weir.Map(nums, func(i int64) int64 {
			if i%10 == 0 {
				time.Sleep(time.Millisecond)
			}
			return i
		}).UID("slow")
		staged := weir.StageRefs(slow, release, func(p string) {
			r.mu.Lock()
			r.staged = append(r.staged, p)
			r.mu.Unlock()
		}).UID("stage")
		weir.SinkTo(weir.Map(staged, func(i int64) string { return "" }), sink.Discard[string]()).UID("sink")
		return env.Execute(ctx, "stage")
	}

	// Run 1 stops once two checkpoints completed that list the file staged
	// at the first one: it outlived the checkpoint it was written for.
	r1 := &run{listed: map[int64][]string{}}
	err := start("", n, r1, func(r *run) bool {
		count := 0
		for _, files := range r.listed {
			if len(r.staged) > 0 && slices.Contains(files, r.staged[0]) {
				count++
			}
		}
		return count >= 2
	})
	if err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("run 1: %v", err)
	}
	if len(r1.staged) != 1 {
		t.Fatalf("run 1 staged %v, want one file", r1.staged)
	}
	file := r1.staged[0]
	if _, err := os.Stat(filepath.Join(chk, "stage", filepath.FromSlash(file))); err != nil {
		t.Fatalf("the staged file is gone after run 1 although its latest checkpoint lists it: %v", err)
	}

	// Run 2 restores (verifying every listed file), stages its own file,
	// stops referencing it after 3000 records, and finishes: by then no
	// retained checkpoint lists either file and both are deleted.
	r2 := &run{listed: map[int64][]string{}}
	if err := start(weir.RestoreLatest, 3000, r2, nil); err != nil {
		t.Fatalf("run 2 from latest: %v", err)
	}
	entries, err := os.ReadDir(shared)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "staged-") {
			t.Errorf("%s is still in shared/ after the run ended with no checkpoint referring to it", e.Name())
		}
	}
	if len(r2.staged) == 0 {
		t.Fatalf("run 2 staged nothing; its checkpoints listed %v", r2.listed)
	}
}
