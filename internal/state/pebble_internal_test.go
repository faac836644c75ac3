package state

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/weirstream/weir/codec"
)

// pebbleTestClock is a TTL clock the test drives, in Unix milliseconds.
type pebbleTestClock struct{ ms int64 }

func (c *pebbleTestClock) now() time.Time { return time.UnixMilli(c.ms) }

func openPebbleForTest(t *testing.T, opts Options) *PebbleBackend {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = t.TempDir() + "/db"
	}
	if opts.MaxParallelism == 0 {
		opts.MaxParallelism = 128
		opts.KeyGroupEnd = 127
	}
	b, err := NewPebbleBackend(opts)
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

type pebbleRawKV struct{ k, v []byte }

// pebbleRaw returns every key and value in the database, in key order.
func pebbleRaw(t *testing.T, b *PebbleBackend) []pebbleRawKV {
	t.Helper()
	it, err := b.db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	var kvs []pebbleRawKV
	for ok := it.First(); ok; ok = it.Next() {
		kvs = append(kvs, pebbleRawKV{slices.Clone(it.Key()), slices.Clone(it.Value())})
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	return kvs
}

func pebbleMust(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestPebbleKeyLayout(t *testing.T) {
	clock := &pebbleTestClock{ms: 0x0102030405}
	b := openPebbleForTest(t, Options{Clock: clock.now, MaxParallelism: 1024, KeyGroupEnd: 1023})
	v, err := NewValue(b, ValueDescriptor[int64]{Name: "v"}) // id 1
	pebbleMust(t, err)
	m, err := NewMap(b, MapDescriptor[string, int32]{Name: "m"}) // id 2
	pebbleMust(t, err)
	l, err := NewList(b, ListDescriptor[int32]{Name: "l", TTL: TTLConfig{TTL: time.Hour}}) // id 3
	pebbleMust(t, err)
	tv, err := NewValue(b, ValueDescriptor[int32]{Name: "tv", TTL: TTLConfig{TTL: time.Hour}}) // id 4
	pebbleMust(t, err)

	b.SetCurrentKey([]byte("k1"), 0x0105)
	pebbleMust(t, v.Update(0x1122))
	m.SetNamespace([]byte("w"))
	pebbleMust(t, m.Put("x", 7))
	pebbleMust(t, l.Add(1))
	pebbleMust(t, l.Add(2))
	tv.SetNamespace([]byte{})
	pebbleMust(t, tv.Update(9))

	ts := []byte{0x05, 0x04, 0x03, 0x02, 0x01, 0, 0, 0}
	want := []pebbleRawKV{
		{[]byte{0x01, 0x05, 0, 1, 2, 'k', '1', 0}, []byte{0x22, 0x11, 0, 0, 0, 0, 0, 0}},
		{[]byte{0x01, 0x05, 0, 2, 2, 'k', '1', 1, 'w', 1, 'x'}, []byte{7, 0, 0, 0}},
		{[]byte{0x01, 0x05, 0, 3, 2, 'k', '1', 0}, slices.Concat(ts, []byte{1, 0, 0, 0}, ts, []byte{2, 0, 0, 0})},
		{[]byte{0x01, 0x05, 0, 4, 2, 'k', '1', 0}, slices.Concat(ts, []byte{9, 0, 0, 0})},
	}
	got := pebbleRaw(t, b)
	if len(got) != len(want) {
		t.Fatalf("database holds %d keys, want %d: %x", len(got), len(want), got)
	}
	for i := range want {
		if !bytes.Equal(got[i].k, want[i].k) || !bytes.Equal(got[i].v, want[i].v) {
			t.Errorf("entry %d = %x => %x, want %x => %x", i, got[i].k, got[i].v, want[i].k, want[i].v)
		}
	}

	// A long key and namespace get multi-byte uvarint lengths.
	long := bytes.Repeat([]byte{0xaa}, 200)
	b.SetCurrentKey(long, 3)
	k := b.stateKey(1, long[:130])
	wantKey := slices.Concat([]byte{0, 3, 0, 1, 200, 1}, long, []byte{130, 1}, long[:130])
	if !bytes.Equal(k, wantKey) {
		t.Errorf("stateKey = %x, want %x", k, wantKey)
	}
}

// Every key of key group g sorts between g's 2-byte prefix and g+1's, so a
// key-group range is one contiguous key range.
func TestPebbleKeyGroupsAreContiguous(t *testing.T) {
	b := openPebbleForTest(t, Options{})
	v, err := NewValue(b, ValueDescriptor[int64]{Name: "v"})
	pebbleMust(t, err)
	m, err := NewMap(b, MapDescriptor[string, int64]{Name: "m"})
	pebbleMust(t, err)
	l, err := NewList(b, ListDescriptor[int64]{Name: "l"})
	pebbleMust(t, err)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		key := make([]byte, rng.IntN(300))
		for j := range key {
			key[j] = byte(rng.IntN(3)) * 0x7f // 0x00, 0x7f, 0xfe: stress prefix comparisons
		}
		ns := bytes.Repeat([]byte{0xff}, rng.IntN(3))
		g := rng.IntN(128)
		b.SetCurrentKey(key, g)
		v.SetNamespace(ns)
		m.SetNamespace(ns)
		l.SetNamespace(ns)
		pebbleMust(t, v.Update(int64(i)))
		pebbleMust(t, m.Put(string(key[:min(len(key), 3)]), int64(i)))
		pebbleMust(t, l.Add(int64(i)))
	}
	last := -1
	for _, kv := range pebbleRaw(t, b) {
		g := int(binary.BigEndian.Uint16(kv.k))
		lo := binary.BigEndian.AppendUint16(nil, uint16(g))
		hi := binary.BigEndian.AppendUint16(nil, uint16(g+1))
		if bytes.Compare(kv.k, lo) < 0 || bytes.Compare(kv.k, hi) >= 0 {
			t.Fatalf("key %x of group %d is outside [%x, %x)", kv.k, g, lo, hi)
		}
		if g < last {
			t.Fatalf("key group %d after %d", g, last)
		}
		last = g
	}
}

// Merging operands in any grouping and either direction gives their
// concatenation oldest first.
func TestPebbleConcatMergerIsAssociative(t *testing.T) {
	ops := [][]byte{[]byte("a"), []byte("bc"), {}, []byte("def"), []byte("g")}
	want := []byte("abcdefg")
	finish := func(m pebble.ValueMerger) []byte {
		t.Helper()
		out, closer, err := m.Finish(true)
		pebbleMust(t, err)
		out = slices.Clone(out)
		if closer != nil {
			// The merger goes back to its pool: later merges must not
			// see its operands.
			pebbleMust(t, closer.Close())
		}
		return out
	}
	// mergeRange merges ops[i:j] (j-i >= 1) forwards or backwards.
	mergeRange := func(ops [][]byte, older bool) []byte {
		t.Helper()
		first := ops[0]
		if older {
			first = ops[len(ops)-1]
		}
		m, err := pebbleConcatMerger.Merge([]byte("key"), first)
		pebbleMust(t, err)
		if older {
			for i := len(ops) - 2; i >= 0; i-- {
				pebbleMust(t, m.MergeOlder(ops[i]))
			}
		} else {
			for _, op := range ops[1:] {
				pebbleMust(t, m.MergeNewer(op))
			}
		}
		return finish(m)
	}
	for _, older := range []bool{false, true} {
		if got := mergeRange(ops, older); !bytes.Equal(got, want) {
			t.Errorf("merge (older=%v) = %q, want %q", older, got, want)
		}
		// Merge partial runs first, as a compaction without the base may.
		for split := 1; split < len(ops); split++ {
			left, right := mergeRange(ops[:split], older), mergeRange(ops[split:], !older)
			if got := mergeRange([][]byte{left, right}, older); !bytes.Equal(got, want) {
				t.Errorf("merge of runs split at %d (older=%v) = %q, want %q", split, older, got, want)
			}
		}
	}
	// The merger copies operands: the caller may reuse them.
	buf := []byte("xy")
	m, err := pebbleConcatMerger.Merge(nil, buf)
	pebbleMust(t, err)
	buf[0] = 'z'
	pebbleMust(t, m.MergeOlder([]byte("w")))
	if got := finish(m); string(got) != "wxy" {
		t.Errorf("merge = %q, want %q", got, "wxy")
	}

	// Closing a result twice pools its merger once.
	m, err = pebbleConcatMerger.Merge(nil, []byte("a"))
	pebbleMust(t, err)
	_, closer, err := m.Finish(true)
	pebbleMust(t, err)
	pebbleMust(t, closer.Close())
	pebbleMust(t, closer.Close())
	m2, err := pebbleConcatMerger.Merge(nil, []byte("b"))
	pebbleMust(t, err)
	m3, err := pebbleConcatMerger.Merge(nil, []byte("c"))
	pebbleMust(t, err)
	if m2 == m3 {
		t.Fatal("two merges share a merger")
	}
	if got, want := string(finish(m2))+string(finish(m3)), "bc"; got != want {
		t.Errorf("merges = %q, want %q", got, want)
	}
}

// A list built from Update and Adds reads back the same from the memtable,
// after a flush, and after the merge operands are compacted together.
func TestPebbleListMergeRoundTrip(t *testing.T) {
	for _, ttl := range []TTLConfig{{}, {TTL: time.Hour}} {
		t.Run(fmt.Sprint(ttl.Enabled()), func(t *testing.T) {
			b := openPebbleForTest(t, Options{})
			l, err := NewList(b, ListDescriptor[string]{Name: "l", TTL: ttl})
			pebbleMust(t, err)
			b.SetCurrentKey([]byte("k"), 1)
			var want []string
			check := func(when string) {
				t.Helper()
				got, err := l.Get()
				pebbleMust(t, err)
				if !slices.Equal(got, want) {
					t.Fatalf("%s: Get = %q, want %q", when, got, want)
				}
			}
			pebbleMust(t, l.Update([]string{"a", "b"}))
			want = []string{"a", "b"}
			for i := range 20 {
				s := fmt.Sprint("e", i)
				pebbleMust(t, l.Add(s))
				want = append(want, s)
				if i%7 == 3 {
					pebbleMust(t, b.db.Flush())
				}
			}
			check("memtable and L0")
			pebbleMust(t, l.AddAll([]string{"x", "", "y"}))
			want = append(want, "x", "", "y")
			pebbleMust(t, b.db.Flush())
			pebbleMust(t, b.db.Compact(t.Context(), []byte{0}, []byte{0xff}, true))
			check("compacted")
			pebbleMust(t, l.AddAll(nil))
			check("AddAll(nil)")
			pebbleMust(t, l.Update(nil))
			want = nil
			check("Update(nil)")
			pebbleMust(t, l.Add("z"))
			want = []string{"z"}
			check("Add after Update(nil)")
			pebbleMust(t, l.Clear())
			want = nil
			check("Clear")
		})
	}
}

func TestPebbleCleanupExpiredBudget(t *testing.T) {
	clock := &pebbleTestClock{ms: 1000}
	b := openPebbleForTest(t, Options{Clock: clock.now})
	ttl := TTLConfig{TTL: 10 * time.Millisecond}
	v, err := NewValue(b, ValueDescriptor[int64]{Name: "v", TTL: ttl})
	pebbleMust(t, err)
	plain, err := NewValue(b, ValueDescriptor[int64]{Name: "plain"})
	pebbleMust(t, err)
	noBG, err := NewValue(b, ValueDescriptor[int64]{Name: "nobg", TTL: TTLConfig{TTL: ttl.TTL, DisableBackgroundCleanup: true}})
	pebbleMust(t, err)
	l, err := NewList(b, ListDescriptor[string]{Name: "l", TTL: ttl})
	pebbleMust(t, err)
	m, err := NewMap(b, MapDescriptor[int64, int64]{Name: "m", TTL: ttl})
	pebbleMust(t, err)

	if n, err := b.CleanupExpired(100); err != nil || n != 0 {
		t.Fatalf("CleanupExpired on an empty database = %d, %v", n, err)
	}
	for k := range 10 {
		b.SetCurrentKey([]byte{byte(k)}, k)
		pebbleMust(t, v.Update(int64(k)))
		pebbleMust(t, plain.Update(int64(k)))
		pebbleMust(t, noBG.Update(int64(k)))
	}
	// 30 keys so far. A list with two old and one new element, and a map
	// with two old and one new entry.
	b.SetCurrentKey([]byte("list"), 50)
	pebbleMust(t, l.AddAll([]string{"old1", "old2"}))
	pebbleMust(t, m.Put(1, 1))
	pebbleMust(t, m.Put(2, 2))
	clock.ms += 5
	pebbleMust(t, l.Add("new"))
	pebbleMust(t, m.Put(3, 3))
	// 34 keys. At 1010 the first writes (at 1000) have expired.
	clock.ms = 1010

	total, calls := 0, 0
	for calls = 1; calls <= 20; calls++ {
		before := len(pebbleRaw(t, b))
		n, err := b.CleanupExpired(3)
		pebbleMust(t, err)
		after := len(pebbleRaw(t, b))
		if before-after > 3 {
			t.Fatalf("call %d removed %d keys with a budget of 3", calls, before-after)
		}
		total += n
		if total == 10+2+2 {
			break
		}
	}
	if total != 14 {
		t.Fatalf("removed %d entries, want 14", total)
	}
	if calls != 11 { // the last expired key is the 33rd of 34
		t.Errorf("cleanup took %d calls, want 11", calls)
	}
	b.SetCurrentKey([]byte("list"), 50)
	if got, err := l.Get(); err != nil || !slices.Equal(got, []string{"new"}) {
		t.Errorf("list after cleanup = %q, %v; want [new]", got, err)
	}
	if got := len(pebbleRaw(t, b)); got != 10+10+1+1 {
		t.Errorf("%d keys left, want 22", got)
	}
	// The values without background cleanup are still stored, but expired.
	b.SetCurrentKey([]byte{3}, 3)
	if _, ok, err := noBG.Get(); ok || err != nil {
		t.Errorf("expired value without background cleanup: ok %v, err %v", ok, err)
	}

	// The cursor survives between calls and wraps around: new expired
	// entries before and after it are all found, each examined once a call.
	for k := range 10 {
		b.SetCurrentKey([]byte{byte(k)}, k)
		pebbleMust(t, v.Update(int64(k)))
	}
	clock.ms += 100
	n, err := b.CleanupExpired(1000)
	pebbleMust(t, err)
	if n != 10+1+1 {
		t.Errorf("full cleanup removed %d, want 12", n)
	}
	if n, err := b.CleanupExpired(1000); err != nil || n != 0 {
		t.Errorf("second full cleanup removed %d, %v", n, err)
	}
}

func TestPebbleReopenStartsEmpty(t *testing.T) {
	dir := t.TempDir() + "/db"
	b, err := NewPebbleBackend(Options{Dir: dir, MaxParallelism: 128, KeyGroupEnd: 127})
	pebbleMust(t, err)
	v, err := NewValue(b, ValueDescriptor[string]{Name: "v"})
	pebbleMust(t, err)
	b.SetCurrentKey([]byte("k"), 7)
	pebbleMust(t, v.Update("left over"))
	pebbleMust(t, b.db.Flush())
	// A crashed run leaves its database behind.
	pebbleMust(t, b.db.Close())

	b2 := openPebbleForTest(t, Options{Dir: dir})
	if kvs := pebbleRaw(t, b2); len(kvs) != 0 {
		t.Fatalf("reopened database holds %d keys", len(kvs))
	}
	v2, err := NewValue(b2, ValueDescriptor[string]{Name: "v"})
	pebbleMust(t, err)
	b2.SetCurrentKey([]byte("k"), 7)
	if got, ok, err := v2.Get(); ok || err != nil {
		t.Errorf("Get after reopen = %q, %v, %v", got, ok, err)
	}
}

func TestPebbleOptionsValidation(t *testing.T) {
	_, err := NewPebbleBackend(Options{KeyGroupStart: 5, KeyGroupEnd: 4, MaxParallelism: 4})
	if err == nil {
		t.Fatal("NewPebbleBackend accepted bad options")
	}
	for _, want := range []string{"directory", "[5, 4]", "max parallelism 4"} {
		if !bytes.Contains([]byte(err.Error()), []byte(want)) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestPebbleCorruptValue(t *testing.T) {
	b := openPebbleForTest(t, Options{})
	v, err := NewValue(b, ValueDescriptor[int64]{Name: "v"})
	pebbleMust(t, err)
	tv, err := NewValue(b, ValueDescriptor[int64]{Name: "tv", TTL: TTLConfig{TTL: time.Hour}})
	pebbleMust(t, err)
	b.SetCurrentKey([]byte("k"), 1)
	pebbleMust(t, b.db.Set(b.stateKey(1, nil), []byte{1, 2, 3}, pebble.NoSync))
	pebbleMust(t, b.db.Set(b.stateKey(2, nil), []byte{1, 2, 3}, pebble.NoSync))
	for name, get := range map[string]func() (int64, bool, error){"v": v.Get, "tv": tv.Get} {
		if _, _, err := get(); !errors.Is(err, codec.ErrCorrupt) {
			t.Errorf("Get of corrupt %s: %v, want ErrCorrupt", name, err)
		}
	}
}
