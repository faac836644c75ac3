package state_test

import (
	"runtime"
	"testing"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/keygroup"
	"github.com/weirstream/weir/internal/state"
)

// The heap backend benchmarks follow Flink's state benchmarks
// (flink-benchmarks, state/*StateBenchmark): 500k int64 keys, max
// parallelism 128, one subtask owning every key group. Each op sets the
// current key, cycling through the keys, and does one state operation.

const (
	heapBenchKeys    = 500_000
	heapBenchMaxP    = 128
	heapBenchMapKeys = 10 // user keys per map, as Flink's mapKeyCount
)

type heapBench struct {
	b    *state.HeapBackend
	keys [][]byte
	kgs  []int
	next int
}

func newHeapBench(tb testing.TB) *heapBench {
	h := &heapBench{
		b:    state.NewHeapBackend(state.Options{KeyGroupEnd: heapBenchMaxP - 1, MaxParallelism: heapBenchMaxP}),
		keys: make([][]byte, heapBenchKeys),
		kgs:  make([]int, heapBenchKeys),
	}
	tb.Cleanup(func() { h.b.Close() })
	buf := make([]byte, 0, 8*heapBenchKeys)
	for i := range heapBenchKeys {
		buf = codec.Int64().Append(buf, int64(i))
		h.keys[i] = buf[8*i : 8*i+8 : 8*i+8]
		h.kgs[i] = keygroup.Of(h.keys[i], heapBenchMaxP)
	}
	return h
}

// start collects the garbage of the set-up, so that the timed loop does not
// share the CPU with the collector, and reports allocations.
func (h *heapBench) start(b *testing.B) {
	runtime.GC()
	b.ReportAllocs()
}

// setKey makes key i current.
func (h *heapBench) setKey(i int) { h.b.SetCurrentKey(h.keys[i], h.kgs[i]) }

// nextKey makes the next key current and returns its index.
func (h *heapBench) nextKey() int {
	i := h.next
	h.next++
	if h.next == heapBenchKeys {
		h.next = 0
	}
	h.b.SetCurrentKey(h.keys[i], h.kgs[i])
	return i
}

func (h *heapBench) value(tb testing.TB) state.Value[int64] {
	v, err := state.NewValue(h.b, state.ValueDescriptor[int64]{Name: "value"})
	if err != nil {
		tb.Fatal(err)
	}
	for i := range heapBenchKeys {
		h.setKey(i)
		v.Update(int64(i))
	}
	return v
}

func BenchmarkHeapValueGet(b *testing.B) {
	h := newHeapBench(b)
	v := h.value(b)
	h.start(b)
	var sum int64
	for b.Loop() {
		h.nextKey()
		x, _, _ := v.Get()
		sum += x
	}
	_ = sum
}

func BenchmarkHeapValueUpdate(b *testing.B) {
	h := newHeapBench(b)
	v := h.value(b)
	h.start(b)
	for b.Loop() {
		i := h.nextKey()
		v.Update(int64(i))
	}
}

func BenchmarkHeapListAdd(b *testing.B) {
	h := newHeapBench(b)
	l, err := state.NewList(h.b, state.ListDescriptor[int64]{Name: "list"})
	if err != nil {
		b.Fatal(err)
	}
	for i := range heapBenchKeys {
		h.setKey(i)
		l.Add(int64(i))
	}
	h.start(b)
	for b.Loop() {
		i := h.nextKey()
		l.Add(int64(i))
	}
}

func (h *heapBench) mapState(tb testing.TB) state.Map[int64, int64] {
	m, err := state.NewMap(h.b, state.MapDescriptor[int64, int64]{Name: "map"})
	if err != nil {
		tb.Fatal(err)
	}
	for i := range heapBenchKeys {
		h.setKey(i)
		for uk := range int64(heapBenchMapKeys) {
			m.Put(uk, uk)
		}
	}
	return m
}

func BenchmarkHeapMapPut(b *testing.B) {
	h := newHeapBench(b)
	m := h.mapState(b)
	h.start(b)
	for n := 0; b.Loop(); n++ {
		i := h.nextKey()
		m.Put(int64(n%heapBenchMapKeys), int64(i))
	}
}

func BenchmarkHeapMapGet(b *testing.B) {
	h := newHeapBench(b)
	m := h.mapState(b)
	h.start(b)
	var sum int64
	for n := 0; b.Loop(); n++ {
		h.nextKey()
		x, _, _ := m.Get(int64(n % heapBenchMapKeys))
		sum += x
	}
	_ = sum
}

// BenchmarkHeapBaselineGoMap is the floor the value benchmarks compare
// with: a bare lookup in Go maps laid out like the heap backend's (one
// map[string] per key group, 16-byte values, the same keys), without any
// state API around it.
func BenchmarkHeapBaselineGoMap(b *testing.B) {
	h := newHeapBench(b)
	type entry struct {
		p *byte
		v int64
	}
	ms := make([]map[string]entry, heapBenchMaxP)
	for i := range ms {
		ms[i] = map[string]entry{}
	}
	for i, k := range h.keys {
		ms[h.kgs[i]][string(k)] = entry{v: int64(i)}
	}
	h.start(b)
	var sum int64
	i := 0
	for b.Loop() {
		sum += ms[h.kgs[i]][string(h.keys[i])].v
		if i++; i == heapBenchKeys {
			i = 0
		}
	}
	_ = sum
}
