package weir_test

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/internal/checkpoint/metadata"
	"github.com/weirstream/weir/internal/checkpoint/storage"
)

// claimOptions are the options of the claim-mode tests: pebble with
// incremental checkpoints every 50ms, numRetained of them retained.
func claimOptions(t *testing.T, dir string, numRetained int) weir.Options {
	return weir.Options{Parallelism: 2, StateBackend: weir.BackendPebble, StateDir: filepath.Join(dir, "state"), Logger: quietLogger(t),
		Checkpoint: weir.CheckpointOptions{Interval: 50 * time.Millisecond, Dir: filepath.Join(dir, "chk"), Incremental: true,
			NumRetained: numRetained, SavepointDir: filepath.Join(dir, "savepoints")}}
}

// baseDigests returns the digests of the files of checkpoint cp of jobDir:
// its chk-<n> directory and the shared files it references.
func baseDigests(t *testing.T, jobDir string, cp *metadata.Checkpoint) map[string]fileDigest {
	t.Helper()
	all := digests(t, jobDir)
	refs := map[string]bool{}
	for _, f := range cp.Files() {
		refs[f.Path] = true
		if _, ok := all[f.Path]; !ok {
			t.Fatalf("checkpoint %d references %s, which is missing", cp.ID, f.Path)
		}
	}
	chk := storage.CheckpointDir(cp.ID) + "/"
	for p := range all {
		if !refs[p] && !strings.HasPrefix(p, chk) {
			delete(all, p)
		}
	}
	return all
}

// sharedOf returns cp's files under shared/.
func sharedOf(cp *metadata.Checkpoint) []string {
	var out []string
	for _, f := range cp.Files() {
		if strings.HasPrefix(f.Path, "shared/") {
			out = append(out, f.Path)
		}
	}
	return out
}

// NO_CLAIM (the default for an explicit path) of an incremental pebble
// checkpoint of the job's own directory. Job "counter" runs and is
// canceled; its latest checkpoint is restored, explicitly, by job
// "counter" (the same job directory) and at the same time by job
// "counter-copy". Both run; their first checkpoints reference no file of
// the base (the first checkpoint is a full one), and while "counter" goes
// on checkpointing with num-retained 1 (its own first checkpoint is
// subsumed and deleted) the base checkpoint and its shared files stay as
// they were, and after the runs too. Then the base is deleted, and both
// jobs resume with --from latest: their checkpoints needed nothing of it,
// and the output is exactly once.
func TestNoClaimIncrementalCheckpoint(t *testing.T) {
	t.Parallel()
	const n, keys = 100_000, 200
	dir := t.TempDir()
	opts := claimOptions(t, dir, 1)
	chk := opts.Checkpoint.Dir
	jobDir := filepath.Join(chk, "counter")
	out, outCopy := filepath.Join(dir, "out"), filepath.Join(dir, "out-copy")

	a := startJob(t, opts, "counter", counter(n, keys, out, true))
	for range 3 {
		a.nextCheckpoint()
	}
	a.stop()
	base := latestCheckpoint(t, jobDir)
	baseDir := filepath.Join(jobDir, storage.CheckpointDir(base))
	baseMeta := readCheckpoint(t, jobDir, base)
	if len(sharedOf(baseMeta)) == 0 {
		t.Fatalf("checkpoint %d references no shared file: not an incremental pebble checkpoint", base)
	}
	baseFiles := filePaths(baseMeta, "counter")
	before := baseDigests(t, jobDir, baseMeta)
	copyDir(t, out, outCopy)

	from := opts
	from.Checkpoint.RestorePath = baseDir
	// The restored runs' checkpoints are kept as they complete: with
	// num-retained 1 a run's first checkpoint is subsumed and deleted
	// once its second completes, which may be before the test reads it.
	var completed sync.Map // "job/id" -> *metadata.Checkpoint
	recorded := func(name string, build func(*weir.Environment)) func(*weir.Environment) {
		return func(env *weir.Environment) {
			weir.SetTestHooks(env, weir.TestHooks{Completed: func(id int64, cp *metadata.Checkpoint) {
				completed.Store(fmt.Sprintf("%s/%d", name, id), cp)
			}})
			build(env)
		}
	}
	restored := startJob(t, from, "counter", recorded("counter", counter(n, keys, out, true)))
	other := startJob(t, from, "counter-copy", recorded("counter-copy", counter(n, keys, outCopy, true)))
	// The first checkpoint of each shares nothing with the base.
	firstOf := func(j *liveJob) int64 {
		t.Helper()
		id := j.nextCheckpoint()
		if id <= base && j.name == "counter" {
			t.Fatalf("job %s's first checkpoint after restoring %d is %d", j.name, base, id)
		}
		// The hook runs right after the completion is reported.
		key := fmt.Sprintf("%s/%d", j.name, id)
		var cp *metadata.Checkpoint
		j.await("the metadata of checkpoint "+key, func() bool {
			v, ok := completed.Load(key)
			if ok {
				cp = v.(*metadata.Checkpoint)
			}
			return ok
		})
		var shared []string
		for p := range filePaths(cp, j.name) {
			if baseFiles[p] {
				shared = append(shared, p)
			}
		}
		if len(shared) > 0 {
			slices.Sort(shared)
			t.Fatalf("the first checkpoint (%d) of job %s, restored from checkpoint %d in NO_CLAIM mode, references %d of its files: %v",
				id, j.name, base, len(shared), shared)
		}
		return id
	}
	first := firstOf(restored)
	firstOf(other)
	checkUnchanged(t, jobDir, before, "after the first checkpoint of the restored runs")
	// Two more checkpoints: the restored run's first one is subsumed and
	// deleted, as the base would have been, had it been claimed.
	restored.nextCheckpoint()
	restored.nextCheckpoint()
	other.nextCheckpoint()
	restored.await(fmt.Sprintf("the deletion of the subsumed checkpoint %d", first), func() bool {
		return !exists(t, filepath.Join(jobDir, storage.CheckpointDir(first)))
	})
	checkUnchanged(t, jobDir, before, "while the restored run goes on")
	restored.stop()
	other.stop()
	checkUnchanged(t, jobDir, before, "after the restored runs")

	// Without the base, both resume from their own latest checkpoint.
	if err := os.RemoveAll(baseDir); err != nil {
		t.Fatal(err)
	}
	for _, p := range sharedOf(baseMeta) {
		if err := os.Remove(filepath.Join(jobDir, p)); err != nil {
			t.Fatal(err)
		}
	}
	latest := opts
	latest.Checkpoint.RestorePath = weir.RestoreLatest
	if err := runCounter(t, latest, "counter", n, keys, out); err != nil {
		t.Fatalf("resume job counter without the base checkpoint: %v", err)
	}
	checkCounterOutput(t, out, n, keys)
	if err := runCounter(t, latest, "counter-copy", n, keys, outCopy); err != nil {
		t.Fatalf("resume job counter-copy without the base checkpoint: %v", err)
	}
	checkCounterOutput(t, outCopy, n, keys)
}

// CLAIM of one of the job's own checkpoints (num-retained 1): it is
// adopted, so the first newer checkpoint subsumes it and it is deleted;
// the job directory stays, and its latest checkpoint is intact and
// resumes to an exactly-once output.
func TestClaimOwnCheckpoint(t *testing.T) {
	t.Parallel()
	const n, keys = 100_000, 200
	dir := t.TempDir()
	opts := claimOptions(t, dir, 1)
	jobDir := filepath.Join(opts.Checkpoint.Dir, "counter")
	out := filepath.Join(dir, "out")

	a := startJob(t, opts, "counter", counter(n, keys, out, true))
	a.nextCheckpoint()
	a.nextCheckpoint()
	a.stop()
	base := latestCheckpoint(t, jobDir)
	baseDir := filepath.Join(jobDir, storage.CheckpointDir(base))

	claim := opts
	claim.Checkpoint.RestorePath, claim.Checkpoint.ClaimMode = baseDir, weir.ClaimModeClaim
	b := startJob(t, claim, "counter", counter(n, keys, out, true))
	b.nextCheckpoint()
	b.await(fmt.Sprintf("the deletion of the claimed checkpoint %d once subsumed", base), func() bool { return !exists(t, baseDir) })
	b.nextCheckpoint()
	b.stop()
	if !exists(t, jobDir) {
		t.Fatalf("the job directory %s is gone", jobDir)
	}
	latest := latestCheckpoint(t, jobDir)
	verifyCheckpoint(t, jobDir, latest)
	resume := opts
	resume.Checkpoint.RestorePath = weir.RestoreLatest
	if err := runCounter(t, resume, "counter", n, keys, out); err != nil {
		t.Fatalf("resume from checkpoint %d: %v", latest, err)
	}
	checkCounterOutput(t, out, n, keys)
}

// CLAIM of a checkpoint of another job directory (num-retained 2): job
// "counter" restores the latest checkpoint of job "other" and claims it.
// It stays while it is one of the two newest, is deleted with the shared
// files no other checkpoint of "other" references once two newer ones
// completed; "other" keeps its directory and its older checkpoint, intact
// and restorable. The claiming job resumes to an exactly-once output.
func TestClaimOtherJobCheckpoint(t *testing.T) {
	t.Parallel()
	const n, keys = 100_000, 200
	dir := t.TempDir()
	opts := claimOptions(t, dir, 2)
	chk := opts.Checkpoint.Dir
	otherDir := filepath.Join(chk, "other")
	out, outOther := filepath.Join(dir, "out"), filepath.Join(dir, "out-other")

	a := startJob(t, opts, "other", counter(n, keys, out, true))
	for range 3 {
		a.nextCheckpoint()
	}
	a.stop()
	ids := completeCheckpoints(t, otherDir)
	if len(ids) != 2 {
		t.Fatalf("job other retained checkpoints %v, want 2", ids)
	}
	kept, base := ids[0], ids[1]
	baseDir := filepath.Join(otherDir, storage.CheckpointDir(base))
	keptMeta, baseMeta := readCheckpoint(t, otherDir, kept), readCheckpoint(t, otherDir, base)
	keptBefore := baseDigests(t, otherDir, keptMeta)
	keptShared := map[string]bool{}
	for _, p := range sharedOf(keptMeta) {
		keptShared[p] = true
	}
	var baseOnly []string // shared files only the claimed checkpoint references
	for _, p := range sharedOf(baseMeta) {
		if !keptShared[p] {
			baseOnly = append(baseOnly, p)
		}
	}
	copyDir(t, out, outOther)

	claim := opts
	claim.Checkpoint.RestorePath, claim.Checkpoint.ClaimMode = baseDir, weir.ClaimModeClaim
	b := startJob(t, claim, "counter", counter(n, keys, out, true))
	b.nextCheckpoint()
	if !exists(t, filepath.Join(baseDir, storage.MetadataName)) {
		t.Fatalf("the claimed checkpoint %s is gone after one newer checkpoint; num-retained is 2", baseDir)
	}
	b.nextCheckpoint()
	b.await(fmt.Sprintf("the deletion of the claimed checkpoint %s once subsumed", baseDir), func() bool {
		if exists(t, baseDir) {
			return false
		}
		for _, p := range baseOnly {
			if exists(t, filepath.Join(otherDir, p)) {
				return false
			}
		}
		return true
	})
	t.Logf("claimed checkpoint %d deleted with %d shared files only it referenced", base, len(baseOnly))
	b.nextCheckpoint()
	b.stop()

	// Job other: its directory and its other checkpoint are as they were.
	if got := completeCheckpoints(t, otherDir); !slices.Equal(got, []int64{kept}) {
		t.Fatalf("job other has checkpoints %v, want [%d]", got, kept)
	}
	checkUnchanged(t, otherDir, keptBefore, "after the claimed checkpoint was deleted")
	verifyCheckpoint(t, otherDir, kept)
	resume := opts
	resume.Checkpoint.RestorePath = weir.RestoreLatest
	// It restores (its output after it was committed once already, so
	// this second pass duplicates the records after it, but loses none).
	if err := runCounter(t, resume, "other", n, keys, outOther); err != nil {
		t.Fatalf("resume job other from its checkpoint %d: %v", kept, err)
	}
	if _, missing, _ := counterOutput(t, outOther, n, keys); missing != 0 {
		t.Fatalf("job other resumed from checkpoint %d lost %d (key, count) pairs", kept, missing)
	}

	if err := runCounter(t, resume, "counter", n, keys, out); err != nil {
		t.Fatalf("resume job counter: %v", err)
	}
	checkCounterOutput(t, out, n, keys)
}

// CLAIM of a savepoint: the run owns it, and deletes its directory (not
// the directory it is in) once a newer checkpoint subsumed it; the job
// resumes from its own checkpoints to an exactly-once output.
func TestClaimSavepoint(t *testing.T) {
	t.Parallel()
	const n, keys = 100_000, 200
	dir := t.TempDir()
	opts := claimOptions(t, dir, 1)
	out := filepath.Join(dir, "out")
	a := startJob(t, opts, "counter", counter(n, keys, out, true))
	a.nextCheckpoint()
	sp := a.savepoint(weir.SavepointOptions{Format: weir.SavepointNative}, true)

	claim := opts
	claim.Checkpoint.RestorePath, claim.Checkpoint.ClaimMode = sp, weir.ClaimModeClaim
	b := startJob(t, claim, "counter", counter(n, keys, out, true))
	b.nextCheckpoint()
	b.await("the deletion of the claimed savepoint once subsumed", func() bool { return !exists(t, sp) })
	if !exists(t, opts.Checkpoint.SavepointDir) {
		t.Fatalf("the savepoint directory %s is gone with the claimed savepoint", opts.Checkpoint.SavepointDir)
	}
	b.nextCheckpoint()
	b.stop()
	resume := opts
	resume.Checkpoint.RestorePath = weir.RestoreLatest
	if err := runCounter(t, resume, "counter", n, keys, out); err != nil {
		t.Fatalf("resume: %v", err)
	}
	checkCounterOutput(t, out, n, keys)
}

// NO_CLAIM of a savepoint, with checkpoints deleted on cancellation and
// num-retained 1: the savepoint is never deleted, nor changed, while the
// run checkpoints and subsumes, after it is canceled (its own checkpoints
// are deleted), and after a run from it finishes (likewise).
func TestNoClaimSavepointNeverDeleted(t *testing.T) {
	t.Parallel()
	const n, keys = 100_000, 200
	dir := t.TempDir()
	opts := claimOptions(t, dir, 1)
	opts.Checkpoint.Retention = "DELETE_ON_CANCELLATION"
	jobDir := filepath.Join(opts.Checkpoint.Dir, "counter")
	out := filepath.Join(dir, "out")
	a := startJob(t, opts, "counter", counter(n, keys, out, true))
	a.nextCheckpoint()
	sp := a.savepoint(weir.SavepointOptions{Format: weir.SavepointNative}, true)
	before := digests(t, sp)
	if len(before) < 2 {
		t.Fatalf("savepoint %s holds %v, want _metadata and data files", sp, slices.Collect(maps.Keys(before)))
	}
	// Outputs as they were at the savepoint, for each run from it.
	outCanceled, outFinished := filepath.Join(dir, "out-canceled"), filepath.Join(dir, "out-finished")
	copyDir(t, out, outCanceled)
	copyDir(t, out, outFinished)

	from := opts
	from.Checkpoint.RestorePath, from.Checkpoint.ClaimMode = sp, weir.ClaimModeNoClaim
	b := startJob(t, from, "counter", counter(n, keys, outCanceled, true))
	first := b.nextCheckpoint()
	b.nextCheckpoint()
	b.nextCheckpoint()
	b.await(fmt.Sprintf("the deletion of the subsumed checkpoint %d", first), func() bool {
		return !exists(t, filepath.Join(jobDir, storage.CheckpointDir(first)))
	})
	checkUnchanged(t, sp, before, "while a run from the savepoint checkpoints")
	b.stop()
	if ids := completeCheckpoints(t, jobDir); len(ids) > 0 {
		t.Fatalf("checkpoints %v left after a cancel with DELETE_ON_CANCELLATION", ids)
	}
	checkUnchanged(t, sp, before, "after a run from the savepoint was canceled")

	if err := runCounter(t, from, "counter", n, keys, outFinished); err != nil {
		t.Fatalf("run from the savepoint: %v", err)
	}
	checkCounterOutput(t, outFinished, n, keys)
	if ids := completeCheckpoints(t, jobDir); len(ids) > 0 {
		t.Fatalf("checkpoints %v left after a finished run with DELETE_ON_CANCELLATION", ids)
	}
	checkUnchanged(t, sp, before, "after a run from the savepoint finished")
}

// CLAIM of one of the job's own checkpoints that is not its newest: the
// newer checkpoints belong to a timeline the run abandons, and are not
// its to subsume; they must stay intact, although they share files with
// the claimed checkpoint, which the run subsumes and deletes. They used to
// lose those shared files once the run's own checkpoints stopped
// referencing them: complete checkpoints left behind, damaged.
func TestClaimOlderOwnCheckpointKeepsNewer(t *testing.T) {
	t.Parallel()
	const n, keys = 100_000, 200
	dir := t.TempDir()
	opts := claimOptions(t, dir, 5)
	jobDir := filepath.Join(opts.Checkpoint.Dir, "counter")
	out := filepath.Join(dir, "out")
	a := startJob(t, opts, "counter", counter(n, keys, out, true))
	for range 6 {
		a.nextCheckpoint()
	}
	a.stop()
	// Claim the newest checkpoint that shares a file with a newer one.
	ids := completeCheckpoints(t, jobDir)
	claimed, shared := int64(-1), 0
	for i := len(ids) - 2; i >= 0 && claimed < 0; i-- {
		mine := map[string]bool{}
		for _, p := range sharedOf(readCheckpoint(t, jobDir, ids[i])) {
			mine[p] = true
		}
		for _, id := range ids[i+1:] {
			for _, p := range sharedOf(readCheckpoint(t, jobDir, id)) {
				if mine[p] {
					claimed = ids[i]
					shared++
				}
			}
		}
	}
	if claimed < 0 {
		t.Skipf("no checkpoint of %v shares a file with a newer one", ids)
	}
	newer := map[int64]map[string]fileDigest{}
	for _, id := range ids {
		if id > claimed {
			newer[id] = baseDigests(t, jobDir, readCheckpoint(t, jobDir, id))
		}
	}
	t.Logf("checkpoints %v: claiming %d, which shares %d file references with newer ones", ids, claimed, shared)

	claim := opts
	claim.Checkpoint.NumRetained = 1
	claim.Checkpoint.RestorePath, claim.Checkpoint.ClaimMode = filepath.Join(jobDir, storage.CheckpointDir(claimed)), weir.ClaimModeClaim
	b := startJob(t, claim, "counter", counter(n, keys, out, true))
	b.nextCheckpoint()
	b.await(fmt.Sprintf("the deletion of the claimed checkpoint %d once subsumed", claimed), func() bool {
		return !exists(t, filepath.Join(jobDir, storage.CheckpointDir(claimed)))
	})
	// Checkpoints enough for pebble to compact the claimed checkpoint's
	// files away from the run's own.
	for range 8 {
		b.nextCheckpoint()
	}
	b.stop()
	for id, before := range newer {
		checkUnchanged(t, jobDir, before, fmt.Sprintf("checkpoint %d, newer than the claimed one", id))
		verifyCheckpoint(t, jobDir, id)
	}
	resume := opts
	resume.Checkpoint.RestorePath = weir.RestoreLatest
	if err := runCounter(t, resume, "counter", n, keys, out); err != nil {
		t.Fatalf("resume: %v", err)
	}
	// The records between the claimed checkpoint and the newest one were
	// committed by both runs: duplicates, but nothing lost.
	if _, missing, _ := counterOutput(t, out, n, keys); missing != 0 {
		t.Fatalf("%d (key, count) pairs missing", missing)
	}
}
