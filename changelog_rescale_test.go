package weir_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/internal/checkpoint/metadata"
	"github.com/weirstream/weir/internal/checkpoint/storage"
)

// A changelog checkpoint resumes at another parallelism and on the other
// backend: each new subtask restores the materializations of the old
// subtasks whose key groups overlap its own and replays only the log
// records of its key groups.
func TestResumeChangelogRescaled(t *testing.T) {
	for _, c := range []struct {
		from, to         int
		backend, backend2 string
		incremental      bool
	}{
		{2, 3, weir.BackendHashMap, weir.BackendPebble, false},
		{3, 1, weir.BackendPebble, weir.BackendHashMap, false},
		{2, 4, weir.BackendPebble, weir.BackendPebble, true},
	} {
		t.Run(fmt.Sprintf("p%d-%s-to-p%d-%s-incremental=%v", c.from, c.backend, c.to, c.backend2, c.incremental), func(t *testing.T) {
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
