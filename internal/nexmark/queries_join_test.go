package nexmark_test

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sort"
	"testing"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/internal/nexmark"
	"github.com/weirstream/weir/source"
)

// The join queries are checked against brute-force evaluations of their
// SQL over the same generated events. The helpers here are prefixed with
// join so that they stay apart from the other query tests' helpers.

// joinConfig spreads 30 000 events over 150 s of event time: 15 windows
// of q7 and q8, and auctions that last 8 s on average, so that windows
// fire and auctions expire many times during a run.
func joinConfig() nexmark.Config {
	return nexmark.Config{Events: 30_000, Seed: 11, FirstEventRate: 200}
}

// joinRun runs query q over joinConfig's events at parallelism p and
// returns its rows in arrival order.
func joinRun[T any](t *testing.T, p int, q func(*weir.DataStream[nexmark.Event]) *weir.DataStream[T]) []T {
	t.Helper()
	env := weir.NewEnvironment(weir.Options{Parallelism: p, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	sink := &collect[T]{}
	weir.SinkTo(q(nexmark.Events(env, joinConfig())), sink)
	if err := env.Execute(context.Background(), "nexmark-join-test"); err != nil {
		t.Fatal(err)
	}
	return sink.out
}

// joinRender renders rows as sorted strings: a multiset.
func joinRender[T any](rows []T) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = fmt.Sprintf("%+v", r)
	}
	sort.Strings(out)
	return out
}

// joinFinal keeps the last row per RowKey of an updating query's rows in
// arrival order: one subtask emits all versions of a key, in order, and
// the sink is chained to it.
func joinFinal[T nexmark.Updating](rows []T) []string {
	last := map[string]T{}
	for _, r := range rows {
		last[r.RowKey()] = r
	}
	out := make([]T, 0, len(last))
	for _, r := range last {
		out = append(out, r)
	}
	return joinRender(out)
}

func joinCheck(t *testing.T, name string, got, want []string) {
	t.Helper()
	if len(want) == 0 {
		t.Fatalf("%s: the reference is empty; the test input exercises nothing", name)
	}
	if !slices.Equal(got, want) {
		var missing, extra []string
		g, w := slices.Clone(got), slices.Clone(want)
		for len(g) > 0 || len(w) > 0 {
			switch {
			case len(w) == 0 || len(g) > 0 && g[0] < w[0]:
				extra, g = append(extra, g[0]), g[1:]
			case len(g) == 0 || w[0] < g[0]:
				missing, w = append(missing, w[0]), w[1:]
			default:
				g, w = g[1:], w[1:]
			}
		}
		t.Fatalf("%s: %d rows, reference %d; %d missing (first %v), %d extra (first %v)", name, len(got), len(want),
			len(missing), missing[:min(len(missing), 3)], len(extra), extra[:min(len(extra), 3)])
	}
}

// joinRelations are the generated events as the SQL's three tables.
type joinRelations struct {
	persons  []nexmark.Person
	auctions []nexmark.Auction
	bids     []nexmark.Bid
}

func joinTables() joinRelations {
	c := joinConfig()
	var r joinRelations
	for i := range c.Events {
		switch e := nexmark.Generate(c, i); e.Kind {
		case nexmark.KindPerson:
			r.persons = append(r.persons, *e.Person)
		case nexmark.KindAuction:
			r.auctions = append(r.auctions, *e.Auction)
		case nexmark.KindBid:
			r.bids = append(r.bids, *e.Bid)
		}
	}
	return r
}

func joinFloor(ts, size int64) int64 { return ts - ((ts%size)+size)%size }

// joinRefQ3: auction JOIN person ON seller = id, category 10, state in
// OR, ID, CA.
func joinRefQ3(r joinRelations) []nexmark.Q3Result {
	var out []nexmark.Q3Result
	for _, a := range r.auctions {
		for _, p := range r.persons {
			if a.Seller == p.ID && a.Category == 10 && (p.State == "OR" || p.State == "ID" || p.State == "CA") {
				out = append(out, nexmark.Q3Result{Name: p.Name, City: p.City, State: p.State, ID: a.ID})
			}
		}
	}
	return out
}

// joinLifetimeBids returns, per auction id, the bids placed within the
// auction's lifetime (B.dateTime BETWEEN A.dateTime AND A.expires).
func joinLifetimeBids(r joinRelations) map[int64][]nexmark.Bid {
	byAuction := map[int64][]nexmark.Bid{}
	for _, b := range r.bids {
		byAuction[b.Auction] = append(byAuction[b.Auction], b)
	}
	out := map[int64][]nexmark.Bid{}
	for _, a := range r.auctions {
		for _, b := range byAuction[a.ID] {
			if b.DateTime >= a.DateTime && b.DateTime <= a.Expires {
				out[a.ID] = append(out[a.ID], b)
			}
		}
	}
	return out
}

// joinRefQ4: MAX(price) per auction over its lifetime bids, then the
// integer AVG per category.
func joinRefQ4(r joinRelations) []nexmark.CategoryPrice {
	lifetime := joinLifetimeBids(r)
	sum, n := map[int64]int64{}, map[int64]int64{}
	for _, a := range r.auctions {
		bs := lifetime[a.ID]
		if len(bs) == 0 {
			continue
		}
		best := bs[0].Price
		for _, b := range bs {
			best = max(best, b.Price)
		}
		sum[a.Category] += best
		n[a.Category]++
	}
	var out []nexmark.CategoryPrice
	for c := range sum {
		out = append(out, nexmark.CategoryPrice{Category: c, AvgPrice: sum[c] / n[c]})
	}
	return out
}

// joinRefQ9: per auction the first of its lifetime bids ordered by price
// descending, then time ascending (then bidder, as winnerOrder breaks the
// SQL's ties).
func joinRefQ9(r joinRelations) []nexmark.Q9Result {
	lifetime := joinLifetimeBids(r)
	var out []nexmark.Q9Result
	for _, a := range r.auctions {
		bs := lifetime[a.ID]
		if len(bs) == 0 {
			continue
		}
		b := slices.MinFunc(bs, func(x, y nexmark.Bid) int {
			return cmp.Or(cmp.Compare(y.Price, x.Price), cmp.Compare(x.DateTime, y.DateTime), cmp.Compare(x.Bidder, y.Bidder))
		})
		out = append(out, nexmark.Q9Result{ID: a.ID, ItemName: a.ItemName, Description: a.Description,
			InitialBid: a.InitialBid, Reserve: a.Reserve, DateTime: a.DateTime, Expires: a.Expires, Seller: a.Seller,
			Category: a.Category, Extra: a.Extra, Auction: b.Auction, Bidder: b.Bidder, Price: b.Price,
			BidDateTime: b.DateTime, BidExtra: b.Extra})
	}
	return out
}

// joinRefQ7: bid JOIN (MAX(price), window_end per 10 s tumbling window) ON
// price = maxprice AND dateTime BETWEEN window_end - 10 s AND window_end.
// It also returns how many windows had bids.
func joinRefQ7(r joinRelations) ([]nexmark.Q7Result, int) {
	maxOf := map[int64]int64{} // window end -> max price
	for _, b := range r.bids {
		end := joinFloor(b.DateTime, 10_000) + 10_000
		if m, ok := maxOf[end]; !ok || b.Price > m {
			maxOf[end] = b.Price
		}
	}
	var out []nexmark.Q7Result
	for end, m := range maxOf {
		for _, b := range r.bids {
			if b.Price == m && b.DateTime >= end-10_000 && b.DateTime <= end {
				out = append(out, nexmark.Q7Result{Auction: b.Auction, Bidder: b.Bidder, Price: b.Price, DateTime: b.DateTime, Extra: b.Extra})
			}
		}
	}
	return out, len(maxOf)
}

// joinRefQ8: distinct (id, name, window) of persons JOIN distinct
// (seller, window) of auctions ON id = seller and equal windows.
func joinRefQ8(r joinRelations) []nexmark.NewUser {
	type pw struct {
		id    int64
		name  string
		start int64
	}
	type sw struct{ seller, start int64 }
	ps, as := map[pw]bool{}, map[sw]bool{}
	for _, p := range r.persons {
		ps[pw{p.ID, p.Name, joinFloor(p.DateTime, 10_000)}] = true
	}
	for _, a := range r.auctions {
		as[sw{a.Seller, joinFloor(a.DateTime, 10_000)}] = true
	}
	var out []nexmark.NewUser
	for p := range ps {
		if as[sw{p.id, p.start}] {
			out = append(out, nexmark.NewUser{ID: p.id, Name: p.name, StartTime: p.start})
		}
	}
	return out
}

// joinRefQ20: bid JOIN auction ON auction = id, category 10.
func joinRefQ20(r joinRelations) []nexmark.Q20Result {
	auctions := map[int64][]nexmark.Auction{}
	for _, a := range r.auctions {
		if a.Category == 10 {
			auctions[a.ID] = append(auctions[a.ID], a)
		}
	}
	var out []nexmark.Q20Result
	for _, b := range r.bids {
		for _, a := range auctions[b.Auction] {
			out = append(out, nexmark.Q20Result{Auction: b.Auction, Bidder: b.Bidder, Price: b.Price, Channel: b.Channel,
				URL: b.URL, BidDateTime: b.DateTime, BidExtra: b.Extra, ItemName: a.ItemName, Description: a.Description,
				InitialBid: a.InitialBid, Reserve: a.Reserve, AuctionDateTime: a.DateTime, Expires: a.Expires,
				Seller: a.Seller, Category: a.Category, AuctionExtra: a.Extra})
		}
	}
	return out
}

// The join queries match brute-force evaluations of their SQL at
// parallelism 1 and 3. At 3 every subtask generates a contiguous range of
// events, so bids reach the joins before their auctions and the windows'
// inputs interleave out of event-time order.
func TestJoinQueriesMatchReference(t *testing.T) {
	r := joinTables()
	q7, q7Windows := joinRefQ7(r)
	if q7Windows < 2 {
		t.Fatalf("q7: bids in %d windows; the test needs several", q7Windows)
	}
	q8 := joinRefQ8(r)
	q8Windows := map[int64]bool{}
	for _, u := range q8 {
		q8Windows[u.StartTime] = true
	}
	if len(q8Windows) < 2 {
		t.Fatalf("q8: results in %d windows; the test needs several", len(q8Windows))
	}
	ref := map[string][]string{
		"q3":  joinRender(joinRefQ3(r)),
		"q4":  joinRender(joinRefQ4(r)),
		"q7":  joinRender(q7),
		"q8":  joinRender(q8),
		"q9":  joinRender(joinRefQ9(r)),
		"q20": joinRender(joinRefQ20(r)),
	}
	for name, rows := range ref {
		t.Logf("%s: %d reference rows", name, len(rows))
	}
	for _, p := range []int{1, 3} {
		t.Run(fmt.Sprintf("p%d", p), func(t *testing.T) {
			joinCheck(t, "q3", joinRender(joinRun(t, p, nexmark.Q3)), ref["q3"])
			joinCheck(t, "q4", joinFinal(joinRun(t, p, nexmark.Q4)), ref["q4"])
			joinCheck(t, "q7", joinRender(joinRun(t, p, nexmark.Q7)), ref["q7"])
			joinCheck(t, "q8", joinRender(joinRun(t, p, nexmark.Q8)), ref["q8"])
			joinCheck(t, "q9", joinRender(joinRun(t, p, nexmark.Q9)), ref["q9"])
			joinCheck(t, "q20", joinRender(joinRun(t, p, nexmark.Q20)), ref["q20"])
		})
	}
}

// joinRunEvents runs q at parallelism 1 over evs, in that order, with the
// timestamps and watermarks of Events, and returns its rows in arrival
// order.
func joinRunEvents[T any](t *testing.T, evs []nexmark.Event, q func(*weir.DataStream[nexmark.Event]) *weir.DataStream[T]) []T {
	t.Helper()
	env := weir.NewEnvironment(weir.Options{Parallelism: 1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	src := weir.FromSource(env, source.Collection(evs...)).WithCodec(nexmark.EventCodec())
	in := weir.AssignTimestampsAndWatermarks(src, weir.BoundedOutOfOrderness(nexmark.WatermarkDelay, nexmark.Event.Timestamp)).
		WithCodec(nexmark.EventCodec())
	sink := &collect[T]{}
	weir.SinkTo(q(in), sink)
	if err := env.Execute(context.Background(), "nexmark-join-edges"); err != nil {
		t.Fatal(err)
	}
	return sink.out
}

func person(id int64, name, state string, ts int64) nexmark.Event {
	return nexmark.Event{Kind: nexmark.KindPerson, Person: &nexmark.Person{ID: id, Name: name, State: state, DateTime: ts}}
}

func auction(id, seller, category, ts, expires int64) nexmark.Event {
	return nexmark.Event{Kind: nexmark.KindAuction, Auction: &nexmark.Auction{ID: id, Seller: seller, Category: category, DateTime: ts, Expires: expires}}
}

func bid(auction, bidder, price, ts int64) nexmark.Event {
	return nexmark.Event{Kind: nexmark.KindBid, Bid: &nexmark.Bid{Auction: auction, Bidder: bidder, Price: price, DateTime: ts}}
}

// The join queries at the edges the generated events rarely reach: a side
// that comes before the other, the bounds of windows and lifetimes
// (inclusive in the SQL), ties, duplicates.
func TestJoinQueriesEdgeCases(t *testing.T) {
	t.Run("q3", func(t *testing.T) {
		evs := []nexmark.Event{
			auction(1, 7, 10, 100, 5000), // before its seller
			person(7, "ann", "OR", 200),
			auction(2, 7, 11, 300, 5000), // not category 10
			person(8, "bob", "WA", 400),
			auction(3, 8, 10, 500, 5000), // seller not in OR, ID, CA
			auction(4, 7, 10, 600, 5000),
		}
		want := joinRender([]nexmark.Q3Result{{Name: "ann", State: "OR", ID: 1}, {Name: "ann", State: "OR", ID: 4}})
		joinCheck(t, "q3", joinRender(joinRunEvents(t, evs, nexmark.Q3)), want)
	})
	// Auction 1 lives [1000, 3000], auction 2 [1500, 2000]; both in
	// category 10.
	lifetimes := []nexmark.Event{
		bid(1, 50, 5, 2000), // before its auction
		auction(1, 7, 10, 1000, 3000),
		bid(1, 51, 5, 1000),   // at the start
		bid(1, 52, 8, 3000),   // at the expiry
		bid(1, 53, 8, 2500),   // ties on price, earlier: wins
		bid(1, 54, 100, 999),  // before the start
		bid(1, 55, 100, 3001), // after the expiry
		auction(2, 7, 10, 1500, 2000),
		bid(2, 56, 5, 1600),
		bid(2, 57, 99, 2001), // after the expiry
		bid(3, 58, 99, 2100), // no such auction
	}
	t.Run("q4", func(t *testing.T) {
		want := joinRender([]nexmark.CategoryPrice{{Category: 10, AvgPrice: (8 + 5) / 2}})
		joinCheck(t, "q4", joinFinal(joinRunEvents(t, lifetimes, nexmark.Q4)), want)
	})
	t.Run("q9", func(t *testing.T) {
		want := joinRender([]nexmark.Q9Result{
			{ID: 1, DateTime: 1000, Expires: 3000, Seller: 7, Category: 10, Auction: 1, Bidder: 53, Price: 8, BidDateTime: 2500},
			{ID: 2, DateTime: 1500, Expires: 2000, Seller: 7, Category: 10, Auction: 2, Bidder: 56, Price: 5, BidDateTime: 1600},
		})
		joinCheck(t, "q9", joinRender(joinRunEvents(t, lifetimes, nexmark.Q9)), want)
	})
	t.Run("q20", func(t *testing.T) {
		evs := []nexmark.Event{
			bid(1, 50, 5, 900), // before its auction
			auction(1, 7, 10, 1000, 3000),
			bid(1, 51, 6, 5000), // after the expiry: q20 does not care
			auction(2, 7, 11, 1000, 3000),
			bid(2, 52, 7, 1100), // category 11
		}
		want := joinRender([]nexmark.Q20Result{
			{Auction: 1, Bidder: 50, Price: 5, BidDateTime: 900, AuctionDateTime: 1000, Expires: 3000, Seller: 7, Category: 10},
			{Auction: 1, Bidder: 51, Price: 6, BidDateTime: 5000, AuctionDateTime: 1000, Expires: 3000, Seller: 7, Category: 10},
		})
		joinCheck(t, "q20", joinRender(joinRunEvents(t, evs, nexmark.Q20)), want)
	})
	t.Run("q7", func(t *testing.T) {
		evs := []nexmark.Event{
			bid(1, 50, 7, 0),      // window [0, 10s): max 7, at its start
			bid(1, 51, 7, 5000),   // a tie
			bid(1, 52, 7, 10_000), // [10s, 20s) at its start; at [0, 10s)'s end, equal to its max
			bid(1, 53, 9, 15_000), // [10s, 20s): max 9
			bid(1, 54, 9, 20_000), // [20s, 30s): max 9, and at [10s, 20s)'s end with its max
			bid(1, 55, 3, 25_000),
		}
		row := func(b nexmark.Event) nexmark.Q7Result {
			return nexmark.Q7Result{Auction: 1, Bidder: b.Bid.Bidder, Price: b.Bid.Price, DateTime: b.Bid.DateTime}
		}
		want := joinRender([]nexmark.Q7Result{row(evs[0]), row(evs[1]), row(evs[2]), row(evs[3]), row(evs[4]), row(evs[4])})
		joinCheck(t, "q7", joinRender(joinRunEvents(t, evs, nexmark.Q7)), want)
	})
	t.Run("q8", func(t *testing.T) {
		evs := []nexmark.Event{
			person(7, "ann", "OR", 9_999),
			auction(1, 7, 10, 10_000, 20_000), // the next window
			person(8, "bob", "OR", 10_500),
			person(8, "bob", "OR", 11_000), // the same row again
			person(8, "bo", "OR", 11_500),  // another name
			auction(2, 8, 10, 12_000, 20_000),
			auction(3, 8, 10, 19_999, 30_000),
			person(9, "cy", "OR", 21_000), // no auction
		}
		want := joinRender([]nexmark.NewUser{{ID: 8, Name: "bob", StartTime: 10_000}, {ID: 8, Name: "bo", StartTime: 10_000}})
		joinCheck(t, "q8", joinRender(joinRunEvents(t, evs, nexmark.Q8)), want)
	})
}
