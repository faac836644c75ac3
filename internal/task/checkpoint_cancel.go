package task

import (
	"context"
	"errors"
	"sync"
)

// errSnapshotAborted ends the asynchronous phase of an aborted snapshot.
var errSnapshotAborted = errors.New("snapshot aborted")

// abortedKept bounds how many aborted ids asyncCancels remembers for
// phases that start after their abort.
const abortedKept = 64

// asyncCancels ends the asynchronous phases of aborted snapshots (expired,
// declined elsewhere, subsumed by the coordinator): their uploads stop
// instead of running on, or hanging on a stalled store, after nothing
// waits for them any more, and a task that ends does not wait for them.
// It is safe for concurrent use: phases start on their own goroutines,
// aborts come from the runner.
type asyncCancels struct {
	mu      sync.Mutex
	seq     int
	live    map[int64]map[int]context.CancelCauseFunc
	aborted map[int64]bool
}

// start returns the context for snapshot id's asynchronous phase, under
// parent, and the function to call when the phase ends. A nil receiver
// returns parent.
func (c *asyncCancels) start(parent context.Context, id int64) (context.Context, func()) {
	if c == nil {
		return parent, func() {}
	}
	ctx, cancel := context.WithCancelCause(parent)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.aborted[id] {
		cancel(errSnapshotAborted)
		return ctx, func() {}
	}
	if c.live == nil {
		c.live = map[int64]map[int]context.CancelCauseFunc{}
	}
	if c.live[id] == nil {
		c.live[id] = map[int]context.CancelCauseFunc{}
	}
	c.seq++
	n := c.seq
	c.live[id][n] = cancel
	return ctx, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		delete(c.live[id], n)
		if len(c.live[id]) == 0 {
			delete(c.live, id)
		}
		cancel(nil)
	}
}

// abort cancels the asynchronous phases of snapshot id, also those that
// start later.
func (c *asyncCancels) abort(id int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cancel := range c.live[id] {
		cancel(errSnapshotAborted)
	}
	delete(c.live, id)
	if c.aborted == nil {
		c.aborted = map[int64]bool{}
	}
	c.aborted[id] = true
	for old := range c.aborted {
		if old <= id-abortedKept {
			delete(c.aborted, old)
		}
	}
}
