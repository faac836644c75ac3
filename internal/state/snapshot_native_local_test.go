package state_test

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/weirstream/weir/internal/state"
)

// readNativeFiles reads every file of snap in dir, by name.
func readNativeFiles(t *testing.T, snap *state.NativeSnapshot, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, f := range snap.Files {
		data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(f.Name)))
		pebbleOK(t, err)
		out[f.Name] = data
	}
	return out
}

// openLinked builds a database directory from the kept snapshot with
// LinkNativeFile and opens it.
func openLinked(t *testing.T, snap *state.NativeSnapshot) (*state.PebbleBackend, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "db")
	for _, f := range snap.Files {
		pebbleOK(t, state.LinkNativeFile(filepath.Join(snap.Dir, filepath.FromSlash(f.Name)), filepath.Join(dir, filepath.FromSlash(f.Name)), f.Shared))
	}
	b, err := state.OpenPebbleFromNative(state.Options{KeyGroupStart: 0, KeyGroupEnd: 7, MaxParallelism: 8, Dir: dir}, snap.Registry)
	pebbleOK(t, err)
	return b, dir
}

// A kept native snapshot (local recovery's copy) moves with a rename,
// survives Release and the compactions of the database it came from, and
// restores, twice, through hard links to its sstables and copies of its
// other files: the restored database's writes never change the copy.
func TestNativeSnapshotKeepAndLink(t *testing.T) {
	b := newNativePebble(t, 0, 7)
	s := registerNative(t, b, false)
	writeNative(t, b, s, 1)
	want := dumpNative(t, b, s)
	snap := takeNative(t, b)
	old := snap.Dir
	kept := filepath.Join(t.TempDir(), "kept")
	pebbleOK(t, snap.Keep(kept))
	if snap.Dir != kept {
		t.Fatalf("Dir %s after Keep, want %s", snap.Dir, kept)
	}
	if _, err := os.Stat(old); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the old directory is still there: %v", err)
	}
	pebbleOK(t, snap.Release())
	if _, err := os.Stat(kept); err != nil {
		t.Fatalf("Release deleted the kept directory: %v", err)
	}
	if err := snap.Keep(kept); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("Keep into an existing directory: %v, want fs.ErrExist", err)
	}
	files := readNativeFiles(t, snap, kept)

	// The source database moves on and compacts its sstables away.
	writeNative(t, b, s, 2)
	pebbleOK(t, b.Compact())

	for round := range 2 {
		r, dir := openLinked(t, snap)
		rs := registerNative(t, r, false)
		if got := dumpNative(t, r, rs); got != want {
			t.Fatalf("round %d: restored state differs:\n%s\nwant:\n%s", round, got, want)
		}
		for _, f := range snap.Files {
			a, err1 := os.Stat(filepath.Join(dir, f.Name))
			k, err2 := os.Stat(filepath.Join(kept, f.Name))
			if err1 == nil && err2 == nil && os.SameFile(a, k) != f.Shared {
				t.Errorf("round %d: %s hard-linked %v, want %v", round, f.Name, os.SameFile(a, k), f.Shared)
			}
		}
		// Writes, a compaction and a close rewrite the restored
		// database's files, not the copy's.
		writeNative(t, r, rs, 3+round)
		pebbleOK(t, r.Compact())
		pebbleOK(t, r.Close())
		for name, data := range readNativeFiles(t, snap, kept) {
			if !bytes.Equal(data, files[name]) {
				t.Fatalf("round %d: the restored database changed %s of the kept copy", round, name)
			}
		}
	}
}
