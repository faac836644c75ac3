package changelog_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/changelog"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/checkpoint/storage/blobtest"
	"github.com/weirstream/weir/internal/clock"
)

const job = "job"

var ctx = context.Background()

func memBucket(t testing.TB) storage.Bucket {
	t.Helper()
	b, err := storage.OpenLocation(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// newStore returns storage over a fault-injecting in-memory bucket.
func newStore(t testing.TB) (*storage.Storage, *blobtest.Bucket) {
	t.Helper()
	fb := blobtest.New(memBucket(t))
	s := storage.OpenBucket(fb)
	t.Cleanup(func() { s.Close() })
	return s, fb
}

func newWriter(t testing.TB, s *storage.Storage, cfg changelog.Config) *changelog.Writer {
	t.Helper()
	w, err := changelog.NewWriter(s, job, "op-1-0-a1", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

func manual() *clock.Manual { return clock.NewManual(time.Unix(1000, 0)) }

// waitFor polls cond briefly; the conditions depend on upload goroutines.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func rec(seq int64) []byte {
	return fmt.Appendf(nil, "record-%d-%s", seq, bytes.Repeat([]byte{'x'}, int(seq%7)))
}

func rec100(seq int64) []byte {
	r := bytes.Repeat([]byte{'r'}, 100)
	copy(r, fmt.Sprint(seq))
	return r
}

func appendN(t *testing.T, w *changelog.Writer, from, to int64, mk func(int64) []byte) {
	t.Helper()
	for i := from; i <= to; i++ {
		seq, err := w.Append(mk(i))
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		if seq != i {
			t.Fatalf("append: seq %d, want %d", seq, i)
		}
	}
}

func ranges(segs []changelog.Segment) string {
	var b bytes.Buffer
	for _, s := range segs {
		fmt.Fprintf(&b, "[%d..%d]", s.From, s.To)
	}
	return b.String()
}

func sharedFiles(t *testing.T, s *storage.Storage) int {
	t.Helper()
	fs, err := s.ListShared(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	return len(fs)
}

func TestBatchByDelay(t *testing.T) {
	s, _ := newStore(t)
	clk := manual()
	w := newWriter(t, s, changelog.Config{PersistDelay: 10 * time.Millisecond, Clock: clk})
	appendN(t, w, 1, 3, rec)
	if n := clk.Waiters(); n != 1 {
		t.Fatalf("waiters %d, want the delay timer", n)
	}
	clk.Advance(9 * time.Millisecond)
	if st := w.Stats(); st.Uploads != 0 || st.InFlightBytes != 0 || sharedFiles(t, s) != 0 {
		t.Fatalf("uploaded before the delay: %+v", st)
	}
	clk.Advance(time.Millisecond)
	waitFor(t, "upload", func() bool { return w.Stats().Uploads == 1 })
	if n := sharedFiles(t, s); n != 1 {
		t.Fatalf("%d files, want 1", n)
	}
	segs, err := w.Persist(ctx, 1, 3)
	if err != nil {
		t.Fatal(err)
	}
	if got := ranges(segs); got != "[1..3]" {
		t.Fatalf("segments %s", got)
	}
	if segs[0].File.Path != "shared/op-1-0-a1-1.log" {
		t.Fatalf("path %q", segs[0].File.Path)
	}
	if st := w.Stats(); st.Uploads != 1 || st.BytesUploaded != segs[0].File.Size {
		t.Fatalf("stats %+v", st)
	}
	// A new batch starts its own delay.
	appendN(t, w, 4, 4, rec)
	clk.Advance(10 * time.Millisecond)
	waitFor(t, "second upload", func() bool { return w.Stats().Uploads == 2 })
}

func TestBatchBySize(t *testing.T) {
	s, _ := newStore(t)
	// 100-byte records encode to 102 bytes; with the 8-byte magic a batch
	// reaches 1000 bytes at its 10th record.
	w := newWriter(t, s, changelog.Config{PersistDelay: -1, PersistSizeThreshold: 1000,
		PreemptivePersistThreshold: -1, Clock: manual()})
	appendN(t, w, 1, 25, rec100)
	waitFor(t, "two uploads", func() bool { return w.Stats().Uploads == 2 })
	segs, err := w.Persist(ctx, 1, 25)
	if err != nil {
		t.Fatal(err)
	}
	if got := ranges(segs); got != "[1..10][11..20][21..25]" {
		t.Fatalf("segments %s", got)
	}
	if segs[0].File.Size != 8+10*102 {
		t.Fatalf("size %d", segs[0].File.Size)
	}
}

func TestPreemptivePersist(t *testing.T) {
	s, _ := newStore(t)
	w := newWriter(t, s, changelog.Config{PersistDelay: time.Hour, PersistSizeThreshold: 1 << 20,
		PreemptivePersistThreshold: 500, Clock: manual()})
	appendN(t, w, 1, 12, rec100)
	// Uploaded without any checkpoint: 1..5 and 6..10 (8+5*102 >= 500).
	waitFor(t, "preemptive uploads", func() bool { return w.Stats().Uploads == 2 })
	before := w.Stats().BytesUploaded
	segs, err := w.Persist(ctx, 1, 12)
	if err != nil {
		t.Fatal(err)
	}
	if got := ranges(segs); got != "[1..5][6..10][11..12]" {
		t.Fatalf("segments %s", got)
	}
	// The checkpoint flushed only the tail.
	if d := w.Stats().BytesUploaded - before; d != 8+2*102 {
		t.Fatalf("checkpoint uploaded %d bytes, want the 212-byte tail", d)
	}
}

// multiSegment appends n records to a writer that cuts every 7 records or
// so (size threshold) and persists between, giving segments of varied size.
func multiSegment(t *testing.T, s *storage.Storage, n int64) *changelog.Writer {
	t.Helper()
	w := newWriter(t, s, changelog.Config{PersistDelay: -1, PersistSizeThreshold: 100,
		PreemptivePersistThreshold: -1, Clock: manual()})
	for i := int64(1); i <= n; i++ {
		appendN(t, w, i, i, rec)
		if i%11 == 0 {
			if _, err := w.Persist(ctx, i, i); err != nil {
				t.Fatal(err)
			}
		}
	}
	return w
}

func collect(t *testing.T, s *storage.Storage, segs []changelog.Segment, from, to int64) ([]int64, error) {
	t.Helper()
	var got []int64
	err := changelog.Replay(ctx, s, job, segs, from, to, func(seq int64, r []byte) error {
		if !bytes.Equal(r, rec(seq)) {
			t.Fatalf("record %d = %q, want %q", seq, r, rec(seq))
		}
		got = append(got, seq)
		return nil
	})
	return got, err
}

func TestPersistAndReplay(t *testing.T) {
	s, _ := newStore(t)
	w := multiSegment(t, s, 50)
	for _, r := range [][2]int64{{7, 23}, {1, 50}, {11, 12}, {50, 50}, {12, 22}} {
		from, upTo := r[0], r[1]
		segs, err := w.Persist(ctx, from, upTo)
		if err != nil {
			t.Fatal(err)
		}
		if len(segs) < 1 || segs[0].From > from || segs[0].To < from ||
			segs[len(segs)-1].To < upTo || segs[len(segs)-1].From > upTo {
			t.Fatalf("persist %d..%d: segments %s do not cover exactly", from, upTo, ranges(segs))
		}
		for i := 1; i < len(segs); i++ {
			if segs[i].From != segs[i-1].To+1 {
				t.Fatalf("segments %s not contiguous", ranges(segs))
			}
		}
		if from == 7 && len(segs) < 3 {
			t.Fatalf("want several segments, got %s", ranges(segs))
		}
		// The handles survive the checkpoint metadata.
		js, err := json.Marshal(segs)
		if err != nil {
			t.Fatal(err)
		}
		var back []changelog.Segment
		if err := json.Unmarshal(js, &back); err != nil {
			t.Fatal(err)
		}
		got, err := collect(t, s, back, from, upTo)
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(got)) != upTo-from+1 || got[0] != from || got[len(got)-1] != upTo {
			t.Fatalf("replay %d..%d: got %v", from, upTo, got)
		}
		for i := 1; i < len(got); i++ {
			if got[i] != got[i-1]+1 {
				t.Fatalf("replay out of order: %v", got)
			}
		}
	}
	if _, err := w.Persist(ctx, 1, 51); !errors.Is(err, changelog.ErrNotContiguous) {
		t.Fatalf("persist beyond the log: %v", err)
	}
	if segs, err := w.Persist(ctx, 5, 4); err != nil || segs != nil {
		t.Fatalf("empty range: %v %v", segs, err)
	}
}

func TestTruncate(t *testing.T) {
	s, _ := newStore(t)
	w := multiSegment(t, s, 30)
	all, err := w.Persist(ctx, 1, 30)
	if err != nil {
		t.Fatal(err)
	}
	cut := all[1].To + 1 // start of the third segment
	w.Truncate(cut + 1)  // the third segment holds cut+1: kept
	if _, err := w.Persist(ctx, 1, 30); !errors.Is(err, changelog.ErrNotContiguous) {
		t.Fatalf("persist of truncated records: %v", err)
	}
	segs, err := w.Persist(ctx, cut, 30)
	if err != nil {
		t.Fatal(err)
	}
	if segs[0] != all[2] {
		t.Fatalf("first segment %+v, want %+v", segs[0], all[2])
	}
	if n := sharedFiles(t, s); n != len(all) {
		t.Fatalf("truncate deleted files: %d left of %d", n, len(all))
	}
}

func TestUploadRetry(t *testing.T) {
	s, fb := newStore(t)
	fb.Fail(blobtest.OpFinish, job+"/shared/*", nil, 2)
	w := newWriter(t, s, changelog.Config{MaxAttempts: 3, Clock: manual()})
	appendN(t, w, 1, 5, rec)
	segs, err := w.Persist(ctx, 1, 5)
	if err != nil {
		t.Fatal(err)
	}
	st := w.Stats()
	if st.Uploads != 1 || st.FailedAttempts != 2 || st.FailedUploads != 0 {
		t.Fatalf("stats %+v", st)
	}
	if got, err := collect(t, s, segs, 1, 5); err != nil || len(got) != 5 {
		t.Fatalf("replay: %v %v", got, err)
	}
	if _, err := w.Append(rec(6)); err != nil {
		t.Fatal(err)
	}
}

func TestUploadFailure(t *testing.T) {
	s, fb := newStore(t)
	fb.Fail(blobtest.OpFinish, job+"/shared/*", nil, 3)
	w := newWriter(t, s, changelog.Config{MaxAttempts: 3, Clock: manual()})
	appendN(t, w, 1, 5, rec)
	if _, err := w.Persist(ctx, 1, 5); !errors.Is(err, blobtest.ErrInjected) {
		t.Fatalf("persist: %v", err)
	}
	if _, err := w.Append(rec(6)); !errors.Is(err, blobtest.ErrInjected) {
		t.Fatalf("append after failure: %v", err)
	}
	if _, err := w.Persist(ctx, 1, 5); !errors.Is(err, blobtest.ErrInjected) {
		t.Fatalf("persist after failure: %v", err)
	}
	st := w.Stats()
	if st.Uploads != 0 || st.FailedAttempts != 3 || st.FailedUploads != 1 || st.InFlightBytes != 0 {
		t.Fatalf("stats %+v", st)
	}
	if err := w.Close(); !errors.Is(err, blobtest.ErrInjected) {
		t.Fatalf("close: %v", err)
	}
	if _, err := w.Append(rec(6)); !errors.Is(err, changelog.ErrClosed) {
		t.Fatalf("append after close: %v", err)
	}
}

// gate is a bucket whose Finish waits for a token on release (or for the
// writer's context to end).
type gate struct {
	storage.Bucket
	release chan struct{}
	waiting atomic.Int64
}

func newGate(t testing.TB) (*storage.Storage, *gate) {
	g := &gate{Bucket: memBucket(t), release: make(chan struct{})}
	s := storage.OpenBucket(g)
	t.Cleanup(func() { s.Close() })
	return s, g
}

func (g *gate) NewWriter(ctx context.Context, key string) (storage.ObjectWriter, error) {
	w, err := g.Bucket.NewWriter(ctx, key)
	if err != nil {
		return nil, err
	}
	return &gatedWriter{ObjectWriter: w, g: g, ctx: ctx}, nil
}

type gatedWriter struct {
	storage.ObjectWriter
	g   *gate
	ctx context.Context
}

func (w *gatedWriter) Finish() error {
	w.g.waiting.Add(1)
	defer w.g.waiting.Add(-1)
	select {
	case <-w.g.release:
		return w.ObjectWriter.Finish()
	case <-w.ctx.Done():
		w.ObjectWriter.Abort()
		return w.ctx.Err()
	}
}

func TestBackpressure(t *testing.T) {
	s, g := newGate(t)
	// Batches are cut at 2 records (8+2*102 = 212 bytes); two in flight
	// exceed MaxInFlight.
	w := newWriter(t, s, changelog.Config{PersistDelay: -1, PersistSizeThreshold: 200,
		PreemptivePersistThreshold: -1, MaxInFlight: 300, Clock: manual()})
	appendN(t, w, 1, 4, rec100)
	waitFor(t, "two blocked uploads", func() bool { return g.waiting.Load() == 2 })
	if st := w.Stats(); st.InFlightBytes != 424 {
		t.Fatalf("in flight %d", st.InFlightBytes)
	}
	done := make(chan int64)
	go func() {
		seq, err := w.Append(rec100(5))
		if err != nil {
			t.Error(err)
		}
		done <- seq
	}()
	select {
	case seq := <-done:
		t.Fatalf("append %d did not block", seq)
	case <-time.After(20 * time.Millisecond):
	}
	g.release <- struct{}{} // one upload completes
	if seq := <-done; seq != 5 {
		t.Fatalf("seq %d", seq)
	}
	if st := w.Stats(); st.Uploads != 1 || st.InFlightBytes != 212 {
		t.Fatalf("stats %+v", st)
	}
	// Persist waits for the remaining uploads.
	res := make(chan error)
	go func() {
		_, err := w.Persist(ctx, 1, 5)
		res <- err
	}()
	waitFor(t, "tail upload", func() bool { return g.waiting.Load() == 2 })
	g.release <- struct{}{}
	g.release <- struct{}{}
	if err := <-res; err != nil {
		t.Fatal(err)
	}
}

func TestUploadTimeout(t *testing.T) {
	s, g := newGate(t)
	clk := manual()
	w := newWriter(t, s, changelog.Config{PersistDelay: -1, UploadTimeout: time.Second, MaxAttempts: 3, Clock: clk})
	appendN(t, w, 1, 3, rec)
	res := make(chan error)
	go func() {
		_, err := w.Persist(ctx, 1, 3)
		res <- err
	}()
	// First attempt hangs; its timeout fires and a second attempt starts.
	waitFor(t, "first attempt", func() bool { return g.waiting.Load() == 1 && clk.Waiters() == 1 })
	clk.Advance(time.Second)
	waitFor(t, "retry", func() bool { return w.Stats().FailedAttempts == 1 && clk.Waiters() == 1 })
	waitFor(t, "second attempt", func() bool { return g.waiting.Load() == 1 })
	g.release <- struct{}{}
	if err := <-res; err != nil {
		t.Fatal(err)
	}
	if st := w.Stats(); st.Uploads != 1 || st.FailedAttempts != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestCloseCancelsUploads(t *testing.T) {
	s, g := newGate(t)
	w := newWriter(t, s, changelog.Config{PersistDelay: -1, Clock: manual()})
	appendN(t, w, 1, 3, rec)
	res := make(chan error)
	go func() {
		_, err := w.Persist(ctx, 1, 3)
		res <- err
	}()
	waitFor(t, "upload", func() bool { return g.waiting.Load() == 1 })
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-res; !errors.Is(err, changelog.ErrClosed) {
		t.Fatalf("persist: %v", err)
	}
}

// flip rewrites the object of h with one byte changed.
func flip(t *testing.T, b storage.Bucket, h storage.FileHandle, off int) {
	t.Helper()
	key := job + "/" + h.Path
	r, err := b.NewReader(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(r)
	r.Close()
	if err != nil {
		t.Fatal(err)
	}
	data[off] ^= 0x40
	w, err := b.NewWriter(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
}

func TestReplayCorrupt(t *testing.T) {
	s, fb := newStore(t)
	w := multiSegment(t, s, 30)
	segs, err := w.Persist(ctx, 1, 30)
	if err != nil {
		t.Fatal(err)
	}
	flip(t, fb, segs[1].File, int(segs[1].File.Size)-1)
	got, err := collect(t, s, segs, 1, 30)
	if !errors.Is(err, storage.ErrCorrupt) {
		t.Fatalf("replay of a corrupt segment: %v", err)
	}
	if int64(len(got)) != segs[0].To {
		t.Fatalf("delivered %v; nothing of the corrupt segment may be", got)
	}
	// A handle that lies about the range is caught by the framing check,
	// even though size and CRC verify.
	bad := append([]changelog.Segment(nil), segs[0])
	bad[0].To++
	if _, err := collect(t, s, bad, 1, 1); !errors.Is(err, storage.ErrCorrupt) {
		t.Fatalf("replay with a wrong range: %v", err)
	}
}

func TestReplayGap(t *testing.T) {
	s, _ := newStore(t)
	w := multiSegment(t, s, 30)
	segs, err := w.Persist(ctx, 1, 30)
	if err != nil {
		t.Fatal(err)
	}
	if len(segs) < 3 {
		t.Fatalf("segments %s", ranges(segs))
	}
	cases := map[string][]changelog.Segment{
		"gap":       {segs[0], segs[2]},
		"overlap":   {segs[0], segs[1], segs[1]},
		"unordered": {segs[1], segs[0]},
	}
	for name, ss := range cases {
		got, err := collect(t, s, ss, 1, segs[2].To)
		if !errors.Is(err, changelog.ErrNotContiguous) || len(got) != 0 {
			t.Errorf("%s: %v, delivered %v", name, err, got)
		}
	}
	// Contiguous but short of the range.
	if _, err := collect(t, s, segs[1:], 1, 30); !errors.Is(err, changelog.ErrNotContiguous) {
		t.Errorf("uncovered range: %v", err)
	}
	if _, err := collect(t, s, segs[:1], 1, 30); !errors.Is(err, changelog.ErrNotContiguous) {
		t.Errorf("uncovered range end: %v", err)
	}
}

func TestNewWriterRejectsBadNames(t *testing.T) {
	s, _ := newStore(t)
	for _, p := range []string{"", "a/b", ".x", "a b"} {
		if _, err := changelog.NewWriter(s, job, p, changelog.Config{}); !errors.Is(err, storage.ErrInvalidName) {
			t.Errorf("prefix %q: %v", p, err)
		}
	}
}

// discard is a bucket that drops what is written, so that BenchmarkAppend
// measures the writer rather than an in-memory store that keeps every byte.
type discard struct{ storage.Bucket }

func (discard) NewWriter(context.Context, string) (storage.ObjectWriter, error) {
	return discardWriter{}, nil
}

type discardWriter struct{}

func (discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (discardWriter) Finish() error               { return nil }
func (discardWriter) Abort() error                { return nil }

// BenchmarkAppend appends 100-byte records with the default Config; uploads
// (every 10ms) go to a discarding bucket.
func BenchmarkAppend(b *testing.B) {
	s := storage.OpenBucket(discard{memBucket(b)})
	defer s.Close()
	w, err := changelog.NewWriter(s, job, "bench", changelog.Config{})
	if err != nil {
		b.Fatal(err)
	}
	r := bytes.Repeat([]byte{'b'}, 100)
	b.SetBytes(int64(len(r)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := w.Append(r); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
}

// AppendFramed numbers framed records like Append one by one, interleaves
// with Append, cuts batches at the size threshold inside a chunk, and
// replays the same records.
func TestAppendFramed(t *testing.T) {
	s, _ := newStore(t)
	w := newWriter(t, s, changelog.Config{PersistDelay: -1, PersistSizeThreshold: 256, PreemptivePersistThreshold: -1})
	var want [][]byte
	var frames []byte
	for i := range 40 {
		rec := []byte(fmt.Sprintf("framed-%02d-%s", i, strings.Repeat("x", i)))
		want = append(want, rec)
		frames = binary.AppendUvarint(frames, uint64(len(rec)))
		frames = append(frames, rec...)
	}
	last, err := w.AppendFramed(frames)
	if err != nil || last != 40 {
		t.Fatalf("AppendFramed: last %d, %v; want 40", last, err)
	}
	if seq, err := w.Append([]byte("single")); err != nil || seq != 41 {
		t.Fatalf("Append after frames: %d, %v; want 41", seq, err)
	}
	want = append(want, []byte("single"))
	if last, err := w.AppendFramed(nil); err != nil || last != 41 {
		t.Fatalf("AppendFramed(nil): %d, %v", last, err)
	}
	segs, err := w.Persist(ctx, 1, 41)
	if err != nil {
		t.Fatal(err)
	}
	if len(segs) < 3 {
		t.Fatalf("segments %s: want the 256-byte threshold to cut inside the chunk", ranges(segs))
	}
	var got [][]byte
	err = changelog.Replay(ctx, s, job, segs, 1, 41, func(seq int64, rec []byte) error {
		if seq != int64(len(got))+1 {
			t.Fatalf("record %d delivered as %d", len(got)+1, seq)
		}
		got = append(got, bytes.Clone(rec))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("replayed %d records, want %d", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("record %d: %q, want %q", i+1, got[i], want[i])
		}
	}
	if _, err := w.AppendFramed([]byte{0x05, 'a'}); err == nil {
		t.Fatal("AppendFramed took a frame longer than its bytes")
	}
}
