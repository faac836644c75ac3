package cli

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/weirstream/weir/internal/rest"

	"github.com/weirstream/weir/internal/jobs"
)

// TestMain keeps the discovery files of runs without checkpoints in a
// directory of this test binary: jobs of other processes (or of
// concurrent tests of other packages) stay out of 'weir list'.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "weir-runtime-")
	if err != nil {
		panic(err)
	}
	os.Setenv(rest.EnvRuntimeDir, dir)
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) { os.RemoveAll(dir) }))
}

// result is what one in-process run of the command line produced.
type result struct {
	code           int
	stdout, stderr string
}

// runCLI runs the command line with the built-in jobs.
func runCLI(t *testing.T, args ...string) result {
	t.Helper()
	return runWith(t, context.Background(), jobs.Builtin(), args...)
}

// runWith runs the command line with ctx standing in for the signal context
// and the given registry. Whatever happens, no stack trace may reach the
// user.
func runWith(t *testing.T, ctx context.Context, reg *jobs.Registry, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(ctx, args, strings.NewReader(""), &stdout, &stderr, reg)
	r := result{code: code, stdout: stdout.String(), stderr: stderr.String()}
	for _, bad := range []string{"goroutine ", "panic"} {
		if strings.Contains(r.stderr, bad) {
			t.Errorf("weir %s: stderr contains %q:\n%s", strings.Join(args, " "), bad, r.stderr)
		}
	}
	return r
}

// want fails the test unless r has the exit code and every stderr fragment.
func (r result) want(t *testing.T, code int, stderrHas ...string) {
	t.Helper()
	if r.code != code {
		t.Errorf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.stdout, r.stderr)
	}
	for _, s := range stderrHas {
		if !strings.Contains(r.stderr, s) {
			t.Errorf("stderr lacks %q:\n%s", s, r.stderr)
		}
	}
}

func TestMainVersion(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := Main([]string{"--version"}, strings.NewReader(""), &stdout, &stderr); code != ExitOK {
		t.Fatalf("exit code %d, stderr:\n%s", code, stderr.String())
	}
	if got := stdout.String(); !strings.Contains(got, Version) {
		t.Errorf("--version printed %q, want it to contain %q", got, Version)
	}
}

func TestHelpAndListings(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--help"}, []string{"run", "jobs", "config", "bench", "--log-format", "--log-level", "Exit codes"}},
		{[]string{"help", "run"}, []string{"wordcount", "--parallelism"}},
		{[]string{"run", "--help"}, []string{"Jobs:", "wordcount", "--parallelism", "--set", "--config", "--log-level"}},
		{[]string{"run", "wordcount", "--help"}, []string{"Job flags:", "--input", "--output", "--lines", "(default 10000)",
			"Common flags:", "--parallelism", "--set", "--config", "unspecified"}},
		{[]string{"run", "wordcount", "-h"}, []string{"--input"}},
		{[]string{"jobs"}, []string{"wordcount", "Count the words", "--input", "--output", "--lines", "(default 10000)"}},
		{[]string{"jobs", "--help"}, []string{"List the built-in jobs"}},
		{[]string{"config", "keys"}, []string{"parallelism.default", "kind: int", "default: 1", "valid: 1 to 32768",
			"execution.runtime-mode", "STREAMING, BATCH, AUTOMATIC", "taskmanager.memory.segment-size", "memory size"}},
		{[]string{"config", "--help"}, []string{"keys"}},
		{[]string{"bench", "--help"}, []string{"pipeline"}},
		{[]string{"bench", "pipeline", "--help"}, []string{"--edge", "--records", "50000000", "--json", "--parallelism"}},
		{[]string{"bench", "nexmark", "--help"}, []string{"--query", "--all", "--tps", "--seed", "--state-backend", "(default \"pebble\")",
			"--checkpoint-interval", "(default 3m0s)", "--incremental", "(default true)", "--checkpointing-mode", "--output"}},
		{[]string{"nexmark", "generate", "--help"}, []string{"--events", "--tps", "--seed", "--output", "event_type"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			r := runCLI(t, tc.args...)
			r.want(t, ExitOK)
			for _, s := range tc.want {
				if !strings.Contains(r.stdout, s) {
					t.Errorf("stdout lacks %q:\n%s", s, r.stdout)
				}
			}
			if r.stderr != "" {
				t.Errorf("stderr not empty:\n%s", r.stderr)
			}
		})
	}
}

func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"unknown job", []string{"run", "nosuch"},
			[]string{`unknown job "nosuch"`, "valid jobs: counter, kafka-wordcount, troubled, wordcount", "weir run --help"}},
		{"misspelt job", []string{"run", "wordcont", "--input", "x"},
			[]string{`unknown job "wordcont"`, `did you mean "wordcount"?`}},
		{"missing job", []string{"run"}, []string{"missing job", "wordcount"}},
		{"unknown command", []string{"nosuch"}, []string{`unknown command "nosuch"`, "run"}},
		{"missing command", nil, []string{"missing command", "bench, cancel, checkpoint, checkpoints, cluster, config, dev, doctor, jobs, list, nexmark, run, savepoint, status, stop, taskmanager"}},
		{"unknown config command", []string{"config", "values"}, []string{`unknown command "values"`, "keys"}},
		{"extra argument", []string{"run", "wordcount", "extra"}, []string{`unexpected argument "extra"`}},
		{"unknown flag", []string{"run", "wordcount", "--bogus"},
			[]string{"unknown flag: --bogus", "valid flags for 'weir run wordcount'", "--input", "--output", "--lines", "--parallelism", "--set", "--config"}},
		{"misspelt flag", []string{"run", "wordcount", "--ouput", "x"},
			[]string{"unknown flag: --ouput", "did you mean --output?"}},
		{"unknown shorthand", []string{"run", "wordcount", "-z"}, []string{"unknown shorthand flag", "--input"}},
		{"flag without value", []string{"run", "wordcount", "--input"}, []string{"flag needs an argument", "--input"}},
		{"unknown set key", []string{"run", "wordcount", "--set", "parallelism.defualt=2"},
			[]string{`unknown configuration key "parallelism.defualt"`, `did you mean "parallelism.default"?`, "weir config keys"}},
		{"malformed set item", []string{"run", "wordcount", "--set", "parallelism.default"}, []string{"expected the form key=value"}},
		{"missing config file", []string{"run", "wordcount", "--config", "/does/not/exist.yaml"},
			[]string{"/does/not/exist.yaml", "cannot read configuration file"}},
		{"all problems at once", []string{"run", "wordcount", "--parallelism", "0", "--set", "taskmanager.memory.segment-size=huge",
			"--input", "/does/not/exist"},
			[]string{"3 problems", "--parallelism 0: must be between 1 and 32768", `invalid value "huge" for key "taskmanager.memory.segment-size"`,
				"--input /does/not/exist: no such file or directory"}},
		{"malformed values do not stop parsing", []string{"run", "wordcount", "-p", "four", "--lines", "many", "--log-level", "loud",
			"--log-format", "xml", "--output", "/does/not/exist/out.txt"},
			[]string{"5 problems", `--parallelism "four": must be an integer`, `--lines "many": must be an integer`,
				`--log-level "loud"`, `--log-format "xml"`, "--output /does/not/exist/out.txt"}},
		{"lines with input", []string{"run", "wordcount", "--input", "cli.go", "--lines", "5"}, []string{"--lines applies only to generated text"}},
		{"negative lines", []string{"run", "wordcount", "--lines", "-1"}, []string{"--lines -1: must not be negative"}},
		{"max parallelism below parallelism", []string{"run", "wordcount", "--set", "pipeline.max-parallelism=2", "-p", "4"},
			[]string{`"pipeline.max-parallelism" (2) must not be less than "parallelism.default" (4)`}},
		{"bench edge", []string{"bench", "pipeline", "--edge", "teleport", "--records", "0", "-p", "x"},
			[]string{"3 problems", `--edge "teleport": must be chained or rebalance`, "--records 0", `--parallelism "x"`}},
		{"bench unknown flag", []string{"bench", "pipeline", "--record", "5"}, []string{"did you mean --records?"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runCLI(t, tc.args...)
			r.want(t, ExitUsage, tc.want...)
			if !strings.HasPrefix(r.stderr, "error: ") {
				t.Errorf("stderr does not start with \"error: \":\n%s", r.stderr)
			}
			if r.stdout != "" {
				t.Errorf("stdout not empty:\n%s", r.stdout)
			}
		})
	}
}
