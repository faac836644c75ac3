package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/weirstream/weir/internal/checkpoint/metadata"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/stateread"
)

// defaultTextLimit is how many entries per state `weir savepoint read`
// prints as text unless --limit says otherwise.
const defaultTextLimit = 100

// savepointReadCommand is `weir savepoint read`: the state in a savepoint
// or checkpoint, offline (internal/stateread, docs/state-reader.md).
func (a *app) savepointReadCommand() *cobra.Command {
	var (
		uid, stateName string
		asJSON         bool
		limit          int
	)
	c := &cobra.Command{
		Use:   "read <path> [flags]",
		Short: "Print the state in a savepoint or checkpoint: its operators and states, or one operator's entries",
		Long: `Read the state in a savepoint or checkpoint, without the job.

<path> is a savepoint directory, a checkpoint directory <dir>/<job>/chk-<n>,
or either's _metadata file: a path, file://, or a gocloud blob URL such as
s3://bucket/prefix/savepoint-1a2b3c-0123456789ab.

Without --uid it lists every operator that has state (uid, name,
parallelism, max parallelism) with its keyed states (kind, number of
entries and of values, list elements or map pairs, the codecs that wrote
them), its timers and its operator list states. With --uid it prints that
operator's entries: keyed state as key group, key, namespace (windows) and
value, list elements or map pairs, then operator list states and timers;
--state keeps one keyed or operator list state.

Keys and values are decoded with the codecs the snapshot names, when this
program has them: the built-in ones always, a job's own codecs when its
program registers them (codec.Register). Other bytes print as hex, with the
codec's name and as text when they are text. Snapshots of older versions
name no codecs; operator list states never do.

Text lists at most 100 entries per state (then "... N more"); --json prints
every entry unless --limit is given. --limit 0 means no limit. With --json
standard output holds exactly one JSON object (docs/state-reader.md).

Keyed state of changelog checkpoints (state.changelog.enabled) is log
records on top of a materialized snapshot, which this command does not
replay: take a savepoint, or read a checkpoint taken in the canonical
format.`,
		Example: `  weir savepoint read weir-data/savepoints/savepoint-1a2b3c-0123456789ab
  weir savepoint read weir-data/checkpoints/wordcount/chk-7 --uid count
  weir savepoint read weir-data/checkpoints/wordcount/chk-7 --uid count --state counts --json`,
		Args: cobra.ArbitraryArgs,
		RunE: func(c *cobra.Command, args []string) error {
			problems := a.flagProblemsOf(c.Flags())
			if _, err := newLogger(a.stderr, a.logFormat, a.logLevel, slog.LevelWarn); err != nil {
				problems = append(problems, err)
			}
			switch {
			case len(args) == 0:
				problems = append(problems, fmt.Errorf("missing argument: '%s' takes the path of a savepoint or checkpoint", c.CommandPath()))
			case len(args) > 1:
				problems = append(problems, fmt.Errorf("unexpected argument %q: '%s' takes one path", args[1], c.CommandPath()))
			case args[0] == "":
				problems = append(problems, errors.New("the path must not be empty"))
			}
			f := c.Flags()
			if f.Changed("limit") && limit < 0 {
				problems = append(problems, fmt.Errorf("--limit %d: must be 0 (no limit) or more", limit))
			}
			if f.Changed("state") && !f.Changed("uid") {
				problems = append(problems, errors.New("--state needs --uid: the state of which operator?"))
			}
			if f.Changed("uid") && uid == "" {
				problems = append(problems, errors.New("--uid: must not be empty"))
			}
			if f.Changed("state") && stateName == "" {
				problems = append(problems, errors.New("--state: must not be empty"))
			}
			if len(problems) > 0 {
				return usageError(problems...)
			}
			if !f.Changed("limit") {
				limit = defaultTextLimit
				if asJSON {
					limit = 0
				}
			}
			return a.readSavepoint(c, args[0], uid, stateread.Options{State: stateName, Limit: limit}, asJSON)
		},
	}
	f := c.Flags()
	f.StringVar(&uid, "uid", "", "print the entries of the operator with this `uid` instead of the list of operators")
	f.StringVar(&stateName, "state", "", "with --uid, print only the keyed or operator list state of this `name`")
	f.BoolVar(&asJSON, "json", false, "print one JSON object instead of text")
	f.IntVar(&limit, "limit", defaultTextLimit, "at most `N` entries per state (0: no limit; default 100 for text, no limit with --json)")
	a.deferErrors(f)
	return c
}

// readSavepoint prints the listing, or the dump of operator uid.
func (a *app) readSavepoint(c *cobra.Command, loc, uid string, o stateread.Options, asJSON bool) error {
	ctx := c.Context()
	r, err := stateread.Open(ctx, loc)
	switch {
	case errors.Is(err, storage.ErrNotFound), errors.Is(err, storage.ErrCorrupt), errors.Is(err, storage.ErrUnsupportedVersion),
		errors.Is(err, storage.ErrInvalidName), errors.Is(err, metadata.ErrInvalid):
		return refused(err)
	case err != nil:
		return failure(err)
	}
	defer r.Close()

	var (
		result any
		text   func() error
	)
	if uid == "" {
		l, err := r.List(ctx)
		if err != nil {
			return readError(err)
		}
		result, text = l, func() error { return l.WriteText(a.stdout) }
	} else {
		d, err := r.Read(ctx, uid, o)
		if err != nil {
			return readError(err)
		}
		result, text = d, func() error { return d.WriteText(a.stdout) }
	}
	if asJSON {
		err = json.NewEncoder(a.stdout).Encode(result)
	} else {
		err = text()
	}
	if err != nil {
		return failure(fmt.Errorf("write result: %w", err))
	}
	return nil
}

// readError maps the reader's errors to exit codes: an operator or state
// that is not there, and changelog state, are problems with the request
// (2); a file that cannot be read or does not verify fails the command (1).
func readError(err error) error {
	if errors.Is(err, stateread.ErrUnknownOperator) || errors.Is(err, stateread.ErrUnknownState) || errors.Is(err, stateread.ErrChangelog) {
		return refused(err)
	}
	return failure(err)
}
