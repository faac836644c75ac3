package weir_test

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/internal/checkpoint/metadata"
)

// What a killed process leaves in the checkpoint directory is cleaned up
// by the next run, through the registry: temporary files of interrupted
// uploads (bug E of issue 12), and a checkpoint whose _metadata is corrupt
// no longer keeps every unreferenced shared file alive once a newer intact
// checkpoint exists (bug D).
func TestSweepAfterCorruptMetadataAndKilledUploads(t *testing.T) {
	t.Parallel()
	const n, keys = 20_000, 500
	e := newCLEnv(t, "counter")
	base := clCfg{p: 2, backend: weir.BackendPebble, incremental: true, n: n, keys: keys, retained: 3}

	// A first run, stopped after a few checkpoints.
	first := base
	first.throttle = func(i int64) bool { return i > n/4 && i%4 == 0 }
	first.stop = func(cp *metadata.Checkpoint) bool { return cp.ID >= 4 }
	r := e.run(first)
	if len(r.cps) < 4 {
		t.Fatalf("first run completed %d checkpoints, want at least 4 (err %v)", len(r.cps), r.err)
	}
	newest := e.latest()
	chk := filepath.Join(e.dir, "chk", "counter")
	// The newest checkpoint's _metadata is cut short, and a killed upload
	// and an upload no checkpoint acknowledged lie in shared/.
	meta := filepath.Join(chk, "chk-"+strconv.FormatInt(newest.ID, 10), "_metadata")
	b, err := os.ReadFile(meta)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(meta, b[:len(b)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	strays := []string{
		filepath.Join(chk, "shared", "op-count-0-deadbeef-99-000042.sst.5f3a.tmp"),
		filepath.Join(chk, "shared", "op-count-1-deadbeef-99-000043.sst"),
	}
	for _, p := range strays {
		if err := os.WriteFile(p, []byte("left by a killed process"), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// The resume skips the corrupt checkpoint (the previous one is
	// restored) and runs to the end.
	second := base
	second.restore = weir.RestoreLatest
	if r := e.run(second); r.err != nil {
		t.Fatalf("resume: %v", r.err)
	}
	for _, p := range strays {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s survived the resumed run", filepath.Base(p))
		}
	}
	if _, err := os.Stat(filepath.Dir(meta)); err == nil {
		t.Errorf("chk-%d (corrupt _metadata) survived although newer intact checkpoints exist", newest.ID)
	}
	e.checkFiles("after the resumed run")
	checkCounterOutput(t, e.out(), n, keys)
}
