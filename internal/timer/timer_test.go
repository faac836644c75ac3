package timer

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/weirstream/weir/internal/keygroup"
)

const maxP = 128

func tm(ts int64, key, ns string) Timer {
	t := Timer{Timestamp: ts, KeyGroup: keygroup.Of([]byte(key), maxP)}
	if key != "" {
		t.Key = []byte(key)
	}
	if ns != "" {
		t.Namespace = []byte(ns)
	}
	return t
}

// collect returns a fire func appending to *got.
func collect(got *[]Timer) func(Timer) error {
	return func(t Timer) error { *got = append(*got, t); return nil }
}

func TestEventTimeOrder(t *testing.T) {
	s := NewService()
	in := []Timer{
		tm(30, "a", ""), tm(10, "b", ""), tm(20, "a", "w2"), tm(10, "a", "w1"),
		tm(10, "a", ""), tm(20, "a", "w1"), tm(math.MinInt64, "z", ""),
	}
	for _, x := range in {
		s.RegisterEventTime(x)
	}
	var got []Timer
	if err := s.AdvanceWatermark(20, collect(&got)); err != nil {
		t.Fatal(err)
	}
	want := []Timer{
		tm(math.MinInt64, "z", ""), tm(10, "a", ""), tm(10, "a", "w1"), tm(10, "b", ""),
		tm(20, "a", "w1"), tm(20, "a", "w2"),
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("fired\n%v\nwant\n%v", got, want)
	}
	if n := s.NumEventTimeTimers(); n != 1 {
		t.Fatalf("NumEventTimeTimers() = %d, want 1", n)
	}
	if wm := s.CurrentWatermark(); wm != 20 {
		t.Fatalf("CurrentWatermark() = %d, want 20", wm)
	}
	got = nil
	if err := s.AdvanceWatermark(29, collect(&got)); err != nil || len(got) != 0 {
		t.Fatalf("AdvanceWatermark(29) fired %v, %v; want nothing", got, err)
	}
	if err := s.AdvanceWatermark(math.MaxInt64, collect(&got)); err != nil {
		t.Fatal(err)
	}
	if want := []Timer{tm(30, "a", "")}; !reflect.DeepEqual(got, want) {
		t.Fatalf("fired %v, want %v", got, want)
	}
}

func TestCurrentWatermarkInitial(t *testing.T) {
	if wm := NewService().CurrentWatermark(); wm != math.MinInt64 {
		t.Fatalf("CurrentWatermark() = %d, want MinInt64", wm)
	}
}

func TestProcessingTime(t *testing.T) {
	s := NewService()
	if _, ok := s.NextProcessingTime(); ok {
		t.Fatal("NextProcessingTime on an empty service reported a timer")
	}
	s.RegisterProcessingTime(tm(200, "a", ""))
	s.RegisterProcessingTime(tm(100, "b", ""))
	s.RegisterProcessingTime(tm(100, "a", ""))
	s.RegisterEventTime(tm(50, "a", "")) // other domain: untouched
	if next, ok := s.NextProcessingTime(); !ok || next != 100 {
		t.Fatalf("NextProcessingTime() = %d, %v; want 100, true", next, ok)
	}
	var got []Timer
	if err := s.AdvanceProcessingTime(150, collect(&got)); err != nil {
		t.Fatal(err)
	}
	if want := []Timer{tm(100, "a", ""), tm(100, "b", "")}; !reflect.DeepEqual(got, want) {
		t.Fatalf("fired %v, want %v", got, want)
	}
	if next, ok := s.NextProcessingTime(); !ok || next != 200 {
		t.Fatalf("NextProcessingTime() = %d, %v; want 200, true", next, ok)
	}
	if s.NumProcessingTimeTimers() != 1 || s.NumEventTimeTimers() != 1 {
		t.Fatalf("counts = %d processing, %d event; want 1, 1", s.NumProcessingTimeTimers(), s.NumEventTimeTimers())
	}
	if wm := s.CurrentWatermark(); wm != math.MinInt64 {
		t.Fatalf("processing time moved the watermark to %d", wm)
	}
	s.DeleteProcessingTime(tm(200, "a", ""))
	if _, ok := s.NextProcessingTime(); ok {
		t.Fatal("NextProcessingTime after deleting the last timer reported one")
	}
}

func TestDedup(t *testing.T) {
	s := NewService()
	s.RegisterEventTime(tm(10, "k", "ns"))
	s.RegisterEventTime(tm(10, "k", "ns"))
	s.RegisterEventTime(tm(10, "k", ""))   // other namespace
	s.RegisterEventTime(tm(11, "k", "ns")) // other timestamp
	s.RegisterEventTime(tm(10, "j", "ns")) // other key
	// Key and namespace are separate: ("k","ns") differs from ("kn","s").
	s.RegisterEventTime(tm(10, "kn", "s"))
	// Empty and nil are the same.
	s.RegisterEventTime(Timer{Timestamp: 5, Key: []byte{}, Namespace: []byte{}})
	s.RegisterEventTime(Timer{Timestamp: 5})
	if n := s.NumEventTimeTimers(); n != 6 {
		t.Fatalf("NumEventTimeTimers() = %d, want 6", n)
	}
	// The same identity in the other domain is another timer.
	s.RegisterProcessingTime(tm(10, "k", "ns"))
	if n := s.NumProcessingTimeTimers(); n != 1 {
		t.Fatalf("NumProcessingTimeTimers() = %d, want 1", n)
	}
	var got []Timer
	if err := s.AdvanceWatermark(10, collect(&got)); err != nil {
		t.Fatal(err)
	}
	want := []Timer{
		{Timestamp: 5}, tm(10, "j", "ns"), tm(10, "k", ""), tm(10, "k", "ns"), tm(10, "kn", "s"),
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("fired\n%v\nwant\n%v", got, want)
	}
}

func TestRegisterCopies(t *testing.T) {
	s := NewService()
	key, ns := []byte("key"), []byte("ns")
	s.RegisterEventTime(Timer{Timestamp: 1, Key: key, Namespace: ns})
	key[0], ns[0] = 'X', 'X'
	var got []Timer
	if err := s.AdvanceWatermark(1, collect(&got)); err != nil {
		t.Fatal(err)
	}
	if string(got[0].Key) != "key" || string(got[0].Namespace) != "ns" {
		t.Fatalf("fired %q/%q, want the bytes at registration key/ns", got[0].Key, got[0].Namespace)
	}
	// The returned key must not share capacity with the namespace.
	k := append(got[0].Key, '!')
	if string(got[0].Namespace) != "ns" || string(k) != "key!" {
		t.Fatalf("appending to Key changed Namespace to %q", got[0].Namespace)
	}
}

func TestDelete(t *testing.T) {
	s := NewService()
	for i := range 10 {
		s.RegisterEventTime(tm(int64(i), "k", ""))
	}
	s.DeleteEventTime(tm(3, "k", ""))
	s.DeleteEventTime(tm(0, "k", ""))
	s.DeleteEventTime(tm(9, "k", ""))
	s.DeleteEventTime(tm(3, "k", ""))      // again: no-op
	s.DeleteEventTime(tm(4, "k", "x"))     // absent namespace: no-op
	s.DeleteProcessingTime(tm(5, "k", "")) // other domain: no-op
	if n := s.NumEventTimeTimers(); n != 7 {
		t.Fatalf("NumEventTimeTimers() = %d, want 7", n)
	}
	var got []int64
	err := s.AdvanceWatermark(100, func(t Timer) error { got = append(got, t.Timestamp); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if want := []int64{1, 2, 4, 5, 6, 7, 8}; !slices.Equal(got, want) {
		t.Fatalf("fired %v, want %v", got, want)
	}
	// A deleted timer can be registered again.
	s.RegisterEventTime(tm(3, "k", ""))
	if n := s.NumEventTimeTimers(); n != 1 {
		t.Fatalf("NumEventTimeTimers() = %d, want 1", n)
	}
}

func TestRegisterDuringFiring(t *testing.T) {
	s := NewService()
	s.RegisterEventTime(tm(10, "a", ""))
	s.RegisterEventTime(tm(20, "a", ""))
	s.RegisterEventTime(tm(30, "a", ""))
	var got []Timer
	err := s.AdvanceWatermark(25, func(x Timer) error {
		got = append(got, x)
		if x.Timestamp == 10 && len(got) == 1 {
			s.RegisterEventTime(tm(15, "b", "")) // due: fires in this call, before 20
			s.RegisterEventTime(tm(5, "c", ""))  // earlier than the one firing: next
			s.RegisterEventTime(tm(26, "d", "")) // not due
			s.DeleteEventTime(tm(20, "a", ""))   // deleted before it fires
			s.RegisterEventTime(tm(10, "a", "")) // itself again: fires again
		}
		if x.Timestamp == 15 {
			s.RegisterEventTime(tm(25, "b", "")) // due, exactly at the watermark
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []Timer{tm(10, "a", ""), tm(5, "c", ""), tm(10, "a", ""), tm(15, "b", ""), tm(25, "b", "")}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("fired\n%v\nwant\n%v", got, want)
	}
	// What remains is 26 and 30.
	if n := s.NumEventTimeTimers(); n != 2 {
		t.Fatalf("NumEventTimeTimers() = %d, want 2", n)
	}
}

func TestFireErrorStops(t *testing.T) {
	s := NewService()
	for i := range 5 {
		s.RegisterEventTime(tm(int64(i), "k", ""))
	}
	boom := errors.New("boom")
	var got []int64
	err := s.AdvanceWatermark(10, func(t Timer) error {
		got = append(got, t.Timestamp)
		if t.Timestamp == 2 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) {
		t.Fatalf("AdvanceWatermark() = %v, want %v", err, boom)
	}
	if want := []int64{0, 1, 2}; !slices.Equal(got, want) {
		t.Fatalf("fired %v, want %v", got, want)
	}
	if n := s.NumEventTimeTimers(); n != 2 {
		t.Fatalf("NumEventTimeTimers() = %d, want 2 (the failed timer is removed)", n)
	}

	s.RegisterProcessingTime(tm(1, "k", ""))
	s.RegisterProcessingTime(tm(2, "k", ""))
	err = s.AdvanceProcessingTime(10, func(Timer) error { return boom })
	if !errors.Is(err, boom) || s.NumProcessingTimeTimers() != 1 {
		t.Fatalf("AdvanceProcessingTime() = %v with %d left, want %v with 1", err, s.NumProcessingTimeTimers(), boom)
	}
}

type visit struct {
	eventTime bool
	t         Timer
}

func TestForEachInKeyGroup(t *testing.T) {
	s := NewService()
	mk := func(ts int64, key string, kg int) Timer { return Timer{Timestamp: ts, Key: []byte(key), KeyGroup: kg} }
	s.RegisterEventTime(mk(30, "a", 1))
	s.RegisterEventTime(mk(10, "b", 1))
	s.RegisterEventTime(mk(10, "a", 1))
	s.RegisterEventTime(mk(10, "c", 2))
	s.RegisterProcessingTime(mk(5, "a", 1))
	s.RegisterProcessingTime(mk(7, "c", 2))
	var got []visit
	s.ForEachInKeyGroup(1, func(et bool, t Timer) { got = append(got, visit{et, t}) })
	want := []visit{
		{true, mk(10, "a", 1)}, {true, mk(10, "b", 1)}, {true, mk(30, "a", 1)}, {false, mk(5, "a", 1)},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("key group 1:\n%v\nwant\n%v", got, want)
	}
	got = nil
	s.ForEachInKeyGroup(3, func(et bool, t Timer) { got = append(got, visit{et, t}) })
	if len(got) != 0 {
		t.Fatalf("key group 3: %v, want nothing", got)
	}
	// Deleted and fired timers leave their key group.
	s.DeleteEventTime(mk(10, "c", 2))
	if err := s.AdvanceProcessingTime(7, func(Timer) error { return nil }); err != nil {
		t.Fatal(err)
	}
	s.ForEachInKeyGroup(2, func(et bool, t Timer) { got = append(got, visit{et, t}) })
	if len(got) != 0 {
		t.Fatalf("key group 2 after delete and fire: %v, want nothing", got)
	}
	if s.event.byKeyGroup[2] != nil || s.processing.byKeyGroup[2] != nil {
		t.Fatal("an emptied key group keeps its array")
	}
	s.ForEachInKeyGroup(1<<20, func(bool, Timer) { t.Fatal("timer in an unused key group") })
}

// TestSnapshotRestore moves the timers of half the key groups to a new
// service, as a rescale would, with ForEachInKeyGroup and Restore.
func TestSnapshotRestore(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	s := NewService()
	for i := range 1000 {
		x := tm(rng.Int64N(100), fmt.Sprint("k", rng.IntN(50)), fmt.Sprint(rng.IntN(3)))
		if i%2 == 0 {
			s.RegisterEventTime(x)
		} else {
			s.RegisterProcessingTime(x)
		}
	}
	lo, hi := keygroup.Range(0, maxP, 2)
	r := NewService()
	for kg := lo; kg <= hi; kg++ {
		s.ForEachInKeyGroup(kg, r.Restore)
	}
	drain := func(s *Service, eventTime bool) (got []Timer) {
		keep := func(x Timer) error {
			if x.KeyGroup >= lo && x.KeyGroup <= hi {
				got = append(got, x)
			}
			return nil
		}
		if eventTime {
			s.AdvanceWatermark(math.MaxInt64, keep)
		} else {
			s.AdvanceProcessingTime(math.MaxInt64, keep)
		}
		return got
	}
	for _, et := range []bool{true, false} {
		want, got := drain(s, et), drain(r, et)
		if len(want) == 0 || !reflect.DeepEqual(got, want) {
			t.Fatalf("eventTime=%v: restored service fired %d timers, want the %d of the range", et, len(got), len(want))
		}
	}
}

// model is the reference: a sorted slice of event-time timers.
type model struct{ ts []Timer }

func (m *model) register(t Timer) {
	i, found := slices.BinarySearchFunc(m.ts, t, Compare)
	if !found {
		m.ts = slices.Insert(m.ts, i, t)
	}
}

func (m *model) delete(t Timer) {
	if i, found := slices.BinarySearchFunc(m.ts, t, Compare); found {
		m.ts = slices.Delete(m.ts, i, i+1)
	}
}

func (m *model) advance(wm int64, fire func(Timer) error) error {
	for len(m.ts) > 0 && m.ts[0].Timestamp <= wm {
		t := m.ts[0]
		m.ts = m.ts[1:]
		if err := fire(t); err != nil {
			return err
		}
	}
	return nil
}

// TestRandomAgainstModel runs random registrations, deletions and watermark
// advances, with fire itself registering and deleting, on the service and on
// the model, and requires the same firings.
func TestRandomAgainstModel(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			s, m := NewService(), &model{}
			if seed%2 == 1 {
				s.hashMask = 7 // chains of colliding identities
			}
			// Two generators with the same seed, one per side, stay in step
			// only while both sides fire the same timers in the same order.
			rs, rm := rand.New(rand.NewPCG(seed, 0)), rand.New(rand.NewPCG(seed, 0))
			var wmS, wmM int64
			random := func(rng *rand.Rand, wm int64) Timer {
				return tm(wm+rng.Int64N(40)-5, fmt.Sprint(rng.IntN(8)), fmt.Sprint(rng.IntN(3)))
			}
			failAt, total, failures := 0, 0, 0
			var firedS, firedM []Timer
			step := func(rng *rand.Rand, wm *int64, fired *[]Timer, register, del func(Timer), advance func(int64, func(Timer) error) error) error {
				switch op := rng.IntN(10); {
				case op < 5:
					register(random(rng, *wm))
				case op < 8:
					del(random(rng, *wm))
				default:
					*wm += rng.Int64N(15)
					n := 0
					return advance(*wm, func(x Timer) error {
						*fired = append(*fired, x)
						n++
						if failAt > 0 && n == failAt {
							return errors.New("fail")
						}
						switch rng.IntN(4) {
						case 0:
							register(random(rng, *wm))
						case 1:
							del(random(rng, *wm))
						}
						return nil
					})
				}
				return nil
			}
			for i := range 2000 {
				failAt = []int{0, 0, 0, 3}[i%4]
				errS := step(rs, &wmS, &firedS, s.RegisterEventTime, s.DeleteEventTime, s.AdvanceWatermark)
				errM := step(rm, &wmM, &firedM, m.register, m.delete, m.advance)
				if (errS == nil) != (errM == nil) {
					t.Fatalf("step %d: errors differ: service %v, model %v", i, errS, errM)
				}
				if !reflect.DeepEqual(firedS, firedM) {
					t.Fatalf("step %d: fired\n%v\nmodel fired\n%v", i, firedS, firedM)
				}
				total += len(firedS)
				if errS != nil {
					failures++
				}
				firedS, firedM = firedS[:0], firedM[:0]
				if s.NumEventTimeTimers() != len(m.ts) {
					t.Fatalf("step %d: %d timers, model has %d", i, s.NumEventTimeTimers(), len(m.ts))
				}
			}
			if total < 1000 || failures == 0 {
				t.Fatalf("weak run: %d firings, %d failed advances", total, failures)
			}
			// Every timer is in its key group exactly once.
			var all []Timer
			for kg := range maxP {
				s.ForEachInKeyGroup(kg, func(et bool, x Timer) {
					if !et || x.KeyGroup != kg {
						t.Fatalf("ForEachInKeyGroup(%d) gave %v (eventTime %v)", kg, x, et)
					}
					all = append(all, x)
				})
			}
			slices.SortFunc(all, Compare)
			if !reflect.DeepEqual(all, m.ts) && len(all)+len(m.ts) > 0 {
				t.Fatalf("key-group sets hold\n%v\nmodel holds\n%v", all, m.ts)
			}
		})
	}
}

func TestCollisions(t *testing.T) {
	s := NewService()
	s.hashMask = 0 // every identity collides
	for i := range 5 {
		s.RegisterEventTime(tm(int64(i), "k", ""))
		s.RegisterEventTime(tm(int64(i), "k", ""))
	}
	if n := s.NumEventTimeTimers(); n != 5 {
		t.Fatalf("NumEventTimeTimers() = %d, want 5", n)
	}
	for _, i := range []int64{2, 4, 0, 0} { // middle, head, tail of the chain, absent
		s.DeleteEventTime(tm(i, "k", ""))
	}
	var got []int64
	if err := s.AdvanceWatermark(10, func(t Timer) error { got = append(got, t.Timestamp); return nil }); err != nil {
		t.Fatal(err)
	}
	if want := []int64{1, 3}; !slices.Equal(got, want) {
		t.Fatalf("fired %v, want %v", got, want)
	}
	if len(s.event.byHash) != 0 {
		t.Fatalf("hash index keeps %d chains", len(s.event.byHash))
	}
}

func TestKeyGroupOutOfRange(t *testing.T) {
	for _, kg := range []int{-1, keygroup.UpperBoundMaxParallelism} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("RegisterEventTime with key group %d did not panic", kg)
				}
			}()
			NewService().RegisterEventTime(Timer{KeyGroup: kg})
		}()
	}
}

func TestCompare(t *testing.T) {
	for _, c := range []struct {
		a, b Timer
		want int
	}{
		{tm(1, "b", "b"), tm(2, "a", "a"), -1},
		{tm(2, "a", "a"), tm(1, "b", "b"), 1},
		{tm(1, "a", "z"), tm(1, "b", "a"), -1},
		{tm(1, "a", "a"), tm(1, "a", "b"), -1},
		{tm(1, "a", "a"), tm(1, "a", "a"), 0},
		{Timer{Timestamp: 1, Key: []byte{}}, Timer{Timestamp: 1}, 0},
	} {
		if got := Compare(c.a, c.b); got != c.want {
			t.Errorf("Compare(%v, %v) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}

// BenchmarkRegisterFire registers 1M event-time timers over 10k keys and
// random timestamps, then fires them all with one watermark.
func BenchmarkRegisterFire(b *testing.B) {
	const n = 1 << 20
	rng := rand.New(rand.NewPCG(1, 1))
	keys := make([][]byte, 10_000)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "key-%08d", i)
	}
	ts := make([]Timer, n)
	for i := range ts {
		k := keys[rng.IntN(len(keys))]
		ts[i] = Timer{Timestamp: rng.Int64N(n), Key: k, KeyGroup: keygroup.Of(k, maxP)}
	}
	fire := func(Timer) error { return nil }
	b.ReportAllocs()
	for b.Loop() {
		s := NewService()
		for _, t := range ts {
			s.RegisterEventTime(t)
		}
		if err := s.AdvanceWatermark(math.MaxInt64, fire); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/timer")
}

func TestSnapshotRoundTripFiltersKeyGroups(t *testing.T) {
	s := NewService()
	s.RegisterEventTime(Timer{Timestamp: 10, Key: []byte("a"), KeyGroup: 1})
	s.RegisterEventTime(Timer{Timestamp: 20, Key: []byte("b"), KeyGroup: 5, Namespace: []byte("w")})
	s.RegisterProcessingTime(Timer{Timestamp: -7, Key: []byte("c"), KeyGroup: 3})
	data := s.AppendSnapshot(nil, 0, 9)
	if len(s.AppendSnapshot(nil, 6, 9)) != 0 {
		t.Fatal("a range without timers must encode to nothing")
	}

	r := NewService()
	var seen []string
	if err := r.RestoreSnapshot(data, 2, 9, func(et bool, tm Timer) {
		seen = append(seen, fmt.Sprintf("%v/%d/%s/%s", et, tm.Timestamp, tm.Key, tm.Namespace))
	}); err != nil {
		t.Fatal(err)
	}
	want := []string{"false/-7/c/", "true/20/b/w"}
	if fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Fatalf("restored %v, want %v", seen, want)
	}
	if r.NumEventTimeTimers() != 1 || r.NumProcessingTimeTimers() != 1 {
		t.Fatalf("restored %d event and %d processing timers", r.NumEventTimeTimers(), r.NumProcessingTimeTimers())
	}
	for i := range len(data) - 1 {
		if err := NewService().RestoreSnapshot(data[:i], 0, 9, nil); !errors.Is(err, ErrCorruptSnapshot) {
			t.Fatalf("truncated at %d: err %v, want ErrCorruptSnapshot", i, err)
		}
	}
}

// Timers fire in Compare order however their keys tie: few timestamps,
// keys of 0 to 12 bytes from a small alphabet with zero bytes, so that
// 8-byte prefixes (the heap's shortcut) tie and short keys pad with zeros.
func TestFiringOrderWithTiedTimestampsAndPrefixes(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	s := NewService()
	seen := map[string]bool{}
	var want []Timer
	for range 3000 {
		key := make([]byte, rng.IntN(13))
		for i := range key {
			key[i] = []byte{0, 1, 'a'}[rng.IntN(3)]
		}
		x := Timer{Timestamp: int64(rng.IntN(3)), Key: key, Namespace: []byte{byte(rng.IntN(2))}}
		id := fmt.Sprint(x.Timestamp, x.Key, x.Namespace)
		if seen[id] {
			continue
		}
		seen[id] = true
		s.RegisterEventTime(x)
		want = append(want, x)
	}
	slices.SortFunc(want, Compare)
	var got []Timer
	if err := s.AdvanceWatermark(10, collect(&got)); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("fired %d timers, want %d", len(got), len(want))
	}
	for i := range got {
		if Compare(got[i], want[i]) != 0 {
			t.Fatalf("timer %d fired out of order: %v, want %v", i, got[i], want[i])
		}
	}
}
