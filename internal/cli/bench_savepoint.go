package cli

import (
	"context"
	"errors"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/internal/bench"
	"github.com/weirstream/weir/internal/runner"
)

func (a *app) benchSavepointCommand() *cobra.Command {
	var (
		stateBytes  string
		rounds      int
		updateRate  float64
		parallelism int
		asJSON      bool
	)
	c := &cobra.Command{
		Use:   "savepoint [flags]",
		Short: "Compare canonical and native savepoints of a large pebble state",
		Long: `Load --state-bytes of keyed state (1 KiB per key) into the pebble backend,
take --rounds savepoints of each format (canonical: the backend-independent
key-group stream; native: pebble's SST files copied into the savepoint)
while the job runs at --update-rate records per second, the formats
alternating which goes first, then restore the last savepoint of each
format in a job that processes no record.

Per format it reports the savepoint duration (trigger to durable
_metadata) median, min and max, the savepoint's size and file count, and
RESTORE: the wall time of the restoring run (deploy, restore, end). Files
go to a temporary directory, removed afterwards. With --json exactly one
JSON object and nothing else on standard output.`,
		Example: `  weir bench savepoint --state-bytes 1g --rounds 3`,
		Args:    noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			logger, problems := a.benchSetup(c, parallelism)
			size, err := config.ParseMemorySize(stateBytes)
			switch {
			case err != nil:
				problems = append(problems, fmt.Errorf("--state-bytes %q: %v", stateBytes, err))
			case size < bench.CheckpointValueSize:
				problems = append(problems, fmt.Errorf("--state-bytes %q: must be at least %d (one value)", stateBytes, bench.CheckpointValueSize))
			}
			if rounds < 1 {
				problems = append(problems, fmt.Errorf("--rounds %d: must be at least 1", rounds))
			}
			if updateRate < 0 {
				problems = append(problems, fmt.Errorf("--update-rate %v: must not be negative (0: no updates)", updateRate))
			}
			if len(problems) > 0 {
				return usageError(problems...)
			}
			cfg := bench.SavepointConfig{StateBytes: size, Rounds: rounds, UpdateRate: updateRate, Parallelism: parallelism, Logger: logger}
			return runBench(a, c, logger, "bench-savepoint", asJSON,
				func(ctx context.Context) (bench.SavepointResult, error) { return bench.RunSavepoint(ctx, cfg) },
				func(r bench.SavepointResult) error { return printSavepointResult(a, r) })
		},
	}
	f := c.Flags()
	f.StringVar(&stateBytes, "state-bytes", "256mb", "size of the keyed state (1 KiB per key), e.g. 64mb or 1g")
	f.IntVar(&rounds, "rounds", 3, "savepoints per format")
	f.Float64Var(&updateRate, "update-rate", 1000, "records per second in total while the savepoints are taken")
	f.IntVarP(&parallelism, "parallelism", "p", 1, "parallelism of every operator")
	f.BoolVar(&asJSON, "json", false, "print one JSON object instead of a table")
	a.deferErrors(f)
	return c
}

func printSavepointResult(a *app, r bench.SavepointResult) error {
	fmt.Fprintf(a.stdout, "state %s (%d keys), loaded in %.1f s\n", runner.FormatBytes(r.StateBytes), r.Keys, r.LoadMs/1000)
	tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "FORMAT\tROUNDS\tMEDIAN\tMIN\tMAX\tSIZE\tFILES\tRESTORE\t")
	for _, f := range r.Formats {
		fmt.Fprintf(tw, "%s\t%d\t%.0f ms\t%.0f ms\t%.0f ms\t%s\t%d\t%.0f ms\t\n", f.Format, f.Rounds, f.MedianMs, f.MinMs, f.MaxMs,
			runner.FormatBytes(f.Bytes), f.Files, f.RestoreMs)
	}
	if err := tw.Flush(); err != nil {
		return failure(errors.New("write result: " + err.Error()))
	}
	return nil
}
