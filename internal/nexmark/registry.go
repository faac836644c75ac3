package nexmark

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/codec"
)

// Output is where a query's result rows go. The zero Output discards them.
type Output struct {
	// Rows, if set, counts every result row the query emits (updates of
	// an updating query included).
	Rows *atomic.Int64
	// JSON, if set, receives the query's result as JSON lines once the
	// input has ended: one object per row as encoding/json formats the row
	// type (the json tags name the SQL result's columns), lines sorted
	// bytewise so that equal results give equal bytes. For a row type
	// that implements Updating only the last row per RowKey is written.
	// Rows are kept in memory until the end. The sink subtask whose input
	// ends last writes everything, once, from its goroutine; the caller
	// may use JSON again after the job ended.
	//
	// JSON output is for bounded runs without restarts: the rows live in
	// memory, not in checkpoints, so a restarted job (a new
	// SinkContext.RunID) fails with ErrOutputRestarted instead of writing
	// duplicate or missing rows. Run such jobs with restart strategy
	// "none".
	JSON io.Writer
}

// ErrOutputRestarted is the error of a job with Output.JSON set that
// restarted: its result rows would be incomplete or duplicated.
var ErrOutputRestarted = errors.New("nexmark: JSON result output does not survive a job restart (bounded runs without failures only)")

// Updating is implemented by the result rows of queries whose SQL result
// updates (q4's average per category, rankings): rows with equal RowKey
// replace each other, and the last one per key is the result.
type Updating interface {
	RowKey() string
}

// Emit sends a query's result stream s to o.
func Emit[T any](s *weir.DataStream[T], o Output) {
	var sink weir.Sink[T] = &resultSink[T]{o: o}
	if o.JSON != nil {
		sink = &jsonSink[T]{o: o}
	}
	weir.SinkTo(s, sink).Name("Nexmark result")
}

// resultSink counts and drops rows.
type resultSink[T any] struct{ o Output }

func (r *resultSink[T]) CreateWriter(weir.SinkContext) (weir.SinkWriter[T], error) {
	return &resultWriter[T]{o: r.o}, nil
}

// resultWriter counts rows, adding to Output.Rows every 1024 rows and at
// the end, so that the shared counter is not touched per row.
type resultWriter[T any] struct {
	o Output
	n int64
}

func (w *resultWriter[T]) Write(T) error {
	w.n++
	if w.n == 1024 {
		w.count()
	}
	return nil
}

func (w *resultWriter[T]) count() {
	if w.o.Rows != nil {
		w.o.Rows.Add(w.n)
	}
	w.n = 0
}

func (w *resultWriter[T]) Flush() error { w.count(); return nil }

func (w *resultWriter[T]) Close() error { w.count(); return nil }

// jsonSink collects the rows of all its writers (one per subtask) and
// writes them to Output.JSON when the last writer's input ended. Each
// writer buffers its own rows; they meet under mu only at the end.
type jsonSink[T any] struct {
	o Output

	mu    sync.Mutex
	runID string // the run whose writers this sink serves
	// Per subtask: whether its input ended, its encoded lines (without
	// '\n') and, for Updating rows, its final line per RowKey.
	ended   []bool
	lines   [][][]byte
	keyed   []map[string][]byte
	written bool
}

func (s *jsonSink[T]) CreateWriter(ctx weir.SinkContext) (weir.SinkWriter[T], error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.runID == "":
		s.runID = ctx.RunID
		s.ended = make([]bool, ctx.Parallelism)
		s.lines = make([][][]byte, ctx.Parallelism)
		s.keyed = make([]map[string][]byte, ctx.Parallelism)
	case s.runID != ctx.RunID:
		return nil, ErrOutputRestarted
	}
	var zero T
	_, updating := any(zero).(Updating)
	w := &jsonWriter[T]{s: s, subtask: ctx.Subtask, count: resultWriter[T]{o: s.o}}
	if updating {
		w.latest = map[string]T{}
	}
	return w, nil
}

// endLocked records the rows of subtask's writer; when every subtask's
// input has ended it writes all rows, sorted. Rows with one RowKey are
// expected from one subtask (the query keys its last stage by it); should
// two subtasks emit the same key, the higher subtask's row is the one
// written, so that the output stays deterministic.
func (s *jsonSink[T]) endLocked(subtask int, lines [][]byte, keyed map[string][]byte) error {
	if s.written {
		if len(lines) == 0 && len(keyed) == 0 {
			return nil
		}
		return fmt.Errorf("nexmark: subtask %d wrote result rows after the JSON output was written", subtask)
	}
	s.ended[subtask] = true
	s.lines[subtask] = append(s.lines[subtask], lines...)
	if s.keyed[subtask] == nil {
		s.keyed[subtask] = keyed
	} else {
		maps.Copy(s.keyed[subtask], keyed)
	}
	for _, e := range s.ended {
		if !e {
			return nil
		}
	}
	s.written = true
	var all [][]byte
	final := map[string][]byte{}
	for i := range s.lines {
		all = append(all, s.lines[i]...)
		maps.Copy(final, s.keyed[i])
	}
	for _, l := range final {
		all = append(all, l)
	}
	s.lines, s.keyed = nil, nil
	slices.SortFunc(all, bytes.Compare)
	bw := bufio.NewWriterSize(s.o.JSON, 64<<10)
	for _, l := range all {
		bw.Write(l)
		bw.WriteByte('\n')
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("nexmark: write JSON result: %w", err)
	}
	return nil
}

// jsonWriter buffers one subtask's rows: every row, encoded, or for
// Updating rows the last row per RowKey, encoded at the end.
type jsonWriter[T any] struct {
	s       *jsonSink[T]
	subtask int
	count   resultWriter[T]
	lines   [][]byte
	latest  map[string]T // nil unless T implements Updating
}

func (w *jsonWriter[T]) Write(v T) error {
	w.count.Write(v)
	if w.latest != nil {
		w.latest[any(v).(Updating).RowKey()] = v
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("nexmark: encode result row: %w", err)
	}
	w.lines = append(w.lines, b)
	return nil
}

// Flush is called at the end of the input: it hands the subtask's rows to
// the sink.
func (w *jsonWriter[T]) Flush() error {
	w.count.Flush()
	var keyed map[string][]byte
	if w.latest != nil {
		keyed = make(map[string][]byte, len(w.latest))
		for k, v := range w.latest {
			b, err := json.Marshal(v)
			if err != nil {
				return fmt.Errorf("nexmark: encode result row: %w", err)
			}
			keyed[k] = b
		}
		clear(w.latest)
	}
	lines := w.lines
	w.lines = nil
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	return w.s.endLocked(w.subtask, lines, keyed)
}

func (w *jsonWriter[T]) Close() error {
	w.count.Close()
	w.lines, w.latest = nil, nil
	return nil
}

// BidCodec encodes a Bid for network edges and state.
func BidCodec() codec.Codec[Bid] {
	return codec.Func(appendBid, decodeBid)
}

func appendBid(dst []byte, b Bid) []byte {
	dst = binary.AppendVarint(dst, b.Auction)
	dst = binary.AppendVarint(dst, b.Bidder)
	dst = binary.AppendVarint(dst, b.Price)
	dst = binary.AppendVarint(dst, b.DateTime)
	for _, s := range []string{b.Channel, b.URL, b.Extra} {
		dst = binary.AppendUvarint(dst, uint64(len(s)))
		dst = append(dst, s...)
	}
	return dst
}

func decodeBid(src []byte) (Bid, int, error) {
	var b Bid
	p := src
	ints := []*int64{&b.Auction, &b.Bidder, &b.Price, &b.DateTime}
	for _, v := range ints {
		x, n := binary.Varint(p)
		if n <= 0 {
			return Bid{}, 0, fmt.Errorf("nexmark: bid: %w", codec.ErrCorrupt)
		}
		*v, p = x, p[n:]
	}
	for _, s := range []*string{&b.Channel, &b.URL, &b.Extra} {
		l, n := binary.Uvarint(p)
		if n <= 0 || uint64(len(p)-n) < l {
			return Bid{}, 0, fmt.Errorf("nexmark: bid: %w", codec.ErrCorrupt)
		}
		*s, p = string(p[n:n+int(l)]), p[n+int(l):]
	}
	return b, len(src) - len(p), nil
}
