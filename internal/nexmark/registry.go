package nexmark

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/sink"
)

// Queries are the implemented queries by name ("q0", "q1", ...): each
// declares the query over events and sends its results to a discarding
// sink, for the benchmark.
var Queries = map[string]func(events *weir.DataStream[Event]){
	"q0":  func(ev *weir.DataStream[Event]) { weir.SinkTo(Q0(ev), sink.Discard[Bid]()) },
	"q1":  func(ev *weir.DataStream[Event]) { weir.SinkTo(Q1(ev), sink.Discard[Bid]()) },
	"q2":  func(ev *weir.DataStream[Event]) { weir.SinkTo(Q2(ev), sink.Discard[AuctionPrice]()) },
	"q3":  func(ev *weir.DataStream[Event]) { weir.SinkTo(Q3(ev), sink.Discard[Q3Result]()) },
	"q4":  func(ev *weir.DataStream[Event]) { weir.SinkTo(Q4(ev), sink.Discard[CategoryPrice]()) },
	"q5":  func(ev *weir.DataStream[Event]) { weir.SinkTo(Q5(ev), sink.Discard[HotItem]()) },
	"q7":  func(ev *weir.DataStream[Event]) { weir.SinkTo(Q7(ev), sink.Discard[Bid]()) },
	"q8":  func(ev *weir.DataStream[Event]) { weir.SinkTo(Q8(ev), sink.Discard[NewUser]()) },
	"q11": func(ev *weir.DataStream[Event]) { weir.SinkTo(Q11(ev), sink.Discard[Session]()) },
}

// QueryNames returns the names of Queries in numeric order.
func QueryNames() []string {
	names := make([]string, 0, len(Queries))
	for n := range Queries {
		names = append(names, n)
	}
	slices.SortFunc(names, func(a, b string) int {
		x, _ := strconv.Atoi(strings.TrimPrefix(a, "q"))
		y, _ := strconv.Atoi(strings.TrimPrefix(b, "q"))
		return x - y
	})
	return names
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
