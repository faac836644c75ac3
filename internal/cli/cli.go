// Package cli is weir's command line: `weir run`, `weir jobs`,
// `weir config keys`, `weir bench`, and the commands that control running
// jobs through their REST servers (`weir list`, `status`, `cancel`,
// `checkpoint`). It is a library so that tests run the
// whole command in process; cmd/weir only calls Main.
//
// Errors are translated to exit codes here and nowhere else:
//
//	0   success
//	1   a job or benchmark failed while it ran (ExitFailure)
//	2   usage problems: unknown command, job or flag, bad configuration,
//	    invalid flag values or job settings, or a job weir cannot run as
//	    declared (weir.ErrInvalidJob) (ExitUsage)
//	130 SIGINT or SIGTERM stopped the job (ExitInterrupted)
//
// Usage problems are collected, not reported one at a time: a command that
// checks values reports every problem it finds in one message. Malformed
// flag values (--parallelism four) do not end flag parsing either; they are
// recorded and reported with the rest.
//
// Logs go to standard error through log/slog (--log-format, --log-level);
// standard output carries only what a command produces, so that it can be
// piped or parsed.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"sync"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/internal/jobs"
)

// Version is the version `weir --version` prints.
const Version = weir.Version

// Exit codes of Main.
const (
	ExitOK          = 0
	ExitFailure     = 1
	ExitUsage       = 2
	ExitInterrupted = 130
)

// Main runs the weir command line with args (without the program name) and
// returns the process exit code. SIGINT and SIGTERM cancel a running job,
// which then stops gracefully; a second signal ends the process at once.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// After the first signal, restore the default handling so that a
	// second Ctrl-C kills a job that does not stop.
	unregister := context.AfterFunc(ctx, stop)
	defer unregister()
	return run(ctx, args, stdin, stdout, stderr, jobs.Builtin())
}

// run is Main with the interrupt context and the job registry injected:
// cancelling ctx is what a signal does.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, registry *jobs.Registry) int {
	a := &app{
		stdout:   &syncWriter{w: stdout},
		stderr:   &syncWriter{w: stderr},
		registry: registry,
		badFlags: map[string]bool{},
	}
	root := a.rootCommand()
	root.SetArgs(append([]string{}, args...)) // never nil: cobra would read os.Args
	root.SetIn(stdin)
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	cmd, err := root.ExecuteContextC(ctx)
	if a.stopProfile != nil {
		a.stopProfile()
	}
	if err == nil {
		return ExitOK
	}
	return a.report(cmd, err)
}

// app is the state of one command-line invocation. The command tree is
// built for each invocation, so flag variables and jobs are never shared.
type app struct {
	stdout, stderr io.Writer
	registry       *jobs.Registry

	logFormat, logLevel string
	// cpuProfile is the file --cpuprofile names; stopProfile ends the
	// profile once the command returned.
	cpuProfile  string
	stopProfile func()

	// flagProblems are the malformed flag values seen while parsing, in
	// order; badFlags holds the names of those flags. Only the flags of
	// the command that runs are parsed.
	flagProblems []error
	badFlags     map[string]bool
}

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "weir",
		Short: "weir runs stream processing jobs",
		Long: `weir is a stream processor modelled on Apache Flink. 'weir run' starts a
built-in job, 'weir jobs' lists them, 'weir config keys' lists the
configuration keys, and 'weir bench' measures the runtime. 'weir list',
'weir status', 'weir cancel', 'weir checkpoint', 'weir savepoint' and
'weir stop' control running jobs through their REST servers.

Exit codes: 0 success, 1 the job failed while running, 2 usage or
configuration problems, 130 interrupted by SIGINT or SIGTERM.`,
		Version:           Version,
		SilenceErrors:     true,
		SilenceUsage:      true,
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true},
		Args:              cobra.ArbitraryArgs,
		RunE:              a.groupRunE("command"),
	}
	pf := root.PersistentFlags()
	pf.StringVar(&a.logFormat, "log-format", "text", "format of the logs on standard error: text or json")
	pf.StringVar(&a.logLevel, "log-level", "info", "least severe level logged: debug, info, warn or error")
	pf.StringVar(&a.cpuProfile, "cpuprofile", "", "write a CPU profile of the command to this file (go tool pprof reads it)")
	root.PersistentPreRunE = func(*cobra.Command, []string) error {
		if a.cpuProfile == "" {
			return nil
		}
		f, err := os.Create(a.cpuProfile)
		if err != nil {
			return usageError(fmt.Errorf("--cpuprofile: %w", err))
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return usageError(fmt.Errorf("--cpuprofile: %w", err))
		}
		a.stopProfile = func() {
			pprof.StopCPUProfile()
			f.Close()
		}
		return nil
	}
	root.SetFlagErrorFunc(a.flagError)
	root.AddCommand(a.runCommand(), a.jobsCommand(), a.configCommand(), a.benchCommand())
	root.AddCommand(a.checkpointsCommand(), a.nexmarkCommand())
	root.AddCommand(a.listCommand(), a.statusCommand(), a.cancelCommand(), a.checkpointCommand(),
		a.savepointCommand(), a.stopCommand())
	root.AddCommand(a.doctorCommand(), a.clusterCommand(), a.taskManagerCommand(), a.devCommand())
	return root
}

// groupRunE returns the RunE of a command that only groups subcommands: it
// is reached with no subcommand or an unknown one, both usage errors. noun
// names the subcommands in messages ("command", "job").
func (a *app) groupRunE(noun string) func(*cobra.Command, []string) error {
	return func(c *cobra.Command, args []string) error {
		var names []string
		for _, sub := range c.Commands() {
			if sub.IsAvailableCommand() && sub.Name() != "help" {
				names = append(names, sub.Name())
			}
		}
		valid := fmt.Sprintf("valid %ss: %s", noun, strings.Join(names, ", "))
		if len(args) == 0 {
			return usageError(fmt.Errorf("missing %s; %s", noun, valid))
		}
		msg := fmt.Sprintf("unknown %s %q for '%s'", noun, args[0], c.CommandPath())
		if c.SuggestionsMinimumDistance <= 0 {
			c.SuggestionsMinimumDistance = 2
		}
		if s := c.SuggestionsFor(args[0]); len(s) > 0 {
			msg += "; did you mean " + orList(s) + "?"
		}
		return usageError(errors.New(msg + "\n" + valid))
	}
}

// noArgs rejects positional arguments.
func noArgs(c *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageError(fmt.Errorf("unexpected argument %q: '%s' takes flags only", args[0], c.CommandPath()))
	}
	return nil
}

// orList formats names as `"a", "b" or "c"`.
func orList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	if len(q) == 1 {
		return q[0]
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}

// syncWriter serializes writes: job goroutines, logs and the command share
// standard output and standard error.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
