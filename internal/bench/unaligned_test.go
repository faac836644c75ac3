package bench

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir"
)

func tinyUnalignedConfig() UnalignedConfig {
	return UnalignedConfig{Modes: UnalignedModes, Parallelism: 2, Checkpoints: 2, Spin: 20 * time.Microsecond,
		RecordSize: DefaultUnalignedRecordSize, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

// Every listed mode must have its option setting: adding a mode to
// UnalignedModes without one fails here.
func TestUnalignedModesHaveOptions(t *testing.T) {
	for _, m := range UnalignedModes {
		var o weir.Options
		if err := setUnalignedMode(&o, m, time.Second); err != nil {
			t.Errorf("mode %s: %v", m, err)
		}
		if want := strings.HasPrefix(m, ModeUnaligned); o.Checkpoint.Unaligned != want {
			t.Errorf("mode %s: Checkpoint.Unaligned = %v", m, o.Checkpoint.Unaligned)
		}
		if want := m == ModeUnaligned1ms; (o.Checkpoint.AlignedCheckpointTimeout == time.Millisecond) != want {
			t.Errorf("mode %s: AlignedCheckpointTimeout = %v", m, o.Checkpoint.AlignedCheckpointTimeout)
		}
		if want := m == ModeAlignedDebloat; o.BufferDebloat.Enabled != want || (want && o.BufferDebloat.Target != time.Second) {
			t.Errorf("mode %s: BufferDebloat = %+v", m, o.BufferDebloat)
		}
	}
	err := setUnalignedMode(&weir.Options{}, "aligned-bogus", time.Second)
	if err == nil || !strings.Contains(err.Error(), `"aligned-bogus"`) || !strings.Contains(err.Error(), strings.Join(UnalignedModes, ", ")) {
		t.Errorf("unknown mode: %v", err)
	}
}

func TestUnalignedConfigValidate(t *testing.T) {
	cfg := tinyUnalignedConfig()
	cfg.Modes = []string{"unaligned", "unaligned-2ms"}
	cfg.Checkpoints = 0
	cfg.Spin = 0
	cfg.BufferSize = 100
	cfg.BackpressureTimeout = -time.Second
	err := cfg.Validate()
	if err == nil {
		t.Fatal("invalid config accepted")
	}
	for _, s := range []string{`unknown mode "unaligned-2ms": valid modes are aligned, aligned-debloat, unaligned, unaligned-1ms`, "checkpoints 0",
		"spin 0s", "buffer size 100", "backpressure timeout -1s"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error lacks %q: %v", s, err)
		}
	}
	if _, err := RunUnaligned(context.Background(), cfg); err == nil {
		t.Error("RunUnaligned accepted an invalid config")
	}
	if err := tinyUnalignedConfig().Validate(); err != nil {
		t.Errorf("valid config refused: %v", err)
	}
}

func TestUnalignedSourcesBackpressured(t *testing.T) {
	src := func(i int, bp, pool float64) weir.TaskMetrics {
		return weir.TaskMetrics{Name: unalignedSourceName + " (" + string(rune('1'+i)) + "/2)",
			BackPressuredTimeMsPerSecond: bp, OutPoolUsage: pool}
	}
	sink := weir.TaskMetrics{Name: "Sink: SlowDiscard (1/2)"}
	for _, c := range []struct {
		name  string
		tasks []weir.TaskMetrics
		want  bool
	}{
		{"no metrics yet", nil, false},
		{"no source", []weir.TaskMetrics{sink}, false},
		{"both by time", []weir.TaskMetrics{src(0, 900, 0.5), src(1, 600, 0), sink}, true},
		{"both by pool", []weir.TaskMetrics{src(0, 0, 1), src(1, 100, 0.995), sink}, true},
		{"one of two", []weir.TaskMetrics{src(0, 900, 1), src(1, 400, 0.9), sink}, false},
		{"half is not enough", []weir.TaskMetrics{src(0, 500, 0.5)}, false},
	} {
		if got := sourcesBackpressured(c.tasks); got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
}

// A run whose sources are not backpressured in time fails, naming why,
// and leaves no job running.
func TestRunUnalignedBackpressureTimeout(t *testing.T) {
	cfg := tinyUnalignedConfig()
	cfg.Modes = []string{ModeAligned}
	cfg.BackpressureTimeout = time.Nanosecond // before the first status report
	_, err := RunUnaligned(context.Background(), cfg)
	if err == nil {
		t.Fatal("no error")
	}
	for _, s := range []string{"mode aligned", "not backpressured within 1ns after the start", "no metrics of the source subtasks yet", "spin 20µs"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error lacks %q: %v", s, err)
		}
	}
}

func TestMedianIntUnaligned(t *testing.T) {
	for _, c := range []struct {
		in   []int64
		want int64
	}{{nil, 0}, {[]int64{7}, 7}, {[]int64{3, 1, 2}, 2}, {[]int64{4, 1, 3, 2}, 2}} {
		if got := medianInt(c.in); got != c.want {
			t.Errorf("medianInt(%v) = %d, want %d", c.in, got, c.want)
		}
	}
}
