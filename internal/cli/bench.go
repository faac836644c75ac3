package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/internal/bench"
)

// Defaults of `weir bench pipeline`.
const (
	defaultBenchRecords = 50_000_000
	defaultBenchEdge    = bench.EdgeChained
	defaultBenchRounds  = 5
)

// benchCommand is `weir bench`, grouping the benchmarks.
func (a *app) benchCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "bench",
		Short: "Measure the runtime's throughput",
		Args:  cobra.ArbitraryArgs,
		RunE:  a.groupRunE("command"),
	}
	c.AddCommand(a.benchPipelineCommand())
	c.AddCommand(a.benchCheckpointCommand())
	c.AddCommand(a.benchSavepointCommand())
	c.AddCommand(a.benchNexmarkCommand())
	c.AddCommand(a.benchUnalignedCommand())
	return c
}

func (a *app) benchPipelineCommand() *cobra.Command {
	var (
		edge        string
		records     int64
		parallelism int
		asJSON      bool
		withMetrics bool
		abMetrics   bool
		rounds      int
		tms         int
	)
	c := &cobra.Command{
		Use:   "pipeline [flags]",
		Short: "Push records through source -> map -> filter -> discard and measure the rate",
		Long: `Run the pipeline benchmark once: a sequence source of --records int64s, a
map, a filter that keeps every record and a discarding sink, with every
operator at --parallelism. With --edge chained every operator is chained
(direct calls); with --edge rebalance a rebalance edge separates the map from
the filter, so every record is serialized, sent through the network stack and
deserialized.

With --metrics (the default) the tasks export their metrics, as a job
serving the REST API or Prometheus endpoint does, and a scraper reads them
once a second; --metrics=false runs without. --ab-metrics measures what
they cost: after a warm-up run it runs the pipeline --rounds times without
and with metrics, alternately, and prints each side's median records per
CPU-second and their ratio (with over without).

It prints wall time, CPU time (user + system, whole process) and records per
second and per CPU-second; with --json exactly one JSON object and nothing
else on standard output. Logs go to standard error at level warn unless
--log-level is given.`,
		Example: `  weir bench pipeline --edge rebalance --records 10000000 --parallelism 2 --json
  weir bench pipeline --edge rebalance --ab-metrics --rounds 10`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			logger, problems := a.benchSetup(c, parallelism)
			if edge != bench.EdgeChained && edge != bench.EdgeRebalance {
				problems = append(problems, fmt.Errorf("--edge %q: must be %s or %s", edge, bench.EdgeChained, bench.EdgeRebalance))
			}
			if records < 1 {
				problems = append(problems, fmt.Errorf("--records %d: must be at least 1", records))
			}
			if rounds < 1 {
				problems = append(problems, fmt.Errorf("--rounds %d: must be at least 1", rounds))
			}
			if tms < 0 {
				problems = append(problems, fmt.Errorf("--taskmanagers %d: must not be negative (0 runs in process)", tms))
			}
			if tms > 0 && abMetrics {
				problems = append(problems, errors.New("--taskmanagers and --ab-metrics cannot be combined"))
			}
			if abMetrics && c.Flags().Changed("metrics") {
				problems = append(problems, errors.New("--ab-metrics runs both with and without metrics: drop --metrics"))
			}
			if len(problems) > 0 {
				return usageError(problems...)
			}
			opts := weir.Options{Parallelism: parallelism, Logger: logger}
			if abMetrics {
				return runBench(a, c, logger, "bench-pipeline-"+edge, asJSON,
					func(ctx context.Context) (bench.PipelineABResult, error) {
						return bench.RunPipelineAB(ctx, opts, edge, records, rounds)
					},
					func(r bench.PipelineABResult) error { return printPipelineAB(a, r) })
			}
			return runBench(a, c, logger, "bench-pipeline-"+edge, asJSON,
				func(ctx context.Context) (bench.PipelineResult, error) {
					if tms > 0 {
						return bench.RunPipelineCluster(ctx, opts, edge, records, tms)
					}
					return bench.RunPipeline(ctx, opts, edge, records, withMetrics)
				},
				func(r bench.PipelineResult) error { return printPipelineResult(a, r) })
		},
	}
	f := c.Flags()
	f.StringVar(&edge, "edge", defaultBenchEdge, "edge between map and filter: chained or rebalance")
	f.IntVar(&tms, "taskmanagers", 0, "run on an in-process cluster of this many task managers exchanging records over TCP on loopback (0: every subtask in process)")
	f.Int64Var(&records, "records", defaultBenchRecords, "number of records the source emits")
	f.IntVarP(&parallelism, "parallelism", "p", 1, "parallelism of every operator")
	f.BoolVar(&asJSON, "json", false, "print one JSON object instead of a table")
	f.BoolVar(&withMetrics, "metrics", true, "export the tasks' metrics to a registry scraped once a second")
	f.BoolVar(&abMetrics, "ab-metrics", false, "run without and with metrics alternately and compare the medians")
	f.IntVar(&rounds, "rounds", defaultBenchRounds, "with --ab-metrics: runs of each side")
	a.deferErrors(f)
	return c
}

func printPipelineAB(a *app, r bench.PipelineABResult) error {
	tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "edge\t%s\n", r.Edge)
	fmt.Fprintf(tw, "parallelism\t%d\n", r.Parallelism)
	fmt.Fprintf(tw, "records\t%d\n", r.Records)
	fmt.Fprintf(tw, "rounds\t%d\n", len(r.Off))
	fmt.Fprintf(tw, "without metrics records/CPU-s\t%s\n", formatRates(r.Off))
	fmt.Fprintf(tw, "with metrics records/CPU-s\t%s\n", formatRates(r.On))
	fmt.Fprintf(tw, "median without\t%.0f\n", r.OffMedian)
	fmt.Fprintf(tw, "median with\t%.0f\n", r.OnMedian)
	fmt.Fprintf(tw, "ratio (with/without)\t%.4f\n", r.Ratio)
	if err := tw.Flush(); err != nil {
		return failure(errors.New("write result: " + err.Error()))
	}
	return nil
}

func formatRates(vs []float64) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = fmt.Sprintf("%.0f", v)
	}
	return strings.Join(s, " ")
}

func printPipelineResult(a *app, r bench.PipelineResult) error {
	tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "edge\t%s\n", r.Edge)
	fmt.Fprintf(tw, "metrics\t%t\n", r.Metrics)
	fmt.Fprintf(tw, "parallelism\t%d\n", r.Parallelism)
	fmt.Fprintf(tw, "records\t%d\n", r.Records)
	fmt.Fprintf(tw, "wall time\t%.3f s\n", r.WallSeconds)
	fmt.Fprintf(tw, "CPU time\t%.3f s\n", r.CPUSeconds)
	fmt.Fprintf(tw, "records/s\t%.0f\n", r.RecordsPerSecond)
	fmt.Fprintf(tw, "records/CPU-s\t%.0f\n", r.RecordsPerCoreSecond)
	if err := tw.Flush(); err != nil {
		return failure(errors.New("write result: " + err.Error()))
	}
	return nil
}

// benchSetup is what every `weir bench` command checks first: the flags'
// own problems, the logger (level warn unless --log-level is given) and
// --parallelism. The command appends its own problems and reports them all.
func (a *app) benchSetup(c *cobra.Command, parallelism int) (*slog.Logger, []error) {
	problems := a.flagProblemsOf(c.Flags())
	minLevel := slog.LevelWarn
	if c.Flags().Changed("log-level") {
		minLevel = slog.LevelDebug
	}
	logger, err := newLogger(a.stderr, a.logFormat, a.logLevel, minLevel)
	if err != nil {
		problems = append(problems, err)
	}
	opt, _ := config.Lookup("parallelism.default")
	if p := int64(parallelism); p < opt.Min || p > opt.Max {
		problems = append(problems, fmt.Errorf("--parallelism %d: must be between %d and %d", p, opt.Min, opt.Max))
	}
	return logger, problems
}

// runBench runs a benchmark (interruptible, see execute) and prints its
// result: one JSON object with --json, else print's text.
func runBench[R any](a *app, c *cobra.Command, logger *slog.Logger, name string, asJSON bool, run func(context.Context) (R, error), print func(R) error) error {
	var r R
	err := execute(c.Context(), logger, name, func(ctx context.Context) error {
		var err error
		r, err = run(ctx)
		return err
	})
	if err != nil {
		return err
	}
	if asJSON {
		if err := json.NewEncoder(a.stdout).Encode(r); err != nil {
			return failure(err)
		}
		return nil
	}
	return print(r)
}
