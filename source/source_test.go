package source_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/source"
)

// readAll reads every subtask's reader of src at parallelism p directly,
// without a job, and returns what each subtask emitted.
func readAll[T any](t *testing.T, src weir.Source[T], p int) [][]T {
	t.Helper()
	out := make([][]T, p)
	for i := range p {
		r, err := src.CreateReader(weir.SourceContext{Subtask: i, Parallelism: p})
		if err != nil {
			t.Fatal(err)
		}
		out[i] = read(t, r, -1)
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// read calls r.ReadBatch up to batches times (to the end if negative) and
// returns what it emitted.
func read[T any](t *testing.T, r weir.SourceReader[T], batches int) []T {
	t.Helper()
	c := &sliceCollector[T]{}
	for b := 0; batches < 0 || b < batches; b++ {
		st, err := r.ReadBatch(c)
		if err != nil {
			t.Fatal(err)
		}
		if st == weir.EndOfInput {
			break
		}
	}
	return c.got
}

type sliceCollector[T any] struct{ got []T }

func (s *sliceCollector[T]) Collect(v T) { s.got = append(s.got, v) }

func TestSequenceSplitsContiguously(t *testing.T) {
	for _, p := range []int{1, 3, 7} {
		parts := readAll(t, source.Sequence(-5, 10_000), p)
		var all []int64
		for _, part := range parts {
			if !slices.IsSorted(part) {
				t.Fatalf("p=%d: a subtask's range is not in order", p)
			}
			all = append(all, part...)
		}
		if len(all) != 10_006 || all[0] != -5 || all[len(all)-1] != 10_000 || !slices.IsSorted(all) {
			t.Fatalf("p=%d: got %d numbers", p, len(all))
		}
	}
	if _, err := source.Sequence(5, 1).CreateReader(weir.SourceContext{Parallelism: 1}); err == nil {
		t.Fatal("reversed sequence accepted")
	}
}

func TestGeneratorAndCollection(t *testing.T) {
	parts := readAll(t, source.Generator(1000, func(i int64) int64 { return i * i }), 4)
	var all []int64
	for _, p := range parts {
		all = append(all, p...)
	}
	for i, v := range all {
		if v != int64(i*i) {
			t.Fatalf("record %d = %d", i, v)
		}
	}
	items := []string{"a", "b", "c", "d", "e"}
	got := readAll(t, source.Collection(items...), 2)
	if !slices.Equal(got[0], []string{"a", "c", "e"}) || !slices.Equal(got[1], []string{"b", "d"}) {
		t.Fatalf("collection split %v", got)
	}
	if got := readAll(t, source.Collection(items...), 1); !slices.Equal(got[0], items) {
		t.Fatalf("collection at parallelism 1 = %v", got[0])
	}
}

// Every line of a file is read exactly once at any parallelism, whatever
// its length and line endings, and wherever the split points fall.
func TestTextFileReadsEveryLineOnce(t *testing.T) {
	long := strings.Repeat("x", 200_000) // longer than the reader's buffer
	cases := map[string]string{
		"empty":               "",
		"one line no newline": "hello",
		"trailing newline":    "a\nb\nc\n",
		"empty lines":         "\n\n\na\n\n",
		"crlf":                "one\r\ntwo\r\nthree",
		"long lines":          "short\n" + long + "\n" + long + "x\nend",
		"many":                strings.Repeat("line of text\n", 5000),
	}
	dir := t.TempDir()
	for name, content := range cases {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "-"))
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		want := strings.Split(strings.ReplaceAll(content, "\r\n", "\n"), "\n")
		if strings.HasSuffix(content, "\n") || content == "" {
			want = want[:len(want)-1]
		}
		for _, p := range []int{1, 2, 3, 8, 64} {
			var got []string
			for _, part := range readAll(t, source.TextFile(path), p) {
				got = append(got, part...)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("%s at parallelism %d: got %d lines, want %d", name, p, len(got), len(want))
			}
		}
	}
}

func TestTextFileErrors(t *testing.T) {
	for _, path := range []string{filepath.Join(t.TempDir(), "missing.txt"), t.TempDir()} {
		_, err := source.TextFile(path).CreateReader(weir.SourceContext{Parallelism: 1})
		if err == nil || !strings.Contains(err.Error(), "text file source") {
			t.Fatalf("%s: err = %v", path, err)
		}
	}
}

// The sources run as parallel subtasks of a job, too.
func TestTextFileInAJob(t *testing.T) {
	path := filepath.Join(t.TempDir(), "in.txt")
	var sb strings.Builder
	for i := range 3000 {
		sb.WriteString(strings.Repeat("w", i%50) + "\n")
	}
	if err := os.WriteFile(path, []byte(sb.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	env := weir.NewEnvironment(weir.Options{Parallelism: 3, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	lens := weir.Map(weir.FromSource(env, source.TextFile(path)), func(s string) int64 { return int64(len(s)) })
	var mu sync.Mutex
	var total int64
	var n int
	weir.SinkTo(lens, sinkFunc(func(v int64) { mu.Lock(); total += v; n++; mu.Unlock() }))
	if err := env.Execute(context.Background(), "text"); err != nil {
		t.Fatal(err)
	}
	if n != 3000 || total != int64(60*(49*50/2)) {
		t.Fatalf("read %d lines of total length %d", n, total)
	}
}

type sinkFunc func(int64)

func (f sinkFunc) CreateWriter(weir.SinkContext) (weir.SinkWriter[int64], error) { return f, nil }
func (f sinkFunc) Write(v int64) error                                           { f(v); return nil }
func (f sinkFunc) Flush() error                                                  { return nil }
func (f sinkFunc) Close() error                                                  { return nil }
