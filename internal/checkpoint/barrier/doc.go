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
// # Unaligned checkpoints (not implemented)
//
// Unaligned checkpoints and the aligned-then-unaligned switch plug into this
// state machine without changing the two modes above:
//
//   - Mode gains Unaligned, and New gains options with AlignedTimeout
//     (Flink's execution.checkpointing.aligned-checkpoint-timeout; 0 means
//     unaligned from the first barrier). Barriers must then say how they
//     were sent (aligned, unaligned, aligned with timeout: a field of
//     checkpoint.Options, which barriers already carry), and unaligned ones
//     travel as priority events (network.Subpartition.SendPriority at the
//     sender, InputGate.PollPriority at the receiver, Event.Priority) that
//     overtake queued buffers, get through blocked channels and wake a task
//     blocked on backpressure through its mailbox.
//   - A pending checkpoint gets a state, aligning or unaligned. In the
//     unaligned state TriggerSnapshot is emitted at the first barrier, not
//     the last (it gains an Unaligned flag: the task forwards the barrier as
//     a priority event and persists the output buffers it overtook), and the
//     Block branch of OnBarrier is skipped.
//   - New actions for the channel state. PersistInFlight{Ch, ID}: barrier
//     ID arrived on Ch as a priority event; the task asks the gate for the
//     buffers it overtook on Ch and writes them as input channel state of
//     ID. StartPersisting{Ch, ID}: emitted for each live channel whose
//     barrier has not arrived when the checkpoint goes unaligned; every
//     buffer the task reads from Ch from then on is also written as channel
//     state of ID. StopPersisting{Ch, ID}: barrier ID arrived on Ch in
//     order, which ends that. ChannelStateComplete{ID}: the last live
//     channel delivered or ended; the task may finish the asynchronous
//     phase. Abort then also means: discard the channel state written for
//     ID.
//   - The timeout needs time to pass without input, so the handler gains
//     OnTick(now) and an action ScheduleTimer{ID, At} emitted when an
//     alignment with timeout starts, At = TriggerTime + AlignedTimeout. A
//     first barrier that arrives already past At goes unaligned at once. When
//     OnTick passes At while ID still aligns, the switch emits, in order,
//     TriggerSnapshot{ID, Unaligned}, StartPersisting for every live channel
//     that has not delivered ID, then Unblock of every blocked channel (their
//     barrier arrived, nothing of theirs is in flight before it). Only the
//     aligned path blocks, so AtLeastOnce never needs the switch.
//   - The invariant "TriggerSnapshot n only after every live channel
//     delivered n" then holds for aligned checkpoints only; for unaligned
//     ones it becomes "every channel is persisting from the trigger until its
//     barrier n arrives", which the randomized test would check the same way.
package barrier
