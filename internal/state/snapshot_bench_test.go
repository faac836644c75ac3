package state

import (
	"io"
	"testing"
)

// The snapshot benchmarks use the Pebble benchmarks' setup (500,000 int64
// keys over 128 key groups, one value state). TakeSnapshot, the part that
// runs on the task's goroutine, must not depend on the number of keys:
// the heap freezes 2 × 128 map references per state, Pebble takes a
// database snapshot and copies the state registry.

func newHeapBenchValue(tb testing.TB) (*HeapBackend, Value[int64]) {
	b := NewHeapBackend(Options{KeyGroupEnd: pebbleBenchMaxP - 1, MaxParallelism: pebbleBenchMaxP})
	keys := newPebbleBenchKeys()
	v, err := NewValue(b, ValueDescriptor[int64]{Name: "v"})
	if err != nil {
		tb.Fatal(err)
	}
	for i := range pebbleBenchKeyCount {
		b.SetCurrentKey(keys.keys[i], keys.groups[i])
		if err := v.Update(int64(i)); err != nil {
			tb.Fatal(err)
		}
	}
	return b, v
}

func benchTakeSnapshot(b *testing.B, be Backend) {
	b.ReportAllocs()
	for b.Loop() {
		s, err := TakeSnapshot(be)
		if err != nil {
			b.Fatal(err)
		}
		s.Release()
	}
}

func BenchmarkTakeSnapshotHeap(b *testing.B) {
	be, _ := newHeapBenchValue(b)
	benchTakeSnapshot(b, be)
}

func BenchmarkTakeSnapshotPebble(b *testing.B) {
	be, _, _ := newPebbleBenchValue(b)
	benchTakeSnapshot(b, be)
}

// benchWriteSnapshot measures the asynchronous part: writing the whole
// stream (reported as its size per second).
func benchWriteSnapshot(b *testing.B, be Backend) {
	s, err := TakeSnapshot(be)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Release()
	var n countingWriter
	if _, err := s.WriteStream(&n); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(n))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.WriteStream(io.Discard); err != nil {
			b.Fatal(err)
		}
	}
}

type countingWriter int

func (w *countingWriter) Write(p []byte) (int, error) {
	*w += countingWriter(len(p))
	return len(p), nil
}

func BenchmarkWriteSnapshotHeap(b *testing.B) {
	be, _ := newHeapBenchValue(b)
	benchWriteSnapshot(b, be)
}

func BenchmarkWriteSnapshotPebble(b *testing.B) {
	be, _, _ := newPebbleBenchValue(b)
	benchWriteSnapshot(b, be)
}

// Hot keys: 1,000 keys updated 2,000 times each. Pebble keeps every version
// in its memtable until a flush, and a snapshot iterator steps over them
// all, so writing the stream costs what the updates did, not what the state
// holds.
func BenchmarkWriteSnapshotPebbleHotKeys(b *testing.B) {
	be, err := NewPebbleBackend(Options{Dir: b.TempDir(), KeyGroupEnd: pebbleBenchMaxP - 1, MaxParallelism: pebbleBenchMaxP})
	if err != nil {
		b.Fatal(err)
	}
	defer be.Close()
	v, err := NewValue(be, ValueDescriptor[int64]{Name: "v"})
	if err != nil {
		b.Fatal(err)
	}
	keys := newPebbleBenchKeys()
	for round := range 2000 {
		for i := range 1000 {
			be.SetCurrentKey(keys.keys[i], keys.groups[i])
			if err := v.Update(int64(round)); err != nil {
				b.Fatal(err)
			}
		}
	}
	benchWriteSnapshot(b, be)
}
