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

// Defaults of `weir bench unaligned` that are not bench's.
const (
	defaultUnalignedRecordSize = "1kb"
	defaultUnalignedBufferSize = "32kb"
)

func (a *app) benchUnalignedCommand() *cobra.Command {
	var (
		modes         []string
		parallelism   int
		checkpoints   int
		spin          time.Duration
		debloatTarget time.Duration
		recordSize    string
		bufferSize    string
		bpTimeout     time.Duration
		cpTimeout     time.Duration
		asJSON        bool
	)
	valid := strings.Join(bench.UnalignedModes, ", ")
	c := &cobra.Command{
		Use:   "unaligned [flags]",
		Short: "Compare aligned and unaligned checkpoints of a backpressured job",
		Long: `Run the same backpressured job once per mode in --modes, one after the
other, as Flink's CheckpointingTimeBenchmark (checkpointSingleInput) does:
an unbounded source emitting records of --record-size bytes as fast as it
can -> rebalance -> map -> rebalance -> a sink that busy-waits --spin per
record, every operator at --parallelism. Modes: ` + valid + `.
aligned: aligned exactly-once checkpoints; aligned-debloat: the same with
buffer debloating (target --debloat-target); unaligned-1ms: unaligned after
a 1 ms aligned timeout; unaligned: unaligned
checkpoints (execution.checkpointing.unaligned.enabled), whose barriers
overtake the queued data and persist it with the checkpoint.

Periodic checkpoints are off. Once every source subtask is backpressured
(it waited for output buffers more than half of the time, or its output
pool is full; the run fails if that does not happen within
--backpressure-timeout), the benchmark triggers --checkpoints checkpoints
one at a time, each once the sources are backpressured again, then cancels
the job. Checkpoints are kept in memory (mem://, no files, no fsync, like
the in-memory checkpoint storage of Flink's benchmark; hashmap backend).

Per mode it reports the checkpoints' duration, trigger to durable _metadata
(p50 / p99 / max), the median in-flight data a checkpoint persisted
(PERSISTED), the checkpoints measured and how many were unaligned, and the
medians of each checkpoint's largest start delay, alignment, synchronous
and asynchronous phase among its subtasks; then the ratio of the aligned
p50 to the unaligned p50 when both ran. With --json exactly one JSON
object and nothing else on standard output. Logs go to standard error at
level warn unless --log-level is given (at info, every checkpoint logs a
line with its maxima and the subtasks they come from).`,
		Example: `  weir bench unaligned
  weir bench unaligned --modes unaligned --checkpoints 20 --spin 1ms --json`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			logger, problems := a.benchSetup(c, parallelism)
			if len(modes) == 0 {
				problems = append(problems, fmt.Errorf("--modes: give at least one of %s", valid))
			}
			for _, m := range modes {
				if !containsString(bench.UnalignedModes, m) {
					problems = append(problems, fmt.Errorf("--modes: unknown mode %q: valid modes are %s", m, valid))
				}
			}
			if checkpoints < 1 {
				problems = append(problems, fmt.Errorf("--checkpoints %d: must be at least 1", checkpoints))
			}
			if spin <= 0 {
				problems = append(problems, fmt.Errorf("--spin %v: must be positive (the sink must be slower than the source)", spin))
			}
			rsize, err := config.ParseMemorySize(recordSize)
			if err != nil {
				problems = append(problems, fmt.Errorf("--record-size %q: %v", recordSize, err))
			}
			bsize, err := config.ParseMemorySize(bufferSize)
			switch {
			case err != nil:
				problems = append(problems, fmt.Errorf("--buffer-size %q: %v", bufferSize, err))
			case bsize < 256:
				problems = append(problems, fmt.Errorf("--buffer-size %q: must be at least 256 bytes", bufferSize))
			}
			if bpTimeout <= 0 {
				problems = append(problems, fmt.Errorf("--backpressure-timeout %v: must be positive", bpTimeout))
			}
			if cpTimeout <= 0 {
				problems = append(problems, fmt.Errorf("--checkpoint-timeout %v: must be positive", cpTimeout))
			}
			if len(problems) > 0 {
				return usageError(problems...)
			}

			cfg := bench.UnalignedConfig{Modes: modes, Parallelism: parallelism, Checkpoints: checkpoints, Spin: spin, DebloatTarget: debloatTarget,
				RecordSize: int(rsize), BufferSize: int(bsize), BackpressureTimeout: bpTimeout,
				CheckpointTimeout: cpTimeout, Logger: logger}
			return runBench(a, c, logger, "bench-unaligned", asJSON,
				func(ctx context.Context) (bench.UnalignedResult, error) { return bench.RunUnaligned(ctx, cfg) },
				func(r bench.UnalignedResult) error { return printUnalignedResult(a, r) })
		},
	}
	f := c.Flags()
	f.StringSliceVar(&modes, "modes", bench.UnalignedModes, "comma-separated modes to run: "+valid)
	f.IntVarP(&parallelism, "parallelism", "p", bench.DefaultUnalignedParallelism,
		"parallelism of every operator (Flink's benchmark: 4; each sink subtask keeps a core busy)")
	f.IntVar(&checkpoints, "checkpoints", bench.DefaultUnalignedCheckpoints, "checkpoints triggered per mode")
	f.DurationVar(&spin, "spin", bench.DefaultUnalignedSpin, "the sink's busy wait per record")
	f.DurationVar(&debloatTarget, "debloat-target", bench.DefaultDebloatTarget, "buffer debloating target of the aligned-debloat mode (taskmanager.network.memory.buffer-debloat.target)")
	f.StringVar(&recordSize, "record-size", defaultUnalignedRecordSize, "payload of each record, e.g. 1kb or 64")
	f.StringVar(&bufferSize, "buffer-size", defaultUnalignedBufferSize,
		"network buffer size (taskmanager.memory.segment-size; Flink's benchmark: 8kb)")
	f.DurationVar(&bpTimeout, "backpressure-timeout", bench.DefaultBackpressureTimeout,
		"how long to wait for the sources to be backpressured before each checkpoint")
	f.DurationVar(&cpTimeout, "checkpoint-timeout", bench.DefaultUnalignedCheckpointTimeout,
		"how long a checkpoint may take (execution.checkpointing.timeout)")
	f.BoolVar(&asJSON, "json", false, "print one JSON object instead of a table")
	a.deferErrors(f)
	return c
}

func printUnalignedResult(a *app, r bench.UnalignedResult) error {
	tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "MODE\tCHECKPOINTS\tUNALIGNED\tP50\tP99\tMAX\tPERSISTED\tSTART DELAY\tALIGNMENT\tSYNC\tASYNC\t")
	for _, m := range r.Modes {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", m.Mode, m.Checkpoints, m.UnalignedCheckpoints,
			fmtMs(m.P50Ms), fmtMs(m.P99Ms), fmtMs(m.MaxMs), runner.FormatBytes(m.PersistedBytes),
			fmtMs(m.StartDelayMs), fmtMs(m.AlignmentMs), fmtMs(m.SyncMs), fmtMs(m.AsyncMs))
	}
	if err := tw.Flush(); err != nil {
		return failure(errors.New("write result: " + err.Error()))
	}
	if r.AlignedToUnalignedP50 > 0 {
		fmt.Fprintf(a.stdout, "aligned p50 / unaligned p50: %.1fx\n", r.AlignedToUnalignedP50)
	}
	return nil
}

// fmtMs renders milliseconds with a precision that suits their size.
func fmtMs(v float64) string {
	if v < 10 {
		return fmt.Sprintf("%.2f ms", v)
	}
	return fmt.Sprintf("%.0f ms", v)
}
