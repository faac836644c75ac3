package nexmark

import (
	"time"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/codec"
)

// The Nexmark queries, after the SQL of Flink's Nexmark repository, in the
// weir API. Each takes the timestamped event stream (Events) and returns
// its result stream; Queries registers them by name for the benchmark.
//
// The queries that join two relations (q3, q4, q7, q8, q9, q20) are in
// queries_join.go, with two-input operators. Window queries use weir's
// windows where the SQL groups by a window, and a keyed process per window
// where a second stage compares groups within a window.

var int64s = codec.SliceOf(codec.Int64())

// Q0 is the pass-through query: every bid (SELECT auction, bidder, price,
// dateTime, extra FROM bid).
func Q0(events *weir.DataStream[Event]) *weir.DataStream[Bid] {
	return weir.FlatMap(events, func(e Event, out weir.Collector[Bid]) {
		if e.Kind == KindBid {
			out.Collect(*e.Bid)
		}
	}).Name("Q0")
}

// DollarToEuro is Q1's exchange rate, in thousandths.
const DollarToEuro = 908

// Q1 converts every bid's price from dollars to euros (0.908 * price), in
// integer arithmetic (price * 908 / 1000) as Beam's Nexmark does.
func Q1(events *weir.DataStream[Event]) *weir.DataStream[Bid] {
	return weir.FlatMap(events, func(e Event, out weir.Collector[Bid]) {
		if e.Kind == KindBid {
			b := *e.Bid
			b.Price = b.Price * DollarToEuro / 1000
			out.Collect(b)
		}
	}).Name("Q1")
}

// AuctionPrice is Q2's result.
type AuctionPrice struct{ Auction, Price int64 }

// Q2 selects the bids on every 123rd auction (WHERE MOD(auction, 123) = 0).
func Q2(events *weir.DataStream[Event]) *weir.DataStream[AuctionPrice] {
	return weir.FlatMap(events, func(e Event, out weir.Collector[AuctionPrice]) {
		if e.Kind == KindBid && e.Bid.Auction%123 == 0 {
			out.Collect(AuctionPrice{Auction: e.Bid.Auction, Price: e.Bid.Price})
		}
	}).Name("Q2")
}

// HotItem is Q5's result: an auction with the most bids in a window.
type HotItem struct{ Auction, Count, WindowEnd int64 }

// Q5 finds the hot items: per sliding window of 10s every 2s, the auctions
// with the most bids (all of them on a tie).
func Q5(events *weir.DataStream[Event]) *weir.DataStream[HotItem] {
	bids := weir.FlatMap(events, func(e Event, out weir.Collector[int64]) {
		if e.Kind == KindBid {
			out.Collect(e.Bid.Auction)
		}
	}).Name("Q5 bids")
	counts := weir.AggregateWindows(
		weir.Window(weir.KeyBy(bids, func(a int64) int64 { return a }), weir.SlidingEventTimeWindows(10*time.Second, 2*time.Second)),
		countAgg[int64]{}, codec.Int64(),
		func(a int64, w weir.TimeWindow, n int64) []int64 { return []int64{a, n, w.End} }).
		Name("Q5 counts").WithCodec(int64s)
	byWindow := weir.KeyBy(counts, func(c []int64) int64 { return c[2] })
	return weir.KeyedProcess(byWindow, func() weir.KeyedProcessFunction[int64, []int64, HotItem] { return &q5Max{} }).Name("Q5 max")
}

// countAgg counts records.
type countAgg[T any] struct{}

func (countAgg[T]) CreateAccumulator() int64  { return 0 }
func (countAgg[T]) Add(_ T, acc int64) int64  { return acc + 1 }
func (countAgg[T]) GetResult(acc int64) int64 { return acc }
func (countAgg[T]) Merge(a, b int64) int64    { return a + b }

// q5Max keeps, per window end, the largest count and the auctions that have
// it, and emits them when the watermark passes the window.
type q5Max struct {
	max  *weir.ValueState[int64]
	tops *weir.ListState[[]int64] // auction, count
}

func (q *q5Max) Open(ctx *weir.KeyedContext[int64, HotItem]) error {
	var err error
	if q.max, err = weir.GetValueState(ctx, weir.ValueStateDescriptor[int64]{Name: "max"}); err != nil {
		return err
	}
	q.tops, err = weir.GetListState(ctx, weir.ListStateDescriptor[[]int64]{Name: "tops", Codec: int64s})
	return err
}

func (q *q5Max) ProcessElement(ctx *weir.KeyedContext[int64, HotItem], c []int64) error {
	m, ok := q.max.Value()
	switch {
	case !ok || c[1] > m:
		q.max.Update(c[1])
		q.tops.Update([][]int64{c[:2]})
		ctx.RegisterEventTimeTimer(c[2] - 1)
	case c[1] == m:
		q.tops.Add(c[:2])
	}
	return nil
}

func (q *q5Max) OnTimer(ctx *weir.KeyedContext[int64, HotItem], _ weir.Timer) error {
	for _, t := range q.tops.Get() {
		ctx.Emit(HotItem{Auction: t[0], Count: t[1], WindowEnd: ctx.CurrentKey()})
	}
	q.max.Clear()
	q.tops.Clear()
	return nil
}

// mod is a modulo that is never negative.
func mod(a, m int64) int64 { return ((a % m) + m) % m }

// Session is Q11's result: how many bids a bidder made in one session
// (bids less than 10s apart).
type Session struct{ Bidder, Count, Start, End int64 }

// Q11 counts the bids of every bidder's sessions (session windows with a
// 10s gap).
func Q11(events *weir.DataStream[Event]) *weir.DataStream[Session] {
	bidders := weir.FlatMap(events, func(e Event, out weir.Collector[int64]) {
		if e.Kind == KindBid {
			out.Collect(e.Bid.Bidder)
		}
	}).Name("Q11 bids")
	return weir.AggregateWindows(
		weir.Window(weir.KeyBy(bidders, func(b int64) int64 { return b }), weir.EventTimeSessionWindows(10*time.Second)),
		countAgg[int64]{}, codec.Int64(),
		func(b int64, w weir.TimeWindow, n int64) Session {
			return Session{Bidder: b, Count: n, Start: w.Start, End: w.End}
		}).
		Name("Q11 sessions")
}
