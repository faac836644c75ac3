package upload

import (
	"maps"
	"sync"

	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/state"
)

// Tracker records, for one operator subtask, the shared files its
// checkpoints uploaded and which of them are confirmed: reusable by later
// snapshots because their checkpoint completed. The asynchronous phase
// reports uploads from its own goroutine; the task goroutine confirms,
// aborts and reads. It is safe for concurrent use.
type Tracker struct {
	mu        sync.Mutex
	confirmed map[string]storage.FileHandle // snapshot file name -> upload
	// pending are the uploads of undecided checkpoints. Uploads reported
	// for a decided checkpoint (an asynchronous phase that finished after
	// its checkpoint was aborted) are never confirmed: the runner deletes
	// them.
	pending pendingByCheckpoint[map[string]storage.FileHandle]
}

// NewTracker returns a tracker with no uploads.
func NewTracker() *Tracker {
	return &Tracker{confirmed: map[string]storage.FileHandle{},
		pending: newPendingByCheckpoint[map[string]storage.FileHandle]()}
}

// Reusable returns the confirmed uploads of the files a snapshot has, and
// forgets the others: a file gone from the database never comes back. The
// map is the caller's.
func (u *Tracker) Reusable(files []state.NativeFile) map[string]storage.FileHandle {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := make(map[string]storage.FileHandle, len(files))
	for _, f := range files {
		if h, ok := u.confirmed[f.Name]; ok && f.Shared {
			out[f.Name] = h
		}
	}
	u.confirmed = out
	return maps.Clone(out)
}

// Confirmed returns a copy of every confirmed upload.
func (u *Tracker) Confirmed() map[string]storage.FileHandle {
	u.mu.Lock()
	defer u.mu.Unlock()
	return maps.Clone(u.confirmed)
}

// Restored makes the upload h of a restored backend's file name reusable
// at once: it belongs to a completed checkpoint of this job.
func (u *Tracker) Restored(name string, h storage.FileHandle) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.confirmed[name] = h
}

// Uploaded records the shared files the asynchronous phase of checkpoint
// id uploaded (snapshot file name to handle), unless id is decided.
func (u *Tracker) Uploaded(id int64, files map[string]storage.FileHandle) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.pending.add(id, files)
}

// Confirm makes the uploads of checkpoint id reusable. Older pending
// checkpoints did not complete (each completion is notified, in order):
// their uploads are dropped.
func (u *Tracker) Confirm(id int64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	files, _ := u.pending.complete(id)
	maps.Copy(u.confirmed, files)
}

// Abort forgets the uploads of checkpoint id, also those reported later:
// the runner deletes them.
func (u *Tracker) Abort(id int64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.pending.abort(id)
}
