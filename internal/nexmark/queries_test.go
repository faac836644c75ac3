package nexmark_test

import (
	"context"
	"encoding/json"
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
	return runRawOn(t, p, testConfig(), q)
}

// runRawOn is runRaw over the events of c.
func runRawOn[T any](t *testing.T, p int, c nexmark.Config, q func(*weir.DataStream[nexmark.Event]) *weir.DataStream[T]) []T {
	t.Helper()
	env := weir.NewEnvironment(weir.Options{Parallelism: p, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	out := &collect[T]{}
	weir.SinkTo[T](q(nexmark.Events(env, c)), out)
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

// render renders rows as JSON, the form of the benchmark's result rows
// (so that column names are checked too, and NULLs show as null), sorted.
func render[T any](vs []T) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		b, err := json.Marshal(v)
		if err != nil {
			panic(fmt.Sprintf("rendering %+v: %v", v, err))
		}
		out[i] = string(b)
	}
	sort.Strings(out)
	return out
}

func events() []nexmark.Event { return eventsOf(testConfig()) }

// eventsOf generates the events of c.
func eventsOf(c nexmark.Config) []nexmark.Event {
	evs := make([]nexmark.Event, c.Events)
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
	persons := map[int64]*nexmark.Person{}
	var auctions []*nexmark.Auction
	for _, e := range evs {
		switch e.Kind {
		case nexmark.KindPerson:
			persons[e.Person.ID] = e.Person
		case nexmark.KindAuction:
			auctions = append(auctions, e.Auction)
		}
	}
	var q3 []nexmark.Q3Result
	for _, a := range auctions {
		p := persons[a.Seller]
		if a.Category == 10 && p != nil && (p.State == "OR" || p.State == "ID" || p.State == "CA") {
			q3 = append(q3, nexmark.Q3Result{Name: p.Name, City: p.City, State: p.State, Auction: a.ID})
		}
	}
	ref["q3"] = render(q3)

	// q4: the final running average per category.
	bidsOf := map[int64][]nexmark.Bid{}
	for _, b := range bs {
		bidsOf[b.Auction] = append(bidsOf[b.Auction], b)
	}
	sum, cnt := map[int64]int64{}, map[int64]int64{}
	for _, a := range auctions {
		best, ok := int64(0), false
		for _, b := range bidsOf[a.ID] {
			if b.DateTime >= a.DateTime && b.DateTime <= a.Expires && (!ok || b.Price > best) {
				best, ok = b.Price, true
			}
		}
		if ok {
			sum[a.Category] += best
			cnt[a.Category]++
		}
	}
	var q4 []nexmark.CategoryPrice
	for c := range sum {
		q4 = append(q4, nexmark.CategoryPrice{Category: c, AvgPrice: sum[c] / cnt[c]})
	}
	ref["q4"] = render(q4)

	// q7: per tumbling 10s window the bids with the highest price.
	top := map[int64]int64{}
	for _, b := range bs {
		w := floorWindow(b.DateTime, 10_000)
		if p, ok := top[w]; !ok || b.Price > p {
			top[w] = b.Price
		}
	}
	var q7 []nexmark.Bid
	for _, b := range bs {
		if b.Price == top[floorWindow(b.DateTime, 10_000)] {
			q7 = append(q7, b)
		}
	}
	ref["q7"] = render(q7)

	// q8: persons who opened an auction in their creation window.
	auctionWindows := map[int64]map[int64]bool{}
	for _, a := range auctions {
		if auctionWindows[a.Seller] == nil {
			auctionWindows[a.Seller] = map[int64]bool{}
		}
		auctionWindows[a.Seller][floorWindow(a.DateTime, 10_000)] = true
	}
	var q8 []nexmark.NewUser
	for id, p := range persons {
		w := floorWindow(p.DateTime, 10_000)
		if auctionWindows[id][w] {
			q8 = append(q8, nexmark.NewUser{ID: id, Name: p.Name, WindowStart: w})
		}
	}
	ref["q8"] = render(q8)

	for _, p := range []int{1, 3} {
		t.Run(fmt.Sprintf("p%d", p), func(t *testing.T) {
			check(t, "q3", run(t, p, nexmark.Q3), ref["q3"])
			check(t, "q4", lastPerCategory(runRaw(t, p, nexmark.Q4)), ref["q4"])
			check(t, "q7", run(t, p, nexmark.Q7), ref["q7"])
			check(t, "q8", run(t, p, nexmark.Q8), ref["q8"])
		})
	}
}

// lastPerCategory keeps, of q4's running averages, the last one per
// category: one subtask emits all updates of a category, in order, and the
// sink is chained to it, so arrival order is emission order.
func lastPerCategory(updates []nexmark.CategoryPrice) []string {
	last := map[int64]nexmark.CategoryPrice{}
	for _, u := range updates {
		last[u.Category] = u
	}
	var out []nexmark.CategoryPrice
	for _, u := range last {
		out = append(out, u)
	}
	return render(out)
}
