package state_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/state"
	"github.com/weirstream/weir/internal/state/statetest"
)

func TestHeapConformance(t *testing.T) {
	statetest.Run(t, func(t *testing.T, opts state.Options) state.Backend {
		return state.NewHeapBackend(opts)
	})
}

func TestHeapKeyGroupOutOfRangePanics(t *testing.T) {
	b := state.NewHeapBackend(state.Options{KeyGroupStart: 10, KeyGroupEnd: 20, MaxParallelism: 128})
	defer b.Close()
	for _, kg := range []int{9, 21, -1} {
		func() {
			defer func() {
				r := recover()
				if r == nil || !strings.Contains(fmt.Sprint(r), "outside the backend's range [10, 20]") {
					t.Errorf("SetCurrentKey with key group %d: panic %v", kg, r)
				}
			}()
			b.SetCurrentKey([]byte("k"), kg)
		}()
	}
	b.SetCurrentKey([]byte("k"), 10)
	b.SetCurrentKey([]byte("k"), 20)
}

func TestHeapInvalidRangePanics(t *testing.T) {
	for _, o := range []state.Options{
		{KeyGroupStart: 5, KeyGroupEnd: 4, MaxParallelism: 128},
		{KeyGroupStart: -1, KeyGroupEnd: 4, MaxParallelism: 128},
		{KeyGroupStart: 0, KeyGroupEnd: 128, MaxParallelism: 128},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("NewHeapBackend(%+v) did not panic", o)
				}
			}()
			state.NewHeapBackend(o)
		}()
	}
}

// TestHeapAllocs checks that accesses to existing entries do not allocate.
func TestHeapAllocs(t *testing.T) {
	if testing.CoverMode() != "" {
		t.Skip("coverage instrumentation allocates")
	}
	b := state.NewHeapBackend(state.Options{KeyGroupEnd: 127, MaxParallelism: 128})
	defer b.Close()
	v := must1[state.Value[int64]](t)(state.NewValue(b, state.ValueDescriptor[int64]{Name: "v"}))
	vt := must1[state.Value[int64]](t)(state.NewValue(b, state.ValueDescriptor[int64]{Name: "vt", TTL: state.TTLConfig{TTL: time.Hour, UpdateType: state.OnReadAndWrite}}))
	m := must1[state.Map[string, int64]](t)(state.NewMap(b, state.MapDescriptor[string, int64]{Name: "m"}))
	l := must1[state.List[int64]](t)(state.NewList(b, state.ListDescriptor[int64]{Name: "l"}))
	var keys [][]byte
	var kgs []int
	for i := range 100 {
		kb, kg := statetest.KeyBytes(fmt.Sprint(i))
		keys, kgs = append(keys, kb), append(kgs, kg)
		b.SetCurrentKey(kb, kg)
		v.Update(1)
		vt.Update(1)
		m.Put("a", 1)
		l.Add(1)
	}
	ns := []byte("ns")
	i := 0
	next := func() {
		i = (i + 1) % len(keys)
		b.SetCurrentKey(keys[i], kgs[i])
	}
	for name, f := range map[string]func(){
		"value get":       func() { next(); v.Get() },
		"value update":    func() { next(); v.Update(int64(i)) },
		"ttl value get":   func() { next(); vt.Get() },
		"ttl value write": func() { next(); vt.Update(2) },
		"map get":         func() { next(); m.Get("a") },
		"map put":         func() { next(); m.Put("a", int64(i)) },
		"map contains":    func() { next(); m.Contains("a") },
		"list get":        func() { next(); l.Get() },
		"namespace":       func() { next(); v.SetNamespace(ns); v.Get(); v.SetNamespace(nil) },
	} {
		if n := testing.AllocsPerRun(1000, f); n != 0 {
			t.Errorf("%s: %v allocations per run, want 0", name, n)
		}
	}
}

// TestHeapCleanupBudget checks that the budget counts entries examined:
// with only expired entries, every call with budget 1 removes exactly one.
func TestHeapCleanupBudget(t *testing.T) {
	clk := statetest.NewClock()
	b := newFullHeap(t, clk)
	ttl := state.TTLConfig{TTL: time.Second}
	must1[state.Value[int64]](t)(state.NewValue(b, state.ValueDescriptor[int64]{Name: "plain"}))
	v := must1[state.Value[int64]](t)(state.NewValue(b, state.ValueDescriptor[int64]{Name: "v", TTL: ttl}))
	l := must1[state.List[int64]](t)(state.NewList(b, state.ListDescriptor[int64]{Name: "l", TTL: ttl}))
	const n = 10
	for i := range n {
		kb, kg := statetest.KeyBytes(fmt.Sprint(i))
		b.SetCurrentKey(kb, kg)
		v.Update(1)
		l.SetNamespace([]byte("ns"))
		l.AddAll([]int64{1, 2, 3}) // one entry of three elements
	}
	clk.Advance(time.Second)
	for call := range 2 * n {
		if got := must1[int](t)(b.CleanupExpired(1)); got != 1 && got != 3 {
			t.Fatalf("call %d: CleanupExpired(1) removed %d, want one entry (1 value or 3 list elements)", call, got)
		}
	}
	if got := must1[int](t)(b.CleanupExpired(1000)); got != 0 {
		t.Fatalf("CleanupExpired removed %d after everything was removed", got)
	}
}
