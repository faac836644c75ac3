package network

import (
	"fmt"
	"sync"
)

// LocalConnection is the in-process transport of one channel: it moves
// buffers from a Subpartition to a channel of an InputGate without copying,
// on the goroutine of whoever made them movable, the producer (Send) or the
// consumer (Release, which grants credit). It has no goroutine of its own.
//
// It holds the credit the receiver granted and never delivers a data buffer
// without one, so the receiver's accounting is never violated; a backlog that
// grows while it has no credit is announced (InputChannel.OnBacklog), so the
// receiver can lend floating credit. A mutex serializes deliveries, so the
// receiver sees buffers in the order the subpartition yields them; it is
// taken before the subpartition's and the gate's and never while they are
// held.
type LocalConnection struct {
	mu     sync.Mutex
	sub    Subpartition
	in     InputChannel
	credit int // granted by the receiver, not yet used
	known  int // the backlog the receiver last learned
}

var (
	_ AvailabilityListener = (*LocalConnection)(nil)
	_ CreditListener       = (*LocalConnection)(nil)
)

// ConnectLocal connects sub to input channel ch of g and moves what the
// initial credit allows.
func ConnectLocal(sub Subpartition, g *InputGate, ch int) *LocalConnection {
	c := &LocalConnection{sub: sub}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.in, c.credit = g.Connect(ch, c)
	sub.SetListener(c)
	c.transferLocked()
	return c
}

// NotifyDataAvailable moves the subpartition's sendable buffers.
func (c *LocalConnection) NotifyDataAvailable() {
	c.mu.Lock()
	c.transferLocked()
	c.mu.Unlock()
}

// AddCredit takes credit from the receiver and moves what it allows.
func (c *LocalConnection) AddCredit(n int) {
	c.mu.Lock()
	c.credit += n
	c.transferLocked()
	c.mu.Unlock()
}

// Credit is the credit the connection holds (for tests and metrics).
func (c *LocalConnection) Credit() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.credit
}

func (c *LocalConnection) transferLocked() {
	for {
		b, backlog := c.sub.PollNext(c.credit)
		if b == nil {
			if backlog == c.known {
				return
			}
			c.known = backlog
			if c.credit += c.in.OnBacklog(backlog); c.credit == 0 {
				return
			}
			continue
		}
		if b.IsData() {
			c.credit--
		}
		c.known = backlog
		n, err := c.in.OnBuffer(b, backlog)
		if err != nil {
			// Data moves only with credit: this is a bug, not input.
			panic(fmt.Sprintf("network: local connection: %v", err))
		}
		c.credit += n
	}
}
