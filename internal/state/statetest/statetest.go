// Package statetest is the conformance suite that every state.Backend
// implementation must pass.
//
// Run drives a backend only through the state package's public API, the
// way operators do: a key's bytes are its codec.String encoding, its key
// group is keygroup.Of of those bytes with max parallelism MaxParallelism,
// and TTL time comes from a clock the test advances. Each subtest opens its
// own backend with a fresh t.TempDir() as Options.Dir and closes it with
// t.Cleanup.
//
// Behaviour the suite pins down beyond the interface comments in package
// state:
//
//   - Registering a name twice with the same kind, types and TTL gives
//     another handle on the same stored state, with its own namespace; a
//     different TTL configuration is incompatible too.
//   - A read of an expired entry with ReturnExpiredIfNotCleanedUp returns it
//     and removes it, as an access does (Flink's behaviour): the next read
//     finds nothing.
//   - CleanupExpired counts one per removed value (the suite checks counts
//     only for value states) and removes a list's or map's expired elements,
//     and nothing unexpired.
//   - List.Get returns nil, not an empty slice, when there is no element.
package statetest

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/keygroup"
	"github.com/weirstream/weir/internal/state"
)

// MaxParallelism is the number of key groups of the backends the suite
// opens.
const MaxParallelism = 128

// NewBackend opens a backend with opts; Run closes it.
type NewBackend func(t *testing.T, opts state.Options) state.Backend

// Run runs the conformance suite against the backends newBackend opens.
func Run(t *testing.T, newBackend func(t *testing.T, opts state.Options) state.Backend) {
	nb := NewBackend(newBackend)
	for _, tc := range []struct {
		name string
		fn   func(*testing.T, NewBackend)
	}{
		{"Value", testValue},
		{"ValueTypes", testValueTypes},
		{"List", testList},
		{"Map", testMap},
		{"Reducing", testReducing},
		{"Aggregating", testAggregating},
		{"Namespaces", testNamespaces},
		{"Keys", testKeys},
		{"KeyGroupEdges", testKeyGroupEdges},
		{"PrefixKeys", testPrefixKeys},
		{"Registration", testRegistration},
		{"MissingCodec", testMissingCodec},
		{"TTL", testTTL},
		{"Model", testModel},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, nb) })
	}
}

// Env is a backend under test with its clock.
type Env struct {
	T     testing.TB
	B     state.Backend
	Clock *Clock
}

// Clock is a TTL clock that only moves when told to.
type Clock struct{ ms atomic.Int64 }

// Epoch is where every Clock starts.
var Epoch = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// NewClock returns a clock at Epoch.
func NewClock() *Clock {
	c := &Clock{}
	c.ms.Store(Epoch.UnixMilli())
	return c
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time { return time.UnixMilli(c.ms.Load()) }

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) { c.ms.Add(d.Milliseconds()) }

// Open opens a backend for key groups start to end of MaxParallelism, with
// a fresh clock and directory, closed when the test ends.
func Open(t *testing.T, nb NewBackend, start, end int) *Env {
	t.Helper()
	clk := NewClock()
	opts := state.Options{
		KeyGroupStart:  start,
		KeyGroupEnd:    end,
		MaxParallelism: MaxParallelism,
		Clock:          clk.Now,
		Dir:            filepath.Join(t.TempDir(), "state"),
	}
	b := nb(t, opts)
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	if s, e := b.KeyGroupRange(); s != start || e != end {
		t.Fatalf("KeyGroupRange() = %d, %d, want %d, %d", s, e, start, end)
	}
	return &Env{T: t, B: b, Clock: clk}
}

// openFull opens a backend for every key group.
func openFull(t *testing.T, nb NewBackend) *Env { return Open(t, nb, 0, MaxParallelism-1) }

// KeyBytes returns the encoding of key k and its key group.
func KeyBytes(k string) ([]byte, int) {
	kb := codec.String().Append(nil, k)
	return kb, keygroup.Of(kb, MaxParallelism)
}

// Key makes k the current key.
func (e *Env) Key(k string) {
	e.T.Helper()
	kb, kg := KeyBytes(k)
	e.RawKey(kb, kg)
}

// RawKey makes the bytes kb, in key group kg, the current key.
func (e *Env) RawKey(kb []byte, kg int) {
	e.T.Helper()
	if s, end := e.B.KeyGroupRange(); kg < s || kg > end {
		e.T.Fatalf("test bug: key %q in key group %d outside [%d, %d]", kb, kg, s, end)
	}
	e.B.SetCurrentKey(kb, kg)
	if got := e.B.CurrentKeyGroup(); got != kg {
		e.T.Fatalf("CurrentKeyGroup() = %d, want %d", got, kg)
	}
	if got := e.B.CurrentKey(); !bytes.Equal(got, kb) {
		e.T.Fatalf("CurrentKey() = %q, want %q", got, kb)
	}
}

// keysInGroup returns n keys (strings whose encodings fall in key group
// kg).
func keysInGroup(t testing.TB, kg, n int) []string {
	t.Helper()
	var ks []string
	for i := 0; len(ks) < n; i++ {
		if i > 1_000_000 {
			t.Fatalf("no %d keys in key group %d", n, kg)
		}
		k := fmt.Sprintf("key-%d", i)
		if _, g := KeyBytes(k); g == kg {
			ks = append(ks, k)
		}
	}
	return ks
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func must1[T any](t testing.TB) func(v T, err error) T {
	return func(v T, err error) T {
		t.Helper()
		must(t, err)
		return v
	}
}

func equal(a, b any) bool {
	if x, ok := a.([]byte); ok {
		if y, ok := b.([]byte); ok {
			return bytes.Equal(x, y)
		}
	}
	return reflect.DeepEqual(a, b)
}

// wantValue checks that v holds want.
func wantValue[T any](t testing.TB, v state.Value[T], want T) {
	t.Helper()
	got, ok, err := v.Get()
	must(t, err)
	if !ok || !equal(got, want) {
		t.Fatalf("Get() = %v, %v, want %v, true", got, ok, want)
	}
}

// wantNoValue checks that v holds nothing.
func wantNoValue[T any](t testing.TB, v interface {
	Get() (T, bool, error)
}) {
	t.Helper()
	got, ok, err := v.Get()
	must(t, err)
	if ok {
		t.Fatalf("Get() = %v, true, want nothing", got)
	}
}

// wantList checks that l holds want (nil for none).
func wantList[T any](t testing.TB, l state.List[T], want []T) {
	t.Helper()
	got, err := l.Get()
	must(t, err)
	if want == nil {
		if got != nil {
			t.Fatalf("Get() = %#v, want nil", got)
		}
		return
	}
	if len(got) != len(want) {
		t.Fatalf("Get() = %v, want %v", got, want)
	}
	for i := range got {
		if !equal(got[i], want[i]) {
			t.Fatalf("Get() = %v, want %v", got, want)
		}
	}
}

// mapContents returns everything Range yields, failing on a repeated key.
func mapContents[K comparable, V any](t testing.TB, m state.Map[K, V]) map[K]V {
	t.Helper()
	got := map[K]V{}
	must(t, m.Range(func(k K, v V) bool {
		if _, dup := got[k]; dup {
			t.Fatalf("Range yielded key %v twice", k)
		}
		got[k] = v
		return true
	}))
	return got
}

// wantMap checks m's contents through Range, Get, Contains and IsEmpty.
func wantMap[K comparable, V any](t testing.TB, m state.Map[K, V], want map[K]V) {
	t.Helper()
	got := mapContents(t, m)
	if len(got) != len(want) {
		t.Fatalf("Range yielded %v, want %v", got, want)
	}
	for k, w := range want {
		g, ok := got[k]
		if !ok || !equal(g, w) {
			t.Fatalf("Range yielded %v, want %v", got, want)
		}
		v, ok, err := m.Get(k)
		must(t, err)
		if !ok || !equal(v, w) {
			t.Fatalf("Get(%v) = %v, %v, want %v, true", k, v, ok, w)
		}
		if ok := must1[bool](t)(m.Contains(k)); !ok {
			t.Fatalf("Contains(%v) = false, want true", k)
		}
	}
	if empty := must1[bool](t)(m.IsEmpty()); empty != (len(want) == 0) {
		t.Fatalf("IsEmpty() = %v with %d entries", empty, len(want))
	}
}

func testValue(t *testing.T, nb NewBackend) {
	e := openFull(t, nb)
	v := must1[state.Value[int64]](t)(state.NewValue(e.B, state.ValueDescriptor[int64]{Name: "v"}))
	e.Key("k")
	wantNoValue[int64](t, v)
	must(t, v.Update(7))
	wantValue(t, v, 7)
	must(t, v.Update(8))
	wantValue(t, v, 8)
	must(t, v.Clear())
	wantNoValue[int64](t, v)
	must(t, v.Clear())
	wantNoValue[int64](t, v)
	must(t, v.Update(0)) // the zero value is a value
	wantValue(t, v, 0)
}

// point is a user type with a codec.Func codec.
type point struct{ X, Y int32 }

var pointCodec = codec.Func(
	func(dst []byte, p point) []byte {
		return codec.Int32().Append(codec.Int32().Append(dst, p.X), p.Y)
	},
	func(src []byte) (point, int, error) {
		x, n, err := codec.Int32().Decode(src)
		if err != nil {
			return point{}, 0, err
		}
		y, m, err := codec.Int32().Decode(src[n:])
		if err != nil {
			return point{}, 0, err
		}
		return point{x, y}, n + m, nil
	})

func roundTrip[T any](t *testing.T, e *Env, d state.ValueDescriptor[T], vals ...T) {
	t.Helper()
	v := must1[state.Value[T]](t)(state.NewValue(e.B, d))
	for i, x := range vals {
		e.Key(fmt.Sprintf("%s-%d", d.Name, i))
		must(t, v.Update(x))
	}
	for i, x := range vals {
		e.Key(fmt.Sprintf("%s-%d", d.Name, i))
		wantValue(t, v, x)
	}
}

func testValueTypes(t *testing.T, nb NewBackend) {
	e := openFull(t, nb)
	roundTrip(t, e, state.ValueDescriptor[string]{Name: "string"}, "", "x", "héllo", "\xff\x00bad utf-8", strings.Repeat("long", 1000))
	roundTrip(t, e, state.ValueDescriptor[[]byte]{Name: "bytes"}, []byte{1, 2, 3}, []byte{0}, bytes.Repeat([]byte{7}, 5000))
	roundTrip(t, e, state.ValueDescriptor[float64]{Name: "float"}, 1.5, -0.25)
	roundTrip(t, e, state.ValueDescriptor[bool]{Name: "bool"}, true, false)
	roundTrip(t, e, state.ValueDescriptor[codec.Pair[string, int64]]{
		Name:  "pair",
		Codec: codec.PairOf(codec.String(), codec.Int64()),
	}, codec.Pair[string, int64]{First: "a", Second: 1}, codec.Pair[string, int64]{First: "", Second: -1})
	roundTrip(t, e, state.ValueDescriptor[point]{Name: "point", Codec: pointCodec}, point{1, 2}, point{-3, 4})

	l := must1[state.List[codec.Pair[string, int64]]](t)(state.NewList(e.B, state.ListDescriptor[codec.Pair[string, int64]]{
		Name:  "pairs",
		Codec: codec.PairOf(codec.String(), codec.Int64()),
	}))
	e.Key("k")
	ps := []codec.Pair[string, int64]{{First: "a", Second: 1}, {First: "b", Second: 2}}
	must(t, l.AddAll(ps))
	wantList(t, l, ps)

	m := must1[state.Map[point, []byte]](t)(state.NewMap(e.B, state.MapDescriptor[point, []byte]{Name: "points", KeyCodec: pointCodec}))
	must(t, m.Put(point{1, 1}, []byte("one")))
	must(t, m.Put(point{2, 2}, []byte("two")))
	wantMap(t, m, map[point][]byte{{1, 1}: []byte("one"), {2, 2}: []byte("two")})
}

func testList(t *testing.T, nb NewBackend) {
	e := openFull(t, nb)
	l := must1[state.List[string]](t)(state.NewList(e.B, state.ListDescriptor[string]{Name: "l"}))
	e.Key("k")
	wantList[string](t, l, nil)
	must(t, l.Add("a"))
	wantList(t, l, []string{"a"})
	must(t, l.Add("b"))
	must(t, l.AddAll([]string{"c", "d"}))
	wantList(t, l, []string{"a", "b", "c", "d"})
	must(t, l.AddAll(nil))
	must(t, l.AddAll([]string{}))
	wantList(t, l, []string{"a", "b", "c", "d"})

	// Appending to what Get returned must not change the state, nor may
	// later writes change what the caller appended.
	must(t, l.Add("e"))
	got := must1[[]string](t)(l.Get())
	mine := append(got, "x")
	must(t, l.Add("f"))
	wantList(t, l, []string{"a", "b", "c", "d", "e", "f"})
	if mine[len(mine)-1] != "x" {
		t.Fatalf("an Add changed the slice the caller appended to Get's result: %v", mine)
	}
	must(t, l.Update([]string{"a", "b", "c", "d", "e"}))

	// Update copies: changing the argument afterwards changes nothing.
	upd := []string{"x", "y"}
	must(t, l.Update(upd))
	upd[0] = "changed"
	wantList(t, l, []string{"x", "y"})
	must(t, l.Add("z"))
	wantList(t, l, []string{"x", "y", "z"})
	must(t, l.Update(nil))
	wantList[string](t, l, nil)
	must(t, l.Update([]string{"p"}))
	must(t, l.Update([]string{}))
	wantList[string](t, l, nil)

	must(t, l.AddAll([]string{"q", "r"}))
	wantList(t, l, []string{"q", "r"})
	must(t, l.Clear())
	wantList[string](t, l, nil)
	must(t, l.Clear())
	must(t, l.Add(""))
	wantList(t, l, []string{""})

	// Many elements keep their order.
	e.Key("many")
	var want []string
	for i := range 1000 {
		s := fmt.Sprint(i)
		want = append(want, s)
		if i%3 == 0 {
			must(t, l.AddAll([]string{s}))
		} else {
			must(t, l.Add(s))
		}
	}
	wantList(t, l, want)
}

func testMap(t *testing.T, nb NewBackend) {
	e := openFull(t, nb)
	m := must1[state.Map[string, int64]](t)(state.NewMap(e.B, state.MapDescriptor[string, int64]{Name: "m"}))
	e.Key("k")
	wantMap(t, m, map[string]int64{})
	if _, ok, err := m.Get("a"); ok || err != nil {
		t.Fatalf("Get on empty map = %v, %v", ok, err)
	}
	must(t, m.Put("a", 1))
	must(t, m.Put("b", 2))
	must(t, m.Put("", 0))
	wantMap(t, m, map[string]int64{"a": 1, "b": 2, "": 0})
	must(t, m.Put("a", 3))
	wantMap(t, m, map[string]int64{"a": 3, "b": 2, "": 0})
	if ok := must1[bool](t)(m.Contains("zz")); ok {
		t.Fatal("Contains(zz) = true")
	}

	calls := 0
	must(t, m.Range(func(string, int64) bool { calls++; return false }))
	if calls != 1 {
		t.Fatalf("Range called fn %d times after it returned false", calls)
	}

	must(t, m.Remove("a"))
	must(t, m.Remove("missing"))
	wantMap(t, m, map[string]int64{"b": 2, "": 0})
	must(t, m.Remove("b"))
	must(t, m.Remove(""))
	wantMap(t, m, map[string]int64{})
	must(t, m.Remove("b"))

	must(t, m.Put("c", 4))
	must(t, m.Put("d", 5))
	must(t, m.Clear())
	wantMap(t, m, map[string]int64{})
	must(t, m.Clear())

	// Integer keys, many entries.
	mi := must1[state.Map[int64, string]](t)(state.NewMap(e.B, state.MapDescriptor[int64, string]{Name: "mi"}))
	want := map[int64]string{}
	for i := range int64(500) {
		want[i*7919-1000] = fmt.Sprint(i)
		must(t, mi.Put(i*7919-1000, fmt.Sprint(i)))
	}
	wantMap(t, mi, want)
}

func testReducing(t *testing.T, nb NewBackend) {
	e := openFull(t, nb)
	r := must1[state.Reducing[int64]](t)(state.NewReducing(e.B, state.ValueDescriptor[int64]{Name: "sum"}, func(a, b int64) int64 { return a + b }))
	e.Key("k")
	wantNoValue[int64](t, r)
	for i := int64(1); i <= 4; i++ {
		must(t, r.Add(i))
	}
	got, ok, err := r.Get()
	if err != nil || !ok || got != 10 {
		t.Fatalf("Get() = %v, %v, %v, want 10", got, ok, err)
	}
	e.Key("other")
	wantNoValue[int64](t, r)
	must(t, r.Add(5))
	e.Key("k")
	must(t, r.Clear())
	wantNoValue[int64](t, r)
	e.Key("other")
	if got, _, _ := r.Get(); got != 5 {
		t.Fatalf("other key: Get() = %v, want 5", got)
	}

	// The value state underneath is the same state.
	v := must1[state.Value[int64]](t)(state.NewValue(e.B, state.ValueDescriptor[int64]{Name: "sum"}))
	wantValue(t, v, 5)
}

// average averages int64s with a (sum, count) accumulator.
type average struct{}

type avgAcc = codec.Pair[int64, int64]

func (average) CreateAccumulator() avgAcc { return avgAcc{} }
func (average) Add(v int64, a avgAcc) avgAcc {
	return avgAcc{First: a.First + v, Second: a.Second + 1}
}
func (average) GetResult(a avgAcc) float64 { return float64(a.First) / float64(a.Second) }
func (average) Merge(a, b avgAcc) avgAcc {
	return avgAcc{First: a.First + b.First, Second: a.Second + b.Second}
}

func testAggregating(t *testing.T, nb NewBackend) {
	e := openFull(t, nb)
	a := must1[state.Aggregating[int64, float64]](t)(state.NewAggregating(e.B, state.ValueDescriptor[avgAcc]{
		Name:  "avg",
		Codec: codec.PairOf(codec.Int64(), codec.Int64()),
	}, state.AggregateFunction[int64, avgAcc, float64](average{})))
	e.Key("k")
	wantNoValue[float64](t, a)
	for _, x := range []int64{1, 2, 3, 6} {
		must(t, a.Add(x))
	}
	got, ok, err := a.Get()
	if err != nil || !ok || got != 3 {
		t.Fatalf("Get() = %v, %v, %v, want 3", got, ok, err)
	}
	a.SetNamespace([]byte("w"))
	wantNoValue[float64](t, a)
	must(t, a.Add(10))
	a.SetNamespace(nil)
	must(t, a.Clear())
	wantNoValue[float64](t, a)
	a.SetNamespace([]byte("w"))
	if got, _, _ := a.Get(); got != 10 {
		t.Fatalf("namespace w: Get() = %v, want 10", got)
	}
}

func testNamespaces(t *testing.T, nb NewBackend) {
	e := openFull(t, nb)
	v := must1[state.Value[string]](t)(state.NewValue(e.B, state.ValueDescriptor[string]{Name: "v"}))
	l := must1[state.List[string]](t)(state.NewList(e.B, state.ListDescriptor[string]{Name: "l"}))
	m := must1[state.Map[string, string]](t)(state.NewMap(e.B, state.MapDescriptor[string, string]{Name: "m"}))
	e.Key("k")
	nss := [][]byte{nil, []byte("w1"), []byte("w2"), []byte("w"), {0}, {0, 0}}
	for _, ns := range nss {
		for _, s := range []state.Namespaced{v, l, m} {
			s.SetNamespace(ns)
		}
		must(t, v.Update("v"+string(ns)))
		must(t, l.Add("l"+string(ns)))
		must(t, m.Put("x", "m"+string(ns)))
	}
	for _, ns := range nss {
		for _, s := range []state.Namespaced{v, l, m} {
			s.SetNamespace(ns)
		}
		wantValue(t, v, "v"+string(ns))
		wantList(t, l, []string{"l" + string(ns)})
		wantMap(t, m, map[string]string{"x": "m" + string(ns)})
	}

	// Empty and nil are the same namespace.
	for _, s := range []state.Namespaced{v, l, m} {
		s.SetNamespace([]byte{})
	}
	wantValue(t, v, "v")
	wantList(t, l, []string{"l"})
	wantMap(t, m, map[string]string{"x": "m"})

	// The namespace stays selected across keys.
	v.SetNamespace([]byte("w1"))
	e.Key("k2")
	wantNoValue[string](t, v)
	must(t, v.Update("k2 w1"))
	e.Key("k")
	wantValue(t, v, "vw1")

	// Clearing one namespace leaves the others.
	v.SetNamespace([]byte("w2"))
	l.SetNamespace([]byte("w2"))
	m.SetNamespace([]byte("w2"))
	must(t, v.Clear())
	must(t, l.Clear())
	must(t, m.Clear())
	wantNoValue[string](t, v)
	wantList[string](t, l, nil)
	wantMap(t, m, map[string]string{})
	v.SetNamespace([]byte("w1"))
	l.SetNamespace([]byte("w1"))
	m.SetNamespace([]byte("w1"))
	wantValue(t, v, "vw1")
	wantList(t, l, []string{"lw1"})
	wantMap(t, m, map[string]string{"x": "mw1"})

	// The caller may reuse the namespace slice after the next SetNamespace.
	buf := []byte("w1")
	v.SetNamespace(buf)
	v.SetNamespace(nil)
	copy(buf, "zz")
	wantValue(t, v, "v")
}

func testKeys(t *testing.T, nb NewBackend) {
	e := openFull(t, nb)
	v := must1[state.Value[int64]](t)(state.NewValue(e.B, state.ValueDescriptor[int64]{Name: "v"}))
	l := must1[state.List[int64]](t)(state.NewList(e.B, state.ListDescriptor[int64]{Name: "l"}))
	m := must1[state.Map[int64, int64]](t)(state.NewMap(e.B, state.MapDescriptor[int64, int64]{Name: "m"}))
	const n = 300
	for i := range int64(n) {
		e.Key(fmt.Sprint(i))
		must(t, v.Update(i))
		must(t, l.AddAll([]int64{i, -i}))
		must(t, m.Put(i, -i))
	}
	for i := range int64(n) {
		e.Key(fmt.Sprint(i))
		wantValue(t, v, i)
		wantList(t, l, []int64{i, -i})
		wantMap(t, m, map[int64]int64{i: -i})
	}
	e.Key("none")
	wantNoValue[int64](t, v)
	wantList[int64](t, l, nil)
	wantMap(t, m, map[int64]int64{})
	// Clearing one key leaves the others.
	e.Key("7")
	must(t, v.Clear())
	must(t, l.Clear())
	must(t, m.Clear())
	e.Key("8")
	wantValue(t, v, 8)
	wantList(t, l, []int64{8, -8})
	wantMap(t, m, map[int64]int64{8: -8})
}

func testKeyGroupEdges(t *testing.T, nb NewBackend) {
	for _, r := range [][2]int{{0, MaxParallelism - 1}, {40, 71}, {5, 5}, {MaxParallelism - 1, MaxParallelism - 1}} {
		t.Run(fmt.Sprintf("%d-%d", r[0], r[1]), func(t *testing.T) {
			e := Open(t, nb, r[0], r[1])
			v := must1[state.Value[string]](t)(state.NewValue(e.B, state.ValueDescriptor[string]{Name: "v"}))
			l := must1[state.List[string]](t)(state.NewList(e.B, state.ListDescriptor[string]{Name: "l"}))
			m := must1[state.Map[string, string]](t)(state.NewMap(e.B, state.MapDescriptor[string, string]{Name: "m"}))
			keys := keysInGroup(t, r[0], 2)
			if r[1] != r[0] {
				keys = append(keys, keysInGroup(t, r[1], 2)...)
			}
			if mid := (r[0] + r[1]) / 2; mid != r[0] && mid != r[1] {
				keys = append(keys, keysInGroup(t, mid, 1)...)
			}
			for _, k := range keys {
				e.Key(k)
				wantNoValue[string](t, v)
				wantList[string](t, l, nil)
				wantMap(t, m, map[string]string{})
				must(t, v.Update(k))
				must(t, l.Add(k))
				must(t, m.Put(k, k))
			}
			for _, k := range keys {
				e.Key(k)
				wantValue(t, v, k)
				wantList(t, l, []string{k})
				wantMap(t, m, map[string]string{k: k})
			}
			// Clearing the keys of the first group leaves the last group.
			for _, k := range keys[:2] {
				e.Key(k)
				must(t, v.Clear())
				must(t, l.Clear())
				must(t, m.Clear())
			}
			for _, k := range keys[2:] {
				e.Key(k)
				wantValue(t, v, k)
				wantList(t, l, []string{k})
			}
		})
	}
}

// prefixPair returns a key k1 and a suffix x such that k1 and k1+x are in
// the same key group.
func prefixPair(t testing.TB, k1 []byte) []byte {
	g := keygroup.Of(k1, MaxParallelism)
	for i := range 1 << 16 {
		x := []byte{byte(i >> 8), byte(i)}
		if keygroup.Of(append(slices.Clip(k1), x...), MaxParallelism) == g {
			return x
		}
	}
	t.Fatalf("no suffix keeps %q in its key group", k1)
	return nil
}

func testPrefixKeys(t *testing.T, nb NewBackend) {
	e := openFull(t, nb)
	v := must1[state.Value[string]](t)(state.NewValue(e.B, state.ValueDescriptor[string]{Name: "v"}))
	l := must1[state.List[string]](t)(state.NewList(e.B, state.ListDescriptor[string]{Name: "l"}))
	m := must1[state.Map[string, string]](t)(state.NewMap(e.B, state.MapDescriptor[string, string]{Name: "m"}))
	set := func(ns []byte) {
		v.SetNamespace(ns)
		l.SetNamespace(ns)
		m.SetNamespace(ns)
	}

	// Raw keys where one key's bytes are a prefix of another's, in the same
	// key group, and a namespace equal to the rest of the longer key: the
	// entries (k1, x), (k1+x, ""), (k1, ""), (k1+x, x) must all differ.
	k1 := []byte("a")
	x := prefixPair(t, k1)
	k2 := append(slices.Clip(k1), x...)
	g := keygroup.Of(k1, MaxParallelism)
	type ent struct {
		key, ns []byte
		val     string
	}
	ents := []ent{{k1, x, "k1/x"}, {k2, nil, "k2/"}, {k1, nil, "k1/"}, {k2, x, "k2/x"}, {k1, x[:1], "k1/x0"}, {k2, x[:1], "k2/x0"}}
	for _, en := range ents {
		e.RawKey(en.key, g)
		set(en.ns)
		must(t, v.Update(en.val))
		must(t, l.Add(en.val))
		must(t, m.Put("u", en.val))
	}
	for _, en := range ents {
		e.RawKey(en.key, g)
		set(en.ns)
		wantValue(t, v, en.val)
		wantList(t, l, []string{en.val})
		wantMap(t, m, map[string]string{"u": en.val})
	}

	// The empty key (nil or empty, the same key) is a key like any other.
	g0 := keygroup.Of(nil, MaxParallelism)
	for _, ns := range [][]byte{nil, []byte("n")} {
		e.RawKey(nil, g0)
		set(ns)
		must(t, v.Update("empty/"+string(ns)))
		must(t, l.Add("empty"))
		must(t, m.Put("", "empty"))
		e.RawKey([]byte{}, g0)
		wantValue(t, v, "empty/"+string(ns))
		wantList(t, l, []string{"empty"})
		wantMap(t, m, map[string]string{"": "empty"})
		must(t, v.Clear())
		must(t, l.Clear())
		must(t, m.Clear())
		wantNoValue[string](t, v)
	}

	// Encoded string keys that are prefixes of each other, and namespaces
	// that are.
	set(nil)
	for _, k := range []string{"a", "ab", "abc", ""} {
		for _, ns := range []string{"", "x", "xy"} {
			e.Key(k)
			set([]byte(ns))
			must(t, v.Update(k+"/"+ns))
		}
	}
	for _, k := range []string{"a", "ab", "abc", ""} {
		for _, ns := range []string{"", "x", "xy"} {
			e.Key(k)
			set([]byte(ns))
			wantValue(t, v, k+"/"+ns)
		}
	}
}

func testRegistration(t *testing.T, nb NewBackend) {
	e := openFull(t, nb)
	e.Key("k")
	v1 := must1[state.Value[int64]](t)(state.NewValue(e.B, state.ValueDescriptor[int64]{Name: "v"}))
	v2 := must1[state.Value[int64]](t)(state.NewValue(e.B, state.ValueDescriptor[int64]{Name: "v"}))
	must(t, v1.Update(5))
	wantValue(t, v2, 5)
	must(t, v2.Clear())
	wantNoValue[int64](t, v1)

	l1 := must1[state.List[string]](t)(state.NewList(e.B, state.ListDescriptor[string]{Name: "l"}))
	l2 := must1[state.List[string]](t)(state.NewList(e.B, state.ListDescriptor[string]{Name: "l"}))
	must(t, l1.Add("a"))
	must(t, l2.Add("b"))
	wantList(t, l1, []string{"a", "b"})

	m1 := must1[state.Map[string, int64]](t)(state.NewMap(e.B, state.MapDescriptor[string, int64]{Name: "m"}))
	m2 := must1[state.Map[string, int64]](t)(state.NewMap(e.B, state.MapDescriptor[string, int64]{Name: "m"}))
	must(t, m1.Put("a", 1))
	wantMap(t, m2, map[string]int64{"a": 1})

	// A reducing state is a value state.
	r := must1[state.Reducing[int64]](t)(state.NewReducing(e.B, state.ValueDescriptor[int64]{Name: "v"}, func(a, b int64) int64 { return a + b }))
	must(t, r.Add(2))
	must(t, r.Add(3))
	wantValue(t, v1, 5)

	incompatible := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, state.ErrIncompatibleState) {
			t.Errorf("%s: err = %v, want ErrIncompatibleState", what, err)
		}
	}
	_, err := state.NewList(e.B, state.ListDescriptor[int64]{Name: "v"})
	incompatible("list over value", err)
	_, err = state.NewMap(e.B, state.MapDescriptor[int64, int64]{Name: "v"})
	incompatible("map over value", err)
	_, err = state.NewValue(e.B, state.ValueDescriptor[string]{Name: "v"})
	incompatible("value of string over value of int64", err)
	_, err = state.NewValue(e.B, state.ValueDescriptor[int32]{Name: "v"})
	incompatible("value of int32 over value of int64", err)
	_, err = state.NewValue(e.B, state.ValueDescriptor[string]{Name: "l"})
	incompatible("value over list", err)
	_, err = state.NewList(e.B, state.ListDescriptor[int64]{Name: "l"})
	incompatible("list of int64 over list of string", err)
	_, err = state.NewMap(e.B, state.MapDescriptor[string, string]{Name: "m"})
	incompatible("map value type", err)
	_, err = state.NewMap(e.B, state.MapDescriptor[int64, int64]{Name: "m"})
	incompatible("map key type", err)
	_, err = state.NewValue(e.B, state.ValueDescriptor[int64]{Name: "m"})
	incompatible("value over map", err)

	_, err = state.NewValue(e.B, state.ValueDescriptor[int64]{Name: "v", TTL: state.TTLConfig{TTL: time.Hour}})
	incompatible("value with TTL over value without", err)
	_, err = state.NewList(e.B, state.ListDescriptor[string]{Name: "l", TTL: state.TTLConfig{TTL: time.Hour}})
	incompatible("list with TTL over list without", err)

	// The failed registrations changed nothing.
	wantValue(t, v2, 5)
	wantList(t, l2, []string{"a", "b"})

	if _, err := state.NewValue(e.B, state.ValueDescriptor[int64]{}); err == nil {
		t.Error("NewValue without a name succeeded")
	}

	// Each handle has its own namespace.
	v1.SetNamespace([]byte("w"))
	must(t, v1.Update(1))
	must(t, v2.Update(2)) // default namespace
	wantValue(t, v1, 1)
	v1.SetNamespace(nil)
	wantValue(t, v1, 2)
	m1.SetNamespace([]byte("w"))
	wantMap(t, m1, map[string]int64{})
	wantMap(t, m2, map[string]int64{"a": 1})
}

func testMissingCodec(t *testing.T, nb NewBackend) {
	e := openFull(t, nb)
	type custom struct{ A int }
	check := func(what string, err error) {
		t.Helper()
		if err == nil {
			t.Errorf("%s: no error for a type without codec", what)
			return
		}
		if !strings.Contains(err.Error(), "nocodec") || !strings.Contains(err.Error(), "custom") {
			t.Errorf("%s: error %q does not name the state and the type", what, err)
		}
		if errors.Is(err, state.ErrIncompatibleState) {
			t.Errorf("%s: error %q wraps ErrIncompatibleState", what, err)
		}
	}
	_, err := state.NewValue(e.B, state.ValueDescriptor[custom]{Name: "nocodec"})
	check("value", err)
	_, err = state.NewList(e.B, state.ListDescriptor[custom]{Name: "nocodec"})
	check("list", err)
	_, err = state.NewMap(e.B, state.MapDescriptor[custom, int64]{Name: "nocodec"})
	check("map key", err)
	_, err = state.NewMap(e.B, state.MapDescriptor[int64, custom]{Name: "nocodec"})
	check("map value", err)
	_, err = state.NewReducing(e.B, state.ValueDescriptor[custom]{Name: "nocodec"}, func(a, b custom) custom { return a })
	check("reducing", err)

	// Named types built on codec types have no built-in codec either.
	type myInt int64
	_, err = state.NewValue(e.B, state.ValueDescriptor[myInt]{Name: "nocodec-myInt"})
	if err == nil {
		t.Error("value of a named int64 type: no error")
	}

	// With a codec the type works, under the name that failed before.
	c := codec.Func(
		func(dst []byte, v custom) []byte { return codec.Int().Append(dst, v.A) },
		func(src []byte) (custom, int, error) {
			a, n, err := codec.Int().Decode(src)
			return custom{a}, n, err
		})
	v := must1[state.Value[custom]](t)(state.NewValue(e.B, state.ValueDescriptor[custom]{Name: "nocodec", Codec: c}))
	e.Key("k")
	must(t, v.Update(custom{3}))
	wantValue(t, v, custom{3})
}
