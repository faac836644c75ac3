package nexmark

import (
	"errors"
	"time"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/codec"
)

// The window queries: GROUP BY a window (HOP, SESSION, TUMBLE) on weir's
// window operator, whose state goes when the window fires.

// HotItem is q5's result row: an auction with the most bids of a window.
type HotItem struct {
	Auction int64 `json:"auction"`
	Num     int64 `json:"num"`
}

// Q5 finds the hot items, the auctions with the most bids per window:
//
//	SELECT AuctionBids.auction, AuctionBids.num
//	FROM (SELECT auction, count(*) AS num, window_start AS starttime, window_end AS endtime
//	      FROM TABLE(HOP(TABLE bid, DESCRIPTOR(dateTime), INTERVAL '2' SECOND, INTERVAL '10' SECOND))
//	      GROUP BY auction, window_start, window_end) AS AuctionBids
//	JOIN (SELECT max(CountBids.num) AS maxn, CountBids.starttime, CountBids.endtime
//	      FROM (<the same count per auction and window>) AS CountBids
//	      GROUP BY CountBids.starttime, CountBids.endtime) AS MaxBids
//	ON AuctionBids.starttime = MaxBids.starttime AND AuctionBids.endtime = MaxBids.endtime
//	   AND AuctionBids.num >= MaxBids.maxn
//
// The counts come from sliding event-time windows of 10 s every 2 s
// (aligned to the epoch, as HOP's); the join with the per-window maximum
// is a second stage keyed by the window (its end, the size being fixed)
// that keeps the largest count and its auctions, every one on a tie, and
// emits them and drops its state when the watermark passes the window's
// end, by which time every count of the window has arrived. The count is
// computed once rather than twice as the SQL's two subqueries do.
//
// As Flink plans a window aggregation (a local stage, then the global one
// over the 2 s slices the hopping windows share), each subtask first counts
// its bids per auction and slice in memory (miniBatch), and
// sends the partial counts, stamped with their slice's start (which falls
// into the same windows as every bid of the slice), to the keyed windows.
// The local stage empties itself before every watermark
// (weir.WatermarkListener: its counts are never late), before every
// checkpoint barrier (weir.BarrierFlusher) and at the end of the input.
func Q5(events *weir.DataStream[Event]) *weir.DataStream[HotItem] {
	bids := selectBids(events, "Q5 bids", func(b *Bid) (int64, bool) { return b.Auction, true })
	local := weir.ProcessEach(bids, func() weir.ProcessFunction[int64, codec.Pair[int64, int64]] {
		return newQ5Local()
	}).Name("Q5 local counts").WithCodec(codec.PairOf(codec.Int64(), codec.Int64()))
	counts := weir.AggregateWindows(
		weir.Window(weir.KeyBy(local, func(c codec.Pair[int64, int64]) int64 { return c.First }), weir.SlidingEventTimeWindows(10*time.Second, q5Slide)),
		sumCounts{}, codec.Int64(),
		func(a int64, w weir.TimeWindow, n int64) []int64 { return []int64{a, n, w.End} }).
		Name("Q5 counts").WithCodec(int64s)
	byWindow := weir.KeyBy(counts, func(c []int64) int64 { return c[2] })
	return weir.KeyedProcess(byWindow, func() weir.KeyedProcessFunction[int64, []int64, HotItem] { return &q5Max{} }).Name("Q5 max")
}

// q5Slide is the slide of q5's hopping windows, and so its slices.
const q5Slide = 2 * time.Second

// q5Local counts bids per (auction, slice start) in mini-batches; a
// partial count carries its slice's start as its timestamp.
type q5Local struct {
	miniBatch[[2]int64, int64, codec.Pair[int64, int64]]
}

func newQ5Local() *q5Local {
	return &q5Local{newMiniBatch(func(ctx *weir.Context[codec.Pair[int64, int64]], k [2]int64, n int64) {
		ctx.EmitWithTimestamp(codec.Pair[int64, int64]{First: k[0], Second: n}, k[1])
	})}
}

func (q *q5Local) ProcessElement(ctx *weir.Context[codec.Pair[int64, int64]], auction int64) error {
	ts, ok := ctx.Timestamp()
	if !ok {
		return errors.New("q5: a bid without a timestamp")
	}
	q.fold(ctx, [2]int64{auction, ts - mod(ts, q5Slide.Milliseconds())}, func(n int64, _ bool) int64 { return n + 1 })
	return nil
}

// sumCounts adds up partial counts.
type sumCounts struct{}

func (sumCounts) CreateAccumulator() int64                        { return 0 }
func (sumCounts) Add(c codec.Pair[int64, int64], acc int64) int64 { return acc + c.Second }
func (sumCounts) GetResult(acc int64) int64                       { return acc }
func (sumCounts) Merge(a, b int64) int64                          { return a + b }

// countAgg counts records.
type countAgg[T any] struct{}

func (countAgg[T]) CreateAccumulator() int64  { return 0 }
func (countAgg[T]) Add(_ T, acc int64) int64  { return acc + 1 }
func (countAgg[T]) GetResult(acc int64) int64 { return acc }
func (countAgg[T]) Merge(a, b int64) int64    { return a + b }

// q5Max keeps, per window (keyed by its end), the largest count and the
// auctions that have it, and emits them when the watermark passes the
// window.
type q5Max struct {
	max  *weir.ValueState[int64]
	tops *weir.ListState[int64] // auctions with count max
}

var (
	_ weir.KeyedOpener[int64, HotItem]  = (*q5Max)(nil)
	_ weir.TimerHandler[int64, HotItem] = (*q5Max)(nil)
)

func (q *q5Max) Open(ctx *weir.KeyedContext[int64, HotItem]) error {
	var err error
	if q.max, err = weir.GetValueState(ctx, weir.ValueStateDescriptor[int64]{Name: "max"}); err != nil {
		return err
	}
	q.tops, err = weir.GetListState(ctx, weir.ListStateDescriptor[int64]{Name: "tops"})
	return err
}

// ProcessElement takes [auction, count, window end].
func (q *q5Max) ProcessElement(ctx *weir.KeyedContext[int64, HotItem], c []int64) error {
	m, ok := q.max.Value()
	switch {
	case !ok:
		ctx.RegisterEventTimeTimer(c[2] - 1)
		fallthrough
	case c[1] > m:
		q.max.Update(c[1])
		q.tops.Update([]int64{c[0]})
	case c[1] == m:
		q.tops.Add(c[0])
	}
	return nil
}

func (q *q5Max) OnTimer(ctx *weir.KeyedContext[int64, HotItem], _ weir.Timer) error {
	m, _ := q.max.Value()
	for _, a := range q.tops.Get() {
		ctx.Emit(HotItem{Auction: a, Num: m})
	}
	q.max.Clear()
	q.tops.Clear()
	return nil
}

// BidderCount is the result row of q11 and q12: a bidder's bids in one
// window, [starttime, endtime).
type BidderCount struct {
	Bidder    int64 `json:"bidder"`
	BidCount  int64 `json:"bid_count"`
	StartTime int64 `json:"starttime"`
	EndTime   int64 `json:"endtime"`
}

// bidderCounts counts the bids of each bidder per window of a.
func bidderCounts(events *weir.DataStream[Event], name string, a weir.WindowAssigner) *weir.DataStream[BidderCount] {
	bidders := selectBids(events, name+" bids", func(b *Bid) (int64, bool) { return b.Bidder, true })
	return weir.AggregateWindows(
		weir.Window(weir.KeyBy(bidders, func(b int64) int64 { return b }), a),
		countAgg[int64]{}, codec.Int64(),
		func(b int64, w weir.TimeWindow, n int64) BidderCount {
			return BidderCount{Bidder: b, BidCount: n, StartTime: w.Start, EndTime: w.End}
		}).
		Name(name + " counts")
}

// Q11 counts the bids of every bidder's sessions:
//
//	SELECT B.bidder, count(*) AS bid_count,
//	  SESSION_START(B.dateTime, INTERVAL '10' SECOND) AS starttime,
//	  SESSION_END(B.dateTime, INTERVAL '10' SECOND) AS endtime
//	FROM bid B GROUP BY B.bidder, SESSION(B.dateTime, INTERVAL '10' SECOND)
//
// Event-time session windows with a 10 s gap: a session runs from its
// first bid to 10 s after its last, and ends (its state dropped) when the
// watermark passes that.
func Q11(events *weir.DataStream[Event]) *weir.DataStream[BidderCount] {
	return bidderCounts(events, "Q11", weir.EventTimeSessionWindows(10*time.Second))
}

// Q12Window is the size of q12's processing-time windows.
const Q12Window = 10 * time.Second

// Q12 counts the bids of every bidder per tumbling processing-time window
// of 10 s:
//
//	SELECT bidder, count(*) AS bid_count, window_start AS starttime, window_end AS endtime
//	FROM TABLE(TUMBLE(TABLE (SELECT *, PROCTIME() AS p_time FROM bid), DESCRIPTOR(p_time), INTERVAL '10' SECOND))
//	GROUP BY bidder, window_start, window_end
//
// The windows follow the system clock, so the result depends on the speed
// of the run, and, as in Flink, windows still open when the input ends
// never fire: their counts are lost. As in Flink, a window fires once its
// last millisecond has passed, so it fires once per bidder.
func Q12(events *weir.DataStream[Event]) *weir.DataStream[BidderCount] {
	return q12(events, Q12Window)
}

// q12 is Q12 with windows of the given size (tests use short ones).
func q12(events *weir.DataStream[Event], size time.Duration) *weir.DataStream[BidderCount] {
	return bidderCounts(events, "Q12", weir.TumblingProcessingTimeWindows(size))
}
