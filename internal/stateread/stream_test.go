package stateread

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/keygroup"
	"github.com/weirstream/weir/internal/state"
)

// canonicalStream returns the stream a heap backend of key groups 0..7
// writes holding value state "v" (key k: k*k), list state "l" (key k: 0..k)
// and map state "m" with TTL (key k: {"x": k}), for keys 0..19.
func canonicalStream(t *testing.T) []byte {
	t.Helper()
	b := state.NewHeapBackend(state.Options{KeyGroupEnd: 7, MaxParallelism: 8, Clock: func() time.Time { return time.UnixMilli(42) }})
	defer b.Close()
	v, err := state.NewValue(b, state.ValueDescriptor[int64]{Name: "v"})
	if err != nil {
		t.Fatal(err)
	}
	l, err := state.NewList(b, state.ListDescriptor[int64]{Name: "l"})
	if err != nil {
		t.Fatal(err)
	}
	m, err := state.NewMap(b, state.MapDescriptor[string, int64]{Name: "m", TTL: state.TTLConfig{TTL: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	for k := range int64(20) {
		key := codec.Int64().Append(nil, k)
		b.SetCurrentKey(key, keygroup.Of(key, 8))
		if err := v.Update(k * k); err != nil {
			t.Fatal(err)
		}
		for i := range k + 1 {
			if err := l.Add(i); err != nil {
				t.Fatal(err)
			}
		}
		if err := m.Put("x", k); err != nil {
			t.Fatal(err)
		}
	}
	snap, err := state.TakeSnapshot(b)
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Release()
	var buf bytes.Buffer
	if _, err := snap.WriteStream(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestReadStream(t *testing.T) {
	data := canonicalStream(t)
	var table []streamState
	got := map[string]string{}
	lastKG := -1
	err := readStream(bytes.NewReader(data), func(sts []streamState) error {
		table = sts
		return nil
	}, func(i int, e *entry) error {
		if e.keyGroup < lastKG {
			t.Errorf("key group %d after %d", e.keyGroup, lastKG)
		}
		lastKG = e.keyGroup
		k, _, err := codec.Int64().Decode(e.key)
		if err != nil {
			t.Fatal(err)
		}
		if kg := keygroup.Of(e.key, 8); kg != e.keyGroup {
			t.Errorf("key %d in key group %d, want %d", k, e.keyGroup, kg)
		}
		var items []string
		for _, it := range e.items {
			s := fmt.Sprint(mustInt(t, it.value))
			if it.mapKey != nil {
				s = fmt.Sprintf("%x=%s@%d", it.mapKey, s, it.ts)
			}
			items = append(items, s)
		}
		got[fmt.Sprintf("%s/%d", table[i].name, k)] = fmt.Sprint(items)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []streamState{{"l", "list", false}, {"m", "map", true}, {"v", "value", false}}
	if fmt.Sprint(table) != fmt.Sprint(want) {
		t.Errorf("state table %v, want %v", table, want)
	}
	if len(got) != 60 || got["v/7"] != "[49]" || got["l/3"] != "[0 1 2 3]" || got["m/5"] != "[0178=5@42]" {
		t.Errorf("%d entries; v/7 %s, l/3 %s, m/5 %s", len(got), got["v/7"], got["l/3"], got["m/5"])
	}

	// Any damage is an error: a flipped bit (checksum), a cut.
	noop := func([]streamState) error { return nil }
	skip := func(int, *entry) error { return nil }
	for _, at := range []int{0, 9, 14, len(data) / 2, len(data) - 5, len(data) - 1} {
		bad := bytes.Clone(data)
		bad[at] ^= 0x10
		if err := readStream(bytes.NewReader(bad), noop, skip); !errors.Is(err, errCorrupt) {
			t.Errorf("bit flipped at %d of %d: %v", at, len(data), err)
		}
	}
	for _, n := range []int{0, 5, 13, len(data) / 2, len(data) - 1} {
		if err := readStream(bytes.NewReader(data[:n]), noop, skip); !errors.Is(err, errCorrupt) {
			t.Errorf("cut at %d of %d: %v", n, len(data), err)
		}
	}
	if err := readStream(bytes.NewReader(append(bytes.Clone(data), 0)), noop, skip); !errors.Is(err, errCorrupt) {
		t.Errorf("a byte after the trailer: %v", err)
	}
	stop := errors.New("stop")
	if err := readStream(bytes.NewReader(data), noop, func(int, *entry) error { return stop }); !errors.Is(err, stop) {
		t.Errorf("visit's error: %v", err)
	}
}

func mustInt(t *testing.T, b []byte) int64 {
	t.Helper()
	v, n, err := codec.Int64().Decode(b)
	if err != nil || n != len(b) {
		t.Fatalf("value %x: %v", b, err)
	}
	return v
}
