package cluster

import (
	"context"
	"fmt"
	"sync"

	"github.com/weirstream/weir/internal/network"
)

// Hub is an in-process data plane: task managers of one process (tests)
// exchange buffers through it without a network, each channel a
// network.LocalConnection. Use Hub.DataPlane as
// TaskManagerConfig.NewDataPlane.
type Hub struct {
	mu    sync.Mutex
	n     int
	chans map[ChannelID]*hubChannel
}

type hubChannel struct {
	sub  network.Subpartition
	gate *network.InputGate
	ch   int
}

// NewHub returns an empty hub.
func NewHub() *Hub { return &Hub{chans: map[ChannelID]*hubChannel{}} }

// DataPlane returns a data plane of the hub for one task manager.
func (h *Hub) DataPlane(context.Context, TaskManagerConfig, func(string, error)) (DataPlane, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.n++
	return &hubPlane{h: h, addr: fmt.Sprintf("hub-%d", h.n)}, nil
}

type hubPlane struct {
	h    *Hub
	addr string
}

func (p *hubPlane) Addr() string { return p.addr }

func (p *hubPlane) ConnectSender(_ string, id ChannelID, sub network.Subpartition) error {
	p.h.mu.Lock()
	defer p.h.mu.Unlock()
	c := p.h.chans[id]
	if c == nil {
		p.h.chans[id] = &hubChannel{sub: sub}
		return nil
	}
	if c.sub != nil {
		return fmt.Errorf("channel %v has a sender already", id)
	}
	c.sub = sub
	network.ConnectLocal(sub, c.gate, c.ch)
	return nil
}

func (p *hubPlane) ConnectReceiver(_ string, id ChannelID, g *network.InputGate, ch int, _ *network.Pool) error {
	p.h.mu.Lock()
	defer p.h.mu.Unlock()
	c := p.h.chans[id]
	if c == nil {
		p.h.chans[id] = &hubChannel{gate: g, ch: ch}
		return nil
	}
	if c.gate != nil {
		return fmt.Errorf("channel %v has a receiver already", id)
	}
	c.gate, c.ch = g, ch
	network.ConnectLocal(c.sub, g, ch)
	return nil
}

func (p *hubPlane) CloseAttempt(attempt uint64) {
	p.h.mu.Lock()
	defer p.h.mu.Unlock()
	for id := range p.h.chans {
		if id.Attempt == attempt {
			delete(p.h.chans, id)
		}
	}
}

func (p *hubPlane) Close() error { return nil }
