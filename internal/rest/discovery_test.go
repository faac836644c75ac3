package rest

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/weirstream/weir/internal/checkpoint/storage"
)

func TestDiscovery(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	store, err := storage.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()

	// The runner writes through the job lock's storage.
	lock, err := store.LockJob(ctx, "orders", storage.LockOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Release(ctx)
	orders := Discovery{URL: "http://127.0.0.1:8081", JobID: "aa", JobName: "orders", PID: 42, StartTime: 1000}
	if err := WriteDiscovery(ctx, lock.Storage(), "orders", orders); err != nil {
		t.Fatal(err)
	}
	clicks := Discovery{URL: "https://127.0.0.1:8082", JobID: "bb", JobName: "clicks", PID: 43, StartTime: 2000}
	if err := WriteDiscovery(ctx, store, "clicks", clicks); err != nil {
		t.Fatal(err)
	}
	// Written again, the file is replaced.
	orders.PID = 44
	if err := WriteDiscovery(ctx, store, "orders", orders); err != nil {
		t.Fatal(err)
	}

	raw, err := os.ReadFile(filepath.Join(dir, "orders", DiscoveryName))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	onlyFields(t, "discovery file", m, "url:string jobId:string jobName:string pid:number startTime:number")

	// Files that are not discovery files are skipped.
	if err := os.MkdirAll(filepath.Join(dir, "junk"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "junk", DiscoveryName), []byte("not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}

	for _, loc := range []string{dir, "file://" + filepath.ToSlash(dir)} {
		got, err := FindDiscovery(ctx, loc)
		if err != nil {
			t.Fatal(err)
		}
		if want := []Discovery{clicks, orders}; !slices.Equal(got, want) {
			t.Errorf("FindDiscovery(%s) = %+v, want %+v", loc, got, want)
		}
	}
	// Checkpoint listings do not see the file.
	if cps, err := store.ListCheckpoints(ctx, "orders"); err != nil || len(cps) != 0 {
		t.Errorf("checkpoints of orders: %v %v", cps, err)
	}

	if err := RemoveDiscovery(ctx, store, "orders"); err != nil {
		t.Fatal(err)
	}
	if err := RemoveDiscovery(ctx, store, "orders"); err != nil {
		t.Errorf("removing a missing file: %v", err)
	}
	got, err := FindDiscovery(ctx, dir)
	if err != nil || !slices.Equal(got, []Discovery{clicks}) {
		t.Errorf("after removal: %+v %v", got, err)
	}
}

func TestDiscoveryErrors(t *testing.T) {
	ctx := t.Context()
	missing := filepath.Join(t.TempDir(), "nope")
	if _, err := FindDiscovery(ctx, missing); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("missing directory: %v", err)
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("FindDiscovery created the directory: %v", err)
	}

	mem, err := storage.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	if err := WriteDiscovery(ctx, mem, "orders", Discovery{URL: "x"}); err != nil {
		t.Errorf("mem:// storage: %v", err)
	}
	if data, err := mem.ReadJobFile(ctx, "orders", DiscoveryName); err != nil || !strings.Contains(string(data), `"url": "x"`) {
		t.Errorf("mem:// discovery file %q: %v", data, err)
	}

	store, err := storage.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	for _, bad := range []string{"", "a/b", "my job", ".."} {
		if err := WriteDiscovery(ctx, store, bad, Discovery{URL: "x"}); err == nil {
			t.Errorf("job directory %q accepted", bad)
		}
	}
}

func TestLocalDiscovery(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "rt")
	t.Setenv(EnvRuntimeDir, dir)
	if got, err := FindLocalDiscovery(); err != nil || len(got) != 0 {
		t.Fatalf("no directory yet: %v %v", got, err)
	}
	a := Discovery{URL: "http://127.0.0.1:1", JobID: "aa", JobName: "wordcount", StartTime: 2}
	b := Discovery{URL: "http://127.0.0.1:2", JobID: "bb", JobName: "wordcount", StartTime: 1}
	for _, d := range []Discovery{a, b} {
		path, err := WriteLocalDiscovery(d)
		if err != nil || filepath.Dir(path) != dir {
			t.Fatalf("write %s: %s %v", d.JobID, path, err)
		}
	}
	if st, err := os.Stat(dir); err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("runtime directory %v %v: want private (0700)", st, err)
	}
	os.WriteFile(filepath.Join(dir, "junk.json"), []byte("{"), 0o600)
	if got, err := FindLocalDiscovery(); err != nil || !slices.Equal(got, []Discovery{b, a}) {
		t.Fatalf("found %+v %v, want both runs by start time", got, err)
	}
	if err := RemoveLocalDiscovery("aa"); err != nil {
		t.Fatal(err)
	}
	if err := RemoveLocalDiscovery("aa"); err != nil {
		t.Fatalf("removing twice: %v", err)
	}
	if got, _ := FindLocalDiscovery(); !slices.Equal(got, []Discovery{b}) {
		t.Fatalf("after removal %+v", got)
	}
	for _, bad := range []string{"", "../x", "a/b"} {
		if _, err := WriteLocalDiscovery(Discovery{JobID: bad}); err == nil {
			t.Errorf("job id %q accepted", bad)
		}
	}
}
