package weir

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/clock"
	"github.com/weirstream/weir/internal/task"
	"github.com/weirstream/weir/internal/watermark"
)

// fakeWatermarkContext records what a splitWatermarks emits; the test calls
// periodic itself and moves the clock.
type fakeWatermarkContext struct {
	now    time.Time
	events []string // "wm N", "idle", "active"
	wms    []int64
}

func (f *fakeWatermarkContext) Now() time.Time                   { return f.now }
func (f *fakeWatermarkContext) Schedule(time.Time, func() error) {}
func (f *fakeWatermarkContext) EmitWatermark(wm int64) error {
	if n := len(f.wms); n > 0 && wm <= f.wms[n-1] {
		return fmt.Errorf("watermark %d after %d: went backwards", wm, f.wms[n-1])
	}
	f.wms = append(f.wms, wm)
	f.events = append(f.events, fmt.Sprintf("wm %d", wm))
	return nil
}
func (f *fakeWatermarkContext) EmitIdle(idle bool) {
	if idle {
		f.events = append(f.events, "idle")
	} else {
		f.events = append(f.events, "active")
	}
}

// lastWM is the last watermark emitted, NoWatermark if none.
func (f *fakeWatermarkContext) lastWM() int64 {
	if len(f.wms) == 0 {
		return watermark.NoWatermark
	}
	return f.wms[len(f.wms)-1]
}

// stamped is a record as the collector passed it on: its value and the
// timestamp the tracker held.
type stamped struct {
	v  int64
	ts int64
}

type stampedCollector struct {
	tr  *task.Tracker
	got []stamped
}

func (c *stampedCollector) Collect(v int64) { c.got = append(c.got, stamped{v, c.tr.Timestamp}) }

// newTestSplitWatermarks returns a splitWatermarks over a fake context at
// Unix 0 with a watermark interval of 10ms.
func newTestSplitWatermarks(ws WatermarkStrategy[int64]) (*splitWatermarks[int64], *fakeWatermarkContext, *stampedCollector) {
	ctx := &fakeWatermarkContext{now: time.UnixMilli(0)}
	tr := &task.Tracker{Timestamp: task.NoTimestamp}
	out := &stampedCollector{tr: tr}
	return newSplitWatermarks(ctx, tr, 10*time.Millisecond, ws, out), ctx, out
}

// tick moves the fake clock by the interval and runs the periodic emission.
func tick(t *testing.T, w *splitWatermarks[int64], ctx *fakeWatermarkContext) {
	t.Helper()
	ctx.now = ctx.now.Add(10 * time.Millisecond)
	if err := w.periodic(); err != nil {
		t.Fatal(err)
	}
}

// The subtask's watermark is the minimum over its splits: a slow split
// holds it back until it catches up, records carry the timestamps their
// split output was given, and the watermark never goes backwards.
func TestSplitWatermarksSlowSplitHoldsBack(t *testing.T) {
	w, ctx, out := newTestSplitWatermarks(MonotonousTimestamps[int64](nil))
	var sc SplitCollector[int64] = w
	fast, slow := sc.Split("fast"), sc.Split("slow")
	tick(t, w, ctx)
	if len(ctx.wms) != 0 {
		t.Fatalf("watermark %v before any record: the splits have none", ctx.wms)
	}
	fast.CollectWithTimestamp(1, 100)
	tick(t, w, ctx)
	if len(ctx.wms) != 0 {
		t.Fatalf("watermark %v while split slow has no record yet", ctx.wms)
	}
	slow.CollectWithTimestamp(2, 10)
	tick(t, w, ctx)
	if got := ctx.lastWM(); got != 9 {
		t.Fatalf("watermark %d, want 9 (the slow split's 10 - 1)", got)
	}
	for ts := int64(200); ts < 300; ts += 10 {
		fast.CollectWithTimestamp(ts, ts)
		tick(t, w, ctx)
	}
	if got := ctx.lastWM(); got != 9 {
		t.Fatalf("watermark %d after the fast split ran ahead, want 9: the slow split holds it back", got)
	}
	slow.CollectWithTimestamp(3, 150)
	tick(t, w, ctx)
	if got := ctx.lastWM(); got != 149 {
		t.Fatalf("watermark %d, want 149 once the slow split reached 150", got)
	}
	want := []stamped{{1, 100}, {2, 10}}
	if !slices.Equal(out.got[:2], want) || out.got[len(out.got)-1] != (stamped{3, 150}) {
		t.Fatalf("records passed on with timestamps %v, want %v first and {3 150} last", out.got, want)
	}
	if slices.Contains(ctx.events, "idle") {
		t.Fatalf("idle without WithIdleness: %v", ctx.events)
	}
}

// A released split no longer holds the watermark back; Split with its id
// starts a new output, which holds it back again until it has records.
func TestSplitWatermarksReleasedSplit(t *testing.T) {
	w, ctx, _ := newTestSplitWatermarks(BoundedOutOfOrderness[int64](5*time.Millisecond, nil))
	a, b := w.Split("a"), w.Split("b")
	a.CollectWithTimestamp(0, 100)
	b.CollectWithTimestamp(0, 20)
	tick(t, w, ctx)
	if got := ctx.lastWM(); got != 14 {
		t.Fatalf("watermark %d, want 14 (20 - 5 - 1)", got)
	}
	w.ReleaseSplit("b")
	tick(t, w, ctx)
	if got := ctx.lastWM(); got != 94 {
		t.Fatalf("watermark %d after releasing b, want 94 (a's 100 - 5 - 1)", got)
	}
	w.Split("b")
	a.CollectWithTimestamp(0, 200)
	tick(t, w, ctx)
	if got := ctx.lastWM(); got != 94 {
		t.Fatalf("watermark %d, want 94: split b, assigned again, has no record yet", got)
	}
}

// With WithIdleness a split without records for the timeout stops holding
// the watermark back; when every split is idle the subtask is idle, and
// its next record makes it active at once. Without splits the subtask
// turns idle once the timeout passed; without WithIdleness it never does.
func TestSplitWatermarksIdleness(t *testing.T) {
	w, ctx, _ := newTestSplitWatermarks(MonotonousTimestamps[int64](nil).WithIdleness(50 * time.Millisecond))
	busy, quiet := w.Split("busy"), w.Split("quiet")
	quiet.CollectWithTimestamp(0, 10)
	ts := int64(100)
	// Idleness is detected between the timeout and the timeout plus two
	// intervals (watermark.Idleness): 50ms + 20ms, with 10ms ticks.
	for range 4 {
		busy.CollectWithTimestamp(0, ts)
		tick(t, w, ctx)
		ts += 10
		if got := ctx.lastWM(); got != 9 {
			t.Fatalf("watermark %d at %v, want 9: split quiet is not idle yet", got, ctx.now.Sub(time.UnixMilli(0)))
		}
	}
	for range 4 {
		busy.CollectWithTimestamp(0, ts)
		tick(t, w, ctx)
		ts += 10
	}
	if got := ctx.lastWM(); got != ts-11 {
		t.Fatalf("watermark %d at %v, want %d: split quiet is idle and no longer counts", got, ctx.now.Sub(time.UnixMilli(0)), ts-11)
	}
	if slices.Contains(ctx.events, "idle") {
		t.Fatalf("subtask idle while split busy has records: %v", ctx.events)
	}
	// Now busy falls silent too: the subtask turns idle.
	for range 8 {
		tick(t, w, ctx)
	}
	if ctx.events[len(ctx.events)-1] != "idle" {
		t.Fatalf("events %v: want the subtask idle once every split is", ctx.events)
	}
	// A record of the quiet split, late for the watermark: active at once,
	// and the watermark does not go back (the fake fails on that).
	n := len(ctx.events)
	quiet.CollectWithTimestamp(0, 20)
	if got := ctx.events[n:]; !slices.Equal(got, []string{"active"}) {
		t.Fatalf("events after a record of an idle subtask: %v, want [active]", got)
	}
	tick(t, w, ctx)

	// No splits at all.
	w2, ctx2, _ := newTestSplitWatermarks(MonotonousTimestamps[int64](nil).WithIdleness(50 * time.Millisecond))
	for range 8 {
		tick(t, w2, ctx2)
	}
	if !slices.Equal(ctx2.events, []string{"idle"}) {
		t.Fatalf("a subtask without splits: events %v, want [idle] after the timeout", ctx2.events)
	}
	w3, ctx3, _ := newTestSplitWatermarks(MonotonousTimestamps[int64](nil))
	w3.Split("s")
	for range 20 {
		tick(t, w3, ctx3)
	}
	if len(ctx3.events) != 0 {
		t.Fatalf("without WithIdleness: events %v, want none (a split without records holds the watermark, as in Flink)", ctx3.events)
	}
}

// Records of no split drive the subtask-wide generator, which counts once
// it has seen a record with a timestamp: a record collected without one
// (no timestamp function) carries none and never holds event time back,
// neither in the minimum nor by keeping the subtask from turning idle. The
// strategy's timestamp function takes precedence over
// CollectWithTimestamp.
func TestSplitWatermarksTimestamps(t *testing.T) {
	w, ctx, out := newTestSplitWatermarks(MonotonousTimestamps[int64](nil))
	s := w.Split("s")
	s.CollectWithTimestamp(1, 50)
	tick(t, w, ctx)
	if got := ctx.lastWM(); got != 49 {
		t.Fatalf("watermark %d, want 49: the unused subtask-wide output must not hold it back", got)
	}
	w.Collect(2) // no timestamp: passes on without one, and the subtask-wide output still does not count
	s.CollectWithTimestamp(3, 80)
	tick(t, w, ctx)
	if got := ctx.lastWM(); got != 79 {
		t.Fatalf("watermark %d, want 79: a record of no split without a timestamp froze the watermark", got)
	}
	for ts := int64(100); ts <= 300; ts += 100 {
		w.Collect(ts)
		s.CollectWithTimestamp(ts, ts)
		tick(t, w, ctx)
		if got := ctx.lastWM(); got != ts-1 {
			t.Fatalf("watermark %d, want %d: records of no split without timestamps hold it back", got, ts-1)
		}
	}
	if got := out.got[1]; got != (stamped{2, task.NoTimestamp}) {
		t.Fatalf("a record collected without timestamp passed on as %v, want {2 %d} (none)", got, task.NoTimestamp)
	}

	// With WithIdleness and no splits, a steady stream of records without
	// timestamps does not keep the subtask active (with no watermark,
	// holding back every task downstream): it turns idle after the
	// timeout, and stays idle while they keep coming.
	wi, ctxi, outi := newTestSplitWatermarks(MonotonousTimestamps[int64](nil).WithIdleness(50 * time.Millisecond))
	for i := range int64(20) {
		wi.Collect(i)
		tick(t, wi, ctxi)
	}
	if !slices.Equal(ctxi.events, []string{"idle"}) || len(outi.got) != 20 {
		t.Fatalf("records of no split without timestamps: events %v, want [idle]; %d records passed on, want 20", ctxi.events, len(outi.got))
	}
	// A split's record makes it active at once, and the split's timestamps
	// alone make the watermark.
	wi.Split("s").CollectWithTimestamp(0, 500)
	wi.Collect(21)
	tick(t, wi, ctxi)
	if !slices.Equal(ctxi.events, []string{"idle", "active", "wm 499"}) {
		t.Fatalf("events %v, want [idle active wm 499]", ctxi.events)
	}

	w2, ctx2, out2 := newTestSplitWatermarks(MonotonousTimestamps(func(v int64) int64 { return v * 10 }))
	w2.Split("s").CollectWithTimestamp(7, 1)
	w2.Collect(9)
	tick(t, w2, ctx2)
	if !slices.Equal(out2.got, []stamped{{7, 70}, {9, 90}}) {
		t.Fatalf("records %v: the timestamp function must take precedence", out2.got)
	}
	if got := ctx2.lastWM(); got != 69 {
		t.Fatalf("watermark %d, want 69", got)
	}
}

// splitEvents is a bounded source of one subtask whose reader creates an
// output per split up front (as a Kafka reader does on assignment), emits
// one event per batch, all of split "a" first and then all of split "b",
// advancing the manual clock by a watermark interval after each, and
// releases each split when it is done. Given a plain Collector (FromSource)
// it emits to it.
type splitEvents struct {
	splits map[string][]ev
	clk    *clock.Manual
}

func (s splitEvents) CreateReader(SourceContext) (SourceReader[ev], error) {
	return &splitEventsReader{s: s, order: []string{"a", "b"}}, nil
}

type splitEventsReader struct {
	s       splitEvents
	order   []string
	started bool
	split   int
	next    int
}

func (r *splitEventsReader) ReadBatch(out Collector[ev]) (ReadStatus, error) {
	sc, perSplit := out.(SplitCollector[ev])
	if perSplit && !r.started {
		for _, id := range r.order {
			sc.Split(id)
		}
	}
	r.started = true
	for r.split < len(r.order) && r.next >= len(r.s.splits[r.order[r.split]]) {
		if perSplit {
			sc.ReleaseSplit(r.order[r.split])
		}
		r.split, r.next = r.split+1, 0
	}
	if r.split == len(r.order) {
		return EndOfInput, nil
	}
	id := r.order[r.split]
	e := r.s.splits[id][r.next]
	r.next++
	if perSplit {
		sc.Split(id).CollectWithTimestamp(e, e.TS)
	} else {
		out.Collect(e)
	}
	r.s.clk.Advance(time.Millisecond)
	return MoreAvailable, nil
}
func (r *splitEventsReader) Close() error { return nil }

// Event-time windows downstream of FromSourceWithWatermarks: split b,
// read after split a, is not late, because it holds the watermark back
// while a runs ahead; the last windows fire with the final watermark at
// the end. The same reader with one watermark generator for the subtask
// (AssignTimestampsAndWatermarks) loses b's records as late: the test
// tells the two apart.
func TestFromSourceWithWatermarksEventTimeWindows(t *testing.T) {
	splits := map[string][]ev{}
	for _, id := range []string{"a", "b"} {
		for ts := int64(0); ts < 100; ts += 5 {
			splits[id] = append(splits[id], ev{Key: id, TS: ts, Val: 1})
		}
	}
	run := func(t *testing.T, perSplit bool) (results, late []string) {
		clk := clock.NewManual(time.UnixMilli(0))
		env := testEnv(t, BackendHashMap, clk)
		src := splitEvents{splits: splits, clk: clk}
		var s *DataStream[ev]
		if perSplit {
			s = FromSourceWithWatermarks(env, src, MonotonousTimestamps[ev](nil))
		} else {
			s = AssignTimestampsAndWatermarks(FromSource(env, src).SetParallelism(1).WithCodec(evCodec),
				MonotonousTimestamps(func(e ev) int64 { return e.TS }))
		}
		s = s.SetParallelism(1).WithCodec(evCodec)
		w := Window(KeyBy(s, func(e ev) string { return e.Key }), TumblingEventTimeWindows(20*time.Millisecond))
		sums := ReduceWindows(w, func(a, b ev) ev { return ev{a.Key, a.TS, a.Val + b.Val} },
			func(k string, win TimeWindow, e ev) string { return fmt.Sprintf("%s[%d]=%d", k, win.Start, e.Val) })
		got, lateData := &gathered[string]{}, &gathered[ev]{}
		SinkTo(sums, got)
		SinkTo(LateData(w), lateData)
		if err := env.Execute(context.Background(), "split-windows"); err != nil {
			t.Fatal(err)
		}
		return got.strings(), lateData.strings()
	}
	var want []string
	for _, id := range []string{"a", "b"} {
		for start := 0; start < 100; start += 20 {
			want = append(want, fmt.Sprintf("%s[%d]=4", id, start))
		}
	}
	slices.Sort(want)
	results, late := run(t, true)
	if !slices.Equal(results, want) || len(late) != 0 {
		t.Fatalf("per-split watermarks: windows %v (want %v), late records %v (want none)", results, want, late)
	}
	results, late = run(t, false)
	if len(late) == 0 || slices.Equal(results, want) {
		t.Fatalf("one generator for the subtask: windows %v, late %v; want b's records late (the control case is broken)", results, late)
	}
	t.Logf("one generator for the subtask loses %d of b's records as late", len(late))
}

// AssignTimestampsAndWatermarks refuses a strategy without a timestamp
// function, which only FromSourceWithWatermarks accepts.
func TestAssignTimestampsAndWatermarksNeedsTimestampFunction(t *testing.T) {
	env := NewEnvironment(Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	s := FromSource(env, pacedSource{})
	SinkTo(AssignTimestampsAndWatermarks(s, BoundedOutOfOrderness[int64](time.Second, nil)), &gathered[int64]{})
	err := env.Execute(context.Background(), "no-timestamps")
	if err == nil || !strings.Contains(err.Error(), "no timestamp function") || !strings.Contains(err.Error(), "FromSourceWithWatermarks") {
		t.Fatalf("Execute = %v, want the missing timestamp function named", err)
	}
}

// A reader that collects records of no split, through
// FromSourceWithWatermarks with a strategy without a timestamp function,
// gives an event-time window records without timestamps: the job fails,
// and the error says how to give them one in both ways.
func TestFromSourceWithWatermarksNoTimestampWindowError(t *testing.T) {
	clk := clock.NewManual(time.UnixMilli(0))
	env := testEnv(t, BackendHashMap, clk)
	src := steppedEvents{events: []ev{{"a", 1, 1}, {"a", 2, 1}}, clk: clk, step: time.Millisecond}
	s := FromSourceWithWatermarks(env, src, MonotonousTimestamps[ev](nil)).SetParallelism(1).WithCodec(evCodec)
	w := Window(KeyBy(s, func(e ev) string { return e.Key }), TumblingEventTimeWindows(20*time.Millisecond))
	SinkTo(ReduceWindows(w, func(a, b ev) ev { return a },
		func(k string, _ TimeWindow, _ ev) string { return k }), &gathered[string]{})
	err := env.Execute(context.Background(), "no-timestamps-window")
	if err == nil {
		t.Fatal("Execute succeeded: an event-time window took records without timestamps")
	}
	for _, want := range []string{"without a timestamp", "AssignTimestampsAndWatermarks", "FromSourceWithWatermarks", "timestamp function", "CollectWithTimestamp"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Execute = %v; want it to mention %q", err, want)
		}
	}
}
