package weir

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/clock"
)

// timeoutFn emits, per key, the sum of the values seen once the watermark
// passes 10ms after the key's first record (an event-time timer), using
// value state and the record timestamps.
type timeoutFn struct {
	sum   *ValueState[int64]
	first *ValueState[int64]
}

func (f *timeoutFn) Open(ctx *KeyedContext[string, string]) error {
	var err error
	if f.sum, err = GetValueState(ctx, ValueStateDescriptor[int64]{Name: "sum"}); err != nil {
		return err
	}
	f.first, err = GetValueState(ctx, ValueStateDescriptor[int64]{Name: "first"})
	return err
}

func (f *timeoutFn) ProcessElement(ctx *KeyedContext[string, string], e ev) error {
	ts, ok := ctx.Timestamp()
	if !ok || ts != e.TS {
		return fmt.Errorf("record timestamp %d, %v; want %d", ts, ok, e.TS)
	}
	if _, seen := f.first.Value(); !seen {
		f.first.Update(ts)
		ctx.RegisterEventTimeTimer(ts + 10)
		ctx.RegisterEventTimeTimer(ts + 10) // registering twice keeps one timer
	}
	s, _ := f.sum.Value()
	f.sum.Update(s + e.Val)
	return nil
}

func (f *timeoutFn) OnTimer(ctx *KeyedContext[string, string], t Timer) error {
	s, _ := f.sum.Value()
	ts, _ := ctx.Timestamp()
	ctx.Emit(fmt.Sprintf("%s@%d(ts %d,event %v)=%d", ctx.CurrentKey(), t.Timestamp, ts, t.EventTime, s))
	f.sum.Clear()
	f.first.Clear()
	return nil
}

func TestKeyedProcessEventTimeTimersAndState(t *testing.T) {
	forBackends(t, func(t *testing.T, backend string) {
		clk := clock.NewManual(time.UnixMilli(0))
		env := testEnv(t, backend, clk)
		events := []ev{{"a", 1, 1}, {"b", 2, 10}, {"a", 5, 2}, {"a", 30, 4}, {"b", 40, 20}}
		out := KeyedProcess(eventStream(env, clk, 0, events), func() KeyedProcessFunction[string, ev, string] { return &timeoutFn{} })
		got := &gathered[string]{}
		SinkTo(out, got)
		if err := env.Execute(context.Background(), "timers"); err != nil {
			t.Fatal(err)
		}
		// The watermark follows each record (monotonous: ts-1). a30 is
		// processed before watermark 29, which fires a's timer at 11 with
		// 1+2+4 and b's at 12 with 10; b40 starts a new round for b that the
		// final watermark fires at 50.
		want := []string{"a@11(ts 11,event true)=7", "b@12(ts 12,event true)=10", "b@50(ts 50,event true)=20"}
		if g := got.strings(); !slices.Equal(g, want) {
			t.Fatalf("got %v, want %v", g, want)
		}
	})
}

// Processing-time timers fire once the task's clock has passed them (at
// their time + 1 ms, as in Flink: everything at their millisecond comes
// first).
func TestKeyedProcessProcessingTimeTimer(t *testing.T) {
	clk := clock.NewManual(time.UnixMilli(5000))
	env := testEnv(t, BackendHashMap, clk)
	src := FromSource(env, idleUntilCanceled{[]ev{{"a", 0, 1}, {"b", 0, 2}}}).SetParallelism(1).WithCodec(evCodec)
	out := KeyedProcess(KeyBy(src, func(e ev) string { return e.Key }), func() KeyedProcessFunction[string, ev, string] {
		return &ptFn{}
	}).SetParallelism(1)
	got := &gathered[string]{}
	SinkTo(out, got).SetParallelism(1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- env.Execute(ctx, "pt-timers") }()
	deadline := time.Now().Add(10 * time.Second)
	for clk.Waiters() < 2 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if len(got.strings()) != 0 {
		t.Fatal("timer fired early")
	}
	clk.Advance(101 * time.Millisecond)
	for len(got.strings()) < 2 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
	if g := got.strings(); !slices.Equal(g, []string{"a@5100", "b@5100"}) {
		t.Fatalf("got %v", g)
	}
}

type ptFn struct{}

func (ptFn) ProcessElement(ctx *KeyedContext[string, string], e ev) error {
	ctx.RegisterProcessingTimeTimer(ctx.CurrentProcessingTime() + 100)
	return nil
}

func (ptFn) OnTimer(ctx *KeyedContext[string, string], t Timer) error {
	if t.EventTime {
		return errors.New("processing-time timer reported as event time")
	}
	if ts, ok := ctx.Timestamp(); ok {
		return fmt.Errorf("processing-time timer has record timestamp %d", ts)
	}
	ctx.Emit(fmt.Sprintf("%s@%d", ctx.CurrentKey(), t.Timestamp))
	return nil
}

// Using keyed state where there is no current key fails the subtask with a
// clear error instead of touching some other key's state.
func TestKeyedStateWithoutCurrentKeyFails(t *testing.T) {
	env := testEnv(t, BackendHashMap, clock.NewManual(time.UnixMilli(0)))
	src := FromSource(env, steppedEvents{events: []ev{{"a", 1, 1}}, clk: clock.NewManual(time.UnixMilli(0))}).WithCodec(evCodec)
	out := KeyedProcess(KeyBy(src, func(e ev) string { return e.Key }), func() KeyedProcessFunction[string, ev, string] {
		return &openReads{}
	}).Name("reads-in-open")
	SinkTo(out, &gathered[string]{})
	err := env.Execute(context.Background(), "no-key")
	if err == nil || !strings.Contains(err.Error(), "no current key") || !strings.Contains(err.Error(), "reads-in-open") {
		t.Fatalf("err = %v", err)
	}
}

type openReads struct{}

func (openReads) Open(ctx *KeyedContext[string, string]) error {
	s, err := GetValueState(ctx, ValueStateDescriptor[int64]{Name: "x"})
	if err != nil {
		return err
	}
	s.Value()
	return nil
}

func (openReads) ProcessElement(*KeyedContext[string, string], ev) error { return nil }

// Operator list state holds a subtask's elements for sources, sinks and
// process functions.
func TestOperatorListState(t *testing.T) {
	env := testEnv(t, BackendHashMap, nil)
	src := FromSource(env, steppedEvents{events: []ev{{"a", 1, 1}, {"b", 2, 2}, {"c", 3, 3}}, clk: clock.NewManual(time.UnixMilli(0))}).
		SetParallelism(1).WithCodec(evCodec)
	seen := Process(src, ProcessFunc[ev, string](func(ctx *Context[string], e ev) error {
		l, err := GetListOperatorState(ctx, ListStateDescriptor[string]{Name: "seen"})
		if err != nil {
			return err
		}
		l.Add(e.Key)
		ctx.Emit(strings.Join(l.Get(), ""))
		if _, err := GetUnionListOperatorState(ctx, ListStateDescriptor[string]{Name: "seen"}); err == nil {
			return errors.New("the same name as union list state was accepted")
		}
		return nil
	})).SetParallelism(1)
	got := &gathered[string]{}
	SinkTo(seen, got).SetParallelism(1)
	if err := env.Execute(context.Background(), "operator-state"); err != nil {
		t.Fatal(err)
	}
	if g := got.strings(); !slices.Equal(g, []string{"a", "ab", "abc"}) {
		t.Fatalf("got %v", g)
	}
}
