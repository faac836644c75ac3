package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/weirstream/weir/internal/checkpoint/metadata"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/task"
)

// Checkpoint files.
//
// The runner is the one deleter of files a subtask acknowledged: the
// registry (internal/checkpoint/registry) decides which may go, the
// deleter below deletes them in the background, in order. Order matters
// for crash safety: a chk-<n> directory is deleted before the shared files
// that only it referenced, so that a crash in between never leaves a
// complete checkpoint without its files; once a directory could not be
// deleted, no shared file is deleted until the next sweep, since the
// surviving checkpoint may reference it (the sweep after the attempt reads
// what survived and deletes only what nothing references).

// sharedPaths returns the paths under shared/ that states reference.
func sharedPaths(states []task.OperatorState) []string {
	var out []string
	for _, s := range states {
		for _, h := range s.State.SharedFiles(false) {
			out = append(out, h.Path)
		}
	}
	return out
}

func checkpointSharedPaths(cp *metadata.Checkpoint) []string {
	var out []string
	for _, h := range cp.SharedFiles() {
		out = append(out, h.Path)
	}
	return out
}

// deleter deletes checkpoint directories and shared files on one
// background goroutine, in the order they were queued.
type deleter struct {
	store *storage.Storage
	job   string
	log   *slog.Logger

	mu      sync.Mutex
	queue   []deleteJob
	running bool
	idle    *sync.Cond // signalled when the queue is empty and nothing runs
	// dirFailed is set once a checkpoint directory could not be deleted:
	// shared files are no longer deleted until the next sweep.
	dirFailed bool
}

// deleteJob deletes chk-<dir> (if dir > 0) once wait is closed (an
// in-flight _metadata write), then files. done, if set, learns whether the
// directory was deleted.
type deleteJob struct {
	wait  <-chan struct{}
	dir   int64
	files []string
	done  func(dirDeleted bool)
}

func newDeleter(store *storage.Storage, job string, log *slog.Logger) *deleter {
	d := &deleter{store: store, job: job, log: log}
	d.idle = sync.NewCond(&d.mu)
	return d
}

func (d *deleter) enqueue(j deleteJob) {
	if d == nil || (j.dir == 0 && len(j.files) == 0) {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.queue = append(d.queue, j)
	if !d.running {
		d.running = true
		go d.work()
	}
}

func (d *deleter) work() {
	for {
		d.mu.Lock()
		if len(d.queue) == 0 {
			d.running = false
			d.idle.Broadcast()
			d.mu.Unlock()
			return
		}
		j := d.queue[0]
		d.queue = d.queue[1:]
		d.mu.Unlock()
		d.run(j)
	}
}

// resetFailed lets shared files be deleted again: called by the sweep,
// which reads what survived a failed directory deletion.
func (d *deleter) resetFailed() {
	if d == nil {
		return
	}
	d.mu.Lock()
	d.dirFailed = false
	d.mu.Unlock()
}

// wait returns once everything queued so far was done.
func (d *deleter) wait() {
	if d == nil {
		return
	}
	d.mu.Lock()
	for d.running {
		d.idle.Wait()
	}
	d.mu.Unlock()
}

// cleanupTimeout bounds each background deletion, so that a hung store
// cannot keep the runner from returning.
const cleanupTimeout = time.Minute

func (d *deleter) run(j deleteJob) {
	if j.wait != nil {
		<-j.wait
	}
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	if j.dir > 0 {
		err := d.store.DeleteCheckpoint(ctx, d.job, j.dir)
		if err != nil {
			d.log.Warn("could not delete a checkpoint's files; shared files are kept until the run ends", "checkpoint", j.dir, "err", err)
			d.mu.Lock()
			d.dirFailed = true
			d.mu.Unlock()
		}
		if j.done != nil {
			j.done(err == nil)
		}
	}
	d.mu.Lock()
	skip := d.dirFailed
	d.mu.Unlock()
	if skip {
		return
	}
	for _, path := range j.files {
		d.deleteShared(ctx, path)
	}
}

// deleteShared deletes a shared file no checkpoint references, retrying a
// failed delete a few times; a file it cannot delete is only logged (the
// sweep after the attempt, or the next run's, removes it): cleanup never
// fails the job.
func (d *deleter) deleteShared(ctx context.Context, path string) {
	var err error
	for attempt, wait := 0, 50*time.Millisecond; attempt < 4; attempt, wait = attempt+1, 4*wait {
		if err = d.store.DeleteFile(ctx, d.job, path); err == nil || errors.Is(err, storage.ErrNotFound) {
			return
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			attempt = 4
		}
		t.Stop()
	}
	d.log.Warn("could not delete a shared file; a later sweep deletes it", "file", path, "err", err)
}

// collect queues the deletion of every file the registry lets go.
func (r *runner) collect() {
	if files := r.reg.Collect(); len(files) > 0 {
		r.del.enqueue(deleteJob{files: files})
	}
}

// sweep runs while no task runs (before the first attempt, between
// attempts, at the end): it deletes the chk-<n> directories without
// _metadata (a killed process's or an aborted checkpoint's leftovers), the
// checkpoints whose _metadata is corrupt when a newer intact one exists
// (they can never be restored), and the files under shared/ that no
// complete checkpoint references, temporary files of interrupted uploads
// included. A checkpoint whose references cannot be known (its _metadata
// unreadable, or corrupt but the newest) keeps every shared file.
func (r *runner) sweep(ctx context.Context) {
	if r.cfg.Storage == nil {
		return
	}
	r.del.wait()
	r.del.resetFailed()
	r.reg.Idle()
	r.reg.DropKept()
	entries, err := r.cfg.Storage.ListCheckpoints(ctx, r.cfg.JobDir)
	if err != nil {
		r.log.Warn("cannot list checkpoints; not cleaning up checkpoint files", "err", err)
		return
	}
	type corruptEntry struct {
		id  int64
		err error
	}
	var (
		referenced = map[string]bool{} // by complete checkpoints the registry does not own
		unknown    bool                // a complete checkpoint's references are unknown
		corrupt    []corruptEntry
		newestGood int64
	)
	for _, e := range entries {
		if !e.Complete {
			r.log.Info("deleting an incomplete checkpoint directory", "checkpoint", e.ID)
			if err := r.cfg.Storage.DeleteCheckpoint(ctx, r.cfg.JobDir, e.ID); err != nil {
				r.log.Warn("could not delete an incomplete checkpoint", "checkpoint", e.ID, "err", err)
			}
			continue
		}
		if r.metas[e.ID] != nil {
			newestGood = max(newestGood, e.ID)
			continue // retained: the registry knows its files
		}
		cp, err := r.readOwn(ctx, e.ID)
		switch {
		case errors.Is(err, storage.ErrNotFound):
			continue // deleted since the listing
		case errors.Is(err, storage.ErrCorrupt):
			corrupt = append(corrupt, corruptEntry{e.ID, err})
			continue
		case err != nil:
			r.log.Warn("cannot read a checkpoint's metadata; shared files are not cleaned up", "checkpoint", e.ID, "err", err)
			unknown = true
			continue
		}
		newestGood = max(newestGood, e.ID)
		for _, p := range checkpointSharedPaths(cp) {
			referenced[p] = true
		}
	}
	for _, c := range corrupt {
		if c.id > newestGood {
			// Perhaps repairable, and what --from latest skips: keep it and
			// every file it might reference while it is the newest.
			r.log.Warn("the newest checkpoint's metadata is corrupt; shared files are kept until a newer checkpoint completes", "checkpoint", c.id, "err", c.err)
			unknown = true
			continue
		}
		r.log.Warn(fmt.Sprintf("deleting checkpoint %d: its _metadata is corrupt and checkpoint %d is newer and intact, so it can never be restored", c.id, newestGood), "err", c.err)
		if err := r.cfg.Storage.DeleteCheckpoint(ctx, r.cfg.JobDir, c.id); err != nil {
			r.log.Warn("could not delete a corrupt checkpoint", "checkpoint", c.id, "err", err)
			unknown = true
		}
	}
	if unknown {
		r.reg.Collect() // files the registry let go: left to a later sweep
		return
	}
	files, err := r.cfg.Storage.ListSharedAll(ctx, r.cfg.JobDir)
	if err != nil {
		r.log.Warn("cannot list shared checkpoint files; not cleaning them up", "err", err)
		return
	}
	listed := make([]string, len(files))
	for i, f := range files {
		listed[i] = f.Key
	}
	del, err := r.reg.Sweep(listed, referenced)
	if err != nil {
		r.log.Warn("cannot sweep shared checkpoint files", "err", err)
		return
	}
	n := 0
	for _, p := range del {
		if err := r.cfg.Storage.DeleteShared(ctx, r.cfg.JobDir, p); err != nil {
			r.log.Warn("could not delete an unreferenced shared file", "file", p, "err", err)
			continue
		}
		n++
	}
	if n > 0 {
		r.log.Info("deleted shared files no complete checkpoint references", "files", n)
	}
}
