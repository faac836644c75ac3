package weir_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/checkpoint/metadata"
	"github.com/weirstream/weir/sink"
	"github.com/weirstream/weir/source"
)

// CoMap and CoFlatMap see every record of both inputs, each through its
// own function, at any parallelism.
func TestCoMapAndCoFlatMap(t *testing.T) {
	for _, p := range []int{1, 3} {
		t.Run(fmt.Sprintf("p%d", p), func(t *testing.T) {
			env := weir.NewEnvironment(weir.Options{Parallelism: p, Logger: quiet})
			nums := weir.FromSource(env, source.Sequence(0, 999))
			words := weir.FromSource(env, source.Collection("a", "b", "c")).SetParallelism(1)
			mapped := &collect[string]{}
			weir.SinkTo(weir.CoMap(weir.Connect(nums, words),
				func(i int64) string { return "n" + strconv.FormatInt(i, 10) },
				func(s string) string { return "w" + s }), mapped)
			flat := &collect[string]{}
			weir.SinkTo(weir.CoFlatMap(weir.Connect(words, nums),
				func(s string, out weir.Collector[string]) { out.Collect(s); out.Collect(s) },
				func(i int64, out weir.Collector[string]) {
					if i%100 == 0 {
						out.Collect(strconv.FormatInt(i, 10))
					}
				}), flat)
			if err := env.Execute(context.Background(), "co"); err != nil {
				t.Fatal(err)
			}
			var want, wantFlat []string
			for i := range 1000 {
				want = append(want, "n"+strconv.Itoa(i))
				if i%100 == 0 {
					wantFlat = append(wantFlat, strconv.Itoa(i))
				}
			}
			for _, w := range []string{"a", "b", "c"} {
				want = append(want, "w"+w)
				wantFlat = append(wantFlat, w, w)
			}
			slices.Sort(want)
			slices.Sort(wantFlat)
			if got := mapped.sorted(strings.Compare); !slices.Equal(got, want) {
				t.Errorf("CoMap: %d records, want %d", len(got), len(want))
			}
			if got := flat.sorted(strings.Compare); !slices.Equal(got, wantFlat) {
				t.Errorf("CoFlatMap: got %v, want %v", got, wantFlat)
			}
		})
	}
}

// sums is a keyed two-input function: per key it adds up the values of
// each input in keyed state, and both inputs register event-time timers
// (input 1 at 1000, input 2 at 2000) that report the sums.
type sums struct {
	s1, s2 *weir.ValueState[int64]
}

func (f *sums) Open(ctx *weir.KeyedContext[int64, string]) error {
	var err1, err2 error
	f.s1, err1 = weir.GetValueState(ctx, weir.ValueStateDescriptor[int64]{Name: "sum1"})
	f.s2, err2 = weir.GetValueState(ctx, weir.ValueStateDescriptor[int64]{Name: "sum2"})
	return errors.Join(err1, err2)
}

func (f *sums) ProcessElement1(ctx *weir.KeyedContext[int64, string], v int64) error {
	s, _ := f.s1.Value()
	f.s1.Update(s + v)
	ctx.RegisterEventTimeTimer(1000)
	return nil
}

func (f *sums) ProcessElement2(ctx *weir.KeyedContext[int64, string], v int64) error {
	s, _ := f.s2.Value()
	f.s2.Update(s + v)
	ctx.RegisterEventTimeTimer(2000)
	return nil
}

func (f *sums) OnTimer(ctx *weir.KeyedContext[int64, string], tm weir.Timer) error {
	a, _ := f.s1.Value()
	b, _ := f.s2.Value()
	ctx.Emit(fmt.Sprintf("%d@%d:%d,%d", ctx.CurrentKey(), tm.Timestamp, a, b))
	return nil
}

// KeyedCoProcess gives both inputs one keyed state and one set of timers
// per key: the sums each input adds up meet in the timers registered by
// either input, at any parallelism.
func TestKeyedCoProcessSharesStateAndTimers(t *testing.T) {
	const n1, n2, keys = 3000, 2000, 13
	want := map[int64][2]int64{}
	for i := range int64(n1) {
		s := want[i%keys]
		s[0] += i
		want[i%keys] = s
	}
	for i := range int64(n2) {
		s := want[(i*7)%keys]
		s[1] += i * 10
		want[(i*7)%keys] = s
	}
	var wantLines []string
	for k, s := range want {
		wantLines = append(wantLines, fmt.Sprintf("%d@1000:%d,%d", k, s[0], s[1]), fmt.Sprintf("%d@2000:%d,%d", k, s[0], s[1]))
	}
	slices.Sort(wantLines)
	for _, backend := range []string{weir.BackendHashMap, weir.BackendPebble} {
		for _, p := range []int{1, 3} {
			t.Run(fmt.Sprintf("%s/p%d", backend, p), func(t *testing.T) {
				env := weir.NewEnvironment(weir.Options{Parallelism: p, StateBackend: backend, StateDir: t.TempDir(), Logger: quiet})
				a := weir.FromSource(env, source.Sequence(0, n1-1))
				b := weir.Map(weir.FromSource(env, source.Sequence(0, n2-1)).SetParallelism(2), func(i int64) int64 { return i * 10 })
				ka := weir.KeyBy(a, func(i int64) int64 { return i % keys })
				kb := weir.KeyBy(b, func(i int64) int64 { return (i / 10 * 7) % keys })
				out := &collect[string]{}
				weir.SinkTo(weir.KeyedCoProcess(weir.ConnectKeyed(ka, kb), func() weir.KeyedCoProcessFunction[int64, int64, int64, string] {
					return &sums{}
				}), out)
				if err := env.Execute(context.Background(), "sums"); err != nil {
					t.Fatal(err)
				}
				if got := out.sorted(strings.Compare); !slices.Equal(got, wantLines) {
					t.Fatalf("got %d lines %v..., want %d %v...", len(got), got[:min(3, len(got))], len(wantLines), wantLines[:3])
				}
			})
		}
	}
}

// heldSource emits one record with timestamp 0, then nothing until
// release is closed, then one record with timestamp 5000.
type heldSource struct{ release chan struct{} }

func (h heldSource) CreateReader(weir.SourceContext) (weir.SourceReader[int64], error) {
	return &heldReader{release: h.release}, nil
}

type heldReader struct {
	release chan struct{}
	step    int
}

func (r *heldReader) ReadBatch(out weir.Collector[int64]) (weir.ReadStatus, error) {
	switch r.step {
	case 0:
		out.Collect(0)
	case 1:
		select {
		case <-r.release:
		default:
			return weir.NothingAvailable, nil
		}
		out.Collect(5000)
	default:
		return weir.EndOfInput, nil
	}
	r.step++
	return weir.MoreAvailable, nil
}

func (r *heldReader) Ready() <-chan struct{} { return r.release }
func (r *heldReader) Close() error           { return nil }

// timerProbe registers an event-time timer at each record's timestamp of
// input 1 and releases the held second input once it has seen them all;
// a timer that fires before that is a violation.
type timerProbe struct {
	n        int64
	seen     int64
	release  chan struct{}
	released *atomic.Bool
	early    *atomic.Int64
}

func (f *timerProbe) ProcessElement1(ctx *weir.KeyedContext[int64, int64], v int64) error {
	ctx.RegisterEventTimeTimer(v)
	if f.seen++; f.seen == f.n {
		f.released.Store(true)
		close(f.release)
	}
	return nil
}

func (f *timerProbe) ProcessElement2(*weir.KeyedContext[int64, int64], int64) error { return nil }

func (f *timerProbe) OnTimer(ctx *weir.KeyedContext[int64, int64], tm weir.Timer) error {
	if !f.released.Load() {
		f.early.Add(1)
	}
	ctx.Emit(tm.Timestamp)
	return nil
}

// The event time of a two-input operator is the minimum of its inputs':
// while the second input holds its watermark at timestamp 0, no timer
// fires, however far (even to its end) the first input has gone.
func TestTwoInputWatermarkIsTheMinimum(t *testing.T) {
	const n = 1000
	env := weir.NewEnvironment(weir.Options{Parallelism: 1, Logger: quiet, AutoWatermarkInterval: time.Millisecond})
	a := weir.AssignTimestampsAndWatermarks(weir.FromSource(env, source.Sequence(1, n)),
		weir.MonotonousTimestamps(func(i int64) int64 { return i }))
	release := make(chan struct{})
	b := weir.AssignTimestampsAndWatermarks(weir.FromSource(env, weir.Source[int64](heldSource{release: release})),
		weir.MonotonousTimestamps(func(i int64) int64 { return i }))
	var released atomic.Bool
	var early atomic.Int64
	out := &collect[int64]{}
	weir.SinkTo(weir.KeyedCoProcess(weir.ConnectKeyed(weir.KeyBy(a, func(int64) int64 { return 0 }), weir.KeyBy(b, func(int64) int64 { return 0 })),
		func() weir.KeyedCoProcessFunction[int64, int64, int64, int64] {
			return &timerProbe{n: n, release: release, released: &released, early: &early}
		}), out)
	if err := env.Execute(context.Background(), "min-watermark"); err != nil {
		t.Fatal(err)
	}
	if early.Load() != 0 {
		t.Fatalf("%d timers fired while the second input's watermark was at 0", early.Load())
	}
	if got := len(out.sorted(cmpInt64)); got != n {
		t.Fatalf("%d timers fired in the end, want %d", got, n)
	}
}

// twoSidedCounter is the counter job with two inputs: two sequences of n
// numbers, both keyed by i mod keys; per key and input, a running count
// in keyed state, one line "key,input,count" per record. fail fails the
// function once on record i of input 2.
func twoSidedCounter(env *weir.Environment, n, keys int64, out weir.Sink[string], fail func(i int64) bool) {
	side := func(uid string) *weir.KeyedStream[int64, int64] {
		nums := weir.FromSource(env, source.Sequence(0, n-1)).UID(uid)
		slow := weir.Map(nums, func(i int64) int64 {
			if i%100 == 0 {
				time.Sleep(500 * time.Microsecond)
			}
			return i
		}).UID(uid + "-slow")
		return weir.KeyBy(slow, func(i int64) int64 { return i % keys })
	}
	counts := weir.KeyedCoProcess(weir.ConnectKeyed(side("first"), side("second")), func() weir.KeyedCoProcessFunction[int64, int64, int64, string] {
		return &sideCounter{fail: fail}
	}).UID("count")
	weir.SinkTo(counts, out).UID("sink")
}

type sideCounter struct {
	c    [2]*weir.ValueState[int64]
	fail func(int64) bool
}

func (f *sideCounter) Open(ctx *weir.KeyedContext[int64, string]) error {
	var err1, err2 error
	f.c[0], err1 = weir.GetValueState(ctx, weir.ValueStateDescriptor[int64]{Name: "count1"})
	f.c[1], err2 = weir.GetValueState(ctx, weir.ValueStateDescriptor[int64]{Name: "count2"})
	return errors.Join(err1, err2)
}

func (f *sideCounter) count(ctx *weir.KeyedContext[int64, string], side int) {
	c, _ := f.c[side].Value()
	c++
	f.c[side].Update(c)
	ctx.Emit(fmt.Sprintf("%d,%d,%d", ctx.CurrentKey(), side+1, c))
}

func (f *sideCounter) ProcessElement1(ctx *weir.KeyedContext[int64, string], _ int64) error {
	f.count(ctx, 0)
	return nil
}

func (f *sideCounter) ProcessElement2(ctx *weir.KeyedContext[int64, string], i int64) error {
	if f.fail != nil && f.fail(i) {
		return errors.New("injected failure in input 2")
	}
	f.count(ctx, 1)
	return nil
}

// checkTwoSidedOutput checks the committed lines of twoSidedCounter: every
// key k and input s has the counts 1..n_k exactly once (exactlyOnce), or at
// least once.
func checkTwoSidedOutput(t *testing.T, dir string, n, keys int64, exactlyOnce bool) {
	t.Helper()
	seen := map[[3]int64]int{}
	lines, _ := committedLines(t, dir)
	for _, l := range lines {
		var k, s, c int64
		if _, err := fmt.Sscanf(l, "%d,%d,%d", &k, &s, &c); err != nil {
			t.Fatalf("bad line %q: %v", l, err)
		}
		seen[[3]int64{k, s, c}]++
	}
	missing, dups := 0, 0
	for k := range keys {
		nk := n / keys
		if k < n%keys {
			nk++
		}
		for s := int64(1); s <= 2; s++ {
			for c := int64(1); c <= nk; c++ {
				switch seen[[3]int64{k, s, c}] {
				case 0:
					missing++
				case 1:
				default:
					dups++
				}
			}
		}
	}
	if missing != 0 || (exactlyOnce && (dups != 0 || int64(len(lines)) != 2*n)) {
		t.Fatalf("%d lines for 2x%d records: %d (key, input, count) missing, %d duplicated", len(lines), n, missing, dups)
	}
}

// A keyed two-input job restarted after a failure in one input's function
// writes every running count of both inputs exactly once (aligned
// barriers over both inputs), and at least once in at-least-once mode.
func TestKeyedCoProcessExactlyOnceUnderFailures(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		backend     string
		incremental bool
		mode        string
	}{{weir.BackendHashMap, false, weir.CheckpointingExactlyOnce}, {weir.BackendPebble, true, weir.CheckpointingExactlyOnce},
		{weir.BackendHashMap, false, weir.CheckpointingAtLeastOnce}} {
		t.Run(fmt.Sprintf("%s/incremental=%v/%s", c.backend, c.incremental, c.mode), func(t *testing.T) {
			t.Parallel()
			seed := rand.Uint64()
			t.Logf("seed %d", seed)
			rng := rand.New(rand.NewPCG(seed, 0))
			const n, keys = 60_000, 31
			dir := t.TempDir()
			failAt := n/4 + rng.Int64N(n/2)
			var failed atomic.Bool
			opts := weir.Options{Parallelism: 2, StateBackend: c.backend, StateDir: filepath.Join(dir, "state"), Logger: quietLogger(t),
				Checkpoint: weir.CheckpointOptions{Interval: 10 * time.Millisecond, Dir: filepath.Join(dir, "chk"), Incremental: c.incremental,
					Mode: c.mode, MaxConcurrent: 2},
				Restart: weir.RestartOptions{Type: "fixed-delay", FixedDelayAttempts: 5, FixedDelay: time.Millisecond}}
			env := weir.NewEnvironment(opts)
			twoSidedCounter(env, n, keys, sink.Files(filepath.Join(dir, "out"), func(s string) string { return s }),
				func(i int64) bool { return i == failAt && failed.CompareAndSwap(false, true) })
			res, err := env.ExecuteResult(context.Background(), "two-sided")
			if err != nil {
				t.Fatal(err)
			}
			if !failed.Load() || res.Restarts != 1 {
				t.Fatalf("failure injected: %v, %d restarts; want exactly one", failed.Load(), res.Restarts)
			}
			if len(res.Completed) == 0 {
				t.Fatal("no checkpoint completed")
			}
			checkTwoSidedOutput(t, filepath.Join(dir, "out"), n, keys, c.mode == weir.CheckpointingExactlyOnce)
		})
	}
}

// Two-input keyed state is split by key group like one input's: a job
// stopped after a few checkpoints resumes at another parallelism, on the
// other backend, and the output is still exactly once.
func TestKeyedCoProcessRescales(t *testing.T) {
	t.Parallel()
	const n, keys = 60_000, 31
	dir := t.TempDir()
	run := func(p int, backend, restore string, stopAfter int) error {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		env := weir.NewEnvironment(weir.Options{Parallelism: p, StateBackend: backend, StateDir: filepath.Join(dir, "state"), Logger: quietLogger(t),
			Checkpoint: weir.CheckpointOptions{Interval: 10 * time.Millisecond, Dir: filepath.Join(dir, "chk"), RestorePath: restore}})
		var done atomic.Int64
		weir.SetTestHooks(env, weir.TestHooks{Completed: func(int64, *metadata.Checkpoint) {
			if stopAfter > 0 && done.Add(1) == int64(stopAfter) {
				cancel()
			}
		}})
		twoSidedCounter(env, n, keys, sink.Files(filepath.Join(dir, "out"), func(s string) string { return s }), nil)
		_, err := env.ExecuteResult(ctx, "two-sided")
		return err
	}
	if err := run(2, weir.BackendPebble, "", 3); !errors.Is(err, context.Canceled) {
		t.Fatalf("first run: %v, want it canceled after 3 checkpoints", err)
	}
	if err := run(3, weir.BackendHashMap, weir.RestoreLatest, 0); err != nil {
		t.Fatalf("resumed run: %v", err)
	}
	checkTwoSidedOutput(t, filepath.Join(dir, "out"), n, keys, true)
}

// rule is a broadcast record: key -> factor.
type rule struct{ Key, Factor int64 }

func ruleCodec() codec.Codec[rule] {
	return codec.Func(func(b []byte, r rule) []byte {
		return fmt.Appendf(b, "%d:%d;", r.Key, r.Factor)
	}, func(b []byte) (rule, int, error) {
		var r rule
		s, _, _ := strings.Cut(string(b), ";")
		_, err := fmt.Sscanf(s, "%d:%d", &r.Key, &r.Factor)
		return r, len(s) + 1, err
	})
}

// ruleApplier keeps the broadcast rules in broadcast state and, for each
// number, emits "i,rules,factor" with the number of rules it knows.
type ruleApplier struct {
	rules   *weir.BroadcastState[int64, int64]
	seen    *atomic.Int64 // broadcast records processed, all subtasks
	illegal bool
}

func (f *ruleApplier) Open(ctx *weir.BroadcastContext[string]) error {
	var err error
	f.rules, err = weir.GetBroadcastState(ctx, weir.MapStateDescriptor[int64, int64]{Name: "rules"})
	return err
}

func (f *ruleApplier) ProcessElement(ctx *weir.BroadcastContext[string], i int64) error {
	if f.illegal {
		f.rules.Put(i, i)
	}
	factor, _ := f.rules.Get(i % 10)
	ctx.Emit(fmt.Sprintf("%d,%d,%d", i, f.rules.Len(), factor))
	return nil
}

func (f *ruleApplier) ProcessBroadcastElement(_ *weir.BroadcastContext[string], r rule) error {
	f.rules.Put(r.Key, r.Factor)
	f.seen.Add(1)
	return nil
}

// resumeBroadcastJob runs a broadcast job twice, over numbers that never
// end and the bounded rules: at parallelism 2 until the second checkpoint
// completed after every subtask saw every rule, then resumed from it at
// parallelism 3 (the rule source has finished and sends nothing again)
// until check has seen enough lines. apply declares the operator under
// test; seen counts the broadcast records it processed. Each run fails the
// test unless it reached its stopping point within two minutes.
func resumeBroadcastJob(t *testing.T, rules []rule, enough int64,
	apply func(nums *weir.DataStream[int64], rs *weir.DataStream[rule], seen *atomic.Int64) *weir.DataStream[string],
	check func(line string)) {
	t.Helper()
	dir := t.TempDir()
	var checked atomic.Int64
	run := func(p int, restore string) error {
		ctx, cancel := context.WithTimeoutCause(context.Background(), 2*time.Minute, errors.New("the run never reached its stopping point"))
		defer cancel()
		env := weir.NewEnvironment(weir.Options{Parallelism: p, Logger: quietLogger(t),
			Checkpoint: weir.CheckpointOptions{Interval: 10 * time.Millisecond, Dir: filepath.Join(dir, "chk"), RestorePath: restore}})
		var seen, after atomic.Int64
		if restore == "" {
			weir.SetTestHooks(env, weir.TestHooks{Completed: func(int64, *metadata.Checkpoint) {
				if seen.Load() == int64(p*len(rules)) && after.Add(1) == 2 {
					cancel()
				}
			}})
		}
		nums := weir.FromSource(env, source.Sequence(0, 1<<40)).UID("numbers")
		rs := weir.FromSource(env, source.Collection(rules...)).SetParallelism(1).UID("rules").WithCodec(ruleCodec())
		weir.SinkTo(weir.Filter(apply(nums, rs, &seen).UID("apply"), func(l string) bool {
			if restore != "" {
				check(l)
				if checked.Add(1) >= enough {
					cancel()
				}
			}
			return true
		}), sink.Discard[string]())
		_, err := env.ExecuteResult(ctx, "broadcast")
		if cause := context.Cause(ctx); errors.Is(err, context.Canceled) && cause != context.Canceled {
			err = cause
		}
		return err
	}
	if err := run(2, ""); !errors.Is(err, context.Canceled) {
		t.Fatalf("first run: %v, want it canceled", err)
	}
	if err := run(3, weir.RestoreLatest); !errors.Is(err, context.Canceled) {
		t.Fatalf("resumed run: %v, want it canceled", err)
	}
	if checked.Load() < enough {
		t.Fatalf("the resumed run checked %d lines, want %d", checked.Load(), enough)
	}
}

// Broadcast state is checkpointed: a job stopped after every subtask has
// seen all broadcast rules resumes at another parallelism, and every
// subtask of the resumed run applies all the rules it restored (every line
// is checked as it passes).
func TestBroadcastStateRestoresAtAnotherParallelism(t *testing.T) {
	t.Parallel()
	const nRules = 10
	var rules []rule
	for k := range int64(nRules) {
		rules = append(rules, rule{Key: k, Factor: k + 100})
	}
	var bad atomic.Value
	resumeBroadcastJob(t, rules, 5000,
		func(nums *weir.DataStream[int64], rs *weir.DataStream[rule], seen *atomic.Int64) *weir.DataStream[string] {
			return weir.BroadcastProcess(nums, rs, func() weir.BroadcastProcessFunction[int64, rule, string] {
				return &ruleApplier{seen: seen}
			})
		},
		func(l string) {
			var i, known, factor int64
			if _, err := fmt.Sscanf(l, "%d,%d,%d", &i, &known, &factor); err != nil || known != nRules || factor != i%10+100 {
				bad.CompareAndSwap(nil, l)
			}
		})
	if l := bad.Load(); l != nil {
		t.Fatalf("resumed run: %q: the subtask did not know all %d rules (factor = key + 100)", l, nRules)
	}
}

// ProcessElement may only read broadcast state: a Put there fails the job
// with an error that says where to change it.
func TestBroadcastStateIsReadOnlyForElements(t *testing.T) {
	env := weir.NewEnvironment(weir.Options{Parallelism: 1, Logger: quiet})
	nums := weir.FromSource(env, source.Sequence(0, 9))
	rs := weir.FromSource(env, source.Collection[int64](1))
	var seen atomic.Int64
	weir.SinkTo(weir.BroadcastProcess(nums, weir.Map(rs, func(k int64) rule { return rule{Key: k} }).WithCodec(ruleCodec()),
		func() weir.BroadcastProcessFunction[int64, rule, string] {
			return &ruleApplier{seen: &seen, illegal: true}
		}), &collect[string]{})
	err := env.Execute(context.Background(), "read-only")
	if err == nil || !strings.Contains(err.Error(), "read-only") || !strings.Contains(err.Error(), "ProcessBroadcastElement") {
		t.Fatalf("got %v, want a read-only broadcast state error", err)
	}
}

// event is a record with a key and an event time, for the joins.
type joinEvent struct{ Key, TS, ID int64 }

func joinEventCodec() codec.Codec[joinEvent] {
	return codec.Func(func(b []byte, e joinEvent) []byte {
		return fmt.Appendf(b, "%d %d %d;", e.Key, e.TS, e.ID)
	}, func(b []byte) (joinEvent, int, error) {
		var e joinEvent
		s, _, _ := strings.Cut(string(b), ";")
		_, err := fmt.Sscanf(s, "%d %d %d", &e.Key, &e.TS, &e.ID)
		return e, len(s) + 1, err
	})
}

// joinInputs declares the two timestamped inputs of the join tests: n1
// events with key i mod 7 every 3 ms and n2 with key j mod 5 every 2 ms.
func joinInputs(env *weir.Environment, n1, n2 int64) (a, b *weir.KeyedStream[int64, joinEvent]) {
	gen := func(n, keys, step int64) *weir.KeyedStream[int64, joinEvent] {
		s := weir.FromSource(env, source.Generator(n, func(i int64) joinEvent { return joinEvent{Key: i % keys, TS: i * step, ID: i} })).
			WithCodec(joinEventCodec())
		s = weir.AssignTimestampsAndWatermarks(s, weir.MonotonousTimestamps(func(e joinEvent) int64 { return e.TS })).WithCodec(joinEventCodec())
		return weir.KeyBy(s, func(e joinEvent) int64 { return e.Key })
	}
	return gen(n1, 7, 3), gen(n2, 5, 2)
}

func joinEventsOf(n, keys, step int64) []joinEvent {
	out := make([]joinEvent, n)
	for i := range n {
		out[i] = joinEvent{Key: i % keys, TS: i * step, ID: i}
	}
	return out
}

// A window join pairs the records of both inputs with equal keys in the
// same tumbling window, and a co-group sees each window's two groups, as a
// brute-force evaluation says, at parallelism 1 and 3.
func TestWindowJoinMatchesReference(t *testing.T) {
	t.Parallel()
	const n1, n2, size = 3000, 4000, 50
	var want, wantGroups []string
	as, bs := joinEventsOf(n1, 7, 3), joinEventsOf(n2, 5, 2)
	groups := map[[2]int64][2]int{}
	for _, a := range as {
		for _, b := range bs {
			if a.Key == b.Key && a.TS/size == b.TS/size {
				want = append(want, fmt.Sprintf("%d@%d:%d-%d", a.Key, a.TS/size*size, a.ID, b.ID))
			}
		}
		g := groups[[2]int64{a.Key, a.TS / size}]
		g[0]++
		groups[[2]int64{a.Key, a.TS / size}] = g
	}
	for _, b := range bs {
		g := groups[[2]int64{b.Key, b.TS / size}]
		g[1]++
		groups[[2]int64{b.Key, b.TS / size}] = g
	}
	for k, g := range groups {
		wantGroups = append(wantGroups, fmt.Sprintf("%d@%d:%d,%d", k[0], k[1]*size, g[0], g[1]))
	}
	slices.Sort(want)
	slices.Sort(wantGroups)
	for _, p := range []int{1, 3} {
		t.Run(fmt.Sprintf("p%d", p), func(t *testing.T) {
			t.Parallel()
			env := weir.NewEnvironment(weir.Options{Parallelism: p, Logger: quiet})
			a, b := joinInputs(env, n1, n2)
			w := weir.Join(a, b).Window(weir.TumblingEventTimeWindows(size * time.Millisecond))
			joined, cogrouped := &collect[string]{}, &collect[string]{}
			weir.SinkTo(weir.JoinApply(w, func(k int64, win weir.TimeWindow, x, y joinEvent, out weir.Collector[string]) {
				out.Collect(fmt.Sprintf("%d@%d:%d-%d", k, win.Start, x.ID, y.ID))
			}), joined)
			a2, b2 := joinInputs(env, n1, n2)
			weir.SinkTo(weir.CoGroupApply(weir.Join(a2, b2).Window(weir.TumblingEventTimeWindows(size*time.Millisecond)),
				func(k int64, win weir.TimeWindow, xs, ys []joinEvent, out weir.Collector[string]) {
					out.Collect(fmt.Sprintf("%d@%d:%d,%d", k, win.Start, len(xs), len(ys)))
				}), cogrouped)
			if err := env.Execute(context.Background(), "window-join"); err != nil {
				t.Fatal(err)
			}
			if got := joined.sorted(strings.Compare); !slices.Equal(got, want) {
				t.Fatalf("join: %d pairs, want %d", len(got), len(want))
			}
			if got := cogrouped.sorted(strings.Compare); !slices.Equal(got, wantGroups) {
				t.Fatalf("co-group: %d groups, want %d", len(got), len(wantGroups))
			}
		})
	}
}

// An interval join pairs each record a of the first input with the
// records b of the second with the same key and b.ts in [a.ts-6, a.ts+4],
// as a brute-force evaluation says; results carry the larger timestamp;
// and once the final watermark has passed, the final checkpoint holds no
// buffered record and no timer of the join.
func TestIntervalJoinMatchesReferenceAndCleansUp(t *testing.T) {
	t.Parallel()
	const n1, n2, lower, upper = 3000, 4000, -6, 4
	var want []string
	for _, a := range joinEventsOf(n1, 7, 3) {
		for _, b := range joinEventsOf(n2, 5, 2) {
			if a.Key == b.Key && b.TS >= a.TS+lower && b.TS <= a.TS+upper {
				want = append(want, fmt.Sprintf("%d-%d@%d", a.ID, b.ID, max(a.TS, b.TS)))
			}
		}
	}
	slices.Sort(want)
	for _, p := range []int{1, 3} {
		t.Run(fmt.Sprintf("p%d", p), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			env := weir.NewEnvironment(weir.Options{Parallelism: p, Logger: quiet,
				Checkpoint: weir.CheckpointOptions{Interval: time.Hour, Dir: dir}})
			var final *metadata.Checkpoint
			weir.SetTestHooks(env, weir.TestHooks{Completed: func(_ int64, cp *metadata.Checkpoint) { final = cp }})
			a, b := joinInputs(env, n1, n2)
			joined := weir.IntervalJoin(a, b, lower*time.Millisecond, upper*time.Millisecond, func(x, y joinEvent, out weir.Collector[string]) {
				out.Collect(fmt.Sprintf("%d-%d", x.ID, y.ID))
			}).UID("join")
			stamped := weir.Process(joined, weir.ProcessFunc[string, string](func(ctx *weir.Context[string], s string) error {
				ts, _ := ctx.Timestamp()
				ctx.Emit(s + "@" + strconv.FormatInt(ts, 10))
				return nil
			}))
			out := &collect[string]{}
			weir.SinkTo(stamped, out)
			if err := env.Execute(context.Background(), "interval-join"); err != nil {
				t.Fatal(err)
			}
			if got := out.sorted(strings.Compare); !slices.Equal(got, want) {
				t.Fatalf("%d pairs, want %d; first %v, want %v", len(got), len(want), got[:min(3, len(got))], want[:3])
			}
			if final == nil {
				t.Fatal("no final checkpoint")
			}
			checkJoinStateEmpty(t, final, "join")
		})
	}
}

// checkJoinStateEmpty fails unless operator uid's subtasks in cp have no
// timers and at most a near-empty keyed state file (state names and the
// key-group index, no entries: thousands of records buffered would take
// tens of kilobytes).
func checkJoinStateEmpty(t *testing.T, cp *metadata.Checkpoint, uid string) {
	t.Helper()
	found := false
	for _, op := range cp.Operators {
		if op.UID != uid {
			continue
		}
		found = true
		for _, st := range op.Subtasks {
			if st.Timers != nil {
				t.Errorf("subtask %d still has timers (%d bytes) after the final watermark", st.Index, st.Timers.Size)
			}
			// An empty state file still indexes its key groups.
			if limit := int64(8*(st.KeyGroupEnd-st.KeyGroupStart+1) + 256); st.Keyed != nil && st.Keyed.Size > limit {
				t.Errorf("subtask %d still has %d bytes of keyed state after the final watermark", st.Index, st.Keyed.Size)
			}
			if st.Keyed != nil {
				t.Logf("subtask %d: %d bytes of keyed state", st.Index, st.Keyed.Size)
			}
		}
	}
	if !found {
		t.Fatalf("checkpoint %d has no operator %q", cp.ID, uid)
	}
}

// The window join and the interval join restarted after a failure in the
// join function (checkpoints every 10 ms, two at a time) commit exactly
// the pairs a brute-force evaluation gives: nothing lost, nothing twice.
func TestJoinsExactlyOnceUnderFailures(t *testing.T) {
	t.Parallel()
	const n1, n2, size, lower, upper = 6000, 8000, 50, -6, 4
	as, bs := joinEventsOf(n1, 7, 3), joinEventsOf(n2, 5, 2)
	// Every pair with equal keys is tried, as in the tests above, but only
	// those: 7 million instead of 48 (seconds under the race detector).
	bsByKey := map[int64][]joinEvent{}
	for _, b := range bs {
		bsByKey[b.Key] = append(bsByKey[b.Key], b)
	}
	for _, kind := range []string{"window", "interval"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			var want []string
			for _, a := range as {
				for _, b := range bsByKey[a.Key] {
					if a.Key == b.Key && (kind == "window" && a.TS/size == b.TS/size ||
						kind == "interval" && b.TS >= a.TS+lower && b.TS <= a.TS+upper) {
						want = append(want, fmt.Sprintf("%d-%d", a.ID, b.ID))
					}
				}
			}
			slices.Sort(want)
			seed := rand.Uint64()
			t.Logf("seed %d", seed)
			failAt := int64(len(want)/4) + rand.New(rand.NewPCG(seed, 0)).Int64N(int64(len(want)/2))
			dir := t.TempDir()
			env := weir.NewEnvironment(weir.Options{Parallelism: 2, Logger: quietLogger(t),
				Checkpoint: weir.CheckpointOptions{Interval: 10 * time.Millisecond, Dir: filepath.Join(dir, "chk"), MaxConcurrent: 2},
				Restart:    weir.RestartOptions{Type: "fixed-delay", FixedDelayAttempts: 3, FixedDelay: time.Millisecond}})
			a, b := joinInputs(env, n1, n2)
			var pairs atomic.Int64
			var failed atomic.Bool
			emit := func(x, y joinEvent, out weir.Collector[string]) {
				if pairs.Add(1) == failAt && failed.CompareAndSwap(false, true) {
					panic("injected failure in the join function")
				}
				if x.ID%20 == 0 {
					time.Sleep(100 * time.Microsecond) // let checkpoints happen meanwhile
				}
				out.Collect(fmt.Sprintf("%d-%d", x.ID, y.ID))
			}
			var joined *weir.DataStream[string]
			if kind == "window" {
				joined = weir.JoinApply(weir.Join(a, b).Window(weir.TumblingEventTimeWindows(size*time.Millisecond)),
					func(_ int64, _ weir.TimeWindow, x, y joinEvent, out weir.Collector[string]) { emit(x, y, out) })
			} else {
				joined = weir.IntervalJoin(a, b, lower*time.Millisecond, upper*time.Millisecond, emit)
			}
			weir.SinkTo(joined.UID("join"), sink.Files(filepath.Join(dir, "out"), func(s string) string { return s }))
			res, err := env.ExecuteResult(context.Background(), kind+"-join")
			if err != nil {
				t.Fatal(err)
			}
			if !failed.Load() || res.Restarts != 1 {
				t.Fatalf("failure injected: %v, %d restarts; want exactly one", failed.Load(), res.Restarts)
			}
			got, _ := committedLines(t, filepath.Join(dir, "out"))
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Fatalf("%d pairs committed, want %d (%d checkpoints completed)", len(got), len(want), len(res.Completed))
			}
			t.Logf("%d pairs, %d checkpoints completed", len(got), len(res.Completed))
		})
	}
}

// keyedRules counts the records of each key in keyed state and reads the
// broadcast rules: "key,count,rules known" per record.
type keyedRules struct {
	rules   *weir.BroadcastState[int64, int64]
	count   *weir.ValueState[int64]
	seen    *atomic.Int64
	illegal bool
}

func (f *keyedRules) Open(ctx *weir.KeyedContext[int64, string], bctx *weir.BroadcastContext[string]) error {
	var err1, err2 error
	f.rules, err1 = weir.GetBroadcastState(bctx, weir.MapStateDescriptor[int64, int64]{Name: "rules"})
	f.count, err2 = weir.GetValueState(ctx, weir.ValueStateDescriptor[int64]{Name: "count"})
	return errors.Join(err1, err2)
}

func (f *keyedRules) ProcessElement(ctx *weir.KeyedContext[int64, string], i int64) error {
	if f.illegal {
		f.rules.Remove(i)
	}
	c, _ := f.count.Value()
	c++
	f.count.Update(c)
	ctx.Emit(fmt.Sprintf("%d,%d,%d", ctx.CurrentKey(), c, f.rules.Len()))
	return nil
}

func (f *keyedRules) ProcessBroadcastElement(_ *weir.BroadcastContext[string], r rule) error {
	f.rules.Put(r.Key, r.Factor)
	f.seen.Add(1)
	return nil
}

// KeyedBroadcastProcess checkpoints both kinds of state: a job stopped
// after every subtask saw every rule resumes at another parallelism, and
// there every key's count goes on from its restored value (never starting
// at 1 again, always rising) while every subtask knows every rule.
func TestKeyedBroadcastStateRestoresAtAnotherParallelism(t *testing.T) {
	t.Parallel()
	const nRules, keys = 10, 7
	var rules []rule
	for k := range int64(nRules) {
		rules = append(rules, rule{Key: k, Factor: k})
	}
	var mu sync.Mutex
	last := map[int64]int64{}
	var bad string
	resumeBroadcastJob(t, rules, 5000,
		func(nums *weir.DataStream[int64], rs *weir.DataStream[rule], seen *atomic.Int64) *weir.DataStream[string] {
			return weir.KeyedBroadcastProcess(weir.KeyBy(nums, func(i int64) int64 { return i % keys }), rs,
				func() weir.KeyedBroadcastProcessFunction[int64, int64, rule, string] { return &keyedRules{seen: seen} })
		},
		func(l string) {
			var k, c, known int64
			_, err := fmt.Sscanf(l, "%d,%d,%d", &k, &c, &known)
			mu.Lock()
			defer mu.Unlock()
			switch prev, ok := last[k]; {
			case bad != "":
			case err != nil || known != nRules:
				bad = l + ": rules not restored"
			case !ok && c == 1:
				bad = l + ": the key's count started over"
			case ok && c != prev+1:
				bad = fmt.Sprintf("%s: count %d after %d", l, c, prev)
			}
			last[k] = c
		})
	mu.Lock()
	defer mu.Unlock()
	if bad != "" {
		t.Fatalf("resumed run: %s", bad)
	}
	if len(last) != keys {
		t.Fatalf("the resumed run saw %d keys, want %d", len(last), keys)
	}
}

// In a keyed broadcast function too, ProcessElement may only read
// broadcast state.
func TestKeyedBroadcastStateIsReadOnlyForElements(t *testing.T) {
	env := weir.NewEnvironment(weir.Options{Parallelism: 1, Logger: quiet})
	nums := weir.KeyBy(weir.FromSource(env, source.Sequence(0, 9)), func(i int64) int64 { return i })
	rs := weir.FromSource(env, source.Collection(rule{Key: 1})).WithCodec(ruleCodec())
	var seen atomic.Int64
	weir.SinkTo(weir.KeyedBroadcastProcess(nums, rs, func() weir.KeyedBroadcastProcessFunction[int64, int64, rule, string] {
		return &keyedRules{seen: &seen, illegal: true}
	}), &collect[string]{})
	err := env.Execute(context.Background(), "read-only")
	if err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Fatalf("got %v, want a read-only broadcast state error", err)
	}
}
