package state_test

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/state"
	"github.com/weirstream/weir/internal/state/statetest"
)

// The snapshot tests drive both backends through the same operations and
// compare snapshot streams byte for byte: the format is canonical, so equal
// logical state must give equal bytes whatever the backend.

var snapBackends = []struct {
	name string
	nb   statetest.NewBackend
}{
	{"heap", func(t *testing.T, o state.Options) state.Backend { return state.NewHeapBackend(o) }},
	{"pebble", func(t *testing.T, o state.Options) state.Backend {
		b, err := state.NewPebbleBackend(o)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}},
}

const snapTTL = time.Hour

// snapStates are handles on the states the snapshot tests use, one of each
// kind with and without TTL.
type snapStates struct {
	count   state.Value[int64]
	name    state.Value[string]
	events  state.List[string]
	samples state.List[int64]
	attrs   state.Map[string, int64]
	seen    state.Map[int64, string]
}

func (s *snapStates) all() []state.Namespaced {
	return []state.Namespaced{s.count, s.name, s.events, s.samples, s.attrs, s.seen}
}

// registerSnapStates registers the states; reversed registers them in the
// opposite order (which changes the Pebble backend's state ids).
func registerSnapStates(t testing.TB, b state.Backend, reversed bool) *snapStates {
	t.Helper()
	ttl := state.TTLConfig{TTL: snapTTL}
	s := &snapStates{}
	regs := []func() error{
		func() (err error) {
			s.count, err = state.NewValue(b, state.ValueDescriptor[int64]{Name: "count"})
			return err
		},
		func() (err error) {
			s.name, err = state.NewValue(b, state.ValueDescriptor[string]{Name: "name", TTL: ttl})
			return err
		},
		func() (err error) {
			s.events, err = state.NewList(b, state.ListDescriptor[string]{Name: "events"})
			return err
		},
		func() (err error) {
			s.samples, err = state.NewList(b, state.ListDescriptor[int64]{Name: "samples", TTL: ttl})
			return err
		},
		func() (err error) {
			s.attrs, err = state.NewMap(b, state.MapDescriptor[string, int64]{Name: "attrs"})
			return err
		},
		func() (err error) {
			s.seen, err = state.NewMap(b, state.MapDescriptor[int64, string]{Name: "seen", TTL: ttl})
			return err
		},
	}
	if reversed {
		slices.Reverse(regs)
	}
	for _, r := range regs {
		if err := r(); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

var snapNamespaces = []string{"", "w1", "w2"}

func snapKey(i int) string { return fmt.Sprintf("key-%03d", i) }

// snapKeys is the number of keys populate writes; they spread over most of
// the 128 key groups.
const snapKeys = 150

func check(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func setNS(s *snapStates, ns string) {
	for _, h := range s.all() {
		h.SetNamespace([]byte(ns))
	}
}

// populate writes a deterministic mix of entries, advancing the clock so
// that timestamps differ.
func populate(t testing.TB, b state.Backend, clk *statetest.Clock, s *snapStates) {
	t.Helper()
	for i := range snapKeys {
		kb, kg := statetest.KeyBytes(snapKey(i))
		b.SetCurrentKey(kb, kg)
		for n, ns := range snapNamespaces {
			if (i+n)%3 == 2 {
				continue // not every key in every namespace
			}
			setNS(s, ns)
			check(t, s.count.Update(int64(i*10+n)))
			if i%2 == 0 {
				check(t, s.name.Update(fmt.Sprintf("name %d/%s", i, ns)))
			}
			for j := range i % 4 {
				check(t, s.events.Add(fmt.Sprintf("e%d", j)))
			}
			if i%3 == 0 {
				check(t, s.samples.AddAll([]int64{int64(i), -1, int64(n)}))
			}
			for j := range i % 5 {
				check(t, s.attrs.Put(fmt.Sprintf("a%d", j), int64(j*i)))
			}
			if i%4 != 1 {
				check(t, s.seen.Put(int64(i-50), "x"))
				check(t, s.seen.Put(int64(n), strings.Repeat("y", n)))
			}
		}
		clk.Advance(7 * time.Millisecond)
	}
}

// dumpStates reads every entry populate may have written for the keys in
// b's range, as text.
func dumpStates(t testing.TB, b state.Backend, s *snapStates) map[string]string {
	t.Helper()
	out := map[string]string{}
	start, end := b.KeyGroupRange()
	for i := range snapKeys + 20 {
		kb, kg := statetest.KeyBytes(snapKey(i))
		if kg < start || kg > end {
			continue
		}
		b.SetCurrentKey(kb, kg)
		for _, ns := range snapNamespaces {
			setNS(s, ns)
			p := snapKey(i) + "/" + ns
			v, ok, err := s.count.Get()
			check(t, err)
			if ok {
				out[p+"/count"] = fmt.Sprint(v)
			}
			name, ok, err := s.name.Get()
			check(t, err)
			if ok {
				out[p+"/name"] = name
			}
			events, err := s.events.Get()
			check(t, err)
			if events != nil {
				out[p+"/events"] = fmt.Sprint(events)
			}
			samples, err := s.samples.Get()
			check(t, err)
			if samples != nil {
				out[p+"/samples"] = fmt.Sprint(samples)
			}
			m := map[string]int64{}
			check(t, s.attrs.Range(func(k string, v int64) bool { m[k] = v; return true }))
			if len(m) > 0 {
				out[p+"/attrs"] = fmt.Sprint(m)
			}
			m2 := map[int64]string{}
			check(t, s.seen.Range(func(k int64, v string) bool { m2[k] = v; return true }))
			if len(m2) > 0 {
				out[p+"/seen"] = fmt.Sprint(m2)
			}
		}
	}
	return out
}

// open opens a backend of kind nb for key groups [start, end].
func open(t *testing.T, nb statetest.NewBackend, start, end int) *statetest.Env {
	return statetest.Open(t, nb, start, end)
}

// snapshotBytes takes a snapshot of b and writes it.
func snapshotBytes(t testing.TB, b state.Backend) []byte {
	t.Helper()
	s, err := state.TakeSnapshot(b)
	check(t, err)
	defer s.Release()
	var buf bytes.Buffer
	offs, err := s.WriteStream(&buf)
	check(t, err)
	start, end := b.KeyGroupRange()
	if offs.Start != start || len(offs.Offsets) != end-start+2 || offs.Offsets[len(offs.Offsets)-1] != int64(buf.Len()-4) {
		t.Fatalf("offsets %d, %d sections, trailer at %d; want %d, %d, %d", offs.Start, len(offs.Offsets)-1, offs.Offsets[len(offs.Offsets)-1], start, end-start+1, buf.Len()-4)
	}
	return buf.Bytes()
}

func TestSnapshotIdenticalAcrossBackends(t *testing.T) {
	// Three phases: populated; then rewritten (updates, clears, appends,
	// removals, new keys); then with part of the TTL entries expired and
	// removed by reads.
	const phases = 3
	var streams [phases][][]byte
	for _, bk := range snapBackends {
		for _, reversed := range []bool{false, true} {
			e := open(t, bk.nb, 0, statetest.MaxParallelism-1)
			s := registerSnapStates(t, e.B, reversed)
			populate(t, e.B, e.Clock, s)
			streams[0] = append(streams[0], snapshotBytes(t, e.B))
			for round := range 3 {
				mutate(t, e.B, e.Clock, s, round)
			}
			streams[1] = append(streams[1], snapshotBytes(t, e.B))
			e.Clock.Advance(snapTTL - 600*time.Millisecond)
			dumpStates(t, e.B, s)
			streams[2] = append(streams[2], snapshotBytes(t, e.B))
		}
	}
	for p := range phases {
		for i := 1; i < len(streams[p]); i++ {
			if !bytes.Equal(streams[p][0], streams[p][i]) {
				t.Fatalf("phase %d: stream %d (%d bytes) differs from stream 0 (%d bytes)", p, i, len(streams[p][i]), len(streams[p][0]))
			}
		}
		if p > 0 && bytes.Equal(streams[p][0], streams[p-1][0]) {
			t.Fatalf("phase %d changed nothing", p)
		}
	}
	if len(streams[0][0]) < 10000 {
		t.Fatalf("stream of %d bytes: populate wrote little", len(streams[0][0]))
	}
}

func TestSnapshotRoundTrip(t *testing.T) {
	for _, from := range snapBackends {
		for _, to := range snapBackends {
			t.Run(from.name+"->"+to.name, func(t *testing.T) {
				src := open(t, from.nb, 0, statetest.MaxParallelism-1)
				ss := registerSnapStates(t, src.B, false)
				populate(t, src.B, src.Clock, ss)
				stream := snapshotBytes(t, src.B)
				want := dumpStates(t, src.B, ss)

				dst := open(t, to.nb, 0, statetest.MaxParallelism-1)
				check(t, state.Restore(dst.B, bytes.NewReader(stream)))
				ds := registerSnapStates(t, dst.B, true)
				if got := dumpStates(t, dst.B, ds); !maps.Equal(got, want) {
					t.Fatalf("restored state differs:\n got %v\nwant %v", got, want)
				}
				if again := snapshotBytes(t, dst.B); !bytes.Equal(again, stream) {
					t.Fatal("snapshot of the restored backend differs from the stream it was restored from")
				}
				// The restored state is live: writes and TTL work on it.
				kb, kg := statetest.KeyBytes(snapKey(0))
				dst.B.SetCurrentKey(kb, kg)
				setNS(ds, "")
				check(t, ds.events.Add("new"))
				v, err := ds.events.Get()
				check(t, err)
				if len(v) == 0 || v[len(v)-1] != "new" {
					t.Fatalf("events after Add = %v", v)
				}
				if _, ok, err := ds.name.Get(); err != nil || !ok {
					t.Fatalf("restored TTL value missing before expiry: %v", err)
				}
				dst.Clock.Advance(2 * snapTTL)
				if _, ok, err := ds.name.Get(); err != nil || ok {
					t.Fatalf("restored TTL value did not expire (err %v)", err)
				}
				if v, err := ds.samples.Get(); err != nil || v != nil {
					t.Fatalf("restored TTL list did not expire: %v, %v", v, err)
				}
				if n, err := dst.B.CleanupExpired(1 << 20); err != nil || n == 0 {
					t.Fatalf("CleanupExpired removed %d from restored TTL states: %v", n, err)
				}
			})
		}
	}
}

// TestSnapshotRescale restores one stream into two backends that split the
// key groups (parallelism 2), checks that each gets exactly its keys, and
// restores their two streams into one backend again (parallelism 1).
func TestSnapshotRescale(t *testing.T) {
	const mid = statetest.MaxParallelism / 2
	for _, bk := range snapBackends {
		for _, bk2 := range snapBackends {
			t.Run(bk.name+"->"+bk2.name, func(t *testing.T) {
				src := open(t, bk.nb, 0, statetest.MaxParallelism-1)
				ss := registerSnapStates(t, src.B, false)
				populate(t, src.B, src.Clock, ss)
				stream := snapshotBytes(t, src.B)
				want := dumpStates(t, src.B, ss)

				lo := open(t, bk2.nb, 0, mid-1)
				hi := open(t, bk.nb, mid, statetest.MaxParallelism-1)
				check(t, state.Restore(lo.B, bytes.NewReader(stream)))
				check(t, state.Restore(hi.B, bytes.NewReader(stream)))
				gotLo := dumpStates(t, lo.B, registerSnapStates(t, lo.B, false))
				gotHi := dumpStates(t, hi.B, registerSnapStates(t, hi.B, false))
				loStream, hiStream := snapshotBytes(t, lo.B), snapshotBytes(t, hi.B)
				if len(gotLo) == 0 || len(gotHi) == 0 {
					t.Fatalf("split restore: %d and %d entries", len(gotLo), len(gotHi))
				}
				union := maps.Clone(gotLo)
				maps.Copy(union, gotHi)
				if len(union) != len(gotLo)+len(gotHi) || !maps.Equal(union, want) {
					t.Fatalf("split restore: %d + %d entries, want %d in all", len(gotLo), len(gotHi), len(want))
				}
				// Each stream holds only its own key groups: together they
				// restore the original.
				all := open(t, bk2.nb, 0, statetest.MaxParallelism-1)
				check(t, state.Restore(all.B, bytes.NewReader(hiStream)))
				check(t, state.Restore(all.B, bytes.NewReader(loStream)))
				if got := snapshotBytes(t, all.B); !bytes.Equal(got, stream) {
					t.Fatal("scaling back in does not give the original stream")
				}
			})
		}
	}
}

// mutate changes every kind of state in every way after a snapshot.
func mutate(t testing.TB, b state.Backend, clk *statetest.Clock, s *snapStates, round int) {
	for i := range snapKeys + 20 {
		kb, kg := statetest.KeyBytes(snapKey(i))
		b.SetCurrentKey(kb, kg)
		for _, ns := range snapNamespaces {
			setNS(s, ns)
			switch (i + round) % 4 {
			case 0:
				check(t, s.count.Update(-1))
				check(t, s.name.Clear())
				check(t, s.events.Add("late"))
				check(t, s.samples.Update([]int64{42}))
				check(t, s.attrs.Put("a0", -7))
				check(t, s.seen.Remove(int64(i-50)))
			case 1:
				check(t, s.count.Clear())
				check(t, s.events.Clear())
				check(t, s.attrs.Clear())
				check(t, s.seen.Put(1000, "new"))
			case 2:
				check(t, s.name.Update("renamed"))
				check(t, s.events.AddAll([]string{"x", "y"}))
				check(t, s.samples.Add(9))
				check(t, s.attrs.Remove("a1"))
			case 3:
				check(t, s.events.Update([]string{"replaced"}))
				check(t, s.samples.Clear())
				check(t, s.seen.Clear())
			}
		}
		clk.Advance(time.Millisecond)
	}
}

func TestSnapshotIsolatedFromLaterWrites(t *testing.T) {
	for _, bk := range snapBackends {
		t.Run(bk.name, func(t *testing.T) {
			e := open(t, bk.nb, 0, statetest.MaxParallelism-1)
			s := registerSnapStates(t, e.B, false)
			populate(t, e.B, e.Clock, s)
			want := snapshotBytes(t, e.B)

			// Written after the writes.
			snap, err := state.TakeSnapshot(e.B)
			check(t, err)
			mutate(t, e.B, e.Clock, s, 0)
			var buf bytes.Buffer
			_, err = snap.WriteStream(&buf)
			check(t, err)
			snap.Release()
			if !bytes.Equal(buf.Bytes(), want) {
				t.Fatal("writes after TakeSnapshot changed its stream")
			}

			// Written concurrently with the writes; a second snapshot
			// taken meanwhile sees the first round of writes only.
			want2 := snapshotBytes(t, e.B)
			if bytes.Equal(want2, want) {
				t.Fatal("mutate changed nothing")
			}
			snap2, err := state.TakeSnapshot(e.B)
			check(t, err)
			var wg sync.WaitGroup
			var buf2 bytes.Buffer
			var werr error
			wg.Go(func() { _, werr = snap2.WriteStream(&buf2) })
			for round := 1; round < 4; round++ {
				mutate(t, e.B, e.Clock, s, round)
			}
			wg.Wait()
			snap2.Release()
			check(t, werr)
			if !bytes.Equal(buf2.Bytes(), want2) {
				t.Fatal("writes concurrent with WriteStream changed its stream")
			}
		})
	}
}

func TestSnapshotIncompatibleRegistration(t *testing.T) {
	for _, bk := range snapBackends {
		t.Run(bk.name, func(t *testing.T) {
			src := open(t, bk.nb, 0, statetest.MaxParallelism-1)
			populate(t, src.B, src.Clock, registerSnapStates(t, src.B, false))
			stream := snapshotBytes(t, src.B)

			dst := open(t, bk.nb, 0, statetest.MaxParallelism-1)
			check(t, state.Restore(dst.B, bytes.NewReader(stream)))
			if _, err := state.NewList(dst.B, state.ListDescriptor[int64]{Name: "count"}); !errors.Is(err, state.ErrIncompatibleState) {
				t.Errorf("value state registered as a list: %v", err)
			}
			if _, err := state.NewValue(dst.B, state.ValueDescriptor[string]{Name: "name"}); !errors.Is(err, state.ErrIncompatibleState) {
				t.Errorf("TTL value registered without TTL: %v", err)
			}
			if _, err := state.NewMap(dst.B, state.MapDescriptor[string, int64]{Name: "attrs", TTL: state.TTLConfig{TTL: time.Second}}); !errors.Is(err, state.ErrIncompatibleState) {
				t.Errorf("map without TTL registered with TTL: %v", err)
			}
			// The stream carries no types: the heap decodes restored
			// entries at registration and reports what does not decode;
			// Pebble only when the entries are read.
			if bk.name == "heap" {
				if _, err := state.NewList(dst.B, state.ListDescriptor[bool]{Name: "events"}); !errors.Is(err, codec.ErrCorrupt) {
					t.Errorf("strings registered as bools: %v", err)
				}
			}
			// Compatible registrations still work after the failed ones.
			registerSnapStates(t, dst.B, false)
			// Restoring into a backend with registered states is refused.
			if err := state.Restore(dst.B, bytes.NewReader(stream)); err == nil {
				t.Error("Restore after registration succeeded")
			}
		})
	}
}

func TestSnapshotRestoreConflictingStreams(t *testing.T) {
	for _, bk := range snapBackends {
		t.Run(bk.name, func(t *testing.T) {
			a := open(t, bk.nb, 0, 63)
			va, err := state.NewValue(a.B, state.ValueDescriptor[int64]{Name: "s"})
			check(t, err)
			a.B.SetCurrentKey([]byte("k"), 1)
			check(t, va.Update(1))
			b := open(t, bk.nb, 64, 127)
			_, err = state.NewList(b.B, state.ListDescriptor[int64]{Name: "s"})
			check(t, err)

			dst := open(t, bk.nb, 0, 127)
			check(t, state.Restore(dst.B, bytes.NewReader(snapshotBytes(t, a.B))))
			if err := state.Restore(dst.B, bytes.NewReader(snapshotBytes(t, b.B))); !errors.Is(err, state.ErrIncompatibleState) {
				t.Fatalf("restoring a list over a value: %v", err)
			}
		})
	}
}

func TestSnapshotCorrupt(t *testing.T) {
	e := open(t, snapBackends[0].nb, 0, statetest.MaxParallelism-1)
	populate(t, e.B, e.Clock, registerSnapStates(t, e.B, false))
	stream := snapshotBytes(t, e.B)

	restore := func(t *testing.T, b []byte) error {
		t.Helper()
		for _, bk := range snapBackends {
			dst := open(t, bk.nb, 0, statetest.MaxParallelism-1)
			if err := state.Restore(dst.B, bytes.NewReader(b)); !errors.Is(err, state.ErrCorruptSnapshot) {
				return fmt.Errorf("%s: Restore = %v, want ErrCorruptSnapshot", bk.name, err)
			}
		}
		return nil
	}
	t.Run("truncated", func(t *testing.T) {
		for _, n := range []int{0, 3, 8, 12, 13, 40, len(stream) / 2, len(stream) - 5, len(stream) - 1} {
			if err := restore(t, stream[:n]); err != nil {
				t.Errorf("truncated to %d bytes: %v", n, err)
			}
		}
	})
	t.Run("flipped", func(t *testing.T) {
		for _, i := range []int{0, 9, 20, 100, len(stream) / 3, len(stream) / 2, len(stream) - 2} {
			b := bytes.Clone(stream)
			b[i] ^= 0x10
			if err := restore(t, b); err != nil {
				t.Errorf("byte %d flipped: %v", i, err)
			}
		}
	})
	t.Run("trailing", func(t *testing.T) {
		if err := restore(t, append(bytes.Clone(stream), 0)); err != nil {
			t.Error(err)
		}
	})
}

func TestSnapshotPendingStates(t *testing.T) {
	// A restored state that nothing registers yet is carried into the
	// next snapshot: the heap keeps it as encoded records, Pebble stores
	// values and maps in their stored form and lists as their stream
	// payload.
	for _, bk := range snapBackends {
		t.Run(bk.name, func(t *testing.T) {
			src := open(t, bk.nb, 0, statetest.MaxParallelism-1)
			s := registerSnapStates(t, src.B, false)
			populate(t, src.B, src.Clock, s)
			stream := snapshotBytes(t, src.B)
			dst := open(t, bk.nb, 0, statetest.MaxParallelism-1)
			check(t, state.Restore(dst.B, bytes.NewReader(stream)))
			snap, err := state.TakeSnapshot(dst.B)
			check(t, err)
			defer snap.Release()
			var buf bytes.Buffer
			_, err = snap.WriteStream(&buf)
			check(t, err)
			if !bytes.Equal(buf.Bytes(), stream) {
				t.Fatal("snapshot of pending states differs from the stream")
			}
			// Registration adopts them (Pebble converts restored lists to
			// its stored form) and the snapshot is unchanged.
			ds := registerSnapStates(t, dst.B, false)
			if got := snapshotBytes(t, dst.B); !bytes.Equal(got, stream) {
				t.Fatal("snapshot after registration differs from the stream")
			}
			if got, want := dumpStates(t, dst.B, ds), dumpStates(t, src.B, s); !maps.Equal(got, want) {
				t.Fatal("restored state differs")
			}
		})
	}
}

func TestSnapshotReleaseThenClose(t *testing.T) {
	for _, bk := range snapBackends {
		t.Run(bk.name, func(t *testing.T) {
			b := bk.nb(t, state.Options{KeyGroupStart: 0, KeyGroupEnd: 7, MaxParallelism: 8, Dir: t.TempDir() + "/db"})
			v, err := state.NewValue(b, state.ValueDescriptor[int64]{Name: "v"})
			check(t, err)
			b.SetCurrentKey([]byte("k"), 3)
			check(t, v.Update(1))
			snap, err := state.TakeSnapshot(b)
			check(t, err)
			snap.Release()
			snap.Release() // a second Release does nothing
			if _, err := snap.WriteStream(&bytes.Buffer{}); err == nil {
				t.Error("WriteStream after Release succeeded")
			}
			check(t, b.Close())
		})
	}
}
