package state

import (
	"fmt"
	"path/filepath"
	"testing"
)

// BenchmarkTakeNativeSnapshot measures the synchronous phase of a native
// checkpoint of a value state of pebbleBenchKeyCount keys: the memtable
// flush and the Pebble checkpoint (hard links). Each iteration first
// updates 1,000 keys (outside the timer), so that there is a memtable to
// flush, as between two checkpoints; the snapshot is released outside the
// timer too.
func BenchmarkTakeNativeSnapshot(bb *testing.B) {
	b, keys, v := newPebbleBenchValue(bb)
	dir := bb.TempDir()
	bb.ReportAllocs()
	n := 0
	for bb.Loop() {
		bb.StopTimer()
		for j := range 1000 {
			keys.set(b, n*1000+j)
			if err := v.Update(int64(n)); err != nil {
				bb.Fatal(err)
			}
		}
		bb.StartTimer()
		snap, err := b.TakeNativeSnapshot(filepath.Join(dir, fmt.Sprint(n)))
		if err != nil {
			bb.Fatal(err)
		}
		bb.StopTimer()
		if n == 0 {
			bb.ReportMetric(float64(len(snap.Files)), "files")
		}
		if err := snap.Release(); err != nil {
			bb.Fatal(err)
		}
		n++
		bb.StartTimer()
	}
}
