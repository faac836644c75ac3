package weir_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/sink"
	"github.com/weirstream/weir/source"
)

// spin busy-waits for d: time.Sleep is far coarser than the per-record
// costs these tests need to make a job backpressured.
func spin(d time.Duration) {
	for end := time.Now().Add(d); time.Now().Before(end); {
	}
}

// pack puts a partition (the source subtask) and a sequence number into
// one record.
func pack(part, seq int64) int64       { return part<<40 | seq }
func unpack(v int64) (part, seq int64) { return v >> 40, v & (1<<40 - 1) }

// violations collects what the order checks of a run saw go wrong.
type violations struct {
	mu    sync.Mutex
	n     int
	first []string
}

func (v *violations) add(format string, args ...any) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.n++
	if len(v.first) < 10 {
		v.first = append(v.first, fmt.Sprintf(format, args...))
	}
}

// orderCheck is a keyed function (key: the partition) that asserts the
// records of each partition arrive in order, each exactly once: every
// sequence number is its predecessor's plus one. The last one is keyed
// state, so after a restore the check goes on from the checkpoint, and a
// record replayed twice or lost from the in-flight data shows as a
// violation. It passes the record on after spinning, so the stage behind
// it can be slow.
type orderCheck struct {
	name  string
	v     *violations
	last  *weir.ValueState[int64]
	spin  time.Duration
	fail  func(subtask int, v int64) error // injects failures; nil: none
	close func(subtask int) error
	sub   int
}

func (c *orderCheck) Open(ctx *weir.KeyedContext[int64, int64]) error {
	c.sub = ctx.Subtask()
	var err error
	c.last, err = weir.GetValueState(ctx, weir.ValueStateDescriptor[int64]{Name: "last"})
	return err
}

func (c *orderCheck) ProcessElement(ctx *weir.KeyedContext[int64, int64], v int64) error {
	if c.fail != nil {
		if err := c.fail(ctx.Subtask(), v); err != nil {
			return err
		}
	}
	part, seq := unpack(v)
	if l, ok := c.last.Value(); ok {
		switch {
		case seq <= l:
			c.v.add("%s: partition %d: %d after %d (duplicate or out of order)", c.name, part, seq, l)
		case seq > l+1:
			c.v.add("%s: partition %d: %d after %d (records %d..%d lost)", c.name, part, seq, l, l+1, seq-1)
		}
	}
	c.last.Update(seq)
	if c.spin > 0 {
		spin(c.spin)
	}
	ctx.Emit(v)
	return nil
}

func (c *orderCheck) Close() error {
	if c.close != nil {
		return c.close(c.sub)
	}
	return nil
}

// unalignedRun is one run of the strict-order job.
type unalignedRun struct {
	n           int64
	parallelism int
	timeout     time.Duration // aligned-checkpoint-timeout; <0: unaligned off
	failures    string        // which failures to inject: "map", "snapshot", "recovery", "close"
	seed        uint64
}

// A port of Flink's UnalignedCheckpointITCase: each source split emits an
// increasing sequence (its partition); two keyed exchanges (by
// partition) lead to order checks, the second slow so that the job is
// backpressured and checkpoints persist in-flight data, then an
// exactly-once file sink. Failures are injected in the first check's
// function, in the synchronous snapshot phase, in the first record after a
// restore (the replay of the in-flight data) and at close. The checks
// assert no record out of order, duplicated or lost per partition; the
// committed output holds every record exactly once; and at least one
// completed checkpoint persisted in-flight data (otherwise the run proves
// nothing about unaligned checkpoints).
func TestUnalignedStrictOrder(t *testing.T) {
	ps := []int{1, 5, 20}
	if testing.Short() {
		ps = []int{1, 5}
	}
	for _, p := range ps {
		for _, f := range []string{"map", "snapshot", "recovery", "close"} {
			t.Run(fmt.Sprintf("p%d/%s", p, f), func(t *testing.T) {
				t.Parallel()
				n := int64(60_000)
				if p == 20 {
					n = 100_000 // 5,000 per split
				}
				runStrictOrder(t, unalignedRun{n: n, parallelism: p, timeout: 0, failures: f, seed: rand.Uint64()})
			})
		}
	}
}

func runStrictOrder(t *testing.T, r unalignedRun) {
	t.Logf("seed %d", r.seed)
	rng := rand.New(rand.NewPCG(r.seed, 0))
	dir := t.TempDir()
	v := &violations{}
	opts := weir.Options{Parallelism: r.parallelism, StateDir: filepath.Join(dir, "state"), Logger: quietLogger(t),
		// Small buffers and few credits: about a hundred records in
		// flight per channel, so that the sources stay backpressured for
		// the whole run instead of ending at once into the network's
		// memory. The overdraft covers a source batch (2,048 numbers), so
		// a source answers a trigger without waiting for backpressure.
		BufferSize: 1024, BuffersPerChannel: 1, FloatingBuffersPerGate: 2, OverdraftBuffers: 24,
		BufferTimeout: time.Millisecond,
		Checkpoint: weir.CheckpointOptions{Interval: 10 * time.Millisecond, Dir: filepath.Join(dir, "chk"),
			Unaligned: r.timeout >= 0},
		Restart: weir.RestartOptions{Type: "fixed-delay", FixedDelayAttempts: 10, FixedDelay: time.Millisecond}}
	var persisted, unaligned atomic.Int64
	opts.OnCheckpointComplete = func(c weir.CompletedCheckpoint) {
		if c.PersistedBytes > 0 {
			persisted.Add(1)
		}
		if c.Unaligned {
			unaligned.Add(1)
		}
	}
	var fired, forced atomic.Bool
	var opens atomic.Int64
	failAt := r.n/4 + rng.Int64N(r.n/2) // a record in the middle
	env := weir.NewEnvironment(opts)
	hooks := weir.TestHooks{}
	switch r.failures {
	case "snapshot":
		// The first snapshot after a checkpoint persisted in-flight
		// data, in a random subtask of any vertex.
		victim := rng.IntN(r.parallelism)
		hooks.Sync = func(vertex, subtask int, id int64) error {
			if subtask == victim && persisted.Load() > 0 && fired.CompareAndSwap(false, true) {
				return errors.New("injected failure in the synchronous phase")
			}
			return nil
		}
	}
	weir.SetTestHooks(env, hooks)

	src := weir.FromSource(env, source.Sequence(0, r.n-1)).UID("numbers")
	// The partition of a record is the source split it comes from (the
	// source's contiguous ranges, n*s/p..n*(s+1)/p): a restore may move a
	// split to another subtask, its order must hold all the same.
	p64 := int64(r.parallelism)
	tagged := weir.Process(src, weir.ProcessFunc[int64, int64](func(ctx *weir.Context[int64], i int64) error {
		spin(5 * time.Microsecond)
		part := i * p64 / r.n
		for r.n*(part+1)/p64 <= i {
			part++
		}
		for r.n*part/p64 > i {
			part--
		}
		ctx.Emit(pack(part, i))
		return nil
	})).UID("tag")
	first := &orderCheck{name: "check1", v: v}
	switch r.failures {
	case "map":
		first.fail = func(_ int, x int64) error {
			if _, seq := unpack(x); seq >= failAt && persisted.Load() > 0 && fired.CompareAndSwap(false, true) {
				return errors.New("injected failure in a user function")
			}
			return nil
		}
	case "recovery":
		// A first failure forces a restore; the second hits the first
		// record a restored subtask processes: the replay of the
		// in-flight data comes before anything else.
		first.fail = func(_ int, x int64) error {
			if _, seq := unpack(x); seq >= failAt && persisted.Load() > 0 && forced.CompareAndSwap(false, true) {
				return errors.New("injected failure to force a restore")
			}
			if forced.Load() && opens.Load() > int64(r.parallelism) && fired.CompareAndSwap(false, true) {
				return errors.New("injected failure while recovering")
			}
			return nil
		}
	case "close":
		first.close = func(int) error {
			if fired.CompareAndSwap(false, true) {
				return errors.New("injected failure at close")
			}
			return nil
		}
	}
	byPart := func(x int64) int64 { p, _ := unpack(x); return p }
	c1 := weir.KeyedProcess(weir.KeyBy(tagged, byPart), func() weir.KeyedProcessFunction[int64, int64, int64] {
		c := *first
		return &countingOpen{orderCheck: &c, opens: &opens}
	}).UID("check1")
	c2 := weir.KeyedProcess(weir.KeyBy(c1, byPart), func() weir.KeyedProcessFunction[int64, int64, int64] {
		return &orderCheck{name: "check2", v: v, spin: 20 * time.Microsecond}
	}).UID("check2")
	lines := weir.Map(c2, func(x int64) string {
		p, s := unpack(x)
		return strconv.FormatInt(p, 10) + "," + strconv.FormatInt(s, 10)
	}).UID("format")
	weir.SinkTo(lines, sink.Files(filepath.Join(dir, "out"), func(s string) string { return s })).UID("sink")

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := env.ExecuteResult(ctx, "strict-order")
	if err != nil {
		t.Fatal(err)
	}
	if !fired.Load() {
		t.Errorf("the %s failure was never injected", r.failures)
	}
	if res.Restarts < 1 {
		t.Errorf("no restart: the injected failure did not fail the job")
	}
	if v.n > 0 {
		t.Errorf("%d order violations, first: %s", v.n, strings.Join(v.first, "; "))
	}
	if r.timeout >= 0 && persisted.Load() == 0 {
		t.Errorf("no completed checkpoint persisted in-flight data (%d unaligned): the run proves nothing", unaligned.Load())
	}
	checkSequenceOutput(t, filepath.Join(dir, "out"), r.n)
	t.Logf("%d restarts, %d checkpoints completed, %d unaligned, %d with in-flight data", res.Restarts, len(res.Completed), unaligned.Load(), persisted.Load())
}

// countingOpen counts the opens of the wrapped check (one per subtask and
// attempt).
type countingOpen struct {
	*orderCheck
	opens *atomic.Int64
}

func (c *countingOpen) Open(ctx *weir.KeyedContext[int64, int64]) error {
	c.opens.Add(1)
	return c.orderCheck.Open(ctx)
}

// checkSequenceOutput verifies that the committed lines "part,seq" in dir
// hold every seq in 0..n-1 exactly once.
func checkSequenceOutput(t *testing.T, dir string, n int64) {
	t.Helper()
	lines, files := committedLines(t, dir)
	seen := make([]uint8, n)
	dups := 0
	for i, l := range lines {
		_, s, ok := strings.Cut(l, ",")
		seq, err := strconv.ParseInt(s, 10, 64)
		if !ok || err != nil || seq < 0 || seq >= n {
			t.Fatalf("%s: bad line %q", files[i], l)
		}
		if seen[seq]++; seen[seq] > 1 {
			dups++
		}
	}
	missing := 0
	for _, c := range seen {
		if c == 0 {
			missing++
		}
	}
	if dups > 0 || missing > 0 {
		t.Fatalf("committed output is not exactly once: %d lines for %d records, %d missing, %d duplicated", len(lines), n, missing, dups)
	}
}
