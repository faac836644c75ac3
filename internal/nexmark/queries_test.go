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
