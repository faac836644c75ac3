package nexmark

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/codec"
)

// Output is where a query's result rows go. The zero Output discards them.
type Output struct {
	// Rows, if set, counts every result row the query emits (updates of
	// an updating query included).
	Rows *atomic.Int64
}

// Updating is implemented by the result rows of queries whose SQL result
// updates (q4's average per category, rankings): rows with equal RowKey
// replace each other, and the last one per key is the result.
type Updating interface {
	RowKey() string
}

// Emit sends a query's result stream s to o.
func Emit[T any](s *weir.DataStream[T], o Output) {
	weir.SinkTo(s, &resultSink[T]{o: o}).Name("Nexmark result")
}

// resultSink counts and drops rows.
type resultSink[T any] struct{ o Output }

func (r *resultSink[T]) CreateWriter(weir.SinkContext) (weir.SinkWriter[T], error) {
	return &resultWriter[T]{o: r.o}, nil
}

type resultWriter[T any] struct {
	o Output
	n int64
}

func (w *resultWriter[T]) Write(T) error {
	w.n++
	if w.n == 1024 {
		w.Flush()
	}
	return nil
}

func (w *resultWriter[T]) Flush() error {
	if w.o.Rows != nil {
		w.o.Rows.Add(w.n)
	}
	w.n = 0
	return nil
}

func (w *resultWriter[T]) Close() error { return w.Flush() }

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
