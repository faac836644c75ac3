package tcpnet

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/weirstream/weir/internal/network"
)

// senderChannel is the sender role of one channel: it is the listener of
// the producer's subpartition and, once the receiver opened the channel,
// the connection's writer polls the subpartition with the credit it holds.
type senderChannel struct {
	n    *Node
	peer string
	id   ChannelID
	sub  network.Subpartition

	mu     sync.Mutex
	c      *conn // the connection the receiver opened the channel on
	closed bool

	credit  atomic.Int64 // granted by the receiver and not used: the reader adds, the writer uses
	known   int          // the backlog the receiver last learned (the writer's)
	inReady bool         // queued on c.ready (c.mu)
	ready   bool         // registered and listening, may be bound (Node.mu)
}

var _ network.AvailabilityListener = (*senderChannel)(nil)

// ConnectSender connects sub, a producer's subpartition, as the sender of
// channel id to its receiver on peer (the name of the receiver's node, its
// Addr). It registers itself as sub's listener; nothing is polled until the
// receiver opens the channel (ConnectReceiver on peer), which may happen
// before or after this call, and then data buffers move as the receiver's
// credit allows, events at once. Data buffers are recycled into their pool
// once written. It does not block.
func (n *Node) ConnectSender(peer string, id ChannelID, sub network.Subpartition) error {
	if sub == nil {
		return errors.New("tcpnet: ConnectSender: nil subpartition")
	}
	key := senderKey{peer, id}
	sc := &senderChannel{n: n, peer: peer, id: id, sub: sub}
	n.mu.Lock()
	switch {
	case n.closed:
		n.mu.Unlock()
		return ErrClosed
	case n.ended[id.Attempt]:
		n.mu.Unlock()
		return fmt.Errorf("%w: cannot connect channel %v", ErrAttemptClosed, id)
	case n.senders[key] != nil:
		n.mu.Unlock()
		return fmt.Errorf("tcpnet: channel %v to %s is already connected", id, peer)
	}
	// Reserve the key; an open that comes before the listener is set
	// waits among the pending ones.
	n.senders[key] = sc
	n.mu.Unlock()

	sub.SetListener(sc)

	n.mu.Lock()
	defer n.mu.Unlock()
	switch {
	case n.closed:
		return ErrClosed
	case n.senders[key] != sc:
		return fmt.Errorf("%w: channel %v closed while it was connected", ErrAttemptClosed, id)
	}
	sc.ready = true
	if po, ok := n.pending[key]; ok {
		delete(n.pending, key)
		n.bindLocked(po.c, sc, po)
	}
	return nil
}

// onOpen handles an open frame from c: the receiver of id grants credit.
func (n *Node) onOpen(c *conn, id ChannelID, credit int) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	key := senderKey{c.peer, id}
	if n.ended[id.Attempt] || n.closed {
		return nil
	}
	sc := n.senders[key]
	if sc != nil && sc.ready {
		sc.mu.Lock()
		bound := sc.c != nil
		sc.mu.Unlock()
		if bound {
			return c.protocolErr("channel %v opened twice", id)
		}
		n.bindLocked(c, sc, pendingOpen{c: c, credit: credit})
		return nil
	}
	if _, dup := n.pending[key]; dup {
		return c.protocolErr("channel %v opened twice", id)
	}
	n.pending[key] = pendingOpen{c: c, credit: credit}
	return nil
}

// onUnbound handles credit and a buffer size from c for a sender that is
// not bound: the receiver opened the channel before ConnectSender. They
// wait with the open. (The gate grants no credit before the channel
// delivered something, but the protocol does not rely on it.) Frames of
// senders that are gone are dropped.
func (n *Node) onUnbound(c *conn, id ChannelID, credit, size int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if sc := c.sender(id); sc != nil {
		// Bound meanwhile: bindLocked holds n.mu.
		sc.credit.Add(int64(credit))
		if size > 0 {
			sc.notifySize(size)
		}
		c.markReady(sc)
		return
	}
	key := senderKey{c.peer, id}
	if po, ok := n.pending[key]; ok && po.c == c {
		po.credit += credit
		if size > 0 {
			po.size = size
		}
		n.pending[key] = po
	}
}

// bindLocked binds sc to the connection its receiver opened it on, with
// the receiver's credit and buffer size, and polls it.
func (n *Node) bindLocked(c *conn, sc *senderChannel, po pendingOpen) {
	c.mu.Lock()
	if c.dead {
		// The connection broke: its teardown (lost) ran or will run
		// without knowing sc, which waits for a new open.
		c.mu.Unlock()
		return
	}
	c.senders[sc.id] = sc
	c.mu.Unlock()
	sc.credit.Store(int64(po.credit))
	if po.size > 0 {
		sc.notifySize(po.size)
	}
	sc.mu.Lock()
	sc.c = c
	sc.mu.Unlock()
	c.markReady(sc)
}

// notifySize passes the receiver's buffer size to the subpartition.
func (sc *senderChannel) notifySize(size int) {
	if l, ok := sc.sub.(network.BufferSizeListener); ok {
		l.NotifyNewBufferSize(size)
	}
}

// NotifyDataAvailable queues the channel for its connection's writer.
func (sc *senderChannel) NotifyDataAvailable() {
	sc.mu.Lock()
	c, closed := sc.c, sc.closed
	sc.mu.Unlock()
	if c != nil && !closed {
		c.markReady(sc)
	}
}

// fail stops the channel: it polls its subpartition no more.
func (sc *senderChannel) fail() {
	sc.mu.Lock()
	sc.closed = true
	sc.mu.Unlock()
}

func (sc *senderChannel) isClosed() bool {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return sc.closed
}
