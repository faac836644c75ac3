package statetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/state"
)

const ttlDur = 10 * time.Second

func ttlConfig(u state.TTLUpdateType, vis state.TTLVisibility) state.TTLConfig {
	return state.TTLConfig{TTL: ttlDur, UpdateType: u, Visibility: vis}
}

var (
	ttlWrite         = ttlConfig(state.OnCreateAndWrite, state.NeverReturnExpired)
	ttlRead          = ttlConfig(state.OnReadAndWrite, state.NeverReturnExpired)
	ttlReturnExpired = ttlConfig(state.OnCreateAndWrite, state.ReturnExpiredIfNotCleanedUp)
)

func testTTL(t *testing.T, nb NewBackend) {
	for _, tc := range []struct {
		name string
		fn   func(*testing.T, NewBackend)
	}{
		{"ValueExpiry", testTTLValueExpiry},
		{"ValueRefreshOnWrite", testTTLValueRefreshOnWrite},
		{"ValueNoRefreshOnRead", testTTLValueNoRefreshOnRead},
		{"ValueRefreshOnRead", testTTLValueRefreshOnRead},
		{"ValueReturnExpired", testTTLValueReturnExpired},
		{"Cleanup", testTTLCleanup},
		{"CleanupBudget", testTTLCleanupBudget},
		{"List", testTTLList},
		{"ListReturnExpired", testTTLListReturnExpired},
		{"ListRefreshOnRead", testTTLListRefreshOnRead},
		{"Map", testTTLMap},
		{"MapReturnExpired", testTTLMapReturnExpired},
		{"MapRefreshOnRead", testTTLMapRefreshOnRead},
		{"CleanupListMap", testTTLCleanupListMap},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, nb) })
	}
}

func testTTLValueExpiry(t *testing.T, nb NewBackend) {
	e := openFull(t, nb)
	v := must1[state.Value[int64]](t)(state.NewValue(e.B, state.ValueDescriptor[int64]{Name: "v", TTL: ttlWrite}))
	e.Key("k")
	must(t, v.Update(1))
	e.Clock.Advance(5 * time.Second)
	e.Key("later")
	must(t, v.Update(2))
	e.Clock.Advance(ttlDur - 5*time.Second - time.Millisecond)
	e.Key("k")
	wantValue(t, v, 1)
	e.Clock.Advance(time.Millisecond) // exactly TTL after the write
	wantNoValue[int64](t, v)
	wantNoValue[int64](t, v)
	e.Key("later")
	wantValue(t, v, 2)
	e.Key("k")
	must(t, v.Update(3))
	wantValue(t, v, 3)
	must(t, v.Clear())
	wantNoValue[int64](t, v)
}

func testTTLValueRefreshOnWrite(t *testing.T, nb NewBackend) {
	e := openFull(t, nb)
	v := must1[state.Value[int64]](t)(state.NewValue(e.B, state.ValueDescriptor[int64]{Name: "v", TTL: ttlWrite}))
	r := must1[state.Reducing[int64]](t)(state.NewReducing(e.B, state.ValueDescriptor[int64]{Name: "r", TTL: ttlWrite}, func(a, b int64) int64 { return a + b }))
	e.Key("k")
	must(t, v.Update(1))
	must(t, r.Add(1))
	e.Clock.Advance(6 * time.Second)
	must(t, v.Update(2))
	must(t, r.Add(1))
	e.Clock.Advance(6 * time.Second)
	wantValue(t, v, 2)
	if got, ok, err := r.Get(); err != nil || !ok || got != 2 {
		t.Fatalf("reducing Get() = %v, %v, %v, want 2", got, ok, err)
	}
	e.Clock.Advance(4 * time.Second)
	wantNoValue[int64](t, v)
	wantNoValue[int64](t, r)
	// A reducing state whose value expired starts again.
	must(t, r.Add(5))
	if got, _, _ := r.Get(); got != 5 {
		t.Fatalf("reducing Get() after expiry = %v, want 5", got)
	}
}

func testTTLValueNoRefreshOnRead(t *testing.T, nb NewBackend) {
	e := openFull(t, nb)
	v := must1[state.Value[int64]](t)(state.NewValue(e.B, state.ValueDescriptor[int64]{Name: "v", TTL: ttlWrite}))
	e.Key("k")
	must(t, v.Update(1))
	e.Clock.Advance(6 * time.Second)
	wantValue(t, v, 1)
	e.Clock.Advance(4 * time.Second)
	wantNoValue[int64](t, v)
}

func testTTLValueRefreshOnRead(t *testing.T, nb NewBackend) {
	e := openFull(t, nb)
	v := must1[state.Value[int64]](t)(state.NewValue(e.B, state.ValueDescriptor[int64]{Name: "v", TTL: ttlRead}))
	e.Key("k")
	must(t, v.Update(1))
	e.Clock.Advance(6 * time.Second)
	wantValue(t, v, 1)
	e.Clock.Advance(6 * time.Second)
	wantValue(t, v, 1)
	e.Clock.Advance(9 * time.Second)
	wantValue(t, v, 1)
	e.Clock.Advance(ttlDur)
	wantNoValue[int64](t, v)
}

func testTTLValueReturnExpired(t *testing.T, nb NewBackend) {
	e := openFull(t, nb)
	v := must1[state.Value[int64]](t)(state.NewValue(e.B, state.ValueDescriptor[int64]{Name: "v", TTL: ttlReturnExpired}))
	for i, k := range []string{"k1", "k2"} {
		e.Key(k)
		must(t, v.Update(int64(i)))
	}
	e.Clock.Advance(ttlDur)
	e.Key("k1")
	wantValue(t, v, 0) // expired but not cleaned up: returned, and removed
	wantNoValue[int64](t, v)
	e.Clock.Advance(ttlDur)
	e.Key("k2")
	wantValue(t, v, 1)
	wantNoValue[int64](t, v)
}

// cleanupAll runs CleanupExpired with a large budget until it removes
// nothing, and returns how many it removed in all.
func cleanupAll(t testing.TB, e *Env) int {
	t.Helper()
	total := 0
	for range 10 {
		n, err := e.B.CleanupExpired(1 << 20)
		must(t, err)
		if n < 0 {
			t.Fatalf("CleanupExpired removed %d", n)
		}
		if n == 0 {
			return total
		}
		total += n
	}
	t.Fatalf("CleanupExpired still removing after 10 calls (%d removed)", total)
	return 0
}

func testTTLCleanup(t *testing.T, nb NewBackend) {
	e := openFull(t, nb)
	a := must1[state.Value[int64]](t)(state.NewValue(e.B, state.ValueDescriptor[int64]{Name: "a", TTL: ttlReturnExpired}))
	disabled := ttlReturnExpired
	disabled.DisableBackgroundCleanup = true
	d := must1[state.Value[int64]](t)(state.NewValue(e.B, state.ValueDescriptor[int64]{Name: "d", TTL: disabled}))
	plain := must1[state.Value[int64]](t)(state.NewValue(e.B, state.ValueDescriptor[int64]{Name: "plain"}))
	if n, err := e.B.CleanupExpired(100); n != 0 || err != nil {
		t.Fatalf("CleanupExpired on empty state = %d, %v", n, err)
	}
	const expired, fresh = 10, 5
	for i := range expired {
		e.Key(fmt.Sprint("old", i))
		must(t, a.Update(int64(i)))
		must(t, d.Update(int64(i)))
		must(t, plain.Update(int64(i)))
		a.SetNamespace([]byte("w")) // namespaces are cleaned up too
		must(t, a.Update(int64(i)))
		a.SetNamespace(nil)
	}
	e.Clock.Advance(5 * time.Second)
	for i := range fresh {
		e.Key(fmt.Sprint("new", i))
		must(t, a.Update(int64(i)))
		must(t, d.Update(int64(i)))
	}
	if n := cleanupAll(t, e); n != 0 {
		t.Fatalf("CleanupExpired removed %d before anything expired", n)
	}
	e.Clock.Advance(5 * time.Second)
	if n, err := e.B.CleanupExpired(0); n != 0 || err != nil {
		t.Fatalf("CleanupExpired(0) = %d, %v", n, err)
	}
	if n := cleanupAll(t, e); n != 2*expired {
		t.Fatalf("CleanupExpired removed %d, want %d", n, 2*expired)
	}
	for i := range expired {
		e.Key(fmt.Sprint("old", i))
		a.SetNamespace([]byte("w"))
		wantNoValue[int64](t, a)
		a.SetNamespace(nil)
		wantNoValue[int64](t, a)      // cleaned up
		wantValue(t, d, int64(i))     // no background cleanup: still returned
		wantValue(t, plain, int64(i)) // no TTL
	}
	for i := range fresh {
		e.Key(fmt.Sprint("new", i))
		wantValue(t, a, int64(i))
		wantValue(t, d, int64(i))
	}
}

func testTTLCleanupBudget(t *testing.T, nb NewBackend) {
	e := openFull(t, nb)
	v := must1[state.Value[int64]](t)(state.NewValue(e.B, state.ValueDescriptor[int64]{Name: "v", TTL: ttlReturnExpired}))
	// A state without TTL in between, for the cursor to pass over.
	plain := must1[state.Value[int64]](t)(state.NewValue(e.B, state.ValueDescriptor[int64]{Name: "plain"}))
	w := must1[state.Value[int64]](t)(state.NewValue(e.B, state.ValueDescriptor[int64]{Name: "w", TTL: ttlReturnExpired}))
	write := func(prefix string, n int) {
		for i := range n {
			e.Key(fmt.Sprint(prefix, i))
			must(t, v.Update(int64(i)))
			must(t, plain.Update(int64(i)))
			must(t, w.Update(int64(i)))
		}
	}
	// drain removes want entries with budget 3 per call.
	drain := func(want int) {
		t.Helper()
		total := 0
		for calls := 0; total < want; calls++ {
			if calls > 10_000 {
				t.Fatalf("removed %d of %d expired entries in %d calls with budget 3", total, want, calls)
			}
			n, err := e.B.CleanupExpired(3)
			must(t, err)
			if n < 0 || n > 3 {
				t.Fatalf("CleanupExpired(3) removed %d", n)
			}
			total += n
		}
		if total != want {
			t.Fatalf("removed %d, want %d", total, want)
		}
	}
	write("a", 20)
	e.Clock.Advance(5 * time.Second)
	write("b", 5)
	e.Clock.Advance(5 * time.Second)
	drain(2 * 20)
	for i := range 20 {
		e.Key(fmt.Sprint("a", i))
		wantNoValue[int64](t, v)
		wantNoValue[int64](t, w)
		wantValue(t, plain, int64(i))
	}
	for i := range 5 {
		e.Key(fmt.Sprint("b", i))
		wantValue(t, v, int64(i))
		wantValue(t, w, int64(i))
	}
	// The cursor wraps around: new and old entries expire and go too.
	write("c", 7)
	e.Clock.Advance(ttlDur)
	drain(2 * (5 + 7))
	if n := cleanupAll(t, e); n != 0 {
		t.Fatalf("CleanupExpired removed %d more", n)
	}
}

func testTTLList(t *testing.T, nb NewBackend) {
	e := openFull(t, nb)
	l := must1[state.List[string]](t)(state.NewList(e.B, state.ListDescriptor[string]{Name: "l", TTL: ttlWrite}))
	e.Key("k")
	must(t, l.Add("a"))
	e.Clock.Advance(5 * time.Second)
	must(t, l.Add("b"))
	must(t, l.AddAll([]string{"c", "d"}))
	e.Clock.Advance(5 * time.Second)
	wantList(t, l, []string{"b", "c", "d"})
	must(t, l.Add("e"))
	wantList(t, l, []string{"b", "c", "d", "e"})
	e.Clock.Advance(5 * time.Second)
	wantList(t, l, []string{"e"})
	e.Clock.Advance(5 * time.Second)
	wantList[string](t, l, nil)

	must(t, l.Update([]string{"x", "y"}))
	e.Clock.Advance(ttlDur - time.Millisecond)
	wantList(t, l, []string{"x", "y"})
	e.Clock.Advance(time.Millisecond)
	wantList[string](t, l, nil)

	// Adding to a list whose elements all expired.
	must(t, l.Add("p"))
	e.Clock.Advance(ttlDur)
	must(t, l.Add("q"))
	wantList(t, l, []string{"q"})
}

func testTTLListReturnExpired(t *testing.T, nb NewBackend) {
	e := openFull(t, nb)
	l := must1[state.List[string]](t)(state.NewList(e.B, state.ListDescriptor[string]{Name: "l", TTL: ttlReturnExpired}))
	e.Key("k")
	must(t, l.Add("a"))
	e.Clock.Advance(5 * time.Second)
	must(t, l.Add("b"))
	e.Clock.Advance(5 * time.Second)
	wantList(t, l, []string{"a", "b"}) // a expired: returned, and removed
	wantList(t, l, []string{"b"})
	e.Clock.Advance(5 * time.Second)
	wantList(t, l, []string{"b"})
	wantList[string](t, l, nil)
}

func testTTLListRefreshOnRead(t *testing.T, nb NewBackend) {
	e := openFull(t, nb)
	l := must1[state.List[string]](t)(state.NewList(e.B, state.ListDescriptor[string]{Name: "l", TTL: ttlRead}))
	e.Key("k")
	must(t, l.Add("a"))
	e.Clock.Advance(5 * time.Second)
	must(t, l.Add("b"))
	e.Clock.Advance(3 * time.Second)
	wantList(t, l, []string{"a", "b"}) // refreshes both
	e.Clock.Advance(9 * time.Second)
	wantList(t, l, []string{"a", "b"})
	e.Clock.Advance(ttlDur)
	wantList[string](t, l, nil)
}

func testTTLMap(t *testing.T, nb NewBackend) {
	e := openFull(t, nb)
	m := must1[state.Map[string, int64]](t)(state.NewMap(e.B, state.MapDescriptor[string, int64]{Name: "m", TTL: ttlWrite}))
	e.Key("k")
	must(t, m.Put("x", 1))
	must(t, m.Put("r", 1))
	e.Clock.Advance(5 * time.Second)
	must(t, m.Put("y", 2))
	must(t, m.Put("r", 3)) // refreshes r
	e.Clock.Advance(5 * time.Second)
	if _, ok, err := m.Get("x"); ok || err != nil {
		t.Fatalf("Get(x) after expiry = %v, %v", ok, err)
	}
	if ok, err := m.Contains("x"); ok || err != nil {
		t.Fatalf("Contains(x) after expiry = %v, %v", ok, err)
	}
	wantMap(t, m, map[string]int64{"y": 2, "r": 3})
	e.Clock.Advance(5 * time.Second)
	wantMap(t, m, map[string]int64{})
	must(t, m.Put("z", 4))
	wantMap(t, m, map[string]int64{"z": 4})

	// Expired entries are not returned by Range even if never read.
	e.Key("k2")
	must(t, m.Put("a", 1))
	must(t, m.Put("b", 2))
	e.Clock.Advance(5 * time.Second)
	must(t, m.Put("c", 3))
	e.Clock.Advance(5 * time.Second)
	if got := mapContents(t, m); len(got) != 1 || got["c"] != 3 {
		t.Fatalf("Range after expiry yielded %v, want map[c:3]", got)
	}
	e.Clock.Advance(5 * time.Second)
	if empty, err := m.IsEmpty(); !empty || err != nil {
		t.Fatalf("IsEmpty() after all expired = %v, %v", empty, err)
	}

	// An entry lives until exactly TTL after its write.
	e.Key("edge")
	must(t, m.Put("a", 1))
	e.Clock.Advance(ttlDur - time.Millisecond)
	wantMap(t, m, map[string]int64{"a": 1})
	e.Clock.Advance(time.Millisecond)
	wantMap(t, m, map[string]int64{})
}

func testTTLMapReturnExpired(t *testing.T, nb NewBackend) {
	e := openFull(t, nb)
	m := must1[state.Map[string, int64]](t)(state.NewMap(e.B, state.MapDescriptor[string, int64]{Name: "m", TTL: ttlReturnExpired}))
	e.Key("k")
	must(t, m.Put("x", 1))
	e.Clock.Advance(5 * time.Second)
	must(t, m.Put("y", 2))
	e.Clock.Advance(5 * time.Second)
	if v, ok, err := m.Get("x"); !ok || v != 1 || err != nil {
		t.Fatalf("Get(x) expired, not cleaned = %v, %v, %v, want 1, true", v, ok, err)
	}
	if _, ok, err := m.Get("x"); ok || err != nil {
		t.Fatalf("Get(x) after it was returned expired = %v, %v, want false", ok, err)
	}

	e.Key("k2")
	must(t, m.Put("a", 1))
	e.Clock.Advance(5 * time.Second)
	must(t, m.Put("b", 2))
	e.Clock.Advance(5 * time.Second)
	if got := mapContents(t, m); len(got) != 2 {
		t.Fatalf("Range with an expired entry not cleaned up yielded %v, want a and b", got)
	}
	if got := mapContents(t, m); len(got) != 1 || got["b"] != 2 {
		t.Fatalf("Range after Range returned expired a yielded %v, want map[b:2]", got)
	}
}

func testTTLMapRefreshOnRead(t *testing.T, nb NewBackend) {
	e := openFull(t, nb)
	m := must1[state.Map[string, int64]](t)(state.NewMap(e.B, state.MapDescriptor[string, int64]{Name: "m", TTL: ttlRead}))
	e.Key("k")
	must(t, m.Put("x", 1))
	must(t, m.Put("y", 2))
	must(t, m.Put("z", 3))
	e.Clock.Advance(6 * time.Second)
	if v, ok, _ := m.Get("x"); !ok || v != 1 {
		t.Fatalf("Get(x) = %v, %v", v, ok)
	}
	if ok, _ := m.Contains("y"); !ok {
		t.Fatal("Contains(y) = false")
	}
	e.Clock.Advance(6 * time.Second) // z expired; x and y were refreshed
	wantMap(t, m, map[string]int64{"x": 1, "y": 2})
	e.Clock.Advance(9 * time.Second) // Range and Get refreshed x and y
	if got := mapContents(t, m); len(got) != 2 {
		t.Fatalf("Range yielded %v, want x and y", got)
	}
	e.Clock.Advance(ttlDur)
	wantMap(t, m, map[string]int64{})
}

func testTTLCleanupListMap(t *testing.T, nb NewBackend) {
	e := openFull(t, nb)
	l := must1[state.List[string]](t)(state.NewList(e.B, state.ListDescriptor[string]{Name: "l", TTL: ttlReturnExpired}))
	m := must1[state.Map[string, int64]](t)(state.NewMap(e.B, state.MapDescriptor[string, int64]{Name: "m", TTL: ttlReturnExpired}))
	disabled := ttlReturnExpired
	disabled.DisableBackgroundCleanup = true
	dl := must1[state.List[string]](t)(state.NewList(e.B, state.ListDescriptor[string]{Name: "dl", TTL: disabled}))
	dm := must1[state.Map[string, int64]](t)(state.NewMap(e.B, state.MapDescriptor[string, int64]{Name: "dm", TTL: disabled}))
	for _, k := range []string{"partly", "fully"} {
		e.Key(k)
		must(t, l.Add("a"))
		must(t, dl.Add("a"))
		must(t, m.Put("x", 1))
		must(t, dm.Put("x", 1))
	}
	e.Clock.Advance(5 * time.Second)
	e.Key("partly")
	must(t, l.Add("b"))
	must(t, dl.Add("b"))
	must(t, m.Put("y", 2))
	must(t, dm.Put("y", 2))
	e.Clock.Advance(5 * time.Second)
	if n := cleanupAll(t, e); n == 0 {
		t.Fatal("CleanupExpired removed nothing")
	}
	e.Key("partly")
	wantList(t, l, []string{"b"})
	if got := mapContents(t, m); len(got) != 1 || got["y"] != 2 {
		t.Fatalf("map after cleanup: %v, want map[y:2]", got)
	}
	wantList(t, dl, []string{"a", "b"})
	if got := mapContents(t, dm); len(got) != 2 {
		t.Fatalf("map without background cleanup: %v, want x and y", got)
	}
	e.Key("fully")
	wantList[string](t, l, nil)
	if empty, _ := m.IsEmpty(); !empty {
		t.Fatalf("fully expired map not empty after cleanup: %v", mapContents(t, m))
	}
	wantList(t, dl, []string{"a"})
	if empty, _ := dm.IsEmpty(); empty {
		t.Fatal("map without background cleanup is empty after cleanup")
	}
}
