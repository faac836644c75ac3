package config

import (
	"fmt"
	"slices"
	"strings"
)

// Kind is the value type of an option.
type Kind int

// The kinds of option values.
const (
	// KindInt is a base-10 int64, bounded by Option.Min and Option.Max.
	KindInt Kind = iota + 1
	// KindBool is true or false (case-insensitive).
	KindBool
	// KindString is free text, taken verbatim.
	KindString
	// KindDuration is a non-negative duration such as "100 ms" or "1min";
	// bounds are in nanoseconds.
	KindDuration
	// KindMemorySize is a number of bytes such as "32kb" or "1 gb"; bounds
	// are in bytes.
	KindMemorySize
	// KindEnum is one of Option.Enum, compared case-insensitively.
	KindEnum
	// KindFloat is a finite decimal number such as "1.5"; bounds are
	// FloatMin and FloatMax.
	KindFloat
)

// String returns the name of the kind as shown in documentation, e.g.
// "memory size".
func (k Kind) String() string {
	switch k {
	case KindInt:
		return "int"
	case KindBool:
		return "bool"
	case KindString:
		return "string"
	case KindDuration:
		return "duration"
	case KindMemorySize:
		return "memory size"
	case KindEnum:
		return "enum"
	case KindFloat:
		return "float"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Option describes one configuration key.
type Option struct {
	// Key is the full dotted name, e.g. "taskmanager.memory.segment-size".
	Key string
	// Kind is the value type.
	Kind Kind
	// Default is the default in the same textual syntax a user would write,
	// e.g. "32kb", "100 ms", "true".
	Default string
	// Description is one or two sentences, shown in `weir run --help` and
	// docs/config.md.
	Description string
	// Enum lists the valid values for KindEnum. They are compared
	// case-insensitively; the listed spelling is canonical.
	Enum []string
	// Min and Max are inclusive bounds for KindInt, KindMemorySize (bytes)
	// and KindDuration (nanoseconds). Min is always enforced, so the zero
	// value means "not negative"; Max 0 means unbounded.
	Min, Max int64
	// FloatMin and FloatMax are inclusive bounds for KindFloat; FloatMax 0
	// means unbounded.
	FloatMin, FloatMax float64

	// custom, if set, replaces the Min/Max check for KindInt.
	custom *intRule
}

// intRule is a validity rule for integer options that a plain Min/Max range
// cannot express.
type intRule struct {
	ok   func(int64) bool
	must string // completes "must be ...", e.g. "-1 or an integer between 1 and 32768"
	doc  string // constraint shown in the docs' type column, e.g. "-1, or 1 to 32768"
}

// registry is the validated option table, indexed by key.
var registry = buildRegistry(append(slices.Clone(optionTable), clusterOptionTable...))

type registryT struct {
	sorted   []Option
	byKey    map[string]*Option
	defaults map[string]value
}

// buildRegistry checks the table once at start-up. A broken entry is a
// programming error in weir, so it panics.
func buildRegistry(table []Option) *registryT {
	r := &registryT{byKey: map[string]*Option{}, defaults: map[string]value{}}
	r.sorted = slices.Clone(table)
	slices.SortFunc(r.sorted, func(a, b Option) int { return strings.Compare(a.Key, b.Key) })
	for i := range r.sorted {
		o := &r.sorted[i]
		if o.Key == "" || strings.TrimSpace(o.Key) != o.Key {
			panic(fmt.Sprintf("config: invalid option key %q", o.Key))
		}
		if _, dup := r.byKey[o.Key]; dup {
			panic(fmt.Sprintf("config: option %q defined twice", o.Key))
		}
		if o.Kind < KindInt || o.Kind > KindFloat {
			panic(fmt.Sprintf("config: option %q has invalid kind %d", o.Key, int(o.Kind)))
		}
		if (o.Kind == KindEnum) != (len(o.Enum) > 0) {
			panic(fmt.Sprintf("config: option %q: Enum must be set exactly for KindEnum", o.Key))
		}
		if o.Description == "" {
			panic(fmt.Sprintf("config: option %q has no description", o.Key))
		}
		v, reason := parseValue(o, o.Default)
		if reason != "" {
			panic(fmt.Sprintf("config: option %q: invalid default %q: %s", o.Key, o.Default, reason))
		}
		r.byKey[o.Key] = o
		r.defaults[o.Key] = v
	}
	return r
}

// Options returns the table of every key weir knows, sorted by key. The
// result is a copy and may be modified by the caller.
func Options() []Option {
	out := slices.Clone(registry.sorted)
	for i := range out {
		out[i].Enum = slices.Clone(out[i].Enum)
	}
	return out
}

// Lookup returns the option with the given key, or false if weir does not
// know the key.
func Lookup(key string) (Option, bool) {
	o, ok := registry.byKey[key]
	if !ok {
		return Option{}, false
	}
	c := *o
	c.Enum = slices.Clone(c.Enum)
	return c, true
}

// Constraint describes the valid values of o in a few words, e.g.
// "1 to 32768", "at least 256 bytes" or "STREAMING, BATCH, AUTOMATIC".
// It is empty if any value of the kind is valid.
func (o Option) Constraint() string {
	switch o.Kind {
	case KindEnum:
		return strings.Join(o.Enum, ", ")
	case KindFloat:
		return floatRange(&o)
	case KindInt, KindDuration, KindMemorySize:
		if o.custom != nil {
			return o.custom.doc
		}
		f := boundFormatter(o.Kind)
		switch {
		case o.Max != 0:
			return f(o.Min) + " to " + f(o.Max)
		case o.Min != 0 || o.Kind == KindInt:
			return "at least " + f(o.Min)
		}
	}
	return ""
}

// DefaultMaxParallelism returns the maximum parallelism weir derives when
// "pipeline.max-parallelism" is -1, as Flink does:
// min(max(roundUpPow2(p + p/2), 128), 32768).
func DefaultMaxParallelism(parallelism int64) int64 {
	p := parallelism + parallelism/2
	if p >= maxParallelismLimit {
		return maxParallelismLimit
	}
	pow := int64(1)
	for pow < p {
		pow <<= 1
	}
	return min(max(pow, 128), maxParallelismLimit)
}

// maxParallelismLimit is the largest parallelism and max parallelism weir
// accepts (Flink's UPPER_BOUND_MAX_PARALLELISM).
const maxParallelismLimit = 32768
