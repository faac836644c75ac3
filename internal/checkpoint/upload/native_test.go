package upload

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/state"
)

func testSnapshot(t *testing.T, files map[string]string, shared ...string) *state.NativeSnapshot {
	dir := t.TempDir()
	ns := &state.NativeSnapshot{Dir: dir, Registry: []byte("{}")}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		ns.Files = append(ns.Files, state.NativeFile{Name: name, Size: int64(len(content)), Shared: slices.Contains(shared, name)})
	}
	slices.SortFunc(ns.Files, func(a, b state.NativeFile) int { return strings.Compare(a.Name, b.Name) })
	return ns
}

// A checkpoint's upload puts shared files under shared/ and the others
// under chk-<n>/, marks what it uploaded New and reuses an earlier upload
// of the same size; a materialization's upload puts everything under
// shared/ and marks nothing New.
func TestNativeUpload(t *testing.T) {
	ctx := context.Background()
	store, err := storage.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	snap := testSnapshot(t, map[string]string{"1.sst": "one", "2.sst": "two", "MANIFEST": "m"}, "1.sst", "2.sst")
	earlier := storage.FileHandle{Path: "shared/earlier-1.sst", Size: 3}
	name := func(prefix string) func(string) string { return func(f string) string { return prefix + "-" + f } }

	cp := Native{Store: store, Job: "job", Checkpoint: 4, SharedName: name("cp4"), PrivateName: name("op")}
	r, err := cp.Upload(ctx, snap, map[string]storage.FileHandle{"1.sst": earlier})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, f := range r.State.Files {
		got[f.Name] = f.Handle.Path
		if f.New == (f.Name == "1.sst") || !f.Shared == strings.HasSuffix(f.Name, ".sst") {
			t.Errorf("checkpoint upload: %s has New %v, Shared %v", f.Name, f.New, f.Shared)
		}
	}
	want := map[string]string{"1.sst": "shared/earlier-1.sst", "2.sst": "shared/cp4-2.sst", "MANIFEST": "chk-4/op-MANIFEST"}
	if !maps.Equal(got, want) || len(r.Created) != 1 || r.Created["2.sst"].Path != "shared/cp4-2.sst" || r.Bytes != 4 {
		t.Fatalf("checkpoint upload: files %v, created %v, %d bytes; want files %v, created 2.sst, 4 bytes", got, r.Created, r.Bytes, want)
	}

	mat := Native{Store: store, Job: "job", SharedName: name("m1")}
	r, err = mat.Upload(ctx, snap, map[string]storage.FileHandle{"2.sst": {Path: "shared/old-2.sst", Size: 99}})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range r.State.Files {
		if f.New || !f.Shared || f.Handle.Path != "shared/m1-"+f.Name {
			t.Errorf("materialization upload: %s at %s, New %v, Shared %v", f.Name, f.Handle.Path, f.New, f.Shared)
		}
	}
	if len(r.Created) != 3 {
		t.Fatalf("materialization upload created %v, want every file (a reuse of another size is no reuse)", r.Created)
	}
}

// A failed upload deletes what it put under shared/.
func TestNativeUploadFailureDeletes(t *testing.T) {
	ctx := context.Background()
	store, err := storage.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	snap := testSnapshot(t, map[string]string{"1.sst": "one", "2.sst": "two"}, "1.sst", "2.sst")
	if err := os.Remove(filepath.Join(snap.Dir, "2.sst")); err != nil {
		t.Fatal(err)
	}
	u := Native{Store: store, Job: "job", Checkpoint: 1, SharedName: func(f string) string { return "x-" + f },
		PrivateName: func(f string) string { return f }}
	if _, err := u.Upload(ctx, snap, nil); err == nil {
		t.Fatal("upload of a missing file succeeded")
	}
	objs, err := store.ListShared(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 0 {
		t.Fatalf("shared/ holds %v after the failed upload, want nothing", objs)
	}
}
