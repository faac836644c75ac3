package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// value is a parsed option value. Ints, durations (nanoseconds) and memory
// sizes (bytes) live in i; bools in b; strings and canonical enum spellings
// in s.
type value struct {
	i int64
	f float64
	b bool
	s string
}

const (
	durationSyntax = `a duration such as "100 ms", "10s", "1min"`
	memorySyntax   = `a memory size such as "32kb", "64 mb", "1g"`
)

// parseValue parses text as a value of option o and checks its bounds. On
// failure it returns a reason that completes "invalid value ...: ", e.g.
// "must be at least 1".
func parseValue(o *Option, text string) (value, string) {
	switch o.Kind {
	case KindString:
		return value{s: text}, ""
	case KindBool:
		switch t := strings.TrimSpace(text); {
		case strings.EqualFold(t, "true"):
			return value{b: true}, ""
		case strings.EqualFold(t, "false"):
			return value{b: false}, ""
		}
		return value{}, "must be true or false"
	case KindEnum:
		t := strings.TrimSpace(text)
		for _, e := range o.Enum {
			if strings.EqualFold(t, e) {
				return value{s: e}, ""
			}
		}
		return value{}, "must be one of " + strings.Join(o.Enum, ", ")
	case KindInt:
		n, err := strconv.ParseInt(strings.TrimSpace(text), 10, 64)
		if err != nil {
			if o.custom != nil {
				return value{}, "must be " + o.custom.must
			}
			return value{}, "must be an integer " + rangeWords(o)
		}
		return value{i: n}, checkRange(o, n)
	case KindDuration:
		d, reason := ParseDuration(text)
		if reason != nil {
			return value{}, reason.Error()
		}
		return value{i: int64(d)}, checkRange(o, int64(d))
	case KindMemorySize:
		n, reason := ParseMemorySize(text)
		if reason != nil {
			return value{}, reason.Error()
		}
		return value{i: n}, checkRange(o, n)
	case KindFloat:
		f, err := strconv.ParseFloat(strings.TrimSpace(text), 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f < o.FloatMin || (o.FloatMax != 0 && f > o.FloatMax) {
			return value{}, "must be a number " + floatRange(o)
		}
		return value{f: f}, ""
	}
	panic(fmt.Sprintf("config: option %q has invalid kind %d", o.Key, int(o.Kind)))
}

// floatRange describes a KindFloat option's bounds.
func floatRange(o *Option) string {
	f := func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
	if o.FloatMax != 0 {
		return "between " + f(o.FloatMin) + " and " + f(o.FloatMax)
	}
	return "at least " + f(o.FloatMin)
}

// checkRange checks n against o's bounds and returns a reason or "".
func checkRange(o *Option, n int64) string {
	if o.custom != nil {
		if o.custom.ok(n) {
			return ""
		}
		return "must be " + o.custom.must
	}
	if n < o.Min || (o.Max != 0 && n > o.Max) {
		return "must be " + rangeWords(o)
	}
	return ""
}

// rangeWords describes o's bounds: "between 1 and 32768" or "at least 1".
func rangeWords(o *Option) string {
	f := boundFormatter(o.Kind)
	if o.Max != 0 {
		return "between " + f(o.Min) + " and " + f(o.Max)
	}
	return "at least " + f(o.Min)
}

func boundFormatter(k Kind) func(int64) string {
	switch k {
	case KindDuration:
		return func(n int64) string { return FormatDuration(time.Duration(n)) }
	case KindMemorySize:
		return FormatMemorySize
	}
	return func(n int64) string { return strconv.FormatInt(n, 10) }
}

// canonical renders v as the canonical text of a value of option o; the text
// parses back to the same value.
func canonical(o *Option, v value) string {
	switch o.Kind {
	case KindInt:
		return strconv.FormatInt(v.i, 10)
	case KindBool:
		return strconv.FormatBool(v.b)
	case KindDuration:
		return FormatDuration(time.Duration(v.i))
	case KindMemorySize:
		return FormatMemorySize(v.i)
	case KindFloat:
		return strconv.FormatFloat(v.f, 'g', -1, 64)
	}
	return v.s
}

type unit struct {
	names []string
	mult  int64
}

// durationUnits follows Flink's TimeUtils; "us", "mins" and the Greek mu are
// accepted as well.
var durationUnits = []unit{
	{[]string{"ns", "nano", "nanos", "nanosecond", "nanoseconds"}, int64(time.Nanosecond)},
	{[]string{"us", "µs", "μs", "micro", "micros", "microsecond", "microseconds"}, int64(time.Microsecond)},
	{[]string{"ms", "milli", "millis", "millisecond", "milliseconds"}, int64(time.Millisecond)},
	{[]string{"s", "sec", "secs", "second", "seconds"}, int64(time.Second)},
	{[]string{"m", "min", "mins", "minute", "minutes"}, int64(time.Minute)},
	{[]string{"h", "hour", "hours"}, int64(time.Hour)},
	{[]string{"d", "day", "days"}, 24 * int64(time.Hour)},
}

// memoryUnits follows Flink's MemorySize.MemoryUnit; all units are binary.
var memoryUnits = []unit{
	{[]string{"b", "bytes"}, 1},
	{[]string{"k", "kb", "kibibytes"}, 1 << 10},
	{[]string{"m", "mb", "mebibytes"}, 1 << 20},
	{[]string{"g", "gb", "gibibytes"}, 1 << 30},
	{[]string{"t", "tb", "tebibytes"}, 1 << 40},
}

// splitNumber parses Flink's "<digits> [unit]" syntax. ok is false if the
// text is not of that form or the unit is unknown; tooLarge reports int64
// overflow of the result.
func splitNumber(text string, units []unit, defaultMult int64) (n int64, ok, tooLarge bool) {
	t := strings.TrimSpace(text)
	i := 0
	for i < len(t) && t[i] >= '0' && t[i] <= '9' {
		i++
	}
	if i == 0 {
		return 0, false, false
	}
	label := strings.ToLower(strings.TrimSpace(t[i:]))
	mult := int64(0)
	if label == "" {
		mult = defaultMult
	}
	for _, u := range units {
		for _, name := range u.names {
			if label == name {
				mult = u.mult
			}
		}
	}
	if mult == 0 {
		return 0, false, false
	}
	num, err := strconv.ParseInt(t[:i], 10, 64)
	if err != nil || num > math.MaxInt64/mult {
		return 0, true, true
	}
	return num * mult, true, false
}

// ParseDuration parses a duration in Flink's syntax: a non-negative integer
// followed by an optional unit, with optional whitespace in between
// ("100 ms", "10s", "1min", "2 hours"). Units are ns/nano(s)/nanosecond(s),
// us/µs/micro(s)/microsecond(s), ms/milli(s)/millisecond(s),
// s/sec(s)/second(s), m/min(s)/minute(s), h/hour(s), d/day(s), compared
// case-insensitively; a plain number means milliseconds. Go syntax such as
// "1m30s" or "1.5s" (see time.ParseDuration) is accepted as a fallback.
// Negative durations are invalid. The error completes a sentence such as
// `invalid value "x": must be a duration such as ...`.
func ParseDuration(text string) (time.Duration, error) {
	n, ok, tooLarge := splitNumber(text, durationUnits, int64(time.Millisecond))
	switch {
	case tooLarge:
		return 0, fmt.Errorf("value is too large (at most %s)", FormatDuration(math.MaxInt64))
	case ok:
		return time.Duration(n), nil
	}
	t := strings.TrimSpace(text)
	if d, err := time.ParseDuration(t); err == nil {
		if d < 0 {
			return 0, fmt.Errorf("must not be negative")
		}
		return d, nil
	}
	if rest, neg := strings.CutPrefix(t, "-"); neg {
		if _, err := ParseDuration(rest); err == nil {
			return 0, fmt.Errorf("must not be negative")
		}
	}
	return 0, fmt.Errorf("must be %s", durationSyntax)
}

// ParseMemorySize parses a memory size in Flink's syntax: a non-negative
// integer followed by an optional unit, with optional whitespace in between
// ("32kb", "64 mb", "1g"). Units are b/bytes, k/kb/kibibytes,
// m/mb/mebibytes, g/gb/gibibytes and t/tb/tebibytes, compared
// case-insensitively and all binary (1kb = 1024 bytes); a plain number means
// bytes. It returns the size in bytes.
func ParseMemorySize(text string) (int64, error) {
	n, ok, tooLarge := splitNumber(text, memoryUnits, 1)
	switch {
	case tooLarge:
		return 0, fmt.Errorf("value is too large (at most %d bytes)", int64(math.MaxInt64))
	case ok:
		return n, nil
	}
	if rest, neg := strings.CutPrefix(strings.TrimSpace(text), "-"); neg {
		if _, err := ParseMemorySize(rest); err == nil {
			return 0, fmt.Errorf("must not be negative")
		}
	}
	return 0, fmt.Errorf("must be %s", memorySyntax)
}

// FormatDuration formats d in the largest unit that represents it exactly,
// e.g. "100 ms", "10 s", "1 min", "0 ms". The result parses back with
// ParseDuration. Negative durations are formatted by time.Duration.String.
func FormatDuration(d time.Duration) string {
	if d < 0 {
		return d.String()
	}
	if d == 0 {
		return "0 ms"
	}
	units := []struct {
		name string
		mult time.Duration
	}{{"d", 24 * time.Hour}, {"h", time.Hour}, {"min", time.Minute}, {"s", time.Second}, {"ms", time.Millisecond}, {"us", time.Microsecond}}
	for _, u := range units {
		if d%u.mult == 0 {
			return fmt.Sprintf("%d %s", d/u.mult, u.name)
		}
	}
	return fmt.Sprintf("%d ns", int64(d))
}

// FormatMemorySize formats a byte count in the largest binary unit that
// represents it exactly, e.g. "32 kb", "1 gb", "100 bytes". The result parses
// back with ParseMemorySize.
func FormatMemorySize(bytes int64) string {
	if bytes <= 0 {
		return fmt.Sprintf("%d bytes", bytes)
	}
	units := []struct {
		name string
		mult int64
	}{{"tb", 1 << 40}, {"gb", 1 << 30}, {"mb", 1 << 20}, {"kb", 1 << 10}}
	for _, u := range units {
		if bytes%u.mult == 0 {
			return fmt.Sprintf("%d %s", bytes/u.mult, u.name)
		}
	}
	return fmt.Sprintf("%d bytes", bytes)
}
