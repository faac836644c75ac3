//go:build !race

package state

import (
	"testing"
	"time"
)

// State accesses build keys and values in the backend's scratch buffers:
// with fixed-size codecs they allocate nothing (Pebble does not either while
// everything is in the memtable). The race detector makes sync.Pool drop
// items, hence the build tag.
func TestPebbleAccessesDoNotAllocate(t *testing.T) {
	clock := &pebbleTestClock{ms: 1000}
	b := openPebbleForTest(t, Options{Clock: clock.now})
	v, err := NewValue(b, ValueDescriptor[int64]{Name: "v"})
	pebbleMust(t, err)
	tv, err := NewValue(b, ValueDescriptor[int64]{Name: "tv", TTL: TTLConfig{TTL: time.Hour, UpdateType: OnReadAndWrite}})
	pebbleMust(t, err)
	l, err := NewList(b, ListDescriptor[int64]{Name: "l"})
	pebbleMust(t, err)
	m, err := NewMap(b, MapDescriptor[int64, int64]{Name: "m", TTL: TTLConfig{TTL: time.Hour}})
	pebbleMust(t, err)
	keys := make([][]byte, 64)
	for i := range keys {
		keys[i] = []byte{byte(i), 'k'}
	}
	ns := []byte("window")
	i := 0
	for name, op := range map[string]func() error{
		"value update": func() error { return v.Update(int64(i)) },
		"value get":    func() error { _, _, err := v.Get(); return err },
		"ttl update":   func() error { return tv.Update(int64(i)) },
		"ttl get":      func() error { clock.ms++; _, _, err := tv.Get(); return err },
		"value clear":  func() error { return v.Clear() },
		"list add":     func() error { return l.Add(int64(i)) },
		"map put":      func() error { return m.Put(int64(i%4), int64(i)) },
		"map get":      func() error { _, _, err := m.Get(int64(i % 4)); return err },
		"map contains": func() error { _, err := m.Contains(int64(i % 8)); return err },
		"map remove":   func() error { return m.Remove(int64(i % 8)) },
	} {
		v.SetNamespace(ns)
		allocs := testing.AllocsPerRun(1000, func() {
			i++
			b.SetCurrentKey(keys[i%len(keys)], i%128)
			if err := op(); err != nil {
				t.Fatal(err)
			}
		})
		if allocs > 0 {
			t.Errorf("%s: %v allocations per access", name, allocs)
		}
	}
}
