package state

import (
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/keygroup"
)

// The Pebble benchmarks follow Flink's state benchmarks
// (flink-benchmarks, StateBenchmarkConstants): 500,000 int64 keys spread
// over 128 key groups, state pre-populated for every key, and every
// operation setting the current key (cycling through the keys) before one
// state access.
const (
	pebbleBenchKeyCount    = 500_000
	pebbleBenchMaxP        = 128
	pebbleBenchMapKeyCount = 10
)

type pebbleBenchKeySet struct {
	keys   [][]byte
	groups []int
}

func newPebbleBenchKeys() pebbleBenchKeySet {
	c := codec.Int64()
	k := pebbleBenchKeySet{keys: make([][]byte, pebbleBenchKeyCount), groups: make([]int, pebbleBenchKeyCount)}
	for i := range pebbleBenchKeyCount {
		k.keys[i] = c.Append(nil, int64(i))
		k.groups[i] = keygroup.Of(k.keys[i], pebbleBenchMaxP)
	}
	return k
}

// set makes key i (mod the key count) current.
func (k *pebbleBenchKeySet) set(b *PebbleBackend, i int) {
	i %= pebbleBenchKeyCount
	b.SetCurrentKey(k.keys[i], k.groups[i])
}

func newPebbleBenchBackend(tb testing.TB) *PebbleBackend {
	b, err := NewPebbleBackend(Options{KeyGroupEnd: pebbleBenchMaxP - 1, MaxParallelism: pebbleBenchMaxP, Dir: tb.TempDir() + "/db"})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = b.Close() })
	return b
}

func newPebbleBenchValue(tb testing.TB) (*PebbleBackend, pebbleBenchKeySet, Value[int64]) {
	b, keys := newPebbleBenchBackend(tb), newPebbleBenchKeys()
	v, err := NewValue(b, ValueDescriptor[int64]{Name: "v"})
	if err != nil {
		tb.Fatal(err)
	}
	for i := range pebbleBenchKeyCount {
		keys.set(b, i)
		if err := v.Update(int64(i)); err != nil {
			tb.Fatal(err)
		}
	}
	return b, keys, v
}

// pebbleBenchLoop runs op(0), op(1), ... under bb.Loop and reports, next
// to the wall time, the process's CPU time per operation (cpu-ns/op,
// Pebble's background flushes and compactions included), which says more
// than the wall time on a machine shared with other work.
func pebbleBenchLoop(bb *testing.B, op func(i int)) {
	bb.ReportAllocs()
	cpu := pebbleProcessCPU()
	i := 0
	for bb.Loop() {
		op(i)
		i++
	}
	if cpu > 0 {
		bb.ReportMetric(float64(pebbleProcessCPU()-cpu)/float64(i), "cpu-ns/op")
	}
}

func BenchmarkPebbleValueGet(bb *testing.B) {
	b, keys, v := newPebbleBenchValue(bb)
	pebbleBenchLoop(bb, func(i int) {
		keys.set(b, i)
		if _, ok, err := v.Get(); !ok || err != nil {
			bb.Fatal(ok, err)
		}
	})
}

func BenchmarkPebbleValueUpdate(bb *testing.B) {
	b, keys, v := newPebbleBenchValue(bb)
	pebbleBenchLoop(bb, func(i int) {
		keys.set(b, i)
		if err := v.Update(int64(i)); err != nil {
			bb.Fatal(err)
		}
	})
}

func BenchmarkPebbleListAdd(bb *testing.B) {
	b, keys := newPebbleBenchBackend(bb), newPebbleBenchKeys()
	l, err := NewList(b, ListDescriptor[int64]{Name: "l"})
	if err != nil {
		bb.Fatal(err)
	}
	for i := range pebbleBenchKeyCount {
		keys.set(b, i)
		if err := l.Add(int64(i)); err != nil {
			bb.Fatal(err)
		}
	}
	pebbleBenchLoop(bb, func(i int) {
		keys.set(b, i)
		if err := l.Add(int64(i)); err != nil {
			bb.Fatal(err)
		}
	})
}

func newPebbleBenchMap(tb testing.TB) (*PebbleBackend, pebbleBenchKeySet, Map[int64, int64]) {
	b, keys := newPebbleBenchBackend(tb), newPebbleBenchKeys()
	m, err := NewMap(b, MapDescriptor[int64, int64]{Name: "m"})
	if err != nil {
		tb.Fatal(err)
	}
	for i := range pebbleBenchKeyCount {
		keys.set(b, i)
		for j := range pebbleBenchMapKeyCount {
			if err := m.Put(int64(j), int64(i)); err != nil {
				tb.Fatal(err)
			}
		}
	}
	return b, keys, m
}

func BenchmarkPebbleMapPut(bb *testing.B) {
	b, keys, m := newPebbleBenchMap(bb)
	pebbleBenchLoop(bb, func(i int) {
		keys.set(b, i)
		if err := m.Put(int64(i%(2*pebbleBenchMapKeyCount)), int64(i)); err != nil {
			bb.Fatal(err)
		}
	})
}

func BenchmarkPebbleMapGet(bb *testing.B) {
	b, keys, m := newPebbleBenchMap(bb)
	pebbleBenchLoop(bb, func(i int) {
		keys.set(b, i)
		if _, ok, err := m.Get(int64(i % pebbleBenchMapKeyCount)); !ok || err != nil {
			bb.Fatal(ok, err)
		}
	})
}

// BenchmarkPebbleBareSet is the floor for the write benchmarks: db.Set
// without sync of value-state keys built beforehand, on a database with the
// backend's options and the same 500,000 pre-populated keys, without the
// state layer.
func BenchmarkPebbleBareSet(bb *testing.B) {
	b, keys, _ := newPebbleBenchValue(bb)
	dbKeys := make([][]byte, pebbleBenchKeyCount)
	for i := range dbKeys {
		keys.set(b, i)
		dbKeys[i] = b.appendPrefix(nil, 1, nil)
	}
	var val []byte
	pebbleBenchLoop(bb, func(i int) {
		val = codec.Int64().Append(val[:0], int64(i))
		if err := b.db.Set(dbKeys[i%pebbleBenchKeyCount], val, pebble.NoSync); err != nil {
			bb.Fatal(err)
		}
	})
}

// BenchmarkPebbleBareGet is the floor for the read benchmarks: db.Get of
// value-state keys built beforehand, copying nothing, on the database of
// BenchmarkPebbleValueGet.
func BenchmarkPebbleBareGet(bb *testing.B) {
	b, keys, _ := newPebbleBenchValue(bb)
	dbKeys := make([][]byte, pebbleBenchKeyCount)
	for i := range dbKeys {
		keys.set(b, i)
		dbKeys[i] = b.appendPrefix(nil, 1, nil)
	}
	pebbleBenchLoop(bb, func(i int) {
		_, closer, err := b.db.Get(dbKeys[i%pebbleBenchKeyCount])
		if err != nil {
			bb.Fatal(err)
		}
		_ = closer.Close()
	})
}
