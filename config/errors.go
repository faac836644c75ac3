package config

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/weirstream/weir/internal/spell"
)

// ErrUnknownKey is wrapped by every *Error about a key weir does not know:
// errors.Is(err, ErrUnknownKey) reports whether err (or any error joined in
// it) is one.
var ErrUnknownKey = errors.New("unknown configuration key")

// Error is one configuration problem.
type Error struct {
	// Key is the configuration key concerned; empty if the problem is not
	// about one key (e.g. a YAML syntax error or a malformed --set item).
	Key string
	// Value is the offending text, if any.
	Value string
	// Source says where the problem is: "--set", "file.yaml:LINE" (or
	// "line LINE" for Load's unnamed YAML), the file name alone when no
	// line is known, or "" for Config.Set and unnamed YAML without a line.
	Source string
	// Msg is the human-readable description, without Source.
	Msg string

	err error // wrapped error: ErrUnknownKey, or an I/O error
}

// Error returns "Source: Msg", or Msg alone if Source is empty.
func (e *Error) Error() string {
	if e.Source == "" {
		return e.Msg
	}
	return e.Source + ": " + e.Msg
}

// Unwrap returns ErrUnknownKey for unknown keys, the I/O error for an
// unreadable file, and nil otherwise.
func (e *Error) Unwrap() error { return e.err }

const keysHint = "(run 'weir config keys' or see docs/config.md for the valid keys)"

func unknownKeyError(key, text string) *Error {
	msg := fmt.Sprintf("unknown configuration key %q", key)
	if s := suggest(key); len(s) > 0 {
		q := make([]string, len(s))
		for i, k := range s {
			q[i] = fmt.Sprintf("%q", k)
		}
		alt := q[0]
		if len(q) > 1 {
			alt = strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
		}
		msg += "; did you mean " + alt + "?"
	}
	return &Error{Key: key, Value: text, Msg: msg + " " + keysHint, err: ErrUnknownKey}
}

// suggest returns up to three known keys close to key: by case-insensitive
// edit distance, or because key is a dotted prefix or suffix of a known key
// (e.g. "segment-size" or "execution.buffer-timeout"), or ends with a known
// key (e.g. "flink.parallelism.default").
func suggest(key string) []string {
	lk := strings.ToLower(key)
	if lk == "" {
		return nil
	}
	limit := max(2, utf8.RuneCountInString(lk)/4)
	type cand struct {
		key  string
		dist int
	}
	var cands []cand
	for _, o := range registry.sorted {
		ko := strings.ToLower(o.Key)
		d := spell.Distance(lk, ko)
		switch {
		case d <= limit:
		case strings.HasPrefix(ko, lk+".") || strings.HasSuffix(ko, "."+lk) || strings.HasSuffix(lk, "."+ko):
			d = limit + 1
		default:
			continue
		}
		cands = append(cands, cand{o.Key, d})
	}
	slices.SortStableFunc(cands, func(a, b cand) int { return a.dist - b.dist })
	var out []string
	for _, c := range cands[:min(len(cands), 3)] {
		out = append(out, c.key)
	}
	return out
}
