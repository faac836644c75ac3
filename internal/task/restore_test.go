package task

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/weirstream/weir/internal/checkpoint/metadata"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/graph"
	"github.com/weirstream/weir/internal/keygroup"
)

// restoreGraph is a job of two chains: source -> map, and window.
func restoreGraph(windowMaxP int) *graph.JobGraph {
	return &graph.JobGraph{Vertices: []*graph.Vertex{
		{Nodes: []*graph.Node{
			{Name: "source", UID: "src", MaxParallelism: 128},
			{Name: "map", UID: "map", MaxParallelism: 128},
		}},
		{Nodes: []*graph.Node{
			{Name: "window", UID: "win", MaxParallelism: windowMaxP},
		}},
	}}
}

func restoreCheckpoint(uids map[string]int) *metadata.Checkpoint {
	cp := &metadata.Checkpoint{Version: metadata.Version, ID: 12}
	for _, uid := range slices.Sorted(maps.Keys(uids)) {
		cp.Operators = append(cp.Operators, metadata.Operator{
			UID: uid, Name: "old-" + uid, Parallelism: 1, MaxParallelism: uids[uid],
			Subtasks: []metadata.Subtask{{Index: 0, KeyGroupStart: 0, KeyGroupEnd: uids[uid] - 1}},
		})
	}
	return cp
}

func TestMapRestoredState(t *testing.T) {
	t.Run("success", func(t *testing.T) {
		cp := restoreCheckpoint(map[string]int{"src": 128, "win": 8})
		got, err := mapRestoredState(restoreGraph(8), cp)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 {
			t.Fatalf("got %d entries %v, want src and win", len(got), got)
		}
		for i, op := range cp.Operators {
			r, ok := got[op.UID]
			if !ok {
				t.Errorf("no entry for %q", op.UID)
				continue
			}
			if r.op != &cp.Operators[i] {
				t.Errorf("entry %q points to %+v, want the checkpoint's operator %+v", op.UID, r.op, &cp.Operators[i])
			}
		}
		if _, ok := got["map"]; ok {
			t.Error("entry for map, which has no state in the checkpoint")
		}
	})
	t.Run("empty checkpoint", func(t *testing.T) {
		got, err := mapRestoredState(restoreGraph(8), &metadata.Checkpoint{ID: 1})
		if err != nil || len(got) != 0 {
			t.Fatalf("got %v, %v; want an empty map", got, err)
		}
	})
	for _, tc := range []struct {
		name     string
		windowP  int
		cp       map[string]int
		contains []string
	}{
		{"unknown uid", 8, map[string]int{"src": 128, "gone": 8}, []string{`"gone"`, "old-gone", "checkpoint 12"}},
		{"max parallelism mismatch", 16, map[string]int{"win": 8}, []string{`"window"`, "16", "8"}},
		{"both", 16, map[string]int{"gone": 4, "win": 8}, []string{`"gone"`, `"window"`, "16", "8"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := mapRestoredState(restoreGraph(tc.windowP), restoreCheckpoint(tc.cp))
			if !errors.Is(err, ErrStateMismatch) {
				t.Fatalf("got %v, %v; want an error wrapping ErrStateMismatch", got, err)
			}
			if got != nil {
				t.Errorf("got entries %v with the error", got)
			}
			for _, s := range tc.contains {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not mention %s", err, s)
				}
			}
		})
	}
	t.Run("mismatch numbers", func(t *testing.T) {
		// Numbers that are not substrings of each other or of the id.
		_, err := mapRestoredState(restoreGraph(96), restoreCheckpoint(map[string]int{"win": 64}))
		if !errors.Is(err, ErrStateMismatch) {
			t.Fatalf("err = %v, want ErrStateMismatch", err)
		}
		if msg := err.Error(); !strings.Contains(msg, "96") || !strings.Contains(msg, "64") {
			t.Errorf("error %q does not name both 96 (job) and 64 (checkpoint)", msg)
		}
	})
}

var (
	hA  = storage.FileHandle{Path: "chk-3/A.sst", Size: 10, CRC32C: 1}
	hTA = storage.FileHandle{Path: "chk-3/TA.timers", Size: 11, CRC32C: 2}
	hB  = storage.FileHandle{Path: "chk-3/B.sst", Size: 12, CRC32C: 3}
)

func bs(ss ...string) [][]byte {
	out := make([][]byte, len(ss))
	for i, s := range ss {
		out[i] = []byte(s)
	}
	return out
}

func strs(b [][]byte) []string {
	out := make([]string, len(b))
	for i, e := range b {
		out[i] = string(e)
	}
	return out
}

// oldOp is an operator checkpointed at parallelism 2, max parallelism 8.
func oldOp() *restoredOp {
	return &restoredOp{op: &metadata.Operator{
		UID: "win", Name: "window", Parallelism: 2, MaxParallelism: 8,
		Subtasks: []metadata.Subtask{
			{
				Index: 0, KeyGroupStart: 0, KeyGroupEnd: 3, Keyed: &hA, Timers: &hTA,
				Lists: []metadata.List{
					{Name: "u", Union: true, Elements: bs("x")},
					{Name: "s", Elements: bs("a1", "a2")},
				},
			},
			{
				Index: 1, KeyGroupStart: 4, KeyGroupEnd: 7, Keyed: &hB,
				Lists: []metadata.List{
					{Name: "s", Elements: bs("b1")},
					{Name: "u", Union: true, Elements: bs("y")},
				},
			},
		},
	}}
}

type share struct {
	keyed, timers []storage.FileHandle
	s             []string
}

func TestForSubtaskRescale(t *testing.T) {
	const maxP = 8
	for _, tc := range []struct {
		p    int
		want []share // by new subtask; nil s means "don't check exactly"
	}{
		{1, []share{{[]storage.FileHandle{hA, hB}, []storage.FileHandle{hTA}, []string{"a1", "a2", "b1"}}}},
		{2, []share{
			{[]storage.FileHandle{hA}, []storage.FileHandle{hTA}, []string{"a1"}},
			{[]storage.FileHandle{hB}, nil, []string{"a2", "b1"}},
		}},
		{3, []share{
			// key groups 0..2, 3..5, 6..7
			{[]storage.FileHandle{hA}, []storage.FileHandle{hTA}, []string{"a1"}},
			{[]storage.FileHandle{hA, hB}, []storage.FileHandle{hTA}, []string{"a2"}},
			{[]storage.FileHandle{hB}, nil, []string{"b1"}},
		}},
		{4, []share{
			// key groups 0..1, 2..3, 4..5, 6..7
			{[]storage.FileHandle{hA}, []storage.FileHandle{hTA}, []string{}},
			{[]storage.FileHandle{hA}, []storage.FileHandle{hTA}, []string{"a1"}},
			{[]storage.FileHandle{hB}, nil, []string{"a2"}},
			{[]storage.FileHandle{hB}, nil, []string{"b1"}},
		}},
		{8, nil},
	} {
		t.Run(fmt.Sprint("p=", tc.p), func(t *testing.T) {
			r := oldOp()
			var split []string
			for i := range tc.p {
				start, end := keygroup.Range(i, maxP, tc.p)
				rs := r.forSubtask(i, tc.p, start, end, nil)

				// Keyed state and timers: exactly the files whose ranges
				// intersect the new subtask's, in old-subtask order.
				var wantKeyed, wantTimers []storage.FileHandle
				for _, st := range r.op.Subtasks {
					if st.KeyGroupStart <= end && start <= st.KeyGroupEnd {
						if st.Keyed != nil {
							wantKeyed = append(wantKeyed, *st.Keyed)
						}
						if st.Timers != nil {
							wantTimers = append(wantTimers, *st.Timers)
						}
					}
				}
				if tc.want != nil {
					if w := tc.want[i]; !slices.Equal(w.keyed, wantKeyed) || !slices.Equal(w.timers, wantTimers) {
						t.Fatalf("test table disagrees with the range intersection for subtask %d", i)
					}
				}
				if !slices.Equal(rs.Keyed, wantKeyed) {
					t.Errorf("subtask %d (key groups %d..%d): keyed %v, want %v", i, start, end, rs.Keyed, wantKeyed)
				}
				if !slices.Equal(rs.Timers, wantTimers) {
					t.Errorf("subtask %d (key groups %d..%d): timers %v, want %v", i, start, end, rs.Timers, wantTimers)
				}

				// Lists are sorted by name.
				var names []string
				for _, l := range rs.Lists {
					names = append(names, l.Name)
				}
				if !slices.Equal(names, []string{"s", "u"}) {
					t.Fatalf("subtask %d: lists %v, want [s u]", i, names)
				}

				s, ok := rs.List("s")
				if !ok || s.Union {
					t.Fatalf("subtask %d: list s = %+v, %v; want a split list", i, s, ok)
				}
				if s.Elements == nil {
					t.Errorf("subtask %d: list s has nil Elements, want a non-nil slice", i)
				}
				// Redistribute's rule: the concatenation of the old lists,
				// subtask i getting the contiguous share [n*i/p, n*(i+1)/p).
				all := []string{"a1", "a2", "b1"}
				wantS := all[len(all)*i/tc.p : len(all)*(i+1)/tc.p]
				if got := strs(s.Elements); !slices.Equal(got, wantS) {
					t.Errorf("subtask %d: list s = %q, want %q", i, got, wantS)
				}
				if tc.want != nil && !slices.Equal(strs(s.Elements), tc.want[i].s) {
					t.Errorf("subtask %d: list s = %q, want %q", i, strs(s.Elements), tc.want[i].s)
				}
				split = append(split, strs(s.Elements)...)

				u, ok := rs.List("u")
				if !ok || !u.Union {
					t.Fatalf("subtask %d: list u = %+v, %v; want a union list", i, u, ok)
				}
				if got := strs(u.Elements); !slices.Equal(got, []string{"x", "y"}) {
					t.Errorf("subtask %d: union list u = %q, want [x y]", i, got)
				}

				if _, ok := rs.List("missing"); ok {
					t.Errorf("subtask %d: List(missing) found", i)
				}
			}
			// Every split element exactly once overall.
			slices.Sort(split)
			if !slices.Equal(split, []string{"a1", "a2", "b1"}) {
				t.Errorf("split list over all subtasks = %q, want each of a1 a2 b1 once", split)
			}
		})
	}
}

func TestForSubtaskDoesNotAlias(t *testing.T) {
	r := oldOp()
	rs0 := r.forSubtask(0, 3, 0, 2, nil)
	rs1 := r.forSubtask(1, 3, 3, 5, nil)
	u0, _ := rs0.List("u")
	u0.Elements[0] = []byte("changed")
	u1, _ := rs1.List("u")
	if got := strs(u1.Elements); !slices.Equal(got, []string{"x", "y"}) {
		t.Errorf("changing subtask 0's union list changed subtask 1's: %q", got)
	}
	// A second computation sees the checkpoint unchanged.
	again, _ := r.forSubtask(0, 3, 0, 2, nil).List("s")
	if got := strs(again.Elements); !slices.Equal(got, []string{"a1"}) {
		t.Errorf("second forSubtask: list s = %q, want [a1]", got)
	}
	if got := strs(r.op.Subtasks[0].Lists[1].Elements); !slices.Equal(got, []string{"a1", "a2"}) {
		t.Errorf("checkpoint's list s of old subtask 0 is now %q", got)
	}
}

func TestForSubtaskEmptyLists(t *testing.T) {
	r := &restoredOp{op: &metadata.Operator{
		UID: "src", Parallelism: 2, MaxParallelism: 128,
		Subtasks: []metadata.Subtask{
			{Index: 0, KeyGroupStart: 0, KeyGroupEnd: 63, Lists: []metadata.List{
				{Name: "empty-split", Elements: [][]byte{}},
				{Name: "empty-union", Union: true, Elements: [][]byte{}},
			}},
			// Subtask 1 left no state.
		},
	}}
	for i := range 3 {
		start, end := keygroup.Range(i, 128, 3)
		rs := r.forSubtask(i, 3, start, end, nil)
		if len(rs.Keyed) != 0 || len(rs.Timers) != 0 {
			t.Errorf("subtask %d: keyed %v, timers %v; want none", i, rs.Keyed, rs.Timers)
		}
		if len(rs.Lists) != 2 {
			t.Fatalf("subtask %d: lists %+v, want empty-split and empty-union", i, rs.Lists)
		}
		for _, l := range rs.Lists {
			if l.Elements == nil || len(l.Elements) != 0 {
				t.Errorf("subtask %d: list %q Elements = %#v, want a non-nil empty slice", i, l.Name, l.Elements)
			}
		}
		if l, _ := rs.List("empty-union"); !l.Union {
			t.Errorf("subtask %d: empty-union lost its union flag", i)
		}
	}
}

func TestRestoredStateOpen(t *testing.T) {
	var opened []storage.FileHandle
	open := func(h storage.FileHandle) (io.ReadCloser, error) {
		opened = append(opened, h)
		return io.NopCloser(strings.NewReader(h.Path)), nil
	}
	rs := oldOp().forSubtask(0, 1, 0, 7, open)
	for _, h := range rs.Keyed {
		rc, err := rs.Open(h)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(rc)
		rc.Close()
		if string(b) != h.Path {
			t.Errorf("Open(%v) read %q", h, b)
		}
	}
	if !slices.Equal(opened, []storage.FileHandle{hA, hB}) {
		t.Errorf("opened %v, want %v", opened, []storage.FileHandle{hA, hB})
	}
}
