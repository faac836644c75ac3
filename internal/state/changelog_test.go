package state_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/keygroup"
	"github.com/weirstream/weir/internal/state"
)

// The changelog tests run a random workload through a ChangelogBackend,
// restore a backend from a snapshot taken in the middle ("materialization")
// plus the records logged after it, and compare snapshot streams byte for
// byte with the source's: the stream is canonical, so the replayed backend
// must hold exactly the source's state, TTL timestamps included, whatever
// the backends on either side.

const (
	clMaxP = 128
	clTTL  = 400 * time.Millisecond
)

// clClock is a fake processing-time clock that moves only when told to.
type clClock struct{ ms int64 }

func newCLClock(ms int64) *clClock    { return &clClock{ms: ms} }
func (c *clClock) Now() time.Time     { return time.UnixMilli(c.ms) }
func (c *clClock) AdvanceMS(ms int64) { c.ms += ms }
func clEpochMS() int64                { return time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli() }
func clSum(a, b int64) int64          { return a + b }

func clErr(t testing.TB, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// clLog is a ChangeLog keeping copies of the records with their sequence
// numbers and the key group current at the time of the append.
type clLog struct {
	b    state.Backend // to note the current key group; may be nil
	recs [][]byte
	seqs []int64
	kgs  []int
	next int64
}

func (l *clLog) Append(rec []byte) (int64, error) {
	l.next++
	l.recs = append(l.recs, slices.Clone(rec))
	l.seqs = append(l.seqs, l.next)
	kg := -1
	if l.b != nil {
		kg = l.b.CurrentKeyGroup()
	}
	l.kgs = append(l.kgs, kg)
	return l.next, nil
}

func (l *clLog) last() int64 { return l.next }

// after returns the records with a sequence number greater than seq.
func (l *clLog) after(seq int64) [][]byte {
	i, _ := slices.BinarySearch(l.seqs, seq+1)
	return l.recs[i:]
}

// Descriptors of the states of the workload.
var (
	clCountD   = state.ValueDescriptor[int64]{Name: "count"}
	clEventsD  = state.ListDescriptor[string]{Name: "events"}
	clAttrsD   = state.MapDescriptor[string, int64]{Name: "attrs"}
	clSumD     = state.ValueDescriptor[int64]{Name: "sum"}
	clSessionD = state.ValueDescriptor[string]{Name: "session",
		TTL: state.TTLConfig{TTL: clTTL, UpdateType: state.OnReadAndWrite}}
	clCacheD = state.MapDescriptor[string, string]{Name: "cache",
		TTL: state.TTLConfig{TTL: clTTL, Visibility: state.ReturnExpiredIfNotCleanedUp}}
	clRecentD = state.ListDescriptor[int64]{Name: "recent",
		TTL: state.TTLConfig{TTL: clTTL, Visibility: state.ReturnExpiredIfNotCleanedUp}}
)

// clStates are the handles of the workload's states; a nil handle is a
// state not registered.
type clStates struct {
	count   state.Value[int64]
	events  state.List[string]
	attrs   state.Map[string, int64]
	sum     state.Reducing[int64]
	session state.Value[string]       // TTL, OnReadAndWrite
	cache   state.Map[string, string] // TTL, ReturnExpiredIfNotCleanedUp
	recent  state.List[int64]         // TTL, ReturnExpiredIfNotCleanedUp
}

// clRegister registers the states whose names are in only (all if only is
// empty) on b.
func clRegister(t testing.TB, b state.Backend, s *clStates, only ...string) {
	t.Helper()
	want := func(name string) bool { return len(only) == 0 || slices.Contains(only, name) }
	var err error
	if want(clCountD.Name) {
		s.count, err = state.NewValue(b, clCountD)
		clErr(t, "register count", err)
	}
	if want(clEventsD.Name) {
		s.events, err = state.NewList(b, clEventsD)
		clErr(t, "register events", err)
	}
	if want(clAttrsD.Name) {
		s.attrs, err = state.NewMap(b, clAttrsD)
		clErr(t, "register attrs", err)
	}
	if want(clSumD.Name) {
		s.sum, err = state.NewReducing(b, clSumD, clSum)
		clErr(t, "register sum", err)
	}
	if want(clSessionD.Name) {
		s.session, err = state.NewValue(b, clSessionD)
		clErr(t, "register session", err)
	}
	if want(clCacheD.Name) {
		s.cache, err = state.NewMap(b, clCacheD)
		clErr(t, "register cache", err)
	}
	if want(clRecentD.Name) {
		s.recent, err = state.NewList(b, clRecentD)
		clErr(t, "register recent", err)
	}
}

type clKey struct {
	name string
	kb   []byte
	kg   int
}

func clKeys(n int) []clKey {
	ks := make([]clKey, n)
	for i := range ks {
		name := fmt.Sprintf("user-%02d", i)
		kb := codec.String().Append(nil, name)
		ks[i] = clKey{name, kb, keygroup.Of(kb, clMaxP)}
	}
	return ks
}

var clNamespaces = [][]byte{nil, []byte("w1"), []byte("window-2")}

type clBackendKind struct {
	name string
	open func(t *testing.T, start, end int, clock func() time.Time) state.Backend
}

var clBackendKinds = []clBackendKind{
	{"heap", func(t *testing.T, start, end int, clock func() time.Time) state.Backend {
		return state.NewHeapBackend(state.Options{KeyGroupStart: start, KeyGroupEnd: end, MaxParallelism: clMaxP, Clock: clock})
	}},
	{"pebble", func(t *testing.T, start, end int, clock func() time.Time) state.Backend {
		b, err := state.NewPebbleBackend(state.Options{KeyGroupStart: start, KeyGroupEnd: end, MaxParallelism: clMaxP,
			Clock: clock, Dir: filepath.Join(t.TempDir(), "pebble")})
		clErr(t, "NewPebbleBackend", err)
		return b
	}},
}

// clOpen opens a backend of kind k closed at the end of the test.
func clOpen(t *testing.T, k clBackendKind, start, end int, clock func() time.Time) state.Backend {
	t.Helper()
	b := k.open(t, start, end, clock)
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("Close %s: %v", k.name, err)
		}
	})
	return b
}

// clStream takes a snapshot of b and returns its stream.
func clStream(t testing.TB, b state.Backend) []byte {
	t.Helper()
	snap, err := state.TakeSnapshot(b)
	clErr(t, "TakeSnapshot", err)
	defer snap.Release()
	var buf bytes.Buffer
	_, err = snap.WriteStream(&buf)
	clErr(t, "WriteStream", err)
	return buf.Bytes()
}

// clWorkload runs nops random operations on s through b, advancing clk.
// at(i) is called before operation i. It returns how many reads of the
// session state found that an entry expired (checked against a shadow of
// its timestamps).
func clWorkload(t testing.TB, b state.Backend, s *clStates, clk *clClock, keys []clKey, seed uint64, nops int, at func(i int)) (expired int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	type shadowKey struct{ key, ns string }
	sessionTS := map[shadowKey]int64{} // last refresh of a live session value
	str := func() string { return fmt.Sprintf("s%d", rng.IntN(50)) }
	strs := func() []string {
		vs := make([]string, rng.IntN(4)) // 0..3 elements, so also empty
		for i := range vs {
			vs[i] = str()
		}
		return vs
	}
	ints := func() []int64 {
		vs := make([]int64, rng.IntN(4))
		for i := range vs {
			vs[i] = rng.Int64N(1000) - 500
		}
		return vs
	}
	mapKey := func() string { return fmt.Sprintf("k%d", rng.IntN(6)) }
	for i := range nops {
		if at != nil {
			at(i)
		}
		clk.AdvanceMS(rng.Int64N(4))
		k := keys[rng.IntN(len(keys))]
		ns := clNamespaces[rng.IntN(len(clNamespaces))]
		b.SetCurrentKey(k.kb, k.kg)
		op := rng.IntN(100)
		var err error
		switch which := rng.IntN(7); which {
		case 0: // value
			s.count.SetNamespace(ns)
			switch {
			case op < 50:
				err = s.count.Update(rng.Int64N(1 << 40))
			case op < 75:
				_, _, err = s.count.Get()
			default:
				err = s.count.Clear()
			}
		case 1: // list
			s.events.SetNamespace(ns)
			switch {
			case op < 35:
				err = s.events.Add(str())
			case op < 55:
				err = s.events.AddAll(strs())
			case op < 70:
				err = s.events.Update(strs())
			case op < 85:
				_, err = s.events.Get()
			default:
				err = s.events.Clear()
			}
		case 2, 5: // map
			m := s.attrs
			if which == 5 {
				err = clMapOp(rng, s.cache, ns, op, mapKey, str)
				break
			}
			err = clMapOp(rng, m, ns, op, mapKey, func() int64 { return rng.Int64N(100) })
		case 3: // reducing
			s.sum.SetNamespace(ns)
			switch {
			case op < 60:
				err = s.sum.Add(rng.Int64N(100))
			case op < 85:
				_, _, err = s.sum.Get()
			default:
				err = s.sum.Clear()
			}
		case 4: // value with TTL, OnReadAndWrite
			s.session.SetNamespace(ns)
			sk := shadowKey{k.name, string(ns)}
			now := clk.Now().UnixMilli()
			switch {
			case op < 40:
				err = s.session.Update(str())
				sessionTS[sk] = now
			case op < 85:
				var ok bool
				_, ok, err = s.session.Get()
				ts, live := sessionTS[sk]
				switch {
				case live && now-ts >= clTTL.Milliseconds():
					if ok {
						t.Fatalf("op %d: session of %s/%s returned after it expired", i, k.name, ns)
					}
					expired++
					delete(sessionTS, sk)
				case live:
					if !ok {
						t.Fatalf("op %d: session of %s/%s missing before it expired", i, k.name, ns)
					}
					sessionTS[sk] = now // OnReadAndWrite refreshes
				case ok:
					t.Fatalf("op %d: session of %s/%s present, never written", i, k.name, ns)
				}
			default:
				err = s.session.Clear()
				delete(sessionTS, sk)
			}
		case 6: // list with TTL
			s.recent.SetNamespace(ns)
			switch {
			case op < 35:
				err = s.recent.Add(rng.Int64N(1000))
			case op < 55:
				err = s.recent.AddAll(ints())
			case op < 65:
				err = s.recent.Update(ints())
			case op < 90:
				_, err = s.recent.Get()
			default:
				err = s.recent.Clear()
			}
		}
		if err != nil {
			t.Fatalf("op %d: %v", i, err)
		}
	}
	return expired
}

func clMapOp[V any](rng *rand.Rand, m state.Map[string, V], ns []byte, op int, key func() string, val func() V) error {
	m.SetNamespace(ns)
	switch {
	case op < 35:
		return m.Put(key(), val())
	case op < 50:
		return m.Remove(key())
	case op < 65:
		_, _, err := m.Get(key())
		return err
	case op < 75:
		_, err := m.Contains(key())
		return err
	case op < 85:
		stop := rng.IntN(3) // sometimes stop early
		n := 0
		return m.Range(func(string, V) bool { n++; return n <= stop || stop == 0 })
	case op < 93:
		_, err := m.IsEmpty()
		return err
	default:
		return m.Clear()
	}
}

// clDump reads every state of every key and namespace in keys (in b's
// range) through s, as text. Reads of TTL states may refresh or remove
// entries, so compare dumps of two backends only at the same clock reading
// and after their snapshots.
func clDump(t testing.TB, b state.Backend, s *clStates, keys []clKey) []string {
	t.Helper()
	var out []string
	start, end := b.KeyGroupRange()
	add := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	for _, k := range keys {
		if k.kg < start || k.kg > end {
			continue
		}
		b.SetCurrentKey(k.kb, k.kg)
		for _, ns := range clNamespaces {
			p := k.name + "/" + string(ns)
			s.count.SetNamespace(ns)
			v, ok, err := s.count.Get()
			clErr(t, "count.Get", err)
			add("%s count %v %v", p, v, ok)
			s.events.SetNamespace(ns)
			ev, err := s.events.Get()
			clErr(t, "events.Get", err)
			add("%s events %q", p, ev)
			s.attrs.SetNamespace(ns)
			add("%s attrs %v", p, clMapContents(t, s.attrs))
			s.sum.SetNamespace(ns)
			sum, ok, err := s.sum.Get()
			clErr(t, "sum.Get", err)
			add("%s sum %v %v", p, sum, ok)
			s.session.SetNamespace(ns)
			sv, ok, err := s.session.Get()
			clErr(t, "session.Get", err)
			add("%s session %q %v", p, sv, ok)
			s.cache.SetNamespace(ns)
			add("%s cache %v", p, clMapContents(t, s.cache))
			s.recent.SetNamespace(ns)
			rec, err := s.recent.Get()
			clErr(t, "recent.Get", err)
			add("%s recent %v", p, rec)
		}
	}
	return out
}

func clMapContents[V any](t testing.TB, m state.Map[string, V]) map[string]V {
	t.Helper()
	c := map[string]V{}
	clErr(t, "Range", m.Range(func(k string, v V) bool { c[k] = v; return true }))
	return c
}

// clSourceRun is a run of the workload on a changelog-wrapped backend over
// all key groups: the wrapper, its states, the log, the materialization
// stream and the last sequence number it contains, and the final stream.
type clSourceRun struct {
	b        *state.ChangelogBackend
	s        *clStates
	clk      *clClock
	keys     []clKey
	log      *clLog
	mat      []byte
	matSeq   int64
	final    []byte
	expired  int
	snapshot int // the operation before which the materialization was taken
}

// clRunSource runs the workload on a changelog-wrapped backend of kind k,
// taking the materialization before a pseudo-random operation in the
// middle third.
func clRunSource(t *testing.T, k clBackendKind, seed uint64, nops, nkeys int) *clSourceRun {
	t.Helper()
	r := &clSourceRun{clk: newCLClock(clEpochMS()), keys: clKeys(nkeys), log: &clLog{}}
	rc := state.NewReplayClock(r.clk.Now)
	inner := clOpen(t, k, 0, clMaxP-1, rc.Now)
	r.b = state.NewChangelogBackend(inner, rc, r.log)
	r.log.b = r.b
	r.s = &clStates{}
	clRegister(t, r.b, r.s)
	r.snapshot = nops/3 + int(seed%uint64(nops/3))
	r.expired = clWorkload(t, r.b, r.s, r.clk, r.keys, seed, nops, func(i int) {
		if i == r.snapshot {
			r.mat = clStream(t, r.b)
			r.matSeq = r.log.last()
		}
	})
	r.final = clStream(t, r.b)
	return r
}

// clReplay restores a backend of kind k over [start, end] from the source's
// materialization and the records after it, registers every state (which
// applies the records) and returns the wrapper and its states.
func clReplay(t *testing.T, k clBackendKind, src *clSourceRun, start, end int) (*state.ChangelogBackend, *clStates) {
	t.Helper()
	clk := newCLClock(src.clk.ms)
	rc := state.NewReplayClock(clk.Now)
	target := clOpen(t, k, start, end, rc.Now)
	clErr(t, "Restore", state.Restore(target, bytes.NewReader(src.mat)))
	wb := state.NewChangelogBackend(target, rc, nil)
	for _, rec := range src.log.after(src.matSeq) {
		clErr(t, "AddRestored", wb.AddRestored(rec))
	}
	s := &clStates{}
	clRegister(t, wb, s)
	if p := wb.Pending(); len(p) != 0 {
		t.Fatalf("%d records still pending after registering every state", len(p))
	}
	return wb, s
}

func TestChangelogReplayMatchesOriginal(t *testing.T) {
	for _, src := range clBackendKinds {
		for _, dst := range clBackendKinds {
			t.Run(src.name+"-to-"+dst.name, func(t *testing.T) {
				const nops = 4000
				r := clRunSource(t, src, 42, nops, 24)
				tail := r.log.after(r.matSeq)
				if r.matSeq == 0 || len(tail) == 0 {
					t.Fatalf("materialization at seq %d leaves %d records: the test needs both", r.matSeq, len(tail))
				}
				if r.expired == 0 {
					t.Fatal("no session entry expired during the run: TTL too long for the test")
				}
				if bytes.Equal(r.mat, r.final) {
					t.Fatal("materialization equals the final state: the records after it change nothing")
				}

				wb, s := clReplay(t, dst, r, 0, clMaxP-1)
				if got, want := wb.Replayed(), int64(len(tail)); got != want {
					t.Errorf("Replayed() = %d, want %d", got, want)
				}
				got := clStream(t, wb)
				if !bytes.Equal(got, r.final) {
					t.Fatalf("replayed snapshot (%d bytes) differs from the source's (%d bytes), first difference at byte %d",
						len(got), len(r.final), clFirstDiff(got, r.final))
				}
				// The handles read the same. Both clocks read the same, so
				// reads that refresh or remove TTL entries do the same on both.
				want := clDump(t, r.b, r.s, r.keys)
				have := clDump(t, wb, s, r.keys)
				if !slices.Equal(have, want) {
					for i := range min(len(have), len(want)) {
						if have[i] != want[i] {
							t.Fatalf("restored reads %s, source %s", have[i], want[i])
						}
					}
					t.Fatalf("restored dump has %d lines, source %d", len(have), len(want))
				}
				// After the reads (some logged on the source, none on the
				// target, whose log is nil) they are still equal.
				if !bytes.Equal(clStream(t, wb), clStream(t, r.b)) {
					t.Fatal("snapshots differ after the same reads on both")
				}
				t.Logf("%d ops, %d records, %d replayed, %d session expirations, final stream %d bytes",
					nops, len(r.log.recs), len(tail), r.expired, len(r.final))
			})
		}
	}
}

func clFirstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// clRecName returns the state name of a record (format in changelog.go).
func clRecName(t testing.TB, rec []byte) string {
	t.Helper()
	n, w := binary.Uvarint(rec[1:])
	if w <= 0 {
		t.Fatalf("bad record %x", rec)
	}
	return string(rec[1+w : 1+w+int(n)])
}

func TestChangelogPendingUntilRegistered(t *testing.T) {
	heap := clBackendKinds[0]
	r := clRunSource(t, heap, 7, 1200, 12)
	tail := r.log.after(r.matSeq)

	clk := newCLClock(r.clk.ms)
	rc := state.NewReplayClock(clk.Now)
	target := clOpen(t, heap, 0, clMaxP-1, rc.Now)
	clErr(t, "Restore", state.Restore(target, bytes.NewReader(r.mat)))
	wb := state.NewChangelogBackend(target, rc, nil)
	for _, rec := range tail {
		clErr(t, "AddRestored", wb.AddRestored(rec))
	}
	if p := wb.Pending(); len(p) != len(tail) {
		t.Fatalf("Pending() has %d records before any registration, want %d", len(p), len(tail))
	}

	// The restored job registers only some states.
	registered := []string{clCountD.Name, clAttrsD.Name, clSessionD.Name}
	s := &clStates{}
	clRegister(t, wb, s, registered...)

	// The others' records stay pending: by name in name order, in log
	// order within a name.
	byName := map[string][][]byte{}
	var names []string
	for _, rec := range tail {
		n := clRecName(t, rec)
		if slices.Contains(registered, n) {
			continue
		}
		if byName[n] == nil {
			names = append(names, n)
		}
		byName[n] = append(byName[n], rec)
	}
	slices.Sort(names)
	var want [][]byte
	for _, n := range names {
		want = append(want, byName[n]...)
	}
	if len(names) < 3 {
		t.Fatalf("only %d unregistered states have records: %v", len(names), names)
	}
	got := wb.Pending()
	if !slices.EqualFunc(got, want, bytes.Equal) {
		t.Fatalf("Pending() = %d records, want the %d records of %v in order", len(got), len(want), names)
	}
	if got, want := wb.Replayed(), int64(len(tail)-len(want)); got != want {
		t.Errorf("Replayed() = %d after registering %v, want %d", got, registered, want)
	}

	// A record whose kind does not fit the registration: the list records
	// of "events" registered as a value state.
	if _, err := state.NewValue(wb, state.ValueDescriptor[string]{Name: clEventsD.Name}); !errors.Is(err, state.ErrIncompatibleState) {
		t.Fatalf("registering list records as a value state: err = %v, want ErrIncompatibleState", err)
	}

	// Registering the rest later applies them; the result is the source's.
	// (A fresh backend: the failed registration above registered "events"
	// as a value in the wrapped one.)
	target2 := clOpen(t, heap, 0, clMaxP-1, rc.Now)
	clErr(t, "Restore", state.Restore(target2, bytes.NewReader(r.mat)))
	wb2 := state.NewChangelogBackend(target2, rc, nil)
	for _, rec := range tail {
		clErr(t, "AddRestored", wb2.AddRestored(rec))
	}
	s2 := &clStates{}
	clRegister(t, wb2, s2, registered...)
	if !slices.EqualFunc(wb2.Pending(), want, bytes.Equal) {
		t.Fatal("Pending() differs between two identical restores")
	}
	// Work on the registered states in between: the pending ones are not
	// affected (the states are independent).
	for _, name := range names {
		clRegister(t, wb2, s2, name)
		if slices.ContainsFunc(wb2.Pending(), func(rec []byte) bool { return clRecName(t, rec) == name }) {
			t.Fatalf("records of %q still pending after its registration", name)
		}
	}
	if p := wb2.Pending(); len(p) != 0 {
		t.Fatalf("%d records pending after registering every state", len(p))
	}
	if got, want := wb2.Replayed(), int64(len(tail)); got != want {
		t.Errorf("Replayed() = %d, want %d", got, want)
	}
	if !bytes.Equal(clStream(t, wb2), r.final) {
		t.Fatal("snapshot after late registration differs from the source's")
	}
}

func TestChangelogRescaleDropsOtherKeyGroups(t *testing.T) {
	for _, k := range clBackendKinds {
		t.Run(k.name, func(t *testing.T) {
			// Source and targets of the same kind: see
			// TestChangelogReplayTTLMapIsEmptyAcrossBackends for heap/pebble.
			r := clRunSource(t, k, 11, 1500, 24)
			tail := r.log.after(r.matSeq)
			tailKGs := r.log.kgs[len(r.log.kgs)-len(tail):]
			for _, half := range [][2]int{{0, 63}, {64, 127}} {
				start, end := half[0], half[1]
				clk := newCLClock(r.clk.ms)
				rc := state.NewReplayClock(clk.Now)
				target := clOpen(t, k, start, end, rc.Now)
				clErr(t, "Restore", state.Restore(target, bytes.NewReader(r.mat)))
				wb := state.NewChangelogBackend(target, rc, nil)
				var in [][]byte
				for i, rec := range tail {
					clErr(t, "AddRestored", wb.AddRestored(rec))
					if tailKGs[i] >= start && tailKGs[i] <= end {
						in = append(in, rec)
					}
				}
				if len(in) == 0 || len(in) == len(tail) {
					t.Fatalf("[%d, %d]: %d of %d records in range: the test needs both kinds", start, end, len(in), len(tail))
				}
				if got := wb.Pending(); len(got) != len(in) {
					t.Fatalf("[%d, %d]: Pending() has %d records, want the %d in range", start, end, len(got), len(in))
				}
				s := &clStates{}
				clRegister(t, wb, s)
				if got, want := wb.Replayed(), int64(len(in)); got != want {
					t.Errorf("[%d, %d]: Replayed() = %d, want %d", start, end, got, want)
				}
				got := clStream(t, wb)

				// The source's final state restricted to the range.
				exp := clOpen(t, k, start, end, rc.Now)
				clErr(t, "Restore final", state.Restore(exp, bytes.NewReader(r.final)))
				clRegister(t, exp, &clStates{})
				want := clStream(t, exp)
				if !bytes.Equal(got, want) {
					t.Fatalf("[%d, %d]: replayed snapshot (%d bytes) differs from the source's restricted to the range (%d bytes) at byte %d",
						start, end, len(got), len(want), clFirstDiff(got, want))
				}
			}
		})
	}
}

// clHeaderLen returns the length of a record's header: everything before
// its payload (format in changelog.go).
func clHeaderLen(t testing.TB, rec []byte) int {
	t.Helper()
	p := 1
	bytesField := func() {
		n, w := binary.Uvarint(rec[p:])
		if w <= 0 {
			t.Fatalf("bad record %x", rec)
		}
		p += w + int(n)
	}
	bytesField() // name
	_, w := binary.Uvarint(rec[p:])
	p += w       // kg
	bytesField() // key
	bytesField() // ns
	if rec[0]&0x80 != 0 {
		p += 8
	}
	return p
}

// clOneOfEach logs one record of each kind of write, with payloads, and
// returns the log.
func clOneOfEach(t *testing.T) *clLog {
	t.Helper()
	clk := newCLClock(clEpochMS())
	rc := state.NewReplayClock(clk.Now)
	log := &clLog{}
	b := state.NewChangelogBackend(clOpen(t, clBackendKinds[0], 0, clMaxP-1, rc.Now), rc, log)
	s := &clStates{}
	clRegister(t, b, s)
	k := clKeys(1)[0]
	b.SetCurrentKey(k.kb, k.kg)
	for _, h := range []state.Namespaced{s.count, s.events, s.attrs, s.session, s.cache, s.recent} {
		h.SetNamespace([]byte("ns"))
	}
	clErr(t, "count", s.count.Update(123456789))
	clErr(t, "events", s.events.Add("hello"))
	clErr(t, "events", s.events.AddAll([]string{"a", "bb", "ccc"}))
	clErr(t, "events", s.events.Update([]string{"x", "yy"}))
	clErr(t, "attrs", s.attrs.Put("key", 77))
	clErr(t, "attrs", s.attrs.Remove("key"))
	clErr(t, "session", s.session.Update("sess"))
	clErr(t, "cache", s.cache.Put("ck", "cv"))
	clErr(t, "recent", s.recent.AddAll([]int64{1, 2, 3}))
	return log
}

func TestChangelogCorruptRecordHeader(t *testing.T) {
	log := clOneOfEach(t)
	clk := newCLClock(clEpochMS())
	rc := state.NewReplayClock(clk.Now)
	wb := state.NewChangelogBackend(clOpen(t, clBackendKinds[0], 0, clMaxP-1, rc.Now), rc, nil)
	for _, rec := range log.recs {
		if !state.IsStateRecord(rec) {
			t.Fatalf("IsStateRecord(%x) = false", rec)
		}
		h := clHeaderLen(t, rec)
		for n := range h {
			func() {
				defer func() {
					if p := recover(); p != nil {
						t.Fatalf("AddRestored(%x[:%d]) panicked: %v", rec, n, p)
					}
				}()
				err := wb.AddRestored(rec[:n])
				if !errors.Is(err, state.ErrCorruptChangelog) {
					t.Errorf("AddRestored(record truncated to %d of %d header bytes) = %v, want ErrCorruptChangelog", n, h, err)
				}
			}()
		}
	}
	// A foreign op code (a timer record, say) is not a state record.
	foreign := append([]byte{state.FirstForeignOp}, log.recs[0][1:]...)
	if state.IsStateRecord(foreign) {
		t.Error("IsStateRecord(foreign op) = true")
	}
	if err := wb.AddRestored(foreign); !errors.Is(err, state.ErrCorruptChangelog) {
		t.Errorf("AddRestored(foreign op) = %v, want ErrCorruptChangelog", err)
	}
	if p := wb.Pending(); len(p) != 0 {
		t.Fatalf("%d corrupt records pending", len(p))
	}
}

// TestChangelogCorruptRecordPayload truncates records inside their payload.
// AddRestored cannot check a payload (records carry no types), so the
// corruption shows when the state is registered and the record applied:
// ErrCorruptChangelog is documented as wrapped by the errors "for records
// that cannot be parsed or do not fit the state they are for".
func TestChangelogCorruptRecordPayload(t *testing.T) {
	log := clOneOfEach(t)
	for ri, rec := range log.recs {
		h := clHeaderLen(t, rec)
		name := clRecName(t, rec)
		bad := 0
		for n := h; n < len(rec); n++ {
			clk := newCLClock(clEpochMS())
			rc := state.NewReplayClock(clk.Now)
			wb := state.NewChangelogBackend(clOpen(t, clBackendKinds[0], 0, clMaxP-1, rc.Now), rc, nil)
			func() {
				defer func() {
					if p := recover(); p != nil {
						t.Fatalf("record %d (%q) truncated to %d of %d bytes panicked: %v", ri, name, n, len(rec), p)
					}
				}()
				err := wb.AddRestored(rec[:n])
				if err == nil {
					err = clRegisterErr(wb, name)
				}
				if !errors.Is(err, state.ErrCorruptChangelog) {
					if bad == 0 {
						t.Errorf("record %d (%q, op %#x) truncated to %d of %d bytes (payload %d of %d): err = %v, want one wrapping ErrCorruptChangelog",
							ri, name, rec[0], n, len(rec), n-h, len(rec)-h, err)
					}
					bad++
				}
			}()
		}
		if bad > 1 {
			t.Errorf("record %d (%q): %d of %d payload truncations in all give an error not wrapping ErrCorruptChangelog", ri, name, bad, len(rec)-h)
		}
	}
}

func clRegisterErr(b state.Backend, name string) error {
	var err error
	switch name {
	case clCountD.Name:
		_, err = state.NewValue(b, clCountD)
	case clEventsD.Name:
		_, err = state.NewList(b, clEventsD)
	case clAttrsD.Name:
		_, err = state.NewMap(b, clAttrsD)
	case clSumD.Name:
		_, err = state.NewReducing(b, clSumD, clSum)
	case clSessionD.Name:
		_, err = state.NewValue(b, clSessionD)
	case clCacheD.Name:
		_, err = state.NewMap(b, clCacheD)
	case clRecentD.Name:
		_, err = state.NewList(b, clRecentD)
	default:
		err = fmt.Errorf("unknown state %q", name)
	}
	return err
}

// TestChangelogReplayTTLMapIsEmptyAcrossBackends is the smallest case of
// a logged read replayed on the other kind of backend: IsEmpty on a map
// with TTL and ReturnExpiredIfNotCleanedUp whose entries expired. The
// changelog logs it (it may remove entries) and the replay repeats it, but
// the heap backend removes nothing (heapMap.IsEmpty) while the Pebble
// backend deletes the first expired entry it passes (pebbleMap.IsEmpty), so
// the replayed state differs from the source's.
func TestChangelogReplayTTLMapIsEmptyAcrossBackends(t *testing.T) {
	for _, src := range clBackendKinds {
		for _, dst := range clBackendKinds {
			t.Run(src.name+"-to-"+dst.name, func(t *testing.T) {
				clk := newCLClock(clEpochMS())
				rc := state.NewReplayClock(clk.Now)
				log := &clLog{}
				b := state.NewChangelogBackend(clOpen(t, src, 0, clMaxP-1, rc.Now), rc, log)
				s := &clStates{}
				clRegister(t, b, s)
				mat := clStream(t, b) // empty
				k := clKeys(1)[0]
				b.SetCurrentKey(k.kb, k.kg)
				clErr(t, "Put", s.cache.Put("a", "1"))
				clErr(t, "Put", s.cache.Put("b", "2"))
				clk.AdvanceMS(clTTL.Milliseconds())
				empty, err := s.cache.IsEmpty()
				clErr(t, "IsEmpty", err)
				if empty {
					t.Fatal("IsEmpty() = true with two expired entries not cleaned up (ReturnExpiredIfNotCleanedUp)")
				}
				final := clStream(t, b)

				target := clOpen(t, dst, 0, clMaxP-1, rc.Now)
				clErr(t, "Restore", state.Restore(target, bytes.NewReader(mat)))
				wb := state.NewChangelogBackend(target, rc, nil)
				for _, rec := range log.recs {
					clErr(t, "AddRestored", wb.AddRestored(rec))
				}
				s2 := &clStates{}
				clRegister(t, wb, s2)
				if got := clStream(t, wb); !bytes.Equal(got, final) {
					t.Errorf("replayed snapshot (%d bytes) differs from the source's (%d bytes)", len(got), len(final))
				}
				// The difference is visible: an expired entry that one
				// backend still returns once, the other does not.
				wb.SetCurrentKey(k.kb, k.kg)
				b.SetCurrentKey(k.kb, k.kg)
				if got, want := clMapContents(t, s2.cache), clMapContents(t, s.cache); fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("after the replay the map reads %v, the source's %v", got, want)
				}
			})
		}
	}
}

// TestChangelogReplayTTLMismatch: records carry whether their state has TTL
// (the timestamp flag). Registering the state with the other TTL-ness must
// fail like the restore of a snapshot does (ErrIncompatibleState), rather
// than apply records without timestamps to a TTL state (stamping entries
// with the clock's current reading) or drop the timestamps.
func TestChangelogReplayTTLMismatch(t *testing.T) {
	clk := newCLClock(clEpochMS())
	rc := state.NewReplayClock(clk.Now)
	log := &clLog{}
	b := state.NewChangelogBackend(clOpen(t, clBackendKinds[0], 0, clMaxP-1, rc.Now), rc, log)
	s := &clStates{}
	clRegister(t, b, s, clCountD.Name, clSessionD.Name)
	k := clKeys(1)[0]
	b.SetCurrentKey(k.kb, k.kg)
	clErr(t, "count", s.count.Update(1))
	clErr(t, "session", s.session.Update("x"))

	for _, c := range []struct {
		name     string
		register func(state.Backend) error
	}{
		{"records without TTL, registered with TTL", func(b state.Backend) error {
			_, err := state.NewValue(b, state.ValueDescriptor[int64]{Name: clCountD.Name, TTL: state.TTLConfig{TTL: time.Hour}})
			return err
		}},
		{"records with TTL, registered without", func(b state.Backend) error {
			_, err := state.NewValue(b, state.ValueDescriptor[string]{Name: clSessionD.Name})
			return err
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			wb := state.NewChangelogBackend(clOpen(t, clBackendKinds[0], 0, clMaxP-1, rc.Now), rc, nil)
			for _, rec := range log.recs {
				clErr(t, "AddRestored", wb.AddRestored(rec))
			}
			if err := c.register(wb); !errors.Is(err, state.ErrIncompatibleState) {
				t.Errorf("err = %v, want ErrIncompatibleState", err)
			}
		})
	}
}

// clDiscardLog appends records into one reused buffer, as a log that
// batches records would, without keeping them.
type clDiscardLog struct {
	buf []byte
	n   int64
}

func (l *clDiscardLog) Append(rec []byte) (int64, error) {
	if len(l.buf)+len(rec) > 1<<16 {
		l.buf = l.buf[:0]
	}
	l.buf = append(l.buf, rec...)
	l.n++
	return l.n, nil
}

func BenchmarkChangelogValueUpdate(b *testing.B) {
	keys := clKeys(1024)
	for _, wrapped := range []bool{false, true} {
		name := "heap"
		if wrapped {
			name = "heap+changelog"
		}
		b.Run(name, func(b *testing.B) {
			clk := newCLClock(clEpochMS())
			rc := state.NewReplayClock(clk.Now)
			var be state.Backend = state.NewHeapBackend(state.Options{KeyGroupEnd: clMaxP - 1, MaxParallelism: clMaxP, Clock: rc.Now})
			defer be.Close()
			if wrapped {
				be = state.NewChangelogBackend(be, rc, &clDiscardLog{buf: make([]byte, 0, 1<<16)})
			}
			v, err := state.NewValue(be, clCountD)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				k := &keys[i&1023]
				be.SetCurrentKey(k.kb, k.kg)
				if err := v.Update(int64(i)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
