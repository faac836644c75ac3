package etcdtest

import (
	"io"
	"net"
	"sync"
)

// proxy forwards TCP connections from its own loopback listener to target,
// and cuts them all at once on close.
type proxy struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool

	wg sync.WaitGroup // serve and every pipe goroutine
}

func startProxy(target string) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.wg.Add(1)
		go p.pipe(c)
	}
}

// track registers c to be cut by close; it reports false (and closes c) if
// the proxy is already closed.
func (p *proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *proxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		delete(p.conns, c)
		c.Close()
	}
}

func (p *proxy) pipe(down net.Conn) {
	defer p.wg.Done()
	if !p.track(down) {
		return
	}
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		p.untrack(down)
		return
	}
	if !p.track(up) {
		p.untrack(down)
		return
	}
	// Either direction ending ends the connection: close both, which ends
	// the other copy too.
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		io.Copy(dst, src)
		p.untrack(down, up)
		done <- struct{}{}
	}
	go cp(up, down)
	cp(down, up)
	<-done
}

// close stops accepting, cuts every connection and waits for the
// goroutines.
func (p *proxy) close() {
	p.ln.Close()
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
