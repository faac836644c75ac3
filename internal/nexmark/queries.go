package nexmark

import (
	"fmt"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/codec"
)

// The Nexmark queries, after the SQL of Flink's Nexmark repository
// (nexmark-flink/src/main/resources/queries/qN.sql), in the weir API. Each
// takes the timestamped event stream (Events) and returns its result
// stream; Queries registers them by name for the benchmark. The files:
//
//   - queries.go: shared helpers, and the joins q3, q4, q7 and q8, which
//     will move to two-input operators;
//   - queries_bid.go: the stateless projections and filters of bids (q0,
//     q1, q2, q13, q14, q21, q22);
//   - queries_window.go: the window queries q5, q11 and q12;
//   - queries_agg.go: the unbounded GROUP BY queries q15, q16 and q17;
//   - queries_rank.go: the ROW_NUMBER queries q18 (deduplication) and q19
//     (top-N).
//
// Result rows follow the SQL's result tables: their JSON names are the
// columns, TIMESTAMP(3) columns are Unix milliseconds (UTC wall clock, as
// Flink's generator fills them; HOUR and DATE_FORMAT read them in UTC),
// DECIMAL(23, 3) columns are Decimal3, and nullable columns that can be
// NULL are pointers (nil is NULL). Queries whose SQL result updates emit
// every new version of a row, and their row types implement Updating: the
// last row per RowKey is the SQL result (Flink's changelog would also
// carry the retractions of the old versions).
//
// Joins are keyed processes over the one event stream (persons and
// auctions, or auctions and bids, keyed by the id they share), so they need
// no two-input operator; window queries use weir's windows where the SQL
// groups by a window, and a keyed process per window where a second stage
// compares groups within a window.

var int64s = codec.SliceOf(codec.Int64())

// Q3Result is a local item suggestion.
type Q3Result struct {
	Name, City, State string
	Auction           int64
}

// Q3 joins auctions of category 10 with their sellers living in OR, ID or
// CA (the incremental join of persons and auctions on seller = id): a
// result as soon as both sides are known.
func Q3(events *weir.DataStream[Event]) *weir.DataStream[Q3Result] {
	relevant := weir.Filter(events, func(e Event) bool {
		switch e.Kind {
		case KindPerson:
			return e.Person.State == "OR" || e.Person.State == "ID" || e.Person.State == "CA"
		case KindAuction:
			return e.Auction.Category == 10
		}
		return false
	}).Name("Q3 filter").WithCodec(EventCodec())
	keyed := weir.KeyBy(relevant, func(e Event) int64 {
		if e.Kind == KindPerson {
			return e.Person.ID
		}
		return e.Auction.Seller
	})
	return weir.KeyedProcess(keyed, func() weir.KeyedProcessFunction[int64, Event, Q3Result] { return &q3Join{} }).Name("Q3 join")
}

type q3Join struct {
	person  *weir.ValueState[[]string] // name, city, state
	pending *weir.ListState[int64]     // auctions waiting for their seller
}

func (j *q3Join) Open(ctx *weir.KeyedContext[int64, Q3Result]) error {
	var err error
	if j.person, err = weir.GetValueState(ctx, weir.ValueStateDescriptor[[]string]{Name: "person", Codec: codec.SliceOf(codec.String())}); err != nil {
		return err
	}
	j.pending, err = weir.GetListState(ctx, weir.ListStateDescriptor[int64]{Name: "auctions"})
	return err
}

func (j *q3Join) ProcessElement(ctx *weir.KeyedContext[int64, Q3Result], e Event) error {
	if e.Kind == KindPerson {
		p := []string{e.Person.Name, e.Person.City, e.Person.State}
		j.person.Update(p)
		for _, a := range j.pending.Get() {
			ctx.Emit(Q3Result{Name: p[0], City: p[1], State: p[2], Auction: a})
		}
		j.pending.Clear()
		return nil
	}
	if p, ok := j.person.Value(); ok {
		ctx.Emit(Q3Result{Name: p[0], City: p[1], State: p[2], Auction: e.Auction.ID})
		return nil
	}
	j.pending.Add(e.Auction.ID)
	return nil
}

// CategoryPrice is Q4's result: the running average winning price of a
// category.
type CategoryPrice struct{ Category, AvgPrice int64 }

// Q4 computes, per category, the average of the winning (highest) bid of
// its closed auctions, counting bids placed between the auction's start and
// its expiry. An auction closes when the watermark passes its expiry (or
// the input ends); every close updates its category's average, emitted
// each time (integer average, as AVG over BIGINT in Flink SQL).
func Q4(events *weir.DataStream[Event]) *weir.DataStream[CategoryPrice] {
	relevant := weir.Filter(events, func(e Event) bool { return e.Kind != KindPerson }).Name("Q4 filter").WithCodec(EventCodec())
	byAuction := weir.KeyBy(relevant, func(e Event) int64 {
		if e.Kind == KindAuction {
			return e.Auction.ID
		}
		return e.Bid.Auction
	})
	winners := weir.KeyedProcess(byAuction, func() weir.KeyedProcessFunction[int64, Event, []int64] { return &q4Winner{} }).
		Name("Q4 winning bids").WithCodec(int64s)
	byCategory := weir.KeyBy(winners, func(w []int64) int64 { return w[0] })
	return weir.KeyedProcess(byCategory, func() weir.KeyedProcessFunction[int64, []int64, CategoryPrice] { return &q4Average{} }).Name("Q4 average")
}

// q4Winner keeps an auction (category, start, expires), the bids that came
// before it, and the highest valid price; at expiry it emits
// [category, price].
type q4Winner struct {
	auction *weir.ValueState[[]int64] // category, dateTime, expires
	early   *weir.ListState[[]int64]  // bids before their auction: price, dateTime
	best    *weir.ValueState[int64]
}

func (w *q4Winner) Open(ctx *weir.KeyedContext[int64, []int64]) error {
	var err error
	if w.auction, err = weir.GetValueState(ctx, weir.ValueStateDescriptor[[]int64]{Name: "auction", Codec: int64s}); err != nil {
		return err
	}
	if w.early, err = weir.GetListState(ctx, weir.ListStateDescriptor[[]int64]{Name: "early", Codec: int64s}); err != nil {
		return err
	}
	w.best, err = weir.GetValueState(ctx, weir.ValueStateDescriptor[int64]{Name: "best"})
	return err
}

func (w *q4Winner) offer(a []int64, price, ts int64) {
	if ts < a[1] || ts > a[2] {
		return
	}
	if b, ok := w.best.Value(); !ok || price > b {
		w.best.Update(price)
	}
}

func (w *q4Winner) ProcessElement(ctx *weir.KeyedContext[int64, []int64], e Event) error {
	if e.Kind == KindAuction {
		a := []int64{e.Auction.Category, e.Auction.DateTime, e.Auction.Expires}
		w.auction.Update(a)
		for _, b := range w.early.Get() {
			w.offer(a, b[0], b[1])
		}
		w.early.Clear()
		ctx.RegisterEventTimeTimer(e.Auction.Expires)
		return nil
	}
	if a, ok := w.auction.Value(); ok {
		w.offer(a, e.Bid.Price, e.Bid.DateTime)
		return nil
	}
	w.early.Add([]int64{e.Bid.Price, e.Bid.DateTime})
	return nil
}

func (w *q4Winner) OnTimer(ctx *weir.KeyedContext[int64, []int64], _ weir.Timer) error {
	a, _ := w.auction.Value()
	if best, ok := w.best.Value(); ok {
		ctx.Emit([]int64{a[0], best})
	}
	w.auction.Clear()
	w.best.Clear()
	return nil
}

type q4Average struct {
	sum *weir.ValueState[[]int64] // sum, count
}

func (q *q4Average) Open(ctx *weir.KeyedContext[int64, CategoryPrice]) error {
	var err error
	q.sum, err = weir.GetValueState(ctx, weir.ValueStateDescriptor[[]int64]{Name: "sum", Codec: int64s})
	return err
}

func (q *q4Average) ProcessElement(ctx *weir.KeyedContext[int64, CategoryPrice], w []int64) error {
	s, ok := q.sum.Value()
	if !ok {
		s = []int64{0, 0}
	}
	s = []int64{s[0] + w[1], s[1] + 1}
	q.sum.Update(s)
	ctx.Emit(CategoryPrice{Category: w[0], AvgPrice: s[0] / s[1]})
	return nil
}

// Q7 finds, per tumbling window of 10s, the bids with the highest price
// (all of them on a tie). Each subtask first keeps the best bids of its
// share per window; a second stage keyed by window merges them.
func Q7(events *weir.DataStream[Event]) *weir.DataStream[Bid] {
	bids := weir.FlatMap(events, func(e Event, out weir.Collector[Bid]) {
		if e.Kind == KindBid {
			out.Collect(*e.Bid)
		}
	}).Name("Q7 bids").WithCodec(BidCodec())
	byWindow := weir.KeyBy(bids, func(b Bid) int64 { return b.DateTime - mod(b.DateTime, 10_000) })
	return weir.KeyedProcess(byWindow, func() weir.KeyedProcessFunction[int64, Bid, Bid] { return &q7Max{} }).Name("Q7 max")
}

func mod(a, m int64) int64 { return ((a % m) + m) % m }

type q7Max struct {
	max  *weir.ValueState[int64]
	tops *weir.ListState[Bid]
}

func (q *q7Max) Open(ctx *weir.KeyedContext[int64, Bid]) error {
	var err error
	if q.max, err = weir.GetValueState(ctx, weir.ValueStateDescriptor[int64]{Name: "max"}); err != nil {
		return err
	}
	q.tops, err = weir.GetListState(ctx, weir.ListStateDescriptor[Bid]{Name: "tops", Codec: BidCodec()})
	return err
}

func (q *q7Max) ProcessElement(ctx *weir.KeyedContext[int64, Bid], b Bid) error {
	m, ok := q.max.Value()
	switch {
	case !ok || b.Price > m:
		q.max.Update(b.Price)
		q.tops.Update([]Bid{b})
		ctx.RegisterEventTimeTimer(ctx.CurrentKey() + 10_000 - 1)
	case b.Price == m:
		q.tops.Add(b)
	}
	return nil
}

func (q *q7Max) OnTimer(ctx *weir.KeyedContext[int64, Bid], _ weir.Timer) error {
	for _, b := range q.tops.Get() {
		ctx.Emit(b)
	}
	q.max.Clear()
	q.tops.Clear()
	return nil
}

// NewUser is Q8's result: a person who opened an auction in the tumbling
// 10s window in which they registered.
type NewUser struct {
	ID          int64
	Name        string
	WindowStart int64
}

// Q8 monitors new users: persons who created an auction in the same
// tumbling 10s window in which they were created (the windowed join of
// persons and auctions on id = seller).
func Q8(events *weir.DataStream[Event]) *weir.DataStream[NewUser] {
	relevant := weir.Filter(events, func(e Event) bool { return e.Kind != KindBid }).Name("Q8 filter").WithCodec(EventCodec())
	byPerson := weir.KeyBy(relevant, func(e Event) int64 {
		if e.Kind == KindPerson {
			return e.Person.ID
		}
		return e.Auction.Seller
	})
	return weir.KeyedProcess(byPerson, func() weir.KeyedProcessFunction[int64, Event, NewUser] { return &q8Join{} }).Name("Q8 join")
}

// q8Join keeps, per person, the window the person was created in with their
// name, and the windows in which they opened auctions.
type q8Join struct {
	person  *weir.ValueState[[]string]  // name, window start (decimal)
	sellers *weir.MapState[int64, bool] // windows with an auction
	emitted *weir.ValueState[bool]
}

func (j *q8Join) Open(ctx *weir.KeyedContext[int64, NewUser]) error {
	var err error
	if j.person, err = weir.GetValueState(ctx, weir.ValueStateDescriptor[[]string]{Name: "person", Codec: codec.SliceOf(codec.String())}); err != nil {
		return err
	}
	if j.sellers, err = weir.GetMapState(ctx, weir.MapStateDescriptor[int64, bool]{Name: "auction-windows"}); err != nil {
		return err
	}
	j.emitted, err = weir.GetValueState(ctx, weir.ValueStateDescriptor[bool]{Name: "emitted"})
	return err
}

func (j *q8Join) ProcessElement(ctx *weir.KeyedContext[int64, NewUser], e Event) error {
	if done, _ := j.emitted.Value(); done {
		return nil
	}
	if e.Kind == KindPerson {
		start := e.Person.DateTime - mod(e.Person.DateTime, 10_000)
		j.person.Update([]string{e.Person.Name, fmt.Sprint(start)})
		if j.sellers.Contains(start) {
			j.emit(ctx, e.Person.Name, start)
		}
		return nil
	}
	start := e.Auction.DateTime - mod(e.Auction.DateTime, 10_000)
	if p, ok := j.person.Value(); ok {
		if p[1] == fmt.Sprint(start) {
			j.emit(ctx, p[0], start)
		}
		return nil
	}
	j.sellers.Put(start, true)
	return nil
}

func (j *q8Join) emit(ctx *weir.KeyedContext[int64, NewUser], name string, start int64) {
	ctx.Emit(NewUser{ID: ctx.CurrentKey(), Name: name, WindowStart: start})
	j.emitted.Update(true)
	j.sellers.Clear()
}
