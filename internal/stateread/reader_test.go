package stateread_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/stateread"
	fx "github.com/weirstream/weir/internal/stateread/statereadtest"
)

func open(t *testing.T, loc string) *stateread.Reader {
	t.Helper()
	r, err := stateread.Open(context.Background(), loc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func read(t *testing.T, r *stateread.Reader, uid string, o stateread.Options) *stateread.Dump {
	t.Helper()
	d, err := r.Read(context.Background(), uid, o)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func keyedState(t *testing.T, d *stateread.Dump, name string) stateread.KeyedStateDump {
	t.Helper()
	for _, s := range d.KeyedStates {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no keyed state %q in the dump", name)
	return stateread.KeyedStateDump{}
}

// keyOf returns the decoded key of e, failing if it is not a string.
func keyOf(t *testing.T, e stateread.Entry) string {
	t.Helper()
	k, ok := e.Key.Value.(string)
	if !e.Key.Decoded || !ok {
		t.Fatalf("key %s not decoded as a string", e.Key)
	}
	if want := fx.KeyGroup(k); e.KeyGroup != want {
		t.Errorf("key %q in key group %d, want %d", k, e.KeyGroup, want)
	}
	return k
}

var registerPoint sync.Once

// checkFixture checks every state of the fixture, decoded with the
// schema's codecs.
func checkFixture(t *testing.T, loc string) {
	checkFixtureAt(t, loc, fx.Job+"/chk-3")
}

// checkFixtureAt is checkFixture for a snapshot at path in its storage.
func checkFixtureAt(t *testing.T, loc, path string) {
	r := open(t, loc)
	ctx := context.Background()

	l, err := r.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if l.Snapshot.Job != fx.Job || l.Snapshot.ID != fx.CheckpointID || l.Snapshot.Path != path {
		t.Errorf("snapshot %+v", l.Snapshot)
	}
	if len(l.Operators) != 2 || l.Operators[0].UID != fx.KeyedUID || l.Operators[1].UID != fx.SourceUID {
		t.Fatalf("operators %+v", l.Operators)
	}
	op := l.Operators[0]
	if op.KeyCodec != "string" || op.Parallelism != 2 || op.MaxParallelism != 8 || op.Subtasks != 2 {
		t.Errorf("keyed operator %+v", op)
	}
	want := []stateread.KeyedStateInfo{
		{Name: "count", Kind: "value", Entries: 5, Items: 5, Codecs: &stateread.Codecs{Key: "string", Value: "int64"}},
		{Name: "point", Kind: "value", Entries: 5, Items: 5, Codecs: &stateread.Codecs{Key: "string", Value: "statereadtest.PointCodec"}},
		{Name: "recent", Kind: "list", TTL: true, Entries: 5, Items: 10, Codecs: &stateread.Codecs{Key: "string", Value: "int64"}},
		{Name: "secret", Kind: "value", Entries: 5, Items: 5, Codecs: &stateread.Codecs{Key: "string", Value: fx.UnregisteredName}},
		{Name: "seen", Kind: "list", Entries: 5, Items: 15, Codecs: &stateread.Codecs{Key: "string", Value: "string"}},
		{Name: "tags", Kind: "map", Entries: 5, Items: 10, Codecs: &stateread.Codecs{Key: "string", MapKey: "string", Value: "int64"}},
	}
	if !reflect.DeepEqual(op.KeyedStates, want) {
		t.Errorf("keyed states\n%+v\nwant\n%+v", op.KeyedStates, want)
	}
	if op.Timers == nil || *op.Timers != (stateread.TimerCounts{EventTime: 5}) {
		t.Errorf("timers %+v", op.Timers)
	}
	if src := l.Operators[1]; !reflect.DeepEqual(src.OperatorStates, []stateread.OperatorStateInfo{
		{Name: "names", Distribution: "union", Elements: 2}, {Name: "splits", Distribution: "split", Elements: 2}}) ||
		len(src.KeyedStates) != 0 || src.Timers != nil {
		t.Errorf("source operator %+v", src)
	}

	d := read(t, r, fx.KeyedUID, stateread.Options{})
	if len(d.KeyedStates) != 6 || len(d.OperatorStates) != 0 || d.Timers == nil {
		t.Fatalf("dump has %d keyed states, %d operator states, timers %v", len(d.KeyedStates), len(d.OperatorStates), d.Timers)
	}
	index := map[string]int{}
	for i, k := range fx.Keys {
		index[k] = i
	}
	counts := map[string]any{}
	for _, e := range keyedState(t, d, "count").Entries {
		counts[keyOf(t, e)] = e.Value.Value
	}
	wantCounts := map[string]any{}
	for i, k := range fx.Keys {
		wantCounts[k] = int64(i + 1)
	}
	if !reflect.DeepEqual(counts, wantCounts) {
		t.Errorf("counts %v, want %v", counts, wantCounts)
	}
	prev := -1
	for _, e := range keyedState(t, d, "count").Entries {
		if e.KeyGroup < prev {
			t.Errorf("entries not in key-group order: %d after %d", e.KeyGroup, prev)
		}
		prev = e.KeyGroup
	}

	for _, e := range keyedState(t, d, "seen").Entries {
		i := index[keyOf(t, e)]
		var got []any
		for _, el := range e.Elements {
			got = append(got, el.Value)
		}
		var want []any
		for j := 0; j <= i; j++ {
			want = append(want, fmt.Sprintf("k%d-%d", i, j))
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("seen of %s = %v, want %v", fx.Keys[i], got, want)
		}
	}
	for _, e := range keyedState(t, d, "recent").Entries {
		i := index[keyOf(t, e)]
		if len(e.Elements) != 2 || e.Elements[0].Value != int64(i) || e.Elements[1].Value != int64(10*i) ||
			e.Elements[0].TTL != fx.TTLTimestamp || e.Elements[1].TTL != fx.TTLTimestamp {
			t.Errorf("recent of %s = %+v", fx.Keys[i], e.Elements)
		}
	}
	for _, e := range keyedState(t, d, "tags").Entries {
		i := index[keyOf(t, e)]
		got := map[any]any{}
		for _, p := range e.Map {
			got[p.Key.Value] = p.Value.Value
		}
		parity := "even"
		if i%2 == 1 {
			parity = "odd"
		}
		if want := map[any]any{"all": int64(1), parity: int64(i)}; !reflect.DeepEqual(got, want) {
			t.Errorf("tags of %s = %v, want %v", fx.Keys[i], got, want)
		}
	}
	// An unregistered codec: raw bytes with the codec's name.
	for _, e := range keyedState(t, d, "secret").Entries {
		i := index[keyOf(t, e)]
		v := e.Value
		if v.Decoded || v.Codec != fx.UnregisteredName || v.Err != "codec not registered" ||
			!bytes.Equal(v.Raw, codec.Int64().Append(nil, int64(1000*i))) {
			t.Errorf("secret of %s = %+v", fx.Keys[i], v)
		}
	}
	if len(d.Timers.Timers) != 5 || d.Timers.Total != 5 {
		t.Fatalf("timers %+v", d.Timers)
	}
	for _, tm := range d.Timers.Timers {
		k, _ := tm.Key.Value.(string)
		if tm.Domain != "event" || tm.Timestamp != int64(1000+index[k]) || tm.KeyGroup != fx.KeyGroup(k) || tm.Namespace != nil {
			t.Errorf("timer %+v", tm)
		}
	}

	// The user codec decodes once the program registers it.
	point := keyedState(t, read(t, r, fx.KeyedUID, stateread.Options{State: "point"}), "point")
	registerPoint.Do(func() {
		if e := point.Entries[0]; e.Value.Decoded || e.Value.Codec != "statereadtest.PointCodec" {
			t.Errorf("point before its codec is registered: %+v", e.Value)
		}
		codec.Register[fx.Point](fx.PointCodec{})
		point = keyedState(t, read(t, r, fx.KeyedUID, stateread.Options{State: "point"}), "point")
	})
	for _, e := range point.Entries {
		i := index[keyOf(t, e)]
		if want := (fx.Point{X: int32(i), Y: int32(-i)}); e.Value.Value != want {
			t.Errorf("point of %s = %v, want %v", fx.Keys[i], e.Value, want)
		}
	}

	// One state, limited.
	d = read(t, r, fx.KeyedUID, stateread.Options{State: "seen", Limit: 2})
	if len(d.KeyedStates) != 1 || d.Timers != nil || len(d.OperatorStates) != 0 {
		t.Fatalf("--state seen: %+v", d)
	}
	if s := d.KeyedStates[0]; s.Total != 5 || s.Omitted != 3 || len(s.Entries) != 2 {
		t.Errorf("limit 2: total %d, omitted %d, %d entries", s.Total, s.Omitted, len(s.Entries))
	}

	// Operator list states are raw: their codecs are not recorded.
	d = read(t, r, fx.SourceUID, stateread.Options{})
	if len(d.OperatorStates) != 2 || len(d.KeyedStates) != 0 || d.Timers != nil {
		t.Fatalf("source dump %+v", d)
	}
	splits := d.OperatorStates[1]
	if splits.Name != "splits" || splits.Total != 2 || len(splits.Elements) != 2 ||
		!bytes.Equal(splits.Elements[1].Value.Raw, binary.BigEndian.AppendUint64(nil, 107)) || splits.Elements[1].Subtask != 1 {
		t.Errorf("splits %+v", splits)
	}
	if names := d.OperatorStates[0]; names.Elements[0].Value.String() != `0x7265616465722030 "reader 0"` {
		t.Errorf("union list element prints as %s", names.Elements[0].Value)
	}
}

func TestReadCanonical(t *testing.T) {
	loc := fx.Write(t, t.TempDir(), fx.Options{})
	checkFixture(t, loc)
	// The _metadata file names the checkpoint too.
	checkFixture(t, filepath.Join(loc, storage.MetadataName))
}

func TestReadNative(t *testing.T) {
	root := t.TempDir()
	loc := fx.Write(t, root, fx.Options{Native: true})
	r := open(t, loc)
	for _, st := range r.Metadata().Operators[0].Subtasks {
		if st.Native == nil || st.Keyed != nil {
			t.Fatalf("subtask %d is not native", st.Index)
		}
	}
	tmp := t.TempDir()
	r.TempDir = tmp
	checkFixture(t, loc)
	if _, err := r.List(context.Background()); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("the reader left %d entries in its temporary directory", len(left))
	}
}

// A savepoint is a directory of its own, its file handles relative to it.
func TestReadSavepoint(t *testing.T) {
	for _, native := range []bool{false, true} {
		loc := fx.Write(t, t.TempDir(), fx.Options{Savepoint: true, Native: native})
		checkFixtureAt(t, loc, fx.SavepointDir)
		r := open(t, loc)
		if info := r.Info(); !info.Savepoint || info.Format != map[bool]string{false: "canonical", true: "native"}[native] {
			t.Errorf("savepoint info %+v", info)
		}
		// Moved elsewhere, it reads the same.
		moved := filepath.Join(t.TempDir(), "elsewhere", fx.SavepointDir)
		if err := os.MkdirAll(filepath.Dir(moved), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(loc, moved); err != nil {
			t.Fatal(err)
		}
		checkFixtureAt(t, filepath.Join(moved, storage.MetadataName), fx.SavepointDir)
	}
}

// Snapshots of older versions have no schema: everything is raw, strings
// shown as text.
func TestReadWithoutSchema(t *testing.T) {
	for _, native := range []bool{false, true} {
		t.Run(fmt.Sprintf("native=%v", native), func(t *testing.T) {
			r := open(t, fx.Write(t, t.TempDir(), fx.Options{NoSchema: true, Native: native}))
			l, err := r.List(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			op := l.Operators[0]
			if op.KeyCodec != "" || len(op.KeyedStates) != 6 {
				t.Fatalf("operator %+v", op)
			}
			for _, s := range op.KeyedStates {
				if s.Codecs != nil {
					t.Errorf("state %s has codecs %+v", s.Name, s.Codecs)
				}
			}
			d := read(t, r, fx.KeyedUID, stateread.Options{State: "count"})
			for _, e := range d.KeyedStates[0].Entries {
				if e.Key.Decoded || e.Value.Decoded || e.Key.Codec != "" {
					t.Fatalf("entry decoded without a schema: %+v", e)
				}
				var k string
				for _, c := range fx.Keys {
					if bytes.Equal(e.Key.Raw, codec.String().Append(nil, c)) {
						k = c
					}
				}
				if k == "" {
					t.Fatalf("raw key %x is none of the keys", e.Key.Raw)
				}
				if want := "0x" + hex.EncodeToString(e.Key.Raw) + " " + fmt.Sprintf("%q", k); e.Key.String() != want {
					t.Errorf("raw key prints as %s, want %s", e.Key, want)
				}
			}
			// A native list without its codec is one element per entry.
			d = read(t, r, fx.KeyedUID, stateread.Options{State: "seen"})
			for _, e := range d.KeyedStates[0].Entries {
				if native && len(e.Elements) != 1 || !native && len(e.Elements) == 0 {
					t.Errorf("native %v: %d elements", native, len(e.Elements))
				}
			}
		})
	}
}

func TestReadChangelog(t *testing.T) {
	r := open(t, fx.Write(t, t.TempDir(), fx.Options{Changelog: true}))
	ctx := context.Background()
	l, err := r.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if op := l.Operators[0]; op.Changelog != 4 || len(op.KeyedStates) != 0 || op.Timers != nil {
		t.Errorf("changelog operator listed as %+v", op)
	}
	var b bytes.Buffer
	if err := l.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "4 changelog records after the materialized snapshot, not read: take a savepoint") {
		t.Errorf("listing:\n%s", b.String())
	}
	_, err = r.Read(ctx, fx.KeyedUID, stateread.Options{})
	if !errors.Is(err, stateread.ErrChangelog) || !strings.Contains(err.Error(), "take a savepoint first") {
		t.Errorf("reading a changelog operator: %v", err)
	}
	// Other operators read as usual.
	if d := read(t, r, fx.SourceUID, stateread.Options{}); len(d.OperatorStates) != 2 {
		t.Errorf("source: %+v", d)
	}
}

func TestReadErrors(t *testing.T) {
	loc := fx.Write(t, t.TempDir(), fx.Options{})
	r := open(t, loc)
	ctx := context.Background()
	_, err := r.Read(ctx, "nosuch", stateread.Options{})
	if !errors.Is(err, stateread.ErrUnknownOperator) || !strings.Contains(err.Error(), `"count", "numbers"`) {
		t.Errorf("unknown uid: %v", err)
	}
	_, err = r.Read(ctx, fx.KeyedUID, stateread.Options{State: "nosuch"})
	if !errors.Is(err, stateread.ErrUnknownState) || !strings.Contains(err.Error(), `"count" (keyed value), "point" (keyed value)`) {
		t.Errorf("unknown state: %v", err)
	}
	_, err = r.Read(ctx, fx.SourceUID, stateread.Options{State: "count"})
	if !errors.Is(err, stateread.ErrUnknownState) || !strings.Contains(err.Error(), `"names" (operator list), "splits" (operator list)`) {
		t.Errorf("unknown state of the source: %v", err)
	}

	if _, err := stateread.Open(ctx, filepath.Join(t.TempDir(), "nothing-here")); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("open a directory without _metadata: %v", err)
	}

	// A damaged data file is named in the error.
	for _, native := range []bool{false, true} {
		loc := fx.Write(t, t.TempDir(), fx.Options{Native: native})
		r := open(t, loc)
		st := r.Metadata().Operators[0].Subtasks[1]
		path := ""
		if native {
			for _, f := range st.Native.Files {
				if strings.HasSuffix(f.Name, ".sst") {
					path = f.Handle.Path
				}
			}
		} else {
			path = st.Keyed.Path
		}
		file := filepath.Join(filepath.Dir(loc), filepath.FromSlash(path))
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		data[len(data)/2] ^= 0x40
		if err := os.WriteFile(file, data, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err = r.Read(ctx, fx.KeyedUID, stateread.Options{})
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), `operator "count" subtask 1`) {
			t.Errorf("native %v: damaged %s: %v", native, path, err)
		}
		if _, err := r.List(ctx); err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("native %v: listing with damaged %s: %v", native, path, err)
		}
	}
}

func TestTextAndJSON(t *testing.T) {
	r := open(t, fx.Write(t, t.TempDir(), fx.Options{}))
	ctx := context.Background()
	l, err := r.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := l.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	text := b.String()
	for _, want := range []string{
		`checkpoint 3 of job "fixture" (fixture/chk-3), completed 2026-01-01T00:00:01Z`,
		`operator "count" (KeyedProcess): parallelism 2, max parallelism 8, key codec string`,
		"  KEYED STATE  KIND   TTL  ENTRIES  ITEMS  CODECS\n",
		"  count        value  -    5        5      key string, value int64\n",
		"  recent       list   yes  5        10     key string, value int64\n",
		"  tags         map    -    5        10     key string, map key string, value int64\n",
		"  timers: 5 event time, 0 processing time\n",
		"  OPERATOR STATE  DISTRIBUTION  ELEMENTS\n  names           union         2\n  splits          split         2\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("listing lacks %q:\n%s", want, text)
		}
	}

	d := read(t, r, fx.KeyedUID, stateread.Options{Limit: 3})
	b.Reset()
	if err := d.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	text = b.String()
	alice := fmt.Sprintf("  %d", fx.KeyGroup("alice"))
	for _, want := range []string{
		`keyed state "count": value, 5 entries; codecs: key string, value int64`,
		"  KEY GROUP  KEY      VALUE\n",
		`keyed state "secret": value, 5 entries; codecs: key string, value ` + fx.UnregisteredName,
		"0x0000000000000000 <" + fx.UnregisteredName + ": codec not registered>",
		`keyed state "recent": list with TTL, 5 entries`,
		"[0 (ttl 2026-01-01T00:00:00.000Z), 0 (ttl 2026-01-01T00:00:00.000Z)]",
		"  KEY GROUP  KEY      MAP KEY  VALUE\n",
		alice + `          "alice"  "all"    1` + "\n",
		alice + `          "alice"  "even"   0` + "\n",
		"  ... 2 more\n",
		"timers: 5\n  DOMAIN  KEY GROUP  KEY      TIMESTAMP\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("dump lacks %q:\n%s", want, text)
		}
	}

	// JSON: the documented shape.
	d = read(t, r, fx.KeyedUID, stateread.Options{State: "tags", Limit: 1})
	enc, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(enc, &got); err != nil {
		t.Fatal(err)
	}
	first := fx.Keys[0]
	for _, k := range fx.Keys {
		if fx.KeyGroup(k) < fx.KeyGroup(first) {
			first = k
		}
	}
	i := 0
	for j, k := range fx.Keys {
		if k == first {
			i = j
		}
	}
	parity := map[bool]string{true: "even", false: "odd"}[i%2 == 0]
	entry := map[string]any{"keyGroup": float64(fx.KeyGroup(first)), "key": map[string]any{"value": first},
		"map": []any{
			map[string]any{"key": map[string]any{"value": "all"}, "value": map[string]any{"value": float64(1)}},
			map[string]any{"key": map[string]any{"value": parity}, "value": map[string]any{"value": float64(i)}},
		}}
	if parity < "all" {
		m := entry["map"].([]any)
		m[0], m[1] = m[1], m[0]
	}
	want := map[string]any{
		"snapshot": map[string]any{"location": r.Info().Location, "path": "fixture/chk-3", "savepoint": false, "job": "fixture",
			"checkpointId": float64(3), "completed": "2026-01-01T00:00:01Z"},
		"operator": map[string]any{"uid": "count", "name": "KeyedProcess", "parallelism": float64(2), "maxParallelism": float64(8)},
		"keyedStates": []any{map[string]any{"name": "tags", "kind": "map",
			"codecs": map[string]any{"key": "string", "mapKey": "string", "value": "int64"},
			"total":  float64(5), "omitted": float64(4), "entries": []any{entry}}},
		"operatorStates": []any{},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("JSON\n%s\nwant\n%v", enc, want)
	}

	// A raw datum in JSON.
	raw, _ := json.Marshal(stateread.Datum{Raw: []byte("\x05alice"), Codec: "x", Err: "codec not registered", TTL: 9})
	if string(raw) != `{"hex":"05616c696365","utf8":"alice","codec":"x","error":"codec not registered","ttlTimestamp":9}` {
		t.Errorf("raw datum JSON %s", raw)
	}
}
