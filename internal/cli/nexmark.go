package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/weirstream/weir/internal/bench"
	"github.com/weirstream/weir/internal/nexmark"
)

// nexmarkCommand is `weir nexmark`, grouping the Nexmark tools that are not
// benchmarks.
func (a *app) nexmarkCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "nexmark",
		Short: "Nexmark tools: write the generated events",
		Args:  cobra.ArbitraryArgs,
		RunE:  a.groupRunE("command"),
	}
	c.AddCommand(a.nexmarkGenerateCommand())
	return c
}

func (a *app) nexmarkGenerateCommand() *cobra.Command {
	var (
		events int64
		tps    int64
		seed   uint64
		output string
	)
	c := &cobra.Command{
		Use:   "generate --events N --output FILE [flags]",
		Short: "Write Nexmark events as JSON lines shaped like Flink's Nexmark table",
		Long: `Write the events 0 to --events - 1 of the Nexmark generator that 'weir bench
nexmark' runs on (same --tps and --seed: same events), in order, one JSON
object per line, shaped like the table of Flink's Nexmark benchmark:

  {"event_type":0|1|2,"person":{...}|null,"auction":{...}|null,"bid":{...}|null}

event_type 0 is a person (id, name, emailAddress, creditCard, city, state,
dateTime, extra), 1 an auction (id, itemName, description, initialBid,
reserve, dateTime, expires, seller, category, extra), 2 a bid (auction,
bidder, price, channel, url, dateTime, extra); times are Unix epoch
milliseconds. The same flags give the same bytes. --output - writes to
standard output; a file is written whole or, if the command fails, not at
all.`,
		Example: `  weir nexmark generate --events 1000000 --output events.jsonl
  weir nexmark generate --events 100 --tps 1000 --seed 7 --output - | head -3`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			problems := a.flagProblemsOf(c.Flags())
			minLevel := slog.LevelWarn
			if c.Flags().Changed("log-level") {
				minLevel = slog.LevelDebug
			}
			logger, err := newLogger(a.stderr, a.logFormat, a.logLevel, minLevel)
			if err != nil {
				problems = append(problems, err)
			}
			if events < 1 {
				problems = append(problems, fmt.Errorf("--events %d: must be at least 1", events))
			}
			if tps < 1 {
				problems = append(problems, fmt.Errorf("--tps %d: must be at least 1 (events per second of event time)", tps))
			}
			if output == "" {
				problems = append(problems, fmt.Errorf("--output: give a file, or - for standard output"))
			}
			if len(problems) > 0 {
				return usageError(problems...)
			}
			var w io.Writer = a.stdout
			var file *resultFile
			if output != "-" {
				if file, err = createResultFile(output); err != nil {
					return usageError(fmt.Errorf("--output: %w", err))
				}
				defer file.Abort()
				w = file
			}
			cfg := nexmark.Config{Events: events, FirstEventRate: tps, Seed: seed}
			return execute(c.Context(), logger, "nexmark-generate", func(ctx context.Context) error {
				if err := nexmark.WriteEventsJSON(ctx, w, cfg); err != nil {
					return err
				}
				if file != nil {
					if err := file.Finish(); err != nil {
						return fmt.Errorf("--output: %w", err)
					}
				}
				return nil
			})
		},
	}
	f := c.Flags()
	f.Int64Var(&events, "events", 0, "number of events to write (required)")
	f.Int64Var(&tps, "tps", bench.DefaultNexmarkTPS, "events per second of event time (the generator's rate, as in 'weir bench nexmark')")
	f.Uint64Var(&seed, "seed", defaultNexmarkSeed, "seed of the generator")
	f.StringVar(&output, "output", "", "file to write, - for standard output (required)")
	a.deferErrors(f)
	return c
}
