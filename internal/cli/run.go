package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/internal/jobs"
	"github.com/weirstream/weir/internal/runner"
)

// runFlags are the flags common to every job, persistent flags of `run`.
type runFlags struct {
	parallelism      int
	sets             []string
	configPath       string
	from             string
	claimMode        string
	allowNonRestored bool
	incremental      bool
	changelog        bool
	force            bool
	// local, under `weir cluster local`, starts task manager processes
	// and makes this process their job manager.
	local *localCluster
}

func (a *app) runCommand() *cobra.Command { return a.runCommandFor(nil) }

// runCommandFor is `weir run`, or with local `weir cluster local`.
func (a *app) runCommandFor(local *localCluster) *cobra.Command {
	c := &cobra.Command{
		Use:   "run <job> [flags]",
		Short: "Run a built-in job",
		Long: `Run a built-in job until its input ends, it fails, or it is interrupted.

Configuration comes from the built-in defaults, then --config FILE, then the
--set items in order, then --parallelism; the last setting of a key wins.
'weir config keys' lists the keys. The key pipeline.name, if set, replaces the
job's name in logs.

Every problem with the flags, the configuration and the job's settings is
reported at once, before the job starts (exit code 2). A job with
checkpointing holds its checkpoint directory while it runs: a second run
against the same directory is refused (exit code 2) with the holder's pid,
host and start time; --force takes it over, only for a holder known dead. A job that fails while
running exits with 1 and names the failing operator and subtask; Ctrl-C
(SIGINT) or SIGTERM stops the job and exits with 130.`,
		Example: `  weir run wordcount --parallelism 4 --input book.txt --output counts.txt
  weir run counter --output out --set execution.checkpointing.interval=1s
  weir run counter --output out --set execution.checkpointing.interval=1s --from latest
  weir run wordcount --lines 100000 --set taskmanager.memory.segment-size=64kb
  weir run wordcount --config weir.yaml --log-format json`,
		Args: cobra.ArbitraryArgs,
		// Let an unknown job be reported as such, not as an unknown flag.
		FParseErrWhitelist: cobra.FParseErrWhitelist{UnknownFlags: true},
		RunE:               a.groupRunE("job"),
	}
	rf := &runFlags{local: local}
	pf := c.PersistentFlags()
	pf.IntVarP(&rf.parallelism, "parallelism", "p", 0,
		"parallelism of operators that do not set their own; overrides parallelism.default (default 1)")
	pf.StringArrayVar(&rf.sets, "set", nil, "set the configuration `key=value`; repeatable, later items win (see 'weir config keys')")
	pf.StringVar(&rf.configPath, "config", "", "YAML configuration `file` (Flink config.yaml syntax)")
	pf.BoolVar(&rf.incremental, "incremental", false, "incremental checkpoints of the pebble backend; sets execution.checkpointing.incremental=true")
	pf.BoolVar(&rf.changelog, "changelog", false, "changelog state backend: log every state change so checkpoints only upload a small tail; sets state.changelog.enabled=true")
	pf.StringVar(&rf.from, "from", "", "start from a `snapshot`: latest (the job's newest complete checkpoint under execution.checkpointing.dir), a savepoint directory, a chk-<n> checkpoint directory, or either's _metadata file; sets execution.state-recovery.path")
	pf.StringVar(&rf.claimMode, "claim-mode", "", "who owns the --from snapshot: no-claim (default: it is never deleted, the first checkpoint is full) or claim (deleted once newer checkpoints subsume it); sets execution.state-recovery.claim-mode")
	pf.BoolVar(&rf.allowNonRestored, "allow-non-restored-state", false, "start even if the --from snapshot has state of an operator uid the job no longer has (that state is dropped); sets execution.state-recovery.ignore-unclaimed-state=true")
	pf.BoolVar(&rf.force, "force", false, "take the job's checkpoint directory over at once from the run that holds it; dangerous: only when you know that run is dead")
	a.deferErrors(pf)
	c.SetUsageTemplate(strings.NewReplacer(
		"Available Commands:", "Jobs:",
		"\n  {{.CommandPath}} [command]", "",
		"\n\nFlags:\n", "\n\nFlags common to every job:\n",
		`Use "{{.CommandPath}} [command] --help" for more information about a command.`,
		`Use "{{.CommandPath}} <job> --help" for the flags of a job.`,
	).Replace(defaultUsageTemplate()))

	for _, name := range a.registry.Names() {
		job, _ := a.registry.New(name)
		c.AddCommand(a.jobCommand(job, rf))
	}
	return c
}

// jobCommand is `weir run <job>`.
func (a *app) jobCommand(job jobs.Job, rf *runFlags) *cobra.Command {
	c := &cobra.Command{
		Use:   job.Name() + " [flags]",
		Short: job.Description(),
		Long:  job.Description(),
		Args:  noArgs,
		RunE:  func(c *cobra.Command, _ []string) error { return a.runJob(c, job, rf) },
	}
	if d, ok := job.(jobs.LongDescriber); ok {
		c.Long = d.LongDescription()
	}
	job.RegisterFlags(c.Flags())
	a.deferErrors(c.Flags())
	c.SetUsageTemplate(strings.NewReplacer(
		"\n\nFlags:\n", "\n\nJob flags:\n",
		"\n\nGlobal Flags:\n", "\n\nCommon flags:\n",
	).Replace(defaultUsageTemplate()))
	return c
}

// defaultUsageTemplate is cobra's usage template.
func defaultUsageTemplate() string { return (&cobra.Command{}).UsageTemplate() }

// runJob validates everything about the run, reports every problem at once,
// then builds and executes the job.
func (a *app) runJob(c *cobra.Command, job jobs.Job, rf *runFlags) error {
	problems := a.flagProblemsOf(c.Flags())
	logger, err := newLogger(a.stderr, a.logFormat, a.logLevel, slog.LevelDebug)
	if err != nil {
		problems = append(problems, err)
	}

	sets := slices.Clone(rf.sets)
	if c.Flags().Changed("parallelism") {
		opt, _ := config.Lookup("parallelism.default")
		if p := int64(rf.parallelism); p < opt.Min || p > opt.Max {
			problems = append(problems, fmt.Errorf("--parallelism %d: must be between %d and %d", p, opt.Min, opt.Max))
		} else {
			sets = append(sets, "parallelism.default="+strconv.Itoa(rf.parallelism))
		}
	}
	if c.Flags().Changed("changelog") {
		sets = append(sets, "state.changelog.enabled="+strconv.FormatBool(rf.changelog))
	}
	if c.Flags().Changed("incremental") {
		sets = append(sets, "execution.checkpointing.incremental="+strconv.FormatBool(rf.incremental))
	}
	if c.Flags().Changed("from") {
		if rf.from == "" {
			problems = append(problems, errors.New("--from: give latest, a savepoint directory or a chk-<n> checkpoint directory"))
		}
		sets = append(sets, "execution.state-recovery.path="+rf.from)
	}
	if c.Flags().Changed("claim-mode") {
		switch m := strings.ToUpper(strings.ReplaceAll(rf.claimMode, "-", "_")); m {
		case weir.ClaimModeClaim, weir.ClaimModeNoClaim:
			sets = append(sets, "execution.state-recovery.claim-mode="+m)
		default:
			problems = append(problems, fmt.Errorf("--claim-mode %q: must be claim or no-claim", rf.claimMode))
		}
	}
	if c.Flags().Changed("allow-non-restored-state") {
		sets = append(sets, "execution.state-recovery.ignore-unclaimed-state="+strconv.FormatBool(rf.allowNonRestored))
	}
	cfg, err := config.LoadFile(rf.configPath, sets)
	if err != nil {
		problems = append(problems, err)
	}
	// A job's own defaults (the troubled job's checkpoint interval) apply
	// where neither --set nor --config set the key.
	if d, ok := job.(jobs.Defaulter); ok && cfg != nil {
		for k, v := range d.Defaults() {
			if !cfg.IsSet(k) {
				if err := cfg.Set(k, v); err != nil {
					problems = append(problems, fmt.Errorf("job %s default %s=%s: %w", job.Name(), k, v, err))
				}
			}
		}
	}
	if err := job.Validate(); err != nil {
		problems = append(problems, err)
	}
	var opts weir.Options
	if cfg != nil {
		opts = weir.OptionsFromConfig(cfg)
		opts.Logger = logger
		opts.JobLock.Force = rf.force
		if err := opts.Validate(); err != nil {
			problems = append(problems, err)
		}
	}
	if len(problems) > 0 {
		return usageError(problems...)
	}

	name := job.Name()
	if n := cfg.String("pipeline.name"); n != "" {
		name = n
	}
	if sw, ok := a.stderr.(*syncWriter); ok && isTerminal(sw.w) {
		opts.OnStatus = statusLine(a.stderr, name, time.Now())
	}
	if rf.local != nil || isClusterTarget(cfg) {
		return a.runJobManager(c.Context(), logger, c, job, cfg, opts, name, rf.local)
	}
	env := weir.NewEnvironment(opts)
	if err := job.Build(env, a.stdout); err != nil {
		return usageError(fmt.Errorf("job %s: %w", job.Name(), err))
	}
	logger.Info("running job", "job", name, "parallelism", opts.Parallelism, "config", cfg.ExplicitRedacted())
	start := time.Now()
	err = execute(c.Context(), logger, name, func(ctx context.Context) error { return env.Execute(ctx, name) })
	if err == nil {
		logger.Info("job finished", "job", name, "duration", time.Since(start).Round(time.Millisecond).String())
	}
	return err
}

// execute runs a job with ctx, cancelled by SIGINT and SIGTERM, and maps
// its outcome to an exit code: interrupted (130), invalid job (2) or failed
// (1).
func execute(ctx context.Context, logger *slog.Logger, name string, exec func(context.Context) error) error {
	logged := make(chan struct{})
	stopLog := context.AfterFunc(ctx, func() {
		defer close(logged)
		logger.Warn("stopping the job; interrupt again to exit at once", "job", name, "cause", context.Cause(ctx))
	})
	defer func() {
		if !stopLog() {
			<-logged // the log call has started: wait for it, so that nothing writes after we return
		}
	}()
	err := exec(ctx)
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return interrupted(fmt.Errorf("job %q interrupted (%v)", name, context.Cause(ctx)))
	case errors.Is(err, weir.ErrInvalidJob):
		return invalidJob(err)
	case errors.Is(err, weir.ErrNoCheckpoint):
		return usageError(err)
	case errors.Is(err, weir.ErrJobLocked):
		return refused(err)
	case errors.Is(err, weir.ErrPortInUse):
		return usageError(err)
	}
	return failure(err)
}

// invalidJob reports a weir.ErrInvalidJob error from Execute as a usage
// error, one problem per cause.
func invalidJob(err error) error {
	e := &exitError{code: ExitUsage, prefix: "invalid job: "}
	if m, ok := err.(interface{ Unwrap() []error }); ok {
		for _, k := range m.Unwrap() {
			if k != weir.ErrInvalidJob {
				e.errs = append(e.errs, k)
			}
		}
	}
	if len(e.errs) == 0 {
		e.prefix, e.errs = "", []error{err}
	}
	return e
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// statusLine prints the periodic one-line status of a running job:
// records in and out with their rates, restarts, and the last checkpoint.
func statusLine(w io.Writer, job string, start time.Time) func(weir.JobStatus) {
	var lastIn, lastOut int64
	last := start
	return func(s weir.JobStatus) {
		now := time.Now()
		secs := now.Sub(last).Seconds()
		rate := func(n, prev int64) string {
			if secs <= 0 || n < prev {
				return "-"
			}
			return humanCount(float64(n-prev) / secs)
		}
		line := fmt.Sprintf("[%s %s] in %s (%s/s), out %s (%s/s)", job, now.Sub(start).Round(time.Second),
			humanCount(float64(s.RecordsIn)), rate(s.RecordsIn, lastIn), humanCount(float64(s.RecordsOut)), rate(s.RecordsOut, lastOut))
		if s.Restarts > 0 {
			line += fmt.Sprintf(", restarts %d", s.Restarts)
		}
		if s.LastCheckpoint > 0 {
			line += fmt.Sprintf(", checkpoint %d %s ago (%s)", s.LastCheckpoint,
				now.Sub(s.LastCheckpointTime).Round(100*time.Millisecond), runner.FormatBytes(s.LastCheckpointBytes))
		} else {
			line += ", no checkpoint yet"
		}
		fmt.Fprintln(w, line)
		lastIn, lastOut, last = s.RecordsIn, s.RecordsOut, now
	}
}

func humanCount(v float64) string {
	switch {
	case v >= 1e9:
		return fmt.Sprintf("%.1fG", v/1e9)
	case v >= 1e6:
		return fmt.Sprintf("%.1fM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.1fk", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}
