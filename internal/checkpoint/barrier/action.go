package barrier

import (
	"errors"
	"fmt"
	"time"

	"github.com/weirstream/weir/internal/checkpoint"
)

// Protocol violations by the upstream side of an input channel. They come
// back wrapped in a Fail action; check them with errors.Is.
var (
	// ErrDuplicateBarrier: a channel delivered the barrier (or cancellation
	// barrier) of a checkpoint the handler is tracking twice.
	ErrDuplicateBarrier = errors.New("barrier: duplicate barrier on a channel")
	// ErrChannelEnded: a channel delivered an event after its end of
	// partition.
	ErrChannelEnded = errors.New("barrier: event after end of partition")
)

// Action is one thing the task must do, in the order Actions returns them. It
// is one of Block, Unblock, TriggerSnapshot, Abort, ForwardCancelBarrier,
// Fail, or, for unaligned checkpoints, StartPersisting, PersistOvertaken,
// StopPersisting, ChannelStateComplete and ScheduleTimer.
type Action interface {
	fmt.Stringer
	action()
}

// Block: the task calls gate.Block(Ch). Ch delivered the barrier of the
// checkpoint being aligned and must deliver nothing more until Unblock.
type Block struct{ Ch int }

// Unblock: the task calls gate.Unblock(Ch). The alignment Ch was blocked for
// has finished (triggered or aborted).
type Unblock struct{ Ch int }

// TriggerSnapshot: every live input channel delivered the barrier of
// checkpoint ID. The task takes the synchronous part of its snapshot now,
// before it processes any further input, then forwards barrier ID (with
// TriggerTime) on all its outputs and starts the asynchronous part. The
// statistics go into the acknowledgement.
type TriggerSnapshot struct {
	ID int64
	// TriggerTime is the coordinator's trigger time carried by the barrier,
	// in Unix milliseconds; forward it unchanged.
	TriggerTime int64
	// Options are the checkpoint's, carried by the barrier: the snapshot
	// takes them and the forwarded barrier carries them on.
	Options checkpoint.Options
	// StartDelay is the time from the trigger to the first barrier of ID
	// arriving here (never negative, whatever the clock skew).
	StartDelay time.Duration
	// Alignment is the time from the first to the last barrier of ID arriving
	// here: how long input was (partly) blocked in exactly-once mode. For
	// an unaligned trigger, the time aligned before it went unaligned.
	Alignment time.Duration
	// Unaligned: a priority barrier triggered the snapshot before every
	// channel delivered its barrier. The task forwards the barrier as a
	// priority event where the edge allows, persists the output buffers it
	// overtook, and collects input channel state as the StartPersisting,
	// PersistOvertaken and StopPersisting actions that follow say, until
	// ChannelStateComplete.
	Unaligned bool
}

// StartPersisting: from now on, every buffer the task reads from Ch is input
// channel state of unaligned checkpoint ID (it was sent before Ch's
// barrier), and so are the fragments of a record the task's reader holds
// for Ch. It lasts until StopPersisting for Ch.
type StartPersisting struct {
	Ch int
	ID int64
}

// PersistOvertaken: the barrier of ID just read on Ch was a priority event;
// the buffers it overtook, still queued at the gate
// (network.InputGate.Overtaken), are input channel state of ID.
type PersistOvertaken struct {
	Ch int
	ID int64
}

// StopPersisting: Ch delivered the barrier of ID (or ended); nothing it
// delivers from now on belongs to ID.
type StopPersisting struct {
	Ch int
	ID int64
}

// ScheduleTimer: checkpoint ID started aligned with a timeout; the task
// calls OnTick at At (Unix milliseconds, the trigger time plus the
// aligned-checkpoint timeout) or soon after, unless ID settled before.
type ScheduleTimer struct {
	ID int64
	At int64
}

// ChannelStateComplete: every live channel delivered the barrier of
// unaligned checkpoint ID; its input channel state is complete and the
// asynchronous phase may write it.
type ChannelStateComplete struct{ ID int64 }

// Abort: checkpoint ID will not be snapshotted by this task. The task declines
// it to the coordinator with Reason and Message. A ForwardCancelBarrier for
// the same ID follows.
type Abort struct {
	ID      int64
	Reason  Reason
	Message string
	// Cause is the error given to AbortFromTask, nil otherwise.
	Cause error
}

// ForwardCancelBarrier: the task sends a cancellation barrier for ID on all
// its outputs, so downstream tasks stop aligning ID at once instead of
// waiting for barriers that will never come.
type ForwardCancelBarrier struct{ ID int64 }

// Fail: an input broke the channel protocol (the error wraps
// ErrDuplicateBarrier or ErrChannelEnded). The handler ignored that input;
// the task should fail, since upstream state is no longer trustworthy.
type Fail struct{ Err error }

var (
	_ Action = Block{}
	_ Action = Unblock{}
	_ Action = TriggerSnapshot{}
	_ Action = Abort{}
	_ Action = ForwardCancelBarrier{}
	_ Action = Fail{}
	_ Action = StartPersisting{}
	_ Action = PersistOvertaken{}
	_ Action = StopPersisting{}
	_ Action = ChannelStateComplete{}
	_ Action = ScheduleTimer{}
)

func (ScheduleTimer) action() {}

func (a ScheduleTimer) String() string { return fmt.Sprintf("schedule-timer id=%d at=%d", a.ID, a.At) }

func (StartPersisting) action()      {}
func (PersistOvertaken) action()     {}
func (StopPersisting) action()       {}
func (ChannelStateComplete) action() {}

func (a StartPersisting) String() string {
	return fmt.Sprintf("start-persisting ch=%d id=%d", a.Ch, a.ID)
}
func (a PersistOvertaken) String() string {
	return fmt.Sprintf("persist-overtaken ch=%d id=%d", a.Ch, a.ID)
}
func (a StopPersisting) String() string {
	return fmt.Sprintf("stop-persisting ch=%d id=%d", a.Ch, a.ID)
}
func (a ChannelStateComplete) String() string {
	return fmt.Sprintf("channel-state-complete id=%d", a.ID)
}

func (Block) action()                {}
func (Unblock) action()              {}
func (TriggerSnapshot) action()      {}
func (Abort) action()                {}
func (ForwardCancelBarrier) action() {}
func (Fail) action()                 {}

func (a Block) String() string   { return fmt.Sprintf("block ch=%d", a.Ch) }
func (a Unblock) String() string { return fmt.Sprintf("unblock ch=%d", a.Ch) }
func (a TriggerSnapshot) String() string {
	u := ""
	if a.Unaligned {
		u = " unaligned"
	}
	return fmt.Sprintf("trigger id=%d trigger-time=%d start-delay=%s alignment=%s%s",
		a.ID, a.TriggerTime, a.StartDelay, a.Alignment, u)
}
func (a Abort) String() string {
	return fmt.Sprintf("abort id=%d reason=%s: %s", a.ID, a.Reason, a.Message)
}
func (a ForwardCancelBarrier) String() string { return fmt.Sprintf("forward-cancel id=%d", a.ID) }
func (a Fail) String() string                 { return "fail: " + a.Err.Error() }

// Reason classifies an Abort, after Flink's CheckpointFailureReason.
type Reason int

const (
	// ReasonSubsumed: a newer checkpoint overtook this one before it
	// completed here (a barrier, cancellation barrier or task abort of a
	// newer id, or, in at-least-once mode, a newer id that completed first).
	// Flink's CHECKPOINT_DECLINED_SUBSUMED.
	ReasonSubsumed Reason = iota + 1
	// ReasonCancellationBarrier: an input delivered a cancellation barrier
	// for this checkpoint. Flink's CHECKPOINT_DECLINED_ON_CANCELLATION_BARRIER.
	ReasonCancellationBarrier
	// ReasonTask: the task called AbortFromTask; Abort.Cause says why.
	ReasonTask
	// ReasonTooManyPending: at-least-once mode tracked more than
	// MaxTrackedCheckpoints checkpoints at once and dropped the oldest
	// (Flink drops it silently).
	ReasonTooManyPending
)

// String returns the Flink-style name of the reason.
func (r Reason) String() string {
	switch r {
	case ReasonSubsumed:
		return "CHECKPOINT_DECLINED_SUBSUMED"
	case ReasonCancellationBarrier:
		return "CHECKPOINT_DECLINED_ON_CANCELLATION_BARRIER"
	case ReasonTask:
		return "CHECKPOINT_DECLINED_BY_TASK"
	case ReasonTooManyPending:
		return "CHECKPOINT_DECLINED_TOO_MANY_PENDING"
	}
	return fmt.Sprintf("Reason(%d)", int(r))
}
