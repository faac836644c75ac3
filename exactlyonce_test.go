package weir_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/sink"
	"github.com/weirstream/weir/source"
)

// failingCommits is sink.Files whose Commit fails once, at the n-th call.
type failingCommits struct {
	weir.TwoPhaseCommitSink[string]
	calls, failAt atomic.Int64
}

func (f *failingCommits) Commit(ctx weir.SinkContext, txn []byte) error {
	if f.calls.Add(1) == f.failAt.Load() {
		return errors.New("injected commit failure")
	}
	return f.TwoPhaseCommitSink.Commit(ctx, txn)
}

// counterJob declares the counter job (running count per key, one line
// "key,count" per record) over records 0..n-1 with keys keys. failAt makes
// the count function fail once when it sees that record.
func counterJob(env *weir.Environment, n, keys int64, out weir.Sink[string], failAt int64, failed *atomic.Bool) {
	counterJobWith(env, n, keys, out, counterHooks{fail: func(_ int, i int64) bool {
		return i == failAt && failed.CompareAndSwap(false, true)
	}})
}

// counterHooks alter the counter job for a test; nil fields do nothing.
type counterHooks struct {
	// throttle, called per record before the keyBy, makes it take 1ms
	// (see slowed).
	throttle func(i int64) bool
	// fail makes the count function of subtask fail on record i.
	fail func(subtask int, i int64) bool
}

// throttleStep is how much of its throttle's delays a subtask of slowed
// sleeps at a time.
const throttleStep = 16 * time.Millisecond

// slowed is the operator "slow" after the source nums: it slows the
// source down a little (500µs every 100 records) so that checkpoints (and
// failures) happen while records flow, and by 1ms for every record
// throttle returns true for. Those delays add up and a subtask sleeps
// them throttleStep at a time: on a busy machine a 1ms sleep takes several
// (the goroutine waits for a CPU), so a source throttled by a sleep per
// record went many times slower than asked, and a checkpoint, which waits
// for the end of a throttled source batch (2,048 records), took minutes.
func slowed(nums *weir.DataStream[int64], throttle func(i int64) bool) *weir.DataStream[int64] {
	return weir.ProcessEach(nums, func() weir.ProcessFunction[int64, int64] {
		var debt time.Duration // throttle delays not slept yet
		return weir.ProcessFunc[int64, int64](func(ctx *weir.Context[int64], i int64) error {
			if throttle != nil && throttle(i) {
				if debt += time.Millisecond; debt >= throttleStep {
					time.Sleep(debt)
					debt = 0
				}
			} else if i%100 == 0 {
				time.Sleep(500 * time.Microsecond)
			}
			ctx.Emit(i)
			return nil
		})
	}).UID("slow")
}

// counterJobWith is counterJob with hooks. The count state is registered
// on the first record (lazily: restored changelog records wait for it).
func counterJobWith(env *weir.Environment, n, keys int64, out weir.Sink[string], h counterHooks) {
	nums := weir.FromSource(env, source.Sequence(0, n-1)).UID("numbers")
	slow := slowed(nums, h.throttle)
	counts := weir.KeyedProcess(weir.KeyBy(slow, func(i int64) int64 { return i % keys }),
		func() weir.KeyedProcessFunction[int64, int64, string] {
			var count *weir.ValueState[int64]
			return weir.KeyedProcessFunc[int64, int64, string](func(ctx *weir.KeyedContext[int64, string], i int64) error {
				if count == nil {
					var err error
					if count, err = weir.GetValueState(ctx, weir.ValueStateDescriptor[int64]{Name: "count"}); err != nil {
						return err
					}
				}
				if h.fail != nil && h.fail(ctx.Subtask(), i) {
					return errors.New("injected failure in a user function")
				}
				c, _ := count.Value()
				c++
				count.Update(c)
				ctx.Emit(strconv.FormatInt(ctx.CurrentKey(), 10) + "," + strconv.FormatInt(c, 10))
				return nil
			})
		}).UID("count")
	weir.SinkTo(counts, out).UID("sink")
}

// committedLines returns the lines of the committed files in dir (those
// not hidden), with the name of the file each is from.
func committedLines(t *testing.T, dir string) (lines, files []string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if len(data) == 0 {
			continue
		}
		for _, l := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
			lines, files = append(lines, l), append(files, e.Name())
		}
	}
	return lines, files
}

// checkCounterOutput verifies the committed files in dir: every key k has
// the lines k,1 .. k,n_k exactly once, n_k being the number of i < n with
// i mod keys = k, and nothing else.
func checkCounterOutput(t *testing.T, dir string, n, keys int64) {
	t.Helper()
	if dups, missing, lines := counterOutput(t, dir, n, keys); dups != 0 || missing != 0 || int64(lines) != n {
		t.Fatalf("committed output is not exactly once: %d lines for %d records, %d (key, count) pairs missing, %d duplicated", lines, n, missing, dups)
	}
}

// counterOutput reads the committed files of the counter job in dir and
// counts the (key, count) pairs in 1..n_k that are missing or duplicated.
func counterOutput(t *testing.T, dir string, n, keys int64) (dups, missing, lines int) {
	t.Helper()
	seen := make(map[[2]int64]int)
	all, files := committedLines(t, dir)
	for i, l := range all {
		k, c, ok := strings.Cut(l, ",")
		ki, err1 := strconv.ParseInt(k, 10, 64)
		ci, err2 := strconv.ParseInt(c, 10, 64)
		if !ok || err1 != nil || err2 != nil {
			t.Fatalf("%s: bad line %q", files[i], l)
		}
		seen[[2]int64{ki, ci}]++
	}
	lines = len(all)
	for k := range keys {
		nk := n / keys
		if k < n%keys {
			nk++
		}
		for c := int64(1); c <= nk; c++ {
			switch seen[[2]int64{k, c}] {
			case 0:
				missing++
			case 1:
			default:
				dups++
			}
		}
	}
	return dups, missing, lines
}

func quietLogger(t *testing.T) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// The counter job with failures injected in a user function, in the
// synchronous phase, in the upload, between the upload and _metadata, and
// in a sink commit, restarting automatically after each, writes every
// running count exactly once: nothing lost, nothing duplicated.
func TestExactlyOnceUnderInjectedFailures(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{weir.BackendHashMap, weir.BackendPebble, "pebble-incremental"} {
		backend, incremental := strings.CutSuffix(mode, "-incremental")
		for _, p := range []int{1, 4} {
			t.Run(fmt.Sprintf("%s/p%d", mode, p), func(t *testing.T) {
				t.Parallel()
				seed := rand.Uint64()
				t.Logf("seed %d", seed)
				rng := rand.New(rand.NewPCG(seed, 0))
				const n, keys = 120_000, 97
				dir := t.TempDir()
				opts := weir.Options{Parallelism: p, StateBackend: backend, StateDir: filepath.Join(dir, "state"),
					Logger:     quietLogger(t),
					Checkpoint: weir.CheckpointOptions{Interval: 10 * time.Millisecond, Dir: filepath.Join(dir, "chk"), Incremental: incremental},
					Restart:    weir.RestartOptions{Type: "fixed-delay", FixedDelayAttempts: 20, FixedDelay: time.Millisecond}}
				var syncFailed, uploadFailed, metaFailed, userFailed atomic.Bool
				syncAt, uploadAt, metaAt := 1+rng.Int64N(4), 1+rng.Int64N(4), 1+rng.Int64N(4)
				syncTask := rng.IntN(p)
				out := &failingCommits{TwoPhaseCommitSink: sink.Files(filepath.Join(dir, "out"), func(s string) string { return s })}
				out.failAt.Store(2 + rng.Int64N(4))
				env := weir.NewEnvironment(opts)
				weir.SetTestHooks(env, weir.TestHooks{
					Sync: func(vertex, subtask int, id int64) error {
						if id >= syncAt && subtask == syncTask && syncFailed.CompareAndSwap(false, true) {
							return errors.New("injected failure in the synchronous phase")
						}
						return nil
					},
					Upload: func(vertex, subtask int, id int64) error {
						if id >= uploadAt && uploadFailed.CompareAndSwap(false, true) {
							return errors.New("injected upload failure")
						}
						return nil
					},
					BeforeMetadata: func(id int64) error {
						if id >= metaAt && metaFailed.CompareAndSwap(false, true) {
							return errors.New("injected failure before _metadata")
						}
						return nil
					},
				})
				counterJob(env, n, keys, out, rng.Int64N(n), &userFailed)
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				res, err := env.ExecuteResult(ctx, "counter")
				if err != nil {
					t.Fatal(err)
				}
				for name, fired := range map[string]bool{"sync": syncFailed.Load(), "upload": uploadFailed.Load(),
					"metadata": metaFailed.Load(), "user": userFailed.Load(), "commit": out.calls.Load() >= out.failAt.Load()} {
					if !fired {
						t.Errorf("the %s failure was never injected", name)
					}
				}
				// Two failures may hit the same attempt (a sync failure
				// while an upload fails): one restart covers both.
				if res.Restarts < 1 || res.Restarts > 5 {
					t.Errorf("%d restarts, want 1..5 (at most one per injected failure)", res.Restarts)
				}
				checkCounterOutput(t, filepath.Join(dir, "out"), n, keys)
				t.Logf("%d restarts, %d checkpoints completed", res.Restarts, len(res.Completed))
			})
		}
	}
}

// In AT_LEAST_ONCE mode barriers are not aligned, so a restore may count
// some records twice, but nothing is lost: every running count 1..n_k of
// every key is in the committed output.
func TestAtLeastOnceLosesNothing(t *testing.T) {
	t.Parallel()
	const n, keys = 120_000, 97
	dir := t.TempDir()
	opts := weir.Options{Parallelism: 4, Logger: quietLogger(t),
		Checkpoint: weir.CheckpointOptions{Interval: 10 * time.Millisecond, Dir: filepath.Join(dir, "chk"), Mode: weir.CheckpointingAtLeastOnce},
		Restart:    weir.RestartOptions{Type: "fixed-delay", FixedDelayAttempts: 5, FixedDelay: time.Millisecond}}
	env := weir.NewEnvironment(opts)
	var failed atomic.Bool
	counterJob(env, n, keys, sink.Files(filepath.Join(dir, "out"), func(s string) string { return s }), n/2, &failed)
	res, err := env.ExecuteResult(context.Background(), "counter")
	if err != nil {
		t.Fatal(err)
	}
	if !failed.Load() || res.Restarts != 1 {
		t.Fatalf("failure injected %v, %d restarts; want one", failed.Load(), res.Restarts)
	}
	dups, missing, lines := counterOutput(t, filepath.Join(dir, "out"), n, keys)
	if missing != 0 {
		t.Fatalf("%d running counts lost", missing)
	}
	t.Logf("%d lines for %d records, %d counts written more than once", lines, n, dups)
}
