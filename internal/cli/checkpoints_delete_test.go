package cli

import (
	"context"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/weirstream/weir/internal/checkpoint/metadata"
	"github.com/weirstream/weir/internal/checkpoint/pins"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/runner"
)

// writeSharingJob lays out job "orders" under a fresh directory (returned)
// with three incremental checkpoints that share files:
//   - chk-1: shared/a.sst (100 B) and shared/b.sst (50 B), private
//     chk-1/MANIFEST-1 (20 B);
//   - chk-2: shared/a.sst again, shared/c.sst (70 B), chk-2/MANIFEST-2
//     (25 B), and operator "window" with chk-2/window-0.kst (5 B);
//   - chk-3: shared/c.sst again, shared/d.sst (30 B), chk-3/MANIFEST-3
//     (10 B).
//
// Deleting chk-1 frees 70 B of data files (b.sst and its MANIFEST),
// chk-2 30 B, chk-3 40 B.
func writeSharingJob(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	s, err := storage.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const job = "orders"
	a := writeDataFile(t, s, job, 0, true, "a.sst", 100)
	b := writeDataFile(t, s, job, 0, true, "b.sst", 50)
	c := writeDataFile(t, s, job, 0, true, "c.sst", 70)
	d := writeDataFile(t, s, job, 0, true, "d.sst", 30)
	man := map[int64]storage.FileHandle{
		1: writeDataFile(t, s, job, 1, false, "MANIFEST-1", 20),
		2: writeDataFile(t, s, job, 2, false, "MANIFEST-2", 25),
		3: writeDataFile(t, s, job, 3, false, "MANIFEST-3", 10),
	}
	win := writeDataFile(t, s, job, 2, false, "window-0.kst", 5)
	shared := map[int64][]storage.FileHandle{1: {a, b}, 2: {a, c}, 3: {c, d}}
	for id := int64(1); id <= 3; id++ {
		files := []metadata.NativeFile{{Name: "MANIFEST", Handle: man[id]}}
		for _, h := range shared[id] {
			files = append(files, metadata.NativeFile{Name: filepath.Base(h.Path), Handle: h, Shared: true})
		}
		m := metadata.Checkpoint{Job: job, ID: id, Bytes: 1, Operators: []metadata.Operator{{UID: "keyed", Parallelism: 1, MaxParallelism: 128,
			Subtasks: []metadata.Subtask{{KeyGroupEnd: 127, Native: &metadata.NativeState{Files: files}}}}}}
		if id == 2 {
			m.Operators = append(m.Operators, metadata.Operator{UID: "window", Parallelism: 1, MaxParallelism: 128,
				Subtasks: []metadata.Subtask{{KeyGroupEnd: 127, Keyed: &win}}})
		}
		writeMetadataOf(t, s, m)
	}
	return dir
}

func writeMetadataOf(t *testing.T, s *storage.Storage, m metadata.Checkpoint) {
	t.Helper()
	payload, err := metadata.Encode(&m)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.WriteMetadata(context.Background(), m.Job, m.ID, payload); err != nil {
		t.Fatal(err)
	}
}

// tree returns every file under dir with its size.
func tree(t *testing.T, dir string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		fi, err := e.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = fi.Size()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// wantTree fails the test unless dir holds exactly the files of want.
func wantTree(t *testing.T, dir string, want map[string]int64) {
	t.Helper()
	if got := tree(t, dir); !maps.Equal(got, want) {
		t.Errorf("files under %s:\n%v\nwant\n%v", dir, slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
	}
}

// wantRestorable fails the test unless every file of each checkpoint of
// orders is present and intact.
func wantRestorable(t *testing.T, dir string, ids ...int64) {
	t.Helper()
	ctx := context.Background()
	s, err := storage.OpenExisting(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, id := range ids {
		payload, err := s.ReadMetadata(ctx, "orders", id)
		if err != nil {
			t.Fatalf("checkpoint %d: %v", id, err)
		}
		m, err := metadata.Decode(payload)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.VerifyFiles(ctx, "orders", m.Files()); err != nil {
			t.Errorf("checkpoint %d is not restorable: %v", id, err)
		}
	}
}

func TestCheckpointsInspectSharing(t *testing.T) {
	dir := writeSharingJob(t)
	jobDir := filepath.Join(dir, "orders")
	r := runCLI(t, "checkpoints", "inspect", jobDir, "--json")
	r.want(t, ExitOK)
	const (
		chk1 = `{"id":1,"path":"chk-1","checkpointedSize":1,"fullSize":170,"freedByDelete":70,"restoredBy":[],"files":[
			{"path":"chk-1/MANIFEST-1","size":20,"shared":false},
			{"path":"shared/a.sst","size":100,"shared":true,"sharedWith":[2]},
			{"path":"shared/b.sst","size":50,"shared":true}]}`
		chk2 = `{"id":2,"path":"chk-2","checkpointedSize":1,"fullSize":200,"freedByDelete":30,"restoredBy":[],"files":[
			{"path":"chk-2/MANIFEST-2","size":25,"shared":false},
			{"path":"chk-2/window-0.kst","size":5,"shared":false},
			{"path":"shared/a.sst","size":100,"shared":true,"sharedWith":[1]},
			{"path":"shared/c.sst","size":70,"shared":true,"sharedWith":[3]}]}`
		chk3 = `{"id":3,"path":"chk-3","checkpointedSize":1,"fullSize":110,"freedByDelete":40,"restoredBy":[],"files":[
			{"path":"chk-3/MANIFEST-3","size":10,"shared":false},
			{"path":"shared/c.sst","size":70,"shared":true,"sharedWith":[2]},
			{"path":"shared/d.sst","size":30,"shared":true}]}`
	)
	wantJSON(t, r.stdout, `{"checkpoints":[`+chk1+`,`+chk2+`,`+chk3+`]}`)

	// One checkpoint is compared with the rest of its job too, also when
	// named by its _metadata file.
	for _, p := range []string{filepath.Join(jobDir, "chk-2"), filepath.Join(jobDir, "chk-2", "_metadata")} {
		r = runCLI(t, "checkpoints", "inspect", p, "--json")
		r.want(t, ExitOK)
		wantJSON(t, r.stdout, `{"checkpoints":[`+chk2+`]}`)
	}

	r = runCLI(t, "checkpoints", "inspect", filepath.Join(jobDir, "chk-2"))
	r.want(t, ExitOK)
	wantLines(t, r.stdout, []string{
		"chk-2: checkpointed 1 B, full 200 B, 4 files, deleting it frees 30 B",
		"PATH                SIZE   SHARED",
		"chk-2/MANIFEST-2    25 B   no",
		"chk-2/window-0.kst  5 B    no",
		"shared/a.sst        100 B  yes (also chk-1)",
		"shared/c.sst        70 B   yes (also chk-3)",
	})
}

func TestCheckpointsDeleteDryRun(t *testing.T) {
	dir := writeSharingJob(t)
	before := tree(t, dir)
	r := runCLI(t, "checkpoints", "delete", filepath.Join(dir, "orders", "chk-1"), "--dry-run")
	r.want(t, ExitOK)
	if r.stderr != "" {
		t.Errorf("stderr:\n%s", r.stderr)
	}
	meta := before["orders/chk-1/_metadata"]
	wantLines(t, r.stdout, []string{
		"would delete checkpoint 1 of job orders (" + filepath.Join(dir, "orders", "chk-1") + "): 3 files, " + runner.FormatBytes(70+meta),
		"PATH              SIZE",
		"chk-1/MANIFEST-1  20 B",
		"chk-1/_metadata   " + runner.FormatBytes(meta),
		"shared/b.sst      50 B",
		"kept shared/a.sst: chk-2 references it too",
		"restore records checked under " + dir,
		"dry run: nothing was deleted",
	})
	wantTree(t, dir, before)

	// The newest checkpoint: a warning, on standard error.
	r = runCLI(t, "checkpoints", "delete", filepath.Join(dir, "orders", "chk-3"), "--dry-run")
	r.want(t, ExitOK, "warning: checkpoint 3 is the newest complete checkpoint of job orders: once it is deleted, 'weir run --from latest' restores checkpoint 2")
	if !strings.Contains(r.stdout, "shared/d.sst") || !strings.Contains(r.stdout, "kept shared/c.sst: chk-2 references it too") {
		t.Errorf("stdout:\n%s", r.stdout)
	}
	wantTree(t, dir, before)
}

func TestCheckpointsDelete(t *testing.T) {
	dir := writeSharingJob(t)
	jobDir := filepath.Join(dir, "orders")
	all := tree(t, dir)
	without := func(files map[string]int64, gone ...string) map[string]int64 {
		out := maps.Clone(files)
		for _, g := range gone {
			if _, ok := out[g]; !ok {
				t.Fatalf("no file %s to take away", g)
			}
			delete(out, g)
		}
		return out
	}

	r := runCLI(t, "checkpoints", "delete", filepath.Join(jobDir, "chk-1"))
	r.want(t, ExitOK)
	if r.stderr != "" {
		t.Errorf("stderr:\n%s", r.stderr)
	}
	if !strings.HasPrefix(r.stdout, "deleted checkpoint 1 of job orders ("+filepath.Join(jobDir, "chk-1")+"): 3 files, ") ||
		!strings.Contains(r.stdout, "\nshared/b.sst      50 B\n") || !strings.Contains(r.stdout, "kept shared/a.sst: chk-2 references it too") {
		t.Errorf("stdout:\n%s", r.stdout)
	}
	left := without(all, "orders/chk-1/_metadata", "orders/chk-1/MANIFEST-1", "orders/shared/b.sst")
	wantTree(t, dir, left)
	if _, err := os.Stat(filepath.Join(jobDir, "chk-1")); !os.IsNotExist(err) {
		t.Errorf("chk-1 is still there: %v", err)
	}
	wantRestorable(t, dir, 2, 3)

	// The newest: the one before it is restored from then on. Its
	// _metadata path names it as well.
	r = runCLI(t, "checkpoints", "delete", filepath.Join(jobDir, "chk-3", "_metadata"))
	r.want(t, ExitOK, "warning: checkpoint 3 is the newest complete checkpoint of job orders: once it is deleted, 'weir run --from latest' restores checkpoint 2")
	left = without(left, "orders/chk-3/_metadata", "orders/chk-3/MANIFEST-3", "orders/shared/d.sst")
	wantTree(t, dir, left)
	wantRestorable(t, dir, 2)

	// The last one: nothing is left for --from latest.
	r = runCLI(t, "checkpoints", "delete", filepath.Join(jobDir, "chk-2"))
	r.want(t, ExitOK, "warning: checkpoint 2 is the only readable checkpoint of job orders: once it is deleted, 'weir run --from latest' finds no checkpoint to restore")
	wantTree(t, dir, map[string]int64{})
	if strings.Contains(r.stdout, "kept") {
		t.Errorf("kept a file of the last checkpoint:\n%s", r.stdout)
	}
}

// A corrupt newest checkpoint may reference any shared file: deleting an
// older one keeps them all, as the job's sweep does, and says why.
func TestCheckpointsDeleteKeepsSharedFilesOfUnknownReferences(t *testing.T) {
	dir := writeIncrementalCheckpoints(t) // chk-4 is corrupt and the newest
	jobDir := filepath.Join(dir, "orders")
	before := tree(t, dir)
	r := runCLI(t, "checkpoints", "delete", filepath.Join(jobDir, "chk-1"))
	r.want(t, ExitOK)
	if !strings.Contains(r.stdout, "kept shared/000001.sst: chk-2 references it too\n") ||
		!strings.Contains(r.stdout, "kept 1 shared file only this checkpoint references: checkpoint 4 cannot be read (not a weir checkpoint metadata file") {
		t.Errorf("stdout:\n%s", r.stdout)
	}
	wantTree(t, dir, func() map[string]int64 {
		out := maps.Clone(before)
		for _, f := range []string{"_metadata", "MANIFEST-000003", "window-0.state"} {
			delete(out, "orders/chk-1/"+f)
		}
		return out
	}())
	wantRestorable(t, dir, 2)
}

func TestCheckpointsDeleteRefusedWhileRunning(t *testing.T) {
	dir := writeSharingJob(t)
	ctx := context.Background()
	s, err := storage.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	l, err := s.LockJob(ctx, "orders", storage.LockOptions{})
	if err != nil {
		t.Fatal(err)
	}
	before := tree(t, dir)
	chk := filepath.Join(dir, "orders", "chk-1")
	for _, dry := range []bool{true, false} {
		args := []string{"checkpoints", "delete", chk}
		if dry {
			args = append(args, "--dry-run")
		}
		r := runCLI(t, args...)
		r.want(t, ExitUsage, "error: refusing to delete checkpoint "+chk+": job orders is running (pid ", "stop the job first; nothing was deleted")
		if r.stdout != "" || strings.Contains(r.stderr, "--help") {
			t.Errorf("dry run %v: stdout:\n%s\nstderr:\n%s", dry, r.stdout, r.stderr)
		}
		wantTree(t, dir, before)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	runCLI(t, "checkpoints", "delete", chk).want(t, ExitOK)
	wantRestorable(t, dir, 2, 3)
	if _, err := os.Stat(filepath.Join(dir, "orders", storage.LockFileName)); !os.IsNotExist(err) {
		t.Errorf("the delete left the job's lock file: %v", err)
	}
}

func TestCheckpointsDeleteRefusedForRestoreRecords(t *testing.T) {
	dir := writeSharingJob(t)
	ctx := context.Background()
	s, err := storage.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	root := storage.LocationOf(dir)
	chk2 := filepath.Join(dir, "orders", "chk-2")

	// A NO_CLAIM restore without a checkpoint of its own yet, by a job of
	// the same checkpoint directory.
	if err := pins.Write(ctx, s, "copy", pins.Restore{Root: root, Path: "orders/chk-2", Mode: pins.ModeNoClaim, JobID: "run1"}); err != nil {
		t.Fatal(err)
	}
	// Records of other snapshots or other roots, and released ones, do
	// not hold chk-2.
	for job, r := range map[string]pins.Restore{
		"other":    {Root: root, Path: "orders/chk-3", Mode: pins.ModeNoClaim},
		"elsewhre": {Root: "/nowhere", Path: "orders/chk-2", Mode: pins.ModeClaim},
		"done":     {Root: root, Path: "orders/chk-2", Mode: pins.ModeNoClaim, Released: true, ReleasedBy: 4},
	} {
		if err := pins.Write(ctx, s, job, r); err != nil {
			t.Fatal(err)
		}
	}
	before := tree(t, dir)
	for _, dry := range []bool{true, false} {
		args := []string{"checkpoints", "delete", chk2}
		if dry {
			args = append(args, "--dry-run")
		}
		r := runCLI(t, args...)
		r.want(t, ExitUsage, "error: refusing to delete checkpoint "+chk2+": a run that restored from it still holds it; nothing was deleted:",
			"- job copy (under "+dir+", run run1) restored from it in NO_CLAIM mode at ", "has not completed a checkpoint of its own yet")
		if strings.Contains(r.stderr, "job other") || strings.Contains(r.stderr, "job done") || strings.Contains(r.stderr, "elsewhre") || r.stdout != "" {
			t.Errorf("stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
		}
		wantTree(t, dir, before)
	}
	// inspect names the holder.
	r := runCLI(t, "checkpoints", "inspect", chk2)
	r.want(t, ExitOK)
	if !strings.Contains(r.stdout, "\nheld by job copy (under "+dir+", run run1): restored from it in NO_CLAIM mode at ") {
		t.Errorf("inspect:\n%s", r.stdout)
	}
	r = runCLI(t, "checkpoints", "inspect", chk2, "--json")
	r.want(t, ExitOK)
	if !strings.Contains(r.stdout, `"restoredBy":[{"job":"copy","jobId":"run1","mode":"NO_CLAIM","time":"`) {
		t.Errorf("inspect --json:\n%s", r.stdout)
	}

	// A CLAIM restore holds it until released, like a NO_CLAIM one ...
	if err := pins.Release(ctx, s, "copy", 1); err != nil {
		t.Fatal(err)
	}
	if err := pins.Write(ctx, s, "owner", pins.Restore{Root: root, Path: "orders/chk-2", Mode: pins.ModeClaim}); err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, "checkpoints", "delete", chk2, "--dry-run")
	r.want(t, ExitUsage, "- job owner (under "+dir+") restored from it in CLAIM mode at ", "has not completed a checkpoint of its own yet")
	if strings.Contains(r.stderr, "job copy") {
		t.Errorf("a released NO_CLAIM record still holds:\n%s", r.stderr)
	}
	// ... and once released, while its job runs: the running job owns it.
	if err := pins.Release(ctx, s, "owner", 5); err != nil {
		t.Fatal(err)
	}
	l, err := s.LockJob(ctx, "owner", storage.LockOptions{})
	if err != nil {
		t.Fatal(err)
	}
	held := tree(t, dir)
	r = runCLI(t, "checkpoints", "delete", chk2)
	r.want(t, ExitUsage, "- job owner (under "+dir+") restored from it in CLAIM mode at ", "and owns it: the running job deletes it itself once a newer checkpoint subsumes it; stop that job first")
	r = runCLI(t, "checkpoints", "inspect", chk2, "--json")
	if !strings.Contains(r.stdout, `"restoredBy":[{"job":"owner","mode":"CLAIM","time":"`) || !strings.Contains(r.stdout, `"running":true}]`) {
		t.Errorf("inspect --json:\n%s", r.stdout)
	}
	wantTree(t, dir, held)
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	runCLI(t, "checkpoints", "delete", chk2).want(t, ExitOK)
	wantRestorable(t, dir, 1, 3)

	// A record that cannot be read stops a delete: it might hold the
	// snapshot.
	if err := s.WriteJobFile(ctx, "broken", pins.FileName, []byte("{")); err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, "checkpoints", "delete", filepath.Join(dir, "orders", "chk-1"))
	r.want(t, ExitFailure, "restore records under "+dir+": restore record broken/_restored: pins: invalid restore record")
	wantRestorable(t, dir, 1, 3)
}

// A restore record in another checkpoint directory is found with --dir.
func TestCheckpointsDeleteChecksOtherDirs(t *testing.T) {
	dir := writeSharingJob(t)
	other := t.TempDir()
	ctx := context.Background()
	s, err := storage.Open(ctx, other)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := pins.Write(ctx, s, "copy", pins.Restore{Root: storage.LocationOf(dir), Path: "orders/chk-1", Mode: pins.ModeNoClaim}); err != nil {
		t.Fatal(err)
	}
	chk1 := filepath.Join(dir, "orders", "chk-1")
	r := runCLI(t, "checkpoints", "delete", chk1, "--dry-run")
	r.want(t, ExitOK)
	if !strings.HasSuffix(r.stdout, "restore records checked under "+dir+"\ndry run: nothing was deleted\n") {
		t.Errorf("stdout:\n%s", r.stdout)
	}
	r = runCLI(t, "checkpoints", "delete", chk1, "--dry-run", "--dir", other)
	r.want(t, ExitUsage, "- job copy (under "+other+") restored from it in NO_CLAIM mode")
	missing := filepath.Join(other, "absent")
	runCLI(t, "checkpoints", "delete", chk1, "--dir", missing).want(t, ExitUsage, "checkpoint directory "+missing+" does not exist")
	wantRestorable(t, dir, 1, 2, 3)
}

// Another checkpoint referencing a file in the directory of the one to
// delete (weir never writes that) stops the delete.
func TestCheckpointsDeleteRefusesCrossReferences(t *testing.T) {
	dir := writeSharingJob(t)
	ctx := context.Background()
	s, err := storage.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	writeMetadataOf(t, s, metadata.Checkpoint{Job: "orders", ID: 4, Operators: []metadata.Operator{{UID: "keyed", Parallelism: 1, MaxParallelism: 128,
		Subtasks: []metadata.Subtask{{KeyGroupEnd: 127, Keyed: &storage.FileHandle{Path: "chk-3/MANIFEST-3", Size: 10}}}}}})
	s.Close()
	before := tree(t, dir)
	chk3 := filepath.Join(dir, "orders", "chk-3")
	r := runCLI(t, "checkpoints", "delete", chk3)
	r.want(t, ExitUsage, "error: refusing to delete checkpoint "+chk3+": other checkpoints of the job reference files in its directory, and would be broken: chk-3/MANIFEST-3 (chk-4)")
	wantTree(t, dir, before)
	r = runCLI(t, "checkpoints", "inspect", chk3, "--json")
	r.want(t, ExitOK)
	if !strings.Contains(r.stdout, `{"path":"chk-3/MANIFEST-3","size":10,"shared":false,"sharedWith":[4]}`) || !strings.Contains(r.stdout, `"freedByDelete":30,`) {
		t.Errorf("inspect:\n%s", r.stdout)
	}
}

func TestCheckpointsDeleteUsageErrors(t *testing.T) {
	dir := writeIncrementalCheckpoints(t) // chk-3 incomplete, chk-4 corrupt
	jobDir := filepath.Join(dir, "orders")
	before := tree(t, dir)
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"incomplete", []string{filepath.Join(jobDir, "chk-3")}, []string{"checkpoint " + filepath.Join(jobDir, "chk-3") + " is incomplete: it has no _metadata"}},
		{"corrupt", []string{filepath.Join(jobDir, "chk-4")}, []string{"checkpoint " + filepath.Join(jobDir, "chk-4") + " is corrupt: not a weir checkpoint metadata file"}},
		{"missing", []string{filepath.Join(jobDir, "chk-9")}, []string{"checkpoint " + filepath.Join(jobDir, "chk-9") + " does not exist"}},
		{"job directory", []string{jobDir}, []string{jobDir + " is neither a checkpoint nor a savepoint: give a <job>/chk-<n> directory, a savepoint directory"}},
		{"missing directory", []string{filepath.Join(dir, "absent")}, []string{filepath.Join(dir, "absent") + " does not exist"}},
		{"no path", nil, []string{"missing argument: 'weir checkpoints delete' takes the path of a checkpoint (<dir>/<job>/chk-<n>) or a savepoint directory"}},
		{"two paths", []string{jobDir, jobDir}, []string{`unexpected argument "` + jobDir + `"`}},
		{"empty dir", []string{filepath.Join(jobDir, "chk-1"), "--dir", ""}, []string{"--dir: must not be empty"}},
		{"bad dry-run", []string{filepath.Join(jobDir, "chk-1"), "--dry-run=perhaps"}, []string{`--dry-run "perhaps": must be true or false`}},
	} {
		t.Run(tc.name, func(t *testing.T) { wantCheckpointsUsageError(t, "delete", tc.args, tc.want) })
	}
	wantTree(t, dir, before)
}

// writeSavepoint writes savepoint directory name under target: job orders,
// checkpoint 7, files op-0.kst (40 B) and op-0.tmr (6 B).
func writeSavepoint(t *testing.T, target, name string) {
	t.Helper()
	ctx := context.Background()
	s, err := storage.Open(ctx, target)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var hs []storage.FileHandle
	for file, n := range map[string]int{"op-0.kst": 40, "op-0.tmr": 6} {
		w, err := s.CreateSavepointFile(ctx, name, file)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(strings.Repeat("s", n)))
		h, err := w.Finish()
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
	}
	slices.SortFunc(hs, func(a, b storage.FileHandle) int { return strings.Compare(a.Path, b.Path) })
	payload, err := metadata.Encode(&metadata.Checkpoint{Job: "orders", ID: 7, Savepoint: true, Bytes: 46, FullBytes: 46,
		Operators: []metadata.Operator{{UID: "keyed", Parallelism: 1, MaxParallelism: 128,
			Subtasks: []metadata.Subtask{{KeyGroupEnd: 127, Keyed: &hs[0], Timers: &hs[1]}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.WriteSavepointMetadata(ctx, name, payload); err != nil {
		t.Fatal(err)
	}
}

func TestCheckpointsSavepoint(t *testing.T) {
	target := t.TempDir()
	const name = "savepoint-3f2a9c-0b1d2e3f4a5b"
	writeSavepoint(t, target, name)
	sp := filepath.Join(target, name)

	const spJSON = `{"id":7,"path":"savepoint-3f2a9c-0b1d2e3f4a5b","savepoint":true,"job":"orders","checkpointedSize":46,"fullSize":46,
		"freedByDelete":46,"restoredBy":[],"files":[
		{"path":"op-0.kst","size":40,"shared":false},
		{"path":"op-0.tmr","size":6,"shared":false}]}`
	for _, p := range []string{sp, sp + "/", filepath.Join(sp, "_metadata"), "file://" + filepath.ToSlash(sp)} {
		r := runCLI(t, "checkpoints", "inspect", p, "--json")
		r.want(t, ExitOK)
		wantJSON(t, r.stdout, `{"checkpoints":[`+spJSON+`]}`)
	}
	r := runCLI(t, "checkpoints", "inspect", sp)
	r.want(t, ExitOK)
	wantLines(t, r.stdout, []string{
		name + ": savepoint of job orders (checkpoint 7), checkpointed 46 B, full 46 B, 2 files, deleting it frees 46 B",
		"PATH      SIZE",
		"op-0.kst  40 B",
		"op-0.tmr  6 B",
	})

	// A run that restored from it (its job directory in another checkpoint
	// directory, named with --dir) holds it.
	ckDir := t.TempDir()
	ctx := context.Background()
	s, err := storage.Open(ctx, ckDir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := pins.Write(ctx, s, "orders-v2", pins.Restore{Root: storage.LocationOf(target), Path: name, Mode: pins.ModeNoClaim, JobID: "r2"}); err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, "checkpoints", "inspect", sp, "--dir", ckDir, "--json")
	r.want(t, ExitOK)
	if !strings.Contains(r.stdout, `"restoredBy":[{"job":"orders-v2","jobId":"r2","mode":"NO_CLAIM","time":`) {
		t.Errorf("inspect --dir:\n%s", r.stdout)
	}
	before := tree(t, target)
	r = runCLI(t, "checkpoints", "delete", sp, "--dir", ckDir)
	r.want(t, ExitUsage, "error: refusing to delete savepoint "+sp+": a run that restored from it still holds it", "- job orders-v2 (under "+ckDir+", run r2)")
	wantTree(t, target, before)

	if err := pins.Release(ctx, s, "orders-v2", 1); err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, "checkpoints", "delete", sp, "--dir", ckDir, "--dry-run")
	r.want(t, ExitOK)
	meta := before[name+"/_metadata"]
	wantLines(t, r.stdout, []string{
		"would delete savepoint " + name + " of job orders (checkpoint 7, " + sp + "): 3 files, " + runner.FormatBytes(46+meta),
		"PATH       SIZE",
		"_metadata  " + runner.FormatBytes(meta),
		"op-0.kst   40 B",
		"op-0.tmr   6 B",
		"restore records checked under " + target + ", " + ckDir,
		"dry run: nothing was deleted",
	})
	wantTree(t, target, before)
	r = runCLI(t, "checkpoints", "delete", sp, "--dir", ckDir)
	r.want(t, ExitOK)
	if !strings.HasPrefix(r.stdout, "deleted savepoint "+name) {
		t.Errorf("stdout:\n%s", r.stdout)
	}
	wantTree(t, target, map[string]int64{})
	if _, err := os.Stat(sp); !os.IsNotExist(err) {
		t.Errorf("the savepoint directory is still there: %v", err)
	}
}
