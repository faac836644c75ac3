package storage

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestFileDurabilitySequence checks write temp -> fsync temp -> rename ->
// fsync dirs, by observing the target at each fsync.
func TestFileDurabilitySequence(t *testing.T) {
	root := t.TempDir()
	b, err := openLoc(context.Background(), root, true, Options{})
	if err != nil {
		t.Fatal(err)
	}
	fb := b.(*fileBucket)
	target := filepath.Join(root, "job", "chk-1", MetadataName)
	var events []string
	checkVisible := true
	fb.onSync = func(kind, p string) {
		_, err := os.Stat(target)
		visible := err == nil
		if checkVisible && kind == "file" && visible {
			t.Errorf("target visible before temp fsync")
		}
		if kind == "dir" && !visible {
			t.Errorf("dir fsync before rename")
		}
		rel, _ := filepath.Rel(root, p)
		events = append(events, kind+" "+filepath.ToSlash(rel))
	}
	s := OpenBucket(b)
	defer s.Close()
	if err := s.WriteMetadata(context.Background(), "job", 1, []byte("p")); err != nil {
		t.Fatal(err)
	}
	want := []string{"file job/chk-1/_metadata", "dir job/chk-1", "dir job", "dir ."}
	if !slices.Equal(events, want) {
		t.Fatalf("events %q, want %q", events, want)
	}
	// Existing directories: only the parent is synced.
	events, checkVisible = nil, false
	if err := s.WriteMetadata(context.Background(), "job", 1, []byte("q")); err != nil {
		t.Fatal(err)
	}
	if want := []string{"file job/chk-1/_metadata", "dir job/chk-1"}; !slices.Equal(events, want) {
		t.Fatalf("events %q, want %q", events, want)
	}
}

// TestStrayTempFiles: a temp file left by a crash is not a checkpoint's
// metadata, and DeleteCheckpoint removes it with the directory.
func TestStrayTempFiles(t *testing.T) {
	root := t.TempDir()
	s, err := Open(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	dir := filepath.Join(root, "job", "chk-3")
	os.MkdirAll(dir, 0o777)
	os.WriteFile(filepath.Join(dir, "_metadata.18a3f.tmp"), EncodeMetadata(nil), 0o666)
	l, err := s.ListCheckpoints(context.Background(), "job")
	if err != nil || !slices.Equal(l, []CheckpointEntry{{ID: 3}}) {
		t.Fatalf("list = %+v, %v", l, err)
	}
	if _, err := s.Latest(context.Background(), "job", nil); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Latest = %v", err)
	}
	if err := s.DeleteCheckpoint(context.Background(), "job", 3); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("dir remains: %v", err)
	}
}
