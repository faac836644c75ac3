package runner

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/checkpoint/coordinator"
	"github.com/weirstream/weir/internal/checkpoint/metadata"
	"github.com/weirstream/weir/internal/checkpoint/pins"
	"github.com/weirstream/weir/internal/checkpoint/storage"
)

// savepointState is one savepoint of the attempt: where its files go.
type savepointState struct {
	store       *storage.Storage // rooted at the target directory
	dir         string           // the savepoint directory in store
	path        string           // its location, as weir run --from takes it
	format      checkpoint.Format
	stop, drain bool
	aborted     bool
}

func (s *savepointState) kind() string {
	switch {
	case s.drain:
		return ", then stop the job after draining it"
	case s.stop:
		return ", then stop the job"
	}
	return ""
}

// JoinLocation returns the location of name inside the directory loc (a
// path or URL).
func JoinLocation(loc, name string) string {
	if strings.Contains(loc, "://") {
		if u, err := url.Parse(loc); err == nil {
			u.Path = path.Join(u.Path, name)
			if u.RawPath != "" {
				u.RawPath = ""
			}
			return u.String()
		}
	}
	return filepath.Join(loc, name)
}

// triggerSavepoint starts the savepoint req asks for, or answers why it
// cannot.
func (d *driver) triggerSavepoint(req ManualRequest) {
	r := d.r
	sp := req.Savepoint
	target := sp.Target
	if target == "" {
		target = r.cfg.SavepointDir
	}
	if target == "" {
		req.Reply <- ManualResult{Err: ErrNoSavepointTarget}
		return
	}
	if !strings.Contains(target, "://") {
		if abs, err := filepath.Abs(target); err == nil {
			target = abs // the path handed back works from any directory
		}
	}
	format := req.Format
	if format == checkpoint.FormatConfigured {
		format = checkpoint.FormatCanonical
	}
	store, err := storage.OpenWith(d.ctx, target, storage.Options{Logger: r.cfg.Logger})
	if err != nil {
		req.Reply <- ManualResult{Err: fmt.Errorf("savepoint target %s: %w", target, err)}
		return
	}
	dir := storage.NewSavepointName(r.cfg.Task.JobID)
	st := &savepointState{store: store, dir: dir, path: JoinLocation(target, dir), format: format, stop: sp.Stop, drain: sp.Stop && sp.Drain}
	id, err := d.coord.TriggerSavepoint(r.cfg.Clock.Now(), checkpoint.Options{Format: format, Target: st.path, Synchronous: st.stop, Drain: st.drain})
	if err != nil {
		_ = store.Close()
		req.Reply <- ManualResult{Err: fmt.Errorf("savepoint of job %s: %w", r.cfg.JobName, err)}
		return
	}
	r.spStores = append(r.spStores, store)
	d.savepoints[id] = st
	d.manual[id] = req.Reply
	if st.drain {
		d.drainID = id
	}
}

// savepointCompleted reports a completed savepoint. A stop-with-savepoint
// then finishes the tasks (NotifyComplete follows).
func (d *driver) savepointCompleted(a coordinator.Completed, cp *metadata.Checkpoint) {
	r := d.r
	sp := d.savepoints[a.ID]
	r.log.Info(fmt.Sprintf("Completed savepoint %d for job %s (%s, %s format, savepointDuration=%d ms): %s",
		a.ID, r.cfg.JobName, FormatBytes(cp.Bytes), sp.format, a.Duration.Milliseconds(), sp.path))
	if m := r.cfg.Monitor; m != nil {
		m.Checkpoints.Completed(a.ID, r.cfg.Clock.Now(), cp.Bytes, cp.FullBytes, 0, sp.path)
	}
	res := ManualResult{ID: a.ID, Path: sp.path}
	if sp.stop {
		r.stoppedWith = sp.path
		if sp.drain {
			d.finalDone = true
		}
		if reply, ok := d.manual[a.ID]; ok {
			d.stopped = &stopReply{reply: reply, result: res}
			delete(d.manual, a.ID)
		}
	} else if reply, ok := d.manual[a.ID]; ok {
		reply <- res
		delete(d.manual, a.ID)
	}
	// Every subtask acknowledged: nothing more is written into it.
	delete(d.savepoints, a.ID)
	r.spStores = slices.DeleteFunc(r.spStores, func(s *storage.Storage) bool { return s == sp.store })
	_ = sp.store.Close()
}

// discardSavepoint deletes an aborted savepoint's directory, once its
// _metadata write (if one is in flight) ended.
func (d *driver) discardSavepoint(id int64, sp *savepointState) {
	r := d.r
	wait := d.writing[id]
	r.bg.Add(1)
	go func() {
		defer r.bg.Done()
		if wait != nil {
			<-wait
		}
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		if err := sp.store.DeleteSavepoint(ctx, sp.dir); err != nil {
			r.log.Warn("could not delete the files of an aborted savepoint", "savepoint", sp.path, "err", err)
		}
	}()
}

// claimedBase is a snapshot outside the job directory restored in CLAIM
// mode: the run owns it and deletes it once it is subsumed.
type claimedBase struct {
	id        int64
	store     *storage.Storage
	dir       string // savepoint directory, or the checkpoint's job directory
	path      string
	savepoint bool
}

// releaseClaimed deletes a subsumed claimed snapshot in the background.
func (r *runner) releaseClaimed(c *claimedBase) {
	r.bg.Add(1)
	go func() {
		defer r.bg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		// Another run restored from it without claiming it and still
		// needs it: it stays.
		if hs, err := pins.Holders(ctx, c.store, c.store.Location(), c.path); err != nil || len(hs) > 0 {
			r.log.Warn("not deleting the claimed snapshot: another job restored from it and has no checkpoint of its own yet, or its restore records cannot be read",
				"snapshot", c.path, "holders", len(hs), "err", err)
			return
		}
		if err := c.release(ctx); err != nil {
			r.log.Warn("could not delete the claimed snapshot", "snapshot", c.path, "err", err)
			return
		}
		r.log.Info(fmt.Sprintf("Deleted %s: restored in CLAIM mode, it was subsumed by newer checkpoints.", c.path))
	}()
}

// release deletes the claimed snapshot: a savepoint's directory, or a
// checkpoint's chk-<n> directory and the shared files of its job directory
// that no other complete checkpoint there references (never the job
// directory itself, nor a file another checkpoint needs).
func (c *claimedBase) release(ctx context.Context) error {
	if c.savepoint {
		return c.store.DeleteSavepoint(ctx, c.dir)
	}
	payload, err := c.store.ReadMetadata(ctx, c.dir, c.id)
	if errors.Is(err, storage.ErrNotFound) {
		return nil // gone already
	}
	if err != nil {
		return err
	}
	cp, err := metadata.Decode(payload)
	if err != nil {
		return err
	}
	entries, err := c.store.ListCheckpoints(ctx, c.dir)
	if err != nil {
		return err
	}
	kept := map[string]bool{}
	for _, e := range entries {
		if e.ID == c.id || !e.Complete {
			continue
		}
		other, err := c.store.ReadMetadata(ctx, c.dir, e.ID)
		if err != nil {
			return fmt.Errorf("checkpoint %d of %s: %w; nothing deleted", e.ID, c.dir, err)
		}
		ocp, err := metadata.Decode(other)
		if err != nil {
			return fmt.Errorf("checkpoint %d of %s: %w; nothing deleted", e.ID, c.dir, err)
		}
		for _, p := range checkpointSharedPaths(ocp) {
			kept[p] = true
		}
	}
	if err := c.store.DeleteCheckpoint(ctx, c.dir, c.id); err != nil {
		return err
	}
	var errs []error
	for _, p := range checkpointSharedPaths(cp) {
		if !kept[p] {
			if err := c.store.DeleteShared(ctx, c.dir, p); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// recordRestore writes the restore record (pins) of a run started from an
// explicitly named snapshot into its job directory, so that `weir
// checkpoints delete` knows the run depends on that snapshot until its
// first own checkpoint completed. A run that resumes its own latest
// checkpoint records nothing.
func (r *runner) recordRestore(ctx context.Context) error {
	from := r.cfg.From
	if from == nil || r.cfg.Storage == nil || r.cfg.FromPath == "" || r.cfg.FromRestoreLatest {
		return nil
	}
	mode := pins.ModeNoClaim
	if r.cfg.Claim {
		mode = pins.ModeClaim
	}
	err := pins.Write(ctx, r.cfg.Storage, r.cfg.JobDir, pins.Restore{Root: r.cfg.FromStorage.Location(), Path: r.cfg.FromPath,
		Mode: mode, JobID: r.cfg.Task.JobID, Time: r.cfg.Clock.Now()})
	if err != nil {
		return fmt.Errorf("record the restore from %s: %w", r.cfg.FromPath, err)
	}
	return nil
}

// releaseRestore marks the job directory's restore record released by
// checkpoint id, the run's first: it no longer needs the snapshot it
// started from (whatever run wrote the record).
func (r *runner) releaseRestore(id int64) {
	store, job, log := r.cfg.Storage, r.cfg.JobDir, r.log
	r.bg.Add(1)
	go func() {
		defer r.bg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		if err := pins.Release(ctx, store, job, id); err != nil {
			log.Warn("could not mark the restore record released; weir checkpoints delete may refuse to delete the snapshot the job started from", "err", err)
		}
	}()
}

// noClaimPin returns the id of the checkpoint of the job's own directory
// that its restore record says a run restored in NO_CLAIM mode, 0 if none.
func (r *runner) noClaimPin(ctx context.Context) int64 {
	rec, ok, err := pins.Read(ctx, r.cfg.Storage, r.cfg.JobDir)
	if err != nil {
		r.log.Warn("cannot read the job's restore record; a checkpoint restored in NO_CLAIM mode may be subsumed", "err", err)
		return 0
	}
	if !ok || rec.Mode != pins.ModeNoClaim || rec.Root != r.cfg.Storage.Location() {
		return 0
	}
	job, chk, found := strings.Cut(rec.Path, "/")
	if !found || job != r.cfg.JobDir {
		return 0
	}
	id, err := strconv.ParseInt(strings.TrimPrefix(chk, "chk-"), 10, 64)
	if err != nil || !strings.HasPrefix(chk, "chk-") {
		return 0
	}
	return id
}

// hasNative reports whether any subtask of cp holds native state files.
func hasNative(cp *metadata.Checkpoint) bool {
	for _, op := range cp.Operators {
		for _, st := range op.Subtasks {
			if st.Native != nil {
				return true
			}
		}
	}
	return false
}
