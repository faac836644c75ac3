//go:build unix

package task

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A run's state directory is deleted by a later run once no process holds
// its lock, and kept while one does; directories without a lock file are
// never touched.
func TestStaleStateDirsAreRemoved(t *testing.T) {
	root := t.TempDir()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	live, _, err := claimStateDir(filepath.Join(root, "job-live"))
	if err != nil {
		t.Fatal(err)
	}
	defer live.release()
	dead, _, err := claimStateDir(filepath.Join(root, "job-dead"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "job-dead", "000001.sst"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	dead.release() // as the kernel does when a killed process's files close
	if err := os.MkdirAll(filepath.Join(root, "not-ours"), 0o755); err != nil {
		t.Fatal(err)
	}
	me, _, err := claimStateDir(filepath.Join(root, "job-me"))
	if err != nil {
		t.Fatal(err)
	}
	defer me.release()

	removeStaleStateDirs(root, filepath.Join(root, "job-me"), logger)
	for name, want := range map[string]bool{"job-live": true, "job-dead": false, "not-ours": true, "job-me": true} {
		_, err := os.Stat(filepath.Join(root, name))
		if got := err == nil; got != want {
			t.Errorf("%s exists = %v, want %v", name, got, want)
		}
	}
}

// A run leaves no directory behind that it created, unless another run
// still uses it.
func TestStateDirReleasedWithTheDirectoriesItCreated(t *testing.T) {
	root := t.TempDir()
	base := filepath.Join(root, "weir-data", "state")
	l, created, err := claimStateDir(filepath.Join(base, "job-1"))
	if err != nil {
		t.Fatal(err)
	}
	l2, created2, err := claimStateDir(filepath.Join(base, "job-2"))
	if err != nil {
		t.Fatal(err)
	}
	if len(created) != 2 || len(created2) != 0 {
		t.Fatalf("created %v and %v, want weir-data/state and weir-data by the first claim only", created, created2)
	}
	if err := releaseStateDir(l, filepath.Join(base, "job-1"), created); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(base, "job-2")); err != nil {
		t.Fatalf("the other run's directory went: %v", err)
	}
	if err := releaseStateDir(l2, filepath.Join(base, "job-2"), created2); err != nil {
		t.Fatal(err)
	}
	// The first run created weir-data/state; it was not empty when that run
	// ended, so it stays: leftover empty directories are harmless, deleting
	// a directory a run uses is not.
	entries, _ := os.ReadDir(root)
	if len(entries) != 1 {
		t.Fatalf("root holds %v", entries)
	}
}

func TestLoneRunLeavesNothing(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "weir-data", "state", "job-1")
	l, created, err := claimStateDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := releaseStateDir(l, dir, created); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(root); len(entries) != 0 {
		t.Fatalf("left behind %v", entries)
	}
}

// A directory whose lock file is still empty is being claimed by a run
// this instant (created, not locked yet): the sweep leaves it alone. An
// empty lock file older than claimGrace (a run killed in that instant, or
// an older weir that wrote no pid) is stale as before.
func TestSweepSparesDirsBeingClaimed(t *testing.T) {
	root := t.TempDir()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, name := range []string{"job-claiming", "job-old"} {
		if err := os.MkdirAll(filepath.Join(root, name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, name, stateLockName), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-2 * claimGrace)
	if err := os.Chtimes(filepath.Join(root, "job-old", stateLockName), old, old); err != nil {
		t.Fatal(err)
	}
	removeStaleStateDirs(root, "", logger)
	for name, want := range map[string]bool{"job-claiming": true, "job-old": false} {
		_, err := os.Stat(filepath.Join(root, name))
		if got := err == nil; got != want {
			t.Errorf("%s exists = %v, want %v", name, got, want)
		}
	}
	// Once claimed, the lock file names the run, and the directory is
	// judged by its lock alone.
	l, _, err := claimStateDir(filepath.Join(root, "job-claiming"))
	if err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(filepath.Join(root, "job-claiming", stateLockName)); len(data) == 0 {
		t.Fatal("the claimed lock file is empty")
	}
	l.release()
	removeStaleStateDirs(root, "", logger)
	if _, err := os.Stat(filepath.Join(root, "job-claiming")); !os.IsNotExist(err) {
		t.Errorf("the released directory stays: %v", err)
	}
}
