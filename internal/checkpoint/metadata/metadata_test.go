package metadata

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/weirstream/weir/internal/checkpoint/storage"
)

// sample returns a valid checkpoint, already in Encode's order, with two
// operators: "keyed" with keyed-state and timer files and key-group ranges,
// and "source" with operator lists (one of them an empty union list).
func sample() *Checkpoint {
	return &Checkpoint{
		Version:        Version,
		Job:            "job-1",
		ID:             7,
		TriggerTime:    1_700_000_000_000,
		CompletionTime: 1_700_000_000_250,
		Bytes:          4096,
		Operators: []Operator{
			{
				UID: "keyed", Name: "window", Parallelism: 2, MaxParallelism: 8,
				Subtasks: []Subtask{
					{
						Index: 0, KeyGroupStart: 0, KeyGroupEnd: 3,
						Keyed:  &storage.FileHandle{Path: "chk-7/keyed-0.sst", Size: 100, CRC32C: 0xdeadbeef},
						Timers: &storage.FileHandle{Path: "chk-7/keyed-0.timers", Size: 20, CRC32C: 0x1234},
					},
					{
						Index: 1, KeyGroupStart: 4, KeyGroupEnd: 7,
						Keyed: &storage.FileHandle{Path: "shared/0001.sst", Size: 300, CRC32C: 42},
					},
				},
			},
			{
				UID: "source", Name: "kafka", Parallelism: 3, MaxParallelism: 128,
				Subtasks: []Subtask{
					{
						Index: 0, KeyGroupStart: 0, KeyGroupEnd: 42,
						Lists: []List{
							{Name: "offsets", Elements: [][]byte{[]byte("p0:17"), []byte("p3:5")}},
							{Name: "meta", Union: true, Elements: [][]byte{}},
						},
					},
					{
						Index: 2, KeyGroupStart: 86, KeyGroupEnd: 127,
						Lists: []List{
							{Name: "offsets", Elements: [][]byte{{0, 1, 2, 255}}},
							{Name: "meta", Union: true, Elements: [][]byte{[]byte("x")}},
						},
					},
				},
			},
		},
	}
}

// shuffled is sample with operators and subtasks in reverse order.
func shuffled() *Checkpoint {
	c := sample()
	slices.Reverse(c.Operators)
	for i := range c.Operators {
		slices.Reverse(c.Operators[i].Subtasks)
	}
	return c
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   *Checkpoint
	}{
		{"sorted", sample()},
		{"unsorted", shuffled()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in
			in.Version = 0 // Encode sets it
			b, err := Encode(in)
			if err != nil {
				t.Fatal(err)
			}
			if in.Version != Version {
				t.Errorf("Encode left Version %d, want %d", in.Version, Version)
			}
			got, err := Decode(b)
			if err != nil {
				t.Fatalf("Decode: %v\npayload: %s", err, b)
			}
			if want := sample(); !reflect.DeepEqual(got, want) {
				t.Errorf("round trip:\n got %+v\nwant %+v", got, want)
			}
			meta, ok := got.Operator("source")
			if !ok {
				t.Fatal("no operator source after round trip")
			}
			l := meta.Subtasks[0].Lists[1]
			if l.Name != "meta" || !l.Union || l.Elements == nil || len(l.Elements) != 0 {
				t.Errorf("empty union list decoded as %+v (nil elements: %v), want a non-nil empty union list", l, l.Elements == nil)
			}
		})
	}
}

func TestEncodeIsCanonical(t *testing.T) {
	a, err := Encode(sample())
	if err != nil {
		t.Fatal(err)
	}
	in := shuffled()
	b, err := Encode(in)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Errorf("differently ordered inputs encode differently:\n%s\n%s", a, b)
	}
	// Encode sorts in place.
	var uids []string
	for _, op := range in.Operators {
		uids = append(uids, op.UID)
		for i, st := range op.Subtasks {
			if i > 0 && op.Subtasks[i-1].Index > st.Index {
				t.Errorf("operator %s: subtasks not sorted by index after Encode", op.UID)
			}
		}
	}
	if !slices.IsSorted(uids) {
		t.Errorf("operators not sorted by uid after Encode: %v", uids)
	}
}

func TestEncodeSortsManyOperators(t *testing.T) {
	c := &Checkpoint{ID: 1, Operators: []Operator{
		{UID: "c", Parallelism: 4, MaxParallelism: 4, Subtasks: []Subtask{{Index: 3, KeyGroupStart: 3, KeyGroupEnd: 3}, {Index: 0}, {Index: 2, KeyGroupStart: 2, KeyGroupEnd: 2}, {Index: 1, KeyGroupStart: 1, KeyGroupEnd: 1}}},
		{UID: "a", Parallelism: 1, MaxParallelism: 1},
		{UID: "b", Parallelism: 1, MaxParallelism: 1},
	}}
	b, err := Encode(c)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	var uids []string
	for _, op := range got.Operators {
		uids = append(uids, op.UID)
	}
	if want := []string{"a", "b", "c"}; !slices.Equal(uids, want) {
		t.Errorf("operators %v, want %v", uids, want)
	}
	var idx []int
	for _, st := range got.Operators[2].Subtasks {
		idx = append(idx, st.Index)
	}
	if want := []int{0, 1, 2, 3}; !slices.Equal(idx, want) {
		t.Errorf("subtasks %v, want %v", idx, want)
	}
}

func TestDecodeRejects(t *testing.T) {
	marshal := func(mutate func(c *Checkpoint)) []byte {
		c := sample()
		mutate(c)
		b, err := json.Marshal(c) // not Encode: that would fix Version
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, tc := range []struct {
		name    string
		payload []byte
	}{
		{"invalid json", []byte(`{"version":1,"id":`)},
		{"not an object", []byte(`[1,2,3]`)},
		{"empty", nil},
		{"wrong version", marshal(func(c *Checkpoint) { c.Version = Version + 1 })},
		{"version 0", marshal(func(c *Checkpoint) { c.Version = 0 })},
		{"id 0", marshal(func(c *Checkpoint) { c.ID = 0 })},
		{"negative id", marshal(func(c *Checkpoint) { c.ID = -3 })},
		{"duplicate uid", marshal(func(c *Checkpoint) { c.Operators[1].UID = c.Operators[0].UID })},
		{"duplicate subtask", marshal(func(c *Checkpoint) { c.Operators[0].Subtasks[1].Index = c.Operators[0].Subtasks[0].Index })},
		{"empty uid", marshal(func(c *Checkpoint) { c.Operators[1].UID = "" })},
		{"subtask index = parallelism", marshal(func(c *Checkpoint) { c.Operators[0].Subtasks[1].Index = 2 })},
		{"negative subtask index", marshal(func(c *Checkpoint) { c.Operators[0].Subtasks[0].Index = -1 })},
		{"key-group end = maxParallelism", marshal(func(c *Checkpoint) { c.Operators[0].Subtasks[1].KeyGroupEnd = 8 })},
		{"key-group range beyond maxParallelism", marshal(func(c *Checkpoint) {
			c.Operators[0].Subtasks[1].KeyGroupStart, c.Operators[0].Subtasks[1].KeyGroupEnd = 9, 12
		})},
		{"negative key-group start", marshal(func(c *Checkpoint) { c.Operators[0].Subtasks[0].KeyGroupStart = -1 })},
		{"key-group start after end", marshal(func(c *Checkpoint) {
			c.Operators[0].Subtasks[0].KeyGroupStart, c.Operators[0].Subtasks[0].KeyGroupEnd = 3, 1
		})},
		{"parallelism > maxParallelism", marshal(func(c *Checkpoint) { c.Operators[0].Parallelism = 9 })},
		{"parallelism 0", marshal(func(c *Checkpoint) { c.Operators[0].Parallelism = 0; c.Operators[0].Subtasks = nil })},
		{"task statistics: huge subtask", marshal(func(c *Checkpoint) { c.Tasks = []TaskStats{{Vertex: 0, Subtask: 1 << 40}} })},
		{"task statistics: negative vertex", marshal(func(c *Checkpoint) { c.Tasks = []TaskStats{{Vertex: -1}} })},
		{"task statistics: twice", marshal(func(c *Checkpoint) { c.Tasks = []TaskStats{{Vertex: 1}, {Vertex: 1}} })},
		{"task statistics: negative duration", marshal(func(c *Checkpoint) { c.Tasks = []TaskStats{{EndToEnd: -5}} })},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Decode(tc.payload)
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Decode(%s) = %+v, %v; want an error wrapping ErrInvalid", tc.payload, c, err)
			}
			if c != nil {
				t.Errorf("Decode returned %+v with error %v", c, err)
			}
		})
	}
}

func TestDecodeAccepts(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(c *Checkpoint)
	}{
		{"no operators", func(c *Checkpoint) { c.Operators = nil }},
		{"operator without subtasks", func(c *Checkpoint) { c.Operators[1].Subtasks = nil }},
		{"parallelism = maxParallelism", func(c *Checkpoint) {
			c.Operators[0].Parallelism = 8
			c.Operators[0].Subtasks[1].Index = 7
		}},
		{"last key group", func(c *Checkpoint) { c.Operators[0].Subtasks[1].KeyGroupStart = 7 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := sample()
			tc.mutate(c)
			b, err := Encode(c)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Decode(b); err != nil {
				t.Fatalf("Decode: %v", err)
			}
		})
	}
}

func TestFiles(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    *Checkpoint
		want []string
	}{
		{"sample", sample(), []string{"chk-7/keyed-0.sst", "chk-7/keyed-0.timers", "shared/0001.sst"}},
		{"no operators", &Checkpoint{ID: 1}, nil},
		{"lists only", &Checkpoint{ID: 1, Operators: sample().Operators[1:]}, nil},
		{"timers only", &Checkpoint{ID: 1, Operators: []Operator{{UID: "t", Parallelism: 2, MaxParallelism: 2, Subtasks: []Subtask{
			{Index: 0, Timers: &storage.FileHandle{Path: "t0"}},
			{Index: 1, KeyGroupStart: 1, KeyGroupEnd: 1, Timers: &storage.FileHandle{Path: "t1"}},
		}}}}, []string{"t0", "t1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, h := range tc.c.Files() {
				got = append(got, h.Path)
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("Files() = %v, want %v", got, tc.want)
			}
		})
	}
	// The handles are complete, not just their paths.
	fs := sample().Files()
	want := storage.FileHandle{Path: "chk-7/keyed-0.sst", Size: 100, CRC32C: 0xdeadbeef}
	if !slices.Contains(fs, want) {
		t.Errorf("Files() = %+v, missing %+v", fs, want)
	}
}

func TestOperator(t *testing.T) {
	c := sample()
	for _, tc := range []struct {
		uid      string
		wantOK   bool
		wantName string
	}{
		{"keyed", true, "window"},
		{"source", true, "kafka"},
		{"missing", false, ""},
		{"", false, ""},
		{"Keyed", false, ""},
	} {
		t.Run(tc.uid, func(t *testing.T) {
			op, ok := c.Operator(tc.uid)
			if ok != tc.wantOK {
				t.Fatalf("Operator(%q) ok = %v, want %v", tc.uid, ok, tc.wantOK)
			}
			if !ok {
				if op != nil {
					t.Errorf("Operator(%q) = %+v with ok false, want nil", tc.uid, op)
				}
				return
			}
			if op.UID != tc.uid || op.Name != tc.wantName {
				t.Errorf("Operator(%q) = %q/%q, want %q/%q", tc.uid, op.UID, op.Name, tc.uid, tc.wantName)
			}
		})
	}
	// It points into the checkpoint.
	op, _ := c.Operator("keyed")
	op.Name = "renamed"
	if c.Operators[0].Name != "renamed" {
		t.Error("Operator returned a copy, want a pointer into Operators")
	}
}

// Changelog ranges that could make a restore misbehave are refused when
// the metadata is decoded.
func TestDecodeRejectsBadChangelogRanges(t *testing.T) {
	seg := func(from, to int64) LogSegment {
		return LogSegment{File: storage.FileHandle{Path: "shared/x.log", Size: 10}, From: from, To: to}
	}
	for name, cl := range map[string]*ChangelogState{
		"from not after materialized": {MaterializedSeq: 5, From: 3, To: 9, Segments: []LogSegment{seg(3, 9)}},
		"range backwards":             {MaterializedSeq: 0, From: 1, To: -5},
		"segment backwards":           {MaterializedSeq: 0, From: 1, To: 9, Segments: []LogSegment{seg(9, 1)}},
		"huge segment":                {MaterializedSeq: 0, From: 1, To: 9, Segments: []LogSegment{seg(0, 1<<60)}},
		"earlier zero":                {MaterializedSeq: 0, From: 1, To: 0, Earlier: []LogRange{{From: 0, To: 3}}},
	} {
		t.Run(name, func(t *testing.T) {
			c := &Checkpoint{ID: 1, Operators: []Operator{{UID: "op", Parallelism: 1, MaxParallelism: 128,
				Subtasks: []Subtask{{KeyGroupEnd: 127, Changelog: cl}}}}}
			payload, err := Encode(c)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Decode(payload); err == nil || !strings.Contains(err.Error(), "changelog") {
				t.Fatalf("Decode: %v, want an error about the changelog", err)
			}
		})
	}
	ok := &Checkpoint{ID: 1, Operators: []Operator{{UID: "op", Parallelism: 1, MaxParallelism: 128,
		Subtasks: []Subtask{{KeyGroupEnd: 127, Changelog: &ChangelogState{MaterializedSeq: 4, From: 5, To: 4}}}}}}
	payload, err := Encode(ok)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Decode(payload); err != nil {
		t.Fatalf("an empty log range: %v", err)
	}
}
