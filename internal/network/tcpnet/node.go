package tcpnet

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/weirstream/weir/internal/network"
)

// Errors of the package; match them with errors.Is.
var (
	// ErrClosed is returned by the methods of a closed Node.
	ErrClosed = errors.New("tcpnet: node closed")
	// ErrTokenMismatch is returned when a peer holds another cluster
	// token (Config.Token).
	ErrTokenMismatch = errors.New("tcpnet: cluster token does not match")
	// ErrVersion is returned when a peer speaks another protocol version.
	ErrVersion = errors.New("tcpnet: protocol version mismatch")
	// ErrPeerLost wraps the error a broken connection was lost with
	// (Config.OnPeerLost) and is returned when a channel is connected
	// over a connection that broke meanwhile.
	ErrPeerLost = errors.New("tcpnet: connection to peer lost")
	// ErrProtocol wraps a violation of the protocol by a peer: a frame
	// that does not parse, a data buffer without credit.
	ErrProtocol = errors.New("tcpnet: protocol error")
	// ErrAttemptClosed is returned when a channel of an attempt that
	// CloseAttempt closed is connected.
	ErrAttemptClosed = errors.New("tcpnet: job attempt closed")
)

// Node is one process's endpoint of the data plane: it accepts the
// connections of peers whose receivers consume from its senders and dials
// the peers its receivers consume from (see the package doc).
//
// Its methods may be called from any goroutine. Shutdown order (Close): no
// new connections or channels; the listener, every connection and every
// dial and handshake in progress are closed; the node waits for its
// goroutines to end.
type Node struct {
	cfg    Config
	ln     net.Listener
	addr   string
	ctx    context.Context // ends with Close: aborts dials and handshakes
	cancel context.CancelFunc
	wg     sync.WaitGroup // every goroutine of the node

	mu      sync.Mutex
	closed  bool
	conns   map[*conn]struct{}
	out     map[string]*outPeer // dialed connections by peer
	senders map[senderKey]*senderChannel
	pending map[senderKey]pendingOpen // opens that came before their ConnectSender
	ended   map[uint64]bool           // attempts closed by CloseAttempt
	pools   map[*network.Pool]*poolLock
}

// senderKey names a sender: the peer of its receiver and the channel.
type senderKey struct {
	peer string
	id   ChannelID
}

// pendingOpen is an open frame whose sender is not connected yet, with the
// credit and buffer size that came after it.
type pendingOpen struct {
	c      *conn
	credit int
	size   int
}

// outPeer is the connection this node dialed to a peer (Node.mu); mu
// serializes dials.
type outPeer struct {
	mu sync.Mutex
	c  *conn
}

// poolLock serializes the requests of every reader that fills one
// receiver pool: network.Pool's request methods are not safe for
// concurrent use, and the channels of a gate share its pool across peers.
type poolLock struct {
	mu   sync.Mutex
	refs int
}

// Listen starts a node listening on addr (host:port; port 0 picks a free
// one). ctx bounds the listen call only; the node lives until Close.
func Listen(ctx context.Context, addr string, cfg Config) (*Node, error) {
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("tcpnet: listen: %w", err)
	}
	n := &Node{cfg: cfg, ln: ln, addr: cfg.AdvertiseAddr,
		conns: map[*conn]struct{}{}, out: map[string]*outPeer{},
		senders: map[senderKey]*senderChannel{}, pending: map[senderKey]pendingOpen{},
		ended: map[uint64]bool{}, pools: map[*network.Pool]*poolLock{}}
	switch _, port, _ := net.SplitHostPort(ln.Addr().String()); {
	case n.addr == "":
		n.addr = ln.Addr().String()
	case !hasPort(n.addr):
		n.addr = net.JoinHostPort(n.addr, port)
	}
	if host, _, _ := net.SplitHostPort(ln.Addr().String()); cfg.Token == "" && cfg.ServerTLS == nil && !isLoopback(host) {
		cfg.Logger.Warn("tcpnet: the data plane accepts connections from other machines without a token or TLS: anyone who reaches it can read and inject job data",
			"addr", ln.Addr().String())
	}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	n.wg.Add(1)
	go n.acceptLoop()
	return n, nil
}

// hasPort reports whether addr is host:port, not a bare host.
func hasPort(addr string) bool {
	_, _, err := net.SplitHostPort(addr)
	return err == nil
}

func isLoopback(host string) bool {
	ip := net.ParseIP(host)
	return host == "localhost" || (ip != nil && ip.IsLoopback())
}

// Addr is the node's name: the address peers dial (Config.AdvertiseAddr,
// or the listener's address).
func (n *Node) Addr() string { return n.addr }

// Close closes every connection and waits for the node's goroutines.
// Channels fail without OnPeerLost. It is idempotent.
func (n *Node) Close() error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	conns := make([]*conn, 0, len(n.conns))
	for c := range n.conns {
		conns = append(conns, c)
	}
	n.mu.Unlock()
	n.cancel()
	err := n.ln.Close()
	for _, c := range conns {
		c.close(ErrClosed)
	}
	n.wg.Wait()
	n.mu.Lock()
	for key, sc := range n.senders {
		sc.fail()
		delete(n.senders, key)
	}
	clear(n.pending)
	n.mu.Unlock()
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("tcpnet: close listener: %w", err)
	}
	return nil
}

// CloseAttempt forgets every channel of attempt, on both roles: senders
// stop polling their subpartitions (the buffers left there stay the
// producer's), receivers drop the frames that still come (the buffers
// already delivered are the gate's). The attempt cannot be connected again.
func (n *Node) CloseAttempt(attempt uint64) {
	n.mu.Lock()
	n.ended[attempt] = true
	var scs []*senderChannel
	for key, sc := range n.senders {
		if key.id.Attempt == attempt {
			scs = append(scs, sc)
			delete(n.senders, key)
		}
	}
	for key := range n.pending {
		if key.id.Attempt == attempt {
			delete(n.pending, key)
		}
	}
	conns := make([]*conn, 0, len(n.conns))
	for c := range n.conns {
		conns = append(conns, c)
	}
	n.mu.Unlock()
	for _, sc := range scs {
		sc.fail()
	}
	var rcs []*recvChannel
	for _, c := range conns {
		c.mu.Lock()
		for id := range c.senders {
			if id.Attempt == attempt {
				delete(c.senders, id)
			}
		}
		for id, rc := range c.receivers {
			if id.Attempt == attempt {
				rc.dead = true
				delete(c.receivers, id)
				rcs = append(rcs, rc)
			}
		}
		c.mu.Unlock()
	}
	n.releasePools(rcs)
}

// acquirePool returns the lock of pool, counting a reference.
func (n *Node) acquirePool(pool *network.Pool) *poolLock {
	n.mu.Lock()
	defer n.mu.Unlock()
	pl := n.pools[pool]
	if pl == nil {
		pl = &poolLock{}
		n.pools[pool] = pl
	}
	pl.refs++
	return pl
}

// releasePools drops the pool references of rcs.
func (n *Node) releasePools(rcs []*recvChannel) {
	if len(rcs) == 0 {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, rc := range rcs {
		if pl := n.pools[rc.pool]; pl != nil {
			if pl.refs--; pl.refs == 0 {
				delete(n.pools, rc.pool)
			}
		}
	}
}

func (n *Node) acceptLoop() {
	defer n.wg.Done()
	backoff := 5 * time.Millisecond
	for {
		nc, err := n.ln.Accept()
		if err != nil {
			if n.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors and the like: wait and retry.
			n.cfg.Logger.Warn("tcpnet: accept", "err", err)
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-n.ctx.Done():
				t.Stop()
				return
			}
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 5 * time.Millisecond
		n.mu.Lock()
		if n.closed {
			n.mu.Unlock()
			nc.Close()
			return
		}
		n.wg.Add(1)
		n.mu.Unlock()
		go n.serveAccepted(nc)
	}
}

// serveAccepted runs the handshake of an accepted connection and starts
// serving it.
func (n *Node) serveAccepted(nc net.Conn) {
	defer n.wg.Done()
	remote := nc.RemoteAddr().String()
	if n.cfg.ServerTLS != nil {
		nc = tls.Server(nc, n.cfg.ServerTLS)
	}
	c := newConn(n, nc, "", false)
	nc.SetDeadline(time.Now().Add(n.cfg.HandshakeTimeout))
	stop := context.AfterFunc(n.ctx, func() { nc.SetDeadline(time.Unix(1, 0)) })
	var err error
	if tc, ok := nc.(*tls.Conn); ok {
		err = tc.HandshakeContext(n.ctx)
		if err != nil {
			err = fmt.Errorf("TLS handshake: %w", err)
		}
	}
	if err == nil {
		c.peer, err = n.handshakeAccept(c)
	}
	if !stop() {
		err = ErrClosed
	}
	if err == nil {
		err = nc.SetDeadline(time.Time{})
	}
	if err != nil {
		nc.Close()
		if !errors.Is(err, ErrClosed) {
			n.cfg.Logger.Warn("tcpnet: refused a data-plane connection", "remote", remote, "err", err)
		}
		return
	}
	if !n.start(c) {
		nc.Close()
	}
}

// connTo returns the connection this node dialed to peer, dialing it if
// there is none or it broke.
func (n *Node) connTo(ctx context.Context, peer string) (*conn, error) {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil, ErrClosed
	}
	p := n.out[peer]
	if p == nil {
		p = &outPeer{}
		n.out[peer] = p
	}
	n.mu.Unlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	n.mu.Lock()
	c := p.c
	n.mu.Unlock()
	if c != nil && !c.isDead() {
		return c, nil
	}
	c, err := n.dial(ctx, peer)
	if err != nil {
		return nil, err
	}
	n.mu.Lock()
	p.c = c
	n.mu.Unlock()
	return c, nil
}

// dial connects to peer, runs the handshake and starts serving the
// connection.
func (n *Node) dial(ctx context.Context, peer string) (*conn, error) {
	dctx, cancel := context.WithTimeout(ctx, n.cfg.DialTimeout)
	defer cancel()
	stopNode := context.AfterFunc(n.ctx, cancel)
	defer stopNode()
	var d net.Dialer
	nc, err := d.DialContext(dctx, "tcp", peer)
	if err != nil {
		return nil, n.dialErr(peer, err)
	}
	if n.cfg.ClientTLS != nil {
		cfg := n.cfg.ClientTLS
		if cfg.ServerName == "" {
			cfg = cfg.Clone()
			cfg.ServerName, _, _ = net.SplitHostPort(peer)
		}
		nc = tls.Client(nc, cfg)
	}
	if dl, ok := dctx.Deadline(); ok {
		nc.SetDeadline(dl)
	}
	stop := context.AfterFunc(dctx, func() { nc.SetDeadline(time.Unix(1, 0)) })
	c := newConn(n, nc, peer, true)
	if tc, ok := nc.(*tls.Conn); ok {
		if err = tc.HandshakeContext(dctx); err != nil {
			err = fmt.Errorf("TLS handshake: %w", err)
		}
	}
	if err == nil {
		err = n.handshakeDial(c)
	}
	if !stop() && err == nil {
		err = dctx.Err()
	}
	if err == nil {
		err = nc.SetDeadline(time.Time{})
	}
	if err != nil {
		nc.Close()
		switch {
		case n.ctx.Err() != nil:
			return nil, ErrClosed
		case errors.Is(err, ErrTokenMismatch), errors.Is(err, ErrVersion):
			return nil, err // they name the peer
		}
		return nil, fmt.Errorf("tcpnet: handshake with %s: %w", peer, err)
	}
	if !n.start(c) {
		nc.Close()
		return nil, ErrClosed
	}
	return c, nil
}

// dialErr says why a dial failed, naming Close and the timeout.
func (n *Node) dialErr(peer string, err error) error {
	if n.ctx.Err() != nil {
		return ErrClosed
	}
	return fmt.Errorf("tcpnet: dial %s: %w", peer, err)
}

// start registers c and starts its reader and writer, unless the node is
// closed.
func (n *Node) start(c *conn) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return false
	}
	n.conns[c] = struct{}{}
	n.wg.Add(2)
	go c.writeLoop()
	go c.readLoop()
	n.cfg.Logger.Debug("tcpnet: connected", "peer", c.peer, "dialed", c.dialed)
	return true
}

// lost tears a broken connection down: its channels fail, and OnPeerLost
// is told unless the node is closing. It runs on the connection's reader
// goroutine once its writer ended.
func (n *Node) lost(c *conn) {
	n.mu.Lock()
	delete(n.conns, c)
	if p := n.out[c.peer]; p != nil && p.c == c {
		p.c = nil // let its buffers go
	}
	closing := n.closed
	c.mu.Lock()
	scs := make([]*senderChannel, 0, len(c.senders))
	for id, sc := range c.senders {
		scs = append(scs, sc)
		if key := (senderKey{c.peer, id}); n.senders[key] == sc {
			delete(n.senders, key)
		}
	}
	clear(c.senders)
	rcs := make([]*recvChannel, 0, len(c.receivers))
	for _, rc := range c.receivers {
		rc.dead = true
		rcs = append(rcs, rc)
	}
	clear(c.receivers)
	err := c.err
	c.mu.Unlock()
	for key, po := range n.pending {
		if po.c == c {
			delete(n.pending, key)
		}
	}
	n.mu.Unlock()
	for _, sc := range scs {
		sc.fail()
	}
	n.releasePools(rcs)
	if closing || errors.Is(err, ErrClosed) {
		return
	}
	err = fmt.Errorf("%w: %s: %w", ErrPeerLost, c.peer, err)
	n.cfg.Logger.Warn("tcpnet: data-plane connection lost", "peer", c.peer, "senders", len(scs), "receivers", len(rcs), "err", err)
	if n.cfg.OnPeerLost != nil {
		n.cfg.OnPeerLost(c.peer, err)
	}
}
