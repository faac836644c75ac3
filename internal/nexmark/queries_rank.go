package nexmark

import (
	"cmp"
	"slices"
	"strconv"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/codec"
)

// The ROW_NUMBER queries q18 and q19: per partition, the rows of the first
// ranks, which update as bids arrive. SQL leaves the order of rows that tie
// on the ORDER BY columns open, and Flink takes arrival order, which at a
// parallelism above 1 varies from run to run; here ties are broken by
// bidOrder, so that a run's result is deterministic, and still one the SQL
// allows.

// bidOrder orders bids by every field, dateTime first: the tie-break of
// q18 and q19.
func bidOrder(a, b *Bid) int {
	return cmp.Or(
		cmp.Compare(a.DateTime, b.DateTime),
		cmp.Compare(a.Price, b.Price),
		cmp.Compare(a.Bidder, b.Bidder),
		cmp.Compare(a.Auction, b.Auction),
		cmp.Compare(a.Channel, b.Channel),
		cmp.Compare(a.URL, b.URL),
		cmp.Compare(a.Extra, b.Extra),
	)
}

// bidsOf returns the bids of events, named name.
func bidsOf(events *weir.DataStream[Event], name string) *weir.DataStream[Bid] {
	return selectBids(events, name, func(b *Bid) (Bid, bool) { return *b, true }).WithCodec(BidCodec())
}

// LastBid is q18's result row, a bid (the columns of the bid view).
type LastBid Bid

// RowKey is the partition, "bidder,auction".
func (b LastBid) RowKey() string {
	return strconv.FormatInt(b.Bidder, 10) + "," + strconv.FormatInt(b.Auction, 10)
}

var _ Updating = LastBid{}

// Q18 finds every bidder's last bid on each auction:
//
//	SELECT auction, bidder, price, channel, url, dateTime, extra
//	FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY bidder, auction ORDER BY dateTime DESC) AS rank_number
//	      FROM bid)
//	WHERE rank_number <= 1
//
// Flink runs this as an event-time deduplication keeping the last row:
// per (bidder, auction) the latest bid so far, emitted whenever it changes
// (an older bid arriving late changes nothing). Bids with the same
// dateTime are ordered by bidOrder instead of by arrival. The state, one
// bid per bidder and auction, is never dropped: it grows without bound as
// in Flink (the SQL has no end for a partition).
func Q18(events *weir.DataStream[Event]) *weir.DataStream[LastBid] {
	byPair := weir.KeyByCodec(bidsOf(events, "Q18 bids"),
		func(b Bid) codec.Pair[int64, int64] {
			return codec.Pair[int64, int64]{First: b.Bidder, Second: b.Auction}
		},
		codec.PairOf(codec.Int64(), codec.Int64()))
	return weir.KeyedProcess(byPair, func() weir.KeyedProcessFunction[codec.Pair[int64, int64], Bid, LastBid] {
		return &q18Dedup{}
	}).Name("Q18 deduplicate")
}

type q18Dedup struct {
	last *weir.ValueState[Bid]
}

var _ weir.KeyedOpener[codec.Pair[int64, int64], LastBid] = (*q18Dedup)(nil)

func (q *q18Dedup) Open(ctx *weir.KeyedContext[codec.Pair[int64, int64], LastBid]) error {
	var err error
	q.last, err = weir.GetValueState(ctx, weir.ValueStateDescriptor[Bid]{Name: "last", Codec: BidCodec()})
	return err
}

func (q *q18Dedup) ProcessElement(ctx *weir.KeyedContext[codec.Pair[int64, int64], LastBid], b Bid) error {
	if last, ok := q.last.Value(); ok && bidOrder(&b, &last) <= 0 {
		return nil
	}
	q.last.Update(b)
	ctx.Emit(LastBid(b))
	return nil
}

// TopN is how many bids per auction q19 ranks.
const TopN = 10

// RankedBid is q19's result row: a bid and its rank in its auction.
type RankedBid struct {
	Bid
	RankNumber int64 `json:"rank_number"`
}

// RowKey is the rank's place, "auction,rank_number".
func (r RankedBid) RowKey() string {
	return strconv.FormatInt(r.Auction, 10) + "," + strconv.FormatInt(r.RankNumber, 10)
}

var _ Updating = RankedBid{}

// Q19 ranks the ten highest bids of every auction:
//
//	SELECT * FROM
//	(SELECT *, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC) AS rank_number FROM bid)
//	WHERE rank_number <= 10
//
// Flink's append-only top-N: per auction the ten best bids so far; a bid
// that enters them moves the ones below it down a rank, and every rank
// whose row changed is emitted again (the update of that rank_number).
// Bids of the same price are ordered by bidOrder (the earlier first)
// rather than by arrival. The state, ten bids per auction, is never
// dropped: it grows with the auctions as in Flink (the SQL does not know
// that auctions end).
func Q19(events *weir.DataStream[Event]) *weir.DataStream[RankedBid] {
	byAuction := weir.KeyBy(bidsOf(events, "Q19 bids"), func(b Bid) int64 { return b.Auction })
	return weir.KeyedProcess(byAuction, func() weir.KeyedProcessFunction[int64, Bid, RankedBid] { return &q19TopN{} }).Name("Q19 top-N")
}

// rankOrder is q19's ORDER BY price DESC, ties broken by bidOrder.
func rankOrder(a, b *Bid) int {
	return cmp.Or(cmp.Compare(b.Price, a.Price), bidOrder(a, b))
}

type q19TopN struct {
	top *weir.ValueState[[]Bid] // in rank order, at most TopN
	// floor is the lowest price in top once it holds TopN bids: a bid
	// below it cannot enter, which saves decoding top for most bids.
	floor *weir.ValueState[int64]
}

var _ weir.KeyedOpener[int64, RankedBid] = (*q19TopN)(nil)

func (q *q19TopN) Open(ctx *weir.KeyedContext[int64, RankedBid]) error {
	var err error
	q.top, err = weir.GetValueState(ctx, weir.ValueStateDescriptor[[]Bid]{Name: "top", Codec: codec.SliceOf(BidCodec())})
	if err != nil {
		return err
	}
	q.floor, err = weir.GetValueState(ctx, weir.ValueStateDescriptor[int64]{Name: "floor"})
	return err
}

func (q *q19TopN) ProcessElement(ctx *weir.KeyedContext[int64, RankedBid], b Bid) error {
	if floor, ok := q.floor.Value(); ok && b.Price < floor {
		return nil
	}
	top, _ := q.top.Value()
	i, _ := slices.BinarySearchFunc(top, &b, func(x Bid, b *Bid) int { return rankOrder(&x, b) })
	if i >= TopN {
		return nil
	}
	// A new slice: the state may still hold the old one.
	next := make([]Bid, 0, min(len(top)+1, TopN))
	next = append(append(append(next, top[:i]...), b), top[i:min(len(top), TopN-1)]...)
	q.top.Update(next)
	if len(next) == TopN {
		q.floor.Update(next[TopN-1].Price)
	}
	for r := i; r < len(next); r++ {
		ctx.Emit(RankedBid{Bid: next[r], RankNumber: int64(r + 1)})
	}
	return nil
}
