package tcpnet

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weirstream/weir/internal/network"
)

// conn is one connection to a peer: a reader and a writer goroutine and
// the channels multiplexed over it.
//
// Lock order: Node.mu, then conn.mu, then senderChannel.mu. None is held
// while calling into a subpartition or an input gate.
type conn struct {
	n      *Node
	nc     net.Conn
	peer   string // the peer's name: the address dialed, or its advertised one
	dialed bool
	br     *bufio.Reader // the reader's
	bw     *bufio.Writer // the writer's

	mu        sync.Mutex
	dead      bool
	err       error                        // why it died, the first cause
	ready     fifo[*senderChannel]         // senders to poll
	control   fifo[*recvChannel]           // receivers with control frames to send
	receivers map[ChannelID]*recvChannel   // this node's receivers on the connection
	senders   map[ChannelID]*senderChannel // this node's senders, once opened
	idle      bool                         // the writer waits with nothing buffered (tests)
	wake      chan struct{}                // the writer has work
	done      chan struct{}                // closed when the connection dies
	writerEnd chan struct{}                // closed when the writer returned

	// The writer's.
	wbuf  [128]byte // the head of a frame, or up to three control frames
	armed time.Time // when the write deadline was last set
	// The reader's.
	rbuf   [headerLen + eventFixedLen]byte
	rarmed time.Time // when the read deadline was last set

	// Bytes of whole frames the writer handed to bw and the reader
	// processed: the tests' measure of quiescence.
	sent, recvd atomic.Int64
}

func newConn(n *Node, nc net.Conn, peer string, dialed bool) *conn {
	return &conn{n: n, nc: nc, peer: peer, dialed: dialed,
		br:        bufio.NewReaderSize(nc, n.cfg.BufferSize),
		bw:        bufio.NewWriterSize(nc, n.cfg.BufferSize),
		receivers: map[ChannelID]*recvChannel{}, senders: map[ChannelID]*senderChannel{},
		wake: make(chan struct{}, 1), done: make(chan struct{}), writerEnd: make(chan struct{})}
}

func (c *conn) isDead() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dead
}

// close kills the connection with err, the first cause wins. The reader
// and writer return soon after.
func (c *conn) close(err error) {
	c.mu.Lock()
	if c.dead {
		c.mu.Unlock()
		return
	}
	c.dead, c.err = true, err
	c.mu.Unlock()
	close(c.done)
	c.nc.Close()
}

func (c *conn) signal() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// markReady queues sc to be polled by the writer.
func (c *conn) markReady(sc *senderChannel) {
	c.mu.Lock()
	if c.dead || sc.inReady {
		c.mu.Unlock()
		return
	}
	sc.inReady = true
	c.ready.push(sc)
	c.mu.Unlock()
	c.signal()
}

// queueControlLocked queues rc's control frames for the writer; the caller
// signals.
func (c *conn) queueControlLocked(rc *recvChannel) {
	if !c.dead && !rc.queued {
		rc.queued = true
		c.control.push(rc)
	}
}

// grant queues n credits for rc's sender.
func (c *conn) grant(rc *recvChannel, n int) {
	if n <= 0 {
		return
	}
	c.mu.Lock()
	if rc.dead {
		c.mu.Unlock()
		return
	}
	rc.credit += n
	c.queueControlLocked(rc)
	c.mu.Unlock()
	c.signal()
}

// receiver returns the receiver of id once connected to its gate, or nil.
func (c *conn) receiver(id ChannelID) *recvChannel {
	c.mu.Lock()
	defer c.mu.Unlock()
	if rc := c.receivers[id]; rc != nil && rc.in != nil {
		return rc
	}
	return nil
}

func (c *conn) sender(id ChannelID) *senderChannel {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.senders[id]
}

// control is what a receiver has to tell its sender, taken by the writer.
type controlFrames struct {
	id           ChannelID
	open         bool
	openCredit   int
	credit, size int
}

// next takes the writer's next piece of work: control frames first, then a
// sender. ok is false if there is none; the writer is then idle.
func (c *conn) next() (ctl controlFrames, sc *senderChannel, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead {
		return ctl, nil, false
	}
	for c.control.len() > 0 {
		rc := c.control.pop()
		rc.queued = false
		if rc.dead || !(rc.open || rc.opened) {
			// Nothing goes before the open (ConnectReceiver queues it
			// once connected): credit and size accumulate until then.
			continue
		}
		ctl = controlFrames{id: rc.id, open: rc.open, openCredit: rc.openCredit, credit: rc.credit, size: rc.size}
		rc.opened = true
		rc.open, rc.openCredit, rc.credit, rc.size = false, 0, 0, 0
		c.idle = false
		return ctl, nil, true
	}
	if c.ready.len() > 0 {
		sc = c.ready.pop()
		sc.inReady = false
		c.idle = false
		return ctl, sc, true
	}
	return ctl, nil, false
}

// writeLoop is the writer goroutine: it writes control frames and polls
// ready senders, and flushes when it has nothing more to do.
func (c *conn) writeLoop() {
	defer c.n.wg.Done()
	defer close(c.writerEnd)
	beat := time.NewTimer(c.n.cfg.HeartbeatInterval)
	defer beat.Stop()
	for {
		ctl, sc, ok := c.next()
		var err error
		switch {
		case ok && sc != nil:
			err = c.writeSender(sc)
		case ok:
			err = c.writeControl(&ctl)
		case c.bw.Buffered() > 0:
			c.armWrite()
			if err = c.bw.Flush(); err != nil {
				err = c.writeErr(err)
			}
		default:
			c.mu.Lock()
			c.idle = c.control.len() == 0 && c.ready.len() == 0
			c.mu.Unlock()
			beat.Reset(c.n.cfg.HeartbeatInterval)
			select {
			case <-c.wake:
			case <-c.done:
				return
			case <-beat.C:
				// Idle: tell the peer we are alive (flushed next round).
				if err = c.write(appendHeader(c.wbuf[:0], frameHeartbeat, 0)); err == nil {
					c.sent.Add(headerLen)
				}
			}
		}
		if err != nil {
			c.close(err)
			return
		}
	}
}

// armWrite pushes the write deadline WriteTimeout ahead, at most every
// eighth of it: a write that makes no progress for that long fails.
func (c *conn) armWrite() {
	now := time.Now()
	if to := c.n.cfg.WriteTimeout; now.Sub(c.armed) > to/8 {
		c.nc.SetWriteDeadline(now.Add(to))
		c.armed = now
	}
}

func (c *conn) writeErr(err error) error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("write made no progress for %v: %w", c.n.cfg.WriteTimeout, err)
	}
	return fmt.Errorf("write: %w", err)
}

// write hands a frame, or its head, to the write buffer.
func (c *conn) write(b []byte) error {
	c.armWrite()
	if _, err := c.bw.Write(b); err != nil {
		return c.writeErr(err)
	}
	return nil
}

func (c *conn) writeControl(ctl *controlFrames) error {
	b := c.wbuf[:0]
	if ctl.open {
		b = appendControl(b, frameOpen, ctl.id, ctl.openCredit)
	}
	if ctl.credit > 0 {
		b = appendControl(b, frameCredit, ctl.id, ctl.credit)
	}
	if ctl.size > 0 {
		b = appendControl(b, frameSize, ctl.id, ctl.size)
	}
	if len(b) == 0 {
		return nil
	}
	if err := c.write(b); err != nil {
		return err
	}
	c.sent.Add(int64(len(b)))
	return nil
}

// writeSender polls sc once with the credit it holds and writes what it
// got: a buffer, or a backlog announcement when it has no credit and the
// backlog changed (as network.LocalConnection). A sender that yielded a
// buffer goes back to the end of the queue: it may have more.
func (c *conn) writeSender(sc *senderChannel) error {
	if sc.isClosed() {
		return nil
	}
	b, backlog := sc.sub.PollNext(int(sc.credit.Load()))
	if b == nil {
		if backlog == sc.known {
			return nil
		}
		sc.known = backlog
		f := appendControl(c.wbuf[:0], frameBacklog, sc.id, backlog)
		if err := c.write(f); err != nil {
			return err
		}
		c.sent.Add(int64(len(f)))
		return nil
	}
	sc.known = backlog
	var err error
	if b.Kind == network.KindEvent {
		err = c.writeEvent(sc.id, &b.Event, backlog)
	} else {
		sc.credit.Add(-1)
		err = c.writeData(sc.id, b, backlog)
		b.Recycle()
	}
	if err != nil {
		return err
	}
	c.markReady(sc)
	return nil
}

func (c *conn) writeData(id ChannelID, b *network.Buffer, backlog int) error {
	h := appendDataHeader(c.wbuf[:0], id, b.Kind, backlog, len(b.Data))
	if err := c.write(h); err != nil {
		return err
	}
	if err := c.write(b.Data); err != nil {
		return err
	}
	c.sent.Add(int64(len(h) + len(b.Data)))
	return nil
}

func (c *conn) writeEvent(id ChannelID, ev *network.Event, backlog int) error {
	h, err := appendEventHeader(c.wbuf[:0], id, ev, backlog)
	if err != nil {
		return fmt.Errorf("channel %v: %w", id, err)
	}
	if err := c.write(h); err != nil {
		return err
	}
	c.armWrite()
	if _, err := c.bw.WriteString(ev.Checkpoint.Target); err != nil {
		return c.writeErr(err)
	}
	c.sent.Add(int64(len(h) + len(ev.Checkpoint.Target)))
	return nil
}

// readLoop is the reader goroutine: it dispatches frames until the
// connection dies, then tears it down.
func (c *conn) readLoop() {
	defer c.n.wg.Done()
	err := c.read()
	if errors.Is(err, io.EOF) {
		err = errors.New("connection closed by the peer")
	}
	c.close(err)
	<-c.writerEnd
	c.n.lost(c)
}

func (c *conn) protocolErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrProtocol, fmt.Sprintf(format, args...))
}

// armRead pushes the read deadline HeartbeatTimeout ahead, at most every
// eighth of it: a peer that sends nothing for that long, not even a
// heartbeat, is taken for dead.
func (c *conn) armRead() {
	now := time.Now()
	if to := c.n.cfg.HeartbeatTimeout; now.Sub(c.rarmed) > to/8 {
		c.nc.SetReadDeadline(now.Add(to))
		c.rarmed = now
	}
}

func (c *conn) read() error {
	for {
		h := c.rbuf[:headerLen]
		c.armRead()
		if _, err := io.ReadFull(c.br, h); err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				return fmt.Errorf("received nothing for %v, not even a heartbeat: %w", c.n.cfg.HeartbeatTimeout, err)
			}
			return err
		}
		n := int(binary.BigEndian.Uint32(h)) - 1
		t := frameType(h[4])
		if n < 0 || n > maxFrameLen {
			return c.protocolErr("%v frame of %d bytes", t, n+1)
		}
		var err error
		switch t {
		case frameOpen, frameCredit, frameSize, frameBacklog:
			if n != controlLen {
				return c.protocolErr("%v frame of %d bytes, want %d", t, n, controlLen)
			}
			body := c.rbuf[:controlLen]
			if _, err := io.ReadFull(c.br, body); err != nil {
				return err
			}
			err = c.onControl(t, parseChannel(body), int(binary.BigEndian.Uint32(body[channelLen:])))
		case frameData:
			if n < dataFixedLen {
				return c.protocolErr("data frame of %d bytes", n)
			}
			body := c.rbuf[:dataFixedLen]
			if _, err := io.ReadFull(c.br, body); err != nil {
				return err
			}
			err = c.onData(parseChannel(body), network.Kind(body[channelLen]),
				int(binary.BigEndian.Uint32(body[channelLen+1:])), n-dataFixedLen)
		case frameEvent:
			if n < eventFixedLen {
				return c.protocolErr("event frame of %d bytes", n)
			}
			err = c.onEvent(n)
		case frameHeartbeat:
			if n != 0 {
				return c.protocolErr("heartbeat frame of %d bytes", n)
			}
		default:
			return c.protocolErr("unexpected %v frame", t)
		}
		if err != nil {
			return err
		}
		c.recvd.Add(int64(headerLen + n))
	}
}

func (c *conn) onControl(t frameType, id ChannelID, v int) error {
	switch t {
	case frameOpen:
		return c.n.onOpen(c, id, v)
	case frameCredit:
		if sc := c.sender(id); sc != nil {
			sc.credit.Add(int64(v))
			c.markReady(sc)
		} else {
			c.n.onUnbound(c, id, v, 0)
		}
	case frameSize:
		if sc := c.sender(id); sc != nil {
			sc.notifySize(v)
		} else {
			c.n.onUnbound(c, id, 0, v)
		}
	case frameBacklog:
		if rc := c.receiver(id); rc != nil {
			c.grant(rc, rc.in.OnBacklog(v))
		}
	}
	return nil
}

// onData reads a data payload of n bytes into a buffer of the receiver's
// pool and delivers it.
func (c *conn) onData(id ChannelID, kind network.Kind, backlog, n int) error {
	if kind == network.KindEvent || kind > network.KindFragmentEnd {
		return c.protocolErr("channel %v: data frame of kind %d", id, kind)
	}
	rc := c.receiver(id)
	if rc == nil {
		_, err := c.br.Discard(n)
		return err
	}
	if seg := rc.pool.SegmentSize(); n > seg {
		return c.protocolErr("channel %v: data buffer of %d bytes exceeds the receiver's segment size %d", id, n, seg)
	}
	rc.plock.mu.Lock()
	b := rc.pool.TryRequest()
	rc.plock.mu.Unlock()
	if b == nil {
		return c.protocolErr("channel %v: the receiver's pool of %d buffers is exhausted: the sender exceeded its credit or the pool is shared beyond its size",
			id, rc.pool.Size())
	}
	b.Data = b.Data[:n]
	if _, err := io.ReadFull(c.br, b.Data); err != nil {
		b.Recycle()
		return err
	}
	b.Kind = kind
	credit, err := rc.in.OnBuffer(b, backlog)
	if err != nil {
		b.Recycle()
		return c.protocolErr("channel %v: %v", id, err)
	}
	c.grant(rc, credit)
	return nil
}

// onEvent reads the rest of an event frame of n bytes and delivers it.
func (c *conn) onEvent(n int) error {
	body := c.rbuf[:eventFixedLen]
	if _, err := io.ReadFull(c.br, body); err != nil {
		return err
	}
	id := parseChannel(body)
	ev, backlog, targetLen, err := parseEventFixed(body[channelLen:])
	if err != nil {
		return c.protocolErr("channel %v: %v", id, err)
	}
	if targetLen != n-eventFixedLen {
		return c.protocolErr("channel %v: event frame of %d bytes with a target of %d", id, n, targetLen)
	}
	rc := c.receiver(id)
	if rc == nil {
		_, err := c.br.Discard(targetLen)
		return err
	}
	if targetLen > 0 {
		target := make([]byte, targetLen)
		if _, err := io.ReadFull(c.br, target); err != nil {
			return err
		}
		ev.Checkpoint.Target = string(target)
	}
	credit, err := rc.in.OnBuffer(network.NewEventBuffer(ev), backlog)
	if err != nil {
		return c.protocolErr("channel %v: %v", id, err)
	}
	c.grant(rc, credit)
	return nil
}

// fifo is a queue with amortized O(1) push and pop.
type fifo[T any] struct {
	items []T
	head  int
}

func (q *fifo[T]) len() int { return len(q.items) - q.head }

func (q *fifo[T]) push(v T) {
	if q.head > 0 && q.head == len(q.items) {
		q.items, q.head = q.items[:0], 0
	}
	q.items = append(q.items, v)
}

func (q *fifo[T]) pop() T {
	var zero T
	v := q.items[q.head]
	q.items[q.head] = zero
	q.head++
	if q.head == len(q.items) {
		q.items, q.head = q.items[:0], 0
	}
	return v
}
