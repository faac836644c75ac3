// Package clustertest runs the jobs of in-process tests over the cluster's
// TCP data plane: every subtask runs in the test's process, but every
// channel between two subtasks goes through a TCP connection between two
// data-plane nodes on 127.0.0.1 (internal/network/tcpnet), with its credit,
// backlog and priority events on the wire. A test of the exchange (an
// unaligned checkpoint's barrier overtaking in-flight data, a restore of
// channel state) thus runs on both transports with the same job.
package clustertest

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/weirstream/weir/internal/cluster"
	"github.com/weirstream/weir/internal/graph"
	"github.com/weirstream/weir/internal/network"
	"github.com/weirstream/weir/internal/network/tcpnet"
	"github.com/weirstream/weir/internal/runner"
	"github.com/weirstream/weir/internal/task"
)

// Loopback deploys the attempts of a job in this process over two
// data-plane nodes: the sender of a channel is on one node and its
// receiver on the other, alternating by channel so that both connections
// carry data.
type Loopback struct {
	nodes    [2]*tcpnet.Node
	attempts atomic.Uint64
	channels atomic.Int64
}

// NewTCP starts the two nodes on 127.0.0.1; they close when the test ends.
func NewTCP(t testing.TB) *Loopback {
	t.Helper()
	var nodes [2]*tcpnet.Node
	for i := range nodes {
		n, err := tcpnet.Listen(context.Background(), "127.0.0.1:0", tcpnet.Config{})
		if err != nil {
			t.Fatalf("data-plane node: %v", err)
		}
		t.Cleanup(func() { _ = n.Close() })
		nodes[i] = n
	}
	return &Loopback{nodes: nodes}
}

// Context returns ctx with l as its deployer (cluster.WithDeployer):
// Environment.Execute with it runs every attempt through l.
func (l *Loopback) Context(ctx context.Context) context.Context {
	return cluster.WithDeployer(ctx, l)
}

// Channels is the number of channels connected over TCP so far (both ends
// of a channel count once), over all attempts.
func (l *Loopback) Channels() int64 { return l.channels.Load() }

// Deploy deploys an attempt in this process, every channel over TCP.
func (l *Loopback) Deploy(ctx context.Context, jg *graph.JobGraph, opts task.Options) (runner.Deployment, error) {
	if opts.Placement != nil {
		return nil, errors.New("clustertest: the options place the job already")
	}
	ex := &exchange{l: l, attempt: l.attempts.Add(1)}
	opts.Placement = &task.Placement{Remote: ex, Loopback: true}
	j, err := task.Deploy(ctx, jg, opts)
	if err != nil {
		l.closeAttempt(ex.attempt)
		return nil, err
	}
	return &deployment{Job: j, done: func() { l.closeAttempt(ex.attempt) }}, nil
}

func (l *Loopback) closeAttempt(a uint64) {
	for _, n := range l.nodes {
		n.CloseAttempt(a)
	}
}

// deployment forgets the attempt's channels once every task of it ended.
type deployment struct {
	*task.Job
	done func()
}

func (d *deployment) Run() error {
	defer d.done()
	return d.Job.Run()
}

// exchange is one attempt's task.RemoteExchange.
type exchange struct {
	l       *Loopback
	attempt uint64
}

// ends returns the nodes of ref's sender and receiver.
func (e *exchange) ends(ref task.ChannelRef) (sender, receiver *tcpnet.Node) {
	i := (ref.From + ref.To + ref.ToVertex) % 2
	return e.l.nodes[i], e.l.nodes[1-i]
}

func (e *exchange) id(ref task.ChannelRef) tcpnet.ChannelID {
	return tcpnet.ChannelID{Attempt: e.attempt, Edge: uint32(ref.ToVertex<<8 | ref.Input), From: uint32(ref.From), To: uint32(ref.To)}
}

func (e *exchange) ConnectSender(ref task.ChannelRef, sub network.Subpartition) error {
	s, r := e.ends(ref)
	if err := s.ConnectSender(r.Addr(), e.id(ref), sub); err != nil {
		return fmt.Errorf("clustertest: sender of %v: %w", ref, err)
	}
	return nil
}

func (e *exchange) ConnectReceiver(ref task.ChannelRef, g *network.InputGate, ch int, pool *network.Pool) error {
	s, r := e.ends(ref)
	if err := r.ConnectReceiver(context.Background(), s.Addr(), e.id(ref), g, ch, pool); err != nil {
		return fmt.Errorf("clustertest: receiver of %v: %w", ref, err)
	}
	e.l.channels.Add(1)
	return nil
}
