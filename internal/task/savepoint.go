package task

import (
	"context"
	"fmt"
	"io"
	"math"
	"sync"
	"time"

	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/checkpoint/storage"
)

// Target is where the files of one savepoint go: the savepoint directory
// Dir in Store (storage.CreateSavepointFile). A savepoint's files are all
// its own: nothing is shared with checkpoints or reused from them.
type Target struct {
	Store *storage.Storage
	Dir   string
	// aborted: the savepoint was aborted; nothing more is written for it.
	aborted bool
}

// targets are the savepoints in progress, by id; every subtask reads them.
type targets struct {
	mu sync.Mutex
	m  map[int64]Target
}

func (ts *targets) put(id int64, t Target) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.m == nil {
		ts.m = map[int64]Target{}
	}
	ts.m[id] = t
}

func (ts *targets) get(id int64) (Target, bool) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	t, ok := ts.m[id]
	return t, ok
}

// abort marks savepoint id aborted. Entries are kept (a few bytes per
// savepoint): a subtask still writing for it must neither go on writing
// into its directory nor take it for a checkpoint and write into
// chk-<id>.
func (ts *targets) abort(id int64) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if t, ok := ts.m[id]; ok {
		t.aborted = true
		ts.m[id] = t
	}
}

// TriggerSavepoint starts savepoint id (opts.Kind checkpoint.KindSavepoint)
// at every source subtask, like TriggerCheckpoint; every subtask writes
// its files into target. With opts.Synchronous (stop-with-savepoint) each
// subtask stops processing input and timers once it took its snapshot,
// until the savepoint completes (it then finishes without ending its
// input: nothing is emitted after the savepoint) or is aborted (it goes
// on). With opts.Drain the sources first end their input: they emit the
// final watermark and every operator's end of input runs before the
// barrier, and the subtasks finish once the savepoint completes.
func (j *Job) TriggerSavepoint(id, triggerTime int64, opts checkpoint.Options, target Target) {
	j.targets.put(id, target)
	for _, t := range j.tasks {
		if t.source == nil {
			continue
		}
		t.mail.post(func() error {
			start := t.clock.Now()
			if opts.Drain && !t.drained && !t.inputEnded {
				// A finished source ends event time: every timer fires,
				// and what that emits precedes the barrier.
				if err := t.deliverWatermark(0, math.MaxInt64); err != nil {
					return err
				}
				if err := t.endInput(); err != nil {
					return err
				}
				t.drained = true
			}
			return t.snapshotAndForward(id, triggerTime, opts, time.Duration(start.UnixMilli()-triggerTime)*time.Millisecond, 0, false)
		})
	}
}

// createFile starts data file name of snapshot id: in the savepoint's
// directory for a savepoint, under chk-<id>/ for a checkpoint.
func (t *task) createFile(ctx context.Context, id int64, name string) (storage.FileWriter, error) {
	if sp, ok := t.targets.get(id); ok {
		if sp.aborted {
			return nil, fmt.Errorf("savepoint %d was aborted", id)
		}
		return sp.Store.CreateSavepointFile(ctx, sp.Dir, name)
	}
	if t.store == nil {
		return nil, fmt.Errorf("snapshot %d: no checkpoint storage", id)
	}
	return t.store.CreateFile(ctx, t.storeJob, id, name)
}

// suspend runs while the task is suspended by a synchronous savepoint: it
// serves mail until the savepoint completes (stopped: true) or is aborted
// (the task goes on), or ctx ends.
func (t *task) suspend(ctx context.Context) (stopped bool, err error) {
	for {
		if err := t.serveMail(); err != nil {
			return false, err
		}
		if t.stopped {
			return true, nil
		}
		if t.suspended == 0 {
			return false, nil
		}
		select {
		case <-t.mail.notify:
		case <-ctx.Done():
			return false, t.canceled(ctx)
		}
	}
}

// noteSynchronous records what a completed or aborted snapshot means for a
// task suspended by a synchronous savepoint.
func (t *task) noteSynchronous(id int64, complete bool) {
	if id == t.quiesced && !complete {
		t.quiesced = 0
	}
	if id != t.suspended {
		if !complete {
			t.syncAborted = max(t.syncAborted, id)
		}
		return
	}
	if complete {
		t.stopped, t.finalDone = true, true
		return
	}
	t.suspended = 0
}

// copyRefs copies the files an operator's state refers to (in the job's
// shared/ directory) into savepoint id's directory and returns their new
// handles and the bytes copied.
func (t *task) copyRefs(ctx context.Context, id int64, base string, refs []storage.FileHandle) ([]storage.FileHandle, int64, error) {
	out := make([]storage.FileHandle, 0, len(refs))
	var n int64
	for i, h := range refs {
		if t.store == nil {
			return nil, 0, fmt.Errorf("%s: no checkpoint storage to copy it from", h.Path)
		}
		h2, err := func() (storage.FileHandle, error) {
			src, err := t.store.OpenFile(ctx, t.storeJob, h)
			if err != nil {
				return storage.FileHandle{}, err
			}
			defer src.Close()
			fw, err := t.createFile(ctx, id, fmt.Sprintf("%s-ref-%d", base, i))
			if err != nil {
				return storage.FileHandle{}, err
			}
			return storage.WriteAll(fw, func(w io.Writer) error {
				_, err := io.Copy(w, src)
				return err
			})
		}()
		if err != nil {
			return nil, 0, fmt.Errorf("%s: %w", h.Path, err)
		}
		out = append(out, h2)
		n += h2.Size
	}
	return out, n, nil
}
