package coordinator

import (
	"errors"
	"fmt"
)

// Reason says why a checkpoint was aborted. It mirrors the subset of Flink's
// CheckpointFailureReason that a coordinator of this shape can produce; the
// zero value is not a valid reason.
type Reason int

// The reasons. Only ReasonExpired, ReasonDeclined, ReasonAsyncFailure and
// ReasonIOError count against Config.TolerableFailures (Flink's
// CheckpointFailureManager rule); see Reason.Counts.
const (
	_ Reason = iota
	// ReasonExpired: the checkpoint was still pending Config.Timeout after
	// its trigger (CHECKPOINT_EXPIRED). Counted.
	ReasonExpired
	// ReasonDeclined: a task declined the checkpoint, for example because its
	// synchronous snapshot failed (CHECKPOINT_DECLINED). Counted.
	ReasonDeclined
	// ReasonAsyncFailure: a task's asynchronous phase (upload) failed
	// (CHECKPOINT_ASYNC_EXCEPTION). Counted.
	ReasonAsyncFailure
	// ReasonIOError: an I/O failure, here the _metadata write
	// (IO_EXCEPTION). Counted. Flink reports a failed _metadata write as
	// FINALIZE_CHECKPOINT_FAILURE, which it does not count; weir counts it,
	// because a store that cannot take _metadata will never complete a
	// checkpoint.
	ReasonIOError
	// ReasonSubsumed: a newer checkpoint completed, or a task saw a barrier
	// of a newer checkpoint first (CHECKPOINT_SUBSUMED and
	// CHECKPOINT_DECLINED_SUBSUMED). Not counted.
	ReasonSubsumed
	// ReasonTaskNotReady: a task could not take part yet, for example it was
	// still restoring or already finishing
	// (CHECKPOINT_DECLINED_TASK_NOT_READY). Not counted.
	ReasonTaskNotReady
	// ReasonTaskFailure: the task failed; the job's failover handles it
	// (TASK_FAILURE). Not counted.
	ReasonTaskFailure
	// ReasonJobCanceled: Shutdown aborted the checkpoint
	// (CHECKPOINT_COORDINATOR_SHUTDOWN). Not counted.
	ReasonJobCanceled
	// ReasonJobFailing: the job is failing over, either because the
	// coordinator exceeded the tolerable failures or because the driver said
	// so in Shutdown (CHECKPOINT_COORDINATOR_SUSPEND). Not counted.
	ReasonJobFailing
	// ReasonTooManyConcurrent: a trigger was refused because
	// Config.MaxConcurrent checkpoints are pending
	// (TOO_MANY_CONCURRENT_CHECKPOINTS). Only returned by TriggerManual;
	// never aborts a checkpoint. Not counted.
	ReasonTooManyConcurrent
	numReasons
)

var reasonNames = [...]string{
	ReasonExpired:           "expired",
	ReasonDeclined:          "declined",
	ReasonAsyncFailure:      "async-failure",
	ReasonIOError:           "io-error",
	ReasonSubsumed:          "subsumed",
	ReasonTaskNotReady:      "task-not-ready",
	ReasonTaskFailure:       "task-failure",
	ReasonJobCanceled:       "job-canceled",
	ReasonJobFailing:        "job-failing",
	ReasonTooManyConcurrent: "too-many-concurrent",
}

// Flink's CheckpointFailureReason messages.
var reasonMessages = [...]string{
	ReasonExpired:           "Checkpoint expired before completing.",
	ReasonDeclined:          "Checkpoint was declined.",
	ReasonAsyncFailure:      "Asynchronous task checkpoint failed.",
	ReasonIOError:           "An Exception occurred while triggering the checkpoint. IO-problem detected.",
	ReasonSubsumed:          "Checkpoint has been subsumed.",
	ReasonTaskNotReady:      "Checkpoint was declined (tasks not ready)",
	ReasonTaskFailure:       "Task has failed.",
	ReasonJobCanceled:       "CheckpointCoordinator shutdown.",
	ReasonJobFailing:        "Checkpoint Coordinator is suspending.",
	ReasonTooManyConcurrent: "The maximum number of concurrent checkpoints is exceeded",
}

func (r Reason) valid() bool { return r > 0 && r < numReasons }

// String returns the short script name of r ("expired", "declined", ...).
func (r Reason) String() string {
	if !r.valid() {
		return fmt.Sprintf("reason(%d)", int(r))
	}
	return reasonNames[r]
}

// Message returns Flink's text for r.
func (r Reason) Message() string {
	if !r.valid() {
		return r.String()
	}
	return reasonMessages[r]
}

// Counts reports whether an abort for r counts against
// Config.TolerableFailures.
func (r Reason) Counts() bool {
	switch r {
	case ReasonExpired, ReasonDeclined, ReasonAsyncFailure, ReasonIOError:
		return true
	}
	return false
}

// ParseReason returns the Reason whose String is s.
func ParseReason(s string) (Reason, error) {
	for r := Reason(1); r < numReasons; r++ {
		if reasonNames[r] == s {
			return r, nil
		}
	}
	return 0, fmt.Errorf("coordinator: unknown reason %q", s)
}

// Errors returned by the coordinator or carried as Aborted.Cause.
var (
	// ErrTooManyConcurrent: TriggerManual found Config.MaxConcurrent
	// checkpoints pending.
	ErrTooManyConcurrent = errors.New("coordinator: " + ReasonTooManyConcurrent.Message())
	// ErrStopped: the coordinator was shut down or suspended itself after
	// exceeding the tolerable failures.
	ErrStopped = errors.New("coordinator: stopped")
	// ErrStopInProgress: a stop-with-savepoint is pending; no other
	// checkpoint or stop is triggered until it completes or fails.
	ErrStopInProgress = errors.New("a stop-with-savepoint is in progress")
	// ErrCheckpointExpired is the Cause of an expiry abort.
	ErrCheckpointExpired = errors.New("coordinator: checkpoint expired")
	// ErrCheckpointSubsumed is the Cause of an abort because a newer
	// checkpoint completed.
	ErrCheckpointSubsumed = errors.New("coordinator: checkpoint subsumed")
	// ErrShutdown is the Cause of the aborts done by Shutdown.
	ErrShutdown = errors.New("coordinator: shut down")
	// ErrTolerableFailuresExceeded is the Cause of FailJob and of the aborts
	// done when the coordinator suspends itself.
	ErrTolerableFailuresExceeded = errors.New("coordinator: " + tolerableFailureMessage)
)

// tolerableFailureMessage is Flink's
// CheckpointFailureManager.EXCEEDED_CHECKPOINT_TOLERABLE_FAILURE_MESSAGE.
const tolerableFailureMessage = "Exceeded checkpoint tolerable failure threshold."
