package barrier

import (
	"fmt"
	"strings"
	"time"

	"github.com/weirstream/weir/internal/checkpoint"
)

// Mode says how a Handler treats barriers.
type Mode int

const (
	// ExactlyOnce aligns barriers: a channel that delivered barrier n is
	// blocked until n arrived on every live channel, so the snapshot sees
	// exactly the records before barrier n on every input. Flink's
	// SingleCheckpointBarrierHandler in aligned mode.
	ExactlyOnce Mode = iota
	// AtLeastOnce never blocks: it counts barriers per checkpoint, several
	// checkpoints at a time, and triggers n once it arrived on every live
	// channel. Records after barrier n on a fast channel are in the snapshot
	// of n and are replayed after a restore. Flink's CheckpointBarrierTracker.
	AtLeastOnce
)

// String returns the mode's name.
func (m Mode) String() string {
	switch m {
	case ExactlyOnce:
		return "exactly-once"
	case AtLeastOnce:
		return "at-least-once"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// MaxTrackedCheckpoints bounds the checkpoints an AtLeastOnce handler tracks
// at once (Flink's MAX_CHECKPOINTS_TO_TRACK); starting one more aborts the
// oldest with ReasonTooManyPending.
const MaxTrackedCheckpoints = 50

// Handler is the barrier state machine of one consumer task. It is not safe
// for concurrent use: the task goroutine alone calls it. See the package
// documentation for the semantics and how to apply the actions.
type Handler struct {
	mode     Mode
	ended    []bool
	live     int // channels not ended
	blocked  []bool
	nblocked int
	// pending are the checkpoints whose barriers are being collected, in
	// increasing id order; at most one in ExactlyOnce mode.
	pending []*pendingCheckpoint
	// latest is the highest checkpoint id seen in a barrier, cancellation
	// barrier or task abort. An id <= latest that is not pending is settled
	// (triggered, aborted or given up) and its barriers are ignored.
	latest  int64
	actions []Action
}

type pendingCheckpoint struct {
	// unaligned is set once the checkpoint triggered unaligned here: it
	// stays pending while the channels that had not delivered its barrier
	// persist their input until they do.
	unaligned    bool
	id           int64
	triggerTime  int64
	options      checkpoint.Options
	firstArrival int64
	delivered    []bool // by channel
	missing      int    // live channels that have not delivered the barrier
}

// New returns a handler for a task with channels input channels (all input
// gates of the task numbered consecutively) in the given mode.
func New(channels int, mode Mode) *Handler {
	if channels < 1 {
		panic("barrier: a handler needs at least one input channel")
	}
	if mode != ExactlyOnce && mode != AtLeastOnce {
		panic(fmt.Sprintf("barrier: unsupported mode %v", mode))
	}
	return &Handler{
		mode:    mode,
		ended:   make([]bool, channels),
		live:    channels,
		blocked: make([]bool, channels),
	}
}

// Actions returns the actions produced since the last call, in the order the
// task must apply them, and forgets them. The caller owns the slice.
func (h *Handler) Actions() []Action {
	a := h.actions
	h.actions = nil
	return a
}

// OnBarrier handles the barrier of checkpoint id, triggered by the
// coordinator at triggerTime with opts, arriving on channel ch at now (both
// Unix milliseconds), in its place in the channel's order.
func (h *Handler) OnBarrier(ch int, id int64, triggerTime int64, opts checkpoint.Options, now int64) {
	h.onBarrier(ch, id, triggerTime, opts, now, false)
}

// OnPriorityBarrier handles the barrier of checkpoint id arriving on ch as a
// priority event, ahead of the buffers it overtook: an unaligned checkpoint.
// In ExactlyOnce mode the first one triggers the snapshot at once
// (TriggerSnapshot with Unaligned) and makes every other live channel
// persist its input until its barrier arrives; see the package
// documentation. In AtLeastOnce mode it is an ordinary barrier.
func (h *Handler) OnPriorityBarrier(ch int, id int64, triggerTime int64, opts checkpoint.Options, now int64) {
	h.onBarrier(ch, id, triggerTime, opts, now, h.mode == ExactlyOnce)
}

func (h *Handler) onBarrier(ch int, id int64, triggerTime int64, opts checkpoint.Options, now int64, priority bool) {
	if !h.checkLive(ch, "barrier", id) {
		return
	}
	i := h.find(id)
	created := i < 0
	if i < 0 {
		if id <= h.latest {
			return // stale: id already triggered or aborted here
		}
		if h.mode == ExactlyOnce && len(h.pending) > 0 {
			h.abortOlder(id, func(n int64) string {
				return fmt.Sprintf("Received checkpoint barrier for checkpoint %d before completing current checkpoint %d. Skipping current checkpoint.", id, n)
			})
			h.unblockAll()
		}
		h.latest = id
		h.pending = append(h.pending, &pendingCheckpoint{
			id:           id,
			triggerTime:  triggerTime,
			options:      opts,
			firstArrival: now,
			delivered:    make([]bool, len(h.ended)),
			missing:      h.live,
		})
		i = len(h.pending) - 1
		if len(h.pending) > MaxTrackedCheckpoints {
			old := h.pending[0].id
			h.abortAt(0, ReasonTooManyPending, fmt.Sprintf("Tracking more than %d concurrent checkpoints. Skipping checkpoint %d.", MaxTrackedCheckpoints, old), nil)
			i--
		}
	} else if h.pending[i].delivered[ch] {
		h.fail(fmt.Errorf("channel %d, checkpoint %d: %w", ch, id, ErrDuplicateBarrier))
		return
	}
	p := h.pending[i]
	p.delivered[ch] = true
	p.missing--
	switch {
	case p.unaligned:
		if priority {
			h.emit(PersistOvertaken{Ch: ch, ID: id})
		}
		h.emit(StopPersisting{Ch: ch, ID: id})
		h.completeUnaligned()
		return
	case priority:
		h.triggerUnaligned(p, ch, now)
		return
	case p.missing == 0:
		h.trigger(i, now)
		return
	case h.timedOut(p, now):
		// The barrier came in order but late: the rest goes unaligned.
		h.triggerUnaligned(p, -1, now)
		return
	}
	if created && h.mode == ExactlyOnce && p.options.Timeoutable() {
		h.emit(ScheduleTimer{ID: id, At: p.triggerTime + p.options.AlignedTimeout.Milliseconds()})
	}
	if h.mode == ExactlyOnce {
		h.blocked[ch] = true
		h.nblocked++
		h.emit(Block{Ch: ch})
	}
}

// OnCancelBarrier handles a cancellation barrier for checkpoint id arriving on
// channel ch: an upstream task aborted id. If id is pending it is aborted; if
// id is newer than anything seen it is aborted (and every older pending
// checkpoint with it) so that its barriers are ignored when they come. A
// cancellation barrier for a settled id is ignored, so each abort is reported
// and forwarded once. now is unused (the aligned timeout is driven by
// OnTick); every input takes the time for a uniform shape.
func (h *Handler) OnCancelBarrier(ch int, id int64, now int64) {
	if !h.checkLive(ch, "cancellation barrier", id) {
		return
	}
	h.cancel(id, ReasonCancellationBarrier,
		fmt.Sprintf("Received cancellation barrier for checkpoint %d from input channel %d.", id, ch), nil,
		func(n int64) string {
			return fmt.Sprintf("Received cancellation barrier for checkpoint %d before completing current checkpoint %d. Skipping current checkpoint.", id, n)
		})
}

// OnEndOfPartition handles the end of channel ch. An ended channel no longer
// has to deliver barriers: if it was the last one a pending checkpoint waited
// for, that checkpoint triggers now.
func (h *Handler) OnEndOfPartition(ch int, now int64) {
	if !h.checkLive(ch, "end of partition", 0) {
		return
	}
	h.ended[ch] = true
	h.live--
	for _, p := range h.pending {
		if !p.delivered[ch] {
			p.missing--
			if p.unaligned {
				h.emit(StopPersisting{Ch: ch, ID: p.id})
			}
		}
	}
	if len(h.pending) > 0 && h.pending[0].unaligned {
		h.completeUnaligned()
		return
	}
	for {
		i := 0
		for i < len(h.pending) && h.pending[i].missing > 0 {
			i++
		}
		if i == len(h.pending) {
			return
		}
		h.trigger(i, now)
	}
}

// AbortFromTask aborts checkpoint id on the task's behalf (its snapshot could
// not start, or the coordinator aborted id). It behaves like a cancellation
// barrier: the pending checkpoint id (and every older one) is aborted, a
// newer id is remembered as aborted, and the Abort carries reason as Cause.
// A settled id is ignored: if id already triggered, the task owns its
// snapshot and declines it itself.
func (h *Handler) AbortFromTask(id int64, reason error) {
	h.cancel(id, ReasonTask, fmt.Sprintf("Task aborted checkpoint %d: %v", id, reason), reason,
		func(n int64) string {
			return fmt.Sprintf("Task aborted checkpoint %d before completing current checkpoint %d. Skipping current checkpoint.", id, n)
		})
}

// cancel aborts id (and every older pending checkpoint) unless id is settled.
func (h *Handler) cancel(id int64, reason Reason, msg string, cause error, subsumed func(n int64) string) {
	if h.find(id) < 0 && id <= h.latest {
		return
	}
	h.abortOlder(id, subsumed)
	if i := h.find(id); i >= 0 {
		h.pending = append(h.pending[:i], h.pending[i+1:]...)
	}
	h.latest = max(h.latest, id)
	h.emit(Abort{ID: id, Reason: reason, Message: msg, Cause: cause}, ForwardCancelBarrier{ID: id})
	if h.mode == ExactlyOnce {
		h.unblockAll()
	}
}

// trigger completes pending[i]: older pending checkpoints can no longer
// complete (a channel skipped them), so they are aborted first.
func (h *Handler) trigger(i int, now int64) {
	p := h.pending[i]
	h.abortOlder(p.id, func(n int64) string {
		return fmt.Sprintf("Received all barriers for checkpoint %d before completing checkpoint %d. Skipping checkpoint %d.", p.id, n, n)
	})
	h.pending = h.pending[1:] // p is first now
	if len(h.pending) == 0 {
		h.pending = nil
	}
	h.emit(p.triggerAction(now, false))
	if h.mode == ExactlyOnce {
		h.unblockAll()
	}
}

// OnTick tells the handler the time: a checkpoint aligning with a timeout
// whose timeout passed switches to unaligned (see ScheduleTimer).
func (h *Handler) OnTick(now int64) {
	if len(h.pending) == 1 && h.timedOut(h.pending[0], now) {
		h.triggerUnaligned(h.pending[0], -1, now)
	}
}

// timedOut reports whether p, aligning in ExactlyOnce mode, started
// aligned with a timeout that passed at now.
func (h *Handler) timedOut(p *pendingCheckpoint, now int64) bool {
	return h.mode == ExactlyOnce && !p.unaligned && p.options.Timeoutable() &&
		now >= p.triggerTime+p.options.AlignedTimeout.Milliseconds()
}

// triggerAction is the TriggerSnapshot of p at now.
func (p *pendingCheckpoint) triggerAction(now int64, unaligned bool) TriggerSnapshot {
	return TriggerSnapshot{
		ID:          p.id,
		TriggerTime: p.triggerTime,
		Options:     p.options,
		StartDelay:  time.Duration(max(0, p.firstArrival-p.triggerTime)) * time.Millisecond,
		Alignment:   time.Duration(max(0, now-p.firstArrival)) * time.Millisecond,
		Unaligned:   unaligned,
	}
}

// triggerUnaligned switches p, the one checkpoint aligning, to unaligned:
// at the priority barrier on ch, or (ch < 0) because its aligned timeout
// passed. The snapshot is taken now, the channels still owing the barrier
// persist their input until it arrives, ch persists what its barrier
// overtook, and the channels blocked so far (their barrier came in order,
// nothing of theirs is in flight before it) are released.
func (h *Handler) triggerUnaligned(p *pendingCheckpoint, ch int, now int64) {
	p.unaligned = true
	h.emit(p.triggerAction(now, true))
	for c, d := range p.delivered {
		if !d && !h.ended[c] {
			h.emit(StartPersisting{Ch: c, ID: p.id})
		}
	}
	if ch >= 0 {
		h.emit(StartPersisting{Ch: ch, ID: p.id}, PersistOvertaken{Ch: ch, ID: p.id}, StopPersisting{Ch: ch, ID: p.id})
	}
	h.unblockAll()
	h.completeUnaligned()
}

// completeUnaligned ends the unaligned checkpoint pending (the only one, in
// ExactlyOnce mode) once no live channel owes its barrier.
func (h *Handler) completeUnaligned() {
	p := h.pending[0]
	if p.missing > 0 {
		return
	}
	h.pending = nil
	h.emit(ChannelStateComplete{ID: p.id})
}

// abortOlder aborts every pending checkpoint older than id, oldest first.
func (h *Handler) abortOlder(id int64, msg func(n int64) string) {
	for len(h.pending) > 0 && h.pending[0].id < id {
		h.abortAt(0, ReasonSubsumed, msg(h.pending[0].id), nil)
	}
}

func (h *Handler) abortAt(i int, reason Reason, msg string, cause error) {
	id := h.pending[i].id
	h.pending = append(h.pending[:i], h.pending[i+1:]...)
	h.emit(Abort{ID: id, Reason: reason, Message: msg, Cause: cause}, ForwardCancelBarrier{ID: id})
}

func (h *Handler) unblockAll() {
	for ch, b := range h.blocked {
		if b {
			h.blocked[ch] = false
			h.emit(Unblock{Ch: ch})
		}
	}
	h.nblocked = 0
}

func (h *Handler) find(id int64) int {
	for i, p := range h.pending {
		if p.id == id {
			return i
		}
	}
	return -1
}

// checkLive panics on a channel out of range (a bug in the task) and reports
// an event on an ended channel (a bug upstream) as a Fail action.
func (h *Handler) checkLive(ch int, what string, id int64) bool {
	if ch < 0 || ch >= len(h.ended) {
		panic(fmt.Sprintf("barrier: channel %d out of range [0,%d)", ch, len(h.ended)))
	}
	if h.ended[ch] {
		if id != 0 {
			what = fmt.Sprintf("%s %d", what, id)
		}
		h.fail(fmt.Errorf("channel %d, %s: %w", ch, what, ErrChannelEnded))
		return false
	}
	return true
}

func (h *Handler) fail(err error) { h.emit(Fail{Err: err}) }

func (h *Handler) emit(a ...Action) { h.actions = append(h.actions, a...) }

// String describes the handler's state for logs and tests: the blocked
// channels, the ended channels and each pending checkpoint with the channels
// that delivered its barrier.
func (h *Handler) String() string {
	var sb strings.Builder
	list := func(name string, set []bool) {
		fmt.Fprintf(&sb, "%s=[", name)
		sep := ""
		for ch, in := range set {
			if in {
				fmt.Fprintf(&sb, "%s%d", sep, ch)
				sep = " "
			}
		}
		sb.WriteString("]")
	}
	list("blocked", h.blocked)
	sb.WriteString(" ")
	list("ended", h.ended)
	fmt.Fprintf(&sb, " latest=%d pending=[", h.latest)
	for i, p := range h.pending {
		if i > 0 {
			sb.WriteString(" ")
		}
		fmt.Fprintf(&sb, "%d:", p.id)
		list("got", p.delivered)
	}
	sb.WriteString("]")
	return sb.String()
}

// check verifies the handler's internal invariants (for tests).
func (h *Handler) check() error {
	live, nblocked := 0, 0
	for ch := range h.ended {
		if !h.ended[ch] {
			live++
		}
		if h.blocked[ch] {
			nblocked++
			if h.mode != ExactlyOnce || len(h.pending) != 1 || !h.pending[0].delivered[ch] {
				return fmt.Errorf("channel %d blocked without an alignment it delivered to: %s", ch, h)
			}
		}
	}
	if live != h.live || nblocked != h.nblocked {
		return fmt.Errorf("live %d/%d, blocked %d/%d: %s", live, h.live, nblocked, h.nblocked, h)
	}
	if h.mode == ExactlyOnce && len(h.pending) > 1 {
		return fmt.Errorf("exactly-once handler aligns %d checkpoints: %s", len(h.pending), h)
	}
	for i, p := range h.pending {
		if p.id > h.latest || (i > 0 && p.id <= h.pending[i-1].id) {
			return fmt.Errorf("pending checkpoints out of order: %s", h)
		}
		missing := 0
		for ch, d := range p.delivered {
			if !d && !h.ended[ch] {
				missing++
			}
		}
		if missing != p.missing || missing == 0 {
			return fmt.Errorf("checkpoint %d missing %d, counted %d: %s", p.id, missing, p.missing, h)
		}
	}
	return nil
}
