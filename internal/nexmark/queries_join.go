package nexmark

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/codec"
)

// The queries that join two relations: q3, q4, q7, q8, q9 and q20, after
// Flink's SQL (nexmark-flink/src/main/resources/queries/qN.sql) with
// weir's two-input operators. Each splits the event stream into the
// relations it reads (persons, auctions, bids), filtering and projecting
// them first as Flink's planner pushes filters and projections below a
// join, and joins them with KeyedCoProcess (regular joins), a window join
// (q8) or an interval join (q7).
//
// Lateness. A record is late when its timestamp is at or below the
// watermark of the operator it reaches (Flink's convention: the watermark
// promises that no record up to it follows). Events never produces a late
// event: each subtask emits its events in event-time order and the
// watermark trails them by WatermarkDelay. The queries' results equal the
// SQL's as long as nothing is late; where a query's state is cleaned by
// the watermark (q4, q9, and the windows of q7 and q8) a late record may
// miss matches that Flink's regular join, which keeps every row, would
// still find. Each query's comment names its differences from the SQL.

// q7Window and q8Window are the tumbling windows of q7 and q8.
const (
	q7Window = 10 * time.Second
	q8Window = 10 * time.Second
)

// selectPersons applies project to every person of events: the persons it
// accepts, with the fields the query does not read cleared, are the
// relation the query joins (one FlatMap, named name, chained to the
// source). selectAuctions does the same for auctions, and selectBids
// (queries_bid.go) for bids.
func selectPersons(events *weir.DataStream[Event], name string, project func(p *Person) (Person, bool)) *weir.DataStream[Person] {
	return weir.FlatMap(events, func(e Event, out weir.Collector[Person]) {
		if e.Kind == KindPerson {
			if p, ok := project(e.Person); ok {
				out.Collect(p)
			}
		}
	}).Name(name).WithCodec(PersonCodec())
}

func selectAuctions(events *weir.DataStream[Event], name string, project func(a *Auction) (Auction, bool)) *weir.DataStream[Auction] {
	return weir.FlatMap(events, func(e Event, out weir.Collector[Auction]) {
		if e.Kind == KindAuction {
			if a, ok := project(e.Auction); ok {
				out.Collect(a)
			}
		}
	}).Name(name).WithCodec(AuctionCodec())
}

func personID(p Person) int64       { return p.ID }
func auctionID(a Auction) int64     { return a.ID }
func auctionSeller(a Auction) int64 { return a.Seller }
func bidAuction(b Bid) int64        { return b.Auction }

// regularJoin is Flink's regular (unbounded) inner equi-join: both inputs'
// rows are kept per key for ever, and each row joins the other input's
// rows that arrived before it, so every matching pair is emitted once,
// when its second row arrives.
type regularJoin[L, R, OUT any] struct {
	name       string // of the state
	left       *weir.ListState[L]
	right      *weir.ListState[R]
	leftCodec  codec.Codec[L]
	rightCodec codec.Codec[R]
	join       func(L, R) OUT
}

func (j *regularJoin[L, R, OUT]) Open(ctx *weir.KeyedContext[int64, OUT]) error {
	var err error
	if j.left, err = weir.GetListState(ctx, weir.ListStateDescriptor[L]{Name: j.name + "-left", Codec: j.leftCodec}); err != nil {
		return err
	}
	j.right, err = weir.GetListState(ctx, weir.ListStateDescriptor[R]{Name: j.name + "-right", Codec: j.rightCodec})
	return err
}

func (j *regularJoin[L, R, OUT]) ProcessElement1(ctx *weir.KeyedContext[int64, OUT], l L) error {
	j.left.Add(l)
	for _, r := range j.right.Get() {
		ctx.Emit(j.join(l, r))
	}
	return nil
}

func (j *regularJoin[L, R, OUT]) ProcessElement2(ctx *weir.KeyedContext[int64, OUT], r R) error {
	j.right.Add(r)
	for _, l := range j.left.Get() {
		ctx.Emit(j.join(l, r))
	}
	return nil
}

// Q3Result is a local item suggestion: a seller in OR, ID or CA and one of
// their auctions in category 10.
type Q3Result struct {
	Name  string `json:"name"`
	City  string `json:"city"`
	State string `json:"state"`
	ID    int64  `json:"id"` // the auction's
}

// Q3 is local item suggestion:
//
//	SELECT P.name, P.city, P.state, A.id
//	FROM auction AS A INNER JOIN person AS P ON A.seller = P.id
//	WHERE A.category = 10 AND (P.state = 'OR' OR P.state = 'ID' OR P.state = 'CA')
//
// A regular join, keyed by person id and seller: like Flink's, it keeps
// every (filtered, projected) person and auction for ever, since a regular
// join cannot know that a person's id is never reused, and emits each
// match once, when its later side arrives.
func Q3(events *weir.DataStream[Event]) *weir.DataStream[Q3Result] {
	persons := selectPersons(events, "Q3 persons", func(p *Person) (Person, bool) {
		return Person{ID: p.ID, Name: p.Name, City: p.City, State: p.State},
			p.State == "OR" || p.State == "ID" || p.State == "CA"
	})
	auctions := selectAuctions(events, "Q3 auctions", func(a *Auction) (Auction, bool) {
		return Auction{ID: a.ID, Seller: a.Seller}, a.Category == 10
	})
	return weir.KeyedCoProcess(weir.ConnectKeyed(weir.KeyBy(persons, personID), weir.KeyBy(auctions, auctionSeller)),
		func() weir.KeyedCoProcessFunction[int64, Person, Auction, Q3Result] {
			return &regularJoin[Person, Auction, Q3Result]{name: "q3", leftCodec: PersonCodec(), rightCodec: AuctionCodec(),
				join: func(p Person, a Auction) Q3Result {
					return Q3Result{Name: p.Name, City: p.City, State: p.State, ID: a.ID}
				}}
		}).Name("Q3 join")
}

// Q20Result is a bid with its auction's columns.
type Q20Result struct {
	Auction         int64  `json:"auction"`
	Bidder          int64  `json:"bidder"`
	Price           int64  `json:"price"`
	Channel         string `json:"channel"`
	URL             string `json:"url"`
	BidDateTime     int64  `json:"bid_dateTime"`
	BidExtra        string `json:"bid_extra"`
	ItemName        string `json:"itemName"`
	Description     string `json:"description"`
	InitialBid      int64  `json:"initialBid"`
	Reserve         int64  `json:"reserve"`
	AuctionDateTime int64  `json:"auction_dateTime"`
	Expires         int64  `json:"expires"`
	Seller          int64  `json:"seller"`
	Category        int64  `json:"category"`
	AuctionExtra    string `json:"auction_extra"`
}

// Q20 expands every bid with its auction, for auctions of category 10:
//
//	SELECT auction, bidder, price, channel, url, B.dateTime, B.extra,
//	    itemName, description, initialBid, reserve, A.dateTime, expires, seller, category, A.extra
//	FROM bid AS B INNER JOIN auction AS A ON B.auction = A.id
//	WHERE A.category = 10
//
// A regular join keyed by auction id: like Flink's, it keeps every bid and
// every auction of category 10 for ever (a bid cannot be dropped, as its
// auction might still come, nor can an auction, as bids might), and emits
// each bid with its auction once both are known.
func Q20(events *weir.DataStream[Event]) *weir.DataStream[Q20Result] {
	bids := selectBids(events, "Q20 bids", func(b *Bid) (Bid, bool) { return *b, true }).WithCodec(BidCodec())
	auctions := selectAuctions(events, "Q20 auctions", func(a *Auction) (Auction, bool) { return *a, a.Category == 10 })
	return weir.KeyedCoProcess(weir.ConnectKeyed(weir.KeyBy(bids, bidAuction), weir.KeyBy(auctions, auctionID)),
		func() weir.KeyedCoProcessFunction[int64, Bid, Auction, Q20Result] {
			return &regularJoin[Bid, Auction, Q20Result]{name: "q20", leftCodec: BidCodec(), rightCodec: AuctionCodec(),
				join: func(b Bid, a Auction) Q20Result {
					return Q20Result{Auction: b.Auction, Bidder: b.Bidder, Price: b.Price, Channel: b.Channel, URL: b.URL,
						BidDateTime: b.DateTime, BidExtra: b.Extra, ItemName: a.ItemName, Description: a.Description,
						InitialBid: a.InitialBid, Reserve: a.Reserve, AuctionDateTime: a.DateTime, Expires: a.Expires,
						Seller: a.Seller, Category: a.Category, AuctionExtra: a.Extra}
				}}
		}).Name("Q20 join")
}

// winnerOrder orders the bids on one auction as q9's ROW_NUMBER does,
// best first: by price descending, then by time ascending. The SQL leaves
// bids equal in both unordered (Flink keeps whichever came first); weir
// orders them by bidder, then channel, URL and extra, so that the winner
// does not depend on arrival order.
func winnerOrder(a, b Bid) int {
	return cmp.Or(cmp.Compare(b.Price, a.Price), cmp.Compare(a.DateTime, b.DateTime), cmp.Compare(a.Bidder, b.Bidder),
		strings.Compare(a.Channel, b.Channel), strings.Compare(a.URL, b.URL), strings.Compare(a.Extra, b.Extra))
}

// auctionWinner joins auctions (input 1) with the bids on them (input 2),
// keyed by auction id, where the bid was placed within the auction's
// lifetime (B.dateTime BETWEEN A.dateTime AND A.expires), and keeps the
// best such bid (winnerOrder). improved, if set, is called whenever the
// best bid changes; expired, if set, when the watermark passes the
// auction's expiry with a best bid. The watermark cleans the state:
//
//   - an auction and its best bid go when the watermark reaches the
//     expiry, after which no bid on time can fall within its lifetime;
//   - a bid that comes before its auction waits for it only until the
//     watermark reaches the bid's time, after which an auction on time
//     starts too late for it. A bid without an auction that is already
//     late is dropped at once: its auction has expired, or will start
//     after the bid unless it is late too.
type auctionWinner[OUT any] struct {
	improved func(ctx *weir.KeyedContext[int64, OUT], a Auction, prev Bid, hadPrev bool, best Bid)
	expired  func(ctx *weir.KeyedContext[int64, OUT], a Auction, best Bid)

	// open is the auction and its best bid so far, one state entry: a bid
	// reads both with one state access.
	open  *weir.ValueState[openAuction]
	early *weir.ListState[Bid] // bids that came before their auction
}

// openAuction is an auction and its best bid so far (if HasBest).
type openAuction struct {
	Auction Auction
	Best    Bid
	HasBest bool
}

var openAuctionCodec = codec.Func(func(b []byte, o openAuction) []byte {
	b = auctionCodec.Append(b, o.Auction)
	if !o.HasBest {
		return append(b, 0)
	}
	return BidCodec().Append(append(b, 1), o.Best)
}, func(src []byte) (openAuction, int, error) {
	var o openAuction
	a, n, err := auctionCodec.Decode(src)
	if err != nil {
		return o, 0, err
	}
	o.Auction = a
	if len(src) <= n || src[n] > 1 {
		return o, 0, fmt.Errorf("nexmark: open auction: %w", codec.ErrCorrupt)
	}
	if o.HasBest = src[n] == 1; !o.HasBest {
		return o, n + 1, nil
	}
	bid, m, err := BidCodec().Decode(src[n+1:])
	o.Best = bid
	return o, n + 1 + m, err
})

func (w *auctionWinner[OUT]) Open(ctx *weir.KeyedContext[int64, OUT]) error {
	var err error
	if w.open, err = weir.GetValueState(ctx, weir.ValueStateDescriptor[openAuction]{Name: "open-auction", Codec: openAuctionCodec}); err != nil {
		return err
	}
	w.early, err = weir.GetListState(ctx, weir.ListStateDescriptor[Bid]{Name: "early-bids", Codec: BidCodec()})
	return err
}

func (w *auctionWinner[OUT]) ProcessElement1(ctx *weir.KeyedContext[int64, OUT], a Auction) error {
	o := openAuction{Auction: a}
	for _, b := range w.early.Get() {
		w.offer(ctx, &o, b)
	}
	w.open.Update(o)
	w.early.Clear()
	ctx.RegisterEventTimeTimer(a.Expires)
	return nil
}

func (w *auctionWinner[OUT]) ProcessElement2(ctx *weir.KeyedContext[int64, OUT], b Bid) error {
	if o, ok := w.open.Value(); ok {
		if w.offer(ctx, &o, b) {
			w.open.Update(o)
		}
		return nil
	}
	if b.DateTime <= ctx.CurrentWatermark() {
		return nil
	}
	w.early.Add(b)
	ctx.RegisterEventTimeTimer(b.DateTime)
	return nil
}

// offer makes b o's best bid if it is in the auction's lifetime and better
// than the best so far, and reports whether it did.
func (w *auctionWinner[OUT]) offer(ctx *weir.KeyedContext[int64, OUT], o *openAuction, b Bid) bool {
	if b.DateTime < o.Auction.DateTime || b.DateTime > o.Auction.Expires {
		return false
	}
	if o.HasBest && winnerOrder(b, o.Best) >= 0 {
		return false
	}
	prev, had := o.Best, o.HasBest
	o.Best, o.HasBest = b, true
	if w.improved != nil {
		w.improved(ctx, o.Auction, prev, had, b)
	}
	return true
}

func (w *auctionWinner[OUT]) OnTimer(ctx *weir.KeyedContext[int64, OUT], t weir.Timer) error {
	if o, ok := w.open.Value(); ok {
		if t.Timestamp >= o.Auction.Expires {
			if o.HasBest && w.expired != nil {
				w.expired(ctx, o.Auction, o.Best)
			}
			w.open.Clear()
		}
		return nil
	}
	var waiting []Bid
	for _, b := range w.early.Get() {
		if b.DateTime > t.Timestamp {
			waiting = append(waiting, b)
		}
	}
	if len(waiting) == 0 {
		w.early.Clear()
	} else {
		w.early.Update(waiting)
	}
	return nil
}

// CategoryPrice is q4's result: the average winning price of a category's
// auctions. It updates as auctions get better bids: the last row per
// category is the result.
type CategoryPrice struct {
	Category int64 `json:"id"`
	AvgPrice int64 `json:"final"`
}

// RowKey implements Updating: the category.
func (c CategoryPrice) RowKey() string { return strconv.FormatInt(c.Category, 10) }

var _ Updating = CategoryPrice{}

// categoryDelta changes a category's sum of winning prices by Sum and its
// number of auctions with a winning bid by Count.
type categoryDelta struct{ Category, Sum, Count int64 }

var categoryDeltaCodec = codec.Func(func(b []byte, d categoryDelta) []byte {
	return binary.AppendVarint(binary.AppendVarint(binary.AppendVarint(b, d.Category), d.Sum), d.Count)
}, func(src []byte) (categoryDelta, int, error) {
	d := decoder{src: src}
	v := categoryDelta{Category: d.int(), Sum: d.int(), Count: d.int()}
	return v, d.n, d.err
})

// Q4 is the average winning price per category:
//
//	SELECT Q.category, AVG(Q.final)
//	FROM (SELECT MAX(B.price) AS final, A.category
//	      FROM auction A, bid B
//	      WHERE A.id = B.auction AND B.dateTime BETWEEN A.dateTime AND A.expires
//	      GROUP BY A.id, A.category) Q
//	GROUP BY Q.category
//
// An auction's highest price updates as its bids come (not only once it
// closes), and each update changes its category's average (AVG of BIGINT
// is a BIGINT: the integer quotient), emitted as a new row for the
// category. Flink's changelog would also retract the old rows. Unlike
// Flink's regular join, which keeps every auction and bid for ever, an
// auction's state goes when the watermark passes its expiry (see
// auctionWinner): a bid after that cannot fall within its lifetime.
func Q4(events *weir.DataStream[Event]) *weir.DataStream[CategoryPrice] {
	auctions := selectAuctions(events, "Q4 auctions", func(a *Auction) (Auction, bool) {
		return Auction{ID: a.ID, DateTime: a.DateTime, Expires: a.Expires, Category: a.Category}, true
	})
	bids := selectBids(events, "Q4 bids", func(b *Bid) (Bid, bool) {
		return Bid{Auction: b.Auction, Price: b.Price, DateTime: b.DateTime}, true
	}).WithCodec(BidCodec())
	maxes := weir.KeyedCoProcess(weir.ConnectKeyed(weir.KeyBy(auctions, auctionID), weir.KeyBy(bids, bidAuction)),
		func() weir.KeyedCoProcessFunction[int64, Auction, Bid, categoryDelta] {
			return &auctionWinner[categoryDelta]{improved: func(ctx *weir.KeyedContext[int64, categoryDelta], a Auction, prev Bid, hadPrev bool, best Bid) {
				switch {
				case !hadPrev:
					ctx.Emit(categoryDelta{Category: a.Category, Sum: best.Price, Count: 1})
				case best.Price != prev.Price:
					ctx.Emit(categoryDelta{Category: a.Category, Sum: best.Price - prev.Price})
				}
			}}
		}).Name("Q4 max per auction").WithCodec(categoryDeltaCodec)
	byCategory := weir.KeyBy(maxes, func(d categoryDelta) int64 { return d.Category })
	return weir.KeyedProcess(byCategory, func() weir.KeyedProcessFunction[int64, categoryDelta, CategoryPrice] { return &q4Average{} }).
		Name("Q4 average")
}

// q4Average keeps a category's sum of winning prices and count of auctions.
type q4Average struct {
	acc *weir.ValueState[codec.Pair[int64, int64]] // sum, count
}

func (q *q4Average) Open(ctx *weir.KeyedContext[int64, CategoryPrice]) error {
	var err error
	q.acc, err = weir.GetValueState(ctx, weir.ValueStateDescriptor[codec.Pair[int64, int64]]{Name: "sum-count",
		Codec: codec.PairOf(codec.Int64(), codec.Int64())})
	return err
}

func (q *q4Average) ProcessElement(ctx *weir.KeyedContext[int64, CategoryPrice], d categoryDelta) error {
	acc, _ := q.acc.Value()
	acc.First += d.Sum
	acc.Second += d.Count
	q.acc.Update(acc)
	// An auction's first delta counts it, and its later ones come after
	// it over the same channel, so the count is positive here.
	if acc.Second > 0 {
		ctx.Emit(CategoryPrice{Category: d.Category, AvgPrice: acc.First / acc.Second})
	}
	return nil
}

// Q9Result is an auction with its winning bid.
type Q9Result struct {
	ID          int64  `json:"id"`
	ItemName    string `json:"itemName"`
	Description string `json:"description"`
	InitialBid  int64  `json:"initialBid"`
	Reserve     int64  `json:"reserve"`
	DateTime    int64  `json:"dateTime"`
	Expires     int64  `json:"expires"`
	Seller      int64  `json:"seller"`
	Category    int64  `json:"category"`
	Extra       string `json:"extra"`
	Auction     int64  `json:"auction"`
	Bidder      int64  `json:"bidder"`
	Price       int64  `json:"price"`
	BidDateTime int64  `json:"bid_dateTime"`
	BidExtra    string `json:"bid_extra"`
}

// Q9 finds the winning bid of every auction:
//
//	SELECT A.*, B.auction, B.bidder, B.price, B.dateTime AS bid_dateTime, B.extra AS bid_extra
//	FROM (SELECT A.*, B.*, ROW_NUMBER() OVER (PARTITION BY A.id
//	          ORDER BY B.price DESC, B.dateTime ASC) AS rownum
//	      FROM auction A, bid B
//	      WHERE A.id = B.auction AND B.dateTime BETWEEN A.dateTime AND A.expires)
//	WHERE rownum <= 1
//
// Flink's result updates whenever an auction gets a better bid; weir emits
// one row per auction (with at least one bid in its lifetime) when the
// watermark passes its expiry, when the winner is final, and then drops
// the auction's state (see auctionWinner; Flink keeps it for ever). The
// final rows are the same. Bids equal in price and time, which the SQL
// leaves unordered, are ordered by winnerOrder.
func Q9(events *weir.DataStream[Event]) *weir.DataStream[Q9Result] {
	auctions := selectAuctions(events, "Q9 auctions", func(a *Auction) (Auction, bool) { return *a, true })
	bids := selectBids(events, "Q9 bids", func(b *Bid) (Bid, bool) {
		return Bid{Auction: b.Auction, Bidder: b.Bidder, Price: b.Price, DateTime: b.DateTime, Extra: b.Extra}, true
	}).WithCodec(BidCodec())
	return weir.KeyedCoProcess(weir.ConnectKeyed(weir.KeyBy(auctions, auctionID), weir.KeyBy(bids, bidAuction)),
		func() weir.KeyedCoProcessFunction[int64, Auction, Bid, Q9Result] {
			return &auctionWinner[Q9Result]{expired: func(ctx *weir.KeyedContext[int64, Q9Result], a Auction, b Bid) {
				ctx.Emit(Q9Result{ID: a.ID, ItemName: a.ItemName, Description: a.Description, InitialBid: a.InitialBid,
					Reserve: a.Reserve, DateTime: a.DateTime, Expires: a.Expires, Seller: a.Seller, Category: a.Category,
					Extra: a.Extra, Auction: b.Auction, Bidder: b.Bidder, Price: b.Price, BidDateTime: b.DateTime, BidExtra: b.Extra})
			}}
		}).Name("Q9 winning bids")
}

// Q7Result is a bid with the highest price of its 10 s window.
type Q7Result struct {
	Auction  int64  `json:"auction"`
	Bidder   int64  `json:"bidder"`
	Price    int64  `json:"price"`
	DateTime int64  `json:"dateTime"`
	Extra    string `json:"extra"`
}

// windowMax is the highest price of the bids in the q7 window ending at
// End.
type windowMax struct{ Price, End int64 }

var windowMaxCodec = codec.Func(func(b []byte, m windowMax) []byte {
	return binary.AppendVarint(binary.AppendVarint(b, m.Price), m.End)
}, func(src []byte) (windowMax, int, error) {
	d := decoder{src: src}
	v := windowMax{Price: d.int(), End: d.int()}
	return v, d.n, d.err
})

// maxPrice is the highest price of bids.
type maxPrice struct{}

func (maxPrice) CreateAccumulator() int64   { return math.MinInt64 }
func (maxPrice) Add(b Bid, acc int64) int64 { return max(acc, b.Price) }
func (maxPrice) GetResult(acc int64) int64  { return acc }
func (maxPrice) Merge(a, b int64) int64     { return max(a, b) }

// Q7 finds the highest bids of every 10 s window:
//
//	SELECT B.auction, B.bidder, B.price, B.dateTime, B.extra
//	FROM bid B JOIN (
//	  SELECT MAX(price) AS maxprice, window_end AS dateTime
//	  FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(dateTime), INTERVAL '10' SECOND))
//	  GROUP BY window_start, window_end) B1
//	ON B.price = B1.maxprice
//	WHERE B.dateTime BETWEEN B1.dateTime - INTERVAL '10' SECOND AND B1.dateTime
//
// The window maximum is computed in two steps (per auction, then per
// window) and joined with the bids by an interval join keyed by price, so
// state lasts only as long as a window and the watermark delay. As in the
// SQL, the interval includes both ends: a bid at the very end of a window
// (the next window's first millisecond) also matches that window's
// maximum if its price equals it.
//
// One difference in the plan, not in the result: before the join, a
// filter chained to the bids drops every bid whose price is below an
// earlier bid of the same window on the same subtask, since such a bid
// can never equal the window's maximum (bids at a window's first
// millisecond, which also belong to the previous window's interval, are
// always kept). Flink's plan buffers every bid in the join for up to 10 s
// of event time; with the filter the join holds a few bids per window.
// The filter's state is a running maximum per recent window, kept in
// memory: after a restore it starts empty and lets more bids through,
// which changes nothing in the result. (One version of the SQL selects
// B.price into bidder and B.bidder into price; the columns here hold
// what their names say.)
func Q7(events *weir.DataStream[Event]) *weir.DataStream[Q7Result] {
	bids := selectBids(events, "Q7 bids", func(b *Bid) (Bid, bool) {
		return Bid{Auction: b.Auction, Bidder: b.Bidder, Price: b.Price, DateTime: b.DateTime, Extra: b.Extra}, true
	}).WithCodec(BidCodec())
	candidates := weir.ProcessEach(bids, func() weir.ProcessFunction[Bid, Bid] { return &q7Candidates{maxes: map[int64]int64{}} }).
		Name("Q7 candidates").WithCodec(BidCodec())
	partial := weir.AggregateWindows(weir.Window(weir.KeyBy(bids, bidAuction), weir.TumblingEventTimeWindows(q7Window)),
		maxPrice{}, codec.Int64(), func(_ int64, w weir.TimeWindow, p int64) windowMax { return windowMax{Price: p, End: w.End} }).
		Name("Q7 max per auction").WithCodec(windowMaxCodec)
	// partial carries its windows' max timestamps, so it falls into the
	// same windows again.
	maxes := weir.Reduce(weir.Window(weir.KeyBy(partial, func(m windowMax) int64 { return m.End }), weir.TumblingEventTimeWindows(q7Window)),
		func(a, b windowMax) windowMax {
			if b.Price > a.Price {
				return b
			}
			return a
		}).Name("Q7 max").WithCodec(windowMaxCodec)
	// A maximum carries its window's max timestamp, End - 1: a bid at ts
	// is in [End - 10 s, End] exactly when End - 1 is in
	// [ts - 1 ms, ts + 10 s - 1 ms].
	return weir.IntervalJoin(weir.KeyBy(candidates, func(b Bid) int64 { return b.Price }), weir.KeyBy(maxes, func(m windowMax) int64 { return m.Price }),
		-time.Millisecond, q7Window-time.Millisecond,
		func(b Bid, _ windowMax, out weir.Collector[Q7Result]) {
			out.Collect(Q7Result{Auction: b.Auction, Bidder: b.Bidder, Price: b.Price, DateTime: b.DateTime, Extra: b.Extra})
		}).Name("Q7 join")
}

// q7Candidates passes on the bids that may still be the highest of their
// window: those not below the highest price this subtask has seen in the
// window so far, and every bid at a window's first millisecond.
type q7Candidates struct {
	maxes  map[int64]int64 // window start -> highest price seen
	latest int64           // the latest window start seen
}

func (q *q7Candidates) ProcessElement(ctx *weir.Context[Bid], b Bid) error {
	w := b.DateTime - mod(b.DateTime, q7Window.Milliseconds())
	if w == b.DateTime {
		ctx.Emit(b)
		return nil
	}
	if m, ok := q.maxes[w]; ok && b.Price < m {
		return nil
	}
	q.maxes[w] = b.Price
	if w > q.latest {
		q.latest = w
		// Forget windows well behind: dropping a maximum only lets more
		// bids through.
		for old := range q.maxes {
			if old < w-2*q7Window.Milliseconds() {
				delete(q.maxes, old)
			}
		}
	}
	ctx.Emit(b)
	return nil
}

// NewUser is q8's result: a person who created an auction in the 10 s
// window in which they registered, and the window's start (Unix ms).
type NewUser struct {
	ID        int64  `json:"id"`
	Name      string `json:"name"`
	StartTime int64  `json:"stime"`
}

// Q8 monitors new users:
//
//	SELECT P.id, P.name, P.starttime
//	FROM (SELECT id, name, window_start AS starttime, window_end AS endtime
//	      FROM TABLE(TUMBLE(TABLE person, DESCRIPTOR(dateTime), INTERVAL '10' SECOND))
//	      GROUP BY id, name, window_start, window_end) P
//	JOIN (SELECT seller, window_start AS starttime, window_end AS endtime
//	      FROM TABLE(TUMBLE(TABLE auction, DESCRIPTOR(dateTime), INTERVAL '10' SECOND))
//	      GROUP BY seller, window_start, window_end) A
//	ON P.id = A.seller AND P.starttime = A.starttime AND P.endtime = A.endtime
//
// A window co-group keyed by person id and seller over tumbling 10 s
// windows: both sides are grouped (made distinct) per window, so a key's
// window gives one row per distinct name if it has at least one auction,
// however many auctions or person rows it has. The result column is
// stime, the sink's name for the SELECT's starttime.
func Q8(events *weir.DataStream[Event]) *weir.DataStream[NewUser] {
	persons := selectPersons(events, "Q8 persons", func(p *Person) (Person, bool) { return Person{ID: p.ID, Name: p.Name}, true })
	auctions := selectAuctions(events, "Q8 auctions", func(a *Auction) (Auction, bool) { return Auction{Seller: a.Seller}, true })
	w := weir.Join(weir.KeyBy(persons, personID), weir.KeyBy(auctions, auctionSeller)).Window(weir.TumblingEventTimeWindows(q8Window))
	return weir.CoGroupApply(w, func(id int64, win weir.TimeWindow, ps []Person, as []Auction, out weir.Collector[NewUser]) {
		if len(as) == 0 {
			return
		}
		for i, p := range ps {
			if !containsName(ps[:i], p.Name) {
				out.Collect(NewUser{ID: id, Name: p.Name, StartTime: win.Start})
			}
		}
	}).Name("Q8 join")
}

// containsName reports whether a person in ps has the name.
func containsName(ps []Person, name string) bool {
	for _, p := range ps {
		if p.Name == name {
			return true
		}
	}
	return false
}
