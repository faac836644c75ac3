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
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
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
	}
}

func TestCheckpointConfigValidate(t *testing.T) {
	cfg := tinyCheckpointConfig()
	cfg.Modes = []string{"incremental", "teleport"}
	cfg.StateBytes = 10
	cfg.Interval = 0
	err := cfg.Validate()
	if err == nil {
		t.Fatal("invalid config accepted")
	}
	for _, s := range []string{`unknown mode "teleport"`, "full-hashmap, full-pebble, incremental", "10 bytes", "interval"} {
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
