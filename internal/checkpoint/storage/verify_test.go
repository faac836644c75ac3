package storage_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/checkpoint/storage/blobtest"
)

func writeShared(t *testing.T, s *storage.Storage, job, name string, data []byte) storage.FileHandle {
	t.Helper()
	w, err := s.CreateSharedFile(context.Background(), job, name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	h, err := w.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// VerifyFiles reads every file and names each one that is missing, of
// another size or of another content, in path order, with what is wrong;
// CheckFiles sees only the missing and resized ones.
func TestVerifyFiles(t *testing.T) {
	forEach(t, func(t *testing.T, _ string, s *storage.Storage, fb *blobtest.Bucket) {
		ctx := context.Background()
		var files []storage.FileHandle
		for i := range 6 {
			files = append(files, writeFile(t, s, "job", 3, fmt.Sprintf("f%d", i), bytes.Repeat([]byte{byte(i)}, 1000+i)))
		}
		files = append(files, writeShared(t, s, "job", "s.sst", []byte("shared")))
		if err := s.VerifyFiles(ctx, "job", files); err != nil {
			t.Fatalf("intact: %v", err)
		}
		// The same file twice (several subtasks reference it) is read once.
		fb.ResetOps()
		if err := s.VerifyFiles(ctx, "job", append(files, files[6])); err != nil {
			t.Fatalf("intact, a file twice: %v", err)
		}
		if n := strings.Count(strings.Join(fb.Ops(), "\n"), "newreader job/shared/s.sst"); n != 1 {
			t.Errorf("read the shared file %d times:\n%s", n, strings.Join(fb.Ops(), "\n"))
		}

		putRaw(t, fb, "job/chk-3/f1", bytes.Repeat([]byte{1}, 10))   // truncated
		putRaw(t, fb, "job/chk-3/f4", bytes.Repeat([]byte{9}, 1004)) // same size
		if err := s.DeleteFile(ctx, "job", "shared/s.sst"); err != nil {
			t.Fatal(err)
		}
		err := s.VerifyFiles(ctx, "job", files)
		var d *storage.DamagedFilesError
		if !errors.As(err, &d) || len(d.Files) != 3 {
			t.Fatalf("damaged: %v, want 3 damaged files", err)
		}
		crc := d.Files[1].Problem
		for i, want := range []struct {
			path, problem string
			is            error
		}{
			{"chk-3/f1", "size 10, want 1001", storage.ErrCorrupt},
			{"chk-3/f4", "checksum mismatch (CRC-32C ", storage.ErrCorrupt},
			{"shared/s.sst", "missing", storage.ErrNotFound},
		} {
			f := d.Files[i]
			if f.Path != want.path || !strings.HasPrefix(f.Problem, want.problem) || !errors.Is(f, want.is) || !strings.HasSuffix(f.Name, "job/"+want.path) {
				t.Errorf("damaged file %d: %+v, want %s: %s", i, f, want.path, want.problem)
			}
		}
		if !strings.Contains(crc, fmt.Sprintf("want %08x)", files[4].CRC32C)) {
			t.Errorf("checksum problem %q does not name the recorded checksum %08x", crc, files[4].CRC32C)
		}
		if !errors.Is(err, storage.ErrCorrupt) || !errors.Is(err, storage.ErrNotFound) {
			t.Errorf("%v wraps neither ErrCorrupt nor ErrNotFound", err)
		}
		if strings.Count(err.Error(), "data file ") != 3 || strings.Contains(err.Error(), "\n") {
			t.Errorf("message %q: want the 3 files on one line", err)
		}

		// Without reading: the same-size file passes.
		err = s.CheckFiles(ctx, "job", files)
		if !errors.As(err, &d) || len(d.Files) != 2 || d.Files[0].Path != "chk-3/f1" || d.Files[1].Path != "shared/s.sst" {
			t.Fatalf("CheckFiles: %v, want f1 and s.sst", err)
		}

		// An I/O error says nothing about the files: it is returned as it is.
		fb.Fail(blobtest.OpRead, "job/chk-3/f2", errors.New("connection reset"), 1)
		err = s.VerifyFiles(ctx, "job", files)
		if errors.As(err, &d) || !strings.Contains(err.Error(), "connection reset") {
			t.Fatalf("I/O error: %v", err)
		}
		ctx2, cancel := context.WithCancel(ctx)
		cancel()
		if err := s.VerifyFiles(ctx2, "job", files); !errors.Is(err, context.Canceled) {
			t.Fatalf("canceled: %v", err)
		}
	})
}

// A message names at most three damaged files.
func TestVerifyFilesManyDamaged(t *testing.T) {
	s, err := storage.Open(context.Background(), "mem://")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var files []storage.FileHandle
	for i := range 5 {
		files = append(files, storage.FileHandle{Path: fmt.Sprintf("chk-1/f%d", i), Size: 1})
	}
	err = s.VerifyFiles(context.Background(), "job", files)
	want := "data file mem://job/chk-1/f0: missing; data file mem://job/chk-1/f1: missing; data file mem://job/chk-1/f2: missing; and 2 more damaged files"
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v\nwant %s", err, want)
	}
}

// LatestVerified skips, with a warning naming the file, checkpoints whose
// data files are damaged; without an intact one it says what it skipped.
func TestLatestVerifiedSkipsDamaged(t *testing.T) {
	forEach(t, func(t *testing.T, _ string, s *storage.Storage, fb *blobtest.Bucket) {
		ctx := context.Background()
		// Each payload is the name of the checkpoint's one data file.
		handles := map[string]storage.FileHandle{}
		for _, id := range []int64{1, 2, 3} {
			h := writeFile(t, s, "job", id, "data", bytes.Repeat([]byte("x"), 100))
			handles[h.Path] = h
			if err := s.WriteMetadata(ctx, "job", id, []byte(h.Path)); err != nil {
				t.Fatal(err)
			}
		}
		files := func(payload []byte) ([]storage.FileHandle, error) {
			return []storage.FileHandle{handles[string(payload)]}, nil
		}
		putRaw(t, fb, "job/chk-3/data", []byte("short"))
		var buf bytes.Buffer
		c, err := s.LatestVerified(ctx, "job", slog.New(slog.NewTextHandler(&buf, nil)), files)
		if err != nil || c.ID != 2 {
			t.Fatalf("LatestVerified = %+v, %v; want checkpoint 2", c, err)
		}
		lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
		if len(lines) != 1 || !strings.Contains(lines[0], "level=WARN") || !strings.Contains(lines[0], "checkpoint=3") ||
			!strings.Contains(lines[0], "job/chk-3/data") || !strings.Contains(lines[0], "size 5, want 100") {
			t.Fatalf("want one warning naming checkpoint 3, its file and the sizes:\n%s", buf.String())
		}

		if err := s.DeleteFile(ctx, "job", "chk-2/data"); err != nil {
			t.Fatal(err)
		}
		putRaw(t, fb, "job/chk-1/_metadata", []byte("garbage!garbage!garbage!garbage!"))
		_, err = s.LatestVerified(ctx, "job", nil, files)
		var nc *storage.NoCheckpointError
		if !errors.As(err, &nc) || !errors.Is(err, storage.ErrNotFound) || len(nc.Skipped) != 3 {
			t.Fatalf("nothing intact: %v", err)
		}
		for _, want := range []string{"checkpoint 3: data file", "size 5, want 100", "checkpoint 2: data file", "chk-2/data: missing", "checkpoint 1: read metadata"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q lacks %q", err, want)
			}
		}

		// An error listing the files, or reading one, is not skipped.
		bad := errors.New("bad payload")
		if _, err := s.LatestVerified(ctx, "job", nil, func([]byte) ([]storage.FileHandle, error) { return nil, bad }); !errors.Is(err, bad) {
			t.Fatalf("files error: %v", err)
		}
		fb.Fail(blobtest.OpAttributes, "job/chk-3/data", errors.New("connection reset"), 1)
		if _, err := s.LatestVerified(ctx, "job", nil, files); err == nil || !strings.Contains(err.Error(), "connection reset") {
			t.Fatalf("I/O error: %v", err)
		}
	})
}

// Storages opened at the same root, written as a relative or absolute
// path, a file:// URL or through a symbolic link, have the same Location;
// other roots, mem:// and OpenBucket storages do not.
func TestLocation(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	root := filepath.Join(dir, "ck")
	link := filepath.Join(dir, "link")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(root, link); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	open := func(loc string) *storage.Storage {
		t.Helper()
		s, err := storage.Open(ctx, loc)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	base := open(root)
	for _, loc := range []string{"ck", "./ck/", root + "/", "file://" + filepath.ToSlash(root), "file://localhost" + filepath.ToSlash(root) + "/", "file://" + filepath.ToSlash(link), link} {
		s := open(loc)
		if !s.Same(base) || s.Location() != base.Location() || storage.LocationOf(loc) != base.Location() {
			t.Errorf("%s: location %q, want %q as for %s", loc, s.Location(), base.Location(), root)
		}
	}
	if other := open(filepath.Join(dir, "other")); other.Same(base) {
		t.Errorf("%s and %s are the same storage", other.Location(), base.Location())
	}
	m1, m2 := open("mem://"), open("mem://")
	if m1.Same(m2) || !m1.Same(m1) || m1.Location() != "" {
		t.Errorf("mem:// storages: m1.Same(m2) %v, m1.Same(m1) %v, location %q", m1.Same(m2), m1.Same(m1), m1.Location())
	}
	b := storage.OpenBucket(blobtest.New(nil))
	if b.Same(base) || b.Location() != "" || !b.Same(b) {
		t.Errorf("an OpenBucket storage is the same as %s", base.Location())
	}
	var none *storage.Storage
	if none.Same(base) || !none.Same(nil) {
		t.Errorf("nil storage")
	}
	for _, c := range []struct{ a, b string }{
		{"s3://Bucket/a/b/", "s3://bucket/a//b"},
		{"s3://bucket/a/b", "S3://bucket?prefix=a/b/"},
		{"gs://b/x?region=1&acl=2", "gs://b/x/?acl=2&region=1"},
	} {
		if la, lb := storage.LocationOf(c.a), storage.LocationOf(c.b); la == "" || la != lb {
			t.Errorf("%s is %q, %s is %q: want the same", c.a, la, c.b, lb)
		}
	}
	for _, c := range []struct{ a, b string }{
		{"s3://bucket/a", "s3://bucket/b"},
		{"s3://bucket/a", "gs://bucket/a"},
		{"s3://bucket/a?region=1", "s3://bucket/a?region=2"},
	} {
		if storage.LocationOf(c.a) == storage.LocationOf(c.b) {
			t.Errorf("%s and %s have the same location %q", c.a, c.b, storage.LocationOf(c.a))
		}
	}
}
