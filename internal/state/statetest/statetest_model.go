package statetest

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/state"
)

// modelTTL is the TTL of the model test's TTL states.
const modelTTL = 50 * time.Millisecond

// mkey is an entry of the model: key and namespace.
type mkey struct{ key, ns string }

type stamped[T any] struct {
	v  T
	ts int64
}

// model is what the model test's states must hold, as plain Go maps.
type model struct {
	now func() int64
	exp func(ts int64) bool // expired at now

	v  map[mkey]int64                     // value, no TTL
	l  map[mkey][]string                  // list, no TTL
	m  map[mkey]map[string]int64          // map, no TTL
	vt map[mkey]stamped[int64]            // value, TTL on write
	lt map[mkey][]stamped[int64]          // list, TTL on read and write
	mt map[mkey]map[int64]stamped[string] // map, TTL on write
	r  map[mkey]int64                     // reducing (sum)
}

// handles are the model test's states in the backend.
type handles struct {
	v  state.Value[int64]
	l  state.List[string]
	m  state.Map[string, int64]
	vt state.Value[int64]
	lt state.List[int64]
	mt state.Map[int64, string]
	r  state.Reducing[int64]
}

func (h *handles) all() []state.Namespaced {
	return []state.Namespaced{h.v, h.l, h.m, h.vt, h.lt, h.mt, h.r}
}

func testModel(t *testing.T, nb NewBackend) {
	for seed := uint64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { runModel(t, nb, seed, 3000) })
	}
}

// runModel runs steps random operations with seed against a backend and
// the model, comparing every read.
func runModel(t *testing.T, nb NewBackend, seed uint64, steps int) {
	e := openFull(t, nb)
	rng := rand.New(rand.NewPCG(seed, 0))
	ttl := state.TTLConfig{TTL: modelTTL}
	ttlRead := state.TTLConfig{TTL: modelTTL, UpdateType: state.OnReadAndWrite}
	h := &handles{
		v:  must1[state.Value[int64]](t)(state.NewValue(e.B, state.ValueDescriptor[int64]{Name: "v"})),
		l:  must1[state.List[string]](t)(state.NewList(e.B, state.ListDescriptor[string]{Name: "l"})),
		m:  must1[state.Map[string, int64]](t)(state.NewMap(e.B, state.MapDescriptor[string, int64]{Name: "m"})),
		vt: must1[state.Value[int64]](t)(state.NewValue(e.B, state.ValueDescriptor[int64]{Name: "vt", TTL: ttl})),
		lt: must1[state.List[int64]](t)(state.NewList(e.B, state.ListDescriptor[int64]{Name: "lt", TTL: ttlRead})),
		mt: must1[state.Map[int64, string]](t)(state.NewMap(e.B, state.MapDescriptor[int64, string]{Name: "mt", TTL: ttl})),
		r: must1[state.Reducing[int64]](t)(state.NewReducing(e.B, state.ValueDescriptor[int64]{Name: "r"},
			func(a, b int64) int64 { return a + b })),
	}
	now := func() int64 { return e.Clock.Now().UnixMilli() }
	md := &model{
		now: now,
		v:   map[mkey]int64{}, l: map[mkey][]string{}, m: map[mkey]map[string]int64{},
		vt: map[mkey]stamped[int64]{}, lt: map[mkey][]stamped[int64]{}, mt: map[mkey]map[int64]stamped[string]{},
		r:   map[mkey]int64{},
		exp: func(ts int64) bool { return now()-ts >= modelTTL.Milliseconds() },
	}

	keys := []string{"a", "ab", "b", "k1", "k2", "k3", "", "long key with spaces"}
	nss := []string{"", "a", "ab", "w1", "\x00"}
	cur := mkey{}
	setKey := func(k string) {
		cur.key = k
		e.Key(k)
	}
	setNS := func(s state.Namespaced, ns string) {
		cur.ns = ns
		if ns == "" && rng.IntN(2) == 0 {
			s.SetNamespace(nil)
		} else {
			s.SetNamespace([]byte(ns))
		}
	}
	setKey(keys[0])
	for _, s := range h.all() {
		s.SetNamespace(nil)
	}

	step := 0
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d step %d key %q ns %q: %s", seed, step, cur.key, cur.ns, fmt.Sprintf(format, args...))
	}
	for step = 0; step < steps; step++ {
		switch x := rng.IntN(100); {
		case x < 10:
			e.Clock.Advance(time.Duration(rng.IntN(20)) * time.Millisecond)
		case x < 13:
			if _, err := e.B.CleanupExpired(rng.IntN(20)); err != nil {
				fail("CleanupExpired: %v", err)
			}
		}
		setKey(keys[rng.IntN(len(keys))])
		ns := nss[rng.IntN(len(nss))]
		switch rng.IntN(7) {
		case 0:
			setNS(h.v, ns)
			md.stepValue(h.v, rng, cur, fail)
		case 1:
			setNS(h.l, ns)
			md.stepList(h.l, rng, cur, fail)
		case 2:
			setNS(h.m, ns)
			md.stepMap(h.m, rng, cur, fail)
		case 3:
			setNS(h.vt, ns)
			md.stepValueTTL(h.vt, rng, cur, fail)
		case 4:
			setNS(h.lt, ns)
			md.stepListTTL(h.lt, rng, cur, fail)
		case 5:
			setNS(h.mt, ns)
			md.stepMapTTL(h.mt, rng, cur, fail)
		case 6:
			setNS(h.r, ns)
			md.stepReducing(h.r, rng, cur, fail)
		}
	}
	// Finally read everything.
	for _, k := range keys {
		setKey(k)
		for _, ns := range nss {
			for _, s := range h.all() {
				setNS(s, ns)
			}
			md.checkValue(h.v, cur, fail)
			md.checkList(h.l, cur, fail)
			md.checkMap(h.m, cur, fail)
			md.checkValueTTL(h.vt, cur, fail)
			md.checkListTTL(h.lt, cur, fail)
			md.checkMapTTL(h.mt, cur, fail)
			md.checkReducing(h.r, cur, fail)
		}
	}
}

type failFunc func(format string, args ...any)

func (md *model) stepValue(v state.Value[int64], rng *rand.Rand, k mkey, fail failFunc) {
	switch rng.IntN(4) {
	case 0:
		x := rng.Int64N(1000)
		if err := v.Update(x); err != nil {
			fail("v.Update: %v", err)
		}
		md.v[k] = x
	case 1:
		if err := v.Clear(); err != nil {
			fail("v.Clear: %v", err)
		}
		delete(md.v, k)
	default:
		md.checkValue(v, k, fail)
	}
}

func (md *model) checkValue(v state.Value[int64], k mkey, fail failFunc) {
	got, ok, err := v.Get()
	want, wok := md.v[k]
	if err != nil || ok != wok || got != want {
		fail("v.Get() = %v, %v, %v, want %v, %v", got, ok, err, want, wok)
	}
}

func (md *model) stepReducing(r state.Reducing[int64], rng *rand.Rand, k mkey, fail failFunc) {
	switch rng.IntN(4) {
	case 0, 1:
		x := rng.Int64N(100)
		if err := r.Add(x); err != nil {
			fail("r.Add: %v", err)
		}
		md.r[k] += x
	case 2:
		if err := r.Clear(); err != nil {
			fail("r.Clear: %v", err)
		}
		delete(md.r, k)
	default:
		md.checkReducing(r, k, fail)
	}
}

func (md *model) checkReducing(r state.Reducing[int64], k mkey, fail failFunc) {
	got, ok, err := r.Get()
	want, wok := md.r[k]
	if err != nil || ok != wok || got != want {
		fail("r.Get() = %v, %v, %v, want %v, %v", got, ok, err, want, wok)
	}
}

func (md *model) stepList(l state.List[string], rng *rand.Rand, k mkey, fail failFunc) {
	var err error
	switch rng.IntN(6) {
	case 0:
		x := fmt.Sprint(rng.IntN(100))
		err = l.Add(x)
		md.l[k] = append(md.l[k], x)
	case 1:
		xs := make([]string, rng.IntN(4))
		for i := range xs {
			xs[i] = fmt.Sprint(rng.IntN(100))
		}
		err = l.AddAll(xs)
		md.l[k] = append(md.l[k], xs...)
	case 2:
		xs := make([]string, rng.IntN(3))
		for i := range xs {
			xs[i] = fmt.Sprint(rng.IntN(100))
		}
		err = l.Update(xs)
		md.l[k] = xs
	case 3:
		err = l.Clear()
		delete(md.l, k)
	default:
		md.checkList(l, k, fail)
	}
	if len(md.l[k]) == 0 {
		delete(md.l, k)
	}
	if err != nil {
		fail("list write: %v", err)
	}
}

func (md *model) checkList(l state.List[string], k mkey, fail failFunc) {
	got, err := l.Get()
	want := md.l[k]
	if err != nil || !slices.Equal(got, want) || (want == nil) != (got == nil) {
		fail("l.Get() = %#v, %v, want %#v", got, err, want)
	}
}

func (md *model) stepMap(m state.Map[string, int64], rng *rand.Rand, k mkey, fail failFunc) {
	uk := fmt.Sprint("u", rng.IntN(6))
	var err error
	switch rng.IntN(8) {
	case 0, 1:
		x := rng.Int64N(1000)
		err = m.Put(uk, x)
		if md.m[k] == nil {
			md.m[k] = map[string]int64{}
		}
		md.m[k][uk] = x
	case 2:
		err = m.Remove(uk)
		delete(md.m[k], uk)
	case 3:
		if rng.IntN(3) == 0 {
			err = m.Clear()
			delete(md.m, k)
		}
	case 4:
		got, ok, gerr := m.Get(uk)
		want, wok := md.m[k][uk]
		if gerr != nil || ok != wok || got != want {
			fail("m.Get(%q) = %v, %v, %v, want %v, %v", uk, got, ok, gerr, want, wok)
		}
	case 5:
		ok, gerr := m.Contains(uk)
		if _, wok := md.m[k][uk]; gerr != nil || ok != wok {
			fail("m.Contains(%q) = %v, %v, want %v", uk, ok, gerr, wok)
		}
	default:
		md.checkMap(m, k, fail)
	}
	if len(md.m[k]) == 0 {
		delete(md.m, k)
	}
	if err != nil {
		fail("map write: %v", err)
	}
}

func (md *model) checkMap(m state.Map[string, int64], k mkey, fail failFunc) {
	got := map[string]int64{}
	err := m.Range(func(uk string, v int64) bool { got[uk] = v; return true })
	want := md.m[k]
	if err != nil || !maps.Equal(got, want) {
		fail("m.Range yielded %v, %v, want %v", got, err, want)
	}
	empty, err := m.IsEmpty()
	if err != nil || empty != (len(want) == 0) {
		fail("m.IsEmpty() = %v, %v, want %v", empty, err, len(want) == 0)
	}
}

func (md *model) stepValueTTL(v state.Value[int64], rng *rand.Rand, k mkey, fail failFunc) {
	switch rng.IntN(4) {
	case 0:
		x := rng.Int64N(1000)
		if err := v.Update(x); err != nil {
			fail("vt.Update: %v", err)
		}
		md.vt[k] = stamped[int64]{x, md.now()}
	case 1:
		if err := v.Clear(); err != nil {
			fail("vt.Clear: %v", err)
		}
		delete(md.vt, k)
	default:
		md.checkValueTTL(v, k, fail)
	}
}

func (md *model) checkValueTTL(v state.Value[int64], k mkey, fail failFunc) {
	got, ok, err := v.Get()
	w, wok := md.vt[k]
	if wok && md.exp(w.ts) {
		wok = false
		delete(md.vt, k)
	}
	if err != nil || ok != wok || (ok && got != w.v) {
		fail("vt.Get() = %v, %v, %v, want %v, %v", got, ok, err, w.v, wok)
	}
}

func (md *model) stepListTTL(l state.List[int64], rng *rand.Rand, k mkey, fail failFunc) {
	now := md.now()
	var err error
	switch rng.IntN(5) {
	case 0:
		x := rng.Int64N(100)
		err = l.Add(x)
		md.lt[k] = append(md.lt[k], stamped[int64]{x, now})
	case 1:
		xs := make([]int64, rng.IntN(4))
		for i := range xs {
			xs[i] = rng.Int64N(100)
			md.lt[k] = append(md.lt[k], stamped[int64]{xs[i], now})
		}
		err = l.AddAll(xs)
	case 2:
		xs := make([]int64, rng.IntN(3))
		md.lt[k] = nil
		for i := range xs {
			xs[i] = rng.Int64N(100)
			md.lt[k] = append(md.lt[k], stamped[int64]{xs[i], now})
		}
		err = l.Update(xs)
	case 3:
		err = l.Clear()
		delete(md.lt, k)
	default:
		md.checkListTTL(l, k, fail)
	}
	if len(md.lt[k]) == 0 {
		delete(md.lt, k)
	}
	if err != nil {
		fail("lt write: %v", err)
	}
}

// checkListTTL reads a list with OnReadAndWrite: the unexpired elements are
// returned and refreshed.
func (md *model) checkListTTL(l state.List[int64], k mkey, fail failFunc) {
	got, err := l.Get()
	var want []int64
	var kept []stamped[int64]
	for _, s := range md.lt[k] {
		if !md.exp(s.ts) {
			want = append(want, s.v)
			kept = append(kept, stamped[int64]{s.v, md.now()})
		}
	}
	if kept == nil {
		delete(md.lt, k)
	} else {
		md.lt[k] = kept
	}
	if err != nil || !slices.Equal(got, want) || (want == nil) != (got == nil) {
		fail("lt.Get() = %#v, %v, want %#v", got, err, want)
	}
}

func (md *model) stepMapTTL(m state.Map[int64, string], rng *rand.Rand, k mkey, fail failFunc) {
	uk := rng.Int64N(5)
	var err error
	switch rng.IntN(7) {
	case 0, 1:
		x := fmt.Sprint(rng.IntN(1000))
		err = m.Put(uk, x)
		if md.mt[k] == nil {
			md.mt[k] = map[int64]stamped[string]{}
		}
		md.mt[k][uk] = stamped[string]{x, md.now()}
	case 2:
		err = m.Remove(uk)
		delete(md.mt[k], uk)
	case 3:
		err = m.Clear()
		delete(md.mt, k)
	case 4:
		got, ok, gerr := m.Get(uk)
		w, wok := md.mt[k][uk]
		wok = wok && !md.exp(w.ts)
		if gerr != nil || ok != wok || (ok && got != w.v) {
			fail("mt.Get(%d) = %v, %v, %v, want %v, %v", uk, got, ok, gerr, w.v, wok)
		}
	default:
		md.checkMapTTL(m, k, fail)
	}
	if len(md.mt[k]) == 0 {
		delete(md.mt, k)
	}
	if err != nil {
		fail("mt write: %v", err)
	}
}

func (md *model) checkMapTTL(m state.Map[int64, string], k mkey, fail failFunc) {
	got := map[int64]string{}
	err := m.Range(func(uk int64, v string) bool { got[uk] = v; return true })
	want := map[int64]string{}
	for uk, s := range md.mt[k] {
		if !md.exp(s.ts) {
			want[uk] = s.v
		}
	}
	if err != nil || !maps.Equal(got, want) {
		fail("mt.Range yielded %v, %v, want %v", got, err, want)
	}
	empty, err := m.IsEmpty()
	if err != nil || empty != (len(want) == 0) {
		fail("mt.IsEmpty() = %v, %v, want %v", empty, err, len(want) == 0)
	}
}
