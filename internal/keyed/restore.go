package keyed

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/state"
	"github.com/weirstream/weir/internal/task"
	"github.com/weirstream/weir/internal/timer"
)

// restore loads the restored keyed-state streams and timers of the
// subtask's key groups, and arms a wake-up for every restored
// processing-time timer.
func (rt *Runtime) restore(r *task.RestoredState) error {
	for _, h := range r.Keyed {
		if err := restoreFile(r, h, func(rd io.Reader) error { return state.Restore(rt.backend, rd) }); err != nil {
			return err
		}
	}
	for _, h := range r.Timers {
		err := restoreFile(r, h, func(rd io.Reader) error {
			data, err := io.ReadAll(rd)
			if err != nil {
				return err
			}
			return rt.timers.RestoreSnapshot(data, rt.op.KeyGroupStart, rt.op.KeyGroupEnd, func(eventTime bool, t timer.Timer) {
				if !eventTime {
					rt.armProcessingTime(t.Timestamp)
				}
			})
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func restoreFile(r *task.RestoredState, h storage.FileHandle, read func(io.Reader) error) error {
	f, err := r.Open(h)
	if err != nil {
		return fmt.Errorf("%s: %w", h.Path, err)
	}
	defer f.Close()
	if err := read(f); err != nil {
		return fmt.Errorf("%s: %w", h.Path, err)
	}
	return nil
}

// openNative opens the pebble backend from the native snapshots of a
// restore: the files of a snapshot of the same key-group range are
// downloaded into the database directory and opened as they are (their
// shared uploads are reusable at once when the checkpoint is this job's
// own); other ranges (rescaling) are downloaded one by one and their
// entries copied.
func (rt *Runtime) openNative(so state.Options, r *task.RestoredState) (*state.PebbleBackend, error) {
	if rt.cfg.Backend != BackendPebble {
		return nil, fmt.Errorf("%w: the snapshot holds native pebble state (an incremental checkpoint or a native savepoint), which only the pebble backend reads: restore it with state.backend.type=pebble, or, to change the state backend, take a canonical savepoint on pebble and restore that", task.ErrStateMismatch)
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
					rt.uploads.Restored(f.Name, f.Handle)
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

// downloadNative places the files of n in dir: from the subtask's local
// copy when it has them (hard links to the sstables), else downloaded.
func downloadNative(r *task.RestoredState, n task.NativeRestore, dir string) error {
	for _, f := range n.State.Files {
		if err := r.FetchFile(f.Handle, filepath.Join(dir, filepath.FromSlash(f.Name)), f.Shared); err != nil {
			_ = os.RemoveAll(dir)
			return fmt.Errorf("%s: %w", f.Handle.Path, err)
		}
	}
	return nil
}
