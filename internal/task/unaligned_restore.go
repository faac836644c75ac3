package task

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/weirstream/weir/internal/checkpoint/metadata"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/graph"
	"github.com/weirstream/weir/internal/keygroup"
	"github.com/weirstream/weir/internal/network"
)

// Restoring the channel state of an unaligned checkpoint.
//
// The in-flight data of a channel is its input part (received by the
// consumer) followed by its output part (still queued at the producer).
// Both are replayed by the consumer side, input part first, before the
// subtask reads anything new from its gate: the producer's restored state
// already counts the output part as sent, so the data must reach a consumer
// exactly once, and reading both halves at the consumer gives one mechanism
// for restoring at the same parallelism and at another one. (Flink puts the
// output part back into the producer's subpartitions; the records and their
// order per channel are the same.)
//
// At the same consumer parallelism, subtask i replays the channels it
// consumed. At another parallelism the data is redistributed per edge like
// Flink's virtual channels: on a hash edge every subtask reads the old
// consumers whose key-group ranges overlap its own and keeps the records
// whose key it now owns; on a broadcast edge subtask i replays old subtask
// i mod the old parallelism's channels (whose copy of the broadcast state
// it restores); on other edges
// old consumer c's channels go to subtask c mod the new parallelism.

// recoveredChannel is the in-flight data of one old channel, replayed
// through reader.
type recoveredChannel struct {
	reader network.BufferReader
	parts  []metadata.ChannelState
}

// channelStateByEdge indexes the channel state of cp by edge.
func channelStateByEdge(cp *metadata.Checkpoint) map[string][]metadata.ChannelState {
	out := map[string][]metadata.ChannelState{}
	for _, op := range cp.Operators {
		for _, st := range op.Subtasks {
			for _, c := range st.Channels {
				out[c.Edge] = append(out[c.Edge], c)
			}
		}
	}
	return out
}

// checkChannelStateEdges refuses to restore in-flight data of an edge the
// job does not have as a network edge (an operator chained now, a changed
// partitioner or uid): replaying none of it would lose records silently.
func checkChannelStateEdges(jg *graph.JobGraph, id int64, byEdge map[string][]metadata.ChannelState) error {
	have := map[string]bool{}
	for _, v := range jg.Vertices {
		for _, e := range v.Inputs {
			have[edgeKey(e)] = true
		}
	}
	var missing []string
	for k := range byEdge {
		if !have[k] {
			missing = append(missing, k)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	slices.Sort(missing)
	return fmt.Errorf("%w (checkpoint %d): it holds in-flight data of the network edges %s, which the job does not have "+
		"(operators chained differently, or a changed partitioner or uid); restore it with the graph it was taken with, "+
		"or set execution.state-recovery.without-channel-state.checkpoint-id=%d to restore it without its in-flight data, losing those records",
		ErrStateMismatch, id, strings.Join(missing, ", "), id)
}

// recoveredChannels picks the in-flight data subtask index of v replays on
// input edge e, whose live reader is r and whose consumer input is in.
func (j *Job) recoveredChannels(v *graph.Vertex, index int, e *graph.Edge, r network.BufferReader, in any, tr *Tracker) ([]recoveredChannel, error) {
	entries := j.channelState[edgeKey(e)]
	if len(entries) == 0 {
		return nil, nil
	}
	p := v.Parallelism
	old := entries[0].Consumers
	reader := r
	var pick func(c int) bool
	switch {
	case old == p:
		pick = func(c int) bool { return c == index }
	case e.Partitioner == network.Hash:
		maxP := e.To.MaxParallelism
		lo, hi := keygroup.Range(index, maxP, p)
		pick = func(c int) bool {
			clo, chi := keygroup.Range(c, maxP, old)
			return clo <= hi && lo <= chi
		}
		fr, err := e.From.Impl.(NodeImpl).Output(e.Output).NewKeyFilteredReader(in, EdgeInfo{Partitioner: e.Partitioner, Impl: e.Impl,
			Consumers: p, ConsumerMaxParallelism: maxP, Timestamped: e.Timestamped, Tracker: tr}, index)
		if err != nil {
			return nil, err
		}
		reader = fr
	case e.Partitioner == network.Broadcast:
		// The broadcast state restores old subtask index mod old's copy;
		// its in-flight broadcast data goes with it.
		pick = func(c int) bool { return c == index%old }
	default:
		pick = func(c int) bool { return c%p == index }
	}
	var mine []metadata.ChannelState
	for _, c := range entries {
		if c.Consumers != old {
			return nil, fmt.Errorf("%w: channel state of edge %s was taken at consumer parallelism %d and %d", ErrStateMismatch, c.Edge, old, c.Consumers)
		}
		if pick(c.Consumer) {
			mine = append(mine, c)
		}
	}
	// Per channel (producer, consumer): the input part, then the output.
	slices.SortStableFunc(mine, func(a, b metadata.ChannelState) int {
		return cmp.Or(cmp.Compare(a.Consumer, b.Consumer), cmp.Compare(a.Producer, b.Producer), cmpBool(a.Output, b.Output))
	})
	var out []recoveredChannel
	for i, c := range mine {
		if i > 0 && c.Consumer == mine[i-1].Consumer && c.Producer == mine[i-1].Producer {
			last := &out[len(out)-1]
			last.parts = append(last.parts, c)
			continue
		}
		out = append(out, recoveredChannel{reader: reader, parts: []metadata.ChannelState{c}})
	}
	return out, nil
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}

// replayChannelState feeds the recovered in-flight data to the operators
// before the task reads its gate. Each old channel gets a channel number of
// its own (negative, apart from the gate's) for reassembling fragmented
// records. Barriers arriving meanwhile wait in the gate.
func (t *task) replayChannelState(ctx context.Context) error {
	if len(t.replay) == 0 {
		return nil
	}
	files := map[string][]byte{}
	for k, rc := range t.replay {
		ch := -1 - k
		for _, part := range rc.parts {
			data, ok := files[part.File.Path]
			if !ok {
				var err error
				if data, err = t.readRestored(part.File); err != nil {
					return t.opError(0, fmt.Errorf("channel state %s: %w", part.File.Path, err))
				}
				files[part.File.Path] = data
			}
			bufs, err := decodeBuffers(data[part.Offset:part.Offset+part.Length], part.Buffers)
			if err != nil {
				return t.opError(0, fmt.Errorf("channel state %s of edge %s: %w: %w", part.File.Path, part.Edge, ErrRestoreData, err))
			}
			for _, sb := range bufs {
				if ctx.Err() != nil {
					return t.canceled(ctx)
				}
				if err := t.awaitOutputs(ctx); err != nil {
					return err
				}
				t.tracker.Cur = 0
				if err := rc.reader.Read(ch, &network.Buffer{Kind: sb.kind, Data: sb.data}); err != nil {
					return t.opError(0, fmt.Errorf("channel state of edge %s: %w", part.Edge, err))
				}
				if err := t.swallowed(ctx); err != nil {
					return err
				}
				if err := t.tick(); err != nil {
					return err
				}
			}
		}
		if p := rc.reader.Pending(ch); len(p) > 0 {
			return t.opError(0, fmt.Errorf("channel state of edge %s ends inside a record (%d bytes of it): %w", rc.parts[0].Edge, len(p), ErrRestoreData))
		}
	}
	t.replay = nil
	return nil
}

// readRestored reads a whole restored file, verified against its handle.
func (t *task) readRestored(h storage.FileHandle) ([]byte, error) {
	return readAllRestored(t.openRestored, h)
}
