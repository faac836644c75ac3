package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// exitError is an error with the exit code it maps to. Errors that are not
// exitErrors (cobra's own, about the command line) are usage errors.
type exitError struct {
	code int
	// prefix starts the message, e.g. "invalid job: ".
	prefix string
	errs   []error
	// noHint leaves out the pointer to --help of usage errors that are
	// not about the command line.
	noHint bool
}

func (e *exitError) Error() string { return e.prefix + errors.Join(e.errs...).Error() }

func (e *exitError) Unwrap() []error { return e.errs }

// usageError reports problems with the command line, configuration or job
// settings: exit code 2.
func usageError(errs ...error) error { return &exitError{code: ExitUsage, errs: errs} }

// refused reports a run refused before it started for a reason outside
// the command line, such as a checkpoint directory another run holds:
// exit code 2, without the usage hint.
func refused(err error) error { return &exitError{code: ExitUsage, errs: []error{err}, noHint: true} }

// failure reports a job or benchmark that failed while it ran: exit code 1.
func failure(err error) error { return &exitError{code: ExitFailure, errs: []error{err}} }

// interrupted reports a job stopped by a signal: exit code 130.
func interrupted(err error) error { return &exitError{code: ExitInterrupted, errs: []error{err}} }

// report prints err to standard error and returns its exit code. cmd is the
// command that failed, for the usage hint.
func (a *app) report(cmd *cobra.Command, err error) int {
	code, prefix, hint := ExitUsage, "", true
	var ee *exitError
	if errors.As(err, &ee) {
		code, prefix, hint = ee.code, ee.prefix, !ee.noHint
	}
	problems := problemList(err)
	var b strings.Builder
	switch len(problems) {
	case 0:
		fmt.Fprintf(&b, "error: %s%v\n", prefix, err)
	case 1:
		fmt.Fprintf(&b, "error: %s%s\n", prefix, indentRest(problems[0], "  "))
	default:
		fmt.Fprintf(&b, "error: %s%d problems:\n", prefix, len(problems))
		for _, p := range problems {
			fmt.Fprintf(&b, "  - %s\n", indentRest(p, "    "))
		}
	}
	if code == ExitUsage && hint && cmd != nil {
		fmt.Fprintf(&b, "Run '%s --help' for usage.\n", cmd.CommandPath())
	}
	a.stderr.Write([]byte(b.String()))
	return code
}

// problemList flattens err into the messages of its individual problems:
// errors made by errors.Join (or exitError) are split into their parts,
// recursively; any other error is one problem.
func problemList(err error) []string {
	var out []string
	var walk func(error)
	walk = func(e error) {
		if e == nil {
			return
		}
		if m, ok := e.(interface{ Unwrap() []error }); ok && isJoin(e, m.Unwrap()) {
			for _, k := range m.Unwrap() {
				walk(k)
			}
			return
		}
		out = append(out, strings.TrimRight(e.Error(), "\n"))
	}
	if ee, ok := err.(*exitError); ok {
		for _, e := range ee.errs {
			walk(e)
		}
		return out
	}
	walk(err)
	return out
}

// isJoin reports whether e's message is just its parts' messages on
// separate lines, as errors.Join makes it; an error that wraps several
// errors with text of its own (fmt.Errorf("%w: %w", ...)) is not.
func isJoin(e error, parts []error) bool {
	msgs := make([]string, 0, len(parts))
	for _, p := range parts {
		if p != nil {
			msgs = append(msgs, p.Error())
		}
	}
	return e.Error() == strings.Join(msgs, "\n")
}

// indentRest indents every line of s but the first.
func indentRest(s, indent string) string {
	return strings.ReplaceAll(s, "\n", "\n"+indent)
}
