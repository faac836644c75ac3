package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/internal/nexmark"
)

// Defaults of a Nexmark run: those of Flink's Nexmark suite
// (nexmark-flink's conf/flink-conf.yaml and nexmark.yaml), so that weir's
// figures compare like for like with FlinkNexmarkPerCore.
const (
	// DefaultNexmarkTPS is the event-time rate of the generator, events per
	// second over all subtasks (nexmark.workload.suite.100m.tps).
	DefaultNexmarkTPS = 10_000_000
	// DefaultNexmarkCheckpointInterval is Flink's execution.checkpointing.interval
	// in the suite: 3 minutes.
	DefaultNexmarkCheckpointInterval = 180 * time.Second
)

// DefaultNexmarkConfig returns the configuration of a run like Flink's
// suite: pebble (for RocksDB) with incremental checkpoints every 180 s in
// exactly-once mode, 10,000,000 events per second of event time. Query,
// Events and Seed are left to the caller.
func DefaultNexmarkConfig() NexmarkConfig {
	return NexmarkConfig{TPS: DefaultNexmarkTPS, Parallelism: 1, StateBackend: weir.BackendPebble,
		CheckpointInterval: DefaultNexmarkCheckpointInterval, Incremental: true,
		CheckpointingMode: weir.CheckpointingExactlyOnce}
}

// NexmarkConfig configures RunNexmark. Zero fields other than
// CheckpointInterval and Incremental take DefaultNexmarkConfig's values.
type NexmarkConfig struct {
	// Query is the name of a query in nexmark.Queries.
	Query string
	// Events is the number of generated events, at least 1.
	Events int64
	// TPS is the generator's event rate in event time, events per second
	// over all subtasks (nexmark.Config.FirstEventRate): Events / TPS
	// seconds of event time pass, which decides how many windows fire.
	// Default DefaultNexmarkTPS.
	TPS int64
	// Seed of the generator. Default 0.
	Seed uint64
	// Parallelism of every operator. Default 1.
	Parallelism int
	// StateBackend is weir.BackendPebble (default) or weir.BackendHashMap.
	StateBackend string
	// CheckpointInterval between checkpoints; 0 turns checkpointing off.
	// Checkpoints (and pebble's state) go to a temporary directory that
	// RunNexmark removes afterwards.
	CheckpointInterval time.Duration
	// Incremental checkpoints (pebble only; DefaultNexmarkConfig: true).
	Incremental bool
	// CheckpointingMode is weir.CheckpointingExactlyOnce (default) or
	// weir.CheckpointingAtLeastOnce.
	CheckpointingMode string
	// Output, if set, receives the query's result rows as JSON lines
	// (nexmark.Output.JSON): for bounded runs, so the run gets restart
	// strategy "none" and fails instead of restarting.
	Output io.Writer
	// Logger receives the job's logs. Default slog.Default().
	Logger *slog.Logger
}

func (c *NexmarkConfig) ensureDefaults() {
	d := DefaultNexmarkConfig()
	if c.TPS == 0 {
		c.TPS = d.TPS
	}
	if c.Parallelism == 0 {
		c.Parallelism = d.Parallelism
	}
	if c.StateBackend == "" {
		c.StateBackend = d.StateBackend
	}
	if c.CheckpointingMode == "" {
		c.CheckpointingMode = d.CheckpointingMode
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Validate reports every invalid field at once.
func (c NexmarkConfig) Validate() error {
	c.ensureDefaults()
	var errs []error
	if _, ok := nexmark.Queries[c.Query]; !ok {
		errs = append(errs, fmt.Errorf("unknown query %q: valid queries are %s", c.Query, strings.Join(nexmark.QueryNames(), ", ")))
	}
	if c.Events < 1 {
		errs = append(errs, fmt.Errorf("events %d must be at least 1", c.Events))
	}
	if c.TPS < 1 {
		errs = append(errs, fmt.Errorf("tps %d must be at least 1", c.TPS))
	}
	if c.StateBackend != weir.BackendHashMap && c.StateBackend != weir.BackendPebble {
		errs = append(errs, fmt.Errorf("state backend %q must be %s or %s", c.StateBackend, weir.BackendHashMap, weir.BackendPebble))
	}
	if c.CheckpointInterval < 0 {
		errs = append(errs, fmt.Errorf("checkpoint interval %v must not be negative (0: off)", c.CheckpointInterval))
	}
	if m := strings.ToUpper(c.CheckpointingMode); m != weir.CheckpointingExactlyOnce && m != weir.CheckpointingAtLeastOnce {
		errs = append(errs, fmt.Errorf("checkpointing mode %q must be %s or %s", c.CheckpointingMode, weir.CheckpointingExactlyOnce, weir.CheckpointingAtLeastOnce))
	}
	return errors.Join(errs...)
}

// NexmarkResult is the outcome of one Nexmark query run; its JSON form is
// what `weir bench nexmark --json` prints.
type NexmarkResult struct {
	Query               string  `json:"query"`
	Events              int64   `json:"events"`
	WallSeconds         float64 `json:"wallSeconds"`
	CPUSeconds          float64 `json:"cpuSeconds"`
	EventsPerSecond     float64 `json:"eventsPerSecond"`
	EventsPerCoreSecond float64 `json:"eventsPerCoreSecond"`
	// The setup of the run.
	Parallelism   int                  `json:"parallelism"`
	Seed          uint64               `json:"seed"`
	StateBackend  string               `json:"stateBackend"`
	Checkpointing NexmarkCheckpointing `json:"checkpointing"`
	TPS           int64                `json:"tps"`
	// EventTimeSpanSeconds is Events / TPS: the event time the input
	// spans, which bounds the windows that can fire.
	EventTimeSpanSeconds float64 `json:"eventTimeSpanSeconds"`
	// ResultRows is the number of rows the query emitted (updates
	// included): zero for a window query means no window fired.
	ResultRows int64 `json:"resultRows"`
}

// NexmarkCheckpointing is the checkpointing of a run.
type NexmarkCheckpointing struct {
	// Interval as time.Duration formats it ("3m0s"), or "off".
	Interval string `json:"interval"`
	// Mode is "exactly-once" or "at-least-once".
	Mode string `json:"mode"`
	// Incremental is whether checkpoints would be incremental: false on
	// the hashmap backend, which always takes full snapshots.
	Incremental bool `json:"incremental"`
}

// FlinkNexmarkPerCore are the per-core throughputs (events per second per
// core) of Flink's published Nexmark results, as the "Throughput/Cores"
// column of the README of github.com/nexmark/nexmark ("Nexmark Benchmark
// Result", the V1 results) gives them: "155.02 K/s" is 155_020. Setup
// there: Flink 1.13, 100,000,000 events generated at 10,000,000 events/s
// (nexmark.workload.suite.100m.tps), RocksDB state backend with incremental
// checkpoints every 3 minutes in exactly-once mode, mini-batch (2 s, 5000
// rows) and split distinct aggregation on, parallelism 8 (8 TaskManagers
// of one slot, 8 GB each) on 3 worker machines of 8 cores and 32 GB with
// SSDs. Cores are measured per machine, so the generator and the JVM's
// other threads count. q6 is not published (FLINK-19059).
var FlinkNexmarkPerCore = map[string]float64{
	"q0": 155_020, "q1": 157_940, "q2": 175_210, "q3": 152_120, "q4": 34_330,
	"q5": 22_140, "q7": 12_330, "q8": 146_140, "q9": 14_240, "q10": 57_810,
	"q11": 39_700, "q12": 75_670, "q13": 130_730, "q14": 161_230, "q15": 72_420,
	"q16": 18_650, "q17": 116_800, "q18": 53_700, "q19": 44_040, "q20": 18_980,
	"q21": 98_490, "q22": 129_960,
}

// RunNexmark runs Nexmark query cfg.Query over cfg.Events generated events
// into a counting (and with cfg.Output, JSON-writing) sink and measures
// wall and process CPU time around it: the job's deployment, checkpoints
// and end included.
func RunNexmark(ctx context.Context, cfg NexmarkConfig) (NexmarkResult, error) {
	if err := cfg.Validate(); err != nil {
		return NexmarkResult{}, err
	}
	cfg.ensureDefaults()
	dir, err := os.MkdirTemp("", "weir-bench-nexmark-")
	if err != nil {
		return NexmarkResult{}, err
	}
	defer os.RemoveAll(dir)
	opts := weir.Options{Parallelism: cfg.Parallelism, StateBackend: cfg.StateBackend, Logger: cfg.Logger,
		StateDir: filepath.Join(dir, "state"),
		Checkpoint: weir.CheckpointOptions{Interval: cfg.CheckpointInterval, Dir: filepath.Join(dir, "checkpoints"),
			Incremental: cfg.Incremental, Mode: cfg.CheckpointingMode}}
	if cfg.Output != nil {
		opts.Restart.Type = "none"
	}
	env := weir.NewEnvironment(opts)
	var rows atomic.Int64
	gen := nexmark.Config{Events: cfg.Events, Seed: cfg.Seed, FirstEventRate: cfg.TPS}
	nexmark.Queries[cfg.Query](nexmark.Events(env, gen), nexmark.Output{Rows: &rows, JSON: cfg.Output})
	cpu0 := ProcessCPU()
	t0 := time.Now()
	if err := env.Execute(ctx, "nexmark-"+cfg.Query); err != nil {
		return NexmarkResult{}, err
	}
	wall := time.Since(t0).Seconds()
	cpu := (ProcessCPU() - cpu0).Seconds()
	r := NexmarkResult{Query: cfg.Query, Events: cfg.Events, WallSeconds: wall, CPUSeconds: cpu,
		Parallelism: cfg.Parallelism, Seed: cfg.Seed, StateBackend: cfg.StateBackend, TPS: cfg.TPS,
		EventTimeSpanSeconds: float64(cfg.Events) / float64(cfg.TPS), ResultRows: rows.Load(),
		Checkpointing: NexmarkCheckpointing{Interval: "off", Mode: modeName(cfg.CheckpointingMode),
			Incremental: cfg.Incremental && cfg.StateBackend == weir.BackendPebble}}
	if cfg.CheckpointInterval > 0 {
		r.Checkpointing.Interval = cfg.CheckpointInterval.String()
	}
	if wall > 0 {
		r.EventsPerSecond = float64(cfg.Events) / wall
	}
	if cpu > 0 {
		r.EventsPerCoreSecond = float64(cfg.Events) / cpu
	}
	return r, nil
}

// modeName is the flag spelling of a checkpointing mode: "exactly-once"
// for EXACTLY_ONCE.
func modeName(m string) string {
	return strings.ReplaceAll(strings.ToLower(m), "_", "-")
}
