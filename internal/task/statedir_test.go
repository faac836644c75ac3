//go:build unix

package task

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
)

// A run's state directory is deleted by a later run once no process holds
// its lock, and kept while one does; directories without a lock file are
// never touched.
func TestStaleStateDirsAreRemoved(t *testing.T) {
	root := t.TempDir()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	live, err := claimStateDir(filepath.Join(root, "job-live"))
	if err != nil {
		t.Fatal(err)
	}
	defer live.release()
	dead, err := claimStateDir(filepath.Join(root, "job-dead"))
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
	me, err := claimStateDir(filepath.Join(root, "job-me"))
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
