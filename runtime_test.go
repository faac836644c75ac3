package weir_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/keygroup"
	"github.com/weirstream/weir/source"
)

// TestMain checks that no test leaves a goroutine behind (goleak), and
// runs twice as many parallel tests at once as go test's default
// -parallel (GOMAXPROCS) unless -parallel is given: most of the package's
// tests wait (checkpoint intervals, restarts, throttled sources) for most
// of their time, so on a 2-core CI machine two at a time leave the cores
// half idle. The tests that measure time or were seen to be sensitive to
// load do not call t.Parallel: they run first, alone.
func TestMain(m *testing.M) {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		if err := flag.Set("test.parallel", strconv.Itoa(2*runtime.GOMAXPROCS(0))); err != nil {
			fmt.Fprintln(os.Stderr, "set -test.parallel:", err)
			os.Exit(2)
		}
	}
	goleak.VerifyTestMain(m)
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// collect is a sink that keeps every record with the subtask that wrote it.
type collect[T any] struct {
	mu   sync.Mutex
	recs []T
	subs []int
}

func (c *collect[T]) Name() string { return "Collect" }

func (c *collect[T]) CreateWriter(ctx weir.SinkContext) (weir.SinkWriter[T], error) {
	return &collectWriter[T]{c: c, sub: ctx.Subtask}, nil
}

func (c *collect[T]) sorted(cmp func(a, b T) int) []T {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := slices.Clone(c.recs)
	slices.SortFunc(out, cmp)
	return out
}

type collectWriter[T any] struct {
	c   *collect[T]
	sub int
	buf []T
}

func (w *collectWriter[T]) Write(v T) error { w.buf = append(w.buf, v); return nil }
func (w *collectWriter[T]) Flush() error {
	w.c.mu.Lock()
	defer w.c.mu.Unlock()
	w.c.recs = append(w.c.recs, w.buf...)
	for range w.buf {
		w.c.subs = append(w.c.subs, w.sub)
	}
	w.buf = nil
	return nil
}
func (w *collectWriter[T]) Close() error { return nil }

func cmpInt64(a, b int64) int { return int(a - b) }

func seq(n int64) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = int64(i)
	}
	return out
}

// Every partitioner delivers every record exactly once (broadcast: once per
// consumer subtask), across parallelism changes.
func TestPartitionersDeliverEverything(t *testing.T) {
	const n = 50_000
	for _, tc := range []struct {
		name     string
		route    func(*weir.DataStream[int64]) *weir.DataStream[int64]
		p1, p2   int
		multiple int
	}{
		{"forward", func(s *weir.DataStream[int64]) *weir.DataStream[int64] { return s.Forward() }, 3, 3, 1},
		{"forward unchained", func(s *weir.DataStream[int64]) *weir.DataStream[int64] { return s.Forward() }, 2, 2, 1},
		{"rebalance", func(s *weir.DataStream[int64]) *weir.DataStream[int64] { return s.Rebalance() }, 2, 3, 1},
		{"rescale", func(s *weir.DataStream[int64]) *weir.DataStream[int64] { return s.Rescale() }, 4, 2, 1},
		{"hash", func(s *weir.DataStream[int64]) *weir.DataStream[int64] {
			return weir.KeyBy(s, func(v int64) int64 { return v % 1000 }).Stream()
		}, 2, 4, 1},
		{"broadcast", func(s *weir.DataStream[int64]) *weir.DataStream[int64] { return s.Broadcast() }, 2, 3, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := weir.NewEnvironment(weir.Options{Parallelism: tc.p1, Logger: quiet, BufferSize: 1024})
			s := weir.FromSource(env, source.Sequence(0, n-1))
			m := weir.Map(tc.route(s), func(v int64) int64 { return v })
			if tc.name == "forward unchained" {
				m.DisableChaining()
			}
			m.SetParallelism(tc.p2)
			out := &collect[int64]{}
			weir.SinkTo(m, out)
			if err := env.Execute(context.Background(), tc.name); err != nil {
				t.Fatal(err)
			}
			got := out.sorted(cmpInt64)
			var want []int64
			for _, v := range seq(n) {
				for range tc.multiple {
					want = append(want, v)
				}
			}
			if !slices.Equal(got, want) {
				t.Fatalf("got %d records, want %d", len(got), len(want))
			}
		})
	}
}

// KeyBy sends every key to the one subtask that owns its key group.
func TestKeyByRoutesKeysToTheirKeyGroupOwner(t *testing.T) {
	const p, maxP = 3, 128
	env := weir.NewEnvironment(weir.Options{Parallelism: p, Logger: quiet})
	words := weir.FromSource(env, source.Generator(30_000, func(i int64) string { return fmt.Sprintf("w%d", i%997) }))
	tagged := weir.Process(weir.KeyBy(words, func(w string) string { return w }).Stream(),
		weir.ProcessFunc[string, codec.Pair[string, int]](func(ctx *weir.Context[codec.Pair[string, int]], w string) error {
			ctx.Emit(codec.Pair[string, int]{First: w, Second: ctx.Subtask()})
			return nil
		}))
	out := &collect[codec.Pair[string, int]]{}
	weir.SinkTo(tagged, out)
	if err := env.Execute(context.Background(), "keyby"); err != nil {
		t.Fatal(err)
	}
	owner := map[string]int{}
	for _, r := range out.recs {
		if o, ok := owner[r.First]; ok && o != r.Second {
			t.Fatalf("key %q processed on subtasks %d and %d", r.First, o, r.Second)
		}
		owner[r.First] = r.Second
		kg := keygroup.Of(codec.String().Append(nil, r.First), maxP)
		if want := keygroup.OperatorIndex(kg, maxP, p); want != r.Second {
			t.Fatalf("key %q (group %d) on subtask %d, owner is %d", r.First, kg, r.Second, want)
		}
	}
	if len(owner) != 997 || len(out.recs) != 30_000 {
		t.Fatalf("saw %d keys and %d records", len(owner), len(out.recs))
	}
}

func TestUnionAndFanOut(t *testing.T) {
	env := weir.NewEnvironment(weir.Options{Parallelism: 2, Logger: quiet})
	a := weir.FromSource(env, source.Sequence(0, 999))
	b := weir.FromSource(env, source.Sequence(1000, 1999)).SetParallelism(3)
	u := weir.Union(a, b)
	evens := &collect[int64]{}
	all := &collect[int64]{}
	weir.SinkTo(weir.Filter(u, func(v int64) bool { return v%2 == 0 }), evens)
	weir.SinkTo(u, all)
	if err := env.Execute(context.Background(), "union"); err != nil {
		t.Fatal(err)
	}
	if got := all.sorted(cmpInt64); !slices.Equal(got, seq(2000)) {
		t.Fatalf("union delivered %d records", len(got))
	}
	if got := evens.sorted(cmpInt64); len(got) != 1000 || got[0] != 0 || got[999] != 1998 {
		t.Fatalf("filter after union got %d records", len(got))
	}
}

// Records larger than a network buffer cross the network whole.
func TestLargeRecordsCrossTheNetwork(t *testing.T) {
	env := weir.NewEnvironment(weir.Options{Parallelism: 2, BufferSize: 512, Logger: quiet})
	s := weir.FromSource(env, source.Generator(200, func(i int64) string { return strings.Repeat("x", int(i)*20) }))
	lens := weir.Map(s.Rebalance(), func(s string) int64 { return int64(len(s)) })
	out := &collect[int64]{}
	weir.SinkTo(lens, out)
	if err := env.Execute(context.Background(), "large"); err != nil {
		t.Fatal(err)
	}
	got := out.sorted(cmpInt64)
	for i, l := range got {
		if l != int64(i)*20 {
			t.Fatalf("record %d has length %d, want %d", i, l, i*20)
		}
	}
}

func TestPlanShowsChains(t *testing.T) {
	env := weir.NewEnvironment(weir.Options{Parallelism: 2})
	s := weir.FromSource(env, source.Sequence(0, 9))
	m := weir.Map(s, func(v int64) int64 { return v }).Name("double")
	f := weir.Filter(m, func(v int64) bool { return true }).Name("keep")
	k := weir.Process(weir.KeyBy(f, func(v int64) int64 { return v }).Stream(), weir.ProcessFunc[int64, int64](
		func(ctx *weir.Context[int64], v int64) error { ctx.Emit(v); return nil })).Name("count")
	weir.SinkTo(k, &collect[int64]{})
	plan, err := env.Plan()
	if err != nil {
		t.Fatal(err)
	}
	want := "0: Source: Sequence(0..9) -> double -> keep (parallelism 2) -HASH-> 1\n1: count -> Sink: Collect (parallelism 2)\n"
	if plan != want {
		t.Fatalf("plan\n%s\nwant\n%s", plan, want)
	}
}

type event struct{ id int }

// Records without a codec may travel inside a chain but not over a network
// edge; every problem of a job is reported at once.
func TestInvalidJobReportsEveryProblem(t *testing.T) {
	env := weir.NewEnvironment(weir.Options{Parallelism: 2, Logger: quiet})
	s := weir.FromSource(env, source.Sequence(0, 9))
	ev := weir.Map(s, func(v int64) event { return event{int(v)} }).Name("to-event")
	chained := weir.Map(ev, func(e event) int64 { return int64(e.id) })
	weir.SinkTo(chained, &collect[int64]{})
	weir.SinkTo(weir.Map(ev.Rebalance(), func(e event) int64 { return 0 }), &collect[int64]{}).SetParallelism(0)
	err := env.Execute(context.Background(), "invalid")
	if !errors.Is(err, weir.ErrInvalidJob) {
		t.Fatalf("err = %v, want ErrInvalidJob", err)
	}
	for _, want := range []string{`"to-event" sends records of type weir_test.event`, "WithCodec", "parallelism 0"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}

	// The same job with a codec runs.
	env = weir.NewEnvironment(weir.Options{Parallelism: 2, Logger: quiet})
	s = weir.FromSource(env, source.Sequence(0, 9))
	ev = weir.Map(s, func(v int64) event { return event{int(v)} }).WithCodec(codec.Func(
		func(b []byte, e event) []byte { return codec.Int().Append(b, e.id) },
		func(b []byte) (event, int, error) { v, n, err := codec.Int().Decode(b); return event{v}, n, err }))
	out := &collect[int64]{}
	weir.SinkTo(weir.Map(ev.Rebalance(), func(e event) int64 { return int64(e.id) }), out)
	if err := env.Execute(context.Background(), "valid"); err != nil {
		t.Fatal(err)
	}
	if got := out.sorted(cmpInt64); !slices.Equal(got, seq(10)) {
		t.Fatalf("got %v", got)
	}
}

// endless emits increasing numbers until canceled, counting what it emitted.
type endless struct{ emitted *atomic.Int64 }

func (e endless) CreateReader(weir.SourceContext) (weir.SourceReader[int64], error) {
	return &endlessReader{e: e}, nil
}

type endlessReader struct {
	e    endless
	next int64
}

func (r *endlessReader) ReadBatch(out weir.Collector[int64]) (weir.ReadStatus, error) {
	for range 100 {
		out.Collect(r.next)
		r.next++
		r.e.emitted.Add(1)
	}
	return weir.MoreAvailable, nil
}
func (r *endlessReader) Close() error { return nil }

// Canceling the context stops every task, including ones blocked on
// backpressure; goleak (TestMain) checks no goroutine survives.
func TestCancellationStopsEverything(t *testing.T) {
	for _, blocked := range []bool{false, true} {
		t.Run(fmt.Sprintf("blocked=%v", blocked), func(t *testing.T) {
			env := weir.NewEnvironment(weir.Options{Parallelism: 2, Logger: quiet})
			var emitted atomic.Int64
			s := weir.FromSource(env, endless{&emitted})
			release := make(chan struct{})
			m := weir.Map(s.Rebalance(), func(v int64) int64 {
				if blocked {
					<-release // stuck: everything upstream backs up
				}
				return v
			})
			weir.SinkTo(m, &collect[int64]{})
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- env.Execute(ctx, "endless") }()
			for emitted.Load() < 10_000 {
				time.Sleep(time.Millisecond)
			}
			cancel()
			if blocked {
				close(release)
			}
			select {
			case err := <-done:
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("err = %v, want context.Canceled", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Execute did not return after cancel")
			}
		})
	}
}

var errBoom = errors.New("boom")

type failingSource struct{ openErr, readErr error }

func (f failingSource) CreateReader(weir.SourceContext) (weir.SourceReader[int64], error) {
	if f.openErr != nil {
		return nil, f.openErr
	}
	return &failingReader{err: f.readErr}, nil
}

type failingReader struct{ err error }

func (r *failingReader) ReadBatch(out weir.Collector[int64]) (weir.ReadStatus, error) {
	out.Collect(1)
	return weir.MoreAvailable, r.err
}
func (r *failingReader) Close() error { return nil }

type failingSink struct{}

func (failingSink) CreateWriter(ctx weir.SinkContext) (weir.SinkWriter[int64], error) {
	return &failingSinkWriter{sub: ctx.Subtask}, nil
}

type failingSinkWriter struct{ sub int }

func (w *failingSinkWriter) Write(v int64) error {
	if v == 7321 {
		return fmt.Errorf("write %d: %w", v, errBoom)
	}
	return nil
}
func (w *failingSinkWriter) Flush() error { return nil }
func (w *failingSinkWriter) Close() error { return nil }

// A failing user function fails the job with an error naming the operator,
// the subtask and the cause, whether it returned an error or panicked, and
// wherever it sits in a chain.
func TestFailureNamesOperatorAndSubtask(t *testing.T) {
	const n = 10_000
	// 7321 is in the second half of 0..9999, so on subtask 1 of 2.
	for _, tc := range []struct {
		name    string
		build   func(env *weir.Environment)
		op      string
		subtask int
		cause   string
	}{{
		name: "error from a chained process function",
		build: func(env *weir.Environment) {
			s := weir.FromSource(env, source.Sequence(0, n-1))
			p := weir.Process(s, weir.ProcessFunc[int64, int64](func(ctx *weir.Context[int64], v int64) error {
				if v == 7321 {
					return errBoom
				}
				ctx.Emit(v)
				return nil
			})).Name("validate")
			weir.SinkTo(weir.Map(p, func(v int64) int64 { return v }).Name("after"), &collect[int64]{})
		},
		op: "validate", subtask: 1, cause: "boom",
	}, {
		name: "panic in a map after a rebalance",
		build: func(env *weir.Environment) {
			s := weir.FromSource(env, source.Sequence(0, n-1))
			m := weir.Map(s.Forward(), func(v int64) int64 { return v }).Name("first")
			bad := weir.Map(m, func(v int64) int64 {
				if v == 7321 {
					var m map[string]int
					m["x"] = 1 // nil map write
				}
				return v
			}).Name("buggy").DisableChaining()
			weir.SinkTo(bad, &collect[int64]{})
		},
		op: "buggy", subtask: 1, cause: "panic: assignment to entry in nil map",
	}, {
		name: "panic in a flatmap that emits before panicking",
		build: func(env *weir.Environment) {
			s := weir.FromSource(env, source.Sequence(0, n-1))
			fm := weir.FlatMap(s, func(v int64, out weir.Collector[int64]) {
				out.Collect(v)
				if v == 7321 {
					panic(fmt.Sprintf("bad record %d", v))
				}
			}).Name("explode")
			weir.SinkTo(weir.Map(fm, func(v int64) int64 { return v }).Name("downstream"), &collect[int64]{})
		},
		op: "explode", subtask: 1, cause: "panic: bad record 7321",
	}, {
		name: "error from a sink",
		build: func(env *weir.Environment) {
			weir.SinkTo(weir.FromSource(env, source.Sequence(0, n-1)), failingSink{}).Name("store")
		},
		op: "store", subtask: 1, cause: "write 7321: boom",
	}, {
		name: "source read error",
		build: func(env *weir.Environment) {
			s := weir.FromSource(env, failingSource{readErr: errBoom})
			weir.SinkTo(s.Name("reader").SetParallelism(1), &collect[int64]{})
		},
		op: "reader", subtask: 0, cause: "boom",
	}, {
		name: "source open error",
		build: func(env *weir.Environment) {
			s := weir.FromSource(env, failingSource{openErr: errBoom})
			weir.SinkTo(s.Name("opener").SetParallelism(1), &collect[int64]{})
		},
		op: "opener", subtask: 0, cause: "open: boom",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			env := weir.NewEnvironment(weir.Options{Parallelism: 2, Logger: quiet})
			tc.build(env)
			err := env.Execute(context.Background(), "failing")
			var oe *weir.OperatorError
			if !errors.As(err, &oe) {
				t.Fatalf("err = %v, want an OperatorError", err)
			}
			if oe.Operator != tc.op || oe.Subtask != tc.subtask || oe.Parallelism != 2 && tc.subtask != 0 {
				t.Fatalf("error names %q subtask %d, want %q subtask %d: %v", oe.Operator, oe.Subtask, tc.op, tc.subtask, err)
			}
			if !strings.Contains(err.Error(), tc.cause) || !strings.Contains(err.Error(), fmt.Sprintf("(subtask %d/", tc.subtask+1)) {
				t.Fatalf("error %q does not name the cause %q and subtask", err, tc.cause)
			}
			if strings.Contains(tc.cause, "panic") {
				var pe *weir.PanicError
				if !errors.As(err, &pe) || len(pe.Stack) == 0 {
					t.Fatalf("panic not recovered into a PanicError with a stack: %v", err)
				}
			} else if !errors.Is(err, errBoom) {
				t.Fatalf("cause not wrapped: %v", err)
			}
		})
	}
}

// trickle emits one record per batch and then nothing for a while, like a
// quiet topic; records must still reach the sink promptly (buffer timeout
// while busy, flush when idle) instead of waiting for a full buffer.
type trickle struct {
	idle bool
}

func (tr trickle) CreateReader(weir.SourceContext) (weir.SourceReader[int64], error) {
	return &trickleReader{idle: tr.idle}, nil
}

type trickleReader struct {
	idle bool
	next int64
}

func (r *trickleReader) ReadBatch(out weir.Collector[int64]) (weir.ReadStatus, error) {
	if r.idle && r.next > 0 {
		return weir.NothingAvailable, nil
	}
	out.Collect(r.next)
	r.next++
	time.Sleep(time.Millisecond)
	return weir.MoreAvailable, nil
}
func (r *trickleReader) Close() error { return nil }

type firstSeen struct{ ch chan int64 }

func (f firstSeen) CreateWriter(weir.SinkContext) (weir.SinkWriter[int64], error) { return f, nil }
func (f firstSeen) Write(v int64) error {
	select {
	case f.ch <- v:
	default:
	}
	return nil
}
func (f firstSeen) Flush() error { return nil }
func (f firstSeen) Close() error { return nil }

func TestPartialBuffersAreFlushed(t *testing.T) {
	for _, idle := range []bool{true, false} {
		t.Run(fmt.Sprintf("idle=%v", idle), func(t *testing.T) {
			env := weir.NewEnvironment(weir.Options{Parallelism: 1, BufferTimeout: 20 * time.Millisecond, Logger: quiet})
			s := weir.FromSource(env, trickle{idle: idle})
			seen := firstSeen{ch: make(chan int64, 1)}
			weir.SinkTo(weir.Map(s.Rebalance(), func(v int64) int64 { return v }).SetParallelism(2), seen)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- env.Execute(ctx, "trickle") }()
			select {
			case <-seen.ch:
			case <-time.After(5 * time.Second):
				t.Error("a record in a partially filled buffer never reached the sink")
			}
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Fatal(err)
			}
		})
	}
}
