// Package source holds weir's built-in sources: a number sequence, a
// generator, a collection and a text file. Each splits its input among the
// parallel subtasks that read it.
package source

import (
	"bufio"
	"encoding/binary"
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

// rangeSplit is a half-open range of indexes still to emit: 16 bytes,
// next and end, big endian.
type rangeSplit struct{ next, end int64 }

func (r rangeSplit) encode() []byte {
	b := binary.BigEndian.AppendUint64(nil, uint64(r.next))
	return binary.BigEndian.AppendUint64(b, uint64(r.end))
}

func decodeRange(b []byte) (rangeSplit, error) {
	if len(b) != 16 {
		return rangeSplit{}, fmt.Errorf("split state of %d bytes, want 16", len(b))
	}
	return rangeSplit{int64(binary.BigEndian.Uint64(b)), int64(binary.BigEndian.Uint64(b[8:]))}, nil
}

// rangeSplits returns the subtask's splits: restored ones, or its own
// contiguous share of [0, n).
func rangeSplits(ctx weir.SourceContext, n int64) ([]rangeSplit, error) {
	if ctx.RestoredSplits == nil {
		lo, hi := split(n, ctx.Subtask, ctx.Parallelism)
		return []rangeSplit{{lo, hi}}, nil
	}
	out := make([]rangeSplit, 0, len(ctx.RestoredSplits))
	for _, b := range ctx.RestoredSplits {
		r, err := decodeRange(b)
		if err != nil {
			return nil, err
		}
		if r.next < 0 || r.next > r.end || r.end > n {
			return nil, fmt.Errorf("split [%d, %d) is not within [0, %d)", r.next, r.end, n)
		}
		out = append(out, r)
	}
	return out, nil
}

// rangeReader emits emit(i) for every index of its splits, in order.
type rangeReader[T any] struct {
	splits []rangeSplit
	emit   func(i int64) T
}

func (r *rangeReader[T]) ReadBatch(out weir.Collector[T]) (weir.ReadStatus, error) {
	for len(r.splits) > 0 && r.splits[0].next >= r.splits[0].end {
		r.splits = r.splits[1:]
	}
	if len(r.splits) == 0 {
		return weir.EndOfInput, nil
	}
	sp := &r.splits[0]
	stop := min(sp.next+batchSize, sp.end)
	for i := sp.next; i < stop; i++ {
		out.Collect(r.emit(i))
	}
	sp.next = stop
	return weir.MoreAvailable, nil
}

func (r *rangeReader[T]) SnapshotSplits() ([][]byte, error) {
	out := make([][]byte, 0, len(r.splits))
	for _, sp := range r.splits {
		if sp.next < sp.end {
			out = append(out, sp.encode())
		}
	}
	return out, nil
}

func (r *rangeReader[T]) Close() error { return nil }

// sequenceReader specialises rangeReader to the numbers themselves, which
// saves a function call per record on the benchmark path.
type sequenceReader struct {
	rangeReader[int64]
	from int64
}

func (r *sequenceReader) ReadBatch(out weir.Collector[int64]) (weir.ReadStatus, error) {
	for len(r.splits) > 0 && r.splits[0].next >= r.splits[0].end {
		r.splits = r.splits[1:]
	}
	if len(r.splits) == 0 {
		return weir.EndOfInput, nil
	}
	sp := &r.splits[0]
	stop := min(sp.next+batchSize, sp.end)
	for i := sp.next + r.from; i < stop+r.from; i++ {
		out.Collect(i)
	}
	sp.next = stop
	return weir.MoreAvailable, nil
}

// Sequence emits the numbers from..to, both included, split into contiguous
// ranges, one per subtask. Each subtask emits its range in order. Its
// readers are checkpointed (weir.CheckpointedReader).
func Sequence(from, to int64) weir.Source[int64] { return sequence{from: from, to: to} }

type sequence struct{ from, to int64 }

func (s sequence) Name() string { return fmt.Sprintf("Sequence(%d..%d)", s.from, s.to) }

func (s sequence) CreateReader(ctx weir.SourceContext) (weir.SourceReader[int64], error) {
	if s.to < s.from {
		return nil, fmt.Errorf("sequence %d..%d: to must not be smaller than from", s.from, s.to)
	}
	splits, err := rangeSplits(ctx, s.to-s.from+1)
	if err != nil {
		return nil, fmt.Errorf("sequence: restore: %w", err)
	}
	return &sequenceReader{rangeReader: rangeReader[int64]{splits: splits}, from: s.from}, nil
}

// Generator emits fn(i) for i in 0..count-1, split into contiguous ranges,
// one per subtask. fn must be safe to call from several goroutines. Its
// readers are checkpointed.
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
	splits, err := rangeSplits(ctx, g.count)
	if err != nil {
		return nil, fmt.Errorf("generator: restore: %w", err)
	}
	return &rangeReader[T]{splits: splits, emit: g.fn}, nil
}

// Collection emits items. Subtask i of p emits items i, i+p, i+2p, ...; with
// parallelism 1 (set it on the stream) the order is kept. Its readers are
// checkpointed.
func Collection[T any](items ...T) weir.Source[T] { return collection[T]{items: items} }

type collection[T any] struct{ items []T }

func (c collection[T]) Name() string { return "Collection" }

func (c collection[T]) CreateReader(ctx weir.SourceContext) (weir.SourceReader[T], error) {
	r := &collectionReader[T]{items: c.items}
	if ctx.RestoredSplits == nil {
		r.splits = []rangeSplit{{int64(ctx.Subtask), int64(ctx.Parallelism)}} // next index, step
		return r, nil
	}
	for _, b := range ctx.RestoredSplits {
		sp, err := decodeRange(b)
		if err != nil || sp.end < 1 {
			return nil, fmt.Errorf("collection: restore: bad split state")
		}
		r.splits = append(r.splits, sp)
	}
	return r, nil
}

// collectionReader's splits are (next index, step) pairs.
type collectionReader[T any] struct {
	items  []T
	splits []rangeSplit
}

func (r *collectionReader[T]) ReadBatch(out weir.Collector[T]) (weir.ReadStatus, error) {
	n := int64(len(r.items))
	for len(r.splits) > 0 && r.splits[0].next >= n {
		r.splits = r.splits[1:]
	}
	if len(r.splits) == 0 {
		return weir.EndOfInput, nil
	}
	sp := &r.splits[0]
	for k := 0; k < batchSize && sp.next < n; k++ {
		out.Collect(r.items[sp.next])
		sp.next += sp.end
	}
	return weir.MoreAvailable, nil
}

func (r *collectionReader[T]) SnapshotSplits() ([][]byte, error) {
	var out [][]byte
	for _, sp := range r.splits {
		if sp.next < int64(len(r.items)) {
			out = append(out, sp.encode())
		}
	}
	return out, nil
}

func (r *collectionReader[T]) Close() error { return nil }

// TextFile emits the lines of the file at path, without their line endings
// ("\n" or "\r\n"). The file is split into byte ranges, one per subtask; a
// subtask reads the lines that start in its range, so every line is read
// exactly once whatever the parallelism. Its readers are checkpointed: a
// split's state is the offset of the next line to read.
func TextFile(path string) weir.Source[string] { return textFile{path: path} }

type textFile struct{ path string }

func (t textFile) Name() string { return "TextFile(" + t.path + ")" }

// textSplit is a byte range of the file: the lines starting in [pos, end).
// aligned says pos is known to be a line start; otherwise the line that
// began before pos belongs to the previous range and is skipped.
type textSplit struct {
	pos, end int64
	aligned  bool
}

func (s textSplit) encode() []byte {
	b := binary.BigEndian.AppendUint64(nil, uint64(s.pos))
	b = binary.BigEndian.AppendUint64(b, uint64(s.end))
	if s.aligned {
		return append(b, 1)
	}
	return append(b, 0)
}

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
	r := &textReader{f: f, path: t.path, br: bufio.NewReaderSize(f, 64<<10)}
	if ctx.RestoredSplits == nil {
		lo, hi := split(st.Size(), ctx.Subtask, ctx.Parallelism)
		r.splits = []textSplit{{pos: lo, end: hi, aligned: lo == 0}}
		return r, nil
	}
	for _, b := range ctx.RestoredSplits {
		if len(b) != 17 {
			f.Close()
			return nil, fmt.Errorf("text file source: restore: split state of %d bytes, want 17", len(b))
		}
		r.splits = append(r.splits, textSplit{pos: int64(binary.BigEndian.Uint64(b)),
			end: int64(binary.BigEndian.Uint64(b[8:])), aligned: b[16] == 1})
	}
	return r, nil
}

type textReader struct {
	f      *os.File
	br     *bufio.Reader
	path   string
	splits []textSplit // splits[0] is being read once positioned
	placed bool        // the reader is at splits[0].pos, which is aligned
	line   []byte
}

// place seeks to the current split's first line.
func (r *textReader) place() error {
	sp := &r.splits[0]
	start := sp.pos
	if !sp.aligned {
		start = sp.pos - 1 // the byte before: is it the end of a line?
	}
	if _, err := r.f.Seek(start, io.SeekStart); err != nil {
		return fmt.Errorf("text file source: seek %s: %w", r.path, err)
	}
	r.br.Reset(r.f)
	if !sp.aligned {
		skipped, err := r.readLine()
		if err != nil {
			return err
		}
		sp.pos = start + int64(len(skipped))
		sp.aligned = true
	}
	r.placed = true
	return nil
}

// readLine reads through the next '\n' (or to the end of the file).
func (r *textReader) readLine() ([]byte, error) {
	r.line = r.line[:0]
	for {
		chunk, err := r.br.ReadSlice('\n')
		r.line = append(r.line, chunk...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("text file source: read %s: %w", r.path, err)
		}
		return r.line, nil
	}
}

func (r *textReader) ReadBatch(out weir.Collector[string]) (weir.ReadStatus, error) {
	for n := 0; n < batchSize; {
		if len(r.splits) == 0 {
			return weir.EndOfInput, nil
		}
		if !r.placed {
			if err := r.place(); err != nil {
				return weir.EndOfInput, err
			}
		}
		sp := &r.splits[0]
		if sp.pos >= sp.end {
			r.splits, r.placed = r.splits[1:], false
			continue
		}
		l, err := r.readLine()
		if err != nil {
			return weir.EndOfInput, err
		}
		if len(l) == 0 { // end of file
			r.splits, r.placed = r.splits[1:], false
			continue
		}
		sp.pos += int64(len(l))
		if k := len(l); l[k-1] == '\n' {
			l = l[:k-1]
			if k := len(l); k > 0 && l[k-1] == '\r' {
				l = l[:k-1]
			}
		}
		out.Collect(string(l))
		n++
	}
	if len(r.splits) == 0 {
		return weir.EndOfInput, nil
	}
	return weir.MoreAvailable, nil
}

func (r *textReader) SnapshotSplits() ([][]byte, error) {
	out := make([][]byte, 0, len(r.splits))
	for _, sp := range r.splits {
		if sp.pos < sp.end {
			out = append(out, sp.encode())
		}
	}
	return out, nil
}

func (r *textReader) Close() error { return r.f.Close() }
