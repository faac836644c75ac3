package weir_test

import (
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/sink"
	"github.com/weirstream/weir/source"
)

// counterVariant is the counter job (counterJobWith) with changes to its
// operators, for restores into a changed job.
type counterVariant struct {
	// countUID replaces the uid "count" of the keyed count operator.
	countUID string
	// audit adds a keyed pass-through operator with state of its own (uid
	// "audit", a count per key) before the count.
	audit bool
	// tag adds a stateless map (uid "tag") before the sink.
	tag bool
}

// build returns the build function of the variant writing to out;
// throttled as counter's.
func (v counterVariant) build(n, keys int64, out string, slowed bool) func(*weir.Environment) {
	return func(env *weir.Environment) {
		nums := weir.FromSource(env, source.Sequence(0, n-1)).UID("numbers")
		slow := weir.Map(nums, func(i int64) int64 {
			if slowed && throttled(i) {
				time.Sleep(time.Millisecond)
			} else if i%100 == 0 {
				time.Sleep(500 * time.Microsecond)
			}
			return i
		}).UID("slow")
		key := func(i int64) int64 { return i % keys }
		if v.audit {
			slow = weir.KeyedProcess(weir.KeyBy(slow, key), func() weir.KeyedProcessFunction[int64, int64, int64] {
				var seen *weir.ValueState[int64]
				return weir.KeyedProcessFunc[int64, int64, int64](func(ctx *weir.KeyedContext[int64, int64], i int64) error {
					if seen == nil {
						var err error
						if seen, err = weir.GetValueState(ctx, weir.ValueStateDescriptor[int64]{Name: "seen"}); err != nil {
							return err
						}
					}
					c, _ := seen.Value()
					seen.Update(c + 1)
					ctx.Emit(i)
					return nil
				})
			}).UID("audit")
		}
		uid := v.countUID
		if uid == "" {
			uid = "count"
		}
		counts := weir.KeyedProcess(weir.KeyBy(slow, key), func() weir.KeyedProcessFunction[int64, int64, string] {
			var count *weir.ValueState[int64]
			return weir.KeyedProcessFunc[int64, int64, string](func(ctx *weir.KeyedContext[int64, string], i int64) error {
				if count == nil {
					var err error
					if count, err = weir.GetValueState(ctx, weir.ValueStateDescriptor[int64]{Name: "count"}); err != nil {
						return err
					}
				}
				c, _ := count.Value()
				c++
				count.Update(c)
				ctx.Emit(strconv.FormatInt(ctx.CurrentKey(), 10) + "," + strconv.FormatInt(c, 10))
				return nil
			})
		}).UID(uid)
		if v.tag {
			counts = weir.Map(counts, func(s string) string { return s }).UID("tag")
		}
		weir.SinkTo(counts, sink.Files(out, func(s string) string { return s })).UID("sink")
	}
}

// uidOptions are the options of the uid and max-parallelism tests: the
// hashmap backend, frequent checkpoints, savepoints under dir/savepoints.
func uidOptions(t *testing.T, dir string) weir.Options {
	return weir.Options{Parallelism: 2, StateBackend: weir.BackendHashMap, StateDir: filepath.Join(dir, "state"), Logger: quietLogger(t),
		Checkpoint: weir.CheckpointOptions{Interval: 20 * time.Millisecond, Dir: filepath.Join(dir, "chk"), SavepointDir: filepath.Join(dir, "savepoints")}}
}

// stoppedSavepoint runs the job build declares (throttled) until its first
// checkpoint, stops it with a canonical savepoint and returns where it is.
func stoppedSavepoint(t *testing.T, opts weir.Options, build func(*weir.Environment)) string {
	t.Helper()
	j := startJob(t, opts, "counter", build)
	j.nextCheckpoint()
	return j.savepoint(weir.SavepointOptions{}, true)
}

func savepointUIDs(t *testing.T, sp string) []string {
	var uids []string
	for _, op := range readSavepoint(t, sp).Operators {
		uids = append(uids, op.UID)
	}
	return uids
}

// Operator state is matched by uid. A savepoint with the state of an
// operator the job no longer has (a stateful operator removed, or the
// count operator's uid changed) is refused with ErrStateMismatch naming
// the uid and the flag that drops it; with AllowNonRestoredState the job
// runs without it. Operators the savepoint has no state for (added ones,
// stateful or not) start empty.
func TestSavepointOperatorUIDs(t *testing.T) {
	t.Parallel()
	const n, keys = 30_000, 200
	t.Run("removed", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		out := filepath.Join(dir, "out")
		opts := uidOptions(t, dir)
		sp := stoppedSavepoint(t, opts, counterVariant{audit: true}.build(n, keys, out, true))
		if uids := savepointUIDs(t, sp); !strings.Contains(strings.Join(uids, " "), "audit") {
			t.Fatalf("the savepoint has state for %v, not for the audit operator", uids)
		}
		before := digests(t, sp)
		opts.Checkpoint.RestorePath = sp
		err := startJob(t, opts, "counter", counterVariant{}.build(n, keys, out, false)).wait()
		if !errors.Is(err, weir.ErrStateMismatch) || !strings.Contains(err.Error(), `"audit"`) || !strings.Contains(err.Error(), "--allow-non-restored-state") {
			t.Fatalf("restore without the audit operator: %v; want a state mismatch naming \"audit\" and --allow-non-restored-state", err)
		}
		opts.Checkpoint.AllowNonRestoredState = true
		if err := startJob(t, opts, "counter", counterVariant{}.build(n, keys, out, false)).wait(); err != nil {
			t.Fatalf("restore without the audit operator, allowing non-restored state: %v", err)
		}
		checkCounterOutput(t, out, n, keys)
		checkUnchanged(t, sp, before, "after the restores")
	})
	t.Run("renamed", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		out := filepath.Join(dir, "out")
		opts := uidOptions(t, dir)
		sp := stoppedSavepoint(t, opts, counterVariant{}.build(n, keys, out, true))
		_, _, committed := counterOutput(t, out, n, keys)
		if committed == 0 {
			t.Fatal("the stop-with-savepoint committed no output")
		}
		opts.Checkpoint.RestorePath = sp
		renamed := counterVariant{countUID: "count-v2"}
		err := startJob(t, opts, "counter", renamed.build(n, keys, out, false)).wait()
		if !errors.Is(err, weir.ErrStateMismatch) || !strings.Contains(err.Error(), `"count"`) || !strings.Contains(err.Error(), "--allow-non-restored-state") {
			t.Fatalf("restore with the count operator renamed: %v; want a state mismatch naming \"count\" and --allow-non-restored-state", err)
		}
		opts.Checkpoint.AllowNonRestoredState = true
		if err := startJob(t, opts, "counter", renamed.build(n, keys, out, false)).wait(); err != nil {
			t.Fatalf("restore with the count operator renamed, allowing non-restored state: %v", err)
		}
		// The source's offsets were restored (every record once), the
		// counts were not: they started over at 1.
		dups, _, lines := counterOutput(t, out, n, keys)
		if lines != n || dups == 0 {
			t.Fatalf("%d lines for %d records, %d (key, count) pairs twice; want every record once and the counts started over", lines, n, dups)
		}
	})
	t.Run("added", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		out := filepath.Join(dir, "out")
		opts := uidOptions(t, dir)
		sp := stoppedSavepoint(t, opts, counterVariant{}.build(n, keys, out, true))
		opts.Checkpoint.RestorePath = sp
		if err := startJob(t, opts, "counter", counterVariant{audit: true, tag: true}.build(n, keys, out, false)).wait(); err != nil {
			t.Fatalf("restore with a stateful and a stateless operator added: %v", err)
		}
		checkCounterOutput(t, out, n, keys)
	})
}

// A savepoint taken at one max parallelism is refused at another, before
// anything runs, with an error that names both values (and not waved
// through by AllowNonRestoredState); at the old one it restores.
func TestSavepointMaxParallelismChanged(t *testing.T) {
	t.Parallel()
	const n, keys = 30_000, 200
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	opts := uidOptions(t, dir)
	opts.MaxParallelism = 128
	sp := stoppedSavepoint(t, opts, counter(n, keys, out, true))
	_, _, committed := counterOutput(t, out, n, keys)
	opts.Checkpoint.RestorePath = sp
	opts.MaxParallelism = 256
	for _, allow := range []bool{false, true} {
		opts.Checkpoint.AllowNonRestoredState = allow
		err := runCounter(t, opts, "counter", n, keys, out)
		if !errors.Is(err, weir.ErrStateMismatch) || !strings.Contains(err.Error(), "max parallelism is 256") || !strings.Contains(err.Error(), "taken with 128") {
			t.Fatalf("restore at max parallelism 256 (allow non-restored state %v): %v; want a state mismatch naming 256 and 128", allow, err)
		}
	}
	if _, _, lines := counterOutput(t, out, n, keys); lines != committed {
		t.Fatalf("the refused restores committed output: %d lines, %d before", lines, committed)
	}
	opts.MaxParallelism = 128
	opts.Checkpoint.AllowNonRestoredState = false
	if err := runCounter(t, opts, "counter", n, keys, out); err != nil {
		t.Fatalf("restore at max parallelism 128: %v", err)
	}
	checkCounterOutput(t, out, n, keys)
}

// A job whose max parallelism is not set adopts the snapshot's, as Flink
// does: a savepoint taken with max parallelism 13 restores at another
// parallelism where the default would be 128, with exact output.
func TestSavepointAdoptsMaxParallelismWhenUnset(t *testing.T) {
	t.Parallel()
	const n, keys = 30_000, 200
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	opts := uidOptions(t, dir)
	opts.MaxParallelism = 13
	sp := stoppedSavepoint(t, opts, counter(n, keys, out, true))
	opts.Checkpoint.RestorePath = sp
	opts.MaxParallelism = 0
	opts.Parallelism = 3
	if err := runCounter(t, opts, "counter", n, keys, out); err != nil {
		t.Fatalf("restore without a max parallelism: %v", err)
	}
	checkCounterOutput(t, out, n, keys)
}
