package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/internal/bench"
	"github.com/weirstream/weir/internal/nexmark"
)

// defaultNexmarkEvents is `weir bench nexmark`'s default --events.
const defaultNexmarkEvents = 10_000_000

func (a *app) benchNexmarkCommand() *cobra.Command {
	var (
		query       string
		events      int64
		parallelism int
		backend     string
		asJSON      bool
	)
	c := &cobra.Command{
		Use:   "nexmark --query qN [flags]",
		Short: "Run a Nexmark query over generated events and measure the rate",
		Long: `Run one Nexmark query (` + strings.Join(nexmark.QueryNames(), ", ") + `) over --events generated
events (persons, auctions and bids in the Nexmark proportions) into a
discarding sink, and print events, wall seconds, process CPU seconds,
events/s and events per CPU-second (the per-core figure Flink's Nexmark
results report). With --json exactly one JSON object:
{"query":"q5","events":N,"wallSeconds":S,"cpuSeconds":C,"eventsPerSecond":X,"eventsPerCoreSecond":Y}.`,
		Example: `  weir bench nexmark --query q5 --events 10000000 --parallelism 2 --json`,
		Args:    noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			logger, problems := a.benchSetup(c, parallelism)
			if _, ok := nexmark.Queries[query]; !ok {
				problems = append(problems, fmt.Errorf("--query %q: must be one of %s", query, strings.Join(nexmark.QueryNames(), ", ")))
			}
			if events < 1 {
				problems = append(problems, fmt.Errorf("--events %d: must be at least 1", events))
			}
			if backend != weir.BackendHashMap && backend != weir.BackendPebble {
				problems = append(problems, fmt.Errorf("--state-backend %q: must be %s or %s", backend, weir.BackendHashMap, weir.BackendPebble))
			}
			if len(problems) > 0 {
				return usageError(problems...)
			}
			opts := weir.Options{Parallelism: parallelism, StateBackend: backend, Logger: logger}
			return runBench(a, c, logger, "nexmark-"+query, asJSON,
				func(ctx context.Context) (bench.NexmarkResult, error) {
					return bench.RunNexmark(ctx, opts, query, events)
				},
				func(r bench.NexmarkResult) error { return printNexmarkResult(a, r) })
		},
	}
	f := c.Flags()
	f.StringVar(&query, "query", "", "the query: "+strings.Join(nexmark.QueryNames(), ", ")+" (required)")
	f.Int64Var(&events, "events", defaultNexmarkEvents, "number of events to generate")
	f.IntVarP(&parallelism, "parallelism", "p", 1, "parallelism of every operator")
	f.StringVar(&backend, "state-backend", weir.BackendHashMap, "state backend: hashmap or pebble")
	f.BoolVar(&asJSON, "json", false, "print one JSON object instead of a table")
	a.deferErrors(f)
	return c
}

func printNexmarkResult(a *app, r bench.NexmarkResult) error {
	tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "query\t%s\n", r.Query)
	fmt.Fprintf(tw, "events\t%d\n", r.Events)
	fmt.Fprintf(tw, "wall time\t%.3f s\n", r.WallSeconds)
	fmt.Fprintf(tw, "CPU time\t%.3f s\n", r.CPUSeconds)
	fmt.Fprintf(tw, "events/s\t%.0f\n", r.EventsPerSecond)
	fmt.Fprintf(tw, "events/CPU-s\t%.0f\n", r.EventsPerCoreSecond)
	if f, ok := bench.FlinkNexmarkPerCore[r.Query]; ok {
		fmt.Fprintf(tw, "Flink V1 events/CPU-s\t%.0f (weir: %.1fx)\n", f, r.EventsPerCoreSecond/f)
	}
	if err := tw.Flush(); err != nil {
		return failure(errors.New("write result: " + err.Error()))
	}
	return nil
}
