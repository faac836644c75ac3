package state

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/keygroup"
)

// BenchmarkCheckpointModes compares, side by side on the same Pebble state,
// a full checkpoint (the canonical key-group stream written to checkpoint
// storage) with an incremental one (a native snapshot whose .sst files are
// uploaded only if no earlier checkpoint uploaded them), after each round
// of updates to 1% of the keys. The state is WEIR_BENCH_STATE_MB megabytes
// of 1 KiB values (default 1024: about 1 GB); it runs once whatever
// -benchtime says. Run it with
//
//	go test -run XXX -bench CheckpointModes -benchtime 1x ./internal/state/
//
// and read the medians it reports: full-ms, incr-ms, speedup (full time
// over incremental time), incr-upload-% (bytes an incremental checkpoint
// uploads, as a share of the full checkpoint's).
func BenchmarkCheckpointModes(b *testing.B) {
	mb := 1024
	if s := os.Getenv("WEIR_BENCH_STATE_MB"); s != "" {
		var err error
		if mb, err = strconv.Atoi(s); err != nil || mb < 1 {
			b.Fatalf("WEIR_BENCH_STATE_MB=%q: want a positive number of megabytes", s)
		}
	}
	const valueSize, maxP, rounds = 1024, 128, 5
	n := mb << 10 // 1 KiB values
	dir := b.TempDir()
	be, err := NewPebbleBackend(Options{KeyGroupEnd: maxP - 1, MaxParallelism: maxP, Dir: filepath.Join(dir, "db")})
	if err != nil {
		b.Fatal(err)
	}
	defer be.Close()
	v, err := NewValue(be, ValueDescriptor[[]byte]{Name: "v", Codec: codec.Bytes()})
	if err != nil {
		b.Fatal(err)
	}
	kc := codec.Int64()
	rng := rand.New(rand.NewPCG(1, 2))
	value := func() []byte {
		p := make([]byte, valueSize)
		for i := range p {
			p[i] = byte(rng.Uint32())
		}
		return p
	}
	update := func(i int) {
		key := kc.Append(nil, int64(i))
		be.SetCurrentKey(key, keygroup.Of(key, maxP))
		if err := v.Update(value()); err != nil {
			b.Fatal(err)
		}
	}
	start := time.Now()
	for i := range n {
		update(i)
	}
	b.Logf("filled %d keys (%d MB) in %s", n, mb, time.Since(start).Round(time.Millisecond))
	// A long-running job's LSM has settled: compact the freshly loaded
	// data once, so that the rounds see the steady state, not the
	// compactions of the initial load.
	start = time.Now()
	if err := be.Compact(); err != nil {
		b.Fatal(err)
	}
	b.Logf("compacted in %s", time.Since(start).Round(time.Millisecond))

	ctx := context.Background()
	store, err := storage.Open(ctx, filepath.Join(dir, "chk"))
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	uploaded := map[string]bool{}
	upload := func(path string, w storage.FileWriter) int64 {
		f, err := os.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		if _, err := io.Copy(w, f); err != nil {
			b.Fatal(err)
		}
		h, err := w.Finish()
		if err != nil {
			b.Fatal(err)
		}
		return h.Size
	}
	// incremental takes a native snapshot and uploads what is new; it
	// returns the uploaded and the full size.
	incremental := func(id int64) (up, full int64) {
		ns, err := be.TakeNativeSnapshot(filepath.Join(dir, fmt.Sprintf("snap-%d", id)))
		if err != nil {
			b.Fatal(err)
		}
		defer ns.Release()
		for _, f := range ns.Files {
			full += f.Size
			if f.Shared && uploaded[f.Name] {
				continue
			}
			var w storage.FileWriter
			if f.Shared {
				w, err = store.CreateSharedFile(ctx, "bench", f.Name)
				uploaded[f.Name] = true
			} else {
				w, err = store.CreateFile(ctx, "bench", id, f.Name)
			}
			if err != nil {
				b.Fatal(err)
			}
			up += upload(filepath.Join(ns.Dir, f.Name), w)
		}
		return up, full
	}
	fullCheckpoint := func(id int64) int64 {
		snap, err := TakeSnapshot(be)
		if err != nil {
			b.Fatal(err)
		}
		defer snap.Release()
		w, err := store.CreateFile(ctx, "bench", id, "full.kst")
		if err != nil {
			b.Fatal(err)
		}
		bw := bufio.NewWriterSize(w, 256<<10)
		if _, err := snap.WriteStream(bw); err != nil {
			b.Fatal(err)
		}
		if err := bw.Flush(); err != nil {
			b.Fatal(err)
		}
		h, err := w.Finish()
		if err != nil {
			b.Fatal(err)
		}
		return h.Size
	}
	start = time.Now()
	base, _ := incremental(0) // the first incremental checkpoint uploads everything
	b.Logf("first incremental checkpoint: %d MB in %s", base>>20, time.Since(start).Round(time.Millisecond))

	var fullMs, incrMs, share []float64
	b.ResetTimer()
	for r := 1; r <= rounds; r++ {
		for range n / 100 {
			update(rng.IntN(n))
		}
		t0 := time.Now()
		fullBytes := fullCheckpoint(int64(2 * r))
		fd := time.Since(t0)
		t0 = time.Now()
		up, all := incremental(int64(2*r + 1))
		id := time.Since(t0)
		fullMs = append(fullMs, float64(fd.Milliseconds()))
		incrMs = append(incrMs, float64(id.Milliseconds()))
		share = append(share, 100*float64(up)/float64(fullBytes))
		b.Logf("round %d: full %d MB in %s; incremental uploaded %d MB of %d MB in %s", r, fullBytes>>20, fd.Round(time.Millisecond), up>>20, all>>20, id.Round(time.Millisecond))
	}
	b.StopTimer()
	med := func(xs []float64) float64 { s := slices.Clone(xs); slices.Sort(s); return s[len(s)/2] }
	b.ReportMetric(med(fullMs), "full-ms")
	b.ReportMetric(med(incrMs), "incr-ms")
	b.ReportMetric(med(fullMs)/max(med(incrMs), 1), "speedup")
	b.ReportMetric(med(share), "incr-upload-%")
}
