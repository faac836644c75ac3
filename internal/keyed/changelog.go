package keyed

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/weirstream/weir/internal/changelog"
	"github.com/weirstream/weir/internal/checkpoint/metadata"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/checkpoint/upload"
	"github.com/weirstream/weir/internal/state"
	"github.com/weirstream/weir/internal/task"
	"github.com/weirstream/weir/internal/timer"
)

// The changelog state backend of a keyed operator subtask.
//
// The keyed state lives in a state.ChangelogBackend wrapping the configured
// backend: every change is applied to the wrapped backend and appended to
// the subtask's log (a changelog.Writer uploading segments to shared/ in
// the background), and so is every timer change. Periodically the wrapped
// backend and the timers are materialized: snapshotted on the task
// goroutine (the wrapped backend's own synchronous phase) and uploaded to
// shared/ in the background. A checkpoint is then the latest completed
// materialization plus the log records after it: its synchronous phase only
// notes the log's last sequence number, its asynchronous phase uploads the
// log's tail (Writer.Persist) and references the rest.
//
// Restore: the wrapped backend and the timers are restored from the
// materialized part (the ordinary Keyed / Native / Timers handles), timer
// records are replayed at once, state records when their state registers
// (they need its codecs). Records of states not registered yet are pending:
// a materialization re-appends them to the log after its snapshot, and a
// checkpoint without the changelog writes them next to itself (Pending),
// so that none is lost whatever the job registers when.
//
// After a restore the subtask materializes at once (the restored files may
// belong to another job or be about to be deleted), and its first
// checkpoints wait for that materialization.
//
// Files: the log segments and the materialized files belong to this
// subtask until a snapshot references them (its acknowledgement hands them
// to the runner's shared-state registry, internal/checkpoint/registry,
// the only deleter from then on). The subtask deletes the files it made
// that no snapshot referenced and none will (changelog.Ledger).

// materialization is one snapshot of the wrapped backend and the timers,
// holding the log up to seq.
type materialization struct {
	id, seq int64
	done    chan struct{} // closed when the upload finished (err says how)
	err     error
	start   time.Time

	keyed, timers *storage.FileHandle
	native        *metadata.NativeState
	// earlier is the log of earlier runs on top of a restored
	// materialization, replayed before this run's log.
	earlier  []metadata.LogRange
	files    []storage.FileHandle // every file it references
	created  []string             // paths it uploaded
	uploaded int64
}

func (m *materialization) paths() map[string]bool {
	out := make(map[string]bool, len(m.files))
	for _, h := range m.files {
		out[h.Path] = true
	}
	return out
}

type changelogRuntime struct {
	rt      *Runtime
	cfg     ChangelogConfig
	metrics *Metrics
	cb      *state.ChangelogBackend
	w       *changelog.Writer // nil: replay only (the changelog is off)
	ledger  *changelog.Ledger
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	cur      *materialization // what new checkpoints build on
	bases    []*materialization
	created  map[string]bool // files this run's materializations uploaded, not retired yet
	running  *materialization
	nextID   int64
	failures int
	inUse    map[int64]*materialization // undecided checkpoints -> their base
	stats    changelog.Stats            // writer stats already added to metrics
	recBuf   []byte
	closed   bool
}

// openChangelog wraps the restored (or empty) backend in a changelog
// backend, replays the restored log, and with the changelog on starts the
// log and, after a restore, the first materialization.
func (rt *Runtime) openChangelog(inner state.Backend, clock *state.ReplayClock, restored bool) error {
	active := rt.cfg.Changelog.Enabled && rt.op.Storage != nil
	ctx, cancel := context.WithCancel(context.Background())
	cl := &changelogRuntime{rt: rt, cfg: rt.cfg.Changelog, metrics: rt.cfg.Metrics, ctx: ctx, cancel: cancel,
		inUse: map[int64]*materialization{}, created: map[string]bool{}}
	if cl.metrics == nil {
		cl.metrics = &Metrics{}
	}
	cl.cb = state.NewChangelogBackend(inner, clock, nil)
	rt.backend = cl.cb
	rt.cl = cl
	var reuse *materialization
	if active {
		cl.ledger = changelog.NewLedger(rt.op.Storage, rt.op.StorageJob)
		wc := cl.cfg.writerConfig()
		wc.OnFailure = func(err error) {
			rt.op.Post(func() error { return fmt.Errorf("changelog: %w", err) })
		}
		w, err := changelog.NewWriter(rt.op.Storage, rt.op.StorageJob,
			fmt.Sprintf("%s-%s-log", rt.op.FileBase(), rt.op.RunID), wc)
		if err != nil {
			return fmt.Errorf("changelog: %w", err)
		}
		cl.w = w
		reuse = cl.restoredBase(rt.op.Restored)
	}
	if r := rt.op.Restored; r != nil {
		if err := cl.replay(r); err != nil {
			return err
		}
	}
	if !active {
		return nil
	}
	cl.cb.SetLog(cl.w)
	switch {
	case reuse != nil:
		// The restored materialization and log are this run's base; the
		// new log continues after them.
		cl.cur = reuse
		cl.bases = append(cl.bases, reuse)
		cl.nextID = reuse.id
	case restored:
		if err := cl.materialize(true); err != nil {
			return err
		}
	default:
		// Nothing restored: the empty state is the base, the log starts at 1.
		m := &materialization{done: make(chan struct{})}
		close(m.done)
		cl.cur = m
		cl.bases = append(cl.bases, m)
	}
	cl.schedule()
	return nil
}

// replay reads the restored changelog parts: timer records are applied,
// state records handed to the backend (applied at registration).
func (cl *changelogRuntime) replay(r *task.RestoredState) error {
	read := func(_ context.Context, h storage.FileHandle) ([]byte, error) { return r.ReadFile(h) }
	apply := func(_ int64, rec []byte) error {
		if state.IsStateRecord(rec) {
			return cl.cb.AddRestored(rec)
		}
		return cl.rt.applyTimer(rec)
	}
	replayRange := func(what string, from, to int64, segs []metadata.LogSegment) error {
		if from > to {
			return nil
		}
		if err := changelog.ReplayWith(cl.ctx, read, segs, from, to, apply); err != nil {
			return fmt.Errorf("replay %s records %d..%d: %w", what, from, to, err)
		}
		return nil
	}
	for _, c := range r.Changelogs {
		if p := c.Pending; p != nil {
			if err := replayRange("pending changelog", p.From, p.To, []metadata.LogSegment{*p}); err != nil {
				return err
			}
		}
		if l := c.Log; l != nil {
			for _, e := range l.Earlier {
				if err := replayRange("changelog", e.From, e.To, e.Segments); err != nil {
					return err
				}
			}
			if err := replayRange("changelog", l.From, l.To, l.Segments); err != nil {
				return err
			}
		}
	}
	return nil
}

// restoredBase returns the restored materialization as a base for this
// run's checkpoints when it can be one: a changelog checkpoint of this job
// in this storage (its files stay until no retained checkpoint references
// them), of exactly this subtask's key groups (so that its log holds no
// record of other key groups). Otherwise the subtask materializes at once.
func (cl *changelogRuntime) restoredBase(r *task.RestoredState) *materialization {
	if r == nil || !r.OwnStorage || len(r.Changelogs) != 1 || len(r.Keyed) > 1 || len(r.Native) > 1 || len(r.Timers) > 1 {
		return nil
	}
	c := r.Changelogs[0]
	if c.Log == nil || c.Pending != nil || c.KeyGroupStart != cl.rt.op.KeyGroupStart || c.KeyGroupEnd != cl.rt.op.KeyGroupEnd {
		return nil
	}
	m := &materialization{id: c.Log.Materialization, done: make(chan struct{})}
	close(m.done)
	m.earlier = append(m.earlier, c.Log.Earlier...)
	if c.Log.From <= c.Log.To {
		m.earlier = append(m.earlier, metadata.LogRange{From: c.Log.From, To: c.Log.To, Segments: c.Log.Segments})
	}
	for _, e := range m.earlier {
		for _, g := range e.Segments {
			m.files = append(m.files, g.File)
		}
	}
	if len(r.Keyed) == 1 {
		h := r.Keyed[0]
		m.keyed = &h
		m.files = append(m.files, h)
	}
	if len(r.Timers) == 1 {
		h := r.Timers[0]
		m.timers = &h
		m.files = append(m.files, h)
	}
	if len(r.Native) == 1 {
		m.native = r.Native[0].State
		for _, f := range m.native.Files {
			m.files = append(m.files, f.Handle)
		}
	}
	for _, h := range m.files {
		if !strings.HasPrefix(h.Path, storage.SharedDir+"/") {
			return nil
		}
	}
	return m
}

// logTimer appends a timer change to the log.
func (cl *changelogRuntime) logTimer(op state.TimerOp, t timer.Timer) {
	if cl == nil || cl.w == nil {
		return
	}
	b := state.AppendTimerRecord(cl.recBuf[:0], state.TimerRecord{Op: op, KeyGroup: t.KeyGroup, Key: t.Key,
		Namespace: t.Namespace, Timestamp: t.Timestamp})
	cl.recBuf = b
	if err := cl.cb.AppendRaw(b); err != nil {
		cl.rt.op.Fail(fmt.Errorf("changelog: %w", err))
	}
}

// schedule arms the next periodic materialization.
func (cl *changelogRuntime) schedule() {
	if cl.cfg.MaterializeInterval <= 0 {
		return
	}
	op := cl.rt.op
	op.Schedule(op.Now().Add(cl.cfg.MaterializeInterval), func() error {
		if cl.closed {
			return nil
		}
		if cl.running == nil {
			if err := cl.materialize(false); err != nil {
				return err
			}
		}
		cl.schedule()
		return nil
	})
}

// materialize runs the synchronous phase of a materialization and starts
// its upload. With first, checkpoints build on it at once (and wait for
// it): after a restore there is no other base.
func (cl *changelogRuntime) materialize(first bool) error {
	rt := cl.rt
	if err := cl.cb.Flush(); err != nil {
		return fmt.Errorf("changelog: %w", err)
	}
	cl.nextID++
	m := &materialization{id: cl.nextID, seq: cl.w.LastSeq(), done: make(chan struct{}), start: time.Now()}
	cl.metrics.started.Add(1)
	timers := rt.timers.AppendSnapshot(nil, rt.op.KeyGroupStart, rt.op.KeyGroupEnd)
	var (
		snap state.Snapshot
		ns   *state.NativeSnapshot
		err  error
	)
	inner := cl.cb.Inner()
	if pb, ok := inner.(*state.PebbleBackend); ok && rt.op.Incremental {
		ns, err = pb.TakeNativeSnapshot(fmt.Sprintf("%s.mat-%d", rt.op.StateDir, m.id))
	} else {
		snap, err = state.TakeSnapshot(inner)
	}
	if err != nil {
		m.err = err
		close(m.done)
		return cl.failed(m, first, err)
	}
	// Records of states not registered yet are not in the snapshot: they
	// go on after it.
	for _, rec := range cl.cb.Pending() {
		if err := cl.cb.AppendRaw(rec); err != nil {
			return fmt.Errorf("changelog: %w", err)
		}
	}
	reuse := map[string]storage.FileHandle{}
	if cl.cur != nil && cl.cur.native != nil {
		for _, f := range cl.cur.native.Files {
			reuse[f.Name] = f.Handle
		}
	} else if rt.op.Restored != nil && rt.op.Restored.OwnStorage {
		reuse = rt.uploads.Confirmed()
	}
	cl.running = m
	if first {
		cl.cur = m
		cl.bases = append(cl.bases, m)
	}
	cl.wg.Add(1)
	go func() {
		defer cl.wg.Done()
		err := cl.upload(m, snap, ns, timers, reuse)
		// Checkpoints waiting for this materialization learn its outcome
		// here, not on the task goroutine: a task that failed waits for
		// their asynchronous phases and serves no more mail.
		m.err = err
		close(m.done)
		rt.op.Post(func() error { return cl.materialized(m, first, err) })
	}()
	return nil
}

// upload is a materialization's asynchronous phase.
func (cl *changelogRuntime) upload(m *materialization, snap state.Snapshot, ns *state.NativeSnapshot, timers []byte, reuse map[string]storage.FileHandle) (err error) {
	store, job := cl.rt.op.Storage, cl.rt.op.StorageJob
	name := fmt.Sprintf("%s-%s-m%d", cl.rt.op.FileBase(), cl.rt.op.RunID, m.id)
	defer func() {
		if snap != nil {
			snap.Release()
		}
		if ns != nil {
			_ = ns.Release()
		}
		if err != nil {
			for _, p := range m.created {
				_ = store.DeleteFile(context.WithoutCancel(cl.ctx), job, p)
			}
			m.created, m.files = nil, nil
		}
	}()
	put := func(file string, write func(io.Writer) error) (*storage.FileHandle, error) {
		fw, err := store.CreateSharedFile(cl.ctx, job, file)
		if err != nil {
			return nil, err
		}
		h, err := storage.WriteAll(fw, write)
		if err != nil {
			return nil, err
		}
		m.created = append(m.created, h.Path)
		m.files = append(m.files, h)
		m.uploaded += h.Size
		return &h, nil
	}
	if snap != nil {
		if m.keyed, err = put(name+".kst", func(w io.Writer) error { _, err := snap.WriteStream(w); return err }); err != nil {
			return fmt.Errorf("keyed state: %w", err)
		}
	}
	if ns != nil {
		u := upload.Native{Store: store, Job: job,
			SharedName: func(file string) string { return name + "-" + task.SanitizeName(file) }}
		r, err := u.Upload(cl.ctx, ns, reuse)
		if err != nil {
			return err
		}
		m.native = r.State
		for _, f := range r.State.Files {
			m.files = append(m.files, f.Handle)
			if h, ok := r.Created[f.Name]; ok {
				m.created = append(m.created, h.Path)
			}
		}
		m.uploaded += r.Bytes
	}
	if len(timers) > 0 {
		if m.timers, err = put(name+".tmr", func(w io.Writer) error { _, err := w.Write(timers); return err }); err != nil {
			return fmt.Errorf("timers: %w", err)
		}
	}
	if h := cl.rt.cfg.MaterializeHook; h != nil {
		if err := h(cl.rt.op.UID, cl.rt.op.Subtask, m.id); err != nil {
			return err
		}
	}
	return nil
}

// materialized ends a materialization, on the task goroutine.
func (cl *changelogRuntime) materialized(m *materialization, first bool, err error) error {
	if cl.closed {
		return nil // close deleted what it uploaded
	}
	cl.running = nil
	if err != nil {
		return cl.failed(m, first, err)
	}
	cl.failures = 0
	d := time.Since(m.start)
	cl.metrics.completed.Add(1)
	cl.metrics.lastDuration.Store(int64(d))
	if !first {
		cl.cur = m
		cl.bases = append(cl.bases, m)
	}
	for _, p := range m.created {
		cl.created[p] = true
	}
	cl.rt.op.Logger.Info("changelog materialization completed", "materialization", m.id,
		"records", m.seq, "files", len(m.files), "uploadedBytes", m.uploaded, "duration", d.Round(time.Millisecond))
	cl.gc()
	return nil
}

// failed counts a failed materialization; beyond the tolerated number the
// subtask fails. A failed first materialization is retried at once, since
// no checkpoint can complete without one.
func (cl *changelogRuntime) failed(m *materialization, first bool, err error) error {
	cl.running = nil
	cl.failures++
	cl.metrics.failed.Add(1)
	tolerated := max(cl.cfg.MaxMaterializationFailures, 0) // negative: none tolerated
	if cl.failures > tolerated {
		return fmt.Errorf("changelog materialization %d failed, %d in a row, more than state.changelog.materialization.max-failures-allowed=%d: %w",
			m.id, cl.failures, tolerated, err)
	}
	cl.rt.op.Logger.Warn("changelog materialization failed; checkpoints go on with the previous one and the log",
		"materialization", m.id, "failures", cl.failures, "tolerated", tolerated, "err", err)
	if first {
		for i, b := range cl.bases {
			if b == m {
				cl.bases = append(cl.bases[:i:i], cl.bases[i+1:]...)
				break
			}
		}
		cl.cur = nil
		return cl.materialize(true)
	}
	return nil
}

// snapshot is the changelog's part of a checkpoint's synchronous phase.
func (cl *changelogRuntime) snapshot(id int64, s *task.OperatorSnapshot) error {
	if cl.w == nil {
		return cl.snapshotPending(s)
	}
	if err := cl.cb.Flush(); err != nil {
		return fmt.Errorf("changelog: %w", err)
	}
	base, upTo := cl.cur, cl.w.LastSeq()
	if base == nil {
		return errors.New("changelog: no materialization to build on")
	}
	cl.inUse[id] = base
	cl.addWriterStats()
	s.Async = func(ctx context.Context, id int64, st *metadata.Subtask) (int64, error) {
		select {
		case <-base.done:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		if base.err != nil {
			return 0, fmt.Errorf("changelog: materialization %d failed: %w", base.id, base.err)
		}
		segs, err := cl.w.Persist(ctx, base.seq+1, upTo)
		if err != nil {
			return 0, fmt.Errorf("changelog: %w", err)
		}
		st.Keyed, st.Native, st.Timers = base.keyed, base.native, base.timers
		cs := &metadata.ChangelogState{Materialization: base.id, MaterializedSeq: base.seq, From: base.seq + 1, To: upTo,
			Earlier: base.earlier}
		cs.Segments = segs
		files := append([]storage.FileHandle(nil), base.files...)
		for _, g := range segs {
			files = append(files, g.File)
		}
		st.Changelog = cs
		return cl.ledger.Reference(files), nil
	}
	return nil
}

// snapshotPending, with the changelog off, writes the restored records of
// states not registered yet next to the checkpoint.
func (cl *changelogRuntime) snapshotPending(s *task.OperatorSnapshot) error {
	recs := cl.cb.Pending()
	if len(recs) == 0 {
		return nil
	}
	data := changelog.EncodeSegment(recs, 1)
	op, name := cl.rt.op, cl.rt.op.FileBase()+".pending"
	s.Async = func(ctx context.Context, id int64, st *metadata.Subtask) (int64, error) {
		fw, err := op.CreateSnapshotFile(ctx, id, name)
		if fw == nil || err != nil {
			return 0, err
		}
		if _, err := fw.Write(data); err != nil {
			_ = fw.Abort()
			return 0, err
		}
		h, err := fw.Finish()
		if err != nil {
			return 0, err
		}
		st.Pending = &metadata.LogSegment{File: h, From: 1, To: int64(len(recs))}
		return h.Size, nil
	}
	return nil
}

func (cl *changelogRuntime) addWriterStats() {
	if cl.w == nil {
		return
	}
	cur := cl.w.Stats()
	cl.metrics.addWriter(cl.stats, cur)
	cl.stats = cur
}

// notify handles a checkpoint's completion or abort.
func (cl *changelogRuntime) notify(id int64, complete bool) {
	if cl.w == nil {
		return
	}
	if complete {
		for cid := range cl.inUse {
			if cid <= id {
				delete(cl.inUse, cid)
			}
		}
	} else {
		delete(cl.inUse, id)
	}
	cl.gc()
}

// gc retires the materializations and log segments no checkpoint will
// reference any more: the ledger deletes those no snapshot referenced.
func (cl *changelogRuntime) gc() {
	keep := map[*materialization]bool{}
	if cl.cur != nil {
		keep[cl.cur] = true
	}
	for _, b := range cl.inUse {
		keep[b] = true
	}
	minSeq := int64(-1)
	kept := map[string]bool{}
	var bases []*materialization
	for _, b := range cl.bases {
		if keep[b] {
			bases = append(bases, b)
			for p := range b.paths() {
				kept[p] = true
			}
			if minSeq < 0 || b.seq < minSeq {
				minSeq = b.seq
			}
		}
	}
	// A file may be shared by several materializations (unchanged native
	// files are reused): it retires with the last one that has it.
	var retire []string
	for _, b := range cl.bases {
		if keep[b] {
			continue
		}
		for _, h := range b.files {
			if cl.created[h.Path] && !kept[h.Path] {
				retire = append(retire, h.Path)
				delete(cl.created, h.Path)
			}
		}
	}
	cl.bases = bases
	if minSeq >= 0 {
		for _, n := range cl.w.Truncate(minSeq + 1) {
			retire = append(retire, storage.SharedDir+"/"+n)
		}
	}
	cl.ledger.Retire(retire)
}

// close stops the log and deletes the files no checkpoint references.
func (cl *changelogRuntime) close() error {
	if cl == nil || cl.closed {
		return nil
	}
	cl.closed = true
	cl.cancel()
	cl.wg.Wait()
	if cl.w == nil {
		return nil
	}
	err := cl.w.Close()
	cl.addWriterStats()
	var mine []string
	for _, n := range cl.w.Names() {
		mine = append(mine, storage.SharedDir+"/"+n)
	}
	for p := range cl.created {
		mine = append(mine, p)
	}
	if m := cl.running; m != nil {
		mine = append(mine, m.created...)
	}
	cl.ledger.Close(mine)
	if errors.Is(err, changelog.ErrClosed) {
		err = nil
	}
	return err
}

func (c ChangelogConfig) writerConfig() changelog.Config {
	return changelog.Config{PersistDelay: c.PersistDelay, PersistSizeThreshold: c.PersistSizeThreshold,
		PreemptivePersistThreshold: c.PreemptivePersistThreshold, UploadTimeout: c.UploadTimeout,
		MaxAttempts: c.MaxAttempts, MaxInFlight: c.MaxInFlight}
}
