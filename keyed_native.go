package weir

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/state"
	"github.com/weirstream/weir/internal/task"
)

// Incremental checkpoints of the pebble backend.
//
// The synchronous phase flushes the database and hard-links its files into
// a local snapshot directory (state.TakeNativeSnapshot); the asynchronous
// phase uploads the files, except the shared (.sst) ones a completed
// checkpoint already uploaded, which it references (task.NativeUpload).
// Which uploads are confirmed is tracked here, per operator subtask: an
// upload becomes reusable only once its checkpoint completed, so a
// checkpoint never references a file that might be deleted as part of an
// aborted one.

// uploadTracker records the shared files uploaded per checkpoint and which
// of them are confirmed. The asynchronous phase adds uploads from its own
// goroutine; the task goroutine confirms and reads.
type uploadTracker struct {
	mu        sync.Mutex
	confirmed map[string]storage.FileHandle // local name -> upload
	// pending are the uploads of undecided checkpoints. Uploads reported
	// for a decided checkpoint (an asynchronous phase that finished after
	// its checkpoint was aborted) are never confirmed: the runner deletes
	// them.
	pending pendingByCheckpoint[map[string]storage.FileHandle]
}

func newUploadTracker() *uploadTracker {
	return &uploadTracker{confirmed: map[string]storage.FileHandle{},
		pending: newPendingByCheckpoint[map[string]storage.FileHandle]()}
}

// reusable returns the confirmed uploads of the files the snapshot has, and
// forgets the others: a file gone from the database never comes back.
func (u *uploadTracker) reusable(files []state.NativeFile) map[string]storage.FileHandle {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := make(map[string]storage.FileHandle, len(files))
	for _, f := range files {
		if h, ok := u.confirmed[f.Name]; ok && f.Shared {
			out[f.Name] = h
		}
	}
	u.confirmed = out
	copied := make(map[string]storage.FileHandle, len(out))
	for k, v := range out {
		copied[k] = v
	}
	return copied
}

func (u *uploadTracker) uploaded(id int64, files map[string]storage.FileHandle) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.pending.add(id, files)
}

// confirm makes the uploads of checkpoint id reusable. Older pending
// checkpoints did not complete (each completion is notified, in order):
// their uploads are dropped.
func (u *uploadTracker) confirm(id int64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	files, _ := u.pending.complete(id)
	for name, h := range files {
		u.confirmed[name] = h
	}
}

// abort forgets the uploads of checkpoint id, also those reported later:
// the runner deletes them.
func (u *uploadTracker) abort(id int64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.pending.abort(id)
}

// nativeSnapshot is the keyed part of an incremental checkpoint.
func (rt *keyedRuntime) nativeSnapshot(pb *state.PebbleBackend, id int64, s *task.OperatorSnapshot) error {
	ns, err := pb.TakeNativeSnapshot(fmt.Sprintf("%s.chk-%d", rt.op.StateDir, id))
	if err != nil {
		return err
	}
	s.Native = &task.NativeUpload{Snap: ns, Reuse: rt.uploads.reusable(ns.Files), Uploaded: rt.uploads.uploaded}
	return nil
}

// openNative opens the pebble backend from the native snapshots of a
// restore: the files of a snapshot of the same key-group range are
// downloaded into the database directory and opened as they are (their
// shared uploads are reusable at once when the checkpoint is this job's
// own); other ranges (rescaling) are downloaded one by one and their
// entries copied.
func (rt *keyedRuntime) openNative(so state.Options, r *task.RestoredState) (*state.PebbleBackend, error) {
	if rt.opts.StateBackend != BackendPebble {
		return nil, errors.New("the checkpoint holds native pebble state (incremental checkpoint): restore it with state.backend.type=pebble")
	}
	if len(r.Native) == 1 && r.Native[0].KeyGroupStart == so.KeyGroupStart && r.Native[0].KeyGroupEnd == so.KeyGroupEnd {
		n := r.Native[0]
		if err := os.RemoveAll(so.Dir); err != nil {
			return nil, err
		}
		if err := downloadNative(r, n, so.Dir); err != nil {
			return nil, err
		}
		pb, err := state.OpenPebbleFromNative(so, n.State.Registry)
		if err != nil {
			return nil, err
		}
		if r.OwnStorage {
			for _, f := range n.State.Files {
				if f.Shared {
					rt.uploads.confirmed[f.Name] = f.Handle
				}
			}
		}
		return pb, nil
	}
	pb, err := state.NewPebbleBackend(so)
	if err != nil {
		return nil, err
	}
	for i, n := range r.Native {
		dir := fmt.Sprintf("%s.restore-%d", so.Dir, i)
		err := downloadNative(r, n, dir)
		if err == nil {
			err = state.RestoreFromNative(pb, dir, n.State.Registry, n.KeyGroupStart, n.KeyGroupEnd)
		}
		_ = os.RemoveAll(dir)
		if err != nil {
			_ = pb.Close()
			return nil, err
		}
	}
	return pb, nil
}

func downloadNative(r *task.RestoredState, n task.NativeRestore, dir string) error {
	for _, f := range n.State.Files {
		if err := download(r, f.Handle, filepath.Join(dir, filepath.FromSlash(f.Name))); err != nil {
			_ = os.RemoveAll(dir)
			return fmt.Errorf("%s: %w", f.Handle.Path, err)
		}
	}
	return nil
}

func download(r *task.RestoredState, h storage.FileHandle, path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	src, err := r.Open(h)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}
