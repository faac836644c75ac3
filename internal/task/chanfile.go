package task

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/weirstream/weir/internal/checkpoint/storage"
)

// Channel-state file merging
// (execution.checkpointing.unaligned.max-subtasks-per-channel-state-file).
//
// The subtasks of a job that can have channel state are split into groups
// of up to that many; per checkpoint, each group writes one file holding
// the channel state of all its members, instead of one small file per
// subtask. Every member's asynchronous phase submits its part (possibly
// empty) and waits; the last to arrive writes the file and hands every
// member its handle and offset. A write error declines the checkpoint at
// every member of the group; the next checkpoint starts afresh. A member
// that never submits (it failed, or declined before its snapshot) leaves
// the others waiting until the checkpoint is aborted (abort, from the
// coordinator's notification) or the job ends.

// channelStateGroup merges the channel state of its members into one file
// per checkpoint.
type channelStateGroup struct {
	name    string // the files' name: channel-state-<index>, or channel-state-<vertex>-<subtask> of the first member in a part of a job
	members int
	write   func(ctx context.Context, id int64, name string, payload []byte) (*storage.FileHandle, error)

	mu      sync.Mutex
	pending map[int64]*groupCheckpoint
	aborted map[int64]error // checkpoints aborted before every member came
}

// groupCheckpoint is one checkpoint's file of a group being assembled.
type groupCheckpoint struct {
	parts   map[int][]byte
	done    chan struct{}
	handle  *storage.FileHandle // nil when no member had data
	offsets map[int]int64
	err     error
}

func newChannelStateGroup(name string, members int, write func(ctx context.Context, id int64, name string, payload []byte) (*storage.FileHandle, error)) *channelStateGroup {
	return &channelStateGroup{name: name, members: members, write: write,
		pending: map[int64]*groupCheckpoint{}, aborted: map[int64]error{}}
}

// submit adds member's part of checkpoint id (empty: none) and waits until
// the group's file is written. It returns the file (nil if no member had
// data) and the offset of member's part in it.
func (g *channelStateGroup) submit(ctx context.Context, id int64, member int, payload []byte) (*storage.FileHandle, int64, error) {
	g.mu.Lock()
	if err, ok := g.aborted[id]; ok {
		g.mu.Unlock()
		return nil, 0, err
	}
	gc := g.pending[id]
	if gc == nil {
		gc = &groupCheckpoint{parts: map[int][]byte{}, done: make(chan struct{})}
		g.pending[id] = gc
	}
	if _, dup := gc.parts[member]; dup {
		g.mu.Unlock()
		return nil, 0, fmt.Errorf("channel state of checkpoint %d submitted twice by member %d", id, member)
	}
	gc.parts[member] = payload
	last := len(gc.parts) == g.members
	if last {
		delete(g.pending, id)
	}
	g.mu.Unlock()
	if last {
		g.assemble(ctx, id, gc)
	}
	select {
	case <-gc.done:
	case <-ctx.Done():
		return nil, 0, context.Cause(ctx)
	}
	if gc.err != nil {
		return nil, 0, gc.err
	}
	return gc.handle, gc.offsets[member], nil
}

// assemble writes the group's file from every member's part, in member
// order, and releases the waiters.
func (g *channelStateGroup) assemble(ctx context.Context, id int64, gc *groupCheckpoint) {
	defer close(gc.done)
	var payload []byte
	gc.offsets = make(map[int]int64, len(gc.parts))
	for m := range g.members {
		gc.offsets[m] = int64(len(payload))
		payload = append(payload, gc.parts[m]...)
	}
	if len(payload) == 0 {
		return
	}
	gc.handle, gc.err = g.write(ctx, id, g.name, payload)
	if gc.err != nil {
		gc.err = fmt.Errorf("channel-state file of %d subtasks: %w", g.members, gc.err)
	}
}

// abort releases the members waiting for checkpoint id with err; members
// that submit later get err at once.
func (g *channelStateGroup) abort(id int64, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if gc := g.pending[id]; gc != nil {
		delete(g.pending, id)
		gc.err = err
		close(gc.done)
	}
	g.aborted[id] = err
	for old := range g.aborted {
		if old < id-100 {
			delete(g.aborted, old)
		}
	}
}

// errChannelStateAborted is wrapped by the error members waiting for an
// aborted checkpoint's channel-state file get.
var errChannelStateAborted = errors.New("checkpoint aborted before every subtask of its channel-state file submitted its part")

// writeChannelStateFile writes payload as file name of checkpoint id.
func (j *Job) writeChannelStateFile(ctx context.Context, id int64, name string, payload []byte) (*storage.FileHandle, error) {
	if hook := j.opts.Hooks.ChannelState; hook != nil {
		if err := hook(id); err != nil {
			return nil, err
		}
	}
	if j.opts.Checkpoints == nil {
		return &storage.FileHandle{Path: name, Size: int64(len(payload))}, nil
	}
	fw, err := j.opts.Checkpoints.CreateFile(ctx, j.opts.CheckpointJob, id, name)
	if err != nil {
		return nil, err
	}
	h, err := storage.WriteAll(fw, func(w io.Writer) error {
		_, err := w.Write(payload)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &h, nil
}

// groupChannelState puts the job's subtasks that can have channel state
// (an input channel or an output of an edge where barriers may overtake)
// into groups of up to perFile.
func (j *Job) groupChannelState(perFile int) {
	perFile = max(perFile, 1)
	var members []*task
	for _, t := range j.tasks {
		can := t.gate != nil
		for _, p := range t.outParts {
			can = can || p.unaligned
		}
		if can {
			members = append(members, t)
		}
	}
	for start := 0; start < len(members); start += perFile {
		group := members[start:min(start+perFile, len(members))]
		// A process that runs part of the job (a task manager) names
		// its files after their first subtask: the other task managers
		// write into the same checkpoint directory.
		name := fmt.Sprintf("channel-state-%d", len(j.chanGroups))
		if j.opts.Placement != nil {
			name = fmt.Sprintf("channel-state-%d-%d", group[0].vertex, group[0].index)
		}
		g := newChannelStateGroup(name, len(group), j.writeChannelStateFile)
		j.chanGroups = append(j.chanGroups, g)
		for m, t := range group {
			t.chanGroup, t.chanMember = g, m
		}
	}
}
