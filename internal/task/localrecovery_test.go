package task

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/weirstream/weir/internal/checkpoint/metadata"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/state"
)

// syncBuffer is a bytes.Buffer safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// noSnapshot stands for a keyed-state snapshot; the tests write the
// stream themselves.
type noSnapshot struct{}

func (noSnapshot) WriteStream(io.Writer) (state.KeyGroupOffsets, error) {
	return state.KeyGroupOffsets{}, nil
}
func (noSnapshot) Release() {}

// localEnv is a job's local recovery over a mem:// store, with one task
// of operator "win" (subtask 0, key groups 0..7) that writes copies.
type localEnv struct {
	t     *testing.T
	store *storage.Storage
	opts  Options
	logs  *syncBuffer
	l     *localRecovery
	task  *task
	op    *OpContext
}

func newLocalEnv(t *testing.T) *localEnv {
	t.Helper()
	s, err := storage.Open(context.Background(), "mem://")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	e := &localEnv{t: t, store: s, logs: &syncBuffer{}}
	e.opts = Options{Checkpoints: s, CheckpointJob: "job", StateDir: t.TempDir(),
		LocalRecovery: LocalRecoveryOptions{Backup: true, FromLocal: true}}
	e.opts.Logger = slog.New(slog.NewTextHandler(e.logs, nil))
	e.l = newLocalRecovery(&e.opts)
	e.op = &OpContext{Name: "window", UID: "win", Subtask: 0, KeyGroupStart: 0, KeyGroupEnd: 7}
	e.task = &task{local: e.l, store: s, storeJob: "job", targets: &targets{}}
	return e
}

// upload writes data as file name of checkpoint id to the store, teeing
// it into w's copy if tee is set.
func (e *localEnv) upload(id int64, name string, data []byte, tee func(io.Writer) io.Writer) storage.FileHandle {
	e.t.Helper()
	fw, err := e.store.CreateFile(context.Background(), "job", id, name)
	if err != nil {
		e.t.Fatal(err)
	}
	h, err := storage.WriteAll(fw, func(w io.Writer) error {
		if tee != nil {
			w = tee(w)
		}
		_, err := w.Write(data)
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return h
}

// checkpoint writes the keyed state and timers of checkpoint id to the
// store and, as the asynchronous phase does, to a local copy; it returns
// the subtask's metadata.
func (e *localEnv) checkpoint(id int64, keyed, timers []byte) metadata.Subtask {
	e.t.Helper()
	lc := e.task.beginLocalCopy(id, e.op, &OperatorSnapshot{Timers: timers, Keyed: noSnapshot{}})
	defer lc.cleanup()
	kh := e.upload(id, "op-win-0.kst", keyed, lc.teeKeyed)
	lc.keyed(&kh)
	th := e.upload(id, "op-win-0.tmr", timers, nil)
	lc.timers(timers, &th)
	lc.finish()
	return metadata.Subtask{Index: 0, KeyGroupStart: 0, KeyGroupEnd: 7, Keyed: &kh, Timers: &th}
}

// copies lists the checkpoints that have a copy on disk.
func (e *localEnv) copies() []string {
	e.t.Helper()
	got, err := filepath.Glob(filepath.Join(e.l.dirs[0], "chk-*", "*", localManifestName))
	if err != nil {
		e.t.Fatal(err)
	}
	for i, p := range got {
		got[i] = filepath.Base(filepath.Dir(filepath.Dir(p)))
	}
	slices.Sort(got)
	return slices.Compact(got)
}

func (e *localEnv) wantCopies(what string, want ...string) {
	e.t.Helper()
	if got := e.copies(); !slices.Equal(got, want) {
		e.t.Fatalf("%s: copies of %v, want %v", what, got, want)
	}
}

// The copies of the latest completed checkpoint stay, with those of
// checkpoints in progress; an abort drops its checkpoint's; a copy
// finished for a checkpoint no longer wanted is dropped by its writer; a
// completion without copies (a savepoint) prunes nothing; a deployment
// keeps only the copies of the checkpoint it restores.
func TestLocalCopyRetention(t *testing.T) {
	e := newLocalEnv(t)
	for id := int64(1); id <= 3; id++ {
		e.checkpoint(id, []byte("keyed state"), []byte("timers"))
	}
	e.wantCopies("written", "chk-1", "chk-2", "chk-3")
	e.l.complete(2)
	e.wantCopies("after completing 2", "chk-2", "chk-3")
	e.l.abort(3)
	e.wantCopies("after aborting 3", "chk-2")
	e.checkpoint(3, []byte("late"), nil) // the asynchronous phase of the aborted 3 ends late
	e.checkpoint(1, []byte("late"), nil) // and one older than the latest completed
	e.wantCopies("after late copies of 1 and 3", "chk-2")
	e.l.complete(7) // a savepoint: it has no copies
	e.wantCopies("after completing 7 (no copies)", "chk-2")

	// A copy whose checkpoint is aborted while it is being written is
	// dropped when it finishes.
	lc := e.task.beginLocalCopy(4, e.op, &OperatorSnapshot{Keyed: noSnapshot{}})
	h := e.upload(4, "op-win-0.kst", []byte("racing"), lc.teeKeyed)
	e.l.abort(4)
	lc.keyed(&h)
	lc.finish()
	e.wantCopies("after the racing abort of 4", "chk-2")
	e.checkpoint(5, []byte("next"), nil)
	e.wantCopies("after checkpoint 5", "chk-2", "chk-5")

	// A deployment restoring checkpoint 2 of its own store drops 5.
	opts := e.opts
	opts.Restore, opts.RestoreStorage, opts.RestoreJob = &metadata.Checkpoint{ID: 2}, e.store, "job"
	j := &Job{opts: opts}
	j.openLocalRecovery()
	if j.local == nil || j.local.restoreID != 2 {
		t.Fatalf("deployment restores %v, want checkpoint 2", j.local)
	}
	e.wantCopies("after deploying from 2", "chk-2")
	// One restoring another job's checkpoint keeps nothing.
	opts.RestoreJob = "other"
	j = &Job{opts: opts}
	j.openLocalRecovery()
	if j.local.restoreID != -1 {
		t.Fatalf("restoreID %d for another job's checkpoint", j.local.restoreID)
	}
	e.wantCopies("after deploying from another job")
	e.checkpoint(6, []byte("last"), nil)
	e.wantCopies("after checkpoint 6", "chk-6")
	RemoveLocalCopies(e.opts) // the job ended without retained checkpoints
	if _, err := os.Stat(e.l.dirs[0]); !os.IsNotExist(err) {
		t.Fatalf("the job's local copies are still there after RemoveLocalCopies: %v", err)
	}
	if strings.Contains(e.logs.String(), "level=WARN") {
		t.Errorf("warnings:\n%s", e.logs)
	}
}

// No copy is made for a savepoint, without checkpoint storage, or with
// local recovery off.
func TestLocalCopyNotMade(t *testing.T) {
	e := newLocalEnv(t)
	e.task.targets.put(1, Target{Store: e.store, Dir: "sp"})
	keyed := &OperatorSnapshot{Keyed: noSnapshot{}}
	if lc := e.task.beginLocalCopy(1, e.op, keyed); lc != nil {
		t.Fatal("a copy for a savepoint")
	}
	if lc := e.task.beginLocalCopy(2, e.op, &OperatorSnapshot{Lists: []metadata.List{{Name: "l"}}}); lc != nil {
		t.Fatal("a copy of an operator without keyed state")
	}
	if lc := e.task.beginLocalCopy(2, e.op, &OperatorSnapshot{Keyed: noSnapshot{}, Async: func(context.Context, int64, *metadata.Subtask) (int64, error) { return 0, nil }}); lc != nil {
		t.Fatal("a copy of the changelog backend's state")
	}
	if lc := e.task.beginLocalCopy(2, e.op, keyed); lc == nil {
		t.Fatal("no copy of keyed state")
	}
	opts := e.opts
	opts.LocalRecovery = LocalRecoveryOptions{}
	if l := newLocalRecovery(&opts); l != nil {
		t.Fatal("local recovery without Backup or FromLocal")
	}
	opts.LocalRecovery.FromLocal = true
	if l := newLocalRecovery(&opts); l == nil {
		t.Fatal("FromLocal does not imply Backup")
	}
	opts.Checkpoints = nil
	if l := newLocalRecovery(&opts); l != nil {
		t.Fatal("local recovery without checkpoint storage")
	}
}

// restoreShare is subtask 0's share (key groups 0..7, or kgEnd) of
// checkpoint id holding st, restored with e's local recovery.
func (e *localEnv) restoreShare(id int64, st metadata.Subtask, kgEnd int) *RestoredState {
	e.t.Helper()
	opts := e.opts
	opts.Restore = &metadata.Checkpoint{Version: metadata.Version, ID: id, Operators: []metadata.Operator{
		{UID: "win", Name: "window", Parallelism: 1, MaxParallelism: 8, Subtasks: []metadata.Subtask{st}},
	}}
	opts.RestoreStorage, opts.RestoreJob = e.store, "job"
	restored, err := mapRestoredState(restoreGraph(8), opts.Restore)
	if err != nil {
		e.t.Fatal(err)
	}
	j := &Job{ctx: context.Background(), opts: opts, restored: restored}
	j.openLocalRecovery()
	return restored["win"].forSubtask(0, 1, 0, kgEnd, j.openRestored)
}

func readAll(t *testing.T, r *RestoredState, h storage.FileHandle) []byte {
	t.Helper()
	rc, err := r.Open(h)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// A restore uses a copy that matches exactly and reads nothing from the
// store; a missing, damaged or mismatched copy, or another key-group
// range, falls back to the store with a warning that says why; a local
// file whose checksum fails is read from the store alone.
func TestLocalCopyRestore(t *testing.T) {
	keyed := bytes.Repeat([]byte("keyed "), 1000)
	timers := []byte("timers")
	for _, c := range []struct {
		name   string
		damage func(e *localEnv, dir string, st *metadata.Subtask)
		kgEnd  int
		// warn is the expected warning; "" for a restore from the copy.
		warn string
		// store: bytes read from the store.
		store int64
	}{
		{name: "intact", kgEnd: 7},
		{name: "missing", kgEnd: 7, warn: "its local copy of checkpoint 2 is missing", store: int64(len(keyed) + len(timers)),
			damage: func(e *localEnv, dir string, st *metadata.Subtask) { os.RemoveAll(dir) }},
		{name: "no manifest", kgEnd: 7, warn: "its local copy of checkpoint 2 is missing", store: int64(len(keyed) + len(timers)),
			damage: func(e *localEnv, dir string, st *metadata.Subtask) { os.Remove(filepath.Join(dir, localManifestName)) }},
		{name: "damaged manifest", kgEnd: 7, warn: "its local copy of checkpoint 2 is damaged (manifest:", store: int64(len(keyed) + len(timers)),
			damage: func(e *localEnv, dir string, st *metadata.Subtask) {
				os.WriteFile(filepath.Join(dir, localManifestName), []byte(`{"version":1,"checkp`), 0o644)
			}},
		{name: "manifest of a newer version", kgEnd: 7, warn: "manifest version 2, want 1", store: int64(len(keyed) + len(timers)),
			damage: func(e *localEnv, dir string, st *metadata.Subtask) {
				os.WriteFile(filepath.Join(dir, localManifestName), []byte(`{"version":2}`), 0o644)
			}},
		{name: "truncated file", kgEnd: 7, warn: "is damaged (", store: int64(len(keyed) + len(timers)),
			damage: func(e *localEnv, dir string, st *metadata.Subtask) {
				os.Truncate(filepath.Join(dir, localKeyedName), 10)
			}},
		{name: "rescaled", kgEnd: 3, warn: "holds key groups [0, 7] and the subtask now owns [0, 3] (the job was rescaled)",
			store: int64(len(keyed) + len(timers))},
		{name: "other upload", kgEnd: 7, warn: "does not match the checkpoint: the keyed-state file differs", store: int64(len(keyed) + len(timers)),
			damage: func(e *localEnv, dir string, st *metadata.Subtask) {
				h := e.upload(2, "op-win-0-b.kst", keyed, nil)
				st.Keyed = &h
			}},
		{name: "corrupt content", kgEnd: 7, warn: `The local copy of chk-2/op-win-0.kst of checkpoint 2 for operator \"window\" subtask 0 is damaged: reading it from checkpoint storage." err="checksum`,
			store: int64(len(keyed)),
			damage: func(e *localEnv, dir string, st *metadata.Subtask) {
				p := filepath.Join(dir, localKeyedName)
				data, _ := os.ReadFile(p)
				data[len(data)/2] ^= 1
				os.WriteFile(p, data, 0o644)
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newLocalEnv(t)
			e.checkpoint(1, []byte("older"), nil)
			st := e.checkpoint(2, keyed, timers)
			e.l.complete(2)
			if c.damage != nil {
				c.damage(e, e.l.subtaskDir(2, "win", 0), &st)
			}
			r := e.restoreShare(2, st, c.kgEnd)
			if got := readAll(t, r, *st.Keyed); !bytes.Equal(got, keyed) {
				t.Fatalf("keyed state: read %q", got)
			}
			if got := readAll(t, r, *st.Timers); !bytes.Equal(got, timers) {
				t.Fatalf("timers: read %q", got)
			}
			logs := e.logs.String()
			if c.warn == "" {
				if !strings.Contains(logs, "Restoring operator \\\"window\\\" subtask 0 from its local copy of checkpoint 2.") || strings.Contains(logs, "level=WARN") {
					t.Errorf("logs do not say subtask 0 restored from its local copy, without warnings:\n%s", logs)
				}
			} else if !strings.Contains(logs, "level=WARN") || !strings.Contains(logs, c.warn) {
				t.Errorf("no warning %q:\n%s", c.warn, logs)
			}
			total := int64(len(keyed) + len(timers))
			if store, local := r.storeBytes.Load(), r.localBytes.Load(); store != c.store || local != total-c.store {
				t.Errorf("read %d bytes from the store and %d from the copy, want %d and %d", store, local, c.store, total-c.store)
			}
		})
	}
}

// FetchFile links immutable files of a copy, copies the others, and
// downloads what the copy does not have.
func TestLocalCopyFetchFile(t *testing.T) {
	e := newLocalEnv(t)
	sst, manifest, other := []byte("sstable"), []byte("MANIFEST"), []byte("elsewhere")
	// A native copy made by hand: the layout beginLocalCopy/native makes.
	hs := e.upload(3, "op-win-0-000005.sst", sst, nil)
	hm := e.upload(3, "op-win-0-MANIFEST-000001", manifest, nil)
	ho := e.upload(3, "op-win-0-OTHER", other, nil)
	native := &metadata.NativeState{Registry: []byte(`{"version":1}`), Files: []metadata.NativeFile{
		{Name: "000005.sst", Handle: hs, Shared: true}, {Name: "MANIFEST-000001", Handle: hm}}}
	dir := e.l.subtaskDir(3, "win", 0)
	for name, data := range map[string][]byte{"000005.sst": sst, "MANIFEST-000001": manifest} {
		if err := os.MkdirAll(filepath.Join(dir, localNativeDir), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, localNativeDir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m := localManifest{Version: localManifestVersion, Checkpoint: 3, Store: e.l.store, Job: "job", UID: "win", Subtask: 0,
		KeyGroupEnd: 7, Format: localFormatNative, Native: native}
	if err := writeLocalManifest(dir, &m); err != nil {
		t.Fatal(err)
	}
	st := metadata.Subtask{Index: 0, KeyGroupEnd: 7, Native: native}
	r := e.restoreShare(3, st, 7)
	db := t.TempDir()
	for _, f := range native.Files {
		if err := r.FetchFile(f.Handle, filepath.Join(db, f.Name), f.Shared); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.FetchFile(ho, filepath.Join(db, "sub", "OTHER"), false); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string][]byte{"000005.sst": sst, "MANIFEST-000001": manifest, "sub/OTHER": other} {
		if got, err := os.ReadFile(filepath.Join(db, name)); err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: %q, %v; want %q", name, got, err, want)
		}
	}
	same := func(name string) bool {
		a, _ := os.Stat(filepath.Join(db, name))
		b, _ := os.Stat(filepath.Join(dir, localNativeDir, name))
		return a != nil && b != nil && os.SameFile(a, b)
	}
	if !same("000005.sst") || same("MANIFEST-000001") {
		t.Errorf("sstable hard-linked %v (want true), MANIFEST hard-linked %v (want false: a copy)", same("000005.sst"), same("MANIFEST-000001"))
	}
	if store, local := r.storeBytes.Load(), r.localBytes.Load(); store != int64(len(other)) || local != int64(len(sst)+len(manifest)) {
		t.Errorf("read %d bytes from the store and %d from the copy, want %d and %d", store, local, len(other), len(sst)+len(manifest))
	}
}
