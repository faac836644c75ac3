// Package source holds weir's built-in sources: a number sequence, a
// generator, a collection and a text file. Each splits its input among the
// parallel subtasks that read it.
package source

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/weirstream/weir"
)

// batchSize is how many records a reader emits per ReadBatch call.
const batchSize = 2048

// split returns the part [lo, hi) of [0, n) that subtask i of p reads.
func split(n int64, i, p int) (lo, hi int64) {
	return n * int64(i) / int64(p), n * int64(i+1) / int64(p)
}

// Sequence emits the numbers from..to, both included, split into contiguous
// ranges, one per subtask. Each subtask emits its range in order.
func Sequence(from, to int64) weir.Source[int64] { return sequence{from: from, to: to} }

type sequence struct{ from, to int64 }

func (s sequence) Name() string { return fmt.Sprintf("Sequence(%d..%d)", s.from, s.to) }

func (s sequence) CreateReader(ctx weir.SourceContext) (weir.SourceReader[int64], error) {
	if s.to < s.from {
		return nil, fmt.Errorf("sequence %d..%d: to must not be smaller than from", s.from, s.to)
	}
	lo, hi := split(s.to-s.from+1, ctx.Subtask, ctx.Parallelism)
	return &sequenceReader{next: s.from + lo, end: s.from + hi}, nil
}

type sequenceReader struct{ next, end int64 }

func (r *sequenceReader) ReadBatch(out weir.Collector[int64]) (weir.ReadStatus, error) {
	stop := min(r.next+batchSize, r.end)
	for i := r.next; i < stop; i++ {
		out.Collect(i)
	}
	r.next = stop
	if r.next >= r.end {
		return weir.EndOfInput, nil
	}
	return weir.MoreAvailable, nil
}

func (r *sequenceReader) Close() error { return nil }

// Generator emits fn(i) for i in 0..count-1, split into contiguous ranges,
// one per subtask. fn must be safe to call from several goroutines.
func Generator[T any](count int64, fn func(i int64) T) weir.Source[T] {
	return generator[T]{count: count, fn: fn}
}

type generator[T any] struct {
	count int64
	fn    func(int64) T
}

func (g generator[T]) Name() string { return fmt.Sprintf("Generator(%d)", g.count) }

func (g generator[T]) CreateReader(ctx weir.SourceContext) (weir.SourceReader[T], error) {
	if g.count < 0 {
		return nil, fmt.Errorf("generator: count %d must not be negative", g.count)
	}
	lo, hi := split(g.count, ctx.Subtask, ctx.Parallelism)
	return &generatorReader[T]{next: lo, end: hi, fn: g.fn}, nil
}

type generatorReader[T any] struct {
	next, end int64
	fn        func(int64) T
}

func (r *generatorReader[T]) ReadBatch(out weir.Collector[T]) (weir.ReadStatus, error) {
	stop := min(r.next+batchSize, r.end)
	for i := r.next; i < stop; i++ {
		out.Collect(r.fn(i))
	}
	r.next = stop
	if r.next >= r.end {
		return weir.EndOfInput, nil
	}
	return weir.MoreAvailable, nil
}

func (r *generatorReader[T]) Close() error { return nil }

// Collection emits items. Subtask i of p emits items i, i+p, i+2p, ...; with
// parallelism 1 (set it on the stream) the order is kept.
func Collection[T any](items ...T) weir.Source[T] { return collection[T]{items: items} }

type collection[T any] struct{ items []T }

func (c collection[T]) Name() string { return "Collection" }

func (c collection[T]) CreateReader(ctx weir.SourceContext) (weir.SourceReader[T], error) {
	return &collectionReader[T]{items: c.items, next: ctx.Subtask, step: ctx.Parallelism}, nil
}

type collectionReader[T any] struct {
	items      []T
	next, step int
}

func (r *collectionReader[T]) ReadBatch(out weir.Collector[T]) (weir.ReadStatus, error) {
	for n := 0; n < batchSize && r.next < len(r.items); n++ {
		out.Collect(r.items[r.next])
		r.next += r.step
	}
	if r.next >= len(r.items) {
		return weir.EndOfInput, nil
	}
	return weir.MoreAvailable, nil
}

func (r *collectionReader[T]) Close() error { return nil }

// TextFile emits the lines of the file at path, without their line endings
// ("\n" or "\r\n"). The file is split into byte ranges, one per subtask; a
// subtask reads the lines that start in its range, so every line is read
// exactly once whatever the parallelism.
func TextFile(path string) weir.Source[string] { return textFile{path: path} }

type textFile struct{ path string }

func (t textFile) Name() string { return "TextFile(" + t.path + ")" }

func (t textFile) CreateReader(ctx weir.SourceContext) (weir.SourceReader[string], error) {
	f, err := os.Open(t.path)
	if err != nil {
		return nil, fmt.Errorf("text file source: %w", err)
	}
	st, err := f.Stat()
	if err == nil && !st.Mode().IsRegular() {
		err = fmt.Errorf("text file source: %s is not a regular file", t.path)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	lo, hi := split(st.Size(), ctx.Subtask, ctx.Parallelism)
	r := &textReader{f: f, pos: lo, end: hi, path: t.path}
	// A line belongs to the range it starts in: unless the range starts a
	// file or follows a newline, skip the line that began before it.
	start := lo
	if lo > 0 {
		start = lo - 1
	}
	if _, err := f.Seek(start, io.SeekStart); err != nil {
		f.Close()
		return nil, fmt.Errorf("text file source: seek %s: %w", t.path, err)
	}
	r.br = bufio.NewReaderSize(f, 64<<10)
	r.pos = start
	if lo > 0 {
		skipped, err := r.br.ReadSlice('\n')
		for errors.Is(err, bufio.ErrBufferFull) {
			r.pos += int64(len(skipped))
			skipped, err = r.br.ReadSlice('\n')
		}
		r.pos += int64(len(skipped))
		if err != nil && !errors.Is(err, io.EOF) {
			f.Close()
			return nil, fmt.Errorf("text file source: read %s: %w", t.path, err)
		}
	}
	return r, nil
}

type textReader struct {
	f        *os.File
	br       *bufio.Reader
	pos, end int64 // offset of the next line; lines starting at or after end belong to the next subtask
	path     string
	line     []byte
}

func (r *textReader) ReadBatch(out weir.Collector[string]) (weir.ReadStatus, error) {
	for range batchSize {
		if r.pos >= r.end {
			return weir.EndOfInput, nil
		}
		r.line = r.line[:0]
		for {
			chunk, err := r.br.ReadSlice('\n')
			r.line = append(r.line, chunk...)
			if errors.Is(err, bufio.ErrBufferFull) {
				continue
			}
			if err != nil && !errors.Is(err, io.EOF) {
				return weir.EndOfInput, fmt.Errorf("text file source: read %s: %w", r.path, err)
			}
			if len(r.line) == 0 { // end of file
				r.pos = r.end
				return weir.EndOfInput, nil
			}
			break
		}
		r.pos += int64(len(r.line))
		l := r.line
		if n := len(l); n > 0 && l[n-1] == '\n' {
			l = l[:n-1]
			if n := len(l); n > 0 && l[n-1] == '\r' {
				l = l[:n-1]
			}
		}
		out.Collect(string(l))
	}
	return weir.MoreAvailable, nil
}

func (r *textReader) Close() error { return r.f.Close() }
