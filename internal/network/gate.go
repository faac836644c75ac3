package network

import (
	"sync"
)

// InputGate is the receiving end of a consumer subtask: one input channel per
// upstream subtask of every input edge, credit-based flow control over all of
// them, and one wake-up channel for the consumer.
//
// Senders call Send (and SendPriority) from their own goroutines; the consumer
// alone calls Poll, Release, Block and Unblock. For in-process channels the
// sender-side queue (buffers waiting for credit) and the receiver-side queue
// live here under one mutex, and buffers are handed over without copying.
type InputGate struct {
	mu      sync.Mutex
	credit  *CreditGate
	chans   []localChannel
	avail   bufQueue[int] // channels with received buffers, round robin
	grants  []Grant
	notify  chan struct{}
	pending int // buffers in receive queues, for metrics and tests
}

type localChannel struct {
	sendQ    bufQueue[*Buffer] // at the sender, waiting for credit
	sendData int               // data buffers in sendQ
	credit   int               // credit the sender holds
	recvQ    bufQueue[*Buffer] // delivered, waiting for the consumer
	inAvail  bool
	blocked  bool
}

// NewInputGate returns a gate of channels input channels with exclusive
// credits each and floating credits shared.
func NewInputGate(channels, exclusive, floating int) *InputGate {
	g := &InputGate{
		credit: NewCreditGate(channels, exclusive, floating),
		chans:  make([]localChannel, channels),
		notify: make(chan struct{}, 1),
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

// Channel returns the sending end of input channel ch.
func (g *InputGate) Channel(ch int) *Channel { return &Channel{gate: g, ch: ch} }

// Send enqueues b on channel ch. Data buffers move to the consumer as credit
// allows; events follow the data ahead of them.
func (g *InputGate) Send(ch int, b *Buffer) {
	g.mu.Lock()
	c := &g.chans[ch]
	c.sendQ.push(b)
	if b.IsData() {
		c.sendData++
	}
	wake := g.moveLocked(ch)
	wake = g.settleLocked() || wake
	g.mu.Unlock()
	if wake {
		g.wake()
	}
}

// SendPriority puts event buffer b at the head of channel ch's receive queue,
// ahead of every buffer queued there or at the sender, and delivers it even
// if the channel is blocked.
func (g *InputGate) SendPriority(ch int, b *Buffer) {
	g.mu.Lock()
	c := &g.chans[ch]
	c.recvQ.pushFront(b)
	g.pending++
	wake := g.makeAvailLocked(ch, true)
	g.mu.Unlock()
	if wake {
		g.wake()
	}
}

// moveLocked hands channel ch's sendable buffers to the receiver and reports
// whether the consumer should be woken.
func (g *InputGate) moveLocked(ch int) bool {
	c := &g.chans[ch]
	moved := false
	for c.sendQ.len() > 0 {
		b := c.sendQ.peek()
		if b.IsData() {
			if c.credit == 0 {
				break
			}
			c.credit--
			c.sendData--
			if err := g.credit.OnBuffer(ch, c.sendData); err != nil {
				panic(err) // the shell only moves with credit: a bug, not input
			}
		}
		c.sendQ.pop()
		c.recvQ.push(b)
		g.pending++
		moved = true
	}
	if c.sendData > 0 && c.credit == 0 {
		g.credit.OnBacklog(ch, c.sendData)
	}
	return moved && g.makeAvailLocked(ch, false)
}

// settleLocked applies every credit the accounting owes and moves what the
// credit allows, until nothing changes.
func (g *InputGate) settleLocked() bool {
	wake := false
	for {
		g.grants = g.credit.Grants(g.grants[:0])
		if len(g.grants) == 0 {
			return wake
		}
		for _, gr := range g.grants {
			g.chans[gr.Channel].credit += gr.N
		}
		for _, gr := range g.grants {
			wake = g.moveLocked(gr.Channel) || wake
		}
	}
}

func (g *InputGate) makeAvailLocked(ch int, priority bool) bool {
	c := &g.chans[ch]
	if c.inAvail || (c.blocked && !priority) || c.recvQ.len() == 0 {
		return false
	}
	c.inAvail = true
	g.avail.push(ch)
	return true
}

func (g *InputGate) wake() {
	select {
	case g.notify <- struct{}{}:
	default:
	}
}

// Poll returns the next received buffer in round-robin order over channels,
// or ok=false if none is available. The consumer must Release data buffers
// once decoded. An end-of-partition event also ends the channel's credit.
func (g *InputGate) Poll() (ch int, b *Buffer, ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for g.avail.len() > 0 {
		ch = g.avail.pop()
		c := &g.chans[ch]
		c.inAvail = false
		if c.recvQ.len() == 0 {
			continue
		}
		head := c.recvQ.peek()
		if c.blocked && !(head.Kind == KindEvent && head.Event.Priority) {
			continue
		}
		b = c.recvQ.pop()
		g.pending--
		g.makeAvailLocked(ch, false)
		if b.Kind == KindEvent && b.Event.Kind == EventEndOfPartition {
			g.credit.OnEndOfPartition(ch)
			g.settleLocked()
		}
		return ch, b, true
	}
	return 0, nil, false
}

// Release recycles data buffer b, received on ch, and credits the sender.
func (g *InputGate) Release(ch int, b *Buffer) {
	b.Recycle()
	g.mu.Lock()
	g.credit.OnRelease(ch)
	wake := g.settleLocked()
	g.mu.Unlock()
	if wake {
		g.wake()
	}
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
	g.chans[ch].blocked = false
	wake := g.makeAvailLocked(ch, false)
	g.mu.Unlock()
	if wake {
		g.wake()
	}
}

// QueuedBuffers is the number of buffers delivered and not yet polled.
func (g *InputGate) QueuedBuffers() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.pending
}

// CheckCredit verifies the credit accounting invariants (for tests).
func (g *InputGate) CheckCredit() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.credit.Check()
}

// Channel is the sending end of one input channel of a gate.
type Channel struct {
	gate *InputGate
	ch   int
}

// Send enqueues b; see InputGate.Send.
func (c *Channel) Send(b *Buffer) { c.gate.Send(c.ch, b) }

// SendPriority delivers event buffer b ahead of queued buffers.
func (c *Channel) SendPriority(b *Buffer) { c.gate.SendPriority(c.ch, b) }

// bufQueue is a FIFO with amortized O(1) push, pop and pushFront.
type bufQueue[T any] struct {
	items []T
	head  int
}

func (q *bufQueue[T]) len() int { return len(q.items) - q.head }
func (q *bufQueue[T]) peek() T  { return q.items[q.head] }

func (q *bufQueue[T]) push(v T) {
	if q.head > 0 && q.head == len(q.items) {
		q.items, q.head = q.items[:0], 0
	}
	q.items = append(q.items, v)
}

func (q *bufQueue[T]) pop() T {
	var zero T
	v := q.items[q.head]
	q.items[q.head] = zero
	q.head++
	if q.head == len(q.items) {
		q.items, q.head = q.items[:0], 0
	}
	return v
}

func (q *bufQueue[T]) pushFront(v T) {
	if q.head > 0 {
		q.head--
		q.items[q.head] = v
		return
	}
	var zero T
	q.items = append(q.items, zero)
	copy(q.items[1:], q.items)
	q.items[0] = v
}
