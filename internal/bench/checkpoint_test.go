package bench

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"io"
)

// tinyCheckpointConfig is a run of every mode small enough for tests.
func tinyCheckpointConfig() CheckpointConfig {
	return CheckpointConfig{Modes: CheckpointModes, StateBytes: 2 << 20, UpdateRate: 10000,
		Interval: 200 * time.Millisecond, Duration: 2 * time.Second, Parallelism: 2,
		MaterializeInterval: 500 * time.Millisecond,
		Logger:              slog.New(slog.NewTextHandler(io.Discard, nil))}
}

func TestRunCheckpointAllModes(t *testing.T) {
	res, err := RunCheckpoint(context.Background(), tinyCheckpointConfig())
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Modes) != len(CheckpointModes) {
		t.Fatalf("%d results, want one per mode: %+v", len(res.Modes), res)
	}
	for i, r := range res.Modes {
		t.Logf("%+v", r)
		if r.Mode != CheckpointModes[i] {
			t.Errorf("result %d is of mode %q, want %q", i, r.Mode, CheckpointModes[i])
		}
		if r.Checkpoints < 1 {
			t.Errorf("%s: no checkpoint measured", r.Mode)
		}
		if !(0 < r.P50Ms && r.P50Ms <= r.P99Ms && r.P99Ms <= r.MaxMs) {
			t.Errorf("%s: want 0 < p50 <= p99 <= max: %+v", r.Mode, r)
		}
		if r.FullBytes <= 0 || r.CheckpointedBytes <= 0 || r.CheckpointedBytes > r.FullBytes {
			t.Errorf("%s: want 0 < checkpointed bytes <= full bytes: %+v", r.Mode, r)
		}
		// The state is loaded before the measured checkpoints: every one
		// references at least the values' bytes.
		if r.FullBytes < 2<<20 {
			t.Errorf("%s: full size %d is less than the state's %d bytes", r.Mode, r.FullBytes, 2<<20)
		}
		if r.RecordsPerSecond <= 0 || r.RestoreMs <= 0 {
			t.Errorf("%s: want positive records/s and restore time: %+v", r.Mode, r)
		}
		// The rate is that of the update phase only: the load phase's
		// 2,048 records, processed as fast as possible, must not inflate it.
		if r.RecordsPerSecond > 1.5*10000 {
			t.Errorf("%s: %v records/s exceeds the update rate of 10000", r.Mode, r.RecordsPerSecond)
		}
		if r.Mode != ModeChangelog {
			if r.MaterializedBytes != 0 || r.NonMaterializedBytes != 0 || r.Materializations != 0 {
				t.Errorf("%s: changelog figures of a mode without the changelog: %+v", r.Mode, r)
			}
			continue
		}
		// 2 s of updates with a materialization every 500 ms.
		if r.Materializations < 2 || r.UpdateMaterializations < 1 || r.UpdateMaterializations > r.Materializations {
			t.Errorf("changelog: want at least 2 materializations, 1 after the load: %+v", r)
		}
		if r.MaterializedBytes < 2<<20 || r.NonMaterializedBytes <= 0 ||
			r.MaterializedBytes+r.NonMaterializedBytes > r.FullBytes*3 {
			t.Errorf("changelog: implausible materialized / non-materialized sizes: %+v", r)
		}
	}
}

func TestCheckpointConfigValidate(t *testing.T) {
	cfg := tinyCheckpointConfig()
	cfg.Modes = []string{"incremental", "teleport"}
	cfg.StateBytes = 10
	cfg.Interval = 0
	cfg.MaterializeInterval = -time.Second
	err := cfg.Validate()
	if err == nil {
		t.Fatal("invalid config accepted")
	}
	for _, s := range []string{`unknown mode "teleport"`, "full-hashmap, full-pebble, incremental", "10 bytes", "interval", "materialize interval -1s"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error lacks %q: %v", s, err)
		}
	}
	if _, err := RunCheckpoint(context.Background(), cfg); err == nil {
		t.Error("RunCheckpoint accepted an invalid config")
	}
}

func TestPercentile(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i))
	}
	if p50, p99 := percentile(d, 0.5), percentile(d, 0.99); p50 != 50 || p99 != 99 {
		t.Errorf("p50 %d, p99 %d; want 50, 99", p50, p99)
	}
	if p := percentile(d[:1], 0.99); p != 1 {
		t.Errorf("p99 of one value %d, want 1", p)
	}
}
