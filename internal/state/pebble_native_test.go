package state_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/state"
)

// The native tests use key groups [0, 7] (or a part of it) and nativeKeys
// keys, key i in key group i%8.
const nativeKeys = 64

func nativeKey(i int) ([]byte, int) { return []byte(fmt.Sprintf("k%03d", i)), i % 8 }

var nativeTTL = state.TTLConfig{TTL: time.Hour}

// nativeStates are the states the native tests write: registered ones of
// every kind, with and without TTL, and rl, a list restored from a
// canonical stream.
type nativeStates struct {
	v  state.Value[string]
	l  state.List[int64]
	m  state.Map[string, int64]
	vt state.Value[int64]
	lt state.List[string]
	rl state.List[string] // nil until registered
}

func registerNative(t *testing.T, b state.Backend, withRL bool) *nativeStates {
	t.Helper()
	var s nativeStates
	var err error
	s.v, err = state.NewValue(b, state.ValueDescriptor[string]{Name: "v"})
	pebbleOK(t, err)
	s.l, err = state.NewList(b, state.ListDescriptor[int64]{Name: "l"})
	pebbleOK(t, err)
	s.m, err = state.NewMap(b, state.MapDescriptor[string, int64]{Name: "m"})
	pebbleOK(t, err)
	s.vt, err = state.NewValue(b, state.ValueDescriptor[int64]{Name: "vt", TTL: nativeTTL})
	pebbleOK(t, err)
	s.lt, err = state.NewList(b, state.ListDescriptor[string]{Name: "lt", TTL: nativeTTL})
	pebbleOK(t, err)
	if withRL {
		s.rl, err = state.NewList(b, state.ListDescriptor[string]{Name: "rl"})
		pebbleOK(t, err)
	}
	return &s
}

// writeNative writes round r of the states for the keys in b's range.
func writeNative(t *testing.T, b state.Backend, s *nativeStates, r int) {
	t.Helper()
	start, end := b.KeyGroupRange()
	for i := range nativeKeys {
		key, kg := nativeKey(i)
		if kg < start || kg > end {
			continue
		}
		b.SetCurrentKey(key, kg)
		pebbleOK(t, s.v.Update(fmt.Sprintf("v%d-%d", i, r)))
		// Several merges per list, so that the database holds operands.
		pebbleOK(t, s.l.Add(int64(i)))
		pebbleOK(t, s.l.Add(int64(r)))
		pebbleOK(t, s.m.Put(fmt.Sprintf("a%d", r), int64(i)))
		pebbleOK(t, s.m.Put("b", int64(r)))
		pebbleOK(t, s.vt.Update(int64(i*100+r)))
		pebbleOK(t, s.lt.Add(fmt.Sprint(r)))
	}
}

// restoreRL restores into b a canonical stream of a list "rl" of key groups
// [0, 7] with two elements per key.
func restoreRL(t *testing.T, b state.Backend) {
	t.Helper()
	h := state.NewHeapBackend(state.Options{KeyGroupEnd: 7, MaxParallelism: 8})
	defer h.Close()
	rl, err := state.NewList(h, state.ListDescriptor[string]{Name: "rl"})
	pebbleOK(t, err)
	for i := range nativeKeys {
		key, kg := nativeKey(i)
		h.SetCurrentKey(key, kg)
		pebbleOK(t, rl.AddAll([]string{"x", fmt.Sprint(i)}))
	}
	pebbleOK(t, state.Restore(b, bytes.NewReader(canonicalBytes(t, h))))
}

func canonicalBytes(t *testing.T, b state.Backend) []byte {
	t.Helper()
	snap, err := state.TakeSnapshot(b)
	pebbleOK(t, err)
	defer snap.Release()
	var buf bytes.Buffer
	_, err = snap.WriteStream(&buf)
	pebbleOK(t, err)
	return buf.Bytes()
}

// dumpNative reads every state for every key in b's range.
func dumpNative(t *testing.T, b state.Backend, s *nativeStates) string {
	t.Helper()
	var out strings.Builder
	start, end := b.KeyGroupRange()
	for i := range nativeKeys {
		key, kg := nativeKey(i)
		if kg < start || kg > end {
			continue
		}
		b.SetCurrentKey(key, kg)
		v, ok, err := s.v.Get()
		pebbleOK(t, err)
		l, err := s.l.Get()
		pebbleOK(t, err)
		m := pebbleEntries(t, s.m)
		keys := slices.Sorted(func(yield func(string) bool) {
			for k := range m {
				if !yield(k) {
					return
				}
			}
		})
		vt, okt, err := s.vt.Get()
		pebbleOK(t, err)
		lt, err := s.lt.Get()
		pebbleOK(t, err)
		fmt.Fprintf(&out, "%s: v=%q,%v l=%v m=", key, v, ok, l)
		for _, k := range keys {
			fmt.Fprintf(&out, "%s:%d,", k, m[k])
		}
		fmt.Fprintf(&out, " vt=%d,%v lt=%v", vt, okt, lt)
		if s.rl != nil {
			rl, err := s.rl.Get()
			pebbleOK(t, err)
			fmt.Fprintf(&out, " rl=%v", rl)
		}
		out.WriteString("\n")
	}
	return out.String()
}

func newNativePebble(t *testing.T, start, end int) *state.PebbleBackend {
	t.Helper()
	b, err := state.NewPebbleBackend(state.Options{KeyGroupStart: start, KeyGroupEnd: end, MaxParallelism: 8, Dir: t.TempDir() + "/db"})
	pebbleOK(t, err)
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Error(err)
		}
	})
	return b
}

func takeNative(t *testing.T, b *state.PebbleBackend) *state.NativeSnapshot {
	t.Helper()
	snap, err := b.TakeNativeSnapshot(filepath.Join(t.TempDir(), "chk"))
	pebbleOK(t, err)
	t.Cleanup(func() {
		if err := snap.Release(); err != nil {
			t.Error(err)
		}
	})
	return snap
}

// downloadNative copies a snapshot's files into a new directory, as a
// download would, and returns it.
func downloadNative(t *testing.T, snap *state.NativeSnapshot) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "dl")
	for _, f := range snap.Files {
		dst := filepath.Join(dir, filepath.FromSlash(f.Name))
		pebbleOK(t, os.MkdirAll(filepath.Dir(dst), 0o755))
		data, err := os.ReadFile(filepath.Join(snap.Dir, filepath.FromSlash(f.Name)))
		pebbleOK(t, err)
		if int64(len(data)) != f.Size {
			t.Fatalf("%s: %d bytes, listed as %d", f.Name, len(data), f.Size)
		}
		pebbleOK(t, os.WriteFile(dst, data, 0o644))
	}
	return dir
}

func openNative(t *testing.T, snap *state.NativeSnapshot) *state.PebbleBackend {
	t.Helper()
	b, err := state.OpenPebbleFromNative(state.Options{KeyGroupStart: snap.KeyGroupStart, KeyGroupEnd: snap.KeyGroupEnd, MaxParallelism: 8, Dir: downloadNative(t, snap)}, snap.Registry)
	pebbleOK(t, err)
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Error(err)
		}
	})
	return b
}

type nativeRegistryJSON struct {
	States []struct {
		Name       string
		ID         int
		ListFormat string
	}
}

func decodeRegistryForTest(t *testing.T, reg []byte) map[string]int {
	t.Helper()
	var r nativeRegistryJSON
	pebbleOK(t, json.Unmarshal(reg, &r))
	ids := map[string]int{}
	for _, s := range r.States {
		ids[s.Name] = s.ID
	}
	return ids
}

func TestNativeSnapshotRoundTrip(t *testing.T) {
	b := newNativePebble(t, 0, 7)
	restoreRL(t, b) // rl stays unregistered: stored as stream payloads
	s := registerNative(t, b, false)
	writeNative(t, b, s, 1)
	writeNative(t, b, s, 2)
	want := dumpNative(t, b, s)
	wantCanonical := canonicalBytes(t, b)

	snap := takeNative(t, b)
	if snap.KeyGroupStart != 0 || snap.KeyGroupEnd != 7 {
		t.Fatalf("snapshot of key groups [%d, %d]", snap.KeyGroupStart, snap.KeyGroupEnd)
	}
	var r nativeRegistryJSON
	pebbleOK(t, json.Unmarshal(snap.Registry, &r))
	formats := map[string]string{}
	for _, st := range r.States {
		formats[st.Name] = st.ListFormat
	}
	if formats["l"] != "native" || formats["lt"] != "native" || formats["rl"] != "stream" || formats["v"] != "" {
		t.Fatalf("list formats %v", formats)
	}

	b2 := openNative(t, snap)
	// A canonical snapshot needs the codecs of lists restored in the
	// native form.
	if _, err := state.TakeSnapshot(b2); err == nil {
		t.Fatal("TakeSnapshot with an unregistered native list succeeded")
	}
	// Incompatible registrations fail and leave the state restored.
	if _, err := state.NewList(b2, state.ListDescriptor[string]{Name: "v"}); !errors.Is(err, state.ErrIncompatibleState) {
		t.Fatalf("value registered as a list: %v", err)
	}
	if _, err := state.NewValue(b2, state.ValueDescriptor[int64]{Name: "vt"}); !errors.Is(err, state.ErrIncompatibleState) {
		t.Fatalf("TTL value registered without TTL: %v", err)
	}
	if _, err := state.NewMap(b2, state.MapDescriptor[string, int64]{Name: "l"}); !errors.Is(err, state.ErrIncompatibleState) {
		t.Fatalf("list registered as a map: %v", err)
	}
	s2 := registerNative(t, b2, true)
	if got := dumpNative(t, b2, &nativeStates{v: s2.v, l: s2.l, m: s2.m, vt: s2.vt, lt: s2.lt}); got != want {
		t.Fatalf("restored:\n%s\nwant:\n%s", got, want)
	}
	if !bytes.Equal(canonicalBytes(t, b2), wantCanonical) {
		t.Fatal("canonical snapshot of the restored backend differs from the original's")
	}
	// rl was converted at registration; l was not (it would fail to
	// decode as a stream payload).
	b2.SetCurrentKey(nativeKey(5))
	rl, err := s2.rl.Get()
	pebbleOK(t, err)
	if !slices.Equal(rl, []string{"x", "5"}) {
		t.Fatalf("rl = %v", rl)
	}

	// New states get ids above the restored ones, and do not touch them.
	nv, err := state.NewValue(b2, state.ValueDescriptor[string]{Name: "new"})
	pebbleOK(t, err)
	for i := range nativeKeys {
		b2.SetCurrentKey(nativeKey(i))
		pebbleOK(t, nv.Update("new"))
	}
	writeNative(t, b2, s2, 3)
	if got := dumpNative(t, b2, s2); got == want {
		t.Fatal("round 3 changed nothing")
	}
	ids := decodeRegistryForTest(t, takeNative(t, b2).Registry)
	for name, id := range ids {
		if name != "new" && id >= ids["new"] {
			t.Fatalf("ids %v: new state below a restored one", ids)
		}
	}
	if len(ids) != 7 {
		t.Fatalf("ids %v", ids)
	}
}

func TestNativeSnapshotIsolatedFromLaterWrites(t *testing.T) {
	b := newNativePebble(t, 0, 7)
	s := registerNative(t, b, false)
	writeNative(t, b, s, 1)
	want := dumpNative(t, b, s)
	snap := takeNative(t, b)
	writeNative(t, b, s, 2)
	later := dumpNative(t, b, s)
	if later == want {
		t.Fatal("round 2 changed nothing")
	}
	pebbleOK(t, b.Compact())

	b2 := openNative(t, snap)
	if got := dumpNative(t, b2, registerNative(t, b2, false)); got != want {
		t.Fatalf("snapshot:\n%s\nwant:\n%s", got, want)
	}
	if got := dumpNative(t, b, s); got != later {
		t.Fatal("the backend lost writes")
	}
}

func nativeSSTs(t *testing.T, snap *state.NativeSnapshot) map[string]int64 {
	t.Helper()
	ssts := map[string]int64{}
	if !slices.IsSortedFunc(snap.Files, func(x, y state.NativeFile) int { return strings.Compare(x.Name, y.Name) }) {
		t.Fatal("files not sorted")
	}
	for _, f := range snap.Files {
		sst := strings.HasSuffix(f.Name, ".sst")
		if f.Shared != sst {
			t.Fatalf("%s: Shared %v", f.Name, f.Shared)
		}
		if sst {
			ssts[f.Name] = f.Size
		}
	}
	return ssts
}

func TestNativeSnapshotIncremental(t *testing.T) {
	b := newNativePebble(t, 0, 7)
	v, err := state.NewValue(b, state.ValueDescriptor[int64]{Name: "v"})
	pebbleOK(t, err)
	write := func(from, to int) {
		for i := from; i < to; i++ {
			b.SetCurrentKey([]byte(fmt.Sprintf("key-%06d", i)), i%8)
			pebbleOK(t, v.Update(int64(i)))
		}
	}
	write(0, 20_000)
	snap1 := takeNative(t, b)
	ssts1 := nativeSSTs(t, snap1)
	var names []string
	for _, f := range snap1.Files {
		names = append(names, fmt.Sprintf("%s (%d bytes, shared %v)", f.Name, f.Size, f.Shared))
	}
	t.Logf("snapshot 1 files:\n%s", strings.Join(names, "\n"))
	if len(ssts1) == 0 {
		t.Fatal("snapshot 1 has no sstable")
	}

	write(20_000, 40_000)
	snap2 := takeNative(t, b)
	ssts2 := nativeSSTs(t, snap2)
	for name, size := range ssts1 {
		if ssts2[name] != size {
			t.Fatalf("snapshot 2 has %s of %d bytes, snapshot 1 of %d", name, ssts2[name], size)
		}
	}
	if len(ssts2) <= len(ssts1) {
		t.Fatalf("snapshot 2 has %d sstables, snapshot 1 %d", len(ssts2), len(ssts1))
	}

	pebbleOK(t, b.Compact())
	snap3 := takeNative(t, b)
	ssts3 := nativeSSTs(t, snap3)
	gone := 0
	for name := range ssts2 {
		if _, ok := ssts3[name]; !ok {
			gone++
		}
	}
	if gone == 0 {
		t.Fatalf("compaction removed no sstable: %v, then %v", ssts2, ssts3)
	}
	t.Logf("sstables: snapshot 1 %d, snapshot 2 %d, after compaction %d (%d of snapshot 2's gone)", len(ssts1), len(ssts2), len(ssts3), gone)

	// Every snapshot is still whole after the compaction.
	b3 := openNative(t, snap2)
	v3, err := state.NewValue(b3, state.ValueDescriptor[int64]{Name: "v"})
	pebbleOK(t, err)
	for _, i := range []int{0, 19_999, 20_000, 39_999} {
		b3.SetCurrentKey([]byte(fmt.Sprintf("key-%06d", i)), i%8)
		pebbleWantValue(t, v3, int64(i), true)
	}
}

func TestNativeSnapshotRescale(t *testing.T) {
	src := newNativePebble(t, 0, 7)
	restoreRL(t, src)
	s := registerNative(t, src, false)
	writeNative(t, src, s, 1)
	writeNative(t, src, s, 2)
	srcCanonical := canonicalBytes(t, src)
	snap := takeNative(t, src)
	dir := downloadNative(t, snap)
	listDir := func() []string {
		entries, err := os.ReadDir(dir)
		pebbleOK(t, err)
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		return names
	}
	dirBefore := listDir()

	// Split: each half holds exactly the entries a canonical restore of
	// its range holds.
	var halves [2]*state.PebbleBackend
	var halfSnaps [2]*state.NativeSnapshot
	for h, r := range [2][2]int{{0, 3}, {4, 7}} {
		b := newNativePebble(t, r[0], r[1])
		pebbleOK(t, state.RestoreFromNative(b, dir, snap.Registry, 0, 7))
		ref := newNativePebble(t, r[0], r[1])
		pebbleOK(t, state.Restore(ref, bytes.NewReader(srcCanonical)))
		withRL := h == 0 // the second half keeps rl as stream payloads
		sb, sref := registerNative(t, b, withRL), registerNative(t, ref, withRL)
		got, want := dumpNative(t, b, sb), dumpNative(t, ref, sref)
		if got != want || !strings.Contains(got, "k00"+fmt.Sprint(r[0])) {
			t.Fatalf("[%d, %d]:\n%s\nwant:\n%s", r[0], r[1], got, want)
		}
		if !bytes.Equal(canonicalBytes(t, b), canonicalBytes(t, ref)) {
			t.Fatalf("[%d, %d]: canonical snapshot differs from a canonical restore's", r[0], r[1])
		}
		halves[h] = b
		halfSnaps[h] = takeNative(t, b)
	}

	if got := listDir(); !slices.Equal(got, dirBefore) {
		t.Fatalf("RestoreFromNative changed its directory: %v, was %v", got, dirBefore)
	}

	// Merge: both halves (rl native in one, stream payloads in the other)
	// into one backend equal to the source.
	merged := newNativePebble(t, 0, 7)
	for _, hs := range halfSnaps {
		pebbleOK(t, state.RestoreFromNative(merged, downloadNative(t, hs), hs.Registry, hs.KeyGroupStart, hs.KeyGroupEnd))
	}
	sm := registerNative(t, merged, true)
	if !bytes.Equal(canonicalBytes(t, merged), srcCanonical) {
		t.Fatal("merged canonical snapshot differs from the source's")
	}
	merged.SetCurrentKey(nativeKey(6))
	rl, err := sm.rl.Get()
	pebbleOK(t, err)
	if !slices.Equal(rl, []string{"x", "6"}) {
		t.Fatalf("rl = %v", rl)
	}

	// Mixed: a native snapshot of [0, 3] and a canonical stream of [4, 7]
	// (rl native from the first, stream payloads from the second).
	mixed := newNativePebble(t, 0, 7)
	pebbleOK(t, state.RestoreFromNative(mixed, downloadNative(t, halfSnaps[0]), halfSnaps[0].Registry, 0, 3))
	pebbleOK(t, state.Restore(mixed, bytes.NewReader(canonicalBytes(t, halves[1]))))
	registerNative(t, mixed, true)
	if !bytes.Equal(canonicalBytes(t, mixed), srcCanonical) {
		t.Fatal("mixed restore's canonical snapshot differs from the source's")
	}

	// A snapshot outside the range adds nothing (but its states).
	none := newNativePebble(t, 0, 3)
	pebbleOK(t, state.RestoreFromNative(none, downloadNative(t, halfSnaps[1]), halfSnaps[1].Registry, 4, 7))
	sn := registerNative(t, none, false)
	none.SetCurrentKey(nativeKey(0))
	pebbleWantValue(t, sn.v, "", false)

	// Registered states are refused.
	if err := state.RestoreFromNative(merged, dir, snap.Registry, 0, 7); err == nil {
		t.Fatal("RestoreFromNative into a backend with registered states succeeded")
	}
}

func TestNativeSnapshotErrors(t *testing.T) {
	b := newNativePebble(t, 0, 7)
	s := registerNative(t, b, false)
	writeNative(t, b, s, 1)
	snap := takeNative(t, b)

	if _, err := b.TakeNativeSnapshot(snap.Dir); err == nil {
		t.Fatal("TakeNativeSnapshot into an existing directory succeeded")
	}
	for _, r := range [][2]int{{0, 3}, {0, 15}, {1, 7}} {
		dir := downloadNative(t, snap)
		_, err := state.OpenPebbleFromNative(state.Options{KeyGroupStart: r[0], KeyGroupEnd: r[1], MaxParallelism: 16, Dir: dir}, snap.Registry)
		if err == nil {
			t.Fatalf("snapshot of [0, 7] opened as [%d, %d]", r[0], r[1])
		}
		if _, err := os.Stat(filepath.Join(dir, snap.Files[0].Name)); err != nil {
			t.Fatalf("failed open removed files: %v", err)
		}
	}
	dir := downloadNative(t, snap)
	b7 := newNativePebble(t, 0, 7)
	if err := state.RestoreFromNative(b7, dir, snap.Registry, 0, 3); err == nil {
		t.Fatal("RestoreFromNative with the wrong range succeeded")
	}
	corrupt := [][]byte{
		nil,
		[]byte("garbage"),
		snap.Registry[:len(snap.Registry)/2],
		bytes.Replace(snap.Registry, []byte(`"version":1`), []byte(`"version":2`), 1),
		bytes.Replace(snap.Registry, []byte(`"kind":"map"`), []byte(`"kind":"set"`), 1),
		bytes.Replace(snap.Registry, []byte(`"id":2`), []byte(`"id":9`), 1),
		bytes.Replace(snap.Registry, []byte(`"listFormat":"native"`), []byte(`"listFormat":"other"`), 1),
		bytes.Replace(snap.Registry, []byte(`"name":"l"`), []byte(`"name":"v"`), 1),
	}
	for i, reg := range corrupt {
		if i > 2 && bytes.Equal(reg, snap.Registry) {
			t.Fatalf("corruption %d changed nothing", i)
		}
		_, err := state.OpenPebbleFromNative(state.Options{KeyGroupEnd: 7, MaxParallelism: 8, Dir: dir}, reg)
		if !errors.Is(err, state.ErrCorruptSnapshot) {
			t.Fatalf("registry %d (%q): %v", i, reg, err)
		}
		if err := state.RestoreFromNative(b7, dir, reg, 0, 7); !errors.Is(err, state.ErrCorruptSnapshot) {
			t.Fatalf("RestoreFromNative registry %d: %v", i, err)
		}
	}
	if _, err := state.OpenPebbleFromNative(state.Options{KeyGroupEnd: 7, MaxParallelism: 8, Dir: filepath.Join(t.TempDir(), "missing")}, snap.Registry); err == nil {
		t.Fatal("OpenPebbleFromNative of a missing directory succeeded")
	}

	pebbleOK(t, b.Close())
	if _, err := b.TakeNativeSnapshot(filepath.Join(t.TempDir(), "x")); err == nil {
		t.Fatal("TakeNativeSnapshot of a closed backend succeeded")
	}
	// The snapshot outlives the backend.
	b2 := openNative(t, snap)
	s2 := registerNative(t, b2, false)
	b2.SetCurrentKey(nativeKey(3))
	pebbleWantValue(t, s2.v, "v3-1", true)
}
