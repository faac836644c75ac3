package state

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// TestSnapshotRestoreKeepsOnlyRange checks the stored bytes, which the
// public API cannot see outside a backend's range: restoring a stream of
// key groups [0, 7] into backends owning [4, 7] stores nothing of [0, 3].
func TestSnapshotRestoreKeepsOnlyRange(t *testing.T) {
	src := NewHeapBackend(Options{KeyGroupEnd: 7, MaxParallelism: 8})
	v, err := NewValue(src, ValueDescriptor[int64]{Name: "v"})
	if err != nil {
		t.Fatal(err)
	}
	l, err := NewList(src, ListDescriptor[string]{Name: "l"})
	if err != nil {
		t.Fatal(err)
	}
	for kg := range 8 {
		src.SetCurrentKey([]byte{byte(kg)}, kg)
		if err := v.Update(int64(kg)); err != nil {
			t.Fatal(err)
		}
		if err := l.Add("x"); err != nil {
			t.Fatal(err)
		}
	}
	snap, err := TakeSnapshot(src)
	if err != nil {
		t.Fatal(err)
	}
	var stream bytes.Buffer
	offs, err := snap.WriteStream(&stream)
	snap.Release()
	if err != nil {
		t.Fatal(err)
	}
	if from, to, ok := offs.Section(5); !ok || to <= from {
		t.Fatalf("Section(5) = %d, %d, %v", from, to, ok)
	}
	if _, _, ok := offs.Section(8); ok {
		t.Fatal("Section(8) of a stream of [0, 7]")
	}

	pb, err := NewPebbleBackend(Options{KeyGroupStart: 4, KeyGroupEnd: 7, MaxParallelism: 8, Dir: t.TempDir() + "/db"})
	if err != nil {
		t.Fatal(err)
	}
	defer pb.Close()
	if err := Restore(pb, bytes.NewReader(stream.Bytes())); err != nil {
		t.Fatal(err)
	}
	it, err := pb.db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for valid := it.First(); valid; valid = it.Next() {
		n++
		if kg := binary.BigEndian.Uint16(it.Key()); kg < 4 {
			t.Errorf("pebble holds key %x of key group %d", it.Key(), kg)
		}
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	if n != 8 {
		t.Errorf("pebble holds %d keys, want 8", n)
	}

	hb := NewHeapBackend(Options{KeyGroupStart: 4, KeyGroupEnd: 7, MaxParallelism: 8})
	if err := Restore(hb, bytes.NewReader(stream.Bytes())); err != nil {
		t.Fatal(err)
	}
	for name, p := range hb.pending {
		total := 0
		for _, recs := range p.byKG {
			total += len(recs)
		}
		if len(p.byKG) != 4 || total != 4 {
			t.Errorf("pending %q: %d key groups, %d records; want 4, 4", name, len(p.byKG), total)
		}
	}
}
