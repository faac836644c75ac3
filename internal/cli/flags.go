package cli

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/weirstream/weir/internal/spell"
)

// deferredValue wraps a flag's value so that a malformed value does not end
// flag parsing: the problem is recorded, the flag keeps its previous value,
// and the command reports the problem together with every other one (see
// app.flagProblemsOf).
type deferredValue struct {
	pflag.Value
	a    *app
	name string
}

func (v *deferredValue) Set(s string) error {
	old := v.Value.String()
	if err := v.Value.Set(s); err != nil {
		_ = v.Value.Set(old) // pflag's values store a zero on failure
		v.a.flagProblems = append(v.a.flagProblems, fmt.Errorf("--%s %q: %s", v.name, s, valueProblem(v.Value.Type(), err)))
		v.a.badFlags[v.name] = true
	}
	return nil
}

// flagProblemsOf returns the malformed flag values seen while parsing fs, in
// order, and marks those flags as not given, so that checks of the values
// that follow do not report them a second time.
func (a *app) flagProblemsOf(fs *pflag.FlagSet) []error {
	for name := range a.badFlags {
		if f := fs.Lookup(name); f != nil {
			f.Changed = false
		}
	}
	return slices.Clone(a.flagProblems)
}

// deferErrors makes every flag of fs whose parsing can fail defer its
// errors (see deferredValue).
func (a *app) deferErrors(fs *pflag.FlagSet) {
	fs.VisitAll(func(f *pflag.Flag) {
		switch f.Value.Type() {
		case "string", "stringArray":
			return // any text is valid; keep pflag's own type for its help output
		}
		if _, done := f.Value.(*deferredValue); !done {
			f.Value = &deferredValue{Value: f.Value, a: a, name: f.Name}
		}
	})
}

// valueProblem describes why text was not a valid value of a flag of type
// typ, in words rather than strconv's.
func valueProblem(typ string, err error) string {
	var ne *strconv.NumError
	isNum := errors.As(err, &ne)
	switch {
	case isNum && errors.Is(ne.Err, strconv.ErrRange):
		return "out of range for " + typ
	case typ == "bool":
		return "must be true or false"
	case strings.HasPrefix(typ, "uint"):
		return "must be a non-negative integer"
	case strings.HasPrefix(typ, "int"):
		return "must be an integer"
	case strings.HasPrefix(typ, "float"):
		return "must be a number"
	case typ == "duration":
		return `must be a duration such as "500ms" or "10s"`
	}
	return err.Error()
}

// flagError is cobra's flag error function: it turns pflag's errors into
// usage errors, and for an unknown flag suggests the closest one and lists
// the command's valid flags.
func (a *app) flagError(c *cobra.Command, err error) error {
	var ne *pflag.NotExistError
	if !errors.As(err, &ne) {
		return usageError(err)
	}
	msg := err.Error()
	if s := suggestFlag(c.Flags(), ne.GetSpecifiedName()); s != "" {
		msg += "; did you mean --" + s + "?"
	}
	return usageError(fmt.Errorf("%s\nvalid flags for '%s': %s", msg, c.CommandPath(), flagList(c.Flags())))
}

// flagList lists the visible flags of fs: "--a, --b (-b), ...".
func flagList(fs *pflag.FlagSet) string {
	var names []string
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		n := "--" + f.Name
		if f.Shorthand != "" {
			n += " (-" + f.Shorthand + ")"
		}
		names = append(names, n)
	})
	return strings.Join(names, ", ")
}

// suggestFlag returns the visible flag of fs closest to name, or "" if none
// is close: an edit distance of at most 2, or name being a prefix.
func suggestFlag(fs *pflag.FlagSet, name string) string {
	if len(name) < 2 {
		return ""
	}
	best, bestDist := "", 3
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		d := spell.Distance(strings.ToLower(name), f.Name)
		if len(name) >= 3 && strings.HasPrefix(f.Name, name) {
			d = min(d, 1)
		}
		if d < bestDist {
			best, bestDist = f.Name, d
		}
	})
	return best
}

// logLevels are the values of --log-level.
var logLevels = map[string]slog.Level{
	"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError,
}

// newLogger returns the logger the --log-format and --log-level flags ask
// for, writing to w. minLevel raises the level (bench logs warnings only
// unless --log-level is given). On bad flag values it reports every problem
// and returns a text logger at minLevel or info, so callers can go on.
func newLogger(w io.Writer, format, level string, minLevel slog.Level) (*slog.Logger, error) {
	var errs []error
	lvl, ok := logLevels[strings.ToLower(level)]
	if !ok {
		errs = append(errs, fmt.Errorf("--log-level %q: must be debug, info, warn or error", level))
		lvl = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: max(lvl, minLevel)}
	var h slog.Handler
	switch strings.ToLower(format) {
	case "text":
		h = slog.NewTextHandler(w, opts)
	case "json":
		h = slog.NewJSONHandler(w, opts)
	default:
		errs = append(errs, fmt.Errorf("--log-format %q: must be text or json", format))
		h = slog.NewTextHandler(w, opts)
	}
	return slog.New(h), errors.Join(errs...)
}
