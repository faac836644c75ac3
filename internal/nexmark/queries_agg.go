package nexmark

import (
	"encoding/binary"
	"slices"
	"strconv"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/codec"
)

// The daily statistics q15, q16 and q17: GROUP BY a day (and a channel or
// an auction), without a window. In Flink SQL that is an unbounded
// aggregation whose result rows update with every bid, so these queries
// emit the group's new row after every bid (Flink's changelog, without its
// retractions; q17 folds its bids in mini-batches first, as Flink's suite
// configures it), and their row types implement Updating with the group as
// RowKey.
//
// The day key would allow computing them as tumbling one-day event-time
// windows (emitting each group once when the watermark passes the end of
// its day, and then dropping its state), with the same final rows. They
// are not: a window emits nothing until a day of event time has passed,
// and a benchmark run covers minutes of event time, so the query would do
// its output work only at the end of the input instead of continuously as
// in Flink. The price is the same as Flink's: a group's state is never
// dropped (a day may in principle get another bid at any time), so state
// grows without bound with the groups and, for q15 and q16, with the
// distinct bidders and auctions of each group.

// priceRank is the price class of the FILTER clauses: 1 below 10,000,
// 2 from 10,000 and below 1,000,000, 3 from 1,000,000.
func priceRank(price int64) int {
	switch {
	case price < 10_000:
		return 1
	case price < 1_000_000:
		return 2
	}
	return 3
}

// BidCounts are the bid counts of a group: count(*), and count(*) FILTER
// (WHERE price < 10000), (WHERE price >= 10000 AND price < 1000000) and
// (WHERE price >= 1000000).
type BidCounts struct {
	TotalBids int64 `json:"total_bids"`
	Rank1Bids int64 `json:"rank1_bids"`
	Rank2Bids int64 `json:"rank2_bids"`
	Rank3Bids int64 `json:"rank3_bids"`
}

// DistinctCounts are BidCounts and the same counts of distinct bidders
// and distinct auctions (count(DISTINCT bidder) FILTER (...), ...).
type DistinctCounts struct {
	BidCounts
	TotalBidders  int64 `json:"total_bidders"`
	Rank1Bidders  int64 `json:"rank1_bidders"`
	Rank2Bidders  int64 `json:"rank2_bidders"`
	Rank3Bidders  int64 `json:"rank3_bidders"`
	TotalAuctions int64 `json:"total_auctions"`
	Rank1Auctions int64 `json:"rank1_auctions"`
	Rank2Auctions int64 `json:"rank2_auctions"`
	Rank3Auctions int64 `json:"rank3_auctions"`
}

// statBids are the bids of events without their url and extra, which the
// statistics do not read, for a cheaper shuffle.
func statBids(events *weir.DataStream[Event], name string) *weir.DataStream[Bid] {
	return selectBids(events, name+" bids", func(b *Bid) (Bid, bool) {
		p := *b
		p.URL, p.Extra = "", ""
		return p, true
	}).WithCodec(BidCodec())
}

// distinctCounter is the keyed state behind DistinctCounts: the twelve
// counts in field order, and per distinct bidder and auction of the group
// the price ranks it has bid in (bit 1<<rank).
type distinctCounter struct {
	counts   *weir.ValueState[[]int64]
	bidders  *weir.MapState[int64, int64]
	auctions *weir.MapState[int64, int64]
}

func (d *distinctCounter) open(ctx weir.StateContext) error {
	var err error
	if d.counts, err = weir.GetValueState(ctx, weir.ValueStateDescriptor[[]int64]{Name: "counts", Codec: int64s}); err != nil {
		return err
	}
	if d.bidders, err = weir.GetMapState(ctx, weir.MapStateDescriptor[int64, int64]{Name: "bidders"}); err != nil {
		return err
	}
	d.auctions, err = weir.GetMapState(ctx, weir.MapStateDescriptor[int64, int64]{Name: "auctions"})
	return err
}

// add counts b in the current group and returns the group's new counts.
func (d *distinctCounter) add(b Bid) DistinctCounts {
	c, ok := d.counts.Value()
	if ok {
		c = slices.Clone(c)
	} else {
		c = make([]int64, 12)
	}
	r := priceRank(b.Price)
	c[0]++
	c[r]++
	countDistinct(d.bidders, b.Bidder, r, c[4:8])
	countDistinct(d.auctions, b.Auction, r, c[8:12])
	d.counts.Update(c)
	return DistinctCounts{
		BidCounts:    BidCounts{TotalBids: c[0], Rank1Bids: c[1], Rank2Bids: c[2], Rank3Bids: c[3]},
		TotalBidders: c[4], Rank1Bidders: c[5], Rank2Bidders: c[6], Rank3Bidders: c[7],
		TotalAuctions: c[8], Rank1Auctions: c[9], Rank2Auctions: c[10], Rank3Auctions: c[11],
	}
}

// countDistinct counts v, seen at price rank r, in c (total, then ranks
// 1-3) if it is new to the group or to the rank.
func countDistinct(seen *weir.MapState[int64, int64], v int64, r int, c []int64) {
	ranks, ok := seen.Get(v)
	if !ok {
		c[0]++
	}
	if ranks&(1<<r) == 0 {
		c[r]++
		seen.Put(v, ranks|1<<r)
	}
}

// DailyStats is q15's result row.
type DailyStats struct {
	Day string `json:"day"`
	DistinctCounts
}

// RowKey is the group, the day.
func (s DailyStats) RowKey() string { return s.Day }

var _ Updating = DailyStats{}

// Q15 reports, per day, how many bids, bidders and auctions there were at
// each price level:
//
//	SELECT DATE_FORMAT(dateTime, 'yyyy-MM-dd') AS day,
//	  count(*) AS total_bids,
//	  count(*) FILTER (WHERE price < 10000) AS rank1_bids,
//	  count(*) FILTER (WHERE price >= 10000 AND price < 1000000) AS rank2_bids,
//	  count(*) FILTER (WHERE price >= 1000000) AS rank3_bids,
//	  count(DISTINCT bidder) AS total_bidders, <the same three FILTERs>,
//	  count(DISTINCT auction) AS total_auctions, <the same three FILTERs>
//	FROM bid GROUP BY DATE_FORMAT(dateTime, 'yyyy-MM-dd')
//
// One group per day, so at any parallelism a day's bids meet in one
// subtask. Flink can split such distinct aggregations in two levels by a
// hash of the distinct keys (table.optimizer.distinct-agg.split.enabled);
// this is the one-level plan.
func Q15(events *weir.DataStream[Event]) *weir.DataStream[DailyStats] {
	byDay := weir.KeyBy(statBids(events, "Q15"), func(b Bid) string { return sqlDate(b.DateTime) })
	return weir.KeyedProcess(byDay, func() weir.KeyedProcessFunction[string, Bid, DailyStats] { return &q15Agg{} }).Name("Q15 aggregate")
}

type q15Agg struct{ d distinctCounter }

var _ weir.KeyedOpener[string, DailyStats] = (*q15Agg)(nil)

func (q *q15Agg) Open(ctx *weir.KeyedContext[string, DailyStats]) error { return q.d.open(ctx) }

func (q *q15Agg) ProcessElement(ctx *weir.KeyedContext[string, DailyStats], b Bid) error {
	ctx.Emit(DailyStats{Day: ctx.CurrentKey(), DistinctCounts: q.d.add(b)})
	return nil
}

// ChannelStats is q16's result row.
type ChannelStats struct {
	Channel string `json:"channel"`
	Day     string `json:"day"`
	Minute  string `json:"minute"`
	DistinctCounts
}

// RowKey is the group, "channel,day".
func (s ChannelStats) RowKey() string { return s.Channel + "," + s.Day }

var _ Updating = ChannelStats{}

// Q16 is q15 per channel and day, with the latest minute of the day that
// had a bid:
//
//	SELECT channel, DATE_FORMAT(dateTime, 'yyyy-MM-dd') AS day,
//	  max(DATE_FORMAT(dateTime, 'HH:mm')) AS minute,
//	  <the counts of q15>
//	FROM bid GROUP BY channel, DATE_FORMAT(dateTime, 'yyyy-MM-dd')
func Q16(events *weir.DataStream[Event]) *weir.DataStream[ChannelStats] {
	byChannelDay := weir.KeyByCodec(statBids(events, "Q16"),
		func(b Bid) codec.Pair[string, string] {
			return codec.Pair[string, string]{First: b.Channel, Second: sqlDate(b.DateTime)}
		},
		codec.PairOf(codec.String(), codec.String()))
	return weir.KeyedProcess(byChannelDay, func() weir.KeyedProcessFunction[codec.Pair[string, string], Bid, ChannelStats] {
		return &q16Agg{}
	}).Name("Q16 aggregate")
}

type q16Agg struct {
	d      distinctCounter
	minute *weir.ValueState[string] // max(DATE_FORMAT(dateTime, 'HH:mm'))
}

var _ weir.KeyedOpener[codec.Pair[string, string], ChannelStats] = (*q16Agg)(nil)

func (q *q16Agg) Open(ctx *weir.KeyedContext[codec.Pair[string, string], ChannelStats]) error {
	var err error
	if q.minute, err = weir.GetValueState(ctx, weir.ValueStateDescriptor[string]{Name: "minute"}); err != nil {
		return err
	}
	return q.d.open(ctx)
}

func (q *q16Agg) ProcessElement(ctx *weir.KeyedContext[codec.Pair[string, string], ChannelStats], b Bid) error {
	m := sqlHourMinute(b.DateTime)
	if old, ok := q.minute.Value(); ok && old >= m {
		m = old
	} else {
		q.minute.Update(m)
	}
	k := ctx.CurrentKey()
	ctx.Emit(ChannelStats{Channel: k.First, Day: k.Second, Minute: m, DistinctCounts: q.d.add(b)})
	return nil
}

// AuctionStats is q17's result row.
type AuctionStats struct {
	Auction int64  `json:"auction"`
	Day     string `json:"day"`
	BidCounts
	MinPrice int64 `json:"min_price"`
	MaxPrice int64 `json:"max_price"`
	AvgPrice int64 `json:"avg_price"`
	SumPrice int64 `json:"sum_price"`
}

// RowKey is the group, "auction,day".
func (s AuctionStats) RowKey() string { return strconv.FormatInt(s.Auction, 10) + "," + s.Day }

var _ Updating = AuctionStats{}

// Q17 reports, per auction and day, the bids and their prices:
//
//	SELECT auction, DATE_FORMAT(dateTime, 'yyyy-MM-dd') AS day,
//	  count(*) AS total_bids, <the three FILTERed counts of q15>,
//	  min(price) AS min_price, max(price) AS max_price,
//	  avg(price) AS avg_price, sum(price) AS sum_price
//	FROM bid GROUP BY auction, DATE_FORMAT(dateTime, 'yyyy-MM-dd')
//
// avg of a BIGINT is a BIGINT in Flink: the sum divided by the count,
// truncated.
//
// As Flink's suite runs it (mini-batch aggregation, 5,000 rows, and the
// two-phase local/global plan), each subtask first folds its bids per
// auction and day in memory (miniBatch), and sends one
// partial aggregate per group of the batch; the keyed stage merges the
// partials into its state and emits the group's new row once per partial.
// The local stage empties itself before every checkpoint barrier
// (weir.BarrierFlusher) and at the end of the input, so nothing it holds
// is lost by a restore. The final row per group is the SQL's; there are
// fewer intermediate rows than bids.
func Q17(events *weir.DataStream[Event]) *weir.DataStream[AuctionStats] {
	local := weir.ProcessEach(statBids(events, "Q17"), func() weir.ProcessFunction[Bid, q17Partial] {
		return newQ17Local()
	}).Name("Q17 local aggregate").WithCodec(q17PartialCodec)
	byAuctionDay := weir.KeyByCodec(local,
		func(p q17Partial) codec.Pair[int64, string] { return p.Group },
		codec.PairOf(codec.Int64(), codec.String()))
	return weir.KeyedProcess(byAuctionDay, func() weir.KeyedProcessFunction[codec.Pair[int64, string], q17Partial, AuctionStats] {
		return &q17Agg{}
	}).Name("Q17 aggregate")
}

// q17Partial is a partial aggregate of one auction and day: the four
// counts, min, max and sum of q17's columns.
type q17Partial struct {
	Group codec.Pair[int64, string]
	Acc   [7]int64
}

var q17PartialCodec = codec.Func(func(b []byte, p q17Partial) []byte {
	b = binary.AppendVarint(b, p.Group.First)
	b = appendString(b, p.Group.Second)
	for _, v := range p.Acc {
		b = binary.AppendVarint(b, v)
	}
	return b
}, func(src []byte) (q17Partial, int, error) {
	d := decoder{src: src}
	p := q17Partial{Group: codec.Pair[int64, string]{First: d.int(), Second: d.string()}}
	for i := range p.Acc {
		p.Acc[i] = d.int()
	}
	return p, d.n, d.err
})

// newQ17Acc is the accumulator of one bid.
func newQ17Acc(price int64) [7]int64 {
	a := [7]int64{1, 0, 0, 0, price, price, price}
	a[priceRank(price)]++
	return a
}

// mergeQ17 folds b into a.
func mergeQ17(a *[7]int64, b *[7]int64) {
	for i := range 4 {
		a[i] += b[i]
	}
	a[4], a[5], a[6] = min(a[4], b[4]), max(a[5], b[5]), a[6]+b[6]
}

// q17Local folds bids per auction and day in mini-batches.
type q17Local struct {
	miniBatch[codec.Pair[int64, string], [7]int64, q17Partial]
}

func newQ17Local() *q17Local {
	return &q17Local{newMiniBatch(func(ctx *weir.Context[q17Partial], k codec.Pair[int64, string], a [7]int64) {
		ctx.Emit(q17Partial{Group: k, Acc: a})
	})}
}

func (q *q17Local) ProcessElement(ctx *weir.Context[q17Partial], b Bid) error {
	one := newQ17Acc(b.Price)
	q.fold(ctx, codec.Pair[int64, string]{First: b.Auction, Second: sqlDate(b.DateTime)}, func(a [7]int64, ok bool) [7]int64 {
		if !ok {
			return one
		}
		mergeQ17(&a, &one)
		return a
	})
	return nil
}

type q17Agg struct {
	acc *weir.ValueState[[]int64] // the four counts, min, max, sum
}

var _ weir.KeyedOpener[codec.Pair[int64, string], AuctionStats] = (*q17Agg)(nil)

func (q *q17Agg) Open(ctx *weir.KeyedContext[codec.Pair[int64, string], AuctionStats]) error {
	var err error
	q.acc, err = weir.GetValueState(ctx, weir.ValueStateDescriptor[[]int64]{Name: "acc", Codec: int64s})
	return err
}

func (q *q17Agg) ProcessElement(ctx *weir.KeyedContext[codec.Pair[int64, string], AuctionStats], p q17Partial) error {
	var a [7]int64
	if old, ok := q.acc.Value(); ok && len(old) == len(a) {
		copy(a[:], old)
		mergeQ17(&a, &p.Acc)
	} else {
		a = p.Acc
	}
	q.acc.Update(a[:])
	k := ctx.CurrentKey()
	ctx.Emit(AuctionStats{Auction: k.First, Day: k.Second,
		BidCounts: BidCounts{TotalBids: a[0], Rank1Bids: a[1], Rank2Bids: a[2], Rank3Bids: a[3]},
		MinPrice:  a[4], MaxPrice: a[5], AvgPrice: a[6] / a[0], SumPrice: a[6]})
	return nil
}
