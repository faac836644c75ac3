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

// FlinkNexmarkPerCore are the per-core throughputs (events/s) of Flink's
// Nexmark repository's published V1 results, for comparison.
var FlinkNexmarkPerCore = map[string]float64{
	"q0": 155_000, "q1": 158_000, "q2": 175_000, "q3": 152_000, "q4": 34_000,
	"q5": 22_000, "q7": 12_000, "q8": 146_000, "q11": 40_000,
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
