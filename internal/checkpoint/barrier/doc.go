// Package barrier decides, for one consumer task, what to do with the
// checkpoint barriers arriving on its input channels: when to block a
// channel, when to take the snapshot of checkpoint n, and when to give n up.
// It is Flink's SingleCheckpointBarrierHandler (aligned mode) and
// CheckpointBarrierTracker as a deterministic state machine: the task feeds it
// what it read (OnBarrier, OnCancelBarrier, OnEndOfPartition) and what it
// decided (AbortFromTask), with the time read from its clock, and drains
// Actions. There are no goroutines, clocks or I/O inside; a Handler belongs
// to the task goroutine and is not safe for concurrent use.
//
// # Channels
//
// A Handler knows N input channels, numbered 0..N-1 over all input gates of
// the task (the second gate's channels follow the first's). A channel is live
// until its end of partition; only live channels must deliver a barrier for a
// checkpoint to trigger, so an end of partition can complete an alignment.
// The network delivers each channel's barriers in checkpoint id order;
// checkpoint ids are positive and increase.
//
// # Modes
//
// ExactlyOnce (aligned). The first barrier of n starts the alignment of n.
// Every channel that delivered barrier n is blocked (Block) so that no record
// after barrier n enters the snapshot of n. When the last live channel
// delivers it (or ends), TriggerSnapshot, then Unblock of every blocked
// channel. The channel that completes the alignment is never blocked, so a
// task with one live channel triggers at once without blocking. At most one
// checkpoint aligns at a time: a barrier of a newer checkpoint m aborts n
// ("Received checkpoint barrier for checkpoint m before completing current
// checkpoint n. Skipping current checkpoint.", ReasonSubsumed), releases the
// blocked channels and starts aligning m.
//
// AtLeastOnce (tracker). Nothing is blocked. Barriers are counted per
// checkpoint, up to MaxTrackedCheckpoints at once; n triggers once it arrived
// on every live channel. When m triggers, every pending n < m is obsolete (a
// live channel delivered m without n, so n can never complete): it is aborted
// first. Flink drops such checkpoints silently; reporting them lets the
// coordinator fail them at once instead of at their timeout.
//
// # Rules common to both modes
//
//   - Every id is settled at most once: triggered, or aborted with one Abort
//     followed by one ForwardCancelBarrier. Barriers, cancellation barriers
//     and task aborts of an id that is not pending and not newer than the
//     newest id seen are ignored: that id is settled or can never complete
//     (stale).
//   - A cancellation barrier or AbortFromTask for a pending n aborts n and
//     every older pending checkpoint (ReasonSubsumed). For an id m newer than
//     anything seen it aborts everything pending and m itself, so m's
//     barriers are ignored when they arrive. Flink notifies only m in that
//     case; weir also declines and cancels the older ones so that downstream
//     tasks stop aligning them.
//   - What the task sends downstream because of the handler (barriers of
//     triggered checkpoints, forwarded cancellations) has strictly increasing
//     ids, so downstream handlers see the same order guarantee.
//   - Protocol violations by upstream, a barrier delivered twice on one
//     channel for a tracked checkpoint (ErrDuplicateBarrier) or any event
//     after a channel's end of partition (ErrChannelEnded), produce a Fail
//     action and are otherwise ignored; they are actions, not return values,
//     so that every input has the same shape and scripts show them in order.
//     A channel number out of range is a bug in the task and panics.
//
// # Applying the actions
//
// After each input the task drains Actions and applies them in order, before
// it polls the gate again:
//
//   - Block{Ch}: gate.Block(Ch). It must happen before the next Poll, or a
//     record behind the barrier could be processed before the snapshot.
//   - Unblock{Ch}: gate.Unblock(Ch).
//   - TriggerSnapshot: run the synchronous snapshot of checkpoint ID now,
//     then emit barrier ID (Event.Timestamp = TriggerTime) on every output,
//     then hand the asynchronous phase off; StartDelay and Alignment go into
//     the acknowledgement. It always comes before the Unblocks of the same
//     batch, so records after the barrier are only read after the snapshot.
//   - Abort: decline checkpoint ID to the coordinator with Reason and Message
//     and drop anything the task prepared for ID.
//   - ForwardCancelBarrier{ID}: emit a cancellation barrier for ID on every
//     output.
//   - Fail: fail the task with Err.
//
// The inputs take now and trigger times in Unix milliseconds: barrier
// Event.Timestamp is the trigger time and now is the task clock's reading.
//
// # Unaligned checkpoints
//
// In ExactlyOnce mode a barrier that arrives as a priority event (it
// overtook the data queued before it: OnPriorityBarrier) makes the pending
// checkpoint unaligned; so does the aligned timeout of a checkpoint whose
// options are Timeoutable (checkpoint.Options.AlignedTimeout, Flink's
// execution.checkpointing.aligned-checkpoint-timeout) once it passed: at a
// barrier arriving late (OnBarrier) or when the task calls OnTick after the
// ScheduleTimer{ID, At} the first barrier of such a checkpoint emitted. The
// switch emits, in order: TriggerSnapshot{Unaligned} at once, without
// waiting for the other channels; StartPersisting for every live channel
// that has not delivered the barrier; for the channel whose priority
// barrier triggered it, StartPersisting, PersistOvertaken (persist what the
// barrier overtook at the gate) and StopPersisting; Unblock of the
// channels blocked so far (their barrier came in order: nothing of theirs
// is in flight before it). The checkpoint stays pending: each later
// barrier of it stops its channel's persisting (after PersistOvertaken if
// it is a priority event), as does the channel's end, and when no live
// channel owes the barrier, ChannelStateComplete{ID} lets the task finish
// the asynchronous phase. An Abort of a pending unaligned checkpoint also
// means: drop the channel state collected for it.
//
// The invariant "TriggerSnapshot n only after every live channel delivered
// n" holds for aligned snapshots only; for unaligned ones it is "every live
// channel persists from the trigger until its barrier n arrives or it
// ends", which TestRandomInterleavings checks with priority channels and
// timeouts mixed in. AtLeastOnce mode treats priority barriers like others.
package barrier
