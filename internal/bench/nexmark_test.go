package bench

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir"
)

func TestNexmarkConfigValidate(t *testing.T) {
	err := NexmarkConfig{Query: "q99", TPS: -1, StateBackend: "rocksdb", CheckpointInterval: -time.Second, CheckpointingMode: "once"}.Validate()
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{`unknown query "q99"`, "events 0", "tps -1", `state backend "rocksdb"`, "checkpoint interval -1s", `checkpointing mode "once"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
	if err := (NexmarkConfig{Query: "q0", Events: 1}).Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
}

// A run with Flink's suite's defaults (pebble, incremental checkpoints)
// reports them and leaves nothing in the temporary directory.
func TestRunNexmarkDefaultsAndCleanup(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	cfg := DefaultNexmarkConfig()
	cfg.Query, cfg.Events, cfg.CheckpointInterval = "q0", 5000, 50*time.Millisecond
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	r, err := RunNexmark(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if r.StateBackend != weir.BackendPebble || r.Checkpointing != (NexmarkCheckpointing{Interval: "50ms", Mode: "exactly-once", Incremental: true}) ||
		r.TPS != DefaultNexmarkTPS || r.ResultRows != 5000*46/50 || r.EventTimeSpanSeconds != 5000.0/DefaultNexmarkTPS {
		t.Errorf("result %+v", r)
	}
	if entries, _ := os.ReadDir(tmp); len(entries) != 0 {
		t.Errorf("left in the temporary directory: %v", entries)
	}
}
