package source_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/internal/state"
	"github.com/weirstream/weir/source"
)

// resumeAll reads every subtask of src at parallelism p for a few batches,
// snapshots the readers' splits, redistributes them to newP subtasks as a
// restore would, reads those to the end, and returns everything emitted.
func resumeAll[T any](t *testing.T, src weir.Source[T], p, batches, newP int) []T {
	t.Helper()
	var got []T
	var old [][][]byte
	for i := range p {
		r, err := src.CreateReader(weir.SourceContext{Subtask: i, Parallelism: p})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, read(t, r, batches)...)
		splits, err := r.(weir.CheckpointedReader).SnapshotSplits()
		if err != nil {
			t.Fatal(err)
		}
		old = append(old, splits)
		r.Close()
	}
	for i, splits := range state.Redistribute(state.SplitDistribute, old, newP) {
		if splits == nil {
			splits = [][]byte{} // restored, with nothing left: not a fresh start
		}
		r, err := src.CreateReader(weir.SourceContext{Subtask: i, Parallelism: newP, RestoredSplits: splits})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, read(t, r, -1)...)
		r.Close()
	}
	return got
}

// Resuming from a snapshot of the readers' splits, at any parallelism,
// emits exactly the records not emitted before the snapshot.
func TestSourcesResumeExactlyOnce(t *testing.T) {
	dir := t.TempDir()
	var lines []string
	var sb strings.Builder
	for i := range 9000 {
		l := fmt.Sprintf("line %d %s", i, strings.Repeat("x", i%37))
		lines = append(lines, l)
		sb.WriteString(l + "\n")
	}
	path := filepath.Join(dir, "in.txt")
	if err := os.WriteFile(path, []byte(sb.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	items := make([]int, 5000)
	for i := range items {
		items[i] = i
	}
	for _, tc := range []struct{ p, batches, newP int }{{1, 1, 1}, {3, 1, 2}, {2, 2, 5}, {4, 0, 1}, {3, 100, 3}} {
		name := fmt.Sprintf("p%d-batches%d-to-p%d", tc.p, tc.batches, tc.newP)
		t.Run(name, func(t *testing.T) {
			seq := resumeAll(t, source.Sequence(10, 10+9999), tc.p, tc.batches, tc.newP)
			slices.Sort(seq)
			if len(seq) != 10000 {
				t.Fatalf("sequence: %d records, want 10000", len(seq))
			}
			for i, v := range seq {
				if v != int64(10+i) {
					t.Fatalf("sequence: record %d = %d", i, v)
				}
			}
			gen := resumeAll(t, source.Generator(7000, func(i int64) int64 { return i * 3 }), tc.p, tc.batches, tc.newP)
			slices.Sort(gen)
			if len(gen) != 7000 {
				t.Fatalf("generator: %d records, want 7000", len(gen))
			}
			for i, v := range gen {
				if v != int64(i*3) {
					t.Fatalf("generator: record %d = %d", i, v)
				}
			}
			col := resumeAll(t, source.Collection(items...), tc.p, tc.batches, tc.newP)
			slices.Sort(col)
			if !slices.Equal(col, items) {
				t.Fatalf("collection: %d records", len(col))
			}
			txt := resumeAll(t, source.TextFile(path), tc.p, tc.batches, tc.newP)
			slices.Sort(txt)
			want := slices.Clone(lines)
			slices.Sort(want)
			if !slices.Equal(txt, want) {
				t.Fatalf("text file: %d lines, want %d", len(txt), len(want))
			}
		})
	}
}

// A restored split state that is malformed, or a range outside the
// source's input, is an error, not a silent misread.
func TestRangeSourcesRejectBadSplits(t *testing.T) {
	be := func(next, end uint64) []byte {
		b := make([]byte, 16)
		for i := range 8 {
			b[7-i] = byte(next >> (8 * i))
			b[15-i] = byte(end >> (8 * i))
		}
		return b
	}
	for _, src := range []weir.Source[int64]{source.Sequence(0, 9), source.Generator(10, func(i int64) int64 { return i })} {
		for _, bad := range [][]byte{{1, 2, 3}, be(0, 11), be(5, 4)} {
			_, err := src.CreateReader(weir.SourceContext{Parallelism: 1, RestoredSplits: [][]byte{bad}})
			if err == nil {
				t.Errorf("%T accepted split state %v", src, bad)
			}
		}
		if _, err := src.CreateReader(weir.SourceContext{Parallelism: 1, RestoredSplits: [][]byte{be(3, 10)}}); err != nil {
			t.Errorf("%T refused a valid split: %v", src, err)
		}
	}
}
