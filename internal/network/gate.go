package network

import (
	"fmt"
	"sync"
)

// InputGate is the receiving end of a consumer subtask: one input channel per
// upstream subtask of every input edge, the buffers each received, the credit
// accounting over all of them (CreditGate), and one wake-up channel for the
// consumer.
//
// Transports deliver through the InputChannel that Connect returns, each from
// its own goroutine; the consumer alone calls Poll, PollPriority, Release,
// Block and Unblock. One mutex guards the gate; it is never held while the
// gate calls out (CreditListener, the priority listener, the wake-up).
type InputGate struct {
	mu         sync.Mutex
	credit     *CreditGate
	chans      []inputChannel
	avail      bufQueue[int] // channels with pollable buffers, round robin
	grants     []Grant
	owed       []int // channels with unannounced credit and a listener, each once
	notify     chan struct{}
	onPriority func()
	queued     int // buffers received and not yet polled
	prioQueued int // priority events among them

	consumed int64 // bytes of data buffers released, the consumer's (debloat.go)
}

// inputChannel is the receiver side of one channel; it implements
// InputChannel for the channel's transport.
type inputChannel struct {
	gate        *InputGate
	idx         int
	recvQ       bufQueue[*Buffer] // received, waiting for the consumer
	prio        int               // priority events at the head of recvQ
	sender      CreditListener
	unannounced int // credit granted and not yet given to the transport
	owed        bool
	connected   bool
	inAvail     bool
	blocked     bool
	received    int64 // buffers received in order so far (Buffer.seq)
}

var _ InputChannel = (*inputChannel)(nil)

// NewInputGate returns a gate of channels input channels with exclusive
// credits each and floating credits shared.
func NewInputGate(channels, exclusive, floating int) *InputGate {
	g := &InputGate{
		credit: NewCreditGate(channels, exclusive, floating),
		chans:  make([]inputChannel, channels),
		notify: make(chan struct{}, 1),
	}
	for i := range g.chans {
		g.chans[i].gate, g.chans[i].idx = g, i
	}
	g.mu.Lock()
	g.settleLocked()
	g.mu.Unlock()
	return g
}

// NumChannels is the number of input channels.
func (g *InputGate) NumChannels() int { return len(g.chans) }

// Notify returns a channel that receives a value after data becomes
// available. Wake-ups may be spurious: the consumer must Poll again.
func (g *InputGate) Notify() <-chan struct{} { return g.notify }

// SetPriorityListener registers fn, called after a priority event arrived on
// any channel and can be polled. fn runs on the delivering transport's
// goroutine (the producer's, in process) without the gate's lock held; it
// must not block. The consumer task uses it to post mail that reaches it
// even while it is blocked on backpressure.
func (g *InputGate) SetPriorityListener(fn func()) {
	g.mu.Lock()
	g.onPriority = fn
	g.mu.Unlock()
}

// Connect attaches the transport of channel ch: sender receives the credit
// the consumer grants from now on, credit is what was granted before (the
// initial exclusive credit), and the returned InputChannel is where the
// transport delivers. It panics if ch is already connected.
func (g *InputGate) Connect(ch int, sender CreditListener) (in InputChannel, credit int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	c := &g.chans[ch]
	if c.connected {
		panic(fmt.Sprintf("network: input channel %d connected twice", ch))
	}
	c.connected, c.sender = true, sender
	credit, c.unannounced = c.unannounced, 0
	return c, credit
}

// OnBuffer receives the channel's next buffer; see InputChannel.
func (c *inputChannel) OnBuffer(b *Buffer, backlog int) (int, error) {
	g := c.gate
	g.mu.Lock()
	priority := false
	switch {
	case b.IsData():
		if err := g.credit.OnBuffer(c.idx, backlog); err != nil {
			g.mu.Unlock()
			return 0, err
		}
		c.received++
		b.seq = c.received
		c.recvQ.push(b)
	case b.Event.Priority:
		priority = true
		b.Overtook = c.received
		c.recvQ.insert(c.prio, b)
		c.prio++
		g.prioQueued++
		g.credit.OnBacklog(c.idx, backlog)
	default:
		if b.Event.Kind == EventBarrier && b.Event.Checkpoint.Timeoutable() {
			// Announce it ahead of the data it waits behind.
			ev := b.Event
			ev.Kind, ev.Priority = EventAnnouncement, true
			c.recvQ.insert(c.prio, NewEventBuffer(ev))
			c.prio++
			g.prioQueued++
			g.queued++
			priority = true
		}
		c.received++
		b.seq = c.received
		c.recvQ.push(b)
		g.credit.OnBacklog(c.idx, backlog)
	}
	g.queued++
	wake := g.makeAvailLocked(c)
	credit := g.settleForLocked(c)
	var onPriority func()
	if priority {
		onPriority = g.onPriority
	}
	g.mu.Unlock()
	if wake {
		g.wake()
	}
	if onPriority != nil {
		onPriority()
	}
	return credit, nil
}

// OnBacklog learns the sender's backlog; see InputChannel.
func (c *inputChannel) OnBacklog(backlog int) int {
	g := c.gate
	g.mu.Lock()
	g.credit.OnBacklog(c.idx, backlog)
	credit := g.settleForLocked(c)
	g.mu.Unlock()
	return credit
}

// settleForLocked applies the credit the accounting owes and returns the
// part owed to c, which its transport takes as a return value. Credit owed
// to other channels stays unannounced until the consumer's next call
// announces it (the accounting lends OnBuffer's and OnBacklog's floating
// credit to their own channel only, so there is none in practice).
func (g *InputGate) settleForLocked(c *inputChannel) int {
	g.settleLocked()
	n := c.unannounced
	c.unannounced = 0
	return n
}

// settleLocked drains the credit the accounting owes into the channels'
// unannounced credit and lists the connected channels that have some.
func (g *InputGate) settleLocked() {
	g.grants = g.credit.Grants(g.grants[:0])
	for _, gr := range g.grants {
		c := &g.chans[gr.Channel]
		c.unannounced += gr.N
		if c.connected && !c.owed {
			c.owed = true
			g.owed = append(g.owed, gr.Channel)
		}
	}
}

// announcement is credit to hand to a transport once the lock is released.
type announcement struct {
	to CreditListener
	n  int
}

// takeOwedLocked moves the unannounced credit of every listed channel into
// dst.
func (g *InputGate) takeOwedLocked(dst []announcement) []announcement {
	for _, ch := range g.owed {
		c := &g.chans[ch]
		c.owed = false
		if c.unannounced > 0 {
			dst = append(dst, announcement{to: c.sender, n: c.unannounced})
			c.unannounced = 0
		}
	}
	g.owed = g.owed[:0]
	return dst
}

func announce(as []announcement) {
	for _, a := range as {
		a.to.AddCredit(a.n)
	}
}

func (g *InputGate) makeAvailLocked(c *inputChannel) bool {
	if c.inAvail || (c.blocked && c.prio == 0) || c.recvQ.len() == 0 {
		return false
	}
	c.inAvail = true
	g.avail.push(c.idx)
	return true
}

func (g *InputGate) wake() {
	select {
	case g.notify <- struct{}{}:
	default:
	}
}

// Poll returns the next received buffer, or ok=false if none is available.
// Priority events come first, then buffers in round-robin order over
// channels. The consumer must Release data buffers once decoded. An
// end-of-partition event also ends the channel's credit.
func (g *InputGate) Poll() (ch int, b *Buffer, ok bool) {
	var buf [2]announcement
	g.mu.Lock()
	ch, b, ok = g.pollLocked()
	as := g.takeOwedLocked(buf[:0])
	g.mu.Unlock()
	announce(as)
	return ch, b, ok
}

func (g *InputGate) pollLocked() (int, *Buffer, bool) {
	if g.prioQueued > 0 {
		if ch, b, ok := g.pollPriorityLocked(); ok {
			return ch, b, true
		}
	}
	for g.avail.len() > 0 {
		ch := g.avail.pop()
		c := &g.chans[ch]
		c.inAvail = false
		if c.recvQ.len() == 0 || (c.blocked && c.prio == 0) {
			continue
		}
		b := g.popLocked(c)
		g.makeAvailLocked(c)
		return ch, b, true
	}
	return 0, nil, false
}

// PollPriority returns the next priority event received on any channel,
// ahead of the buffers received before it, or ok=false if there is none.
func (g *InputGate) PollPriority() (ch int, b *Buffer, ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.prioQueued == 0 {
		return 0, nil, false
	}
	return g.pollPriorityLocked()
}

// pollPriorityLocked scans the channels: priority events are rare.
func (g *InputGate) pollPriorityLocked() (int, *Buffer, bool) {
	for i := range g.chans {
		if c := &g.chans[i]; c.prio > 0 {
			return i, g.popLocked(c), true
		}
	}
	return 0, nil, false
}

func (g *InputGate) popLocked(c *inputChannel) *Buffer {
	b := c.recvQ.pop()
	g.queued--
	if c.prio > 0 {
		c.prio--
		g.prioQueued--
	}
	if b.Kind == KindEvent && b.Event.Kind == EventEndOfPartition {
		g.credit.OnEndOfPartition(c.idx)
		g.settleLocked()
	}
	return b
}

// Overtaken shows visit the data buffers queued on ch that were received
// in order up to sequence number upTo, oldest first, under the gate's lock:
// called with the Buffer.Overtook of a priority event the consumer polled,
// they are the buffers that event overtook, which an unaligned checkpoint
// persists as input channel state. Sequence numbers, not positions, so
// that a barrier moved ahead in between (PrioritizeBarrier) changes
// nothing. visit must not keep the buffers (copy their Data).
func (g *InputGate) Overtaken(ch int, upTo int64, visit func(*Buffer)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	c := &g.chans[ch]
	for i := c.prio; i < c.recvQ.len(); i++ {
		b := c.recvQ.at(i)
		if b.seq > upTo {
			return
		}
		if b.IsData() {
			visit(b)
		}
	}
}

// PrioritizeBarrier turns checkpoint barrier id, received in order on ch
// and not polled yet, into a priority event ahead of the buffers received
// before it (Buffer.Overtook says up to which one): an aligned
// checkpoint whose timeout passed goes unaligned. It reports false if no
// such barrier is queued on ch.
func (g *InputGate) PrioritizeBarrier(ch int, id int64) bool {
	g.mu.Lock()
	c := &g.chans[ch]
	at := -1
	for i := c.prio; i < c.recvQ.len(); i++ {
		if b := c.recvQ.at(i); b.Kind == KindEvent && b.Event.Kind == EventBarrier && b.Event.ID == id {
			at = i
			break
		}
	}
	if at < 0 {
		g.mu.Unlock()
		return false
	}
	b := c.recvQ.at(at)
	c.recvQ.remove(at)
	b.Event.Priority = true
	b.Overtook = b.seq - 1
	c.recvQ.insert(c.prio, b)
	c.prio++
	g.prioQueued++
	wake := g.makeAvailLocked(c)
	onPriority := g.onPriority
	g.mu.Unlock()
	if wake {
		g.wake()
	}
	if onPriority != nil {
		onPriority()
	}
	return true
}

// Release recycles data buffer b, received on ch, and credits the sender.
func (g *InputGate) Release(ch int, b *Buffer) {
	g.countConsumed(b)
	b.Recycle()
	var buf [2]announcement
	g.mu.Lock()
	g.credit.OnRelease(ch)
	g.settleLocked()
	as := g.takeOwedLocked(buf[:0])
	g.mu.Unlock()
	announce(as)
}

// Block stops Poll from returning buffers of ch (barrier alignment) until
// Unblock. Priority events still get through.
func (g *InputGate) Block(ch int) {
	g.mu.Lock()
	g.chans[ch].blocked = true
	g.mu.Unlock()
}

// Unblock makes ch's buffers available again.
func (g *InputGate) Unblock(ch int) {
	g.mu.Lock()
	c := &g.chans[ch]
	c.blocked = false
	wake := g.makeAvailLocked(c)
	g.mu.Unlock()
	if wake {
		g.wake()
	}
}

// QueuedBuffers is the number of buffers received and not yet polled.
func (g *InputGate) QueuedBuffers() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.queued
}

// CheckCredit verifies the credit accounting invariants (for tests).
func (g *InputGate) CheckCredit() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.credit.Check()
}
