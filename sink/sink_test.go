package sink_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/sink"
	"github.com/weirstream/weir/source"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func run(t *testing.T, p int, build func(s *weir.DataStream[int64])) {
	t.Helper()
	env := weir.NewEnvironment(weir.Options{Parallelism: p, Logger: quiet})
	build(weir.FromSource(env, source.Sequence(0, 999)))
	if err := env.Execute(context.Background(), "sink-test"); err != nil {
		t.Fatal(err)
	}
}

func sortedLines(s string) []string {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	slices.Sort(lines)
	return lines
}

func TestPrintPrefixesSubtaskAboveParallelismOne(t *testing.T) {
	var one, two bytes.Buffer
	run(t, 1, func(s *weir.DataStream[int64]) { weir.SinkTo(s, sink.PrintTo[int64](&one)) })
	run(t, 2, func(s *weir.DataStream[int64]) { weir.SinkTo(s, sink.PrintTo[int64](&two)) })
	lines := strings.Split(strings.TrimSuffix(one.String(), "\n"), "\n")
	if len(lines) != 1000 || lines[0] != "0" || lines[999] != "999" {
		t.Fatalf("parallelism 1 printed %d lines, first %q", len(lines), lines[0])
	}
	for _, l := range sortedLines(two.String()) {
		prefix, num, ok := strings.Cut(l, "> ")
		n, err := strconv.Atoi(num)
		if !ok || err != nil || (prefix == "1") != (n < 500) || (prefix != "1" && prefix != "2") {
			t.Fatalf("line %q: want subtask prefix 1 for 0..499 and 2 for 500..999", l)
		}
	}
}

func TestTextFileSink(t *testing.T) {
	dir := t.TempDir()
	single := filepath.Join(dir, "out.txt")
	format := func(v int64) string { return "n=" + strconv.FormatInt(v, 10) }
	run(t, 2, func(s *weir.DataStream[int64]) { weir.SinkTo(s, sink.TextFile(single, format)).SetParallelism(1) })
	data, err := os.ReadFile(single)
	if err != nil {
		t.Fatal(err)
	}
	if got := sortedLines(string(data)); len(got) != 1000 || !slices.Contains(got, "n=999") {
		t.Fatalf("single file has %d lines", len(got))
	}

	parts := filepath.Join(dir, "parts")
	run(t, 3, func(s *weir.DataStream[int64]) { weir.SinkTo(s, sink.TextFile(parts, format)) })
	var all []string
	for i := range 3 {
		data, err := os.ReadFile(filepath.Join(parts, "part-"+strconv.Itoa(i)))
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, sortedLines(string(data))...)
	}
	if len(all) != 1000 {
		t.Fatalf("part files hold %d lines", len(all))
	}

	env := weir.NewEnvironment(weir.Options{Logger: quiet})
	weir.SinkTo(weir.FromSource(env, source.Sequence(0, 1)), sink.TextFile(filepath.Join(dir, "no", "such", "dir", "f"), format))
	err = env.Execute(context.Background(), "bad-path")
	var oe *weir.OperatorError
	if !errors.As(err, &oe) || !strings.Contains(err.Error(), "text file sink") {
		t.Fatalf("err = %v, want an operator error from the text file sink", err)
	}
}

func TestDiscard(t *testing.T) {
	run(t, 2, func(s *weir.DataStream[int64]) { weir.SinkTo(s, sink.Discard[int64]()) })
}
