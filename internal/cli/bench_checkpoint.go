package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/internal/bench"
	"github.com/weirstream/weir/internal/runner"
)

// Defaults of `weir bench checkpoint`.
const (
	defaultCheckpointStateBytes = "256mb"
	defaultCheckpointUpdateRate = 10000
	defaultCheckpointInterval   = time.Second
	defaultCheckpointDuration   = 30 * time.Second
)

func (a *app) benchCheckpointCommand() *cobra.Command {
	var (
		modes       []string
		stateBytes  string
		updateRate  float64
		interval    time.Duration
		duration    time.Duration
		parallelism int
		materialize time.Duration
		asJSON      bool
	)
	c := &cobra.Command{
		Use:   "checkpoint [flags]",
		Short: "Compare checkpoint modes (full hashmap, full pebble, incremental, changelog) on one keyed job",
		Long: `Run the same keyed job once per mode in --modes, one after the other:
full-hashmap (hashmap backend, full checkpoints), full-pebble (pebble
backend, full checkpoints), incremental (pebble backend, incremental
checkpoints) and changelog (pebble backend with incremental
materializations every --materialize-interval, wrapped by the changelog
state backend: every change also goes to a log uploaded continuously, and
a checkpoint is the last materialization plus the log after it). The job
keeps a 1 KiB value per key, --state-bytes / 1 KiB keys; its source first
emits every key once as fast as possible (the load phase, whose
checkpoints are not measured), then keys chosen uniformly at random at
--update-rate records per second in total (0: as fast as possible) for
--duration, and ends. Checkpoints are taken every --interval into a
temporary directory, removed afterwards.

Per mode it reports the checkpoints triggered after the load phase: their
duration (trigger to durable _metadata) p50 / p99 / max, the average bytes
uploaded (CHECKPOINTED) and referenced (FULL), the update phase's
records/s as the keyed operator processed them, and RESTORE: the wall time
of a second run that restores the last checkpoint and processes no record
(deploy, restore every subtask's state, end). The changelog mode also
reports, for the last measured checkpoint, the full size of its
materialized part (MATERIALIZED) and of its log part (NON-MAT), and MATS:
the materializations completed by then, all subtasks, with those completed
after the load phase in parentheses. With --json exactly one JSON object
and nothing else on standard output. Logs go to standard error at level
warn unless --log-level is given.`,
		Example: `  weir bench checkpoint --modes full-pebble,incremental --state-bytes 64mb --duration 10s --json`,
		Args:    noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			logger, problems := a.benchSetup(c, parallelism)
			valid := strings.Join(bench.CheckpointModes, ", ")
			if len(modes) == 0 {
				problems = append(problems, fmt.Errorf("--modes: give at least one of %s", valid))
			}
			for _, m := range modes {
				if !containsString(bench.CheckpointModes, m) {
					problems = append(problems, fmt.Errorf("--modes: unknown mode %q: valid modes are %s", m, valid))
				}
			}
			size, err := config.ParseMemorySize(stateBytes)
			switch {
			case err != nil:
				problems = append(problems, fmt.Errorf("--state-bytes %q: %v", stateBytes, err))
			case size < bench.CheckpointValueSize:
				problems = append(problems, fmt.Errorf("--state-bytes %q: must be at least %d (one value)", stateBytes, bench.CheckpointValueSize))
			}
			if updateRate < 0 {
				problems = append(problems, fmt.Errorf("--update-rate %v: must not be negative (0: as fast as possible)", updateRate))
			}
			if interval <= 0 {
				problems = append(problems, fmt.Errorf("--interval %v: must be positive", interval))
			}
			if duration <= 0 {
				problems = append(problems, fmt.Errorf("--duration %v: must be positive", duration))
			}
			if materialize <= 0 {
				problems = append(problems, fmt.Errorf("--materialize-interval %v: must be positive", materialize))
			}
			if len(problems) > 0 {
				return usageError(problems...)
			}

			cfg := bench.CheckpointConfig{Modes: modes, StateBytes: size, UpdateRate: updateRate, Interval: interval,
				Duration: duration, Parallelism: parallelism, MaterializeInterval: materialize, Logger: logger}
			return runBench(a, c, logger, "bench-checkpoint", asJSON,
				func(ctx context.Context) (bench.CheckpointResult, error) { return bench.RunCheckpoint(ctx, cfg) },
				func(r bench.CheckpointResult) error { return printCheckpointResult(a, r) })
		},
	}
	f := c.Flags()
	f.StringSliceVar(&modes, "modes", bench.CheckpointModes, "comma-separated modes to run: "+strings.Join(bench.CheckpointModes, ", "))
	f.StringVar(&stateBytes, "state-bytes", defaultCheckpointStateBytes, "size of the keyed state (1 KiB per key), e.g. 64mb or 1g")
	f.Float64Var(&updateRate, "update-rate", defaultCheckpointUpdateRate, "records per second in total in the update phase (0: as fast as possible)")
	f.DurationVar(&interval, "interval", defaultCheckpointInterval, "checkpoint interval")
	f.DurationVar(&duration, "duration", defaultCheckpointDuration, "length of the update phase of each mode")
	f.DurationVar(&materialize, "materialize-interval", bench.DefaultMaterializeInterval,
		"changelog mode: interval of the periodic materializations (state.changelog.periodic-materialize.interval)")
	f.IntVarP(&parallelism, "parallelism", "p", 1, "parallelism of every operator")
	f.BoolVar(&asJSON, "json", false, "print one JSON object instead of a table")
	a.deferErrors(f)
	return c
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func printCheckpointResult(a *app, r bench.CheckpointResult) error {
	tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	changelog := false
	for _, m := range r.Modes {
		changelog = changelog || m.Mode == bench.ModeChangelog
	}
	head := "MODE\tCHECKPOINTS\tP50\tP99\tMAX\tCHECKPOINTED\tFULL\tRECORDS/S\tRESTORE\t"
	if changelog {
		head += "MATERIALIZED\tNON-MAT\tMATS\t"
	}
	fmt.Fprintln(tw, head)
	msStr := func(v float64) string { return fmt.Sprintf("%.0f ms", v) }
	for _, m := range r.Modes {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%.0f\t%s\t", m.Mode, m.Checkpoints, msStr(m.P50Ms), msStr(m.P99Ms),
			msStr(m.MaxMs), runner.FormatBytes(m.CheckpointedBytes), runner.FormatBytes(m.FullBytes), m.RecordsPerSecond,
			msStr(m.RestoreMs))
		switch {
		case m.Mode == bench.ModeChangelog:
			fmt.Fprintf(tw, "%s\t%s\t%d (%d)\t", runner.FormatBytes(m.MaterializedBytes),
				runner.FormatBytes(m.NonMaterializedBytes), m.Materializations, m.UpdateMaterializations)
		case changelog:
			fmt.Fprint(tw, "-\t-\t-\t")
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return failure(errors.New("write result: " + err.Error()))
	}
	return nil
}
