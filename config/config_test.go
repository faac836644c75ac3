package config

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// joined returns the *Error values inside err (an errors.Join).
func joined(t *testing.T, err error) []*Error {
	t.Helper()
	if err == nil {
		t.Fatal("expected an error, got nil")
	}
	u, ok := err.(interface{ Unwrap() []error })
	if !ok {
		t.Fatalf("error %T is not an errors.Join: %v", err, err)
	}
	var out []*Error
	for _, e := range u.Unwrap() {
		var ce *Error
		if !errors.As(e, &ce) {
			t.Fatalf("joined error %T is not *Error: %v", e, e)
		}
		out = append(out, ce)
	}
	return out
}

func TestDefaults(t *testing.T) {
	c := New()
	if got := c.Int("parallelism.default"); got != 1 {
		t.Errorf("parallelism.default = %d", got)
	}
	if got := c.Int("pipeline.max-parallelism"); got != -1 {
		t.Errorf("pipeline.max-parallelism = %d", got)
	}
	if !c.Bool("pipeline.operator-chaining.enabled") {
		t.Error("pipeline.operator-chaining.enabled = false")
	}
	if got := c.MemorySize("taskmanager.memory.segment-size"); got != 32*1024 {
		t.Errorf("segment-size = %d", got)
	}
	if got := c.Int("taskmanager.network.memory.buffers-per-channel"); got != 2 {
		t.Errorf("buffers-per-channel = %d", got)
	}
	if got := c.Int("taskmanager.network.memory.floating-buffers-per-gate"); got != 8 {
		t.Errorf("floating-buffers-per-gate = %d", got)
	}
	if got := c.Duration("execution.buffer-timeout.interval"); got != 100*time.Millisecond {
		t.Errorf("buffer-timeout = %v", got)
	}
	if got := c.String("execution.runtime-mode"); got != "STREAMING" {
		t.Errorf("runtime-mode = %q", got)
	}
	if got := c.String("pipeline.name"); got != "" {
		t.Errorf("pipeline.name = %q", got)
	}
	for _, o := range Options() {
		if c.IsSet(o.Key) {
			t.Errorf("IsSet(%q) on defaults", o.Key)
		}
	}
	if len(c.Explicit()) != 0 {
		t.Errorf("Explicit on defaults = %v", c.Explicit())
	}
}

func TestOptionsTable(t *testing.T) {
	opts := Options()
	for i, o := range opts {
		if i > 0 && opts[i-1].Key >= o.Key {
			t.Errorf("Options not sorted/unique at %q", o.Key)
		}
		if o.Description == "" {
			t.Errorf("%q has no description", o.Key)
		}
		// The default round-trips through Set and canonical form.
		c := New()
		if err := c.Set(o.Key, o.Default); err != nil {
			t.Errorf("default of %q does not validate: %v", o.Key, err)
		}
		canon := c.Explicit()[o.Key]
		c2 := New()
		if err := c2.Set(o.Key, canon); err != nil || c2.values[o.Key] != c.values[o.Key] {
			t.Errorf("canonical %q of %q does not round-trip: %v", canon, o.Key, err)
		}
	}
	opts[0].Key = "mutated"
	if Options()[0].Key == "mutated" {
		t.Error("Options returned the internal table")
	}
	if _, ok := Lookup("parallelism.default"); !ok {
		t.Error("Lookup(parallelism.default) failed")
	}
	if _, ok := Lookup("nope"); ok {
		t.Error("Lookup(nope) succeeded")
	}
}

func TestSetGetEachKind(t *testing.T) {
	c := New()
	sets := map[string]string{
		"parallelism.default":                "4",
		"pipeline.operator-chaining.enabled": "FALSE",
		"pipeline.name":                      "my job",
		"execution.buffer-timeout.interval":  "5 s",
		"taskmanager.memory.segment-size":    "64kb",
		"execution.runtime-mode":             "batch",
	}
	for k, v := range sets {
		if err := c.Set(k, v); err != nil {
			t.Fatalf("Set(%q, %q): %v", k, v, err)
		}
	}
	if c.Int("parallelism.default") != 4 || c.Bool("pipeline.operator-chaining.enabled") ||
		c.String("pipeline.name") != "my job" || c.Duration("execution.buffer-timeout.interval") != 5*time.Second ||
		c.MemorySize("taskmanager.memory.segment-size") != 64<<10 || c.String("execution.runtime-mode") != "BATCH" {
		t.Errorf("unexpected values: %v", c.Explicit())
	}
	if !c.IsSet("parallelism.default") || c.IsSet("pipeline.max-parallelism") {
		t.Error("IsSet wrong")
	}
}

func TestSetErrors(t *testing.T) {
	tests := []struct {
		key, value string
		want       []string
	}{
		{"parallelism.default", "0", []string{`"parallelism.default"`, `"0"`, "must be between 1 and 32768"}},
		{"parallelism.default", "four", []string{"must be an integer between 1 and 32768"}},
		{"taskmanager.network.memory.buffers-per-channel", "0", []string{"must be at least 1"}},
		{"taskmanager.network.memory.floating-buffers-per-gate", "-1", []string{"must be at least 0"}},
		{"pipeline.max-parallelism", "0", []string{"must be -1 (derive from the parallelism) or an integer between 1 and 32768"}},
		{"pipeline.max-parallelism", "-2", []string{"must be -1"}},
		{"pipeline.max-parallelism", "40000", []string{"must be -1"}},
		{"pipeline.operator-chaining.enabled", "yes", []string{"must be true or false"}},
		{"execution.runtime-mode", "STREAM", []string{"must be one of STREAMING, BATCH, AUTOMATIC"}},
		{"execution.buffer-timeout.interval", "soon", []string{`must be a duration such as "100 ms", "10s", "1min"`}},
		{"execution.buffer-timeout.interval", "-5 ms", []string{"must not be negative"}},
		{"taskmanager.memory.segment-size", "100", []string{"must be between 256 bytes and 1 gb"}},
		{"taskmanager.memory.segment-size", "2gb", []string{"must be between 256 bytes and 1 gb"}},
		{"taskmanager.memory.segment-size", "lots", []string{"must be a memory size"}},
	}
	for _, tt := range tests {
		c := New()
		err := c.Set(tt.key, tt.value)
		if err == nil {
			t.Errorf("Set(%q, %q) succeeded", tt.key, tt.value)
			continue
		}
		var ce *Error
		if !errors.As(err, &ce) || ce.Key != tt.key || ce.Value != tt.value || errors.Is(err, ErrUnknownKey) {
			t.Errorf("Set(%q, %q) = %#v", tt.key, tt.value, err)
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("Set(%q, %q) = %q, want it to contain %q", tt.key, tt.value, err, w)
			}
		}
		if c.IsSet(tt.key) {
			t.Errorf("failed Set(%q) marked the key as set", tt.key)
		}
	}
}

func TestGetterPanics(t *testing.T) {
	c := New()
	for name, f := range map[string]func(){
		"unknown":       func() { c.Int("no.such.key") },
		"wrong kind":    func() { c.Bool("parallelism.default") },
		"string of int": func() { c.String("parallelism.default") },
		"IsSet unknown": func() { c.IsSet("no.such.key") },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}

func TestUnknownKeySuggestion(t *testing.T) {
	tests := []struct {
		key     string
		suggest string // "" = no suggestion expected
	}{
		{"parallelism.defualt", `did you mean "parallelism.default"?`},
		{"Parallelism.Default", `did you mean "parallelism.default"?`},
		{"segment-size", `did you mean "taskmanager.memory.segment-size"?`},
		{"execution.buffer-timeout", `did you mean "execution.buffer-timeout.interval"?`},
		{"flink.parallelism.default", `did you mean "parallelism.default"?`},
		{"totally.unrelated", ""},
	}
	for _, tt := range tests {
		err := New().Set(tt.key, "1")
		if !errors.Is(err, ErrUnknownKey) {
			t.Fatalf("Set(%q): %v is not ErrUnknownKey", tt.key, err)
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, fmt.Sprintf("unknown configuration key %q", tt.key)) ||
			!strings.HasSuffix(msg, "(run 'weir config keys' or see docs/config.md for the valid keys)") {
			t.Errorf("Set(%q) = %q", tt.key, msg)
		}
		if tt.suggest == "" && strings.Contains(msg, "did you mean") {
			t.Errorf("Set(%q) = %q, want no suggestion", tt.key, msg)
		}
		if tt.suggest != "" && !strings.Contains(msg, tt.suggest) {
			t.Errorf("Set(%q) = %q, want %q", tt.key, msg, tt.suggest)
		}
	}
	// Several suggestions are listed with "or".
	msg := New().Set("taskmanager", "1").Error()
	if !strings.Contains(msg, `" or "`) {
		t.Errorf("Set(taskmanager) = %q, want several suggestions", msg)
	}
}

func TestParseDuration(t *testing.T) {
	good := []struct {
		in   string
		want time.Duration
	}{
		{"0", 0},
		{"100", 100 * time.Millisecond},
		{"100 ms", 100 * time.Millisecond},
		{"100ms", 100 * time.Millisecond},
		{"  100   MS  ", 100 * time.Millisecond},
		{"7 millis", 7 * time.Millisecond},
		{"1 millisecond", time.Millisecond},
		{"3ns", 3},
		{"3 nanos", 3},
		{"3 nanoseconds", 3},
		{"4us", 4 * time.Microsecond},
		{"4µs", 4 * time.Microsecond},
		{"4 micros", 4 * time.Microsecond},
		{"4 microseconds", 4 * time.Microsecond},
		{"10s", 10 * time.Second},
		{"10 sec", 10 * time.Second},
		{"10 secs", 10 * time.Second},
		{"1 second", time.Second},
		{"10 seconds", 10 * time.Second},
		{"1m", time.Minute},
		{"1min", time.Minute},
		{"2 mins", 2 * time.Minute},
		{"2 minutes", 2 * time.Minute},
		{"3h", 3 * time.Hour},
		{"3 hours", 3 * time.Hour},
		{"1 d", 24 * time.Hour},
		{"2 days", 48 * time.Hour},
		{"1m30s", 90 * time.Second},
		{"1.5s", 1500 * time.Millisecond},
		{"1h2m3s", time.Hour + 2*time.Minute + 3*time.Second},
	}
	for _, tt := range good {
		got, err := ParseDuration(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
	bad := []struct{ in, want string }{
		{"", "must be a duration"},
		{"ms", "must be a duration"},
		{"10 fortnights", "must be a duration"},
		{"1.5 min", "must be a duration"},
		{"-1", "must not be negative"},
		{"-100 ms", "must not be negative"},
		{"-1m30s", "must not be negative"},
		{"99999999999999999999 ms", "too large"},
		{"999999999 days", "too large"},
	}
	for _, tt := range bad {
		if _, err := ParseDuration(tt.in); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseDuration(%q) error = %v, want %q", tt.in, err, tt.want)
		}
	}
	for _, d := range []time.Duration{0, 1, 1500, 100 * time.Millisecond, 10 * time.Second, 90 * time.Second, time.Hour, 48 * time.Hour} {
		s := FormatDuration(d)
		if back, err := ParseDuration(s); err != nil || back != d {
			t.Errorf("FormatDuration(%v) = %q does not round-trip: %v, %v", d, s, back, err)
		}
	}
	if s := FormatDuration(100 * time.Millisecond); s != "100 ms" {
		t.Errorf("FormatDuration(100ms) = %q", s)
	}
}

func TestParseMemorySize(t *testing.T) {
	good := []struct {
		in   string
		want int64
	}{
		{"0", 0},
		{"1024", 1024},
		{"100b", 100},
		{"100 bytes", 100},
		{"1k", 1 << 10},
		{"32kb", 32 << 10},
		{"32 KB", 32 << 10},
		{"2 kibibytes", 2 << 10},
		{"64m", 64 << 20},
		{"64 mb", 64 << 20},
		{"1 mebibytes", 1 << 20},
		{"1g", 1 << 30},
		{"1GB", 1 << 30},
		{"1 gibibytes", 1 << 30},
		{"2t", 2 << 40},
		{"2 tb", 2 << 40},
		{"1 tebibytes", 1 << 40},
		{" 7 Mb ", 7 << 20},
		{"8388607 tb", 8388607 << 40},
	}
	for _, tt := range good {
		got, err := ParseMemorySize(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseMemorySize(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
	bad := []struct{ in, want string }{
		{"", "must be a memory size"},
		{"kb", "must be a memory size"},
		{"1.5gb", "must be a memory size"},
		{"12 pb", "must be a memory size"},
		{"1 kib", "must be a memory size"},
		{"-1kb", "must not be negative"},
		{"8388608 tb", "too large"},
		{"99999999999999999999", "too large"},
	}
	for _, tt := range bad {
		if _, err := ParseMemorySize(tt.in); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseMemorySize(%q) error = %v, want %q", tt.in, err, tt.want)
		}
	}
	for _, n := range []int64{0, 1, 1000, 1024, 32 << 10, 1 << 30, 3 << 40, 1<<40 + 1} {
		s := FormatMemorySize(n)
		if back, err := ParseMemorySize(s); err != nil || back != n {
			t.Errorf("FormatMemorySize(%d) = %q does not round-trip: %v, %v", n, s, back, err)
		}
	}
	if s := FormatMemorySize(32 << 10); s != "32 kb" {
		t.Errorf("FormatMemorySize(32k) = %q", s)
	}
}

func TestEnumCaseInsensitive(t *testing.T) {
	for _, in := range []string{"batch", "Batch", "BATCH", " bAtCh "} {
		c := New()
		if err := c.Set("execution.runtime-mode", in); err != nil {
			t.Fatalf("Set(%q): %v", in, err)
		}
		if got := c.String("execution.runtime-mode"); got != "BATCH" {
			t.Errorf("Set(%q) -> %q", in, got)
		}
		if got := c.Explicit()["execution.runtime-mode"]; got != "BATCH" {
			t.Errorf("Explicit after %q = %q", in, got)
		}
	}
}

func TestExplicit(t *testing.T) {
	c, err := Load([]byte("execution.buffer-timeout.interval: 1000\n"), []string{
		"taskmanager.memory.segment-size=65536",
		"pipeline.operator-chaining.enabled=TRUE",
		"execution.runtime-mode=automatic",
		"parallelism.default=+3",
		"pipeline.name= Word Count ",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"execution.buffer-timeout.interval":  "1 s",
		"taskmanager.memory.segment-size":    "64 kb",
		"pipeline.operator-chaining.enabled": "true",
		"execution.runtime-mode":             "AUTOMATIC",
		"parallelism.default":                "3",
		"pipeline.name":                      "Word Count",
	}
	got := c.Explicit()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Explicit() = %v\nwant %v", got, want)
	}
	got["parallelism.default"] = "99"
	if c.Explicit()["parallelism.default"] != "3" {
		t.Error("Explicit returned internal state")
	}
	// Explicitly setting the default value still counts as explicit.
	c2 := New()
	if err := c2.Set("parallelism.default", "1"); err != nil || !c2.IsSet("parallelism.default") {
		t.Errorf("explicit default: IsSet = false, err %v", err)
	}
}

func TestLoadFlatAndNestedYAML(t *testing.T) {
	flat := `
parallelism.default: 4
taskmanager.memory.segment-size: 64kb
execution.buffer-timeout.interval: 10 ms
pipeline.operator-chaining.enabled: false
execution.runtime-mode: batch
pipeline.name: "job: one"
`
	nested := `
parallelism:
  default: 4
taskmanager:
  memory:
    segment-size: 64kb
execution:
  buffer-timeout:
    interval: 10 ms
  runtime-mode: batch
pipeline:
  operator-chaining.enabled: false   # mixed flat and nested
  name: 'job: one'
`
	for name, doc := range map[string]string{"flat": flat, "nested": nested} {
		c, err := Load([]byte(doc), nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if c.Int("parallelism.default") != 4 || c.MemorySize("taskmanager.memory.segment-size") != 64<<10 ||
			c.Duration("execution.buffer-timeout.interval") != 10*time.Millisecond ||
			c.Bool("pipeline.operator-chaining.enabled") || c.String("execution.runtime-mode") != "BATCH" ||
			c.String("pipeline.name") != "job: one" {
			t.Errorf("%s: got %v", name, c.Explicit())
		}
		if c.IsSet("pipeline.max-parallelism") {
			t.Errorf("%s: max-parallelism marked set", name)
		}
	}
}

func TestLoadYAMLEdgeCases(t *testing.T) {
	// Empty and comment-only files are fine.
	for _, doc := range []string{"", "\n\n", "# nothing\n", "---\n"} {
		if _, err := Load([]byte(doc), nil); err != nil {
			t.Errorf("Load(%q): %v", doc, err)
		}
	}
	// Anchors, aliases and merge keys; explicit entries override merged ones.
	doc := `
base: &base
  parallelism.default: 2
  pipeline.name: base
`
	if _, err := Load([]byte(doc), nil); !errors.Is(err, ErrUnknownKey) {
		t.Errorf("anchor holder key should be unknown: %v", err)
	}
	doc = `
execution: &e
  runtime-mode: batch
other: *e
`
	if _, err := Load([]byte(doc), nil); err == nil || !strings.Contains(err.Error(), `"other.runtime-mode"`) {
		t.Errorf("alias: %v", err)
	}
	c, err := Load([]byte(`
pipeline:
  <<: {name: merged, max-parallelism: 256}
  name: own
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.String("pipeline.name") != "own" || c.Int("pipeline.max-parallelism") != 256 {
		t.Errorf("merge: %v", c.Explicit())
	}
}

func TestLoadYAMLErrorsWithLines(t *testing.T) {
	doc := `parallelism.default: 0
taskmanager:
  memory:
    segment-size: huge
pipeline.name:
pipeline.operator-chaining.enabled: [true, false]
paralelism.default: 2
parallelism.default: 3
`
	path := filepath.Join(t.TempDir(), "weir.yaml")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := LoadFile(path, nil)
	errs := joined(t, err)
	want := []struct{ source, key, text string }{
		{path + ":1", "parallelism.default", "must be between 1 and 32768"},
		{path + ":4", "taskmanager.memory.segment-size", "must be a memory size"},
		{path + ":5", "pipeline.name", `has no value; write "" for an empty string`},
		{path + ":6", "pipeline.operator-chaining.enabled", "must have a single value, not a list"},
		{path + ":7", "paralelism.default", `did you mean "parallelism.default"?`},
		{path + ":8", "parallelism.default", "set more than once (first at " + path + ":1)"},
	}
	if len(errs) != len(want) {
		t.Fatalf("got %d errors, want %d:\n%v", len(errs), len(want), err)
	}
	for i, w := range want {
		e := errs[i]
		if e.Source != w.source || e.Key != w.key || !strings.Contains(e.Error(), w.text) ||
			!strings.HasPrefix(e.Error(), w.source+": ") {
			t.Errorf("error %d = %+v (%q), want source %q key %q containing %q", i, e, e, w.source, w.key, w.text)
		}
	}

	// Load without a file name reports "line N".
	_, err = Load([]byte("a: 1\nparallelism.default: x\n"), nil)
	errs = joined(t, err)
	if len(errs) != 2 || errs[0].Source != "line 1" || errs[1].Source != "line 2" {
		t.Errorf("unnamed sources: %v", err)
	}
}

func TestLoadYAMLSyntaxError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(path, []byte("parallelism.default: 2\npipeline.name: [a,\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := LoadFile(path, []string{"nokey"})
	errs := joined(t, err)
	if len(errs) != 2 {
		t.Fatalf("want syntax error and --set error, got %v", err)
	}
	if !strings.HasPrefix(errs[0].Error(), path+":") || !strings.Contains(errs[0].Error(), "invalid YAML") {
		t.Errorf("syntax error = %q", errs[0])
	}
	if errs[1].Source != "--set" {
		t.Errorf("second error = %q", errs[1])
	}
	for _, doc := range []string{"- a\n- b\n", "just a string\n", "a: 1\n---\nb: 2\n", "? [a]\n: 1\n"} {
		if _, err := Load([]byte(doc), nil); err == nil {
			t.Errorf("Load(%q) succeeded", doc)
		}
	}
}

func TestLoadSets(t *testing.T) {
	c, err := Load([]byte("parallelism.default: 2\n"), []string{
		"parallelism.default=3",
		"parallelism.default=5", // last wins
		"pipeline.name=a=b",     // split at the first '='
	})
	if err != nil {
		t.Fatal(err)
	}
	if c.Int("parallelism.default") != 5 || c.String("pipeline.name") != "a=b" {
		t.Errorf("got %v", c.Explicit())
	}

	_, err = Load(nil, []string{"novalue", "=4", "parallelism.default=4"})
	errs := joined(t, err)
	if len(errs) != 2 {
		t.Fatalf("got %v", err)
	}
	for i, e := range errs {
		if e.Source != "--set" || !strings.Contains(e.Error(), "expected the form key=value") {
			t.Errorf("error %d = %q", i, e)
		}
	}
	if !strings.Contains(errs[1].Error(), "empty key") {
		t.Errorf("empty key error = %q", errs[1])
	}
}

func TestLoadReportsAllProblemsInOrder(t *testing.T) {
	_, err := Load([]byte("parallelism.default: -1\nexecution.runtime-mode: fast\n"), []string{
		"bogus.key=1",
		"taskmanager.memory.segment-size=1 pb",
		"no-equals-sign",
		"execution.buffer-timeout.interval=-3s",
	})
	errs := joined(t, err)
	want := []string{
		`line 1: invalid value "-1" for key "parallelism.default": must be between 1 and 32768`,
		`line 2: invalid value "fast" for key "execution.runtime-mode": must be one of STREAMING, BATCH, AUTOMATIC`,
		`--set: unknown configuration key "bogus.key"`,
		`--set: invalid value "1 pb" for key "taskmanager.memory.segment-size": must be a memory size`,
		`--set: invalid item "no-equals-sign": expected the form key=value`,
		`--set: invalid value "-3s" for key "execution.buffer-timeout.interval": must not be negative`,
	}
	if len(errs) != len(want) {
		t.Fatalf("got %d errors, want %d:\n%v", len(errs), len(want), err)
	}
	for i, w := range want {
		if !strings.HasPrefix(errs[i].Error(), w) {
			t.Errorf("error %d = %q\nwant prefix %q", i, errs[i], w)
		}
		if !strings.Contains(err.Error(), w) {
			t.Errorf("joined error lacks %q", w)
		}
	}
	if !errors.Is(err, ErrUnknownKey) {
		t.Error("joined error does not match ErrUnknownKey")
	}
	if errors.Is(errs[0], ErrUnknownKey) {
		t.Error("invalid value matches ErrUnknownKey")
	}
}

func TestMaxParallelism(t *testing.T) {
	if _, err := Load(nil, []string{"parallelism.default=200", "pipeline.max-parallelism=128"}); err == nil ||
		!strings.Contains(err.Error(), `--set: "pipeline.max-parallelism" (128) must not be less than "parallelism.default" (200)`) {
		t.Errorf("max < parallelism: %v", err)
	}
	for _, sets := range [][]string{
		{"parallelism.default=200"},
		{"parallelism.default=128", "pipeline.max-parallelism=128"},
		{"pipeline.max-parallelism=-1"},
	} {
		if _, err := Load(nil, sets); err != nil {
			t.Errorf("Load(%v): %v", sets, err)
		}
	}
	for p, want := range map[int64]int64{1: 128, 85: 128, 86: 256, 100: 256, 1000: 2048, 20000: 32768, 32768: 32768} {
		if got := DefaultMaxParallelism(p); got != want {
			t.Errorf("DefaultMaxParallelism(%d) = %d, want %d", p, got, want)
		}
	}
}

// The smallest debloated buffer cannot be larger than a buffer.
func TestMinSegmentSize(t *testing.T) {
	if _, err := Load(nil, []string{"taskmanager.memory.segment-size=1kb", "taskmanager.memory.min-segment-size=2kb"}); err == nil ||
		!strings.Contains(err.Error(), `--set: "taskmanager.memory.min-segment-size" (2048 bytes) must not be greater than "taskmanager.memory.segment-size" (1024 bytes)`) {
		t.Errorf("min > segment: %v", err)
	}
	c, err := Load(nil, []string{"taskmanager.memory.segment-size=1kb", "taskmanager.memory.min-segment-size=1kb"})
	if err != nil || c.MemorySize("taskmanager.memory.min-segment-size") != 1024 {
		t.Errorf("min = segment: %v", err)
	}
	if got := New().MemorySize("taskmanager.memory.min-segment-size"); got != 256 {
		t.Errorf("default %d, want 256", got)
	}
}

func TestLoadFile(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.yaml")
	_, err := LoadFile(missing, []string{"parallelism.default=0"})
	errs := joined(t, err)
	if len(errs) != 2 || errs[0].Source != missing || !strings.Contains(errs[0].Error(), missing) ||
		!strings.Contains(errs[0].Error(), "cannot read configuration file") {
		t.Fatalf("missing file: %v", err)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		t.Error("missing file error does not match fs.ErrNotExist")
	}
	if _, err := LoadFile(t.TempDir(), nil); err == nil {
		t.Error("LoadFile(directory) succeeded")
	}

	c, err := LoadFile("", []string{"parallelism.default=7"})
	if err != nil || c.Int("parallelism.default") != 7 {
		t.Errorf("LoadFile(\"\"): %v", err)
	}

	path := filepath.Join(t.TempDir(), "ok.yaml")
	if err := os.WriteFile(path, []byte("parallelism.default: 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err = LoadFile(path, []string{"pipeline.name=x"})
	if err != nil || c.Int("parallelism.default") != 2 || c.String("pipeline.name") != "x" {
		t.Errorf("LoadFile(ok): %v", err)
	}
}

var updateDocs = flag.Bool("update-docs", false, "rewrite the key table in ../docs/config.md")

const (
	docPath       = "../docs/config.md"
	docTableBegin = "<!-- BEGIN GENERATED KEY TABLE: go test ./config -update-docs -->\n"
	docTableEnd   = "<!-- END GENERATED KEY TABLE -->\n"
)

// markdownTable renders Options() as the table in docs/config.md.
func markdownTable() string {
	var b strings.Builder
	b.WriteString("| Key | Type | Default | Description |\n")
	b.WriteString("| --- | --- | --- | --- |\n")
	esc := func(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
	for _, o := range Options() {
		typ := o.Kind.String()
		if c := o.Constraint(); c != "" {
			typ += " (" + c + ")"
		}
		def := "`" + o.Default + "`"
		if o.Default == "" {
			def = "(empty)"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", o.Key, esc(typ), def, esc(o.Description))
	}
	return b.String()
}

func TestDocsMentionEveryKey(t *testing.T) {
	data, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	before, rest, ok1 := strings.Cut(doc, docTableBegin)
	table, after, ok2 := strings.Cut(rest, docTableEnd)
	if !ok1 || !ok2 {
		t.Fatalf("%s lacks the generated table markers", docPath)
	}
	want := markdownTable()
	if *updateDocs && table != want {
		doc = before + docTableBegin + want + docTableEnd + after
		if err := os.WriteFile(docPath, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		table = want
	}
	for _, o := range Options() {
		if !strings.Contains(doc, "`"+o.Key+"`") {
			t.Errorf("%s does not mention key %q", docPath, o.Key)
		}
	}
	if table != want {
		t.Errorf("the key table in %s is out of date; run: go test ./config -update-docs", docPath)
	}
}

func TestYAMLSyntaxErrorOnFirstLine(t *testing.T) {
	// yaml.v3 omits the line for some errors on line 1; the file name is
	// still reported.
	path := filepath.Join(t.TempDir(), "first.yaml")
	if err := os.WriteFile(path, []byte("a: b: c\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := LoadFile(path, nil)
	if errs := joined(t, err); len(errs) != 1 || !strings.HasPrefix(errs[0].Error(), path+": invalid YAML: ") {
		t.Errorf("got %v", err)
	}
	_, err = Load([]byte("a: b: c\n"), nil)
	if errs := joined(t, err); len(errs) != 1 || !strings.HasPrefix(errs[0].Error(), "invalid YAML: ") {
		t.Errorf("got %v", err)
	}
}

// Float keys parse decimals, reject what is not a finite number in range,
// and load from YAML numbers.
func TestFloatKeys(t *testing.T) {
	c := New()
	if got := c.Float("restart-strategy.exponential-delay.backoff-multiplier"); got != 1.5 {
		t.Fatalf("default %v, want 1.5", got)
	}
	if err := c.Set("restart-strategy.exponential-delay.backoff-multiplier", " 2.25 "); err != nil {
		t.Fatal(err)
	}
	if got := c.Float("restart-strategy.exponential-delay.backoff-multiplier"); got != 2.25 {
		t.Fatalf("got %v", got)
	}
	for _, bad := range []string{"abc", "NaN", "+Inf", "0.5"} {
		err := c.Set("restart-strategy.exponential-delay.backoff-multiplier", bad)
		if err == nil || !strings.Contains(err.Error(), "must be a number at least 1") {
			t.Errorf("%q: err %v", bad, err)
		}
	}
	if err := c.Set("restart-strategy.exponential-delay.jitter-factor", "1.5"); err == nil || !strings.Contains(err.Error(), "between 0 and 1") {
		t.Errorf("jitter 1.5: err %v", err)
	}
	path := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(path, []byte("restart-strategy:\n  exponential-delay:\n    jitter-factor: 0.25\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	lc, err := LoadFile(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := lc.Float("restart-strategy.exponential-delay.jitter-factor"); got != 0.25 {
		t.Fatalf("from YAML %v", got)
	}
}
