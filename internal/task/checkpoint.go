package task

import (
	"fmt"
	"time"

	"github.com/weirstream/weir/internal/checkpoint/barrier"
	"github.com/weirstream/weir/internal/network"
)

// CheckpointParticipant is implemented by operators that take part in
// checkpoints. SnapshotState is the synchronous phase, called on the task
// goroutine after every record before barrier id and before any record
// after it.
type CheckpointParticipant interface {
	SnapshotState(id int64) error
}

// Ack is a subtask's answer to a checkpoint: its synchronous snapshot was
// taken (Declined unset), or it declined.
type Ack struct {
	Vertex, Subtask int
	ID              int64
	// StartDelay is the time from the trigger to the first barrier reaching
	// the subtask; Alignment the time its inputs were (partly) blocked;
	// Sync the synchronous phase.
	StartDelay, Alignment, Sync time.Duration
	// Declined is the reason the subtask declined the checkpoint.
	Declined error
}

// TriggerCheckpoint starts checkpoint id at every source subtask: each takes
// its snapshot and emits barrier id, between two source batches. Barriers
// then flow with the records; every subtask acknowledges on Acks once it
// snapshotted. triggerTime is in Unix milliseconds.
func (j *Job) TriggerCheckpoint(id, triggerTime int64) {
	for _, t := range j.tasks {
		if t.source == nil {
			continue
		}
		t.mail.post(func() error {
			start := t.clock.Now()
			return t.snapshotAndForward(id, triggerTime, time.Duration(start.UnixMilli()-triggerTime)*time.Millisecond, 0)
		})
	}
}

// Acks delivers the subtasks' checkpoint acknowledgements. Read it while
// checkpoints run: tasks block on a full channel.
func (j *Job) Acks() <-chan Ack { return j.acks }

// snapshotAndForward runs the synchronous phase of checkpoint id on every
// chained operator, forwards barrier id on every output and acknowledges.
func (t *task) snapshotAndForward(id, triggerTime int64, startDelay, alignment time.Duration) error {
	start := t.clock.Now()
	for i, op := range t.ops {
		if p, ok := op.(CheckpointParticipant); ok {
			t.tracker.Cur = i
			if err := p.SnapshotState(id); err != nil {
				return t.opError(i, fmt.Errorf("snapshot for checkpoint %d: %w", id, err))
			}
		}
	}
	for _, rp := range t.partitions {
		rp.BroadcastEvent(network.Event{Kind: network.EventBarrier, ID: id, Timestamp: triggerTime})
	}
	t.ack(Ack{ID: id, StartDelay: max(startDelay, 0), Alignment: alignment, Sync: t.clock.Now().Sub(start)})
	return nil
}

func (t *task) ack(a Ack) {
	if t.acks == nil {
		return
	}
	a.Vertex, a.Subtask = t.vertex, t.index
	select {
	case t.acks <- a:
	case <-t.ctx.Done(): // nobody reads acks any more: the job is ending
	}
}

// handleBarrierEvent feeds a barrier-related event of channel ch to the
// barrier handler and applies what it decides.
func (t *task) handleBarrierEvent(ch int, ev network.Event) error {
	now := t.clock.Now().UnixMilli()
	switch ev.Kind {
	case network.EventBarrier:
		t.barriers.OnBarrier(ch, ev.ID, ev.Timestamp, now)
	case network.EventCancelBarrier:
		t.barriers.OnCancelBarrier(ch, ev.ID, now)
	case network.EventEndOfPartition:
		t.barriers.OnEndOfPartition(ch, now)
	}
	for _, a := range t.barriers.Actions() {
		switch a := a.(type) {
		case barrier.Block:
			t.gate.Block(a.Ch)
		case barrier.Unblock:
			t.gate.Unblock(a.Ch)
		case barrier.TriggerSnapshot:
			if err := t.snapshotAndForward(a.ID, a.TriggerTime, a.StartDelay, a.Alignment); err != nil {
				return err
			}
		case barrier.Abort:
			t.ack(Ack{ID: a.ID, Declined: fmt.Errorf("%s", a.Message)})
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
