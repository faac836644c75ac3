package task

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/weirstream/weir/internal/checkpoint/metadata"
	"github.com/weirstream/weir/internal/graph"
	"github.com/weirstream/weir/internal/network"
)

// Unaligned checkpoints at a subtask.
//
// When the snapshot of an unaligned checkpoint is taken (at the first
// priority barrier, or at a source), the barrier goes out as a priority
// event on every output edge that allows it and the data buffers it
// overtook in the subpartitions are copied: output channel state. On the
// input side the barrier handler says which channels persist, from the
// snapshot until their own barrier: the buffers a priority barrier
// overtook at the gate, and every buffer read from such a channel before
// its barrier, are copied as input channel state. Once every channel
// delivered its barrier (ChannelStateComplete) the asynchronous phase
// writes all of it into one file per subtask and checkpoint, referenced
// from the head operator's metadata (metadata.ChannelState).
//
// Copies are taken under the subpartition's or the gate's lock on the task
// goroutine, so the buffers themselves move on at once: the task never
// waits for storage. The copies of overtaken buffers are bounded by the
// network memory; those of buffers read before a late barrier (on an
// aligned input, or before a barrier moved ahead by a timeout) by what
// the upstream sends until its barrier.

// edgeKey names an edge in channel state: stable across runs as long as
// the operators keep their uids. A second edge between the same output and
// input (a stream unioned with itself) gets "#1", and so on.
func edgeKey(e *graph.Edge) string {
	k := fmt.Sprintf("%s/%d->%s/%d", e.From.UID, e.Output, e.To.UID, e.Input)
	dup := 0
	for _, o := range e.To.Inputs {
		if o == e {
			break
		}
		if o.From == e.From && o.Output == e.Output && o.Input == e.Input {
			dup++
		}
	}
	if dup > 0 {
		k += fmt.Sprintf("#%d", dup)
	}
	return k
}

// unalignedEdge reports whether barriers may overtake data on an edge with
// partitioner p: all-to-all edges whose in-flight data can be redistributed
// by key group or channel on rescale. Pointwise (forward, rescale) and
// broadcast edges stay aligned, as in Flink.
func unalignedEdge(p network.Partitioner) bool {
	return p == network.Hash || p == network.Rebalance
}

// inChannel is what a task knows of one of its input channels.
type inChannel struct {
	edge     string
	producer int
}

// outPartition is what a task knows of one of its output partitions.
type outPartition struct {
	edge      string
	unaligned bool // barriers overtake on this edge
	consumers int
}

// savedBuffer is a copy of one data buffer of channel state.
type savedBuffer struct {
	kind network.Kind
	data []byte
}

// channelState collects the in-flight data of one unaligned checkpoint.
// The task goroutine fills it; the asynchronous phase reads it after done
// is closed.
type channelState struct {
	id         int64
	in         [][]savedBuffer   // per input channel
	out        [][][]savedBuffer // per output partition, per subpartition
	persisting []bool            // per input channel
	done       chan struct{}     // closed when complete or aborted
	err        *Decline          // set before done is closed if aborted
	closed     bool
}

// newChannelState begins collecting the channel state of unaligned
// checkpoint id at t; the outputs' part is added as the barrier goes out.
func (t *task) newChannelState(id int64) *channelState {
	inputs := len(t.inChans)
	cs := &channelState{id: id, done: make(chan struct{}), in: make([][]savedBuffer, inputs), persisting: make([]bool, inputs)}
	cs.out = make([][][]savedBuffer, len(t.partitions))
	for i, rp := range t.partitions {
		cs.out[i] = make([][]savedBuffer, rp.NumSubpartitions())
	}
	return cs
}

func copyBuffer(b *network.Buffer) savedBuffer {
	return savedBuffer{kind: b.Kind, data: append([]byte(nil), b.Data...)}
}

// finish closes the collection with err (nil: complete).
func (cs *channelState) finish(err *Decline) {
	if cs.closed {
		return
	}
	cs.closed, cs.err = true, err
	clear(cs.persisting)
	close(cs.done)
}

// encodeBuffers appends bs in the channel-state file format: per buffer a
// kind byte, the length as a uvarint and the bytes.
func encodeBuffers(dst []byte, bs []savedBuffer) []byte {
	for _, b := range bs {
		dst = append(dst, byte(b.kind))
		dst = binary.AppendUvarint(dst, uint64(len(b.data)))
		dst = append(dst, b.data...)
	}
	return dst
}

// errChannelStateFormat is wrapped by errors of a channel-state range that
// does not parse.
var errChannelStateFormat = errors.New("channel state does not parse")

// decodeBuffers parses n buffers from src, which must hold exactly them.
func decodeBuffers(src []byte, n int) ([]savedBuffer, error) {
	out := make([]savedBuffer, 0, n)
	for len(src) > 0 {
		kind := network.Kind(src[0])
		if kind != network.KindData && kind != network.KindFragment && kind != network.KindFragmentEnd {
			return nil, fmt.Errorf("%w: buffer %d has kind %d", errChannelStateFormat, len(out), kind)
		}
		l, k := binary.Uvarint(src[1:])
		if k <= 0 || uint64(len(src)-1-k) < l {
			return nil, fmt.Errorf("%w: buffer %d is truncated", errChannelStateFormat, len(out))
		}
		out = append(out, savedBuffer{kind: kind, data: src[1+k : 1+k+int(l)]})
		src = src[1+k+int(l):]
	}
	if len(out) != n {
		return nil, fmt.Errorf("%w: %d buffers, the metadata says %d", errChannelStateFormat, len(out), n)
	}
	return out, nil
}

// writeChannelState writes cs, through the task's channel-state group
// (one file per group of subtasks), and returns the metadata entries
// pointing into the file and the bytes this subtask wrote.
func (t *task) writeChannelState(id int64, cs *channelState) ([]metadata.ChannelState, int64, error) {
	var payload []byte
	var entries []metadata.ChannelState
	add := func(e metadata.ChannelState, bs []savedBuffer) {
		if len(bs) == 0 {
			return
		}
		e.Offset = int64(len(payload))
		payload = encodeBuffers(payload, bs)
		e.Length = int64(len(payload)) - e.Offset
		e.Buffers = len(bs)
		entries = append(entries, e)
	}
	for ch, bs := range cs.in {
		c := t.inChans[ch]
		add(metadata.ChannelState{Edge: c.edge, Producer: c.producer, Consumer: t.index, Consumers: t.parallelism}, bs)
	}
	for i, subs := range cs.out {
		p := t.outParts[i]
		for sub, bs := range subs {
			add(metadata.ChannelState{Edge: p.edge, Output: true, Producer: t.index, Consumer: sub, Consumers: p.consumers}, bs)
		}
	}
	if t.chanGroup == nil { // no input and no output where barriers overtake
		return nil, 0, nil
	}
	h, off, err := t.chanGroup.submit(t.ctx, id, t.chanMember, payload)
	if err != nil || len(entries) == 0 {
		return nil, 0, err
	}
	for i := range entries {
		entries[i].File = *h
		entries[i].Offset += off
	}
	return entries, int64(len(payload)), nil
}

// forwardBarrier emits barrier ev on every output: as a priority event that
// overtakes queued data (whose copies go into cs) where the checkpoint is
// unaligned and the edge allows it, in order otherwise. inOrder sends it in
// order everywhere: an aligned checkpoint with a timeout whose timeout has
// not passed (the asynchronous phase moves the barriers still queued then
// ahead: timeoutOutputBarriers).
func (t *task) forwardBarrier(ev network.Event, cs *channelState, inOrder bool) {
	for i, rp := range t.partitions {
		if cs == nil || inOrder || !t.outParts[i].unaligned {
			rp.BroadcastEvent(ev)
			continue
		}
		pev := ev
		pev.Priority = true
		out := cs.out[i]
		rp.BroadcastPriorityEvent(pev, func(sub int, b *network.Buffer) {
			out[sub] = append(out[sub], copyBuffer(b))
		})
	}
}

// startPersisting, persistOvertaken and stopPersisting carry out the
// barrier handler's channel-state actions for the checkpoint being
// collected (t.inflight). A channel starting to persist first saves the
// fragments of a record its reader holds: the record is in flight.
func (t *task) startPersisting(ch int) {
	cs := t.inflight
	if cs == nil || cs.persisting[ch] {
		return
	}
	cs.persisting[ch] = true
	if p := t.partial; p.b != nil && p.ch == ch {
		// The rest of the buffer being read is in flight too (a data
		// buffer: no fragments are pending on its channel).
		cs.in[ch] = append(cs.in[ch], savedBuffer{kind: network.KindData, data: append([]byte(nil), p.b.Data[p.off:]...)})
	} else if p := t.readers[ch].Pending(ch); len(p) > 0 {
		cs.in[ch] = append(cs.in[ch], savedBuffer{kind: network.KindFragment, data: append([]byte(nil), p...)})
	}
}

// persistOvertaken saves the buffers the priority barrier just read on ch
// overtook (its Buffer.Overtook).
func (t *task) persistOvertaken(ch int, overtook int64) {
	cs := t.inflight
	if cs == nil || !cs.persisting[ch] || overtook == 0 {
		return
	}
	t.gate.Overtaken(ch, overtook, func(b *network.Buffer) {
		cs.in[ch] = append(cs.in[ch], copyBuffer(b))
	})
}

// stopPersisting ends ch's part: its barrier arrived or it ended.
func (t *task) stopPersisting(ch int) {
	if cs := t.inflight; cs != nil {
		cs.persisting[ch] = false
	}
}

// persistRead copies data buffer b, read from ch, into the channel state
// being collected if ch persists.
func (t *task) persistRead(ch int, b *network.Buffer) {
	if cs := t.inflight; cs != nil && cs.persisting[ch] {
		cs.in[ch] = append(cs.in[ch], copyBuffer(b))
	}
}

// completeChannelState hands the collected channel state of id to the
// asynchronous phase.
func (t *task) completeChannelState(id int64) {
	if cs := t.inflight; cs != nil && cs.id == id {
		cs.finish(nil)
		t.inflight = nil
	}
}

// abortChannelState drops the channel state being collected (the
// checkpoint was aborted, or the task ends); the asynchronous phase waiting
// for it declines with reason and msg. id 0 matches any checkpoint. It
// reports whether id was being collected.
func (t *task) abortChannelState(id int64, reason DeclineReason, msg string) bool {
	cs := t.inflight
	if cs == nil || (id != 0 && cs.id != id) {
		return false
	}
	cs.finish(&Decline{Reason: reason, Message: msg})
	t.inflight = nil
	return true
}

// timeoutOutputBarriers is the output side of aligned checkpoint id with a
// timeout, run beside its asynchronous phase: it waits until the barriers sent
// in order left every subpartition of an edge that allows unaligned
// checkpoints (the checkpoint stays aligned here), or until the timeout
// passes, and then moves those still queued ahead of the data before them,
// whose copies become output channel state. It returns the number of
// subpartitions where it moved the barrier.
func (t *task) timeoutOutputBarriers(id int64, deadline time.Time, cs *channelState) (int, error) {
	for {
		queued := false
		for i, rp := range t.partitions {
			if t.outParts[i].unaligned && rp.BarrierQueued(id) {
				queued = true
				break
			}
		}
		if !queued {
			return 0, nil
		}
		wait := deadline.Sub(t.clock.Now())
		if wait <= 0 {
			break
		}
		tm := t.clock.NewTimer(min(wait, time.Millisecond))
		select {
		case <-tm.C():
		case <-t.ctx.Done():
			tm.Stop()
			return 0, fmt.Errorf("output barriers: %w", context.Cause(t.ctx))
		}
	}
	moved := 0
	for i, rp := range t.partitions {
		if !t.outParts[i].unaligned {
			continue
		}
		out := cs.out[i]
		moved += rp.PrioritizeBarrier(id, func(sub int, b *network.Buffer) {
			out[sub] = append(out[sub], copyBuffer(b))
		})
	}
	return moved, nil
}
