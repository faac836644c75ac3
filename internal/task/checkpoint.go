package task

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/checkpoint/barrier"
	"github.com/weirstream/weir/internal/checkpoint/metadata"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/checkpoint/upload"
	"github.com/weirstream/weir/internal/network"
	"github.com/weirstream/weir/internal/state"
)

// Snapshotter is implemented by operators that have state to checkpoint.
// SnapshotState is the synchronous phase of checkpoint id, called on the
// task goroutine after every record before barrier id and before any record
// after it. It must be quick whatever the state size: it copies small state
// (operator lists) and freezes keyed state (state.TakeSnapshot); the
// asynchronous phase writes the frozen view elsewhere. opts are the
// checkpoint's, as triggered: its kind and format choose the snapshot
// strategy, and opts.LastCompleted is a checkpoint the operator must treat
// as complete (notified) before it reuses any earlier upload.
type Snapshotter interface {
	SnapshotState(id int64, opts checkpoint.Options) (OperatorSnapshot, error)
}

// OperatorSnapshot is what an operator's synchronous phase hands to the
// asynchronous one.
type OperatorSnapshot struct {
	// Lists are the operator list states, copied: the operator may change
	// its lists as soon as SnapshotState returns.
	Lists []metadata.List
	// Keyed is the frozen keyed state, written and released by the
	// asynchronous phase; nil for operators without keyed state.
	Keyed state.Snapshot
	// Timers are the encoded timers (timer.Service.AppendSnapshot); empty
	// for none.
	Timers []byte
	// Persist, if set, runs first in the asynchronous phase: work the
	// synchronous phase left to do off the task goroutine (a sink's fsync).
	// An error declines the checkpoint.
	Persist func() error
	// Native is an incremental snapshot (instead of Keyed): the backend's
	// own files, uploaded by the asynchronous phase, which reuses the
	// uploads of earlier checkpoints for the shared files it already has.
	Native *NativeUpload
	// Async, if set, runs in the asynchronous phase after the other parts
	// were written: it makes the operator's remaining state durable (the
	// changelog backend flushes its log tail), fills its fields of st and
	// returns the bytes it uploaded for this checkpoint. An error declines
	// the checkpoint. ctx ends when the job does or the snapshot is
	// aborted.
	Async func(ctx context.Context, id int64, st *metadata.Subtask) (int64, error)
	// Refs are files under shared/ the operator's state refers to, written
	// for this or an earlier checkpoint (metadata.Subtask.Refs): listed,
	// they stay as long as a retained checkpoint lists them.
	Refs []storage.FileHandle
	// Schema is the encoding of the keyed state and timer keys, copied into
	// the subtask's metadata; nil for none.
	Schema *metadata.Schema
}

// NativeUpload is a backend's native snapshot on its way to storage.
type NativeUpload struct {
	Snap *state.NativeSnapshot
	// Reuse maps the local name of a shared file to the handle an earlier,
	// completed checkpoint uploaded it as.
	Reuse map[string]storage.FileHandle
	// Uploaded, if set, is called by the asynchronous phase with the shared
	// files it uploaded for checkpoint id (local name to handle).
	Uploaded func(id int64, files map[string]storage.FileHandle)
}

func (s OperatorSnapshot) empty() bool {
	return len(s.Lists) == 0 && s.Keyed == nil && len(s.Timers) == 0 && s.Persist == nil && s.Native == nil && s.Async == nil && len(s.Refs) == 0
}

// CheckpointListener is implemented by operators that act when a checkpoint
// completes or is aborted (two-phase-commit sinks). Both run on the task
// goroutine; an error fails the task.
type CheckpointListener interface {
	NotifyCheckpointComplete(id int64) error
	NotifyCheckpointAborted(id int64) error
}

// OperatorState is one chained operator's part of a subtask's
// acknowledgement: what goes into the checkpoint's metadata for it.
type OperatorState struct {
	UID, Name                   string
	Parallelism, MaxParallelism int
	State                       metadata.Subtask
}

// DeclineReason says why a subtask declined a checkpoint.
type DeclineReason int

const (
	// DeclineBarrier: the barrier handler aborted the checkpoint (a newer
	// barrier or a cancellation barrier arrived first).
	DeclineBarrier DeclineReason = iota + 1
	// DeclineSubsumed: a newer checkpoint overtook this one.
	DeclineSubsumed
	// DeclineAsync: the asynchronous phase (upload) failed.
	DeclineAsync
)

// Ack is a subtask's answer to a checkpoint: its snapshot is durable
// (Declined unset), or it declined.
type Ack struct {
	Vertex, Subtask int
	ID              int64
	// StartDelay is the time from the trigger to the first barrier reaching
	// the subtask; Alignment the time its inputs were (partly) blocked;
	// Sync the synchronous phase; Async the asynchronous one.
	StartDelay, Alignment, Sync, Async time.Duration
	// Bytes is the size of the subtask's state in the checkpoint,
	// in-flight data included.
	Bytes int64
	// Unaligned: the subtask took its snapshot unaligned (a priority
	// barrier or the aligned timeout triggered it before every input
	// delivered its barrier), or its barriers overtook queued data.
	Unaligned bool
	// PersistedBytes is the in-flight data (channel state, input and
	// output) the subtask persisted; part of Bytes.
	PersistedBytes int64
	// State is the state of each chained operator that has some.
	State []OperatorState
	// Declined is why the subtask declined; nil for an acknowledgement.
	Declined *Decline
}

// Decline is why a subtask declined a checkpoint: a kind and the message
// naming the cause. It is an error, and plain data (like the rest of Ack),
// so that it can cross the network between a task manager and the job
// manager.
type Decline struct {
	Reason  DeclineReason `json:"reason"`
	Message string        `json:"message"`
}

// Error returns the message.
func (d *Decline) Error() string { return d.Message }

// TriggerCheckpoint starts checkpoint id at every source subtask: each takes
// its snapshot and emits barrier id, between two source batches. Barriers
// then flow with the records; every subtask acknowledges on Acks once its
// snapshot is durable. triggerTime is in Unix milliseconds.
func (j *Job) TriggerCheckpoint(id, triggerTime int64, opts checkpoint.Options) {
	for _, t := range j.tasks {
		if t.source == nil {
			continue
		}
		t.mail.post(func() error {
			start := t.clock.Now()
			return t.snapshotAndForward(id, triggerTime, opts, time.Duration(start.UnixMilli()-triggerTime)*time.Millisecond, 0, false)
		})
	}
}

// NotifyCheckpointComplete tells every subtask that checkpoint id is
// complete (its _metadata is durable): two-phase-commit sinks commit. final
// says that id was triggered after every source ended (SourcesEnded), so
// it holds everything the job produced: with Options.FinalCheckpoint,
// subtasks then finish.
func (j *Job) NotifyCheckpointComplete(id int64, final bool) {
	j.local.complete(id)
	for _, t := range j.tasks {
		t.mail.post(func() error {
			err := t.notify(id, true)
			t.finalDone = t.finalDone || final
			return err
		})
	}
}

// NotifyCheckpointAborted tells every subtask that checkpoint id was
// aborted.
func (j *Job) NotifyCheckpointAborted(id int64) {
	j.targets.abort(id)
	j.local.abort(id)
	j.asyncs.abort(id) // at once: the tasks' mailboxes may be busy
	for _, g := range j.chanGroups {
		g.abort(id, fmt.Errorf("checkpoint %d: %w", id, errChannelStateAborted))
	}
	for _, t := range j.tasks {
		t.mail.post(func() error { return t.notify(id, false) })
	}
}

// Acks delivers the subtasks' checkpoint acknowledgements. Read it while
// checkpoints run: tasks block on a full channel.
func (j *Job) Acks() <-chan Ack { return j.acks }

// SourcesEnded is closed once every source subtask has read all its input
// and told its consumers (end of data). With Options.FinalCheckpoint the
// tasks then wait for a checkpoint to complete before they finish.
func (j *Job) SourcesEnded() <-chan struct{} { return j.sourcesEnded }

func (t *task) notify(id int64, complete bool) error {
	if !complete {
		// Stop collecting in-flight data for a checkpoint that is gone.
		t.abortChannelState(id, DeclineBarrier, fmt.Sprintf("checkpoint %d was aborted", id))
	}
	for i, op := range t.ops {
		l, ok := op.(CheckpointListener)
		if !ok {
			continue
		}
		t.tracker.Cur = i
		var err error
		if complete {
			err = l.NotifyCheckpointComplete(id)
		} else {
			err = l.NotifyCheckpointAborted(id)
		}
		if err != nil {
			what := "completion"
			if !complete {
				what = "abort"
			}
			return t.opError(i, fmt.Errorf("checkpoint %d %s: %w", id, what, err))
		}
	}
	t.noteSynchronous(id, complete)
	return nil
}

// snapshotAndForward runs the synchronous phase of checkpoint id on every
// chained operator, forwards barrier id on every output and starts the
// asynchronous phase, which acknowledges. For an unaligned checkpoint
// (opts.Unaligned) the barrier overtakes the queued output, which becomes
// channel state; unaligned says the snapshot was triggered before every
// input delivered its barrier, so input channel state is collected until
// they have.
func (t *task) snapshotAndForward(id, triggerTime int64, opts checkpoint.Options, startDelay, alignment time.Duration, unaligned bool) error {
	start := t.clock.Now()
	if hook := t.hooks.Sync; hook != nil {
		if err := hook(t.vertex, t.index, id); err != nil {
			return t.opError(0, fmt.Errorf("snapshot for checkpoint %d: %w", id, err))
		}
	}
	for i, op := range t.ops {
		if p, ok := op.(PreBarrier); ok {
			t.tracker.Cur = i
			if err := p.PrepareSnapshotPreBarrier(id); err != nil {
				return t.opError(i, fmt.Errorf("flush before the barrier of checkpoint %d: %w", id, err))
			}
		}
	}
	snaps := make([]OperatorSnapshot, len(t.ops))
	for i, op := range t.ops {
		p, ok := op.(Snapshotter)
		if !ok {
			continue
		}
		t.tracker.Cur = i
		s, err := p.SnapshotState(id, opts)
		if err != nil {
			releaseSnapshots(snaps)
			return t.opError(i, fmt.Errorf("snapshot for checkpoint %d: %w", id, err))
		}
		snaps[i] = s
	}
	var cs *channelState
	if opts.Unaligned {
		cs = t.newChannelState(id)
	}
	// An aligned checkpoint with a timeout goes out in order unless its
	// timeout passed already (then it is unaligned from here on).
	inOrder := opts.Timeoutable() && !unaligned && t.clock.Now().Before(time.UnixMilli(triggerTime).Add(opts.AlignedTimeout))
	t.forwardBarrier(network.Event{Kind: network.EventBarrier, ID: id, Timestamp: triggerTime, Checkpoint: opts}, cs, inOrder)
	if cs != nil {
		if unaligned {
			t.abortChannelState(0, DeclineSubsumed, fmt.Sprintf("checkpoint %d started before the channel state of this one was complete", id))
			t.inflight = cs
		} else {
			cs.finish(nil) // aligned inputs: only the outputs' part
		}
	}
	if opts.Synchronous && id > t.syncAborted {
		// Stop-with-savepoint: no timer fires any more, and, without
		// drain, nothing more is processed until it completes (the task
		// then finishes) or is aborted. (With drain the input has ended
		// before the barrier.)
		t.quiesced = id
		if !opts.Drain {
			t.suspended = id
		}
	}
	a := Ack{ID: id, StartDelay: max(startDelay, 0), Alignment: alignment, Sync: t.clock.Now().Sub(start), Unaligned: unaligned}
	t.perf.checkpointed(a.StartDelay, a.Alignment)
	t.async.Add(1)
	var timeoutAt time.Time // aligned with a timeout: when the outputs' barriers move ahead
	if cs != nil && inOrder {
		timeoutAt = time.UnixMilli(triggerTime).Add(opts.AlignedTimeout)
	}
	go t.persist(snaps, a, cs, timeoutAt)
	return nil
}

func releaseSnapshots(snaps []OperatorSnapshot) {
	for _, s := range snaps {
		if s.Keyed != nil {
			s.Keyed.Release()
		}
		if s.Native != nil {
			_ = s.Native.Snap.Release()
		}
	}
}

// outputTimeout is the outcome of timeoutOutputBarriers.
type outputTimeout struct {
	moved int
	err   error
}

// persist is the asynchronous phase: it writes the frozen state of every
// operator to checkpoint storage, then, for an unaligned checkpoint, the
// channel state cs once the task collected all of it, and acknowledges (or
// declines). A non-zero timeoutAt says the barriers went out in order with
// an aligned timeout: those still queued then are moved ahead.
func (t *task) persist(snaps []OperatorSnapshot, a Ack, cs *channelState, timeoutAt time.Time) {
	defer t.async.Done()
	defer releaseSnapshots(snaps)
	// Uploads end with the task or when the snapshot is aborted.
	ctx, release := t.asyncs.start(t.ctx, a.ID)
	defer release()
	start := time.Now()
	// The output side of an aligned checkpoint with a timeout runs beside
	// the uploads: a large state's upload must not hold back the switch.
	var moved <-chan outputTimeout
	if !timeoutAt.IsZero() {
		ch := make(chan outputTimeout, 1)
		moved = ch
		t.async.Add(1)
		go func(id int64) {
			defer t.async.Done()
			n, err := t.timeoutOutputBarriers(id, timeoutAt, cs)
			ch <- outputTimeout{n, err}
		}(a.ID)
	}
	if hook := t.hooks.Upload; hook != nil {
		if err := hook(t.vertex, t.index, a.ID); err != nil {
			t.decline(a, err)
			return
		}
	}
	for i, s := range snaps {
		if s.empty() {
			continue
		}
		c := t.ctxs[i]
		if s.Persist != nil {
			if err := s.Persist(); err != nil {
				t.decline(a, fmt.Errorf("operator %q: %w", c.Name, err))
				return
			}
		}
		st := metadata.Subtask{Index: c.Subtask, KeyGroupStart: c.KeyGroupStart, KeyGroupEnd: c.KeyGroupEnd, Lists: s.Lists, Refs: s.Refs, Schema: s.Schema}
		for _, l := range s.Lists {
			for _, e := range l.Elements {
				a.Bytes += int64(len(e))
			}
		}
		base := fmt.Sprintf("op-%s-%d", sanitize(c.UID), c.Subtask)
		// The keyed state's local copy (localrecovery.go), if any.
		lc := t.beginLocalCopy(a.ID, c, &s)
		defer lc.cleanup()
		if s.Keyed != nil {
			h, err := t.writeFile(ctx, a.ID, base+".kst", func(w io.Writer) error {
				_, err := s.Keyed.WriteStream(lc.teeKeyed(w))
				return err
			})
			if err != nil {
				t.decline(a, fmt.Errorf("operator %q: keyed state: %w", c.Name, err))
				return
			}
			st.Keyed = h
			lc.keyed(h)
			if h != nil {
				a.Bytes += h.Size
			}
		}
		if s.Native != nil {
			ns, uploaded, err := t.uploadNative(ctx, a.ID, base, s.Native)
			if err != nil {
				t.decline(a, fmt.Errorf("operator %q: native state: %w", c.Name, err))
				return
			}
			st.Native = ns
			lc.native(s.Native.Snap, ns)
			a.Bytes += uploaded
		}
		if len(s.Timers) > 0 {
			h, err := t.writeFile(ctx, a.ID, base+".tmr", func(w io.Writer) error {
				_, err := w.Write(s.Timers)
				return err
			})
			if err != nil {
				t.decline(a, fmt.Errorf("operator %q: timers: %w", c.Name, err))
				return
			}
			st.Timers = h
			lc.timers(s.Timers, h)
			if h != nil {
				a.Bytes += h.Size
			}
		}
		lc.finish()
		if _, sp := t.targets.get(a.ID); sp && len(st.Refs) > 0 {
			// A savepoint holds its own copy of every file.
			refs, n, err := t.copyRefs(ctx, a.ID, base, st.Refs)
			if err != nil {
				t.decline(a, fmt.Errorf("operator %q: referenced files: %w", c.Name, err))
				return
			}
			st.Refs = refs
			a.Bytes += n
		}
		if s.Async != nil {
			n, err := s.Async(ctx, a.ID, &st)
			if err != nil {
				t.decline(a, fmt.Errorf("operator %q: %w", c.Name, err))
				return
			}
			a.Bytes += n
		}
		a.State = append(a.State, OperatorState{UID: c.UID, Name: c.Name, Parallelism: c.Parallelism,
			MaxParallelism: c.MaxParallelism, State: st})
	}
	if moved != nil {
		r := <-moved
		if r.err != nil {
			t.decline(a, r.err)
			return
		}
		a.Unaligned = r.moved > 0
	}
	if cs != nil {
		select {
		case <-cs.done:
		case <-t.ctx.Done():
			t.decline(a, fmt.Errorf("channel state: %w", context.Cause(t.ctx)))
			return
		}
		if cs.err != nil {
			a.Declined = cs.err
			a.State = nil
			t.ack(a)
			return
		}
		chans, n, err := t.writeChannelState(a.ID, cs)
		if err != nil {
			t.decline(a, fmt.Errorf("channel state: %w", err))
			return
		}
		if len(chans) > 0 {
			c := t.ctxs[0]
			i := 0
			for i < len(a.State) && a.State[i].UID != c.UID {
				i++
			}
			if i == len(a.State) {
				a.State = append(a.State, OperatorState{UID: c.UID, Name: c.Name, Parallelism: c.Parallelism, MaxParallelism: c.MaxParallelism,
					State: metadata.Subtask{Index: c.Subtask, KeyGroupStart: c.KeyGroupStart, KeyGroupEnd: c.KeyGroupEnd}})
			}
			a.State[i].State.Channels = chans
		}
		a.Bytes += n
		a.PersistedBytes = n
		a.Unaligned = a.Unaligned || n > 0 // its barriers overtook data
	}
	a.Async = time.Since(start)
	t.ack(a)
}

func (t *task) decline(a Ack, err error) {
	a.Declined = &Decline{Reason: DeclineAsync, Message: fmt.Sprintf("asynchronous phase of checkpoint %d failed in %s: %v", a.ID, t.name, err)}
	a.State = nil
	t.ack(a)
}

// uploadNative uploads the files of a native snapshot (upload.Native):
// shared files the upload can reuse are referenced, the others go to
// shared/ under a name unique to this operator subtask, run and checkpoint;
// private files go to chk-<id>. It returns the state for the metadata and
// the bytes it uploaded.
func (t *task) uploadNative(ctx context.Context, id int64, base string, nu *NativeUpload) (*metadata.NativeState, int64, error) {
	if sp, ok := t.targets.get(id); ok {
		if sp.aborted {
			return nil, 0, fmt.Errorf("savepoint %d was aborted", id)
		}
		// A savepoint holds its own copy of every file.
		u := upload.Native{Store: sp.Store, Job: sp.Dir, Checkpoint: id, Savepoint: true,
			PrivateName: func(name string) string { return base + "-" + sanitize(name) }}
		r, err := u.Upload(ctx, nu.Snap, nil)
		if err != nil {
			return nil, 0, err
		}
		return r.State, r.Bytes, nil
	}
	if t.store == nil {
		return &metadata.NativeState{Registry: nu.Snap.Registry}, 0, nil
	}
	u := upload.Native{Store: t.store, Job: t.storeJob, Checkpoint: id,
		SharedName:  func(name string) string { return fmt.Sprintf("%s-%s-%d-%s", base, t.runID, id, sanitize(name)) },
		PrivateName: func(name string) string { return base + "-" + sanitize(name) }}
	r, err := u.Upload(ctx, nu.Snap, nu.Reuse)
	if err != nil {
		return nil, 0, err
	}
	if nu.Uploaded != nil {
		nu.Uploaded(id, r.Created)
	}
	return r.State, r.Bytes, nil
}

// writeFile writes one data file of checkpoint id; without checkpoint
// storage it only runs write into io.Discard and returns no handle.
func (t *task) writeFile(ctx context.Context, id int64, name string, write func(io.Writer) error) (*storage.FileHandle, error) {
	if _, sp := t.targets.get(id); t.store == nil && !sp {
		return nil, write(io.Discard)
	}
	fw, err := t.createFile(ctx, id, name)
	if err != nil {
		return nil, err
	}
	h, err := storage.WriteAll(fw, write)
	if err != nil {
		return nil, err
	}
	return &h, nil
}

func (t *task) ack(a Ack) {
	if t.acks == nil {
		return
	}
	a.Vertex, a.Subtask = t.vertex, t.index
	if a.Declined == nil {
		t.perf.cpSize.Store(a.Bytes)
		t.perf.cpPersisted.Store(a.PersistedBytes)
	}
	select {
	case t.acks <- a:
	case <-t.ctx.Done():
		// Nobody reads acks any more: the job is ending. Shared files this
		// snapshot uploaded would be orphans: nobody else knows them.
		for _, s := range a.State {
			for _, h := range s.State.SharedFiles(true) {
				_ = t.store.DeleteFile(context.WithoutCancel(t.ctx), t.storeJob, h.Path)
			}
		}
	}
}

// handleBarrierEvent feeds a barrier-related event of channel ch to the
// barrier handler and applies what it decides. overtook is the
// Buffer.Overtook of a priority barrier.
func (t *task) handleBarrierEvent(ch int, ev network.Event, overtook int64) error {
	now := t.clock.Now().UnixMilli()
	switch ev.Kind {
	case network.EventBarrier:
		if ev.Priority {
			t.barriers.OnPriorityBarrier(ch, ev.ID, ev.Timestamp, ev.Checkpoint, now)
		} else {
			t.barriers.OnBarrier(ch, ev.ID, ev.Timestamp, ev.Checkpoint, now)
		}
	case network.EventCancelBarrier:
		t.barriers.OnCancelBarrier(ch, ev.ID, now)
	case network.EventEndOfPartition:
		t.barriers.OnEndOfPartition(ch, now)
	}
	return t.applyBarrierActions(overtook)
}

// alignmentTimedOut is mail posted when the aligned timeout of checkpoint
// id passed: its barriers still queued at the gate behind data become
// priority events (the first one read triggers the snapshot unaligned),
// and an alignment in progress switches to unaligned.
func (t *task) alignmentTimedOut(id int64) error {
	delete(t.alignTimers, id)
	for ch := range t.gate.NumChannels() {
		t.gate.PrioritizeBarrier(ch, id)
	}
	t.barriers.OnTick(t.clock.Now().UnixMilli())
	return t.applyBarrierActions(0)
}

// scheduleAlignmentTimer makes the task run alignmentTimedOut(id) at at
// (Unix milliseconds), also while it is busy with a buffer (readStop) or
// backpressured (mail is served there); once per checkpoint.
func (t *task) scheduleAlignmentTimer(id, at int64) {
	if t.alignTimers[id] {
		return
	}
	if t.alignTimers == nil {
		t.alignTimers = map[int64]bool{}
	}
	t.alignTimers[id] = true
	tm := t.clock.NewTimer(time.UnixMilli(at).Sub(t.clock.Now()))
	go func() {
		select {
		case <-tm.C():
			t.readStop.Store(true)
			t.mail.post(func() error { return t.alignmentTimedOut(id) })
		case <-t.ctx.Done():
			tm.Stop()
		}
	}()
}

// applyBarrierActions applies what the barrier handler decided. overtook
// is the Buffer.Overtook of the priority barrier just read, if any.
func (t *task) applyBarrierActions(overtook int64) error {
	for _, a := range t.barriers.Actions() {
		switch a := a.(type) {
		case barrier.Block:
			t.gate.Block(a.Ch)
		case barrier.Unblock:
			t.gate.Unblock(a.Ch)
		case barrier.TriggerSnapshot:
			if err := t.snapshotAndForward(a.ID, a.TriggerTime, a.Options, a.StartDelay, a.Alignment, a.Unaligned); err != nil {
				return err
			}
		case barrier.StartPersisting:
			t.startPersisting(a.Ch)
		case barrier.PersistOvertaken:
			t.persistOvertaken(a.Ch, overtook)
		case barrier.StopPersisting:
			t.stopPersisting(a.Ch)
		case barrier.ChannelStateComplete:
			t.completeChannelState(a.ID)
		case barrier.ScheduleTimer:
			t.scheduleAlignmentTimer(a.ID, a.At)
		case barrier.Abort:
			reason := DeclineBarrier
			if a.Reason == barrier.ReasonSubsumed {
				reason = DeclineSubsumed
			}
			// An unaligned checkpoint already snapshotted here is
			// declined by its asynchronous phase.
			if t.abortChannelState(a.ID, reason, a.Message) {
				continue
			}
			t.ack(Ack{ID: a.ID, Declined: &Decline{Reason: reason, Message: a.Message}})
		case barrier.ForwardCancelBarrier:
			for _, rp := range t.partitions {
				rp.BroadcastEvent(network.Event{Kind: network.EventCancelBarrier, ID: a.ID})
			}
		case barrier.Fail:
			return t.opError(0, a.Err)
		}
	}
	return nil
}

// awaitFinalCheckpoint keeps serving mail (checkpoint triggers,
// notifications) after the task's input ended, until the final checkpoint
// (one triggered after every source ended) completes: what the last records
// produced is then committed. No task finishes before, since a finished
// task could not take part in later checkpoints. Without
// Options.FinalCheckpoint it returns at once.
func (t *task) awaitFinalCheckpoint(ctx context.Context) error {
	for t.final && !t.finalDone {
		if err := t.serveMail(); err != nil {
			return err
		}
		if t.finalDone {
			break
		}
		select {
		case <-t.mail.notify:
		case <-ctx.Done():
			return t.canceled(ctx)
		}
	}
	return nil
}
