package bench

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/internal/nexmark"
)

// NexmarkResult is the outcome of one Nexmark query run; its JSON form is
// what `weir bench nexmark --json` prints.
type NexmarkResult struct {
	Query               string  `json:"query"`
	Events              int64   `json:"events"`
	WallSeconds         float64 `json:"wallSeconds"`
	CPUSeconds          float64 `json:"cpuSeconds"`
	EventsPerSecond     float64 `json:"eventsPerSecond"`
	EventsPerCoreSecond float64 `json:"eventsPerCoreSecond"`
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

// RunNexmark runs Nexmark query over events generated events into a
// discarding sink and measures wall and process CPU time around it.
func RunNexmark(ctx context.Context, opts weir.Options, query string, events int64) (NexmarkResult, error) {
	build, ok := nexmark.Queries[query]
	if !ok {
		return NexmarkResult{}, fmt.Errorf("unknown query %q: valid queries are %s", query, strings.Join(nexmark.QueryNames(), ", "))
	}
	if events < 1 {
		return NexmarkResult{}, fmt.Errorf("events %d must be at least 1", events)
	}
	env := weir.NewEnvironment(opts)
	build(nexmark.Events(env, nexmark.Config{Events: events}), nexmark.Output{})
	cpu0 := ProcessCPU()
	t0 := time.Now()
	if err := env.Execute(ctx, "nexmark-"+query); err != nil {
		return NexmarkResult{}, err
	}
	wall := time.Since(t0).Seconds()
	cpu := (ProcessCPU() - cpu0).Seconds()
	r := NexmarkResult{Query: query, Events: events, WallSeconds: wall, CPUSeconds: cpu}
	if wall > 0 {
		r.EventsPerSecond = float64(events) / wall
	}
	if cpu > 0 {
		r.EventsPerCoreSecond = float64(events) / cpu
	}
	return r, nil
}
