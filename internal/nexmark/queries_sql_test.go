package nexmark_test

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/internal/nexmark"
)

// sqlConfig is testConfig starting a minute before midnight, so that the
// 150 s of test events span two days for the daily statistics (q15-q17).
func sqlConfig() nexmark.Config {
	c := testConfig()
	c.BaseTime = time.Date(2026, 1, 1, 23, 59, 0, 0, time.UTC).UnixMilli()
	return c
}

// sqlCase is a query and a brute-force evaluation of its SQL over the
// bids: rendered reference rows, and the number of windows or groups the
// reference has (checked to be above 1 where minGroups says so).
type sqlCase struct {
	name      string
	run       func(t *testing.T, p int) []string
	ref       func(bs []nexmark.Bid) (rows []string, groups int)
	minGroups int
}

// appendOnly is the case of a query whose result only grows: weir's rows
// must be the reference rows, as a multiset.
func appendOnly[T any](name string, q func(*weir.DataStream[nexmark.Event]) *weir.DataStream[T],
	ref func([]nexmark.Bid) ([]T, int), minGroups int) sqlCase {
	return sqlCase{
		name: name,
		run: func(t *testing.T, p int) []string {
			return render(runRawOn(t, p, sqlConfig(), q))
		},
		ref: func(bs []nexmark.Bid) ([]string, int) {
			rows, n := ref(bs)
			return render(rows), n
		},
		minGroups: minGroups,
	}
}

// updating is the case of a query whose result rows update: weir's last
// row per RowKey must be the reference's row of that key. Each key's
// updates come from one subtask, which emits them in order to the sink
// chained to it, so the last row of a key to arrive is its final one.
func updating[T nexmark.Updating](name string, q func(*weir.DataStream[nexmark.Event]) *weir.DataStream[T],
	ref func([]nexmark.Bid) ([]T, int), minGroups int) sqlCase {
	return sqlCase{
		name: name,
		run: func(t *testing.T, p int) []string {
			rows := runRawOn(t, p, sqlConfig(), q)
			last := map[string]T{}
			for _, r := range rows {
				last[r.RowKey()] = r
			}
			if len(last) == len(rows) {
				t.Errorf("%s: no row was ever updated; the test input exercises no update", name)
			}
			var out []T
			for _, r := range last {
				out = append(out, r)
			}
			return render(out)
		},
		ref: func(bs []nexmark.Bid) ([]string, int) {
			rows, n := ref(bs)
			keys := map[string]bool{}
			for _, r := range rows {
				if keys[r.RowKey()] {
					panic(fmt.Sprintf("%s: reference has two rows of key %q", name, r.RowKey()))
				}
				keys[r.RowKey()] = true
			}
			return render(rows), n
		},
		minGroups: minGroups,
	}
}

func sqlCases() []sqlCase {
	return []sqlCase{
		appendOnly("q0", nexmark.Q0, refQ0, 0),
		appendOnly("q1", nexmark.Q1, refQ1, 0),
		appendOnly("q2", nexmark.Q2, refQ2, 0),
		appendOnly("q5", nexmark.Q5, refQ5, 2),
		appendOnly("q11", nexmark.Q11, refQ11, 2),
		appendOnly("q13", nexmark.Q13, refQ13, 0),
		appendOnly("q14", nexmark.Q14, refQ14, 0),
		updating("q15", nexmark.Q15, refQ15, 2),
		updating("q16", nexmark.Q16, refQ16, 2),
		updating("q17", nexmark.Q17, refQ17, 2),
		updating("q18", nexmark.Q18, refQ18, 2),
		updating("q19", nexmark.Q19, refQ19, 2),
		appendOnly("q21", nexmark.Q21, refQ21, 0),
		appendOnly("q22", nexmark.Q22, refQ22, 0),
	}
}

// The queries written after Flink's SQL match a brute-force evaluation of
// that SQL over the same generated events, at parallelism 1 and 3. (q12,
// on processing time, is TestQ12ProcessingTimeWindows.)
func TestQueriesMatchSQLReference(t *testing.T) {
	bs := bids(eventsOf(sqlConfig()))
	cases := sqlCases()
	refs := make([][]string, len(cases))
	for i, c := range cases {
		var groups int
		refs[i], groups = c.ref(bs)
		if len(refs[i]) == 0 {
			t.Fatalf("%s: the reference is empty; the test input exercises nothing", c.name)
		}
		if c.minGroups > 0 && groups < c.minGroups {
			t.Fatalf("%s: the reference has %d windows or groups, want at least %d", c.name, groups, c.minGroups)
		}
	}
	for _, p := range []int{1, 3} {
		t.Run(fmt.Sprintf("p%d", p), func(t *testing.T) {
			for i, c := range cases {
				check(t, c.name, c.run(t, p), refs[i])
			}
		})
	}
}

func refQ0(bs []nexmark.Bid) ([]nexmark.PassThroughBid, int) {
	var out []nexmark.PassThroughBid
	for _, b := range bs {
		out = append(out, nexmark.PassThroughBid{Auction: b.Auction, Bidder: b.Bidder, Price: b.Price, DateTime: b.DateTime, Extra: b.Extra})
	}
	return out, 0
}

func refQ1(bs []nexmark.Bid) ([]nexmark.EuroBid, int) {
	var out []nexmark.EuroBid
	for _, b := range bs {
		// 0.908 * price, exactly, in thousandths.
		out = append(out, nexmark.EuroBid{Auction: b.Auction, Bidder: b.Bidder, Price: nexmark.Decimal3(908 * b.Price), DateTime: b.DateTime, Extra: b.Extra})
	}
	return out, 0
}

func refQ2(bs []nexmark.Bid) ([]nexmark.AuctionPrice, int) {
	var out []nexmark.AuctionPrice
	for _, b := range bs {
		if b.Auction%123 == 0 {
			out = append(out, nexmark.AuctionPrice{Auction: b.Auction, Price: b.Price})
		}
	}
	return out, 0
}

// refQ5: the count of bids per auction and HOP window (10 s every 2 s),
// joined with the windows' largest count.
func refQ5(bs []nexmark.Bid) ([]nexmark.HotItem, int) {
	counts := map[[2]int64]int64{} // auction, window end
	for _, b := range bs {
		for end := floorWindow(b.DateTime, 2000) + 2000; end-10_000 <= b.DateTime; end += 2000 {
			counts[[2]int64{b.Auction, end}]++
		}
	}
	maxOf := map[int64]int64{}
	for k, n := range counts {
		maxOf[k[1]] = max(maxOf[k[1]], n)
	}
	var out []nexmark.HotItem
	for k, n := range counts {
		if n >= maxOf[k[1]] {
			out = append(out, nexmark.HotItem{Auction: k[0], Num: n})
		}
	}
	return out, len(maxOf)
}

// refQ11: each bidder's sessions, bids less than 10 s apart, from the
// first bid to 10 s after the last. The groups are the sessions beyond a
// bidder's first: sessions that ended while the input went on.
func refQ11(bs []nexmark.Bid) ([]nexmark.BidderCount, int) {
	times := map[int64][]int64{}
	for _, b := range bs {
		times[b.Bidder] = append(times[b.Bidder], b.DateTime)
	}
	var out []nexmark.BidderCount
	for bidder, ts := range times {
		slices.Sort(ts)
		start, last, n := ts[0], ts[0], int64(1)
		for _, x := range ts[1:] {
			// Session windows [t, t+gap) that touch merge, as in Flink.
			if x-last > 10_000 {
				out = append(out, nexmark.BidderCount{Bidder: bidder, BidCount: n, StartTime: start, EndTime: last + 10_000})
				start, n = x, 0
			}
			last = x
			n++
		}
		out = append(out, nexmark.BidderCount{Bidder: bidder, BidCount: n, StartTime: start, EndTime: last + 10_000})
	}
	return out, len(out) - len(times)
}

func refQ13(bs []nexmark.Bid) ([]nexmark.EnrichedBid, int) {
	var out []nexmark.EnrichedBid
	for _, b := range bs {
		// side_input holds (k, "k") for 0 <= k < 10000.
		out = append(out, nexmark.EnrichedBid{Auction: b.Auction, Bidder: b.Bidder, Price: b.Price, DateTime: b.DateTime,
			Value: strconv.FormatInt(b.Auction%10000, 10)})
	}
	return out, 0
}

func refBidTimeType(ts int64) string {
	h := time.UnixMilli(ts).UTC().Hour()
	if h >= 8 && h <= 18 {
		return "dayTime"
	}
	if h <= 6 || h >= 20 {
		return "nightTime"
	}
	return "otherTime"
}

func refQ14(bs []nexmark.Bid) ([]nexmark.ClassifiedBid, int) {
	var out []nexmark.ClassifiedBid
	for _, b := range bs {
		euros := 908 * b.Price // thousandths
		if euros <= 1_000_000_000 || euros >= 50_000_000_000 {
			continue
		}
		c := int64(0)
		for i := range len(b.Extra) {
			if b.Extra[i] == 'c' {
				c++
			}
		}
		out = append(out, nexmark.ClassifiedBid{Auction: b.Auction, Bidder: b.Bidder, Price: nexmark.Decimal3(euros),
			BidTimeType: refBidTimeType(b.DateTime), DateTime: b.DateTime, Extra: b.Extra, CCounts: c})
	}
	return out, 0
}

func refDay(ts int64) string { return time.UnixMilli(ts).UTC().Format("2006-01-02") }

// refRank is the price level of the FILTER clauses, 0 for none.
func refRank(price int64, r int) bool {
	switch r {
	case 1:
		return price < 10000
	case 2:
		return price >= 10000 && price < 1000000
	case 3:
		return price >= 1000000
	}
	return true
}

// refDistinct evaluates q15's and q16's counts over a group's bids.
func refDistinct(bs []nexmark.Bid) nexmark.DistinctCounts {
	var bids [4]int64
	var bidders, auctions [4]map[int64]bool
	for r := range 4 {
		bidders[r], auctions[r] = map[int64]bool{}, map[int64]bool{}
		for _, b := range bs {
			if refRank(b.Price, r) {
				bids[r]++
				bidders[r][b.Bidder] = true
				auctions[r][b.Auction] = true
			}
		}
	}
	return nexmark.DistinctCounts{
		BidCounts:    nexmark.BidCounts{TotalBids: bids[0], Rank1Bids: bids[1], Rank2Bids: bids[2], Rank3Bids: bids[3]},
		TotalBidders: int64(len(bidders[0])), Rank1Bidders: int64(len(bidders[1])), Rank2Bidders: int64(len(bidders[2])), Rank3Bidders: int64(len(bidders[3])),
		TotalAuctions: int64(len(auctions[0])), Rank1Auctions: int64(len(auctions[1])), Rank2Auctions: int64(len(auctions[2])), Rank3Auctions: int64(len(auctions[3])),
	}
}

// groupBids groups bids by key, in bid order.
func groupBids[K comparable](bs []nexmark.Bid, key func(nexmark.Bid) K) map[K][]nexmark.Bid {
	g := map[K][]nexmark.Bid{}
	for _, b := range bs {
		g[key(b)] = append(g[key(b)], b)
	}
	return g
}

func refQ15(bs []nexmark.Bid) ([]nexmark.DailyStats, int) {
	var out []nexmark.DailyStats
	for day, g := range groupBids(bs, func(b nexmark.Bid) string { return refDay(b.DateTime) }) {
		out = append(out, nexmark.DailyStats{Day: day, DistinctCounts: refDistinct(g)})
	}
	return out, len(out)
}

func refQ16(bs []nexmark.Bid) ([]nexmark.ChannelStats, int) {
	var out []nexmark.ChannelStats
	for k, g := range groupBids(bs, func(b nexmark.Bid) [2]string { return [2]string{b.Channel, refDay(b.DateTime)} }) {
		minute := ""
		for _, b := range g {
			minute = max(minute, time.UnixMilli(b.DateTime).UTC().Format("15:04"))
		}
		out = append(out, nexmark.ChannelStats{Channel: k[0], Day: k[1], Minute: minute, DistinctCounts: refDistinct(g)})
	}
	return out, len(out)
}

func refQ17(bs []nexmark.Bid) ([]nexmark.AuctionStats, int) {
	type key struct {
		auction int64
		day     string
	}
	var out []nexmark.AuctionStats
	for k, g := range groupBids(bs, func(b nexmark.Bid) key { return key{b.Auction, refDay(b.DateTime)} }) {
		c := refDistinct(g).BidCounts
		lo, hi, sum := g[0].Price, g[0].Price, int64(0)
		for _, b := range g {
			lo, hi, sum = min(lo, b.Price), max(hi, b.Price), sum+b.Price
		}
		out = append(out, nexmark.AuctionStats{Auction: k.auction, Day: k.day, BidCounts: c,
			MinPrice: lo, MaxPrice: hi, AvgPrice: sum / int64(len(g)), SumPrice: sum})
	}
	return out, len(out)
}

// refTieOrder is the documented order of bids that tie in q18 and q19:
// dateTime, price, bidder, auction, channel, url, extra.
func refTieOrder(a, b nexmark.Bid) int {
	return cmp.Or(cmp.Compare(a.DateTime, b.DateTime), cmp.Compare(a.Price, b.Price), cmp.Compare(a.Bidder, b.Bidder),
		cmp.Compare(a.Auction, b.Auction), strings.Compare(a.Channel, b.Channel), strings.Compare(a.URL, b.URL),
		strings.Compare(a.Extra, b.Extra))
}

// refQ18: per (bidder, auction), the row numbered 1 by dateTime DESC.
func refQ18(bs []nexmark.Bid) ([]nexmark.LastBid, int) {
	var out []nexmark.LastBid
	for _, g := range groupBids(bs, func(b nexmark.Bid) [2]int64 { return [2]int64{b.Bidder, b.Auction} }) {
		slices.SortFunc(g, func(a, b nexmark.Bid) int { return -refTieOrder(a, b) })
		out = append(out, nexmark.LastBid(g[0]))
	}
	return out, len(out)
}

// refQ19: per auction, the rows numbered 1 to 10 by price DESC.
func refQ19(bs []nexmark.Bid) ([]nexmark.RankedBid, int) {
	var out []nexmark.RankedBid
	for _, g := range groupBids(bs, func(b nexmark.Bid) int64 { return b.Auction }) {
		slices.SortFunc(g, func(a, b nexmark.Bid) int { return cmp.Or(cmp.Compare(b.Price, a.Price), refTieOrder(a, b)) })
		for i, b := range g[:min(len(g), 10)] {
			out = append(out, nexmark.RankedBid{Bid: b, RankNumber: int64(i + 1)})
		}
	}
	return out, len(out)
}

// refChannelID is REGEXP_EXTRACT(url, '(&|^)channel_id=([^&]*)', 2): the
// value of the first channel_id= at the start or after an &.
func refChannelID(url string) (string, bool) {
	const p = "channel_id="
	for i := 0; i+len(p) <= len(url); i++ {
		if url[i:i+len(p)] == p && (i == 0 || url[i-1] == '&') {
			v := url[i+len(p):]
			if j := strings.IndexByte(v, '&'); j >= 0 {
				v = v[:j]
			}
			return v, true
		}
	}
	return "", false
}

func refQ21(bs []nexmark.Bid) ([]nexmark.ChannelBid, int) {
	named := map[string]string{"apple": "0", "google": "1", "facebook": "2", "baidu": "3"}
	var out []nexmark.ChannelBid
	for _, b := range bs {
		extracted, ok := refChannelID(b.URL)
		id, isNamed := named[strings.ToLower(b.Channel)]
		if !ok && !isNamed {
			continue
		}
		if !isNamed {
			id = extracted
		}
		out = append(out, nexmark.ChannelBid{Auction: b.Auction, Bidder: b.Bidder, Price: b.Price, Channel: b.Channel, ChannelID: id})
	}
	return out, 0
}

func refQ22(bs []nexmark.Bid) ([]nexmark.URLDirs, int) {
	field := func(url string, i int) *string {
		f := strings.Split(url, "/")
		if i >= len(f) {
			return nil
		}
		return &f[i]
	}
	var out []nexmark.URLDirs
	for _, b := range bs {
		out = append(out, nexmark.URLDirs{Auction: b.Auction, Bidder: b.Bidder, Price: b.Price, Channel: b.Channel,
			Dir1: field(b.URL, 3), Dir2: field(b.URL, 4), Dir3: field(b.URL, 5)})
	}
	return out, 0
}

// q14's CASE over the hour of the day, for every hour (the test events
// span two hours only).
func TestBidTimeType(t *testing.T) {
	for h := range 24 {
		ts := time.Date(2026, 1, 1, h, 30, 0, 0, time.UTC).UnixMilli()
		if got, want := nexmark.BidTimeType(ts), refBidTimeType(ts); got != want {
			t.Errorf("hour %d: %s, want %s", h, got, want)
		}
	}
}

// SPLIT_INDEX as Flink's: 0-based, empty fields kept, NULL past the last
// field and for the empty string.
func TestSplitIndex(t *testing.T) {
	null := "NULL"
	for _, c := range []struct {
		s    string
		i    int
		want string
	}{
		{"https://www.nexmark.com/xyz/abc/item.htm", 0, "https:"},
		{"https://www.nexmark.com/xyz/abc/item.htm", 1, ""},
		{"https://www.nexmark.com/xyz/abc/item.htm", 3, "xyz"},
		{"https://www.nexmark.com/xyz/abc/item.htm", 5, "item.htm"},
		{"https://www.nexmark.com/xyz/abc/item.htm", 6, null},
		{"a/", 1, ""},
		{"a", 0, "a"},
		{"", 0, null},
		{"a/b", -1, null},
	} {
		got := null
		if p := nexmark.SplitIndex(c.s, "/", c.i); p != nil {
			got = *p
		}
		if got != c.want {
			t.Errorf("SPLIT_INDEX(%q, '/', %d) = %q, want %q", c.s, c.i, got, c.want)
		}
	}
}

// DECIMAL(23, 3) values render exactly, with three fractional digits.
func TestDecimal3(t *testing.T) {
	for _, c := range []struct {
		d    nexmark.Decimal3
		want string
	}{{908_000, "908.000"}, {1234, "1.234"}, {5, "0.005"}, {-5, "-0.005"}, {-12_340, "-12.340"}, {0, "0.000"}} {
		b, err := c.d.MarshalJSON()
		if err != nil || string(b) != c.want || c.d.String() != c.want {
			t.Errorf("%d: JSON %s (%v), String %s, want %s", int64(c.d), b, err, c.d.String(), c.want)
		}
	}
}

// lingering is a source that, once its input is exhausted, waits until
// done reports true (the processing-time windows have fired) before it
// ends the input; after a minute it gives up and ends it anyway, and the
// test's counts then show what was missing.
type lingering struct {
	src  weir.Source[nexmark.Event]
	done func() bool
}

func (l lingering) CreateReader(ctx weir.SourceContext) (weir.SourceReader[nexmark.Event], error) {
	r, err := l.src.CreateReader(ctx)
	return &lingeringReader{r: r, done: l.done}, err
}

type lingeringReader struct {
	r    weir.SourceReader[nexmark.Event]
	done func() bool
	end  time.Time
}

func (l *lingeringReader) ReadBatch(out weir.Collector[nexmark.Event]) (weir.ReadStatus, error) {
	if l.end.IsZero() {
		st, err := l.r.ReadBatch(out)
		if err != nil || st != weir.EndOfInput {
			return st, err
		}
		l.end = time.Now().Add(time.Minute)
	}
	if !l.done() && time.Now().Before(l.end) {
		return weir.NothingAvailable, nil
	}
	return weir.EndOfInput, nil
}

func (l *lingeringReader) Close() error { return l.r.Close() }

// q12 counts bids per bidder in processing-time windows, which follow the
// clock, so only invariants can be checked: windows of 50 ms (instead of
// 10 s, to keep the test short) aligned to their size, and, since the
// source waits until the windows have counted every bid before it ends,
// every bid counted once: per bidder, the counts add up to the bidder's
// bids, and each bidder's window fires once.
func TestQ12ProcessingTimeWindows(t *testing.T) {
	const size = 50 * time.Millisecond
	want := map[int64]int64{}
	for _, b := range bids(events()) {
		want[b.Bidder]++
	}
	for _, p := range []int{1, 3} {
		t.Run(fmt.Sprintf("p%d", p), func(t *testing.T) {
			env := weir.NewEnvironment(weir.Options{Parallelism: p, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			out := &collect[nexmark.BidderCount]{}
			total := int64(0)
			for _, n := range want {
				total += n
			}
			counted := func() bool {
				out.mu.Lock()
				defer out.mu.Unlock()
				n := int64(0)
				for _, r := range out.out {
					n += r.BidCount
				}
				return n >= total
			}
			src := weir.FromSource(env, lingering{nexmark.Source(testConfig()), counted}).WithCodec(nexmark.EventCodec())
			weir.SinkTo(nexmark.Q12Sized(src, size), out)
			if err := env.Execute(context.Background(), "nexmark-q12"); err != nil {
				t.Fatal(err)
			}
			got := map[int64]int64{}
			seen := map[[2]int64]bool{}
			windows := map[int64]bool{}
			twice := 0
			for _, r := range out.out {
				if r.EndTime-r.StartTime != size.Milliseconds() || r.StartTime%size.Milliseconds() != 0 {
					t.Fatalf("window [%d, %d) is not an aligned %v window", r.StartTime, r.EndTime, size)
				}
				if seen[[2]int64{r.Bidder, r.StartTime}] {
					twice++
				}
				seen[[2]int64{r.Bidder, r.StartTime}] = true
				windows[r.StartTime] = true
				got[r.Bidder] += r.BidCount
			}
			if !maps.Equal(got, want) {
				t.Fatalf("bids per bidder differ: %d bidders counted, want %d", len(got), len(want))
			}
			// A processing-time timer fires once its millisecond has
			// passed (as Flink's), so no bid can reopen a fired window.
			if twice != 0 {
				t.Fatalf("%d times a bidder's window fired again", twice)
			}
			t.Logf("%d rows in %d windows", len(out.out), len(windows))
		})
	}
}
