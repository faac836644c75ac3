package sink_test

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/sink"
)

func identity(v string) string { return v }

// listDir returns the names in dir, sorted.
func listDir(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func visible(names []string) []string {
	var out []string
	for _, n := range names {
		if !strings.HasPrefix(n, ".") {
			out = append(out, n)
		}
	}
	return out
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

type filesWriter interface {
	weir.SinkWriter[string]
	weir.PreCommitter
	weir.PreCommitSyncer
}

func newFilesWriter(t *testing.T, s weir.TwoPhaseCommitSink[string], ctx weir.SinkContext) filesWriter {
	t.Helper()
	w, err := s.CreateWriter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	fw, ok := w.(filesWriter)
	if !ok {
		t.Fatalf("writer %T does not implement PreCommitter and PreCommitSyncer", w)
	}
	return fw
}

func TestFilesTwoPhaseCommit(t *testing.T) {
	dir := t.TempDir()
	s := sink.Files[string](dir, identity)
	ctx := weir.SinkContext{Subtask: 0, Parallelism: 2, RunID: "r1"}
	w := newFilesWriter(t, s, ctx)
	defer w.Close()

	for _, l := range []string{"alpha", "beta", "gamma"} {
		if err := w.Write(l); err != nil {
			t.Fatal(err)
		}
	}
	if got := listDir(t, dir); !slices.Equal(got, []string{".part-0-r1-0.inprogress"}) {
		t.Fatalf("while writing: dir = %v, want only the in-progress file", got)
	}

	txn, err := w.PreCommit(1)
	if err != nil {
		t.Fatal(err)
	}
	if string(txn) != "part-0-r1-0" {
		t.Errorf("PreCommit txn = %q, want part-0-r1-0", txn)
	}
	if got := listDir(t, dir); !slices.Equal(got, []string{".part-0-r1-0.pending"}) {
		t.Fatalf("after PreCommit: dir = %v, want only .part-0-r1-0.pending", got)
	}
	if got := readFile(t, filepath.Join(dir, ".part-0-r1-0.pending")); got != "alpha\nbeta\ngamma\n" {
		t.Errorf("pending file = %q", got)
	}

	if err := w.SyncPreCommitted(txn); err != nil {
		t.Fatalf("SyncPreCommitted: %v", err)
	}
	if got := listDir(t, dir); !slices.Equal(got, []string{".part-0-r1-0.pending"}) {
		t.Fatalf("after SyncPreCommitted: dir = %v, want only .part-0-r1-0.pending", got)
	}

	if err := s.Commit(ctx, txn); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	if got := listDir(t, dir); !slices.Equal(got, []string{"part-0-r1-0"}) {
		t.Fatalf("after Commit: dir = %v, want only part-0-r1-0", got)
	}
	if got := readFile(t, filepath.Join(dir, "part-0-r1-0")); got != "alpha\nbeta\ngamma\n" {
		t.Errorf("committed file = %q", got)
	}

	// Idempotent, also from another subtask after rescaling.
	if err := s.Commit(ctx, txn); err != nil {
		t.Errorf("second Commit: %v", err)
	}
	if err := s.Commit(weir.SinkContext{Subtask: 1, Parallelism: 2, RunID: "r2"}, txn); err != nil {
		t.Errorf("Commit from another subtask: %v", err)
	}
	if got := readFile(t, filepath.Join(dir, "part-0-r1-0")); got != "alpha\nbeta\ngamma\n" {
		t.Errorf("committed file after repeated commits = %q", got)
	}

	// The next checkpoint interval goes into the next file.
	if err := w.Write("delta"); err != nil {
		t.Fatal(err)
	}
	txn2, err := w.PreCommit(2)
	if err != nil {
		t.Fatal(err)
	}
	if string(txn2) != "part-0-r1-1" {
		t.Errorf("second txn = %q, want part-0-r1-1", txn2)
	}
	if err := w.SyncPreCommitted(txn2); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, txn2); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(dir, "part-0-r1-1")); got != "delta\n" {
		t.Errorf("second committed file = %q", got)
	}
	if got := listDir(t, dir); !slices.Equal(got, []string{"part-0-r1-0", "part-0-r1-1"}) {
		t.Errorf("dir = %v", got)
	}
}

func TestFilesPreCommitNothingWritten(t *testing.T) {
	dir := t.TempDir()
	s := sink.Files[string](dir, identity)
	w := newFilesWriter(t, s, weir.SinkContext{Subtask: 0, Parallelism: 1, RunID: "r1"})
	for id := int64(1); id <= 2; id++ {
		txn, err := w.PreCommit(id)
		if err != nil || txn != nil {
			t.Errorf("PreCommit(%d) with nothing written = %q, %v; want nil, nil", id, txn, err)
		}
	}
	// Also right after a pre-commit that did write.
	if err := w.Write("x"); err != nil {
		t.Fatal(err)
	}
	if txn, err := w.PreCommit(3); err != nil || txn == nil {
		t.Fatalf("PreCommit(3) = %q, %v", txn, err)
	}
	if txn, err := w.PreCommit(4); err != nil || txn != nil {
		t.Errorf("PreCommit(4) with nothing written since = %q, %v; want nil, nil", txn, err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if got := listDir(t, dir); !slices.Equal(got, []string{".part-0-r1-0.pending"}) {
		t.Errorf("dir = %v, want only the one pending file", got)
	}
}

func TestFilesCommitErrors(t *testing.T) {
	dir := t.TempDir()
	s := sink.Files[string](dir, identity)
	ctx := weir.SinkContext{Subtask: 0, Parallelism: 1, RunID: "r1"}
	// Something for traversal attempts to find.
	if err := os.WriteFile(filepath.Join(dir, ".x.pending"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, txn, contains string
	}{
		{"lost", "part-0-r1-0", "lost"},
		{"empty", "", "invalid"},
		{"parent", "../x", "invalid"},
		{"slash", "a/b", "invalid"},
		{"backslash", `a\b`, "invalid"},
		{"hidden", ".hidden", "invalid"},
		{"dot", ".", "invalid"},
		{"dotdot", "..", "invalid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := s.Commit(ctx, []byte(tc.txn))
			if err == nil {
				t.Fatalf("Commit(%q) succeeded", tc.txn)
			}
			if !strings.Contains(err.Error(), tc.contains) {
				t.Errorf("Commit(%q) = %v, want it to mention %q", tc.txn, err, tc.contains)
			}
		})
	}
	if got := listDir(t, dir); !slices.Equal(got, []string{".x.pending"}) {
		t.Errorf("failed commits changed dir: %v", got)
	}
}

func TestFilesCloseDiscardsInProgress(t *testing.T) {
	dir := t.TempDir()
	s := sink.Files[string](dir, identity)
	ctx := weir.SinkContext{Subtask: 0, Parallelism: 1, RunID: "r1"}
	w := newFilesWriter(t, s, ctx)
	if err := w.Write("committed"); err != nil {
		t.Fatal(err)
	}
	txn, err := w.PreCommit(1)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write("open"); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(dir, ".part-0-r1-1.inprogress")); got != "open\n" {
		t.Errorf("in-progress file after Flush = %q", got)
	}
	if got := visible(listDir(t, dir)); len(got) != 0 {
		t.Errorf("visible files before commit: %v", got)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	// The pre-committed transaction stays, the open file goes.
	if got := listDir(t, dir); !slices.Equal(got, []string{".part-0-r1-0.pending"}) {
		t.Errorf("after Close: dir = %v, want only the pending file", got)
	}
	if err := s.Commit(ctx, txn); err != nil {
		t.Fatal(err)
	}
	if got := listDir(t, dir); !slices.Equal(got, []string{"part-0-r1-0"}) {
		t.Errorf("after Commit: dir = %v", got)
	}

	// Close without an open file is fine.
	w2 := newFilesWriter(t, s, ctx)
	if err := w2.Close(); err != nil {
		t.Errorf("Close of an idle writer: %v", err)
	}
}

func TestFilesCreateWriterDiscardsLeftovers(t *testing.T) {
	dir := t.TempDir()
	var all []string
	for _, run := range []string{"r0", "r1"} {
		for sub := range 4 {
			for _, suffix := range []string{".inprogress", ".pending"} {
				all = append(all, ".part-"+strconv.Itoa(sub)+"-"+run+"-0"+suffix)
			}
		}
	}
	keepAlso := []string{
		"part-1-r0-0", "part-3-r0-0", "part-1-r1-0", // committed
		".foo", "notes.txt",
		".part-1-r0-0.tmp",          // unknown suffix
		".part-x-r0-0.pending",      // no subtask index
		".part-1-r0.pending",        // too few fields
		".part-1-r0-0-9.inprogress", // too many fields
	}
	for _, n := range append(slices.Clone(all), keepAlso...) {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(n+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	s := sink.Files[string](dir, identity)
	w, err := s.CreateWriter(weir.SinkContext{Subtask: 1, Parallelism: 2, RunID: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()

	deleted := []string{
		".part-1-r0-0.inprogress", ".part-1-r0-0.pending",
		".part-3-r0-0.inprogress", ".part-3-r0-0.pending",
	}
	var want []string
	for _, n := range append(all, keepAlso...) {
		if !slices.Contains(deleted, n) {
			want = append(want, n)
		}
	}
	slices.Sort(want)
	if got := listDir(t, dir); !slices.Equal(got, want) {
		t.Errorf("after CreateWriter(subtask 1 of 2, run r1):\n got %v\nwant %v", got, want)
	}
	// What is kept is untouched.
	for _, n := range want {
		if got := readFile(t, filepath.Join(dir, n)); got != n+"\n" {
			t.Errorf("%s now holds %q", n, got)
		}
	}
}

func TestFilesCreateWriterMakesDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	s := sink.Files[string](dir, identity)
	w := newFilesWriter(t, s, weir.SinkContext{Subtask: 0, Parallelism: 1, RunID: "r1"})
	if err := w.Write("x"); err != nil {
		t.Fatal(err)
	}
	txn, err := w.PreCommit(1)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(weir.SinkContext{}, txn); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(dir, "part-0-r1-0")); got != "x\n" {
		t.Errorf("committed file = %q", got)
	}
}
