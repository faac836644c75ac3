// Package bench holds the benchmark jobs behind `weir bench` and the
// repository's Go benchmarks, so both measure the same code.
package bench

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/internal/metrics"
	"github.com/weirstream/weir/internal/metrics/prom"
	"github.com/weirstream/weir/internal/task"
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
	Edge string `json:"edge"`
	// Metrics: the tasks exported their metrics to a registry, scraped
	// once a second.
	Metrics     bool  `json:"metrics"`
	Records     int64 `json:"records"`
	Parallelism int   `json:"parallelism"`
	// TaskManagers is the number of task managers of an in-process
	// cluster the job ran on over TCP (RunPipelineCluster); 0: in process.
	TaskManagers         int     `json:"taskManagers,omitempty"`
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
// the process's CPU time (user + system, all goroutines) around it. With
// withMetrics the tasks export their metrics to a registry (as a job with
// the REST API or Prometheus endpoint does) that a scraper reads once a
// second, its cost included.
func RunPipeline(ctx context.Context, opts weir.Options, edge string, records int64, withMetrics bool) (PipelineResult, error) {
	if records < 1 {
		return PipelineResult{}, fmt.Errorf("records %d must be at least 1", records)
	}
	env := weir.NewEnvironment(opts)
	if err := BuildPipeline(env, edge, records); err != nil {
		return PipelineResult{}, err
	}
	var stopScraper func()
	if withMetrics {
		reg := metrics.NewRegistry()
		ctx = task.WithMetrics(ctx, reg, "bench")
		stopScraper = scrapeEverySecond(reg)
	}
	cpu0 := ProcessCPU()
	t0 := time.Now()
	err := env.Execute(ctx, "bench-pipeline-"+edge)
	wall := time.Since(t0).Seconds()
	cpu := (ProcessCPU() - cpu0).Seconds()
	if stopScraper != nil {
		stopScraper()
	}
	if err != nil {
		return PipelineResult{}, err
	}
	r := PipelineResult{Edge: edge, Metrics: withMetrics, Records: records, Parallelism: env.Options().Parallelism,
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

// scrapeEverySecond gathers reg as a Prometheus scrape would, once a
// second, until the returned stop is called; stop returns once the
// scraper's goroutine has.
func scrapeEverySecond(reg *metrics.Registry) (stop func()) {
	pr := prometheus.NewRegistry()
	pr.MustRegister(prom.NewCollector(reg))
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				_, _ = pr.Gather()
			case <-quit:
				return
			}
		}
	}()
	return func() { close(quit); <-done }
}

// PipelineABResult is the outcome of `weir bench pipeline --ab-metrics`:
// the pipeline run alternately without and with metrics, and the medians
// of each side's records per CPU-second. Its JSON form is what --json
// prints.
type PipelineABResult struct {
	Edge        string `json:"edge"`
	Records     int64  `json:"records"`
	Parallelism int    `json:"parallelism"`
	// Off and On are the records per CPU-second of every run without and
	// with metrics, in the order they ran (off first in each round).
	Off []float64 `json:"off"`
	On  []float64 `json:"on"`
	// OffMedian and OnMedian are their medians, Ratio OnMedian/OffMedian:
	// 0.97 means metrics cost 3% of the throughput per core.
	OffMedian float64 `json:"offMedian"`
	OnMedian  float64 `json:"onMedian"`
	Ratio     float64 `json:"ratio"`
}

// RunPipelineAB runs the pipeline once to warm up, then rounds times
// without and with metrics alternately (off, on, off, on, ...), so that
// drift in the machine's speed hits both sides alike, and compares the
// medians of their records per CPU-second.
func RunPipelineAB(ctx context.Context, opts weir.Options, edge string, records int64, rounds int) (PipelineABResult, error) {
	if rounds < 1 {
		return PipelineABResult{}, fmt.Errorf("rounds %d must be at least 1", rounds)
	}
	run := func(withMetrics bool) (float64, error) {
		runtime.GC() // the previous run's garbage is not this one's cost
		r, err := RunPipeline(ctx, opts, edge, records, withMetrics)
		return r.RecordsPerCoreSecond, err
	}
	if _, err := run(false); err != nil {
		return PipelineABResult{}, err
	}
	res := PipelineABResult{Edge: edge, Records: records, Parallelism: max(opts.Parallelism, 1)}
	for range rounds {
		off, err := run(false)
		if err != nil {
			return PipelineABResult{}, err
		}
		on, err := run(true)
		if err != nil {
			return PipelineABResult{}, err
		}
		res.Off, res.On = append(res.Off, off), append(res.On, on)
	}
	res.OffMedian, res.OnMedian = median(res.Off), median(res.On)
	if res.OffMedian > 0 {
		res.Ratio = res.OnMedian / res.OffMedian
	}
	return res, nil
}

func median(vs []float64) float64 {
	s := slices.Clone(vs)
	slices.Sort(s)
	n := len(s)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
