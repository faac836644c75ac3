package tcpnet

import (
	"context"
	"errors"
	"fmt"

	"github.com/weirstream/weir/internal/network"
)

// recvChannel is the receiver role of one channel: the connection's reader
// delivers to in, and it is the CreditListener and BufferSizeListener the
// gate tells, whose news the writer sends as control frames.
type recvChannel struct {
	id    ChannelID
	c     *conn
	in    network.InputChannel
	pool  *network.Pool
	plock *poolLock

	// Guarded by c.mu.
	queued     bool // on c.control
	open       bool // the open frame is to be sent
	opened     bool // the open frame was taken by the writer
	openCredit int
	credit     int // granted, to be sent
	size       int // announced buffer size to be sent, 0: none
	dead       bool
}

var (
	_ network.CreditListener     = (*recvChannel)(nil)
	_ network.BufferSizeListener = (*recvChannel)(nil)
)

// ConnectReceiver connects input channel ch of g as the receiver of channel
// id, whose sender is on peer (the name of the sender's node, its Addr):
// it dials peer unless this node has a connection to it already, connects
// the gate's channel and opens the channel with the gate's initial credit.
// It blocks while it dials, up to Config.DialTimeout or until ctx ends.
//
// Received data buffers are read into buffers of pool, the receiver's
// memory, which the consumer recycles with InputGate.Release. pool must
// hold at least the gate's credit capacity (exclusive buffers of every
// channel plus the floating ones, InputGate.BufferUsage); several gates
// need a pool each or one that holds their sum, since credit bounds the
// buffers in use only per gate. Only this node requests from it, from the
// connections' readers, serialized. As InputGate.Connect, it panics if ch
// is already connected.
func (n *Node) ConnectReceiver(ctx context.Context, peer string, id ChannelID, g *network.InputGate, ch int, pool *network.Pool) error {
	switch {
	case g == nil || pool == nil:
		return errors.New("tcpnet: ConnectReceiver: nil input gate or pool")
	case ch < 0 || ch >= g.NumChannels():
		return fmt.Errorf("tcpnet: ConnectReceiver: input channel %d of a gate with %d channels", ch, g.NumChannels())
	}
	if _, capacity := g.BufferUsage(); pool.Size() < capacity {
		return fmt.Errorf("tcpnet: ConnectReceiver: the pool of %d buffers is smaller than the gate's credit capacity of %d buffers", pool.Size(), capacity)
	}
	n.mu.Lock()
	ended := n.ended[id.Attempt]
	n.mu.Unlock()
	if ended {
		return fmt.Errorf("%w: cannot connect channel %v", ErrAttemptClosed, id)
	}
	c, err := n.connTo(ctx, peer)
	if err != nil {
		return err
	}
	rc := &recvChannel{id: id, c: c, pool: pool, plock: n.acquirePool(pool)}
	c.mu.Lock()
	switch {
	case c.dead:
		err = fmt.Errorf("%w: %s: %w", ErrPeerLost, peer, c.err)
	case c.receivers[id] != nil:
		err = fmt.Errorf("tcpnet: channel %v from %s is already connected", id, peer)
	default:
		c.receivers[id] = rc
	}
	c.mu.Unlock()
	if err != nil {
		n.releasePools([]*recvChannel{rc})
		return err
	}
	in, credit := g.Connect(ch, rc)
	c.mu.Lock()
	rc.in = in
	rc.open, rc.openCredit = true, credit
	c.queueControlLocked(rc)
	c.mu.Unlock()
	c.signal()
	return nil
}

// AddCredit sends n more credits to the sender.
func (rc *recvChannel) AddCredit(n int) { rc.c.grant(rc, n) }

// NotifyNewBufferSize sends the consumer's announced buffer size to the
// sender, whose subpartition learns it if it is a BufferSizeListener.
func (rc *recvChannel) NotifyNewBufferSize(size int) {
	if size <= 0 {
		return
	}
	c := rc.c
	c.mu.Lock()
	if rc.dead {
		c.mu.Unlock()
		return
	}
	rc.size = size
	c.queueControlLocked(rc)
	c.mu.Unlock()
	c.signal()
}
