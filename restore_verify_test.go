package weir_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/internal/checkpoint/metadata"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/task"
	"github.com/weirstream/weir/sink"
)

// cloneCheckpoint writes checkpoint to of the job in jobDir as a copy of
// checkpoint from: the same state, every data file copied (files of
// chk-<from> into chk-<to>, shared files under a new name), so that
// damaging a file of the copy leaves checkpoint from intact. It stands for
// a newer checkpoint whose output was never committed: falling back from
// it to checkpoint from must give exactly-once output. It returns the
// copy's files, relative to jobDir.
func cloneCheckpoint(t *testing.T, jobDir string, from, to int64) []string {
	t.Helper()
	ctx := context.Background()
	s, err := storage.Open(ctx, filepath.Dir(jobDir))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	job := filepath.Base(jobDir)
	payload, err := s.ReadMetadata(ctx, job, from)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := metadata.Decode(payload)
	if err != nil {
		t.Fatal(err)
	}
	var copied []string
	relocate := func(h *storage.FileHandle) {
		var dst string
		if rest, ok := strings.CutPrefix(h.Path, storage.CheckpointDir(from)+"/"); ok {
			dst = storage.CheckpointDir(to) + "/" + rest
		} else {
			dst = fmt.Sprintf("%s/c%d-%s", filepath.Dir(h.Path), to, filepath.Base(h.Path))
		}
		data, err := os.ReadFile(filepath.Join(jobDir, h.Path))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(jobDir, filepath.Dir(dst)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(jobDir, dst), data, 0o644); err != nil {
			t.Fatal(err)
		}
		h.Path = dst
		copied = append(copied, dst)
	}
	for i := range cp.Operators {
		for j := range cp.Operators[i].Subtasks {
			st := &cp.Operators[i].Subtasks[j]
			for _, h := range []*storage.FileHandle{st.Keyed, st.Timers} {
				if h != nil {
					relocate(h)
				}
			}
			if st.Native != nil {
				for k := range st.Native.Files {
					relocate(&st.Native.Files[k].Handle)
					st.Native.Files[k].New = true
				}
			}
			if st.Pending != nil {
				relocate(&st.Pending.File)
			}
			if c := st.Changelog; c != nil {
				for k := range c.Segments {
					relocate(&c.Segments[k].File)
				}
				for e := range c.Earlier {
					for k := range c.Earlier[e].Segments {
						relocate(&c.Earlier[e].Segments[k].File)
					}
				}
			}
		}
	}
	cp.ID = to
	payload, err = metadata.Encode(cp)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.WriteMetadata(ctx, job, to, payload); err != nil {
		t.Fatal(err)
	}
	return copied
}

// truncateHalf cuts the file to half its size and returns its size before
// and after.
func truncateHalf(t *testing.T, path string) (before, after int64) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() < 2 {
		t.Fatalf("%s has %d bytes: too small to truncate", path, fi.Size())
	}
	if err := os.Truncate(path, fi.Size()/2); err != nil {
		t.Fatal(err)
	}
	return fi.Size(), fi.Size() / 2
}

// snapshotDir returns every regular file under dir with its content.
func snapshotDir(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		files[p] = string(data)
		return err
	})
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return files
}

// A checkpoint whose _metadata is intact but one of whose data files is
// damaged (a keyed-state file of a full checkpoint, a shared .sst of an
// incremental one, a changelog segment) is verified before anything
// starts: named explicitly it is refused with an error that names the
// file and what is wrong, and nothing starts; `latest` skips it with a
// warning naming the file and restores the checkpoint before it, and the
// output is exactly once. It used to be restored, fail, and be restored
// again forever.
func TestRestoreVerifiesDataFiles(t *testing.T) {
	t.Parallel()
	changelog := func(o *weir.Options) {
		o.Changelog = weir.ChangelogOptions{Enabled: true, MaterializeInterval: time.Hour}
	}
	for _, c := range []struct {
		name, backend string
		extra         func(*weir.Options)
		damage        func(file string) bool // which file of the copy to truncate
	}{
		{"kst", weir.BackendHashMap, nil, func(f string) bool { return strings.HasSuffix(f, ".kst") }},
		{"shared-sst", weir.BackendPebble, func(o *weir.Options) { o.Checkpoint.Incremental = true },
			func(f string) bool { return strings.HasPrefix(f, "shared/") && strings.HasSuffix(f, ".sst") }},
		{"changelog-segment", weir.BackendHashMap, changelog,
			func(f string) bool { return strings.HasPrefix(f, "shared/") && strings.HasSuffix(f, ".log") }},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			chk := filepath.Join(dir, "chk")
			jobDir := filepath.Join(chk, "counter")
			if _, logs, err := verifyRun(t, dir, chk, c.backend, "", 3, c.extra); !errors.Is(err, context.Canceled) {
				t.Fatalf("first run: %v, want it canceled after 3 checkpoints\n%s", err, logs)
			}
			ids := completeCheckpoints(t, jobDir)
			if len(ids) == 0 {
				t.Fatal("the first run left no complete checkpoint")
			}
			intact := ids[len(ids)-1]
			damaged := intact + 1
			copied := cloneCheckpoint(t, jobDir, intact, damaged)
			i := slices.IndexFunc(copied, c.damage)
			if i < 0 {
				t.Fatalf("checkpoint %d has no file to damage: %v", intact, copied)
			}
			file := filepath.Join(jobDir, copied[i])
			before, after := truncateHalf(t, file)
			t.Logf("truncated %s from %d to %d bytes", copied[i], before, after)

			// Named explicitly: refused, nothing starts.
			outBefore, chkBefore := snapshotDir(t, filepath.Join(dir, "out")), snapshotDir(t, chk)
			named := filepath.Join(jobDir, storage.CheckpointDir(damaged))
			done, logs, err := verifyRun(t, dir, chk, c.backend, named, 0, c.extra)
			want := fmt.Sprintf("cannot restore: checkpoint %s: data file %s: size %d, want %d", named, file, after, before)
			if !errors.Is(err, weir.ErrNoCheckpoint) || err.Error() != want {
				t.Fatalf("restore of the damaged checkpoint:\n got %v\nwant %s\n%s", err, want, logs)
			}
			if len(done) != 0 || strings.Contains(logs.String(), "job started") || strings.Contains(logs.String(), "Restoring job") {
				t.Fatalf("the job started (checkpoints %v):\n%s", done, logs)
			}
			if outAfter := snapshotDir(t, filepath.Join(dir, "out")); !mapsEqual(outBefore, outAfter) {
				t.Fatalf("the output changed although nothing should have started")
			}
			if chkAfter := snapshotDir(t, chk); !mapsEqual(chkBefore, chkAfter) {
				t.Fatalf("the checkpoint directory changed although nothing should have started")
			}

			// latest: falls back to the intact checkpoint, with a warning.
			_, logs, err = verifyRun(t, dir, chk, c.backend, weir.RestoreLatest, 0, c.extra)
			if err != nil {
				t.Fatalf("resumed run: %v\n%s", err, logs)
			}
			var warning string
			for _, l := range strings.Split(logs.String(), "\n") {
				if strings.Contains(l, "level=WARN") && strings.Contains(l, "skipping damaged checkpoint") {
					warning = l
				}
			}
			for _, w := range []string{fmt.Sprintf("checkpoint=%d", damaged), "file=" + file, fmt.Sprintf("size %d, want %d", after, before)} {
				if !strings.Contains(warning, w) {
					t.Errorf("warning %q lacks %q\n%s", warning, w, logs)
				}
			}
			if w := fmt.Sprintf("Restoring job counter from checkpoint %d.", intact); !strings.Contains(logs.String(), w) {
				t.Errorf("logs lack %q:\n%s", w, logs)
			}
			checkCounterOutput(t, filepath.Join(dir, "out"), 150_000, 97)
		})
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// A missing data file is damage too; so is a file of the right size with
// other content. Named explicitly, the checkpoint is refused with the
// reason.
func TestRestoreNamedCheckpointMissingOrChangedFile(t *testing.T) {
	dir := t.TempDir()
	chk := filepath.Join(dir, "chk")
	jobDir := filepath.Join(chk, "counter")
	if _, logs, err := verifyRun(t, dir, chk, weir.BackendHashMap, "", 2, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("first run: %v\n%s", err, logs)
	}
	ids := completeCheckpoints(t, jobDir)
	if len(ids) == 0 {
		t.Fatal("no checkpoint")
	}
	named := filepath.Join(jobDir, storage.CheckpointDir(ids[len(ids)-1]))
	ksts, _ := filepath.Glob(filepath.Join(named, "*.kst"))
	if len(ksts) != 2 {
		t.Fatalf("want 2 keyed-state files in %s, got %v", named, ksts)
	}
	slices.Sort(ksts)
	if err := os.Remove(ksts[0]); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(ksts[1])
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0x40
	if err := os.WriteFile(ksts[1], data, 0o644); err != nil {
		t.Fatal(err)
	}
	_, logs, err := verifyRun(t, dir, chk, weir.BackendHashMap, named, 0, nil)
	if !errors.Is(err, weir.ErrNoCheckpoint) {
		t.Fatalf("err = %v, want ErrNoCheckpoint\n%s", err, logs)
	}
	for _, w := range []string{"data file " + ksts[0] + ": missing", "data file " + ksts[1] + ": checksum mismatch (CRC-32C "} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q lacks %q", err, w)
		}
	}
}

// Every complete checkpoint damaged: latest is an error naming each, and
// nothing starts.
func TestRestoreLatestWithoutIntactCheckpoint(t *testing.T) {
	dir := t.TempDir()
	chk := filepath.Join(dir, "chk")
	jobDir := filepath.Join(chk, "counter")
	if _, logs, err := verifyRun(t, dir, chk, weir.BackendHashMap, "", 2, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("first run: %v\n%s", err, logs)
	}
	ids := completeCheckpoints(t, jobDir)
	if len(ids) != 1 {
		t.Fatalf("checkpoints %v, want 1 retained", ids)
	}
	ksts, _ := filepath.Glob(filepath.Join(jobDir, storage.CheckpointDir(ids[0]), "*.kst"))
	if len(ksts) == 0 {
		t.Fatal("no keyed-state file")
	}
	if err := os.Remove(ksts[0]); err != nil {
		t.Fatal(err)
	}
	done, logs, err := verifyRun(t, dir, chk, weir.BackendHashMap, weir.RestoreLatest, 0, nil)
	want := fmt.Sprintf("cannot restore: job %q has no checkpoint under %s that can be restored: checkpoint %d: data file %s: missing", "counter", chk, ids[0], ksts[0])
	if !errors.Is(err, weir.ErrNoCheckpoint) || err.Error() != want {
		t.Fatalf("err:\n got %v\nwant %s\n%s", err, want, logs)
	}
	if len(done) != 0 || strings.Contains(logs.String(), "job started") {
		t.Fatalf("the job started:\n%s", logs)
	}
}

// When a running job fails and restarts from its latest checkpoint, and a
// data file of that checkpoint was damaged meanwhile (cut short, or changed
// in place), the restore fails with task.ErrRestoreData, naming the file:
// the error a runner classifies as not restartable (restoring the same
// checkpoint again fails the same way).
func TestRestartFromDamagedCheckpointIsRestoreDataError(t *testing.T) {
	for _, c := range []struct {
		name   string
		damage func(t *testing.T, path string)
	}{
		{"truncated", func(t *testing.T, path string) { truncateHalf(t, path) }},
		{"changed", func(t *testing.T, path string) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Error(err)
				return
			}
			data[len(data)/2] ^= 0x40
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Error(err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			chk := filepath.Join(dir, "chk")
			logs := &lockedBuffer{}
			opts := weir.Options{Parallelism: 2, StateDir: filepath.Join(dir, "state"), Logger: newTextLogger(logs),
				Checkpoint: weir.CheckpointOptions{Interval: 10 * time.Millisecond, Dir: chk},
				Restart:    weir.RestartOptions{Type: "fixed-delay", FixedDelayAttempts: 1000, FixedDelay: time.Millisecond}}
			var (
				fail, failed atomic.Bool
				mu           sync.Mutex
				damaged      []string
			)
			// From checkpoint 3 on, every completed checkpoint gets a keyed
			// state file damaged (so that whichever is the latest at the
			// restart is damaged), and the count function fails once.
			testHooks := (weir.TestHooks{Completed: func(id int64, cp *metadata.Checkpoint) {
				if id < 3 {
					return
				}
				op, ok := cp.Operator("count")
				if !ok || op.Subtasks[0].Keyed == nil {
					t.Errorf("checkpoint %d has no keyed state for the count operator", id)
					return
				}
				path := filepath.Join(chk, "counter", filepath.FromSlash(op.Subtasks[0].Keyed.Path))
				c.damage(t, path)
				mu.Lock()
				damaged = append(damaged, path)
				mu.Unlock()
				fail.Store(true)
			}})
			env := weir.NewEnvironment(opts)
			weir.SetTestHooks(env, testHooks)
			counterJobWith(env, 150_000, 97, sink.Files(filepath.Join(dir, "out"), func(s string) string { return s }), counterHooks{
				fail: func(int, int64) bool { return fail.Load() && failed.CompareAndSwap(false, true) },
			})
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			res, err := env.ExecuteResult(ctx, "counter")
			if !errors.Is(err, task.ErrRestoreData) {
				t.Fatalf("err = %v, want task.ErrRestoreData\n%s", err, logs)
			}
			t.Logf("the restore failed: %v", err)
			mu.Lock()
			defer mu.Unlock()
			if !slices.ContainsFunc(damaged, func(p string) bool {
				return strings.Contains(err.Error(), strings.TrimPrefix(p, filepath.Join(chk, "counter")+string(filepath.Separator)))
			}) {
				t.Errorf("error %q names none of the damaged files %v", err, damaged)
			}
			// One restart after the injected failure; the restore from the
			// damaged checkpoint then fails the job at once, however many
			// attempts the strategy would still allow.
			if res.Restarts != 1 {
				t.Errorf("%d restarts, want 1 (a damaged checkpoint is not restarted from again)", res.Restarts)
			}
		})
	}
}
