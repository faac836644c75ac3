// Package sink holds weir's built-in sinks: print to a writer, write lines to
// text files, and discard.
//
// These sinks are not yet exactly-once: after a failure and restart the same
// records may be written again.
package sink

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/weirstream/weir"
)

// Print writes every record to standard output, one per line, as fmt.Sprint
// formats it. With parallelism above 1 each line starts with the subtask's
// number, 1-based, as in Flink: "2> record".
func Print[T any]() weir.Sink[T] { return PrintTo[T](os.Stdout) }

// PrintTo is Print writing to w. Subtasks write whole lines; w is shared
// under a lock.
func PrintTo[T any](w io.Writer) weir.Sink[T] {
	return PrintToFunc(w, func(v T) string { return fmt.Sprint(v) })
}

// PrintToFunc is PrintTo with its own formatting of records.
func PrintToFunc[T any](w io.Writer, format func(T) string) weir.Sink[T] {
	return &printSink[T]{w: &lockedWriter{w: w}, format: format}
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

type printSink[T any] struct {
	w      *lockedWriter
	format func(T) string
}

func (p *printSink[T]) Name() string { return "Print" }

func (p *printSink[T]) CreateWriter(ctx weir.SinkContext) (weir.SinkWriter[T], error) {
	prefix := ""
	if ctx.Parallelism > 1 {
		prefix = fmt.Sprintf("%d> ", ctx.Subtask+1)
	}
	return &lineWriter[T]{bw: bufio.NewWriterSize(p.w, 32<<10), prefix: prefix, format: p.format}, nil
}

// lineWriter writes formatted records as lines into a buffered writer. The
// buffer hands whole lines on: a line longer than the buffer is written in
// one piece by bufio.
type lineWriter[T any] struct {
	bw     *bufio.Writer
	prefix string
	format func(T) string
	close  func() error
}

func (w *lineWriter[T]) Write(v T) error {
	s := w.format(v)
	if w.bw.Available() < len(w.prefix)+len(s)+1 {
		if err := w.bw.Flush(); err != nil {
			return err
		}
	}
	w.bw.WriteString(w.prefix)
	w.bw.WriteString(s)
	return w.bw.WriteByte('\n')
}

func (w *lineWriter[T]) Flush() error { return w.bw.Flush() }

func (w *lineWriter[T]) Close() error {
	err := w.bw.Flush()
	if w.close != nil {
		if cerr := w.close(); err == nil {
			err = cerr
		}
	}
	return err
}

// TextFile writes format(v) for every record v as a line. With sink
// parallelism 1 it writes the file path; with parallelism p > 1, path is a
// directory holding one file per subtask, part-0 ... part-<p-1>. Existing
// files are replaced.
func TextFile[T any](path string, format func(T) string) weir.Sink[T] {
	return textFile[T]{path: path, format: format}
}

type textFile[T any] struct {
	path   string
	format func(T) string
	dir    bool
}

// TextDir is TextFile writing to the directory dir at any parallelism: one
// file per subtask, part-0 ... part-<p-1>.
func TextDir[T any](dir string, format func(T) string) weir.Sink[T] {
	return textFile[T]{path: dir, format: format, dir: true}
}

func (t textFile[T]) Name() string { return "TextFile(" + t.path + ")" }

func (t textFile[T]) CreateWriter(ctx weir.SinkContext) (weir.SinkWriter[T], error) {
	name := t.path
	if ctx.Parallelism > 1 || t.dir {
		if err := os.MkdirAll(t.path, 0o755); err != nil {
			return nil, fmt.Errorf("text file sink: %w", err)
		}
		name = filepath.Join(t.path, fmt.Sprintf("part-%d", ctx.Subtask))
	}
	f, err := os.Create(name)
	if err != nil {
		return nil, fmt.Errorf("text file sink: %w", err)
	}
	return &lineWriter[T]{bw: bufio.NewWriterSize(f, 64<<10), format: t.format, close: f.Close}, nil
}

// Discard drops every record; benchmarks use it.
func Discard[T any]() weir.Sink[T] { return discard[T]{} }

type discard[T any] struct{}

func (discard[T]) Name() string { return "Discard" }

func (discard[T]) CreateWriter(weir.SinkContext) (weir.SinkWriter[T], error) {
	return discardWriter[T]{}, nil
}

type discardWriter[T any] struct{}

func (discardWriter[T]) Write(T) error { return nil }
func (discardWriter[T]) Flush() error  { return nil }
func (discardWriter[T]) Close() error  { return nil }
