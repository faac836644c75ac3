package jobs

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"go.uber.org/goleak"

	"github.com/weirstream/weir"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRegistry(t *testing.T) {
	r := Builtin()
	if got := r.Names(); !slices.Equal(got, []string{"counter", "kafka-wordcount", "troubled", "wordcount"}) {
		t.Fatalf("Names() = %v", got)
	}
	a, ok := r.New("wordcount")
	b, _ := r.New("wordcount")
	if !ok || a == b {
		t.Fatalf("New must return a fresh job each time")
	}
	if _, ok := r.New("nosuch"); ok {
		t.Fatalf("New(nosuch) succeeded")
	}
	if got := Builtin().Names(); len(got) != 4 {
		t.Fatalf("registries share state: %v", got)
	}
	for _, bad := range []func() Job{NewWordCount, func() Job { return &WordCount{} }} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Add of a duplicate name did not panic")
				}
			}()
			r.Add(bad)
		}()
	}
}

// parse returns a wordcount job with args parsed into its flags.
func parse(t *testing.T, args ...string) *WordCount {
	t.Helper()
	j := NewWordCount().(*WordCount)
	fs := pflag.NewFlagSet("wordcount", pflag.ContinueOnError)
	j.RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return j
}

func TestWordCountValidateReportsEverything(t *testing.T) {
	dir := t.TempDir()
	err := parse(t, "--input", filepath.Join(dir, "missing.txt"), "--lines", "-3",
		"--output", filepath.Join(dir, "no", "out.txt")).Validate()
	if err == nil {
		t.Fatal("Validate accepted bad settings")
	}
	for _, want := range []string{"--input", "no such file", "--lines applies only to generated text",
		"--lines -3: must not be negative", "--output", "directory"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}

	in := filepath.Join(dir, "in.txt")
	if err := os.WriteFile(in, []byte("a b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := parse(t, "--input", in, "--output", in).Validate(); err == nil || !strings.Contains(err.Error(), "is the input file") {
		t.Errorf("writing over the input not refused: %v", err)
	}
	if err := parse(t, "--input", dir).Validate(); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("directory as input not refused: %v", err)
	}
	if err := parse(t, "--output", in).Validate(); err == nil || !strings.Contains(err.Error(), "is a file") {
		t.Errorf("a file as the output directory not refused: %v", err)
	}
	if err := parse(t, "--input", in, "--output", filepath.Join(dir, "out")).Validate(); err != nil {
		t.Errorf("valid settings refused: %v", err)
	}
	if err := parse(t, "--output", dir).Validate(); err != nil {
		t.Errorf("an existing output directory refused: %v", err)
	}
}

func TestGeneratedLine(t *testing.T) {
	inVocab := map[string]bool{}
	for _, w := range vocabulary {
		inVocab[w] = true
	}
	for i := range int64(1000) {
		line := GeneratedLine(i)
		if line != GeneratedLine(i) {
			t.Fatalf("line %d is not deterministic", i)
		}
		words := strings.Fields(line)
		if len(words) < 1 || len(words) > maxGeneratedWords || strings.Join(words, " ") != line {
			t.Fatalf("line %d = %q: want 1 to %d words, single spaces", i, line, maxGeneratedWords)
		}
		for _, w := range words {
			if !inVocab[w] {
				t.Fatalf("line %d has %q, not in the vocabulary", i, w)
			}
		}
	}
}

// TestWordCountParallelismInvariant runs the job at several parallelisms:
// the sorted output must not change.
func TestWordCountParallelismInvariant(t *testing.T) {
	var first string
	for _, p := range []int{1, 3} {
		j := parse(t, "--lines", "2000")
		if err := j.Validate(); err != nil {
			t.Fatal(err)
		}
		env := weir.NewEnvironment(weir.Options{Parallelism: p, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		var out bytes.Buffer
		if err := j.Build(env, &out); err != nil {
			t.Fatal(err)
		}
		if err := env.Execute(context.Background(), "wordcount"); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		slices.Sort(lines)
		got := strings.Join(lines, "\n")
		if p == 1 {
			first = got
		} else if got != first {
			t.Errorf("parallelism %d output differs from parallelism 1:\n%s\nvs\n%s", p, got, first)
		}
	}
}

func TestTroubledValidateAndDefaults(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "--induce: choose the problem"},
		{[]string{"--induce", "nosuch"}, `--induce "nosuch": must be one of backpressure, skew`},
		{[]string{"--induce", "skew", "--duration", "-1s"}, "--duration -1s"},
	} {
		j := NewTroubled().(*Troubled)
		fs := pflag.NewFlagSet("troubled", pflag.ContinueOnError)
		j.RegisterFlags(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		if err := j.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: Validate() = %v, want %q", tc.args, err, tc.want)
		}
	}
	for _, p := range TroubledProblems {
		j := NewTroubled().(*Troubled)
		j.SetInduce(p)
		if err := j.Validate(); err != nil {
			t.Errorf("%s: %v", p, err)
		}
		var d Defaulter = j
		if d.Defaults()["execution.checkpointing.interval"] == "" {
			t.Errorf("%s: no checkpoint interval among the defaults", p)
		}
		// Without checkpointing the job says what to set.
		err := j.Build(weir.NewEnvironment(weir.Options{}), io.Discard)
		if err == nil || !strings.Contains(err.Error(), "--set execution.checkpointing.interval=") {
			t.Errorf("%s without checkpointing: %v", p, err)
		}
	}
}
