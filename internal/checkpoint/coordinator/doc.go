// Package coordinator is the deterministic core of weir's checkpoint
// coordinator: a state machine with Apache Flink's CheckpointCoordinator
// semantics. It has no goroutines, clock, I/O or logging. A driver (the
// job manager's goroutine that owns it) feeds it inputs with the current
// time, drains Actions after each input and carries them out, and sleeps
// until NextTick.
//
// # Inputs
//
//   - Tick(now): expire pending checkpoints whose Timeout has passed, then
//     trigger a periodic checkpoint if one is due.
//   - TriggerManual(now, format): trigger now (ignores Interval and MinPause,
//     respects MaxConcurrent).
//   - Ack(now, id, task, stats, handle): a task's acknowledgement.
//   - MetadataWritten(now, id) / MetadataFailed(now, id, err): the outcome of
//     a WriteMetadata action.
//   - Decline(now, id, task, cause, kind): a task declined.
//   - Shutdown(now, reason): abort everything pending and stop.
//   - Restore(latest, retained): before the first trigger of a restarted job.
//
// # Life of a checkpoint
//
//	trigger ──► pending ──all acks──► finalizing ──MetadataWritten──► completed
//	               │                      │
//	               └──decline/expiry/─────┴──MetadataFailed/expiry/──► aborted
//	                  subsumed/shutdown       subsumed/shutdown
//
// A trigger emits Trigger (inject barrier id at the sources). When every
// task in Config.Tasks has acknowledged, the checkpoint is finalizing and
// WriteMetadata asks the driver for a durable chk-<id>/_metadata; it still
// counts as pending (against MaxConcurrent and Timeout). Only MetadataWritten
// completes it: nothing is reported complete before _metadata is durable.
// Completion emits Completed, NotifyComplete (two-phase-commit sinks commit),
// Subsume for the completed checkpoints beyond NumRetained (oldest first), and
// aborts every older pending checkpoint as ReasonSubsumed.
//
// An abort emits Aborted (with Flink's log text), CleanupFiles (delete what
// the checkpoint uploaded) and NotifyAborted, in that order.
//
// # Scheduling
//
// The first periodic trigger is due Interval after New (Flink draws a random
// initial delay; weir stays deterministic), then every Interval. A slot that
// finds MaxConcurrent checkpoints pending is queued and the schedule is
// suspended; the queued trigger fires as soon as a checkpoint leaves the
// pending set (inside the input that removed it), and the schedule restarts
// from it. A slot (or a queued trigger) within MinPause of the last
// completion is dropped and the schedule moves to lastCompletion+MinPause,
// as Flink's CheckpointRequestDecider does. MinPause counts from completions
// only, not aborts. Slots missed by a late Tick are skipped, not caught up.
// Expiry happens only in Tick.
//
// # Failures
//
// Aborts for ReasonExpired, ReasonDeclined, ReasonAsyncFailure and
// ReasonIOError count against Config.TolerableFailures (Flink's
// CheckpointFailureManager); subsumed, not-ready, task-failure, cancel and
// failover aborts do not, and neither do failures of checkpoints older than
// the latest completed one. A completion resets the count. When the count
// exceeds TolerableFailures the coordinator emits FailJob ("Exceeded
// checkpoint tolerable failure threshold. ...") and suspends itself: it
// aborts the remaining pending checkpoints as ReasonJobFailing and ignores
// further input, as Flink's coordinator does when the job fails over.
//
// # Late and stray messages
//
// Late acknowledgements are common (a task finishes its upload after the
// checkpoint expired). An ack the coordinator cannot take, because the
// checkpoint is no longer pending or never existed or the task is unknown,
// changes nothing and emits DiscardState so the driver deletes the
// handle's files, as Flink's discardSubtaskState does. Duplicate acks and
// acks for a retained completed checkpoint are ignored without discarding,
// since their files may be in use. Declines, MetadataWritten and
// MetadataFailed for checkpoints that are not pending (or, for the latter
// two, not finalizing) are ignored; a decline for a finalizing checkpoint is
// ignored too, because every task has already acknowledged it.
//
// # Invariants
//
// Checkpoint ids strictly increase from the first id (New's firstID or the
// restored id+1). A checkpoint ends exactly once: completed (only inside the
// MetadataWritten call for its id) or aborted. At most MaxConcurrent
// checkpoints are pending and at most NumRetained are retained. No trigger
// follows Shutdown or FailJob. TestRandomized checks these on random runs;
// the testdata scripts pin down the exact action sequences.
//
// Times passed in never move the coordinator's clock back: an earlier time
// than already seen is treated as the latest one.
package coordinator
