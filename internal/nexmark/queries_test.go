package nexmark_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"testing"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/internal/nexmark"
)

// collect is a sink that keeps every record, from any subtask.
type collect[T any] struct {
	mu  sync.Mutex
	out []T
}

func (c *collect[T]) CreateWriter(weir.SinkContext) (weir.SinkWriter[T], error) { return c, nil }
func (c *collect[T]) Write(v T) error {
	c.mu.Lock()
	c.out = append(c.out, v)
	c.mu.Unlock()
	return nil
}
func (c *collect[T]) Flush() error { return nil }
func (c *collect[T]) Close() error { return nil }

const testEvents = 30_000

// A low event rate spreads the test events over minutes of event time, so
// that windows, sessions and auction expiries matter.
func testConfig() nexmark.Config {
	return nexmark.Config{Events: testEvents, Seed: 7, FirstEventRate: 200}
}

// runRaw executes query q over the test events at parallelism p and
// returns its results in arrival order (per subtask, emission order).
func runRaw[T any](t *testing.T, p int, q func(*weir.DataStream[nexmark.Event]) *weir.DataStream[T]) []T {
	t.Helper()
	env := weir.NewEnvironment(weir.Options{Parallelism: p, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	out := &collect[T]{}
	weir.SinkTo[T](q(nexmark.Events(env, testConfig())), out)
	if err := env.Execute(context.Background(), "nexmark-test"); err != nil {
		t.Fatal(err)
	}
	return out.out
}

// run is runRaw with the results rendered as sorted strings.
func run[T any](t *testing.T, p int, q func(*weir.DataStream[nexmark.Event]) *weir.DataStream[T]) []string {
	t.Helper()
	return render(runRaw(t, p, q))
}

func render[T any](vs []T) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = fmt.Sprintf("%+v", v)
	}
	sort.Strings(out)
	return out
}

func events() []nexmark.Event {
	c := testConfig()
	evs := make([]nexmark.Event, testEvents)
	for i := range evs {
		evs[i] = nexmark.Generate(c, int64(i))
	}
	return evs
}

func bids(evs []nexmark.Event) []nexmark.Bid {
	var out []nexmark.Bid
	for _, e := range evs {
		if e.Kind == nexmark.KindBid {
			out = append(out, *e.Bid)
		}
	}
	return out
}

func check(t *testing.T, name string, got, want []string) {
	t.Helper()
	if len(want) == 0 {
		t.Fatalf("%s: the reference is empty; the test input exercises nothing", name)
	}
	if !slices.Equal(got, want) {
		n := min(len(got), len(want), 5)
		t.Fatalf("%s: %d results, reference %d; first got %v, want %v", name, len(got), len(want), got[:n], want[:n])
	}
}

func floorWindow(ts, size int64) int64 { return ts - ((ts%size)+size)%size }

// Every query matches a brute-force reference computed over the same
// generated events, at parallelism 1 and 3.
func TestQueriesMatchReference(t *testing.T) {
	evs := events()
	bs := bids(evs)

	ref := map[string][]string{}
	ref["q0"] = render(bs)
	var q1 []nexmark.Bid
	for _, b := range bs {
		b.Price = b.Price * nexmark.DollarToEuro / 1000
		q1 = append(q1, b)
	}
	ref["q1"] = render(q1)
	var q2 []nexmark.AuctionPrice
	for _, b := range bs {
		if b.Auction%123 == 0 {
			q2 = append(q2, nexmark.AuctionPrice{Auction: b.Auction, Price: b.Price})
		}
	}
	ref["q2"] = render(q2)

	// q5: per sliding window (10s every 2s) the auctions with most bids.
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
	var q5 []nexmark.HotItem
	for k, n := range counts {
		if n == maxOf[k[1]] {
			q5 = append(q5, nexmark.HotItem{Auction: k[0], Count: n, WindowEnd: k[1]})
		}
	}
	ref["q5"] = render(q5)

	// q11: sessions of each bidder (gap 10s).
	times := map[int64][]int64{}
	for _, b := range bs {
		times[b.Bidder] = append(times[b.Bidder], b.DateTime)
	}
	var q11 []nexmark.Session
	for bidder, ts := range times {
		slices.Sort(ts)
		start, last, n := ts[0], ts[0], int64(1)
		for _, x := range ts[1:] {
			// Session windows [t, t+gap) that touch merge, as in Flink.
			if x-last > 10_000 {
				q11 = append(q11, nexmark.Session{Bidder: bidder, Count: n, Start: start, End: last + 10_000})
				start, n = x, 0
			}
			last = x
			n++
		}
		q11 = append(q11, nexmark.Session{Bidder: bidder, Count: n, Start: start, End: last + 10_000})
	}
	ref["q11"] = render(q11)

	for _, p := range []int{1, 3} {
		t.Run(fmt.Sprintf("p%d", p), func(t *testing.T) {
			check(t, "q0", run(t, p, nexmark.Q0), ref["q0"])
			check(t, "q1", run(t, p, nexmark.Q1), ref["q1"])
			check(t, "q2", run(t, p, nexmark.Q2), ref["q2"])
			check(t, "q5", run(t, p, nexmark.Q5), ref["q5"])
			check(t, "q11", run(t, p, nexmark.Q11), ref["q11"])
		})
	}
}
