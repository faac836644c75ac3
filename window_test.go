package weir

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/clock"
)

// ev is a test event: a key, an event time and a value.
type ev struct {
	Key string
	TS  int64
	Val int64
}

var evCodec = codec.Func(
	func(dst []byte, e ev) []byte {
		dst = codec.String().Append(dst, e.Key)
		dst = codec.Int64().Append(dst, e.TS)
		return codec.Int64().Append(dst, e.Val)
	},
	func(src []byte) (ev, int, error) {
		k, n, err := codec.String().Decode(src)
		if err != nil {
			return ev{}, 0, err
		}
		ts, m, err := codec.Int64().Decode(src[n:])
		if err != nil {
			return ev{}, 0, err
		}
		v, o, err := codec.Int64().Decode(src[n+m:])
		return ev{k, ts, v}, n + m + o, err
	})

// steppedEvents emits one event per batch and then advances the manual
// clock by the watermark interval, so the watermark assigner chained after
// it emits a watermark after every event: event time advances
// deterministically. After the last event it either ends or, if hold is
// set, waits (NothingAvailable) until the test cancels.
type steppedEvents struct {
	events []ev
	clk    *clock.Manual
	step   time.Duration
}

func (s steppedEvents) CreateReader(ctx SourceContext) (SourceReader[ev], error) {
	return &steppedReader{s: s}, nil
}

type steppedReader struct {
	s    steppedEvents
	next int
}

func (r *steppedReader) ReadBatch(out Collector[ev]) (ReadStatus, error) {
	if r.next >= len(r.s.events) {
		return EndOfInput, nil
	}
	out.Collect(r.s.events[r.next])
	r.next++
	r.s.clk.Advance(r.s.step)
	return MoreAvailable, nil
}
func (r *steppedReader) Close() error { return nil }

type gathered[T any] struct {
	mu  sync.Mutex
	got []T
}

func (g *gathered[T]) CreateWriter(SinkContext) (SinkWriter[T], error) { return g, nil }
func (g *gathered[T]) Write(v T) error {
	g.mu.Lock()
	g.got = append(g.got, v)
	g.mu.Unlock()
	return nil
}
func (g *gathered[T]) Flush() error { return nil }
func (g *gathered[T]) Close() error { return nil }
func (g *gathered[T]) strings() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]string, len(g.got))
	for i, v := range g.got {
		out[i] = fmt.Sprint(v)
	}
	slices.Sort(out)
	return out
}

func testEnv(t *testing.T, backend string, clk clock.Clock) *Environment {
	opts := Options{Parallelism: 2, StateBackend: backend, StateDir: t.TempDir(),
		AutoWatermarkInterval: time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	env := NewEnvironment(opts)
	env.hooks.clock = clk
	return env
}

func forBackends(t *testing.T, f func(t *testing.T, backend string)) {
	for _, b := range []string{BackendHashMap, BackendPebble} {
		t.Run(b, func(t *testing.T) { f(t, b) })
	}
}

// eventStream builds source -> timestamps/watermarks (bounded out of
// orderness 5ms), parallelism 1, keyed by event key.
func eventStream(env *Environment, clk *clock.Manual, delay time.Duration, events []ev) *KeyedStream[string, ev] {
	src := FromSource(env, steppedEvents{events: events, clk: clk, step: time.Millisecond}).SetParallelism(1).WithCodec(evCodec)
	withTS := AssignTimestampsAndWatermarks(src, BoundedOutOfOrderness(delay, func(e ev) int64 { return e.TS })).
		SetParallelism(1)
	return KeyBy(withTS, func(e ev) string { return e.Key })
}

type winResult struct {
	Key   string
	Start int64
	Sum   int64
}

func (w winResult) String() string { return fmt.Sprintf("%s[%d]=%d", w.Key, w.Start, w.Sum) }

// Tumbling event-time windows with out-of-order records, allowed lateness
// (a late record within it fires the window again) and the late side
// output (a record after it).
func TestTumblingEventTimeWindowsLatenessAndLateData(t *testing.T) {
	forBackends(t, func(t *testing.T, backend string) {
		clk := clock.NewManual(time.UnixMilli(0))
		env := testEnv(t, backend, clk)
		// Watermark after each event = max ts so far - 5 - 1.
		events := []ev{
			{"a", 1, 1},  // wm -5
			{"a", 12, 2}, // wm 6
			{"a", 8, 3},  // out of order, in time; wm 6
			{"a", 20, 4}, // wm 14: [0,10) fires with 1+3
			{"a", 5, 5},  // late but within lateness 10: [0,10) fires again with 9
			{"a", 30, 6}, // wm 24: [10,20) fires; [0,10) is cleaned up at 19
			{"a", 3, 7},  // after [0,10)'s lateness: late data
			{"b", 25, 8}, // wm stays 24
		}
		w := Window(eventStream(env, clk, 5*time.Millisecond, events), TumblingEventTimeWindows(10*time.Millisecond)).
			AllowedLateness(10 * time.Millisecond)
		sums := ReduceWindows(w, func(a, b ev) ev { return ev{a.Key, a.TS, a.Val + b.Val} },
			func(k string, win TimeWindow, e ev) winResult { return winResult{k, win.Start, e.Val} }).
			WithCodec(codec.Func(func(d []byte, r winResult) []byte { return d }, func([]byte) (winResult, int, error) { return winResult{}, 0, nil }))
		results := &gathered[winResult]{}
		late := &gathered[ev]{}
		SinkTo(sums, results).SetParallelism(2)
		SinkTo(LateData(w), late).SetParallelism(2)
		if err := env.Execute(context.Background(), "tumbling"); err != nil {
			t.Fatal(err)
		}
		want := []string{"a[0]=4", "a[0]=9", "a[10]=2", "a[20]=4", "a[30]=6", "b[20]=8"}
		if got := results.strings(); !slices.Equal(got, want) {
			t.Fatalf("results %v, want %v", got, want)
		}
		if got := late.strings(); !slices.Equal(got, []string{"{a 3 7}"}) {
			t.Fatalf("late data %v, want [{a 3 7}]", got)
		}
	})
}

type countAgg struct{}

func (countAgg) CreateAccumulator() int64  { return 0 }
func (countAgg) Add(_ ev, acc int64) int64 { return acc + 1 }
func (countAgg) GetResult(acc int64) int64 { return acc }
func (countAgg) Merge(a, b int64) int64    { return a + b }

// Sliding windows aggregate every record into each of the size/slide
// windows that contain it; checked against a brute-force count.
func TestSlidingEventTimeWindowsAggregate(t *testing.T) {
	forBackends(t, func(t *testing.T, backend string) {
		clk := clock.NewManual(time.UnixMilli(0))
		env := testEnv(t, backend, clk)
		var events []ev
		for i := range 60 {
			ts := int64(i*7%50) + int64(i/3) // wandering, out of order by up to ~50ms
			events = append(events, ev{Key: fmt.Sprintf("k%d", i%3), TS: ts, Val: 1})
		}
		w := Window(eventStream(env, clk, 100*time.Millisecond, events), SlidingEventTimeWindows(10*time.Millisecond, 5*time.Millisecond))
		counts := AggregateWindows(w, AggregateFunction[ev, int64, int64](countAgg{}), nil,
			func(k string, win TimeWindow, n int64) string {
				return fmt.Sprintf("%s[%d,%d)=%d", k, win.Start, win.End, n)
			})
		got := &gathered[string]{}
		SinkTo(counts, got)
		if err := env.Execute(context.Background(), "sliding"); err != nil {
			t.Fatal(err)
		}
		brute := map[string]int{}
		for _, e := range events {
			for start := e.TS - e.TS%5 - 5; start <= e.TS; start += 5 {
				if e.TS >= start && e.TS < start+10 {
					brute[fmt.Sprintf("%s[%d,%d)", e.Key, start, start+10)]++
				}
			}
		}
		var want []string
		for k, n := range brute {
			want = append(want, fmt.Sprintf("%s=%d", k, n))
		}
		slices.Sort(want)
		if g := got.strings(); !slices.Equal(g, want) {
			t.Fatalf("got %d results, want %d\n got %v\nwant %v", len(g), len(want), g, want)
		}
	})
}

// Session windows merge overlapping sessions, including a record that
// bridges two sessions; ProcessWindow sees all of a session's records.
func TestSessionWindowsMerge(t *testing.T) {
	forBackends(t, func(t *testing.T, backend string) {
		clk := clock.NewManual(time.UnixMilli(0))
		env := testEnv(t, backend, clk)
		var events []ev
		for _, ts := range []int64{1, 3, 10, 12, 4, 8, 30} {
			events = append(events, ev{"a", ts, ts})
		}
		events = append(events, ev{"b", 2, 2})
		w := Window(eventStream(env, clk, 100*time.Millisecond, events), EventTimeSessionWindows(5*time.Millisecond))
		sessions := ProcessWindow(w, func() ProcessWindowFunction[string, ev, string] {
			return ProcessWindowFunc[string, ev, string](func(ctx *WindowContext[string, string], win TimeWindow, els []ev) error {
				var vals []int64
				for _, e := range els {
					vals = append(vals, e.Val)
				}
				slices.Sort(vals)
				ctx.Emit(fmt.Sprintf("%s[%d,%d)%v", ctx.Key(), win.Start, win.End, vals))
				return nil
			})
		})
		got := &gathered[string]{}
		SinkTo(sessions, got)
		if err := env.Execute(context.Background(), "sessions"); err != nil {
			t.Fatal(err)
		}
		want := []string{"a[1,17)[1 3 4 8 10 12]", "a[30,35)[30]", "b[2,7)[2]"}
		if g := got.strings(); !slices.Equal(g, want) {
			t.Fatalf("got %v, want %v", g, want)
		}
	})
}

// Session windows with lateness: a record for a session that was already
// cleaned up goes to the late output.
func TestSessionWindowLateData(t *testing.T) {
	clk := clock.NewManual(time.UnixMilli(0))
	env := testEnv(t, BackendHashMap, clk)
	events := []ev{{"a", 1, 1}, {"a", 40, 2}, {"a", 2, 3}}
	w := Window(eventStream(env, clk, 0, events), EventTimeSessionWindows(5*time.Millisecond))
	counts := Aggregate(w, AggregateFunction[ev, int64, int64](countAgg{}))
	got := &gathered[int64]{}
	late := &gathered[ev]{}
	SinkTo(counts, got)
	SinkTo(LateData(w), late)
	if err := env.Execute(context.Background(), "session-late"); err != nil {
		t.Fatal(err)
	}
	if g := got.strings(); !slices.Equal(g, []string{"1", "1"}) {
		t.Fatalf("got %v", g)
	}
	if g := late.strings(); !slices.Equal(g, []string{"{a 2 3}"}) {
		t.Fatalf("late %v", g)
	}
}

// idleUntilCanceled emits its events at once and then has nothing more.
type idleUntilCanceled struct{ events []ev }

func (s idleUntilCanceled) CreateReader(SourceContext) (SourceReader[ev], error) {
	return &idleReader{events: s.events}, nil
}

type idleReader struct{ events []ev }

func (r *idleReader) ReadBatch(out Collector[ev]) (ReadStatus, error) {
	for _, e := range r.events {
		out.Collect(e)
	}
	r.events = nil
	return NothingAvailable, nil
}
func (r *idleReader) Close() error { return nil }

// Processing-time windows fire when the (driven) processing time passes
// their end, not at the end of input.
func TestProcessingTimeWindows(t *testing.T) {
	for _, tc := range []struct {
		name     string
		assigner WindowAssigner
		want     []string
	}{
		{"tumbling", TumblingProcessingTimeWindows(10 * time.Millisecond), []string{"a[1000]=3", "b[1000]=5"}},
		{"sliding", SlidingProcessingTimeWindows(10*time.Millisecond, 5*time.Millisecond),
			[]string{"a[1000]=3", "a[995]=3", "b[1000]=5", "b[995]=5"}},
		{"session", ProcessingTimeSessionWindows(10 * time.Millisecond), []string{"a[1000]=3", "b[1000]=5"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clock.NewManual(time.UnixMilli(1000))
			env := testEnv(t, BackendHashMap, clk)
			events := []ev{{"a", 0, 1}, {"a", 0, 2}, {"b", 0, 5}}
			src := FromSource(env, idleUntilCanceled{events}).SetParallelism(1).WithCodec(evCodec)
			w := Window(KeyBy(src, func(e ev) string { return e.Key }), tc.assigner)
			sums := ReduceWindows(w, func(a, b ev) ev { return ev{a.Key, 0, a.Val + b.Val} },
				func(k string, win TimeWindow, e ev) string { return fmt.Sprintf("%s[%d]=%d", k, win.Start, e.Val) })
			sums.SetParallelism(1)
			got := &gathered[string]{}
			SinkTo(sums, got).SetParallelism(1)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- env.Execute(ctx, "processing-time") }()
			// Once the records are in, two tasks wait on the manual clock: the
			// source backing off, and the window task for its windows' ends.
			deadline := time.Now().Add(10 * time.Second)
			for clk.Waiters() < 2 && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			if len(got.strings()) != 0 {
				t.Fatal("processing-time window fired before its end")
			}
			clk.Advance(15 * time.Millisecond)
			for time.Now().Before(deadline) && len(got.strings()) < len(tc.want) {
				time.Sleep(time.Millisecond)
			}
			cancel()
			<-done
			if g := got.strings(); !slices.Equal(g, tc.want) {
				t.Fatalf("got %v, want %v", g, tc.want)
			}
		})
	}
}

// oneActiveSubtask: subtask 0 steps through its events and then holds;
// every other subtask never has a record.
type oneActiveSubtask struct {
	events []ev
	clk    *clock.Manual
}

func (s oneActiveSubtask) CreateReader(ctx SourceContext) (SourceReader[ev], error) {
	if ctx.Subtask != 0 {
		return &idleReader{}, nil
	}
	return &holdingReader{steppedReader: steppedReader{s: steppedEvents{events: s.events, clk: s.clk, step: 2 * time.Millisecond}}}, nil
}

type holdingReader struct {
	steppedReader
	started bool
}

func (r *holdingReader) ReadBatch(out Collector[ev]) (ReadStatus, error) {
	if !r.started {
		// Let the idle subtask open and wait on the clock first, so that it
		// sees the clock move.
		for deadline := time.Now().Add(5 * time.Second); r.s.clk.Waiters() < 1 && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		r.started = true
	}
	if st, err := r.steppedReader.ReadBatch(out); st != EndOfInput || err != nil {
		return st, err
	}
	return NothingAvailable, nil
}

// A source subtask without records would hold event time back forever;
// with idleness it is marked idle and windows fire on the other subtask's
// watermarks while the job runs.
func TestIdleSourceSubtaskDoesNotHoldBackWindows(t *testing.T) {
	clk := clock.NewManual(time.UnixMilli(0))
	env := testEnv(t, BackendHashMap, clk)
	events := []ev{{"a", 1, 1}, {"a", 5, 2}, {"a", 12, 4}, {"a", 25, 8}}
	src := FromSource(env, oneActiveSubtask{events: events, clk: clk}).SetParallelism(2).WithCodec(evCodec)
	withTS := AssignTimestampsAndWatermarks(src, MonotonousTimestamps(func(e ev) int64 { return e.TS }).WithIdleness(5*time.Millisecond)).
		SetParallelism(2)
	w := Window(KeyBy(withTS, func(e ev) string { return e.Key }), TumblingEventTimeWindows(10*time.Millisecond))
	sums := ReduceWindows(w, func(a, b ev) ev { return ev{a.Key, 0, a.Val + b.Val} },
		func(k string, win TimeWindow, e ev) string { return fmt.Sprintf("%s[%d]=%d", k, win.Start, e.Val) })
	got := &gathered[string]{}
	SinkTo(sums, got)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- env.Execute(ctx, "idleness") }()
	deadline := time.Now().Add(10 * time.Second)
	for len(got.strings()) < 2 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
	if g := got.strings(); !slices.Equal(g, []string{"a[0]=3", "a[10]=4"}) {
		t.Fatalf("got %v; the idle subtask held the watermark back", g)
	}
}

// Sliding windows with allowed lateness: a late record within the lateness
// of one of its windows fires that window again; a record too late for all
// of its windows goes to the late output.
func TestSlidingEventTimeWindowsLatenessAndLateData(t *testing.T) {
	forBackends(t, func(t *testing.T, backend string) {
		clk := clock.NewManual(time.UnixMilli(0))
		env := testEnv(t, backend, clk)
		events := []ev{
			{"a", 1, 1},  // windows [-5,5) [0,10); wm 0
			{"a", 12, 2}, // windows [5,15) [10,20); wm 11 fires [-5,5)=1 and [0,10)=1
			{"a", 3, 4},  // [-5,5) is past its lateness (cleanup 9); [0,10) fires again =5
			{"a", 30, 8}, // wm 29 fires [5,15)=2, [10,20)=2
			{"a", 2, 16}, // too late for both its windows: late data
		}
		w := Window(eventStream(env, clk, 0, events), SlidingEventTimeWindows(10*time.Millisecond, 5*time.Millisecond)).
			AllowedLateness(5 * time.Millisecond)
		sums := ReduceWindows(w, func(a, b ev) ev { return ev{a.Key, 0, a.Val + b.Val} },
			func(k string, win TimeWindow, e ev) string { return fmt.Sprintf("%s[%d]=%d", k, win.Start, e.Val) })
		got := &gathered[string]{}
		late := &gathered[ev]{}
		SinkTo(sums, got)
		SinkTo(LateData(w), late)
		if err := env.Execute(context.Background(), "sliding-late"); err != nil {
			t.Fatal(err)
		}
		want := []string{"a[-5]=1", "a[0]=1", "a[0]=5", "a[10]=2", "a[25]=8", "a[30]=8", "a[5]=2"}
		if g := got.strings(); !slices.Equal(g, want) {
			t.Fatalf("got %v, want %v", g, want)
		}
		if g := late.strings(); !slices.Equal(g, []string{"{a 2 16}"}) {
			t.Fatalf("late %v", g)
		}
	})
}
