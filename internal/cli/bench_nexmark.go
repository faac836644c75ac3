package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/internal/bench"
	"github.com/weirstream/weir/internal/nexmark"
)

// Defaults of `weir bench nexmark`: Flink's Nexmark suite's setup (see
// bench.DefaultNexmarkConfig) but for the number of events, 10,000,000
// instead of 100,000,000 so that a query runs in seconds to a minute here.
const (
	defaultNexmarkEvents = 10_000_000
	defaultNexmarkSeed   = 0
)

// Checkpointing modes as `weir bench nexmark` spells them.
const (
	modeExactlyOnce = "exactly-once"
	modeAtLeastOnce = "at-least-once"
)

func (a *app) benchNexmarkCommand() *cobra.Command {
	def := bench.DefaultNexmarkConfig()
	var (
		query       string
		all         bool
		events      int64
		tps         int64
		seed        uint64
		parallelism int
		backend     string
		interval    time.Duration
		incremental bool
		mode        string
		output      string
		asJSON      bool
	)
	c := &cobra.Command{
		Use:   "nexmark (--query qN | --all) [flags]",
		Short: "Run Nexmark queries over generated events and measure the rate",
		Long: `Run one Nexmark query (--query, one of ` + strings.Join(nexmark.QueryNames(), ", ") + `) or every
query one after another (--all) over --events generated events (persons,
auctions and bids in the Nexmark proportions, --tps events per second of
event time over all subtasks) into a counting sink, and print events, wall
seconds, process CPU seconds, events/s and events per CPU-second (the
per-core figure Flink's Nexmark results report) beside Flink's.

The defaults are the setup of Flink's Nexmark suite: the pebble state
backend (for RocksDB), incremental checkpoints every 3 minutes in
exactly-once mode, 10,000,000 events/s of event time; only --events is
smaller (10,000,000 instead of 100,000,000). Checkpoints and pebble's
files go to a temporary directory removed afterwards. The output also
gives the setup, the event time the input spans (events / tps) and the
rows the query emitted, so that a reader sees windows fired.

With --json exactly one JSON object (an array of them with --all):
{"query":"q5","events":N,"wallSeconds":S,"cpuSeconds":C,"eventsPerSecond":X,
"eventsPerCoreSecond":Y,"parallelism":1,"seed":0,"stateBackend":"pebble",
"checkpointing":{"interval":"3m0s","mode":"exactly-once","incremental":true},
"tps":10000000,"eventTimeSpanSeconds":1,"resultRows":R}.

--output FILE (with --query) writes the query's result rows as JSON lines
with the column names of its SQL result, sorted, and for queries whose
result updates only the last row per key: the same flags give the same
bytes. The rows are kept in memory until the input ends; the run gets no
restarts (a failure fails it), and FILE is written only if it succeeds.`,
		Example: `  weir bench nexmark --query q5 --events 10000000 --parallelism 2 --json
  weir bench nexmark --all --events 1000000 --state-backend hashmap --checkpoint-interval 0
  weir bench nexmark --query q4 --events 100000 --output q4.jsonl`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			logger, problems := a.benchSetup(c, parallelism)
			switch {
			case all && query != "":
				problems = append(problems, errors.New("--query and --all are mutually exclusive: give one"))
			case !all && query == "":
				problems = append(problems, fmt.Errorf("give --query (one of %s) or --all", strings.Join(nexmark.QueryNames(), ", ")))
			case query != "":
				if _, ok := nexmark.Queries[query]; !ok {
					problems = append(problems, fmt.Errorf("--query %q: must be one of %s", query, strings.Join(nexmark.QueryNames(), ", ")))
				}
			}
			if events < 1 {
				problems = append(problems, fmt.Errorf("--events %d: must be at least 1", events))
			}
			if tps < 1 {
				problems = append(problems, fmt.Errorf("--tps %d: must be at least 1 (events per second of event time)", tps))
			}
			if backend != weir.BackendHashMap && backend != weir.BackendPebble {
				problems = append(problems, fmt.Errorf("--state-backend %q: must be %s or %s", backend, weir.BackendPebble, weir.BackendHashMap))
			}
			if interval < 0 {
				problems = append(problems, fmt.Errorf("--checkpoint-interval %v: must not be negative (0 turns checkpointing off)", interval))
			}
			weirMode := ""
			switch mode {
			case modeExactlyOnce:
				weirMode = weir.CheckpointingExactlyOnce
			case modeAtLeastOnce:
				weirMode = weir.CheckpointingAtLeastOnce
			default:
				problems = append(problems, fmt.Errorf("--checkpointing-mode %q: must be %s or %s", mode, modeExactlyOnce, modeAtLeastOnce))
			}
			if output != "" && all {
				problems = append(problems, errors.New("--output: only with --query (one query's result rows)"))
			}
			if len(problems) > 0 {
				return usageError(problems...)
			}

			cfg := bench.NexmarkConfig{Events: events, TPS: tps, Seed: seed, Parallelism: parallelism,
				StateBackend: backend, CheckpointInterval: interval, Incremental: incremental,
				CheckpointingMode: weirMode, Logger: logger}
			if all {
				return runBench(a, c, logger, "nexmark-all", asJSON,
					func(ctx context.Context) ([]bench.NexmarkResult, error) {
						var rs []bench.NexmarkResult
						for _, q := range nexmark.QueryNames() {
							cfg.Query = q
							r, err := bench.RunNexmark(ctx, cfg)
							if err != nil {
								return nil, fmt.Errorf("%s: %w", q, err)
							}
							rs = append(rs, r)
						}
						return rs, nil
					},
					func(rs []bench.NexmarkResult) error { return printNexmarkAll(a, rs) })
			}
			cfg.Query = query
			var out *resultFile
			if output != "" {
				var err error
				if out, err = createResultFile(output); err != nil {
					return usageError(fmt.Errorf("--output: %w", err))
				}
				defer out.Abort()
				cfg.Output = out
			}
			return runBench(a, c, logger, "nexmark-"+query, asJSON,
				func(ctx context.Context) (bench.NexmarkResult, error) {
					r, err := bench.RunNexmark(ctx, cfg)
					if err == nil && out != nil {
						if err = out.Finish(); err != nil {
							err = fmt.Errorf("--output: %w", err)
						}
					}
					return r, err
				},
				func(r bench.NexmarkResult) error { return printNexmarkResult(a, r) })
		},
	}
	f := c.Flags()
	f.StringVar(&query, "query", "", "the query: "+strings.Join(nexmark.QueryNames(), ", ")+" (this or --all)")
	f.BoolVar(&all, "all", false, "run every query, one after another, with the same flags")
	f.Int64Var(&events, "events", defaultNexmarkEvents, "number of events to generate")
	f.Int64Var(&tps, "tps", def.TPS, "events per second of event time, all subtasks together (the generator's rate)")
	f.Uint64Var(&seed, "seed", defaultNexmarkSeed, "seed of the generator")
	f.IntVarP(&parallelism, "parallelism", "p", 1, "parallelism of every operator")
	f.StringVar(&backend, "state-backend", def.StateBackend, "state backend: pebble or hashmap")
	f.DurationVar(&interval, "checkpoint-interval", def.CheckpointInterval, "checkpoint interval (0: checkpointing off)")
	f.BoolVar(&incremental, "incremental", def.Incremental, "incremental checkpoints (pebble only)")
	f.StringVar(&mode, "checkpointing-mode", modeExactlyOnce, "checkpointing mode: exactly-once or at-least-once")
	f.StringVar(&output, "output", "", "write the query's result rows to this file as JSON lines (with --query)")
	f.BoolVar(&asJSON, "json", false, "print one JSON object (an array with --all) instead of a table")
	a.deferErrors(f)
	return c
}

// setupLine describes the run's setup in one line of the table output.
func setupLine(r bench.NexmarkResult) string {
	cp := "off"
	if r.Checkpointing.Interval != "off" {
		cp = "every " + r.Checkpointing.Interval + ", " + r.Checkpointing.Mode
		if r.Checkpointing.Incremental {
			cp += ", incremental"
		} else {
			cp += ", full"
		}
	}
	return fmt.Sprintf("%s backend, checkpoints %s, parallelism %d, seed %d", r.StateBackend, cp, r.Parallelism, r.Seed)
}

func printNexmarkResult(a *app, r bench.NexmarkResult) error {
	tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "query\t%s\n", r.Query)
	fmt.Fprintf(tw, "setup\t%s\n", setupLine(r))
	fmt.Fprintf(tw, "events\t%d\n", r.Events)
	fmt.Fprintf(tw, "tps\t%d (event time spanned: %.3f s)\n", r.TPS, r.EventTimeSpanSeconds)
	fmt.Fprintf(tw, "result rows\t%d\n", r.ResultRows)
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

func printNexmarkAll(a *app, rs []bench.NexmarkResult) error {
	if len(rs) > 0 {
		r := rs[0]
		fmt.Fprintf(a.stdout, "%d events at %d tps (%.3f s of event time); %s\n", r.Events, r.TPS, r.EventTimeSpanSeconds, setupLine(r))
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "QUERY\tEVENTS/CORE-S\tFLINK EVENTS/CORE-S\tRATIO\tRESULT ROWS\t")
	for _, r := range rs {
		flink, ratio := "-", "-"
		if f, ok := bench.FlinkNexmarkPerCore[r.Query]; ok {
			flink, ratio = fmt.Sprintf("%.0f", f), fmt.Sprintf("%.1fx", r.EventsPerCoreSecond/f)
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%s\t%s\t%d\t\n", r.Query, r.EventsPerCoreSecond, flink, ratio, r.ResultRows)
	}
	if err := tw.Flush(); err != nil {
		return failure(errors.New("write result: " + err.Error()))
	}
	return nil
}

// resultFile is an output file written whole or not at all: writes go to
// a temporary file beside it, renamed over it by Finish; Abort removes
// the temporary file unless Finish succeeded, so that a failed run leaves
// an existing file alone.
type resultFile struct {
	f    *os.File
	path string
	done bool
}

func createResultFile(path string) (*resultFile, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return nil, err
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, err
	}
	return &resultFile{f: f, path: path}, nil
}

func (r *resultFile) Write(p []byte) (int, error) { return r.f.Write(p) }

// Finish syncs, closes and renames the file into place.
func (r *resultFile) Finish() error {
	if err := r.f.Sync(); err != nil {
		return err
	}
	if err := r.f.Close(); err != nil {
		return err
	}
	if err := os.Rename(r.f.Name(), r.path); err != nil {
		return err
	}
	r.done = true
	return nil
}

// Abort removes the temporary file unless Finish succeeded.
func (r *resultFile) Abort() {
	if !r.done {
		r.f.Close()
		os.Remove(r.f.Name())
	}
}

var _ io.Writer = (*resultFile)(nil)
