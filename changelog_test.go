package weir_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/internal/checkpoint/metadata"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/checkpoint/storage/blobtest"
	"github.com/weirstream/weir/internal/runner"
	"github.com/weirstream/weir/sink"
	"github.com/weirstream/weir/source"
)

// Tests of the changelog state backend (FLIP-158) driven through whole
// jobs: restores from checkpoints with and without materializations, on
// every backend, failed materializations, switching the changelog on and
// off between runs, no orphaned or dangling files in shared/, and
// failures during log uploads and materializations.

// clEnv is one test's checkpoint directory and output, shared by its runs,
// and what the per-checkpoint file checks found.
type clEnv struct {
	t     *testing.T
	dir   string
	job   string
	store *storage.Storage

	mu         sync.Mutex
	ever       map[string]bool // shared files some completed checkpoint referenced
	violations []string
	unknownRun int // checkpoints whose run could not be told from their files
}

func newCLEnv(t *testing.T, job string) *clEnv {
	t.Helper()
	dir := t.TempDir()
	store, err := storage.Open(context.Background(), filepath.Join(dir, "chk"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return &clEnv{t: t, dir: dir, job: job, store: store, ever: map[string]bool{}}
}

func (e *clEnv) out() string { return filepath.Join(e.dir, "out") }

// clCfg is one run of a test job.
type clCfg struct {
	p           int
	backend     string
	incremental bool
	changelog   weir.ChangelogOptions
	restore     string
	n, keys     int64
	interval    time.Duration
	retained    int
	// concurrent is execution.checkpointing.max-concurrent-checkpoints and
	// tolerable execution.checkpointing.tolerable-failed-checkpoints.
	concurrent, tolerable int
	restart               weir.RestartOptions
	// stop cancels the run once it returns true for a completed checkpoint.
	stop func(cp *metadata.Checkpoint) bool
	// throttle slows the job down (1ms per record, see slowed) while it
	// returns true, so that the run does not end before stop.
	throttle func(i int64) bool
	hooks    weir.TestHooks
	// onStatus sees every completed checkpoint's changelog figures.
	onComplete func(weir.CompletedCheckpoint)
	// build declares the job; nil: the counter job.
	build   func(env *weir.Environment, c *clCfg, out weir.Sink[string])
	timeout time.Duration
}

type clResult struct {
	res runner.Result
	err error
	cps []*metadata.Checkpoint // completed by this run, in order
}

var clRunName = regexp.MustCompile(`^op-.+-\d+-([0-9a-f]+)-(?:log-\d+\.log|m\d+[.-])`)

// runOf is the run (RunID) that wrote cp's changelog: its log segments, or
// its materialization, are always the current run's.
func runOf(cp *metadata.Checkpoint) string {
	for _, op := range cp.Operators {
		for _, st := range op.Subtasks {
			if st.Changelog == nil {
				continue
			}
			for _, s := range st.Changelog.Segments {
				if m := clRunName.FindStringSubmatch(path.Base(s.File.Path)); m != nil {
					return m[1]
				}
			}
		}
	}
	for _, op := range cp.Operators {
		for _, st := range op.Subtasks {
			if st.Changelog == nil || st.Changelog.Materialization == 0 {
				continue
			}
			for _, h := range []*storage.FileHandle{st.Keyed, st.Timers} {
				if h == nil {
					continue
				}
				if m := clRunName.FindStringSubmatch(path.Base(h.Path)); m != nil {
					return m[1]
				}
			}
		}
	}
	return ""
}

// retainedRefs reads the complete checkpoints on storage and returns the
// shared files they reference. A checkpoint deleted while it is read is
// skipped.
func (e *clEnv) retainedRefs() (map[string]bool, error) {
	ctx := context.Background()
	entries, err := e.store.ListCheckpoints(ctx, e.job)
	if err != nil {
		return nil, err
	}
	refs := map[string]bool{}
	for _, en := range entries {
		if !en.Complete {
			continue
		}
		payload, err := e.store.ReadMetadata(ctx, e.job, en.ID)
		if err != nil {
			continue
		}
		cp, err := metadata.Decode(payload)
		if err != nil {
			return nil, fmt.Errorf("checkpoint %d: %w", en.ID, err)
		}
		for _, h := range cp.SharedFiles() {
			refs[h.Path] = true
		}
	}
	return refs, nil
}

func (e *clEnv) violate(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.violations) < 20 {
		e.violations = append(e.violations, fmt.Sprintf(format, args...))
	}
}

// checkLive runs when checkpoint cp completed (on the runner's
// goroutine): every file it references exists, and every file under
// shared/ that no retained checkpoint references is either the live tail
// of the current run (log segments uploaded since, a materialization in
// progress: named with the run's id) or was referenced by an earlier
// completed checkpoint (subsumed, deleted in the background).
func (e *clEnv) checkLive(cp *metadata.Checkpoint) {
	ctx := context.Background()
	objs, err := e.store.ListShared(ctx, e.job)
	if err != nil {
		e.violate("list shared: %v", err)
		return
	}
	present := map[string]bool{}
	for _, o := range objs {
		present[o.Key] = true
	}
	e.mu.Lock()
	for _, h := range cp.SharedFiles() {
		e.ever[h.Path] = true
	}
	e.mu.Unlock()
	for _, h := range cp.SharedFiles() {
		if !present[h.Path] {
			e.violate("checkpoint %d references missing %s", cp.ID, h.Path)
		}
	}
	refs, err := e.retainedRefs()
	if err != nil {
		e.violate("read checkpoints: %v", err)
		return
	}
	run := runOf(cp)
	if run == "" {
		e.mu.Lock()
		e.unknownRun++
		e.mu.Unlock()
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for p := range present {
		if refs[p] || e.ever[p] || strings.Contains(path.Base(p), "-"+run+"-") {
			continue
		}
		if len(e.violations) < 20 {
			e.violations = append(e.violations, fmt.Sprintf("at checkpoint %d (run %s): %s is referenced by no checkpoint and is not the current run's", cp.ID, run, p))
		}
	}
}

// checkFiles asserts, between runs, that shared/ holds exactly the files
// the retained checkpoints reference, and that the per-checkpoint checks
// found nothing.
func (e *clEnv) checkFiles(when string) {
	e.t.Helper()
	e.mu.Lock()
	v := append([]string(nil), e.violations...)
	e.mu.Unlock()
	if len(v) > 0 {
		e.t.Errorf("%s: file checks at completed checkpoints failed:\n%s", when, strings.Join(v, "\n"))
	}
	objs, err := e.store.ListShared(context.Background(), e.job)
	if err != nil {
		e.t.Fatal(err)
	}
	refs, err := e.retainedRefs()
	if err != nil {
		e.t.Fatal(err)
	}
	present := map[string]bool{}
	for _, o := range objs {
		present[o.Key] = true
		if !refs[o.Key] {
			e.t.Errorf("%s: orphan %s: no retained checkpoint references it (referenced: %v)", when, o.Key, keys(refs))
		}
	}
	for p := range refs {
		if !present[p] {
			e.t.Errorf("%s: %s is referenced by a retained checkpoint but missing", when, p)
		}
	}
}

// latest returns the newest complete checkpoint on storage.
func (e *clEnv) latest() *metadata.Checkpoint {
	e.t.Helper()
	entries, err := e.store.ListCheckpoints(context.Background(), e.job)
	if err != nil {
		e.t.Fatal(err)
	}
	var id int64 = -1
	for _, en := range entries {
		if en.Complete && en.ID > id {
			id = en.ID
		}
	}
	if id < 0 {
		e.t.Fatal("no complete checkpoint")
	}
	payload, err := e.store.ReadMetadata(context.Background(), e.job, id)
	if err != nil {
		e.t.Fatal(err)
	}
	cp, err := metadata.Decode(payload)
	if err != nil {
		e.t.Fatal(err)
	}
	return cp
}

// subtasksOf returns the subtasks of operator uid in cp.
func subtasksOf(cp *metadata.Checkpoint, uid string) []metadata.Subtask {
	for _, op := range cp.Operators {
		if op.UID == uid {
			return op.Subtasks
		}
	}
	return nil
}

// minMaterialization is the smallest materialization the subtasks of uid
// build on (-1 if one has no changelog).
func minMaterialization(cp *metadata.Checkpoint, uid string) int64 {
	sts := subtasksOf(cp, uid)
	if len(sts) == 0 {
		return -1
	}
	m := int64(math.MaxInt64)
	for _, st := range sts {
		if st.Changelog == nil {
			return -1
		}
		m = min(m, st.Changelog.Materialization)
	}
	return m
}

// run executes one run of the test's job.
func (e *clEnv) run(c clCfg) clResult {
	e.t.Helper()
	if c.interval == 0 {
		c.interval = 50 * time.Millisecond
	}
	if c.timeout == 0 {
		// Only a hang detector: a run takes seconds alone, but its tests
		// run beside the package's other parallel tests.
		c.timeout = 2 * time.Minute
	}
	if c.restart.Type == "" {
		c.restart = weir.RestartOptions{Type: "none"}
	}
	opts := weir.Options{Parallelism: c.p, StateBackend: c.backend, StateDir: filepath.Join(e.dir, "state"),
		Logger: quietLogger(e.t), Changelog: c.changelog, Restart: c.restart, OnCheckpointComplete: c.onComplete,
		Checkpoint: weir.CheckpointOptions{Interval: c.interval, Dir: filepath.Join(e.dir, "chk"), Incremental: c.incremental,
			NumRetained: c.retained, RestorePath: c.restore, MaxConcurrent: c.concurrent, TolerableFailures: c.tolerable}}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	var (
		mu  sync.Mutex
		cps []*metadata.Checkpoint
	)
	hooks := c.hooks
	userCompleted := hooks.Completed
	hooks.Completed = func(id int64, cp *metadata.Checkpoint) {
		mu.Lock()
		cps = append(cps, cp)
		mu.Unlock()
		e.checkLive(cp)
		if userCompleted != nil {
			userCompleted(id, cp)
		}
		if c.stop != nil && c.stop(cp) {
			cancel()
		}
	}
	env := weir.NewEnvironment(opts)
	weir.SetTestHooks(env, hooks)
	out := sink.Files(e.out(), func(s string) string { return s })
	if c.build != nil {
		c.build(env, &c, out)
	} else {
		counterJobWith(env, c.n, c.keys, out, counterHooks{throttle: c.throttle})
	}
	res, err := env.ExecuteResult(ctx, e.job)
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded) {
		e.t.Fatalf("the run did not end within %v (err %v)", c.timeout, err)
	}
	mu.Lock()
	defer mu.Unlock()
	return clResult{res: res, err: err, cps: cps}
}

// throttleAfter slows the job down once `after` records went through the
// map until open is set.
func throttleAfter(after int64, open *atomic.Bool) func(int64) bool {
	var seen atomic.Int64
	return func(int64) bool { return seen.Add(1) > after && !open.Load() }
}

func clOn(interval time.Duration) weir.ChangelogOptions {
	return weir.ChangelogOptions{Enabled: true, MaterializeInterval: interval}
}

// 1. A checkpoint of only non-materialized changes (materialization never
// ran: Materialization 0, the state is the log alone) restores exactly
// once; the resumed run builds on the restored (empty) materialization.
func TestChangelogRestoreNonMaterialized(t *testing.T) {
	t.Parallel()
	const n, keys = 100_000, 97
	e := newCLEnv(t, "counter")
	var open atomic.Bool
	r1 := e.run(clCfg{p: 2, backend: weir.BackendHashMap, changelog: clOn(time.Hour), n: n, keys: keys,
		throttle: throttleAfter(n/4, &open),
		stop: func(cp *metadata.Checkpoint) bool {
			if len(subtasksOf(cp, "count")) > 0 && cp.ID >= 3 {
				open.Store(true)
				return true
			}
			return false
		}})
	if !errors.Is(r1.err, context.Canceled) {
		t.Fatalf("first run: %v, want it canceled after 3 checkpoints", r1.err)
	}
	e.checkFiles("after the first run")
	cp := e.latest()
	sts := subtasksOf(cp, "count")
	if len(sts) != 2 {
		t.Fatalf("checkpoint %d has %d count subtasks, want 2", cp.ID, len(sts))
	}
	for _, st := range sts {
		cl := st.Changelog
		if cl == nil {
			t.Fatalf("checkpoint %d subtask %d: no changelog state", cp.ID, st.Index)
		}
		if cl.Materialization != 0 || cl.MaterializedSeq != 0 || st.Keyed != nil || st.Native != nil || st.Timers != nil {
			t.Fatalf("checkpoint %d subtask %d: materialized part %+v keyed %v native %v, want none (never materialized)",
				cp.ID, st.Index, cl, st.Keyed, st.Native)
		}
		if cl.From != 1 || cl.To < 1 || len(cl.Segments) == 0 {
			t.Fatalf("checkpoint %d subtask %d: log %d..%d in %d segments, want 1..>0 in segments", cp.ID, st.Index, cl.From, cl.To, len(cl.Segments))
		}
		next := cl.From
		for _, s := range cl.Segments {
			if s.From > next || s.To < next {
				t.Fatalf("subtask %d: segments %+v do not cover %d..%d", st.Index, cl.Segments, cl.From, cl.To)
			}
			next = s.To + 1
		}
		if next <= cl.To {
			t.Fatalf("subtask %d: segments end at %d, before %d", st.Index, next-1, cl.To)
		}
	}
	r2 := e.run(clCfg{p: 2, backend: weir.BackendHashMap, changelog: clOn(time.Hour), restore: weir.RestoreLatest, n: n, keys: keys})
	if r2.err != nil {
		t.Fatalf("resumed run: %v", r2.err)
	}
	if len(r2.cps) == 0 {
		t.Fatal("the resumed run completed no checkpoint")
	}
	// Resumed in the same storage at the same parallelism, a subtask builds
	// on the restored materialization (none here) and its new log starts
	// with the restored records: nothing is materialized, the log grows.
	last := r2.cps[len(r2.cps)-1]
	if m := minMaterialization(last, "count"); m != 0 {
		t.Errorf("the resumed run's last checkpoint builds on materialization %d, want 0 (the restored one, never materialized)", m)
	}
	for _, st := range subtasksOf(last, "count") {
		if st.Changelog == nil || len(st.Changelog.Earlier) == 0 || st.Changelog.Earlier[0].From != 1 {
			t.Errorf("resumed checkpoint %d subtask %d: changelog %+v, want the restored log as its earlier range", last.ID, st.Index, st.Changelog)
		}
	}
	if _, _, recs, _ := last.ChangelogParts(); recs <= restoredRecords(t, cp) {
		t.Errorf("the resumed run's last checkpoint replays %d records, want more than the %d restored", recs, restoredRecords(t, cp))
	}
	e.checkFiles("after the resumed run")
	checkCounterOutput(t, e.out(), n, keys)
}

// 2 and 4. After several materializations (on every backend) a restore
// takes the latest materialization plus the log after it: exactly once.
func TestChangelogRestoreAfterMaterializations(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{weir.BackendHashMap, weir.BackendPebble, "pebble-incremental"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			backend, incremental := strings.CutSuffix(mode, "-incremental")
			const n, keys = 100_000, 97
			e := newCLEnv(t, "counter")
			var open atomic.Bool
			cfg := clCfg{p: 2, backend: backend, incremental: incremental, changelog: clOn(200 * time.Millisecond),
				n: n, keys: keys, retained: 2}
			c1 := cfg
			c1.throttle = throttleAfter(n/4, &open)
			c1.stop = func(cp *metadata.Checkpoint) bool {
				if minMaterialization(cp, "count") >= 2 {
					open.Store(true)
					return true
				}
				return false
			}
			r1 := e.run(c1)
			if !errors.Is(r1.err, context.Canceled) {
				t.Fatalf("first run: %v, want it canceled after 2 materializations", r1.err)
			}
			e.checkFiles("after the first run")
			cp := e.latest()
			for _, st := range subtasksOf(cp, "count") {
				cl := st.Changelog
				if cl == nil || cl.Materialization < 2 || cl.MaterializedSeq < 1 || cl.From != cl.MaterializedSeq+1 {
					t.Fatalf("checkpoint %d subtask %d: changelog %+v, want materialization >= 2 and the log after it", cp.ID, st.Index, cl)
				}
				if incremental {
					if st.Native == nil || st.Keyed != nil {
						t.Fatalf("subtask %d: incremental pebble materialization not native (native %v keyed %v)", st.Index, st.Native, st.Keyed)
					}
				} else if st.Keyed == nil || st.Native != nil {
					t.Fatalf("subtask %d: full materialization without a keyed file (native %v keyed %v)", st.Index, st.Native, st.Keyed)
				}
			}
			c2 := cfg
			c2.restore = weir.RestoreLatest
			r2 := e.run(c2)
			if r2.err != nil {
				t.Fatalf("resumed run: %v", r2.err)
			}
			e.checkFiles("after the resumed run")
			checkCounterOutput(t, e.out(), n, keys)
		})
	}
}

// 3. Failed materializations: up to state.changelog.materialization.
// max-failures-allowed in a row are tolerated (checkpoints go on with the
// previous materialization and the log); one more fails the job, with an
// error naming the option.
func TestChangelogMaterializationFailures(t *testing.T) {
	t.Parallel()
	t.Run("tolerated", func(t *testing.T) {
		t.Parallel()
		const n, keys = 100_000, 97
		e := newCLEnv(t, "counter")
		var (
			mu        sync.Mutex
			failed    = map[int]int{}
			succeeded = map[int]bool{}
			open      atomic.Bool
			last      atomic.Pointer[weir.CompletedCheckpoint]
		)
		r := e.run(clCfg{p: 2, backend: weir.BackendHashMap, n: n, keys: keys,
			changelog: weir.ChangelogOptions{Enabled: true, MaterializeInterval: 100 * time.Millisecond, MaxMaterializationFailures: 3},
			throttle:  throttleAfter(n/4, &open),
			onComplete: func(c weir.CompletedCheckpoint) {
				last.Store(&c)
			},
			hooks: weir.TestHooks{Materialize: func(uid string, subtask int, id int64) error {
				mu.Lock()
				defer mu.Unlock()
				if id <= 3 {
					failed[subtask]++
					return fmt.Errorf("injected failure of materialization %d", id)
				}
				succeeded[subtask] = true
				if len(succeeded) == 2 {
					open.Store(true)
				}
				return nil
			}}})
		if r.err != nil {
			t.Fatalf("run: %v", r.err)
		}
		if r.res.Restarts != 0 {
			t.Fatalf("%d restarts", r.res.Restarts)
		}
		mu.Lock()
		if failed[0] != 3 || failed[1] != 3 || !succeeded[0] || !succeeded[1] {
			t.Fatalf("failed %v succeeded %v: want 3 failures then a success on both subtasks", failed, succeeded)
		}
		mu.Unlock()
		var maxMat int64
		for _, cp := range r.cps {
			maxMat = max(maxMat, minMaterialization(cp, "count"))
		}
		if maxMat < 4 {
			t.Errorf("no checkpoint built on materialization 4 (the first that succeeded); max %d", maxMat)
		}
		if c := last.Load(); c == nil || c.Changelog.FailedMaterializations < 6 || c.Changelog.CompletedMaterializations < 2 {
			t.Errorf("metrics at the last checkpoint: %+v, want >= 6 failed and >= 2 completed materializations", c)
		}
		e.checkFiles("after the run")
		checkCounterOutput(t, e.out(), n, keys)
	})
	fails := func(t *testing.T, allowed int, want string) {
		const n, keys = 100_000, 97
		e := newCLEnv(t, "counter")
		var calls atomic.Int64
		r := e.run(clCfg{p: 2, backend: weir.BackendHashMap, n: n, keys: keys,
			changelog: weir.ChangelogOptions{Enabled: true, MaterializeInterval: 100 * time.Millisecond, MaxMaterializationFailures: allowed},
			// Slow until enough materializations failed that the job must
			// have failed: then it would run to its end quickly.
			throttle: func(int64) bool { return calls.Load() < int64(2*(max(allowed, 0)+2)) },
			hooks: weir.TestHooks{Materialize: func(string, int, int64) error {
				calls.Add(1)
				return errors.New("injected materialization failure")
			}}})
		if r.err == nil || !strings.Contains(r.err.Error(), want) {
			t.Fatalf("err = %v after %d failed materializations, want the job failed naming %q", r.err, calls.Load(), want)
		}
		if errors.Is(r.err, context.Canceled) {
			t.Fatalf("err = %v: canceled, not failed", r.err)
		}
		e.checkFiles("after the failed run")
	}
	t.Run("exceeded", func(t *testing.T) {
		t.Parallel()
		fails(t, 2, "state.changelog.materialization.max-failures-allowed=2")
	})
	// max-failures-allowed=0 (the option's minimum): no failure tolerated,
	// the first one fails the job. The field's doc: "negative means none".
	t.Run("none-allowed-by-config", func(t *testing.T) {
		t.Parallel()
		c := config.New()
		if err := c.Set("state.changelog.materialization.max-failures-allowed", "0"); err != nil {
			t.Fatal(err)
		}
		fails(t, weir.OptionsFromConfig(c).Changelog.MaxMaterializationFailures, "state.changelog.materialization.max-failures-allowed")
	})
	t.Run("none-allowed-negative", func(t *testing.T) {
		t.Parallel()
		fails(t, -1, "state.changelog.materialization.max-failures-allowed")
	})
}

// clLazyFn counts per key ("c,key,count" lines) and, in state "low", the
// records below t; an event-time timer at the end of time emits
// "f,key,count,low". "count" registers on the first record, "low" on the
// first record below t or in the timer: a run resumed after t holds the
// restored records of "low" pending until the input ends.
type clLazyFn struct {
	t          int64
	passed     *atomic.Bool
	count, low *weir.ValueState[int64]
}

func (f *clLazyFn) register(ctx *weir.KeyedContext[int64, string]) error {
	var err error
	if f.count == nil {
		if f.count, err = weir.GetValueState(ctx, weir.ValueStateDescriptor[int64]{Name: "count"}); err != nil {
			return err
		}
	}
	if f.low == nil {
		f.low, err = weir.GetValueState(ctx, weir.ValueStateDescriptor[int64]{Name: "low"})
	}
	return err
}

func (f *clLazyFn) ProcessElement(ctx *weir.KeyedContext[int64, string], i int64) error {
	if f.count == nil {
		var err error
		if f.count, err = weir.GetValueState(ctx, weir.ValueStateDescriptor[int64]{Name: "count"}); err != nil {
			return err
		}
	}
	c, _ := f.count.Value()
	c++
	f.count.Update(c)
	if c == 1 {
		ctx.RegisterEventTimeTimer(math.MaxInt64)
	}
	ctx.Emit(fmt.Sprintf("c,%d,%d", ctx.CurrentKey(), c))
	if i < f.t {
		if err := f.register(ctx); err != nil {
			return err
		}
		l, _ := f.low.Value()
		f.low.Update(l + 1)
	} else {
		f.passed.Store(true)
	}
	return nil
}

func (f *clLazyFn) OnTimer(ctx *weir.KeyedContext[int64, string], _ weir.Timer) error {
	if err := f.register(ctx); err != nil {
		return err
	}
	c, _ := f.count.Value()
	l, _ := f.low.Value()
	ctx.Emit(fmt.Sprintf("f,%d,%d,%d", ctx.CurrentKey(), c, l))
	return nil
}

// checkLazyOutput: every running count exactly once, and one final line
// per key with its count and its records below t.
func checkLazyOutput(t *testing.T, dir string, n, keys, low int64) {
	t.Helper()
	counts := map[[2]int64]int{}
	finals := map[int64][]string{}
	lines, _ := committedLines(t, dir)
	for _, l := range lines {
		parts := strings.Split(l, ",")
		nums := make([]int64, len(parts)-1)
		for i, p := range parts[1:] {
			var err error
			if nums[i], err = strconv.ParseInt(p, 10, 64); err != nil {
				t.Fatalf("bad line %q", l)
			}
		}
		switch {
		case parts[0] == "c" && len(nums) == 2:
			counts[[2]int64{nums[0], nums[1]}]++
		case parts[0] == "f" && len(nums) == 3:
			finals[nums[0]] = append(finals[nums[0]], l)
		default:
			t.Fatalf("bad line %q", l)
		}
	}
	nk := func(total, k int64) int64 {
		c := total / keys
		if k < total%keys {
			c++
		}
		return c
	}
	var missing, dups int
	for k := range keys {
		for c := int64(1); c <= nk(n, k); c++ {
			switch counts[[2]int64{k, c}] {
			case 0:
				missing++
			case 1:
			default:
				dups++
			}
		}
	}
	if missing+dups != 0 || len(counts) != int(n) {
		t.Errorf("running counts not exactly once: %d distinct for %d records, %d missing, %d duplicated", len(counts), n, missing, dups)
	}
	for k := range keys {
		want := fmt.Sprintf("f,%d,%d,%d", k, nk(n, k), nk(low, k))
		if got := finals[k]; len(got) != 1 || got[0] != want {
			t.Errorf("key %d: final lines %v, want [%s]", k, got, want)
		}
	}
	if len(finals) != int(keys) {
		t.Errorf("final lines for %d keys, want %d", len(finals), keys)
	}
}

// 5. The changelog switched on and off between runs, both ways, with
// state registered lazily ("low" only when the input ends, in the timer)
// and event-time timers: a checkpoint without the changelog restores into
// a job with it and the other way round; restored records of unregistered
// states survive materializations (re-appended to the log) and checkpoints
// without the changelog (Pending); timers only in the log are replayed.
func TestChangelogOnOffCompatibility(t *testing.T) {
	t.Parallel()
	const n, keys, low = 60_000, 41, 15_000
	lazyJob := func(passed *atomic.Bool) func(env *weir.Environment, c *clCfg, out weir.Sink[string]) {
		return func(env *weir.Environment, c *clCfg, out weir.Sink[string]) {
			nums := weir.FromSource(env, source.Sequence(0, c.n-1)).UID("numbers").SetParallelism(1)
			slow := slowed(nums, c.throttle).SetParallelism(1)
			res := weir.KeyedProcess(weir.KeyBy(slow, func(i int64) int64 { return i % keys }),
				func() weir.KeyedProcessFunction[int64, int64, string] { return &clLazyFn{t: low, passed: passed} }).UID("count")
			weir.SinkTo(res, out).UID("sink")
		}
	}
	off := weir.ChangelogOptions{}
	for _, c := range []struct {
		name          string
		r1, r2, r3    weir.ChangelogOptions
		backend       string
		pendingInRun2 bool // run 2 is without the changelog: its checkpoints hold "low" as Pending
	}{
		{"off-on-off", off, clOn(200 * time.Millisecond), off, weir.BackendHashMap, false},
		{"on-off-on", clOn(time.Hour), off, clOn(200 * time.Millisecond), weir.BackendHashMap, true},
		{"on-off-on-pebble", clOn(time.Hour), off, clOn(200 * time.Millisecond), weir.BackendPebble, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newCLEnv(t, "lazy")
			var passed, open1, open2 atomic.Bool
			// Run 1 stops at the second checkpoint completed after a record
			// >= low went through: both were triggered after every record
			// below low, so their state holds all of "low".
			seenAfter := 0
			r1 := e.run(clCfg{p: 2, backend: c.backend, changelog: c.r1, n: n, keys: keys, build: lazyJob(&passed),
				throttle: func(i int64) bool { return i >= low && !open1.Load() },
				stop: func(cp *metadata.Checkpoint) bool {
					if passed.Load() {
						seenAfter++
					}
					if seenAfter >= 2 {
						open1.Store(true)
						return true
					}
					return false
				}})
			if !errors.Is(r1.err, context.Canceled) {
				t.Fatalf("run 1: %v, want it canceled", r1.err)
			}
			e.checkFiles("after run 1")
			cp1 := e.latest()
			if c.r1.Enabled {
				for _, st := range subtasksOf(cp1, "count") {
					if st.Changelog == nil || st.Changelog.Materialization != 0 || st.Timers != nil {
						t.Fatalf("run 1 checkpoint %d subtask %d: %+v timers %v, want the log alone (timers in it)", cp1.ID, st.Index, st.Changelog, st.Timers)
					}
				}
			}
			// Run 2 resumes after low: "low" registers only when the input
			// ends, in the timers.
			var pendingSeen atomic.Bool
			r2 := e.run(clCfg{p: 2, backend: c.backend, changelog: c.r2, restore: weir.RestoreLatest, n: n, keys: keys, build: lazyJob(&passed),
				throttle: func(int64) bool { return !open2.Load() },
				stop: func(cp *metadata.Checkpoint) bool {
					sts := subtasksOf(cp, "count")
					done := len(sts) > 0
					for _, st := range sts {
						if c.pendingInRun2 {
							if st.Pending == nil {
								done = false
							}
						} else if st.Changelog == nil || st.Changelog.Materialization < 2 {
							done = false
						}
					}
					if done {
						pendingSeen.Store(true)
						open2.Store(true)
					}
					return done
				}})
			if !errors.Is(r2.err, context.Canceled) || !pendingSeen.Load() {
				t.Fatalf("run 2: %v (stop condition met %v), want it canceled once its checkpoint held the pending state", r2.err, pendingSeen.Load())
			}
			e.checkFiles("after run 2")
			r3 := e.run(clCfg{p: 2, backend: c.backend, changelog: c.r3, restore: weir.RestoreLatest, n: n, keys: keys, build: lazyJob(&passed)})
			if r3.err != nil {
				t.Fatalf("run 3: %v", r3.err)
			}
			e.checkFiles("after run 3")
			checkLazyOutput(t, e.out(), n, keys, low)
		})
	}
}

// 7. Failures during a log upload, during a checkpoint's upload of the log
// tail, during a materialization's upload, and the task killed while a
// materialization uploads: the job restarts from its latest checkpoint
// (or tolerates the failed materialization), the output is exactly once
// and no file is left behind.
func TestChangelogFailuresDuringUploads(t *testing.T) {
	t.Parallel()
	const n, keys = 100_000, 97
	// faulty returns the test's storage wrapped in a fault injector.
	faulty := func(t *testing.T, e *clEnv) (*blobtest.Bucket, *storage.Storage) {
		inner, err := storage.OpenLocation(context.Background(), filepath.Join(e.dir, "chk"))
		if err != nil {
			t.Fatal(err)
		}
		faults := blobtest.New(inner)
		s := storage.OpenBucket(faults)
		t.Cleanup(func() { s.Close() })
		return faults, s
	}
	restart := weir.RestartOptions{Type: "fixed-delay", FixedDelayAttempts: 5, FixedDelay: time.Millisecond}
	base := func(open *atomic.Bool) clCfg {
		return clCfg{p: 2, backend: weir.BackendHashMap, n: n, keys: keys, restart: restart,
			changelog: weir.ChangelogOptions{Enabled: true, MaterializeInterval: 200 * time.Millisecond, MaxAttempts: 1},
			throttle:  throttleAfter(n/4, open)}
	}

	t.Run("log-upload", func(t *testing.T) {
		t.Parallel()
		e := newCLEnv(t, "counter")
		faults, s := faulty(t, e)
		var open, armed atomic.Bool
		c := base(&open)
		c.hooks = weir.TestHooks{Storage: s, Completed: func(id int64, cp *metadata.Checkpoint) {
			if id >= 3 && armed.CompareAndSwap(false, true) {
				faults.Fail(blobtest.OpFinish, "counter/shared/*.log", nil, 1)
			}
		}}
		c.stop = func(cp *metadata.Checkpoint) bool {
			if armed.Load() && cp.ID >= 8 {
				open.Store(true)
			}
			return false
		}
		r := e.run(c)
		if r.err != nil {
			t.Fatalf("run: %v", r.err)
		}
		if r.res.Restarts < 1 {
			t.Errorf("%d restarts, want the failed log upload (max-attempts 1) to fail the job over", r.res.Restarts)
		}
		e.checkFiles("after the run")
		checkCounterOutput(t, e.out(), n, keys)
	})

	t.Run("checkpoint-upload", func(t *testing.T) {
		t.Parallel()
		e := newCLEnv(t, "counter")
		var open, failed atomic.Bool
		c := base(&open)
		c.hooks = weir.TestHooks{Upload: func(_, _ int, id int64) error {
			if id >= 3 && failed.CompareAndSwap(false, true) {
				return errors.New("injected failure uploading the log tail")
			}
			return nil
		}}
		c.stop = func(cp *metadata.Checkpoint) bool {
			if failed.Load() && minMaterialization(cp, "count") >= 2 {
				open.Store(true)
			}
			return false
		}
		r := e.run(c)
		if r.err != nil {
			t.Fatalf("run: %v", r.err)
		}
		if r.res.Restarts != 1 {
			t.Errorf("%d restarts, want 1", r.res.Restarts)
		}
		e.checkFiles("after the run")
		checkCounterOutput(t, e.out(), n, keys)
	})

	t.Run("materialization-upload", func(t *testing.T) {
		t.Parallel()
		e := newCLEnv(t, "counter")
		faults, s := faulty(t, e)
		var open atomic.Bool
		c := base(&open)
		faults.Fail(blobtest.OpFinish, "counter/shared/*-m2.kst", nil, 1)
		c.hooks = weir.TestHooks{Storage: s}
		c.stop = func(cp *metadata.Checkpoint) bool {
			if minMaterialization(cp, "count") >= 3 {
				open.Store(true)
			}
			return false
		}
		r := e.run(c)
		if r.err != nil {
			t.Fatalf("run: %v", r.err)
		}
		if r.res.Restarts != 0 {
			t.Errorf("%d restarts, want none: one failed materialization is tolerated", r.res.Restarts)
		}
		e.checkFiles("after the run")
		checkCounterOutput(t, e.out(), n, keys)
	})

	// The task fails while a materialization is uploading; the upload
	// finishes after the subtask closed.
	t.Run("killed-during-materialization", func(t *testing.T) {
		t.Parallel()
		e := newCLEnv(t, "counter")
		var open, holding, killed atomic.Bool
		release := make(chan struct{})
		c := base(&open)
		c.hooks = weir.TestHooks{
			Materialize: func(uid string, subtask int, id int64) error {
				if id == 2 && subtask == 0 && holding.CompareAndSwap(false, true) {
					select {
					case <-release:
					case <-time.After(10 * time.Second):
					}
				}
				return nil
			},
			Sync: func(_, subtask int, id int64) error {
				if holding.Load() && killed.CompareAndSwap(false, true) {
					go func() {
						time.Sleep(50 * time.Millisecond)
						close(release)
					}()
					return errors.New("injected failure while a materialization uploads")
				}
				return nil
			},
		}
		c.stop = func(cp *metadata.Checkpoint) bool {
			if killed.Load() && minMaterialization(cp, "count") >= 2 {
				open.Store(true)
			}
			return false
		}
		r := e.run(c)
		if r.err != nil {
			t.Fatalf("run: %v", r.err)
		}
		if !killed.Load() || r.res.Restarts != 1 {
			t.Errorf("killed %v, %d restarts; want one failure while materialization 2 uploaded", killed.Load(), r.res.Restarts)
		}
		e.checkFiles("after the run")
		checkCounterOutput(t, e.out(), n, keys)
	})
}

func restoredRecords(t *testing.T, cp *metadata.Checkpoint) int64 {
	t.Helper()
	_, _, recs, ok := cp.ChangelogParts()
	if !ok {
		t.Fatalf("checkpoint %d has no changelog", cp.ID)
	}
	return recs
}
