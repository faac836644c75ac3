package storage_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/checkpoint/storage/blobtest"
	"github.com/weirstream/weir/internal/checkpoint/storage/s3test"
)

// backend opens a fresh storage location and returns its raw bucket.
type backend struct {
	name string
	open func(t *testing.T) (loc string, b storage.Bucket)
}

var backends = []backend{
	{"file", func(t *testing.T) (string, storage.Bucket) {
		dir := t.TempDir()
		b, err := storage.OpenLocation(context.Background(), dir)
		if err != nil {
			t.Fatal(err)
		}
		return dir, b
	}},
	{"fileurl", func(t *testing.T) (string, storage.Bucket) {
		dir := "file://" + filepath.ToSlash(t.TempDir()) + "/sub"
		b, err := storage.OpenLocation(context.Background(), dir)
		if err != nil {
			t.Fatal(err)
		}
		return dir, b
	}},
	{"mem", func(t *testing.T) (string, storage.Bucket) {
		b, err := storage.OpenLocation(context.Background(), "mem://")
		if err != nil {
			t.Fatal(err)
		}
		return "mem://", b
	}},
	{"s3", func(t *testing.T) (string, storage.Bucket) {
		loc := s3test.Start(t) // gofakes3
		b, err := storage.OpenLocation(context.Background(), loc)
		if err != nil {
			t.Fatal(err)
		}
		return loc, b
	}},
}

// locJoin appends the slash-separated rel to the path of loc, before the
// query of a URL.
func locJoin(loc, rel string) string {
	base, query, ok := strings.Cut(loc, "?")
	if !strings.Contains(loc, "://") || !ok {
		return strings.TrimSuffix(loc, "/") + "/" + rel
	}
	return strings.TrimSuffix(base, "/") + "/" + rel + "?" + query
}

// forEach runs f against every backend, with a fault-injecting wrapper.
func forEach(t *testing.T, f func(t *testing.T, loc string, s *storage.Storage, fb *blobtest.Bucket)) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			loc, b := be.open(t)
			fb := blobtest.New(b)
			s := storage.OpenBucket(fb)
			t.Cleanup(func() { _ = s.Close() })
			f(t, loc, s, fb)
		})
	}
}

func writeFile(t *testing.T, s *storage.Storage, job string, id int64, name string, data []byte) storage.FileHandle {
	t.Helper()
	ctx := context.Background()
	w, err := s.CreateFile(ctx, job, id, name)
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

func TestRoundTrip(t *testing.T) {
	forEach(t, func(t *testing.T, _ string, s *storage.Storage, _ *blobtest.Bucket) {
		ctx := context.Background()
		data := bytes.Repeat([]byte("state!"), 10000)
		h := writeFile(t, s, "job", 7, "op-1-0.sst", data)
		if h.Path != "chk-7/op-1-0.sst" || h.Size != int64(len(data)) {
			t.Fatalf("handle %+v", h)
		}
		got, err := s.ReadFile(ctx, "job", h)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("ReadFile: %v, %d bytes", err, len(got))
		}

		sw, err := s.CreateSharedFile(ctx, "job", "000001.sst")
		if err != nil {
			t.Fatal(err)
		}
		sw.Write([]byte("shared"))
		sh, err := sw.Finish()
		if err != nil || sh.Path != "shared/000001.sst" {
			t.Fatalf("shared: %+v %v", sh, err)
		}
		if got, err := s.ReadFile(ctx, "job", sh); err != nil || string(got) != "shared" {
			t.Fatalf("shared read: %q %v", got, err)
		}

		if _, err := s.ReadMetadata(ctx, "job", 7); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("metadata before write: %v", err)
		}
		for _, payload := range [][]byte{nil, []byte("handles of checkpoint 7")} {
			if err := s.WriteMetadata(ctx, "job", 7, payload); err != nil {
				t.Fatal(err)
			}
			got, err := s.ReadMetadata(ctx, "job", 7)
			if err != nil || !bytes.Equal(got, payload) {
				t.Fatalf("ReadMetadata = %q, %v", got, err)
			}
		}
		writeFile(t, s, "job", 8, "x", []byte("x")) // incomplete chk-8
		if err := s.WriteMetadata(ctx, "job", 10, []byte("ten")); err != nil {
			t.Fatal(err)
		}
		list, err := s.ListCheckpoints(ctx, "job")
		if err != nil {
			t.Fatal(err)
		}
		want := []storage.CheckpointEntry{{ID: 7, Complete: true}, {ID: 8}, {ID: 10, Complete: true}}
		if !slices.Equal(list, want) {
			t.Fatalf("ListCheckpoints = %+v, want %+v", list, want)
		}
		c, err := s.Latest(ctx, "job", nil)
		if err != nil || c.ID != 10 || string(c.Payload) != "ten" {
			t.Fatalf("Latest = %+v, %v", c, err)
		}
		if l, err := s.ListCheckpoints(ctx, "nojob"); err != nil || len(l) != 0 {
			t.Fatalf("empty job: %v %v", l, err)
		}
		if _, err := s.Latest(ctx, "nojob", nil); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("Latest empty: %v", err)
		}
	})
}

func TestAbortLeavesNothing(t *testing.T) {
	forEach(t, func(t *testing.T, loc string, s *storage.Storage, _ *blobtest.Bucket) {
		ctx := context.Background()
		w, err := s.CreateFile(ctx, "job", 1, "f")
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte("doomed"))
		if err := w.Abort(); err != nil {
			t.Fatal(err)
		}
		if l, _ := s.ListCheckpoints(ctx, "job"); len(l) != 0 {
			t.Fatalf("aborted file visible: %+v", l)
		}
		if loc != "mem://" && !strings.Contains(loc, "://") {
			assertNoFiles(t, loc)
		}
	})
}

func assertNoFiles(t *testing.T, dir string) {
	t.Helper()
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			t.Errorf("unexpected file %s", p)
		}
		return nil
	})
}

// TestFileWriteIsAtomic checks the fileblob guarantee the package relies on:
// until Finish, the target name does not exist.
func TestFileWriteIsAtomic(t *testing.T) {
	dir := t.TempDir()
	b, err := storage.OpenLocation(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	w, err := b.NewWriter(context.Background(), "job/chk-1/_metadata")
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("partial"))
	target := filepath.Join(dir, "job", "chk-1", "_metadata")
	if _, err := os.Stat(target); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("target visible before Finish: %v", err)
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(target); err != nil || string(got) != "partial" {
		t.Fatalf("after Finish: %q %v", got, err)
	}
	entries, _ := os.ReadDir(filepath.Dir(target))
	if len(entries) != 1 {
		t.Fatalf("leftover temp files: %v", entries)
	}
}

func TestMetadataAtomicityUnderFaults(t *testing.T) {
	payload := []byte("a payload long enough to be cut in several places")
	full := len(storage.EncodeMetadata(payload))
	type fault struct {
		name   string
		inject func(fb *blobtest.Bucket)
	}
	var faults []fault
	for _, after := range []int64{0, 4, 8, 12, 19, 20, 30, int64(full) - 1} {
		faults = append(faults,
			fault{"partial@" + itoa(after), func(fb *blobtest.Bucket) {
				fb.CrashWrite("*/chk-*/_metadata", after, blobtest.LeavePartial, 1)
				fb.Fail(blobtest.OpDelete, "*/chk-*/_metadata", nil, 1) // cleanup fails too
			}},
			fault{"absent@" + itoa(after), func(fb *blobtest.Bucket) {
				fb.CrashWrite("*/chk-*/_metadata", after, blobtest.LeaveAbsent, 1)
			}})
	}
	for _, op := range []blobtest.Op{blobtest.OpNewWriter, blobtest.OpWrite, blobtest.OpFinish} {
		faults = append(faults, fault{"fail-" + string(op), func(fb *blobtest.Bucket) {
			fb.Fail(op, "*/chk-*/_metadata", nil, 1)
		}})
	}
	forEach(t, func(t *testing.T, _ string, s *storage.Storage, fb *blobtest.Bucket) {
		ctx := context.Background()
		if err := s.WriteMetadata(ctx, "job", 1, []byte("good")); err != nil {
			t.Fatal(err)
		}
		for i, f := range faults {
			id := int64(i + 2)
			fb.Clear()
			f.inject(fb)
			if err := s.WriteMetadata(ctx, "job", id, payload); err == nil {
				t.Fatalf("%s: WriteMetadata succeeded", f.name)
			}
			got, err := s.ReadMetadata(ctx, "job", id)
			if err == nil {
				t.Fatalf("%s: partial metadata readable: %q", f.name, got)
			}
			if !errors.Is(err, storage.ErrNotFound) && !errors.Is(err, storage.ErrCorrupt) {
				t.Fatalf("%s: unexpected error %v", f.name, err)
			}
		}
		fb.Clear()
		c, err := s.Latest(ctx, "job", nil)
		if err != nil || c.ID != 1 {
			t.Fatalf("Latest after faults = %+v, %v", c, err)
		}
	})
}

func itoa(i int64) string { return strconv.FormatInt(i, 10) }

func TestDecodeMetadata(t *testing.T) {
	payload := []byte("payload bytes")
	good := storage.EncodeMetadata(payload)
	if len(good) != 8+4+8+len(payload)+4 || string(good[:8]) != "WEIRCHK\x00" {
		t.Fatalf("layout: % x", good)
	}
	if got, err := storage.DecodeMetadata(good); err != nil || !bytes.Equal(got, payload) {
		t.Fatalf("decode good: %q %v", got, err)
	}
	for n := 0; n < len(good); n++ {
		if _, err := storage.DecodeMetadata(good[:n]); !errors.Is(err, storage.ErrCorrupt) {
			t.Fatalf("truncated to %d: %v", n, err)
		}
	}
	if _, err := storage.DecodeMetadata(append(slices.Clone(good), 0)); !errors.Is(err, storage.ErrCorrupt) {
		t.Fatalf("extended: %v", err)
	}
	for i := range good {
		if i >= 8 && i < 12 {
			continue // version bytes: reported as unknown version below
		}
		bad := slices.Clone(good)
		bad[i] ^= 0x10
		if _, err := storage.DecodeMetadata(bad); !errors.Is(err, storage.ErrCorrupt) {
			t.Fatalf("flip byte %d: %v", i, err)
		}
	}
	foreign := slices.Clone(good)
	copy(foreign, "PK\x03\x04abcd")
	if _, err := storage.DecodeMetadata(foreign); !errors.Is(err, storage.ErrCorrupt) || !strings.Contains(err.Error(), "magic") {
		t.Fatalf("foreign magic: %v", err)
	}
	v2 := slices.Clone(good)
	v2[11] = 2
	_, err := storage.DecodeMetadata(v2)
	if !errors.Is(err, storage.ErrUnsupportedVersion) || !strings.Contains(err.Error(), "version 2") || !strings.Contains(err.Error(), "version 1") {
		t.Fatalf("unknown version: %v", err)
	}
}

// putRaw stores raw bytes at key, bypassing the format.
func putRaw(t *testing.T, b storage.Bucket, key string, data []byte) {
	t.Helper()
	w, err := b.NewWriter(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(data)
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
}

func TestLatestSkipsInvalid(t *testing.T) {
	forEach(t, func(t *testing.T, _ string, s *storage.Storage, fb *blobtest.Bucket) {
		ctx := context.Background()
		for _, id := range []int64{1, 2} {
			writeFile(t, s, "job", id, "data", []byte("d"))
			if err := s.WriteMetadata(ctx, "job", id, []byte{byte(id)}); err != nil {
				t.Fatal(err)
			}
		}
		good := storage.EncodeMetadata([]byte("newer"))
		corrupt := slices.Clone(good)
		corrupt[len(corrupt)-6] ^= 1
		v9 := slices.Clone(good)
		v9[11] = 9
		putRaw(t, fb, "job/chk-3/_metadata", corrupt)
		writeFile(t, s, "job", 4, "data", []byte("no metadata"))
		putRaw(t, fb, "job/chk-5/_metadata", good[:len(good)-3])
		putRaw(t, fb, "job/chk-6/_metadata", v9)
		putRaw(t, fb, "job/chk-7/_metadata", []byte("garbage!garbage!garbage!garbage!"))

		var buf bytes.Buffer
		logger := slog.New(slog.NewTextHandler(&buf, nil))
		c, err := s.Latest(ctx, "job", logger)
		if err != nil || c.ID != 2 || !bytes.Equal(c.Payload, []byte{2}) {
			t.Fatalf("Latest = %+v, %v", c, err)
		}
		lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
		if len(lines) != 5 {
			t.Fatalf("want 5 warnings, got:\n%s", buf.String())
		}
		for i, want := range []string{"checkpoint=7", "checkpoint=6", "checkpoint=5", "checkpoint=4", "checkpoint=3"} {
			if !strings.Contains(lines[i], "level=WARN") || !strings.Contains(lines[i], want) || !strings.Contains(lines[i], "reason=") {
				t.Errorf("warning %d = %s, want %s", i, lines[i], want)
			}
		}
		for _, reason := range []string{"magic", "version 9", "payload length", "not found", "checksum"} {
			if !strings.Contains(buf.String(), reason) {
				t.Errorf("no warning mentions %q:\n%s", reason, buf.String())
			}
		}

		// An I/O error is not a reason to fall back.
		fb.Fail(blobtest.OpNewReader, "job/chk-7/_metadata", errors.New("connection reset"), 1)
		if _, err := s.Latest(ctx, "job", nil); err == nil || !strings.Contains(err.Error(), "connection reset") {
			t.Fatalf("Latest with I/O error: %v", err)
		}
	})
}

func TestResolve(t *testing.T) {
	forEach(t, func(t *testing.T, loc string, s *storage.Storage, fb *blobtest.Bucket) {
		ctx := context.Background()
		if err := s.WriteMetadata(ctx, "job", 3, []byte("three")); err != nil {
			t.Fatal(err)
		}
		putRaw(t, fb, "job/chk-4/_metadata", []byte("WEIRCHK\x00junk"))
		if err := s.WriteMetadata(ctx, "job", 5, []byte("five")); err != nil {
			t.Fatal(err)
		}
		if c, err := s.Resolve(ctx, "job/chk-3/"); err != nil || c.ID != 3 || string(c.Payload) != "three" {
			t.Fatalf("Resolve good: %+v %v", c, err)
		}
		for rel, want := range map[string]error{
			"job/chk-4":  storage.ErrCorrupt, // no fallback to 3
			"job/chk-9":  storage.ErrNotFound,
			"job/foo":    storage.ErrInvalidName,
			"job":        storage.ErrInvalidName,
			"job/chk-01": storage.ErrInvalidName,
			"a b/chk-3":  storage.ErrInvalidName,
		} {
			if _, err := s.Resolve(ctx, rel); !errors.Is(err, want) {
				t.Errorf("Resolve(%q) = %v, want %v", rel, err, want)
			}
		}
		if loc == "mem://" {
			return // each mem:// open is a new, empty bucket
		}
		ps, c, err := storage.ResolvePath(ctx, locJoin(loc, "job/chk-5"))
		if err != nil || c.ID != 5 || c.Job != "job" || string(c.Payload) != "five" {
			t.Fatalf("ResolvePath: %+v %v", c, err)
		}
		if got, err := ps.ReadMetadata(ctx, c.Job, 3); err != nil || string(got) != "three" {
			t.Fatalf("resolved storage: %q %v", got, err)
		}
		ps.Close()
		if _, _, err := storage.ResolvePath(ctx, locJoin(loc, "job/chk-4")); !errors.Is(err, storage.ErrCorrupt) || !strings.Contains(err.Error(), "chk-4") {
			t.Fatalf("ResolvePath corrupt: %v", err)
		}
		if _, _, err := storage.ResolvePath(ctx, locJoin(loc, "missing/nojob/chk-1")); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("ResolvePath missing root: %v", err)
		}
	})
}

func TestResolvePathCreatesNothing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "absent")
	if _, _, err := storage.ResolvePath(context.Background(), filepath.Join(dir, "job", "chk-1")); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("err = %v", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("ResolvePath created %s", dir)
	}
}

func TestDataFileCorruption(t *testing.T) {
	forEach(t, func(t *testing.T, _ string, s *storage.Storage, fb *blobtest.Bucket) {
		ctx := context.Background()
		data := []byte("0123456789abcdef")
		h := writeFile(t, s, "job", 1, "f", data)
		for name, hh := range map[string]storage.FileHandle{
			"short size": {Path: h.Path, Size: h.Size - 1, CRC32C: h.CRC32C},
			"long size":  {Path: h.Path, Size: h.Size + 1, CRC32C: h.CRC32C},
			"checksum":   {Path: h.Path, Size: h.Size, CRC32C: h.CRC32C ^ 1},
		} {
			if _, err := s.ReadFile(ctx, "job", hh); !errors.Is(err, storage.ErrCorrupt) {
				t.Errorf("%s: %v", name, err)
			}
		}
		bad := slices.Clone(data)
		bad[3] = 'X'
		putRaw(t, fb, "job/chk-1/f", bad)
		if _, err := s.ReadFile(ctx, "job", h); !errors.Is(err, storage.ErrCorrupt) || !strings.Contains(err.Error(), "checksum") {
			t.Fatalf("flipped content: %v", err)
		}
		if _, err := s.ReadFile(ctx, "job", storage.FileHandle{Path: "chk-1/none"}); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("missing: %v", err)
		}
		for _, p := range []string{"../x", "chk-1/../../x", "/abs", "chk-1/_metadata", ""} {
			if _, err := s.OpenFile(ctx, "job", storage.FileHandle{Path: p}); !errors.Is(err, storage.ErrInvalidName) {
				t.Errorf("OpenFile(%q) = %v", p, err)
			}
		}
	})
}

func TestDeleteCheckpoint(t *testing.T) {
	forEach(t, func(t *testing.T, loc string, s *storage.Storage, fb *blobtest.Bucket) {
		ctx := context.Background()
		writeFile(t, s, "job", 1, "a", []byte("a"))
		writeFile(t, s, "job", 1, "b", []byte("b"))
		sh, _ := s.CreateSharedFile(ctx, "job", "s")
		sh.Write([]byte("s"))
		shh, _ := sh.Finish()
		if err := s.WriteMetadata(ctx, "job", 1, nil); err != nil {
			t.Fatal(err)
		}

		// A failure after the metadata is gone leaves an incomplete
		// checkpoint, never a complete one with missing files.
		fb.Fail(blobtest.OpDelete, "job/chk-1/b", nil, 1)
		fb.ResetOps()
		if err := s.DeleteCheckpoint(ctx, "job", 1); err == nil {
			t.Fatal("delete with injected failure succeeded")
		}
		ops := fb.Ops()
		if len(ops) == 0 || ops[0] != "delete job/chk-1/_metadata" {
			t.Fatalf("first op = %v, want metadata delete", ops)
		}
		if l, _ := s.ListCheckpoints(ctx, "job"); !slices.Equal(l, []storage.CheckpointEntry{{ID: 1}}) {
			t.Fatalf("after partial delete: %+v", l)
		}
		if err := s.DeleteCheckpoint(ctx, "job", 1); err != nil {
			t.Fatal(err)
		}
		if l, _ := s.ListCheckpoints(ctx, "job"); len(l) != 0 {
			t.Fatalf("after delete: %+v", l)
		}
		if err := s.DeleteCheckpoint(ctx, "job", 1); err != nil {
			t.Fatalf("delete absent: %v", err)
		}
		if _, err := s.ReadFile(ctx, "job", shh); err != nil {
			t.Fatalf("shared file touched: %v", err)
		}
		if err := s.DeleteFile(ctx, "job", shh.Path); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteFile(ctx, "job", shh.Path); err != nil {
			t.Fatalf("delete absent file: %v", err)
		}
		if err := s.DeleteFile(ctx, "job", "chk-1/_metadata"); !errors.Is(err, storage.ErrInvalidName) {
			t.Fatalf("DeleteFile(_metadata) = %v", err)
		}
	})
}

func TestDeleteCheckpointRemovesDir(t *testing.T) {
	dir := t.TempDir()
	s, err := storage.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	writeFile(t, s, "job", 1, "a", []byte("a"))
	s.WriteMetadata(context.Background(), "job", 1, nil)
	if err := s.DeleteCheckpoint(context.Background(), "job", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "job", "chk-1")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("chk-1 dir remains: %v", err)
	}
}

func TestSanitizeJob(t *testing.T) {
	for in, want := range map[string]string{
		"wordcount":      "wordcount",
		"Word-Count_2.1": "Word-Count_2.1",
		"my job/v2":      "my_job_v2",
		"..":             "__", "a..": "a._",
		".hidden":  "_hidden",
		"a\\b:c*d": "a_b_c_d",
		"zählen":   "z_hlen",
		"a.b.":     "a.b_", "v1.2": "v1.2",
	} {
		got, err := storage.SanitizeJob(in)
		if err != nil || got != want {
			t.Errorf("SanitizeJob(%q) = %q, %v; want %q", in, got, err, want)
		}
		if again, _ := storage.SanitizeJob(got); again != got {
			t.Errorf("not idempotent: %q -> %q", got, again)
		}
	}
	for _, bad := range []string{"", strings.Repeat("x", 201)} {
		if _, err := storage.SanitizeJob(bad); !errors.Is(err, storage.ErrInvalidName) {
			t.Errorf("SanitizeJob(%.10q) = %v", bad, err)
		}
	}

	dir := t.TempDir()
	s, err := storage.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.WriteMetadata(context.Background(), "../../etc/passwd", 1, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "_._.._etc_passwd", "chk-1", "_metadata")); err != nil {
		t.Fatalf("sanitized job dir: %v", err)
	}
}

func TestFileNames(t *testing.T) {
	s, _ := storage.Open(context.Background(), "mem://")
	defer s.Close()
	for _, name := range []string{"", "a/b", "..", ".x", "_metadata", "x.tmp", "a b", "x.", "a..", "."} {
		if _, err := s.CreateFile(context.Background(), "job", 1, name); !errors.Is(err, storage.ErrInvalidName) {
			t.Errorf("CreateFile(%q) = %v", name, err)
		}
	}
	if _, err := s.CreateFile(context.Background(), "job", -1, "x"); !errors.Is(err, storage.ErrInvalidName) {
		t.Errorf("negative id: %v", err)
	}
}

func TestOpenErrors(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	file := filepath.Join(dir, "plainfile")
	os.WriteFile(file, []byte("x"), 0o644)
	if _, err := storage.Open(ctx, file); err == nil || !strings.Contains(err.Error(), file) || !strings.Contains(err.Error(), "not a directory") {
		t.Fatalf("file as dir: %v", err)
	}
	if _, err := storage.Open(ctx, filepath.Join(file, "sub")); err == nil || !strings.Contains(err.Error(), file) {
		t.Fatalf("dir under file: %v", err)
	}
	nested := filepath.Join(dir, "a", "b")
	s, err := storage.Open(ctx, nested)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if fi, err := os.Stat(nested); err != nil || !fi.IsDir() {
		t.Fatalf("not created: %v", err)
	}
	if _, err := storage.Open(ctx, "nosuchscheme://bucket/x"); err == nil || !strings.Contains(err.Error(), "nosuchscheme://bucket/x") {
		t.Fatalf("unknown scheme: %v", err)
	}
	if os.Geteuid() != 0 {
		ro := filepath.Join(dir, "ro")
		os.Mkdir(ro, 0o555)
		if _, err := storage.Open(ctx, ro); !errors.Is(err, os.ErrPermission) || !strings.Contains(err.Error(), ro) {
			t.Fatalf("read-only dir: %v", err)
		}
	}
}
