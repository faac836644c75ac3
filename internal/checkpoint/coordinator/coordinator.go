package coordinator

import (
	"fmt"
	"slices"
	"time"

	"github.com/weirstream/weir/internal/checkpoint"
)

// Coordinator is the checkpoint coordinator's state machine. It is not safe
// for concurrent use: one goroutine (the driver) owns it, feeds it inputs and
// drains Actions after each one.
type Coordinator[H any] struct {
	cfg   Config
	tasks map[TaskID]bool

	now     time.Time // latest time seen; inputs never move it back
	firstID int64
	nextID  int64

	pending map[int64]*pendingCheckpoint[H]
	// alignedOnly: EndUnaligned was called.
	alignedOnly bool

	retained        []int64 // completed and retained, oldest first
	lastCompletedID int64   // 0: none
	lastCompletion  time.Time
	hasCompletion   bool

	// Periodic scheduling. nextPeriodic is the next periodic slot (zero
	// when Interval is 0). queued: a periodic slot came while MaxConcurrent
	// checkpoints were pending; it fires as soon as one leaves, and the
	// schedule is suspended until then.
	nextPeriodic time.Time
	queued       bool

	failures int  // consecutive counted failures
	stopped  bool // Shutdown or FailJob
	// stoppedWith is the synchronous savepoint that completed: the tasks
	// finish, nothing more is triggered.
	stoppedWith int64

	actions []Action
}

type pendingCheckpoint[H any] struct {
	id         int64
	triggered  time.Time
	deadline   time.Time
	periodic   bool
	opts       checkpoint.Options
	acks       map[TaskID]ack[H]
	finalizing bool // all acked, WriteMetadata emitted
}

type ack[H any] struct {
	stats  TaskStats
	handle H
	at     time.Time
}

// New returns a coordinator that will give the next checkpoint firstID (1
// for a new job; the restored checkpoint's id + 1 after a restart, or use
// Restore). The first periodic trigger is due at now + Interval (Flink picks
// a random initial delay; weir stays deterministic).
func New[H any](cfg Config, now time.Time, firstID int64) (*Coordinator[H], error) {
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if firstID < 1 {
		return nil, fmt.Errorf("coordinator: first checkpoint id %d is less than 1", firstID)
	}
	cfg.Tasks = slices.Clone(cfg.Tasks)
	c := &Coordinator[H]{
		cfg:     cfg,
		tasks:   make(map[TaskID]bool, len(cfg.Tasks)),
		now:     now,
		firstID: firstID,
		nextID:  firstID,
		pending: make(map[int64]*pendingCheckpoint[H]),
	}
	for _, t := range cfg.Tasks {
		c.tasks[t] = true
	}
	if cfg.Interval > 0 {
		c.nextPeriodic = now.Add(cfg.Interval)
	}
	return c, nil
}

// Restore tells a coordinator of a restarted job what the completed
// checkpoint store holds: the latest completed checkpoint id and the
// retained ids. Ids continue after latestCompleted, the retained ones are
// subsumed beyond NumRetained on the next completion, oldest first, and
// failures of checkpoints not newer than latestCompleted are not counted. It
// must be called before the first trigger.
func (c *Coordinator[H]) Restore(latestCompleted int64, retained []int64) error {
	if c.nextID != c.firstID || c.stopped {
		return fmt.Errorf("coordinator: Restore after the first trigger")
	}
	if latestCompleted < 0 {
		return fmt.Errorf("coordinator: restored checkpoint id %d is negative", latestCompleted)
	}
	r := slices.Clone(retained)
	slices.Sort(r)
	r = slices.Compact(r)
	if len(r) > 0 && (r[0] < 1 || r[len(r)-1] > latestCompleted) {
		return fmt.Errorf("coordinator: retained ids %v not within 1..%d", r, latestCompleted)
	}
	c.retained = r
	c.lastCompletedID = latestCompleted
	if latestCompleted+1 > c.nextID {
		c.nextID = latestCompleted + 1
		c.firstID = c.nextID
	}
	return nil
}

// Actions drains the actions accumulated since the last call, in the order
// the driver must carry them out.
func (c *Coordinator[H]) Actions() []Action {
	a := c.actions
	c.actions = nil
	return a
}

// NextTick returns when the driver should call Tick next: the earliest of
// the next periodic trigger and the next expiry deadline. The zero time
// means nothing is scheduled (periodic checkpoints off or suspended, nothing
// pending, or stopped); the driver then waits for other input.
func (c *Coordinator[H]) NextTick() time.Time {
	if c.stopped {
		return time.Time{}
	}
	var next time.Time
	if c.cfg.Interval > 0 && !c.queued {
		next = c.nextPeriodic
	}
	for _, p := range c.pending {
		if next.IsZero() || p.deadline.Before(next) {
			next = p.deadline
		}
	}
	return next
}

// Pending returns the ids of the pending checkpoints (including those whose
// _metadata is being written), ascending.
func (c *Coordinator[H]) Pending() []int64 {
	ids := make([]int64, 0, len(c.pending))
	for id := range c.pending {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// Retained returns the retained completed checkpoint ids, oldest first.
func (c *Coordinator[H]) Retained() []int64 { return slices.Clone(c.retained) }

// LatestCompleted returns the latest completed checkpoint id, 0 if none.
func (c *Coordinator[H]) LatestCompleted() int64 { return c.lastCompletedID }

// NextID returns the id the next trigger will use.
func (c *Coordinator[H]) NextID() int64 { return c.nextID }

// Failures returns the current count of consecutive counted failures.
func (c *Coordinator[H]) Failures() int { return c.failures }

// Stopped reports whether Shutdown ran or the coordinator failed the job.
func (c *Coordinator[H]) Stopped() bool { return c.stopped }

func (c *Coordinator[H]) advance(now time.Time) {
	if now.After(c.now) {
		c.now = now
	}
}

func (c *Coordinator[H]) emit(a Action) { c.actions = append(c.actions, a) }

// Tick advances time: it expires pending checkpoints whose deadline has
// passed (oldest first), then triggers a periodic checkpoint if one is due
// and allowed. Expiry happens only here: an input that arrives after a
// deadline but before the Tick that notices it is processed normally.
func (c *Coordinator[H]) Tick(now time.Time) {
	c.advance(now)
	if c.stopped {
		return
	}
	for _, id := range c.Pending() {
		p := c.pending[id]
		if p == nil || c.now.Before(p.deadline) {
			continue
		}
		c.abort(p, ReasonExpired,
			fmt.Sprintf("Checkpoint %d of job %s expired before completing.", id, c.cfg.JobName),
			ErrCheckpointExpired)
		if c.stopped {
			return
		}
	}
	c.periodic()
}

// periodic triggers a periodic checkpoint if one is due, following Flink's
// CheckpointRequestDecider: a slot that finds MaxConcurrent checkpoints
// pending is queued and fires as soon as one leaves; a slot that comes
// within MinPause of the last completion is dropped and the schedule moves
// to lastCompletion + MinPause. Missed slots (a late Tick) are skipped, not
// caught up.
func (c *Coordinator[H]) periodic() {
	if c.stopped || c.cfg.Interval == 0 {
		return
	}
	if c.queued {
		c.runQueued()
		return
	}
	if c.now.Before(c.nextPeriodic) {
		return
	}
	if c.stopping() {
		// The sources stopped after the stop-with-savepoint's barrier: a
		// checkpoint could not complete before the savepoint does.
		c.nextPeriodic = c.now.Add(c.cfg.Interval)
		return
	}
	// Move the schedule to the first slot after now.
	missed := c.now.Sub(c.nextPeriodic)/c.cfg.Interval + 1
	c.nextPeriodic = c.nextPeriodic.Add(missed * c.cfg.Interval)
	if len(c.pending) >= c.cfg.MaxConcurrent {
		c.queued = true
		return
	}
	if wait := c.minPauseLeft(); wait > 0 {
		c.nextPeriodic = c.now.Add(wait)
		return
	}
	c.trigger(true, c.checkpointOptions(checkpoint.FormatConfigured))
}

// stopping reports whether a synchronous savepoint is pending or has
// completed (the tasks are finishing): nothing else is triggered then.
func (c *Coordinator[H]) stopping() bool {
	if c.stoppedWith != 0 {
		return true
	}
	for _, p := range c.pending {
		if p.opts.Synchronous {
			return true
		}
	}
	return false
}

// savepointPending reports whether a savepoint is pending.
func (c *Coordinator[H]) savepointPending() bool {
	for _, p := range c.pending {
		if p.opts.Kind == checkpoint.KindSavepoint {
			return true
		}
	}
	return false
}

// checkpointOptions are the options of a checkpoint triggered now. While a
// savepoint is pending, checkpoints are aligned: an unaligned barrier would
// overtake the savepoint's and abort it at the tasks.
func (c *Coordinator[H]) checkpointOptions(format checkpoint.Format) checkpoint.Options {
	return checkpoint.Options{Kind: checkpoint.KindCheckpoint, Format: format, LastCompleted: c.lastCompletedID,
		Unaligned: c.cfg.Unaligned && !c.alignedOnly && !c.savepointPending(), AlignedTimeout: c.cfg.AlignedTimeout}
}

// runQueued fires a queued periodic trigger if a slot is free; the schedule
// restarts from it (now + Interval), as Flink reschedules its periodic
// trigger after a queued request.
func (c *Coordinator[H]) runQueued() {
	if !c.queued || c.stopped || len(c.pending) >= c.cfg.MaxConcurrent || c.stopping() {
		return
	}
	c.queued = false
	if wait := c.minPauseLeft(); wait > 0 {
		c.nextPeriodic = c.now.Add(wait)
		return
	}
	c.trigger(true, c.checkpointOptions(checkpoint.FormatConfigured))
	c.nextPeriodic = c.now.Add(c.cfg.Interval)
}

func (c *Coordinator[H]) minPauseLeft() time.Duration {
	if c.cfg.MinPause == 0 || !c.hasCompletion {
		return 0
	}
	return c.lastCompletion.Add(c.cfg.MinPause).Sub(c.now)
}

// EndUnaligned makes every checkpoint triggered from now on aligned. The
// runner calls it when every source ended: the final checkpoint must hold
// everything the job produced, so its barriers must follow the last
// records instead of overtaking them (an unaligned snapshot would leave
// them in flight, processed after it and committed by nothing).
func (c *Coordinator[H]) EndUnaligned() { c.alignedOnly = true }

// TriggerManual triggers a checkpoint now, ignoring Interval and MinPause
// (as Flink does for non-periodic requests) but not MaxConcurrent: with
// MaxConcurrent checkpoints pending it returns ErrTooManyConcurrent (Flink
// would queue the request; the driver may retry after the next completion or
// abort). After Shutdown or FailJob it returns ErrStopped. format is the
// snapshot format the operators write (checkpoint.FormatConfigured: the
// job's configured one).
func (c *Coordinator[H]) TriggerManual(now time.Time, format checkpoint.Format) (int64, error) {
	c.advance(now)
	if c.stopped {
		return 0, ErrStopped
	}
	if n := len(c.pending); n >= c.cfg.MaxConcurrent {
		return 0, fmt.Errorf("%w (%d pending, max-concurrent-checkpoints %d)", ErrTooManyConcurrent, n, c.cfg.MaxConcurrent)
	}
	if c.stopping() {
		return 0, ErrStopInProgress
	}
	return c.trigger(false, c.checkpointOptions(format)), nil
}

// TriggerSavepoint triggers a savepoint now with opts (their Kind is set to
// KindSavepoint; Format, Target, Synchronous and Drain are the caller's).
// As in Flink, a savepoint is not held back by MaxConcurrent or MinPause,
// is always aligned, is never retained or subsumed, does not subsume the
// checkpoints pending before it, and its failure does not count against
// TolerableFailures. Only a synchronous savepoint (stop-with-savepoint)
// is followed by NotifyComplete: an intermediate savepoint commits no
// side effects. While a synchronous savepoint is pending no checkpoint is
// triggered, and a second one is refused with ErrStopInProgress.
func (c *Coordinator[H]) TriggerSavepoint(now time.Time, opts checkpoint.Options) (int64, error) {
	c.advance(now)
	if c.stopped {
		return 0, ErrStopped
	}
	if c.stopping() {
		return 0, ErrStopInProgress
	}
	opts.Kind = checkpoint.KindSavepoint
	opts.LastCompleted = c.lastCompletedID
	opts.Unaligned, opts.AlignedTimeout = false, 0
	return c.trigger(false, opts), nil
}

func (c *Coordinator[H]) trigger(periodic bool, opts checkpoint.Options) int64 {
	id := c.nextID
	c.nextID++
	c.pending[id] = &pendingCheckpoint[H]{
		id:        id,
		triggered: c.now,
		deadline:  c.now.Add(c.cfg.Timeout),
		periodic:  periodic,
		opts:      opts,
		acks:      make(map[TaskID]ack[H], len(c.tasks)),
	}
	c.emit(Trigger{ID: id, Timestamp: c.now, Periodic: periodic, Options: opts})
	return id
}

// Ack records task's acknowledgement of checkpoint id with its statistics
// and state handle. The last one moves the checkpoint to finalizing and
// emits WriteMetadata. An ack the coordinator cannot take (the checkpoint is
// not pending: aborted, expired, never triggered; or the task is unknown)
// does not change its state: it emits DiscardState so the driver deletes
// the handle's files (Flink's discardSubtaskState). A duplicate ack, or an
// ack for a retained completed checkpoint, is ignored without discarding,
// since its files may be in use.
func (c *Coordinator[H]) Ack(now time.Time, id int64, task TaskID, stats TaskStats, handle H) {
	c.advance(now)
	p := c.pending[id]
	switch {
	case p == nil && slices.Contains(c.retained, id):
		return
	case p == nil:
		var msg string
		if id >= c.firstID && id < c.nextID {
			msg = fmt.Sprintf("Received late message for now expired checkpoint attempt %d from task %s of job %s.", id, task, c.cfg.JobName)
		} else {
			msg = fmt.Sprintf("Received message for an unknown checkpoint %d from task %s of job %s.", id, task, c.cfg.JobName)
		}
		c.emit(DiscardState[H]{ID: id, Task: task, Handle: handle, Message: msg})
		return
	case !c.tasks[task]:
		c.emit(DiscardState[H]{ID: id, Task: task, Handle: handle, Message: fmt.Sprintf(
			"Could not acknowledge the checkpoint %d for task %s of job %s, because the task is unknown. Discarding the state handle to avoid lingering state.",
			id, task, c.cfg.JobName)})
		return
	}
	if _, dup := p.acks[task]; dup || p.finalizing {
		return
	}
	p.acks[task] = ack[H]{stats: stats, handle: handle, at: c.now}
	if len(p.acks) < len(c.tasks) {
		return
	}
	p.finalizing = true
	handles := make(map[TaskID]H, len(p.acks))
	for t, a := range p.acks {
		handles[t] = a.handle
	}
	c.emit(WriteMetadata[H]{ID: id, Handles: handles, Stats: c.stats(p)})
}

func (c *Coordinator[H]) stats(p *pendingCheckpoint[H]) Stats {
	reports := make([]TaskReport, 0, len(p.acks))
	for t, a := range p.acks {
		reports = append(reports, TaskReport{Task: t, Stats: a.stats, EndToEnd: a.at.Sub(p.triggered)})
	}
	return buildStats(reports)
}

// MetadataWritten reports that chk-id/_metadata is durable: the checkpoint
// is complete. It emits Completed, NotifyComplete, Subsume (if retained
// checkpoints fell out of NumRetained), aborts older pending checkpoints as
// ReasonSubsumed, resets the failure count, and may fire a queued periodic
// trigger. It is ignored unless id is finalizing (for example it expired
// while its _metadata was being written; its CleanupFiles was emitted then).
func (c *Coordinator[H]) MetadataWritten(now time.Time, id int64) {
	c.advance(now)
	p := c.pending[id]
	if c.stopped || p == nil || !p.finalizing {
		return
	}
	delete(c.pending, id)
	if p.opts.Kind == checkpoint.KindSavepoint {
		st := c.stats(p)
		dur := c.now.Sub(p.triggered)
		c.emit(Completed{
			ID: id, Triggered: p.triggered, Duration: dur, Savepoint: true, Stats: st,
			Message: fmt.Sprintf("Completed savepoint %d for job %s (%d bytes, duration=%d ms).",
				id, c.cfg.JobName, st.Bytes, dur.Milliseconds()),
		})
		if p.opts.Synchronous {
			c.stoppedWith = id
			c.emit(NotifyComplete{ID: id})
			c.stoppedWith = id
		}
		c.runQueued()
		return
	}
	c.retained = append(c.retained, id)
	c.lastCompletedID = id
	c.lastCompletion = c.now
	c.hasCompletion = true
	c.failures = 0

	st := c.stats(p)
	dur := c.now.Sub(p.triggered)
	c.emit(Completed{
		ID: id, Triggered: p.triggered, Duration: dur, Periodic: p.periodic, Stats: st,
		Message: fmt.Sprintf("Completed checkpoint %d for job %s (%d bytes, checkpointDuration=%d ms).",
			id, c.cfg.JobName, st.Bytes, dur.Milliseconds()),
	})
	c.emit(NotifyComplete{ID: id})
	if n := len(c.retained) - c.cfg.NumRetained; n > 0 {
		c.emit(Subsume{IDs: slices.Clone(c.retained[:n])})
		c.retained = slices.Clone(c.retained[n:])
	}
	for _, old := range c.Pending() {
		// A savepoint is the user's: a checkpoint never subsumes it.
		if old < id && c.pending[old].opts.Kind != checkpoint.KindSavepoint {
			c.abort(c.pending[old], ReasonSubsumed,
				fmt.Sprintf("Checkpoint %d of job %s subsumed by completed checkpoint %d.", old, c.cfg.JobName, id),
				ErrCheckpointSubsumed)
		}
	}
	c.runQueued()
}

// MetadataFailed reports that writing chk-id/_metadata failed: the
// checkpoint is aborted with ReasonIOError (counted). Ignored unless id is
// finalizing.
func (c *Coordinator[H]) MetadataFailed(now time.Time, id int64, err error) {
	c.advance(now)
	p := c.pending[id]
	if c.stopped || p == nil || !p.finalizing {
		return
	}
	c.abort(p, ReasonIOError, fmt.Sprintf("Could not complete the pending checkpoint %d.", id), err)
	c.runQueued()
}

// Decline reports that task declined checkpoint id for cause; kind says
// why (ReasonDeclined for a failed synchronous phase, ReasonAsyncFailure
// for a failed upload, ReasonSubsumed for a newer barrier,
// ReasonTaskNotReady, ...; 0 means ReasonDeclined). The checkpoint is
// aborted. Declines for checkpoints that are not pending, or already
// finalizing (every task acked, so the decline is stale), are ignored.
func (c *Coordinator[H]) Decline(now time.Time, id int64, task TaskID, cause error, kind Reason) {
	c.advance(now)
	p := c.pending[id]
	if c.stopped || p == nil || p.finalizing {
		return
	}
	if !kind.valid() {
		kind = ReasonDeclined
	}
	c.abort(p, kind, fmt.Sprintf("Decline checkpoint %d by task %s of job %s at %s.",
		id, task, c.cfg.JobName, fmtTime(c.now)), cause)
	c.runQueued()
}

// Shutdown aborts every pending checkpoint with reason (0 means
// ReasonJobCanceled; ReasonJobFailing for a failover). These aborts never
// count as failures. Afterwards the coordinator ignores all input except
// late acks, whose state it still asks the driver to discard.
func (c *Coordinator[H]) Shutdown(now time.Time, reason Reason) {
	c.advance(now)
	if c.stopped {
		return
	}
	if !reason.valid() {
		reason = ReasonJobCanceled
	}
	c.stop(reason, ErrShutdown)
}

func (c *Coordinator[H]) stop(reason Reason, cause error) {
	c.stopped = true
	c.queued = false
	for _, id := range c.Pending() {
		c.abort(c.pending[id], reason,
			fmt.Sprintf("Checkpoint %d of job %s aborted: %s", id, c.cfg.JobName, reason.Message()), cause)
	}
}

// abort removes p and emits Aborted, CleanupFiles and NotifyAborted, then
// applies Flink's CheckpointFailureManager: a counted reason for a
// checkpoint newer than the last completed one increments the count, and a
// count above TolerableFailures emits FailJob and suspends the coordinator.
// Callers run runQueued afterwards.
func (c *Coordinator[H]) abort(p *pendingCheckpoint[H], reason Reason, msg string, cause error) {
	delete(c.pending, p.id)
	counted := reason.Counts() && p.id > c.lastCompletedID && !c.stopped && p.opts.Kind != checkpoint.KindSavepoint
	c.emit(Aborted{ID: p.id, Reason: reason, Message: msg, Cause: cause, Counted: counted})
	c.emit(CleanupFiles{ID: p.id})
	c.emit(NotifyAborted{ID: p.id})
	if !counted {
		return
	}
	c.failures++
	if c.failures <= c.cfg.TolerableFailures {
		return
	}
	c.failures = 0
	c.emit(FailJob{
		ID: p.id, Reason: reason,
		Message: fmt.Sprintf("%s The latest checkpoint failed due to %s, view the Checkpoint History tab or the Job Manager log to find out why continuous checkpoints failed.",
			tolerableFailureMessage, reason.Message()),
	})
	c.stop(ReasonJobFailing, ErrTolerableFailuresExceeded)
}
