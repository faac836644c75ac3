package keyed

import (
	"fmt"

	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/state"
	"github.com/weirstream/weir/internal/task"
)

// Snapshot is the keyed part of a checkpoint's synchronous phase: it adds
// the frozen keyed state and the timers to s. The strategy follows
// opts.Format: the configured one (changelog, native incremental or
// canonical), or the canonical stream or native files when the trigger
// asks for them (a savepoint).
//
// Incremental checkpoints of the pebble backend: the synchronous phase
// flushes the database and hard-links its files into a local snapshot
// directory (state.TakeNativeSnapshot); the asynchronous phase uploads
// them (upload.Native), except the shared files a completed checkpoint
// already uploaded, which it references. The runtime's upload.Tracker
// decides which uploads are reusable.
func (rt *Runtime) Snapshot(id int64, opts checkpoint.Options, s *task.OperatorSnapshot) error {
	// The trigger's newest completed checkpoint is complete whether or not
	// its notification arrived yet: reuse builds on it from now on, which
	// is what the shared-state registry counts on.
	rt.uploads.Confirm(opts.LastCompleted)
	s.Schema = rt.schema.snapshot()
	if rt.cl != nil && rt.cl.w != nil && opts.Format == checkpoint.FormatConfigured {
		return rt.cl.snapshot(id, s)
	}
	s.Timers = rt.timers.AppendSnapshot(nil, rt.op.KeyGroupStart, rt.op.KeyGroupEnd)
	inner := rt.backend
	if rt.cl != nil {
		inner = rt.cl.cb.Inner()
		if err := rt.cl.snapshotPending(s); err != nil {
			return err
		}
	}
	native := opts.Format == checkpoint.FormatNative || (opts.Format == checkpoint.FormatConfigured && rt.op.Incremental)
	if pb, ok := inner.(*state.PebbleBackend); ok && native {
		return rt.nativeSnapshot(pb, id, s)
	}
	ks, err := state.TakeSnapshot(inner)
	if err != nil {
		return err
	}
	s.Keyed = ks
	return nil
}

// nativeSnapshot is the keyed part of an incremental checkpoint.
func (rt *Runtime) nativeSnapshot(pb *state.PebbleBackend, id int64, s *task.OperatorSnapshot) error {
	ns, err := pb.TakeNativeSnapshot(fmt.Sprintf("%s.chk-%d", rt.op.StateDir, id))
	if err != nil {
		return err
	}
	s.Native = &task.NativeUpload{Snap: ns, Reuse: rt.uploads.Reusable(ns.Files), Uploaded: rt.uploads.Uploaded}
	return nil
}

// NotifyCheckpointComplete makes the checkpoint's uploads reusable.
func (rt *Runtime) NotifyCheckpointComplete(id int64) error {
	rt.uploads.Confirm(id)
	if rt.cl != nil {
		rt.cl.notify(id, true)
	}
	return nil
}

// NotifyCheckpointAborted forgets the checkpoint's uploads.
func (rt *Runtime) NotifyCheckpointAborted(id int64) error {
	rt.uploads.Abort(id)
	if rt.cl != nil {
		rt.cl.notify(id, false)
	}
	return nil
}
