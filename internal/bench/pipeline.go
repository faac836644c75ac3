// Package bench holds the benchmark jobs behind `weir bench` and the
// repository's Go benchmarks, so both measure the same code.
package bench

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/sink"
	"github.com/weirstream/weir/source"
)

// Edges accepted by Pipeline.
const (
	EdgeChained   = "chained"
	EdgeRebalance = "rebalance"
)

// PipelineResult is the outcome of one pipeline benchmark run. Its JSON form
// is what `weir bench pipeline --json` prints.
type PipelineResult struct {
	Edge                 string  `json:"edge"`
	Records              int64   `json:"records"`
	Parallelism          int     `json:"parallelism"`
	WallSeconds          float64 `json:"wallSeconds"`
	CPUSeconds           float64 `json:"cpuSeconds"`
	RecordsPerSecond     float64 `json:"recordsPerSecond"`
	RecordsPerCoreSecond float64 `json:"recordsPerCoreSecond"`
}

// BuildPipeline declares the benchmark job in env: a sequence source of
// records int64s, a map, a filter that keeps every record, and a discarding
// sink. With EdgeChained every operator is chained (direct calls); with
// EdgeRebalance a rebalance edge separates the map from the filter, so every
// record is serialized, handed to another task and deserialized.
func BuildPipeline(env *weir.Environment, edge string, records int64) error {
	s := weir.FromSource(env, source.Sequence(0, records-1))
	m := weir.Map(s, func(v int64) int64 { return v*3 + 1 })
	switch edge {
	case EdgeChained:
	case EdgeRebalance:
		m = m.Rebalance()
	default:
		return fmt.Errorf("unknown edge %q: valid edges are %s and %s", edge, EdgeChained, EdgeRebalance)
	}
	f := weir.Filter(m, func(v int64) bool { return v >= 0 })
	weir.SinkTo(f, sink.Discard[int64]())
	return nil
}

// RunPipeline runs the pipeline benchmark once and measures wall time and
// the process's CPU time (user + system, all goroutines) around it.
func RunPipeline(ctx context.Context, opts weir.Options, edge string, records int64) (PipelineResult, error) {
	if records < 1 {
		return PipelineResult{}, fmt.Errorf("records %d must be at least 1", records)
	}
	env := weir.NewEnvironment(opts)
	if err := BuildPipeline(env, edge, records); err != nil {
		return PipelineResult{}, err
	}
	cpu0 := ProcessCPU()
	t0 := time.Now()
	if err := env.Execute(ctx, "bench-pipeline-"+edge); err != nil {
		return PipelineResult{}, err
	}
	wall := time.Since(t0).Seconds()
	cpu := (ProcessCPU() - cpu0).Seconds()
	r := PipelineResult{Edge: edge, Records: records, Parallelism: env.Options().Parallelism,
		WallSeconds: wall, CPUSeconds: cpu}
	if wall > 0 {
		r.RecordsPerSecond = float64(records) / wall
	}
	if cpu > 0 {
		r.RecordsPerCoreSecond = float64(records) / cpu
	}
	return r, nil
}

// ProcessCPU returns the CPU time the process has used so far.
func ProcessCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
