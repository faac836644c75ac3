package bench

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/weirstream/weir/internal/checkpoint/metadata"
	"github.com/weirstream/weir/internal/checkpoint/storage"
)

// RunSavepoint takes the savepoints of both formats, each holding the whole
// state in its own format, and restores them.
func TestRunSavepointBothFormats(t *testing.T) {
	dir := t.TempDir()
	cfg := SavepointConfig{StateBytes: 2 << 20, Rounds: 2, UpdateRate: 500, Parallelism: 2, Dir: dir,
		Logger: slog.New(slog.DiscardHandler)}
	r, err := RunSavepoint(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Formats) != 2 || r.Keys != 2048 {
		t.Fatalf("result %+v: want 2 formats over 2048 keys", r)
	}
	for _, f := range r.Formats {
		if f.Rounds != 2 || len(f.DurationMs) != 2 || f.MedianMs <= 0 || f.MinMs > f.MedianMs || f.MaxMs < f.MedianMs {
			t.Errorf("%s: rounds %d durations %v median %v min %v max %v", f.Format, f.Rounds, f.DurationMs, f.MedianMs, f.MinMs, f.MaxMs)
		}
		// Every value is incompressible: the savepoint holds at least the
		// state's bytes.
		if f.Bytes < r.StateBytes || f.Files == 0 || f.RestoreMs <= 0 {
			t.Errorf("%s: %d bytes in %d files (state %d bytes), restore %v ms", f.Format, f.Bytes, f.Files, r.StateBytes, f.RestoreMs)
		}
	}
	// The savepoints left on disk are of the format they claim.
	entries, err := os.ReadDir(filepath.Join(dir, "savepoints"))
	if err != nil {
		t.Fatal(err)
	}
	formats := map[string]bool{}
	for _, e := range entries {
		s, snap, err := storage.ResolveSnapshot(context.Background(), filepath.Join(dir, "savepoints", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		cp, err := metadata.Decode(snap.Payload)
		s.Close()
		if err != nil {
			t.Fatal(err)
		}
		formats[cp.Format] = true
		for _, op := range cp.Operators {
			for _, st := range op.Subtasks {
				if (st.Native != nil) != (cp.Format == "native") && (st.Keyed != nil || st.Native != nil) {
					t.Errorf("%s savepoint: operator %s subtask %d native=%v keyed=%v", cp.Format, op.UID, st.Index, st.Native != nil, st.Keyed != nil)
				}
			}
		}
	}
	if !formats["canonical"] || !formats["native"] {
		t.Fatalf("savepoints on disk have formats %v, want canonical and native", formats)
	}
}
