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
	if err := WriteDiscovery(ctx, lock.Storage(), "orders", DiscoveryName, orders); err != nil {
		t.Fatal(err)
	}
	clicks := Discovery{URL: "https://127.0.0.1:8082", JobID: "bb", JobName: "clicks", PID: 43, StartTime: 2000}
	if err := WriteDiscovery(ctx, store, "clicks", DiscoveryName, clicks); err != nil {
		t.Fatal(err)
	}
	// Written again, the file is replaced.
	orders.PID = 44
	if err := WriteDiscovery(ctx, store, "orders", DiscoveryName, orders); err != nil {
		t.Fatal(err)
	}

	// Two runs of clicks without checkpoints (no lock) each write their own.
	clicks2 := Discovery{URL: "http://127.0.0.1:8083", JobID: "cc", JobName: "clicks", PID: 45, StartTime: 3000}
	if err := WriteDiscovery(ctx, store, "clicks", DiscoveryFile(false, clicks2.JobID), clicks2); err != nil {
		t.Fatal(err)
	}
	if DiscoveryFile(true, "x") != DiscoveryName || DiscoveryFile(false, "cc") != DiscoveryName+"-cc" {
		t.Fatal("discovery file names")
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
		if want := []Discovery{clicks, clicks2, orders}; !slices.Equal(got, want) {
			t.Errorf("FindDiscovery(%s) = %+v, want %+v", loc, got, want)
		}
	}
	// Checkpoint listings do not see the file.
	if cps, err := store.ListCheckpoints(ctx, "orders"); err != nil || len(cps) != 0 {
		t.Errorf("checkpoints of orders: %v %v", cps, err)
	}

	if err := RemoveDiscovery(ctx, store, "orders", DiscoveryName); err != nil {
		t.Fatal(err)
	}
	if err := RemoveDiscovery(ctx, store, "orders", DiscoveryName); err != nil {
		t.Errorf("removing a missing file: %v", err)
	}
	if err := RemoveDiscovery(ctx, store, "clicks", DiscoveryFile(false, clicks2.JobID)); err != nil {
		t.Fatal(err)
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
	if err := WriteDiscovery(ctx, mem, "orders", DiscoveryName, Discovery{URL: "x"}); err != nil {
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
		if err := WriteDiscovery(ctx, store, bad, DiscoveryName, Discovery{URL: "x"}); err == nil {
			t.Errorf("job directory %q accepted", bad)
		}
	}
}
