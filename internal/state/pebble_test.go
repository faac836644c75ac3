package state_test

import (
	"errors"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/weirstream/weir/internal/state"
	"github.com/weirstream/weir/internal/state/statetest"
)

func TestPebbleConformance(t *testing.T) {
	statetest.Run(t, func(t *testing.T, opts state.Options) state.Backend {
		b, err := state.NewPebbleBackend(opts)
		if err != nil {
			t.Fatal(err)
		}
		return b
	})
}

// pebbleClock is a TTL clock the test drives, in Unix milliseconds.
type pebbleClock struct{ ms int64 }

func (c *pebbleClock) now() time.Time { return time.UnixMilli(c.ms) }

func newPebble(t *testing.T, clock *pebbleClock) *state.PebbleBackend {
	t.Helper()
	opts := state.Options{KeyGroupEnd: 127, MaxParallelism: 128, Dir: t.TempDir() + "/db"}
	if clock != nil {
		opts.Clock = clock.now
	}
	b, err := state.NewPebbleBackend(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Error(err)
		}
	})
	return b
}

func pebbleOK(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func pebbleWantValue[T comparable](t *testing.T, v state.Value[T], want T, wantOK bool) {
	t.Helper()
	got, ok, err := v.Get()
	pebbleOK(t, err)
	if ok != wantOK || got != want {
		t.Fatalf("Get = %v, %v; want %v, %v", got, ok, want, wantOK)
	}
}

func pebbleEntries[K comparable, V any](t *testing.T, m state.Map[K, V]) map[K]V {
	t.Helper()
	got := map[K]V{}
	pebbleOK(t, m.Range(func(k K, v V) bool { got[k] = v; return true }))
	return got
}

func TestPebbleValueKeysAndNamespaces(t *testing.T) {
	b := newPebble(t, nil)
	v, err := state.NewValue(b, state.ValueDescriptor[string]{Name: "v"})
	pebbleOK(t, err)
	b.SetCurrentKey([]byte("a"), 1)
	pebbleWantValue(t, v, "", false)
	pebbleOK(t, v.Update("a0"))
	v.SetNamespace([]byte("w1"))
	pebbleOK(t, v.Update("a1"))
	b.SetCurrentKey([]byte("b"), 1)
	pebbleWantValue(t, v, "", false)
	pebbleOK(t, v.Update("b1"))
	v.SetNamespace(nil)
	pebbleWantValue(t, v, "", false)
	b.SetCurrentKey([]byte("a"), 1)
	pebbleWantValue(t, v, "a0", true)
	v.SetNamespace([]byte("w1"))
	pebbleWantValue(t, v, "a1", true)
	pebbleOK(t, v.Clear())
	pebbleWantValue(t, v, "", false)
	v.SetNamespace([]byte{})
	pebbleWantValue(t, v, "a0", true)
	if string(b.CurrentKey()) != "a" || b.CurrentKeyGroup() != 1 {
		t.Errorf("current key %q, group %d", b.CurrentKey(), b.CurrentKeyGroup())
	}
}

func TestPebbleRegistration(t *testing.T) {
	b := newPebble(t, nil)
	v1, err := state.NewValue(b, state.ValueDescriptor[int64]{Name: "s"})
	pebbleOK(t, err)
	v2, err := state.NewValue(b, state.ValueDescriptor[int64]{Name: "s"})
	pebbleOK(t, err)
	b.SetCurrentKey([]byte("k"), 0)
	pebbleOK(t, v1.Update(5))
	pebbleWantValue(t, v2, 5, true)
	// Reducing state is a value state too.
	r, err := state.NewReducing(b, state.ValueDescriptor[int64]{Name: "s"}, func(a, b int64) int64 { return a + b })
	pebbleOK(t, err)
	pebbleOK(t, r.Add(3))
	pebbleWantValue(t, v1, 8, true)

	for name, reg := range map[string]func() error{
		"other type": func() error { _, err := state.NewValue(b, state.ValueDescriptor[int32]{Name: "s"}); return err },
		"list":       func() error { _, err := state.NewList(b, state.ListDescriptor[int64]{Name: "s"}); return err },
		"map":        func() error { _, err := state.NewMap(b, state.MapDescriptor[int64, int64]{Name: "s"}); return err },
		"ttl": func() error {
			_, err := state.NewValue(b, state.ValueDescriptor[int64]{Name: "s", TTL: state.TTLConfig{TTL: time.Second}})
			return err
		},
	} {
		if err := reg(); !errors.Is(err, state.ErrIncompatibleState) {
			t.Errorf("%s: err = %v, want ErrIncompatibleState", name, err)
		}
	}
	m1, err := state.NewMap(b, state.MapDescriptor[string, int64]{Name: "m"})
	pebbleOK(t, err)
	if _, err := state.NewMap(b, state.MapDescriptor[string, int32]{Name: "m"}); !errors.Is(err, state.ErrIncompatibleState) {
		t.Errorf("map with another value type: err = %v", err)
	}
	m2, err := state.NewMap(b, state.MapDescriptor[string, int64]{Name: "m"})
	pebbleOK(t, err)
	pebbleOK(t, m1.Put("x", 1))
	if ok, err := m2.Contains("x"); !ok || err != nil {
		t.Errorf("second handle: Contains = %v, %v", ok, err)
	}
}

func TestPebbleSetCurrentKeyOutOfRangePanics(t *testing.T) {
	b, err := state.NewPebbleBackend(state.Options{KeyGroupStart: 10, KeyGroupEnd: 20, MaxParallelism: 128, Dir: t.TempDir() + "/db"})
	pebbleOK(t, err)
	defer b.Close()
	b.SetCurrentKey([]byte("k"), 20)
	for _, g := range []int{9, 21, -1} {
		func() {
			defer func() {
				r := recover()
				if r == nil || !strings.Contains(r.(string), "outside") {
					t.Errorf("SetCurrentKey(group %d) recovered %v, want a panic", g, r)
				}
			}()
			b.SetCurrentKey([]byte("k"), g)
		}()
	}
}

func TestPebbleList(t *testing.T) {
	b := newPebble(t, nil)
	l, err := state.NewList(b, state.ListDescriptor[[]byte]{Name: "l"})
	pebbleOK(t, err)
	b.SetCurrentKey([]byte("k"), 3)
	if got, err := l.Get(); got != nil || err != nil {
		t.Fatalf("empty list: %q, %v", got, err)
	}
	pebbleOK(t, l.Add([]byte("a")))
	pebbleOK(t, l.AddAll([][]byte{[]byte("b"), nil, []byte("c")}))
	l.SetNamespace([]byte("n"))
	pebbleOK(t, l.Add([]byte("other")))
	l.SetNamespace(nil)
	got, err := l.Get()
	pebbleOK(t, err)
	if want := [][]byte{[]byte("a"), []byte("b"), nil, []byte("c")}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("Get = %q, want %q", got, want)
	}
	pebbleOK(t, l.Update([][]byte{[]byte("z")}))
	pebbleOK(t, l.Add([]byte("y")))
	got, err = l.Get()
	pebbleOK(t, err)
	if want := [][]byte{[]byte("z"), []byte("y")}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("Get after Update = %q, want %q", got, want)
	}
}

func TestPebbleMap(t *testing.T) {
	b := newPebble(t, nil)
	m, err := state.NewMap(b, state.MapDescriptor[string, int64]{Name: "m"})
	pebbleOK(t, err)
	other, err := state.NewMap(b, state.MapDescriptor[string, int64]{Name: "other"})
	pebbleOK(t, err)
	b.SetCurrentKey([]byte("k"), 3)
	if empty, err := m.IsEmpty(); !empty || err != nil {
		t.Fatalf("IsEmpty = %v, %v", empty, err)
	}
	want := map[string]int64{"a": 1, "": 2, "b\xff": 3, "long key": 4}
	for k, v := range want {
		pebbleOK(t, m.Put(k, v))
	}
	// Neighbours in key space: another state, another key with our key as
	// prefix, another namespace.
	pebbleOK(t, other.Put("x", 9))
	b.SetCurrentKey([]byte("k\x00"), 3)
	pebbleOK(t, m.Put("y", 9))
	b.SetCurrentKey([]byte("k"), 3)
	m.SetNamespace([]byte("ns"))
	pebbleOK(t, m.Put("z", 9))
	m.SetNamespace(nil)

	if got := pebbleEntries(t, m); !maps.Equal(got, want) {
		t.Errorf("Range = %v, want %v", got, want)
	}
	if v, ok, err := m.Get("b\xff"); v != 3 || !ok || err != nil {
		t.Errorf("Get = %v, %v, %v", v, ok, err)
	}
	if ok, err := m.Contains("zz"); ok || err != nil {
		t.Errorf("Contains(zz) = %v, %v", ok, err)
	}
	pebbleOK(t, m.Remove("a"))
	delete(want, "a")
	n := 0
	pebbleOK(t, m.Range(func(string, int64) bool { n++; return false }))
	if n != 1 {
		t.Errorf("Range visited %d entries after fn returned false", n)
	}
	// fn may read other states and the same map.
	pebbleOK(t, m.Range(func(k string, v int64) bool {
		if got, ok, err := m.Get(k); got != v || !ok || err != nil {
			t.Errorf("Get(%q) inside Range = %v, %v, %v", k, got, ok, err)
		}
		if got := pebbleEntries(t, m); !maps.Equal(got, want) {
			t.Errorf("nested Range = %v", got)
		}
		return true
	}))
	pebbleOK(t, m.Clear())
	if empty, err := m.IsEmpty(); !empty || err != nil {
		t.Fatalf("IsEmpty after Clear = %v, %v", empty, err)
	}
	if got := pebbleEntries(t, other); len(got) != 1 {
		t.Errorf("Clear touched another state: %v", got)
	}
	m.SetNamespace([]byte("ns"))
	if got := pebbleEntries(t, m); len(got) != 1 {
		t.Errorf("Clear touched another namespace: %v", got)
	}
	b.SetCurrentKey([]byte("k\x00"), 3)
	m.SetNamespace(nil)
	if got := pebbleEntries(t, m); len(got) != 1 {
		t.Errorf("Clear touched another key: %v", got)
	}
}

func TestPebbleValueTTL(t *testing.T) {
	clock := &pebbleClock{ms: 1_000}
	b := newPebble(t, clock)
	ttl := state.TTLConfig{TTL: 100 * time.Millisecond}
	v, err := state.NewValue(b, state.ValueDescriptor[int64]{Name: "v", TTL: ttl})
	pebbleOK(t, err)
	ttl.UpdateType = state.OnReadAndWrite
	rw, err := state.NewValue(b, state.ValueDescriptor[int64]{Name: "rw", TTL: ttl})
	pebbleOK(t, err)
	ttl.UpdateType, ttl.Visibility = state.OnCreateAndWrite, state.ReturnExpiredIfNotCleanedUp
	ret, err := state.NewValue(b, state.ValueDescriptor[int64]{Name: "ret", TTL: ttl})
	pebbleOK(t, err)

	b.SetCurrentKey([]byte("k"), 0)
	pebbleOK(t, v.Update(1))
	pebbleOK(t, rw.Update(2))
	pebbleOK(t, ret.Update(3))
	clock.ms += 60
	pebbleWantValue(t, v, 1, true)
	pebbleWantValue(t, rw, 2, true) // refreshed to 1060
	clock.ms += 40                  // 1100: stamped at 1000 expires
	pebbleWantValue(t, v, 0, false)
	pebbleWantValue(t, rw, 2, true)
	pebbleWantValue(t, ret, 3, true) // expired but not cleaned up yet: returned once...
	pebbleWantValue(t, ret, 0, false)
	clock.ms += 99
	pebbleWantValue(t, rw, 2, true)
	pebbleOK(t, v.Update(4)) // writing restamps
	clock.ms += 99
	pebbleWantValue(t, v, 4, true)
	clock.ms += 1
	pebbleWantValue(t, v, 0, false)
	clock.ms += 1000
	pebbleWantValue(t, rw, 0, false)
}

func TestPebbleListTTL(t *testing.T) {
	clock := &pebbleClock{ms: 1_000}
	b := newPebble(t, clock)
	l, err := state.NewList(b, state.ListDescriptor[string]{Name: "l", TTL: state.TTLConfig{TTL: 10 * time.Millisecond}})
	pebbleOK(t, err)
	b.SetCurrentKey([]byte("k"), 0)
	pebbleOK(t, l.AddAll([]string{"a", "b"}))
	clock.ms += 5
	pebbleOK(t, l.Add("c"))
	clock.ms += 5 // a and b expire
	got, err := l.Get()
	pebbleOK(t, err)
	if !slices.Equal(got, []string{"c"}) {
		t.Errorf("Get = %q, want [c]", got)
	}
	pebbleOK(t, l.Add("d"))
	clock.ms += 5 // c expires
	got, err = l.Get()
	pebbleOK(t, err)
	if !slices.Equal(got, []string{"d"}) {
		t.Errorf("Get = %q, want [d]", got)
	}
	clock.ms += 100
	if got, err := l.Get(); got != nil || err != nil {
		t.Errorf("Get of expired list = %q, %v", got, err)
	}
	if n, err := b.CleanupExpired(10); n != 0 || err != nil {
		t.Errorf("expired list was not removed on access: cleanup removed %d, %v", n, err)
	}
}

func TestPebbleMapTTL(t *testing.T) {
	clock := &pebbleClock{ms: 1_000}
	b := newPebble(t, clock)
	m, err := state.NewMap(b, state.MapDescriptor[string, int64]{Name: "m", TTL: state.TTLConfig{TTL: 10 * time.Millisecond, UpdateType: state.OnReadAndWrite}})
	pebbleOK(t, err)
	b.SetCurrentKey([]byte("k"), 0)
	pebbleOK(t, m.Put("a", 1))
	pebbleOK(t, m.Put("b", 2))
	clock.ms += 5
	pebbleOK(t, m.Put("c", 3))
	if v, ok, err := m.Get("a"); v != 1 || !ok || err != nil { // refreshes a
		t.Fatalf("Get(a) = %v, %v, %v", v, ok, err)
	}
	clock.ms += 5 // b expires
	if got, want := pebbleEntries(t, m), map[string]int64{"a": 1, "c": 3}; !maps.Equal(got, want) {
		t.Errorf("Range = %v, want %v", got, want)
	}
	if ok, err := m.Contains("b"); ok || err != nil {
		t.Errorf("Contains(b) = %v, %v", ok, err)
	}
	clock.ms += 9 // Range refreshed a and c at 1010
	if got := pebbleEntries(t, m); len(got) != 2 {
		t.Errorf("Range = %v, want a and c", got)
	}
	clock.ms += 100
	if empty, err := m.IsEmpty(); !empty || err != nil {
		t.Errorf("IsEmpty = %v, %v", empty, err)
	}
	if n, err := b.CleanupExpired(10); n != 0 || err != nil {
		t.Errorf("IsEmpty left expired entries: cleanup removed %d, %v", n, err)
	}
}

// Close deletes the working directory and stops Pebble's goroutines.
func TestPebbleCloseDeletesDir(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	dir := t.TempDir() + "/sub/db"
	b, err := state.NewPebbleBackend(state.Options{KeyGroupEnd: 0, MaxParallelism: 1, Dir: dir})
	pebbleOK(t, err)
	v, err := state.NewValue(b, state.ValueDescriptor[string]{Name: "v"})
	pebbleOK(t, err)
	b.SetCurrentKey([]byte("k"), 0)
	pebbleOK(t, v.Update("x"))
	if _, err := os.Stat(dir); err != nil {
		t.Fatal(err)
	}
	pebbleOK(t, b.Close())
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("after Close, stat %s: %v", dir, err)
	}
	pebbleOK(t, b.Close())
}
