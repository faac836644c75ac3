package weir_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/sink"
	"github.com/weirstream/weir/source"
)

// buffering holds records back and emits them in batches of size, at
// every checkpoint (FlushBeforeBarrier) and at the end of the input.
type buffering struct {
	buf     []int64
	size    int
	flushes *atomic.Int64
}

func (b *buffering) ProcessElement(ctx *weir.Context[int64], v int64) error {
	if b.buf = append(b.buf, v); len(b.buf) >= b.size {
		b.emit(ctx)
	}
	return nil
}

func (b *buffering) emit(ctx *weir.Context[int64]) {
	for _, v := range b.buf {
		ctx.Emit(v)
	}
	b.buf = b.buf[:0]
}

func (b *buffering) FlushBeforeBarrier(ctx *weir.Context[int64]) error {
	if len(b.buf) > 0 {
		b.flushes.Add(1)
	}
	b.emit(ctx)
	return nil
}

func (b *buffering) EndOfInput(ctx *weir.Context[int64]) error {
	b.emit(ctx)
	return nil
}

// A function that buffers records and emits them before every barrier
// (BarrierFlusher) loses nothing and duplicates nothing when the job
// restarts from a checkpoint: what it held at the barrier went downstream
// before the barrier, into the counts' state. Without the flush, the
// buffered records would be in no checkpoint (a restore resumes the
// source after them) and the counts would miss them.
func TestBarrierFlusherKeepsExactlyOnce(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	const n, keys = 60_000, 31
	failAt := n/4 + rand.New(rand.NewPCG(seed, 0)).Int64N(n/2)
	dir := t.TempDir()
	env := weir.NewEnvironment(weir.Options{Parallelism: 2, Logger: quietLogger(t),
		Checkpoint: weir.CheckpointOptions{Interval: 10 * time.Millisecond, Dir: filepath.Join(dir, "chk"), MaxConcurrent: 2},
		Restart:    weir.RestartOptions{Type: "fixed-delay", FixedDelayAttempts: 3, FixedDelay: time.Millisecond}})
	var flushes atomic.Int64
	var failed atomic.Bool
	nums := weir.Map(weir.FromSource(env, source.Sequence(0, n-1)).UID("numbers"), func(i int64) int64 {
		if i%100 == 0 {
			time.Sleep(500 * time.Microsecond)
		}
		return i
	}).UID("slow")
	held := weir.ProcessEach(nums, func() weir.ProcessFunction[int64, int64] {
		return &buffering{size: 1000, flushes: &flushes}
	}).UID("buffer")
	counts := weir.KeyedProcess(weir.KeyBy(held, func(i int64) int64 { return i % keys }),
		func() weir.KeyedProcessFunction[int64, int64, string] {
			return &sideCounterOne{failAt: failAt, failed: &failed}
		}).UID("count")
	weir.SinkTo(counts, sink.Files(filepath.Join(dir, "out"), func(s string) string { return s })).UID("sink")
	res, err := env.ExecuteResult(context.Background(), "buffered")
	if err != nil {
		t.Fatal(err)
	}
	if !failed.Load() || res.Restarts != 1 {
		t.Fatalf("failure injected: %v, %d restarts; want exactly one", failed.Load(), res.Restarts)
	}
	checkCounterOutput(t, filepath.Join(dir, "out"), n, keys)
	if flushes.Load() == 0 {
		t.Fatal("no checkpoint found records buffered: the scenario never happened")
	}
	t.Logf("%d flushes before barriers, %d checkpoints completed", flushes.Load(), len(res.Completed))
}

// sideCounterOne is the counter's keyed function ("key,count" per
// record), failing once on record failAt.
type sideCounterOne struct {
	count  *weir.ValueState[int64]
	failAt int64
	failed *atomic.Bool
}

func (f *sideCounterOne) Open(ctx *weir.KeyedContext[int64, string]) error {
	var err error
	f.count, err = weir.GetValueState(ctx, weir.ValueStateDescriptor[int64]{Name: "count"})
	return err
}

func (f *sideCounterOne) ProcessElement(ctx *weir.KeyedContext[int64, string], i int64) error {
	if i == f.failAt && f.failed.CompareAndSwap(false, true) {
		return errors.New("injected failure")
	}
	c, _ := f.count.Value()
	c++
	f.count.Update(c)
	ctx.Emit(strconv.FormatInt(ctx.CurrentKey(), 10) + "," + strconv.FormatInt(c, 10))
	return nil
}

// stamped holds records back (with their timestamps) until a watermark
// or the end of the input, then emits them with EmitWithTimestamp.
type stamped struct {
	buf     []int64
	flushes *atomic.Int64
}

func (s *stamped) ProcessElement(ctx *weir.Context[int64], v int64) error {
	s.buf = append(s.buf, v) // the value is its own timestamp
	return nil
}

func (s *stamped) OnWatermark(ctx *weir.Context[int64], wm int64) error {
	if len(s.buf) > 0 {
		s.flushes.Add(1)
	}
	for _, v := range s.buf {
		ctx.EmitWithTimestamp(v, v)
	}
	s.buf = s.buf[:0]
	return nil
}

func (s *stamped) EndOfInput(ctx *weir.Context[int64]) error { return s.OnWatermark(ctx, 0) }

// A function that holds records back and emits them when a watermark
// arrives (WatermarkListener) emits them before that watermark goes on:
// the event-time windows downstream count every record, none is late.
func TestWatermarkListenerEmitsBeforeTheWatermark(t *testing.T) {
	const n, size = 20_000, 100
	env := weir.NewEnvironment(weir.Options{Parallelism: 1, Logger: quietLogger(t), AutoWatermarkInterval: time.Millisecond})
	nums := weir.AssignTimestampsAndWatermarks(weir.Map(weir.FromSource(env, source.Sequence(0, n-1)), func(i int64) int64 {
		if i%500 == 0 {
			time.Sleep(2 * time.Millisecond) // let watermarks pass between records
		}
		return i
	}), weir.MonotonousTimestamps(func(i int64) int64 { return i }))
	var flushes atomic.Int64
	held := weir.ProcessEach(nums, func() weir.ProcessFunction[int64, int64] { return &stamped{flushes: &flushes} })
	counts := weir.Aggregate(weir.Window(weir.KeyBy(held, func(int64) int64 { return 0 }), weir.TumblingEventTimeWindows(size*time.Millisecond)),
		weir.AggregateFunction[int64, int64, int64](countInts{}))
	out := &collect[int64]{}
	late := &collect[int64]{}
	w := weir.Window(weir.KeyBy(held, func(int64) int64 { return 0 }), weir.TumblingEventTimeWindows(size*time.Millisecond))
	weir.Reduce(w, func(a, b int64) int64 { return a })
	weir.SinkTo(weir.LateData(w), late)
	weir.SinkTo(counts, out)
	if err := env.Execute(context.Background(), "watermark-listener"); err != nil {
		t.Fatal(err)
	}
	got := out.sorted(cmpInt64)
	if len(late.sorted(cmpInt64)) != 0 {
		t.Fatalf("%d records were late", len(late.sorted(cmpInt64)))
	}
	if len(got) != n/size {
		t.Fatalf("%d windows fired, want %d", len(got), n/size)
	}
	for _, c := range got {
		if c != size {
			t.Fatalf("a window counted %d records, want %d", c, size)
		}
	}
	if flushes.Load() < 2 {
		t.Fatalf("%d watermarks found records held back: the scenario never happened", flushes.Load())
	}
}

// countInts counts records.
type countInts struct{}

func (countInts) CreateAccumulator() int64   { return 0 }
func (countInts) Add(_ int64, a int64) int64 { return a + 1 }
func (countInts) GetResult(a int64) int64    { return a }
func (countInts) Merge(a, b int64) int64     { return a + b }
