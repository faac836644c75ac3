package state_test

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/state"
	"github.com/weirstream/weir/internal/state/statetest"
)

func newFullHeap(t testing.TB, clk *statetest.Clock) *state.HeapBackend {
	b := state.NewHeapBackend(state.Options{
		KeyGroupStart: 0, KeyGroupEnd: statetest.MaxParallelism - 1,
		MaxParallelism: statetest.MaxParallelism, Clock: clk.Now,
	})
	t.Cleanup(func() { b.Close() })
	return b
}

func must1[T any](t testing.TB) func(v T, err error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// dumpFilter says whether a dumped value is kept.
type dumpFilter func(e state.HeapSnapshotEntry) bool

// dump returns everything s holds that keep keeps (all if nil), as
// "state|kg|key|ns|userkey" -> "value@ts", a list as the sequence of its
// kept elements.
func dump(t testing.TB, s *state.HeapSnapshot, keep dumpFilter) map[string]string {
	type elem struct {
		i int
		v string
	}
	out := map[string]string{}
	lists := map[string][]elem{}
	s.Range(func(e state.HeapSnapshotEntry) {
		if keep != nil && !keep(e) {
			return
		}
		k := fmt.Sprintf("%s|%d|%q|%q|%x", e.State, e.KeyGroup, e.Key, e.Namespace, e.UserKey)
		v := fmt.Sprintf("%x@%d", e.Value, e.TS)
		if e.Kind == "list" {
			lists[k] = append(lists[k], elem{e.Index, v})
			return
		}
		if _, dup := out[k]; dup {
			t.Errorf("snapshot has %s twice", k)
		}
		out[k] = v
	})
	for k, es := range lists {
		sort.Slice(es, func(i, j int) bool { return es[i].i < es[j].i })
		var b strings.Builder
		for _, e := range es {
			b.WriteString(e.v)
			b.WriteByte(',')
		}
		out[k] = b.String()
	}
	return out
}

func diffDumps(got, want map[string]string) string {
	var b strings.Builder
	keys := slices.Sorted(maps.Keys(want))
	for _, k := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[k]; !ok {
			keys = append(keys, k)
		}
	}
	n := 0
	for _, k := range keys {
		if g, w := got[k], want[k]; g != w {
			fmt.Fprintf(&b, "\n  %s: got %q, want %q", k, g, w)
			if n++; n == 10 {
				b.WriteString("\n  ...")
				break
			}
		}
	}
	return b.String()
}

// TestHeapSnapshotIsolation writes to every kind of state, through every
// path that copies or shares maps and slices, while another goroutine reads
// a snapshot: the snapshot must not change (run with -race).
func TestHeapSnapshotIsolation(t *testing.T) {
	clk := statetest.NewClock()
	b := newFullHeap(t, clk)
	ttl := state.TTLConfig{TTL: time.Second, UpdateType: state.OnReadAndWrite}
	ttlRet := state.TTLConfig{TTL: time.Second, Visibility: state.ReturnExpiredIfNotCleanedUp}
	v := must1[state.Value[int64]](t)(state.NewValue(b, state.ValueDescriptor[int64]{Name: "v"}))
	vt := must1[state.Value[string]](t)(state.NewValue(b, state.ValueDescriptor[string]{Name: "vt", TTL: ttl}))
	l := must1[state.List[string]](t)(state.NewList(b, state.ListDescriptor[string]{Name: "l"}))
	lt := must1[state.List[int64]](t)(state.NewList(b, state.ListDescriptor[int64]{Name: "lt", TTL: ttl}))
	lr := must1[state.List[int64]](t)(state.NewList(b, state.ListDescriptor[int64]{Name: "lr", TTL: ttlRet}))
	m := must1[state.Map[string, int64]](t)(state.NewMap(b, state.MapDescriptor[string, int64]{Name: "m"}))
	mt := must1[state.Map[int64, string]](t)(state.NewMap(b, state.MapDescriptor[int64, string]{Name: "mt", TTL: ttl}))
	all := []state.Namespaced{v, vt, l, lt, lr, m, mt}

	const nkeys = 300
	nss := [][]byte{nil, []byte("w")}
	setKey := func(i int) {
		kb, kg := statetest.KeyBytes(fmt.Sprint("key", i))
		b.SetCurrentKey(kb, kg)
	}
	setNS := func(ns []byte) {
		for _, s := range all {
			s.SetNamespace(ns)
		}
	}
	for i := range nkeys {
		setKey(i)
		for _, ns := range nss {
			setNS(ns)
			v.Update(int64(i))
			vt.Update(fmt.Sprint(i))
			for j := range 3 { // Add leaves spare capacity for appends to share
				l.Add(fmt.Sprint(i, j))
				lt.Add(int64(j))
				lr.Add(int64(j))
				m.Put(fmt.Sprint(j), int64(j))
				mt.Put(int64(j), fmt.Sprint(j))
			}
		}
	}
	clk.Advance(500 * time.Millisecond)

	snap := state.SnapshotHeap(b)
	want := dump(t, snap, nil)
	if n := nkeys * len(nss) * (5 + 3 + 3); len(want) != n { // 3 entries per map
		t.Fatalf("snapshot has %d entries, want %d", len(want), n)
	}

	stop := make(chan struct{})
	done := make(chan struct{})
	var reads atomic.Int64
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if got := dump(t, snap, nil); !maps.Equal(got, want) {
				t.Errorf("snapshot changed while the task wrote:%s", diffDumps(got, want))
				return
			}
			reads.Add(1)
		}
	}()

	rng := rand.New(rand.NewPCG(1, 2))
	var snap2 *state.HeapSnapshot
	var want2 map[string]string
	readerDone := func() bool {
		select {
		case <-done:
			return true
		default:
			return false
		}
	}
	for i := 0; i < 30000 || (reads.Load() < 20 && !readerDone()); i++ {
		switch i {
		case 5000:
			snap2 = state.SnapshotHeap(b)
			want2 = dump(t, snap2, nil)
		case 20000:
			if got := dump(t, snap2, nil); !maps.Equal(got, want2) {
				t.Errorf("second snapshot changed:%s", diffDumps(got, want2))
			}
			snap2.Release()
		}
		setKey(rng.IntN(nkeys + 20)) // some keys are new
		setNS(nss[rng.IntN(len(nss))])
		j := rng.Int64N(5)
		switch rng.IntN(22) {
		case 0:
			v.Update(j)
		case 1:
			v.Clear()
		case 2:
			vt.Get()
		case 3:
			vt.Update("new")
		case 4:
			l.Add("added")
		case 5:
			l.AddAll([]string{"x", "y"})
		case 6:
			l.Update([]string{"replaced"})
		case 7:
			l.Clear()
		case 8, 9:
			lt.Get()
		case 10:
			lt.Add(j)
		case 11:
			lr.Get()
		case 12:
			lr.Add(j)
		case 13:
			m.Put(fmt.Sprint(j), -j)
		case 14:
			m.Remove(fmt.Sprint(j))
		case 15:
			m.Clear()
		case 16:
			mt.Get(j)
		case 17:
			mt.Range(func(int64, string) bool { return true })
		case 18:
			mt.Put(j, "put")
		case 19:
			mt.Remove(j)
		case 20:
			clk.Advance(time.Duration(rng.IntN(100)) * time.Millisecond)
		case 21:
			b.CleanupExpired(rng.IntN(50))
		}
	}
	close(stop)
	<-done
	if got := dump(t, snap, nil); !maps.Equal(got, want) {
		t.Errorf("snapshot changed:%s", diffDumps(got, want))
	}
	snap.Release()
	t.Logf("%d concurrent reads of the snapshot", reads.Load())
}

// snapModel is the model of TestHeapSnapshotModel's states.
type snapModel struct {
	v  map[[2]string]int64
	l  map[[2]string][]string
	m  map[[2]string]map[string]int64
	lt map[[2]string][]stampedInt // TTL, refreshed on read
	mt map[[2]string]map[int64]stampedInt
}

type stampedInt struct{ v, ts int64 }

// expected returns the dump a snapshot of the model must give, leaving out
// TTL values expired at now.
func (md *snapModel) expected(now, ttl int64) map[string]string {
	out := map[string]string{}
	enc := func(k [2]string) (string, []byte) {
		kb, kg := statetest.KeyBytes(k[0])
		return fmt.Sprintf("%d|%q|%q", kg, kb, []byte(k[1])), kb
	}
	i64 := func(x int64) string { return fmt.Sprintf("%x", codec.Int64().Append(nil, x)) }
	str := func(s string) string { return fmt.Sprintf("%x", codec.String().Append(nil, s)) }
	for k, x := range md.v {
		p, _ := enc(k)
		out["v|"+p+"|"] = i64(x) + "@0"
	}
	for k, xs := range md.l {
		p, _ := enc(k)
		var b strings.Builder
		for _, x := range xs {
			b.WriteString(str(x) + "@0,")
		}
		out["l|"+p+"|"] = b.String()
	}
	for k, um := range md.m {
		p, _ := enc(k)
		for uk, x := range um {
			out["m|"+p+"|"+str(uk)] = i64(x) + "@0"
		}
	}
	for k, xs := range md.lt {
		p, _ := enc(k)
		var b strings.Builder
		for _, x := range xs {
			if now-x.ts < ttl {
				fmt.Fprintf(&b, "%s@%d,", i64(x.v), x.ts)
			}
		}
		if b.Len() > 0 {
			out["lt|"+p+"|"] = b.String()
		}
	}
	for k, um := range md.mt {
		p, _ := enc(k)
		for uk, x := range um {
			if now-x.ts < ttl {
				out["mt|"+p+"|"+i64(uk)] = fmt.Sprintf("%s@%d", i64(x.v), x.ts)
			}
		}
	}
	return out
}

// TestHeapSnapshotModel runs random operations against the heap backend and
// a model, taking and releasing snapshots as it goes: every read must match
// the model, and every snapshot must keep matching the model as it was when
// the snapshot was taken.
func TestHeapSnapshotModel(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { runSnapshotModel(t, seed) })
	}
}

func runSnapshotModel(t *testing.T, seed uint64) {
	clk := statetest.NewClock()
	b := newFullHeap(t, clk)
	const ttlMS = 100
	ttl := state.TTLConfig{TTL: ttlMS * time.Millisecond, UpdateType: state.OnReadAndWrite}
	v := must1[state.Value[int64]](t)(state.NewValue(b, state.ValueDescriptor[int64]{Name: "v"}))
	l := must1[state.List[string]](t)(state.NewList(b, state.ListDescriptor[string]{Name: "l"}))
	m := must1[state.Map[string, int64]](t)(state.NewMap(b, state.MapDescriptor[string, int64]{Name: "m"}))
	lt := must1[state.List[int64]](t)(state.NewList(b, state.ListDescriptor[int64]{Name: "lt", TTL: ttl}))
	mt := must1[state.Map[int64, int64]](t)(state.NewMap(b, state.MapDescriptor[int64, int64]{Name: "mt", TTL: ttl}))
	md := &snapModel{
		v: map[[2]string]int64{}, l: map[[2]string][]string{}, m: map[[2]string]map[string]int64{},
		lt: map[[2]string][]stampedInt{}, mt: map[[2]string]map[int64]stampedInt{},
	}
	now := func() int64 { return clk.Now().UnixMilli() }
	expired := func(ts int64) bool { return now()-ts >= ttlMS }

	type live struct {
		s    *state.HeapSnapshot
		want map[string]string
		at   int64
	}
	var snaps []live
	keepAt := func(at int64) dumpFilter {
		return func(e state.HeapSnapshotEntry) bool {
			return (e.State != "lt" && e.State != "mt") || at-e.TS < ttlMS
		}
	}
	check := func(step int, s live) {
		t.Helper()
		if got := dump(t, s.s, keepAt(s.at)); !maps.Equal(got, s.want) {
			t.Fatalf("step %d: snapshot differs from the model when taken:%s", step, diffDumps(got, s.want))
		}
	}

	rng := rand.New(rand.NewPCG(seed, 7))
	for step := range 6000 {
		switch x := rng.IntN(1000); {
		case x < 15 && len(snaps) < 4:
			s := live{state.SnapshotHeap(b), md.expected(now(), ttlMS), now()}
			check(step, s)
			snaps = append(snaps, s)
		case x < 30 && len(snaps) > 0:
			i := rng.IntN(len(snaps))
			check(step, snaps[i])
			snaps[i].s.Release()
			snaps = slices.Delete(snaps, i, i+1)
		case x < 80 && len(snaps) > 0:
			check(step, snaps[rng.IntN(len(snaps))])
		case x < 150:
			clk.Advance(time.Duration(rng.IntN(30)) * time.Millisecond)
		}
		k := [2]string{fmt.Sprint("k", rng.IntN(40)), []string{"", "a", "ab"}[rng.IntN(3)]}
		kb, kg := statetest.KeyBytes(k[0])
		b.SetCurrentKey(kb, kg)
		for _, s := range []state.Namespaced{v, l, m, lt, mt} {
			s.SetNamespace([]byte(k[1]))
		}
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("step %d %v: %s", step, k, fmt.Sprintf(format, args...))
		}
		j := rng.Int64N(4)
		switch rng.IntN(20) {
		case 0:
			v.Update(j)
			md.v[k] = j
		case 1:
			v.Clear()
			delete(md.v, k)
		case 2:
			got, ok, _ := v.Get()
			if w, wok := md.v[k]; ok != wok || got != w {
				fail("v.Get() = %v, %v, want %v, %v", got, ok, w, wok)
			}
		case 3:
			l.Add(fmt.Sprint(j))
			md.l[k] = append(md.l[k], fmt.Sprint(j))
		case 4:
			xs := []string{"u", fmt.Sprint(j)}[:rng.IntN(3)]
			l.Update(xs)
			md.l[k] = slices.Clone(xs)
			if len(xs) == 0 {
				delete(md.l, k)
			}
		case 5:
			got, _ := l.Get()
			if w := md.l[k]; !slices.Equal(got, w) {
				fail("l.Get() = %v, want %v", got, w)
			}
		case 6:
			l.Clear()
			delete(md.l, k)
		case 7:
			m.Put(fmt.Sprint(j), j)
			if md.m[k] == nil {
				md.m[k] = map[string]int64{}
			}
			md.m[k][fmt.Sprint(j)] = j
		case 8:
			m.Remove(fmt.Sprint(j))
			delete(md.m[k], fmt.Sprint(j))
			if len(md.m[k]) == 0 {
				delete(md.m, k)
			}
		case 9:
			got := map[string]int64{}
			m.Range(func(uk string, x int64) bool { got[uk] = x; return true })
			if w := md.m[k]; !maps.Equal(got, w) {
				fail("m.Range yielded %v, want %v", got, w)
			}
		case 10:
			if rng.IntN(4) == 0 {
				m.Clear()
				delete(md.m, k)
			}
		case 11, 12:
			lt.Add(j)
			md.lt[k] = append(md.lt[k], stampedInt{j, now()})
		case 13:
			got, _ := lt.Get()
			var w []int64
			var kept []stampedInt
			for _, x := range md.lt[k] {
				if !expired(x.ts) {
					w = append(w, x.v)
					kept = append(kept, stampedInt{x.v, now()})
				}
			}
			md.lt[k] = kept
			if len(kept) == 0 {
				delete(md.lt, k)
			}
			if !slices.Equal(got, w) {
				fail("lt.Get() = %v, want %v", got, w)
			}
		case 14:
			lt.Update([]int64{j})
			md.lt[k] = []stampedInt{{j, now()}}
		case 15, 16:
			mt.Put(j, -j)
			if md.mt[k] == nil {
				md.mt[k] = map[int64]stampedInt{}
			}
			md.mt[k][j] = stampedInt{-j, now()}
		case 17:
			got, ok, _ := mt.Get(j)
			w, wok := md.mt[k][j]
			if wok && expired(w.ts) {
				wok = false
				delete(md.mt[k], j)
			} else if wok {
				md.mt[k][j] = stampedInt{w.v, now()}
			}
			if ok != wok || (ok && got != w.v) {
				fail("mt.Get(%d) = %v, %v, want %v, %v", j, got, ok, w.v, wok)
			}
		case 18:
			got := map[int64]int64{}
			mt.Range(func(uk, x int64) bool { got[uk] = x; return true })
			w := map[int64]int64{}
			for uk, x := range md.mt[k] {
				if expired(x.ts) {
					delete(md.mt[k], uk)
				} else {
					w[uk] = x.v
					md.mt[k][uk] = stampedInt{x.v, now()}
				}
			}
			if !maps.Equal(got, w) {
				fail("mt.Range yielded %v, want %v", got, w)
			}
		case 19:
			mt.Remove(j)
			delete(md.mt[k], j)
		}
		if len(md.mt[k]) == 0 {
			delete(md.mt, k)
		}
	}
	for _, s := range snaps {
		check(-1, s)
		s.s.Release()
	}
	// With no snapshot left, the live state still matches.
	s := state.SnapshotHeap(b)
	check(-1, live{s, md.expected(now(), ttlMS), now()})
	s.Release()
}

// mallocs returns how many heap allocations f makes.
func mallocs(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.Mallocs - before.Mallocs
}

// TestHeapSnapshotCopyOnWrite checks that maps are copied on their first
// write after a snapshot, only then, and not at all once the snapshot is
// released.
func TestHeapSnapshotCopyOnWrite(t *testing.T) {
	clk := statetest.NewClock()
	b := newFullHeap(t, clk)
	v := must1[state.Value[int64]](t)(state.NewValue(b, state.ValueDescriptor[int64]{Name: "v"}))
	m := must1[state.Map[int64, int64]](t)(state.NewMap(b, state.MapDescriptor[int64, int64]{Name: "m"}))
	// Two keys in each key group.
	keys := make([][2][]byte, statetest.MaxParallelism)
	kgs := make([]int, statetest.MaxParallelism)
	found := make([]int, statetest.MaxParallelism)
	for i, n := 0, 0; n < 2*statetest.MaxParallelism; i++ {
		kb, kg := statetest.KeyBytes(fmt.Sprint(i))
		if found[kg] < 2 {
			keys[kg][found[kg]], kgs[kg] = kb, kg
			found[kg]++
			n++
		}
	}
	writeAll := func(which int, x int64) {
		for kg := range keys {
			b.SetCurrentKey(keys[kg][which], kgs[kg])
			v.Update(x)
			m.Put(1, x)
		}
	}
	writeAll(0, 1)
	writeAll(1, 1)

	s := state.SnapshotHeap(b)
	// The first write to each key group copies the value map, the outer
	// map-state map and the written inner map.
	if n := mallocs(func() { writeAll(0, 2) }); n < 3*statetest.MaxParallelism {
		t.Errorf("first writes after a snapshot made %d allocations, want a copy per map (>= %d)", n, 3*statetest.MaxParallelism)
	}
	// Later writes do not copy again, except the inner maps not written yet.
	if n := mallocs(func() { writeAll(0, 3) }); n > 10 {
		t.Errorf("second writes after a snapshot made %d allocations, want none", n)
	}
	if n := mallocs(func() { writeAll(1, 3) }); n < statetest.MaxParallelism || n > 3*statetest.MaxParallelism {
		t.Errorf("writes to other inner maps made %d allocations, want a copy of each (%d maps)", n, statetest.MaxParallelism)
	}
	s.Release()

	s = state.SnapshotHeap(b)
	s.Release()
	if n := mallocs(func() { writeAll(0, 4); writeAll(1, 4) }); n > 10 {
		t.Errorf("writes after a released snapshot made %d allocations, want none", n)
	}
	// Releasing twice is harmless.
	s.Release()
}
