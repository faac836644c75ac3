package tcpnet

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/network"
)

// step is one thing a scripted producer sends on a channel.
type step struct {
	kind  network.Kind // data, fragment, fragment end; KindEvent for events
	len   int          // payload bytes of a data buffer
	ev    network.Event
	prio  bool
	count uint32 // data buffers sent before this step
}

// randomEvent returns an event with every field drawn at random.
func randomEvent(rng *rand.Rand, priority bool) network.Event {
	kinds := []network.EventKind{network.EventWatermark, network.EventBarrier, network.EventCancelBarrier,
		network.EventWatermarkStatus, network.EventEndOfData}
	ev := network.Event{Kind: kinds[rng.IntN(len(kinds))], ID: rng.Int64(), Timestamp: rng.Int64() - rng.Int64(),
		Idle: rng.IntN(2) == 0,
		Checkpoint: checkpoint.Options{
			Kind: checkpoint.Kind(rng.IntN(2)), Format: checkpoint.Format(rng.IntN(3)),
			LastCompleted: rng.Int64(), Unaligned: rng.IntN(2) == 0,
			AlignedTimeout: time.Duration(rng.Int64N(int64(time.Hour))),
			Synchronous:    rng.IntN(2) == 0, Drain: rng.IntN(2) == 0,
		}}
	if rng.IntN(3) == 0 {
		ev.Checkpoint.Target = fmt.Sprintf("s3://bucket/savepoints/sp-%d", rng.IntN(1000))
	}
	if priority {
		ev.Kind, ev.Priority = network.EventBarrier, true
	} else if ev.Kind == network.EventBarrier {
		// A timeoutable barrier makes the gate add an announcement: keep
		// the scripted order simple.
		ev.Checkpoint.AlignedTimeout = 0
	}
	return ev
}

// script draws what a producer sends on one channel.
func script(rng *rand.Rand, data, segment int) []step {
	var steps []step
	var count uint32
	for int(count) < data {
		switch r := rng.IntN(25); {
		case r == 0:
			steps = append(steps, step{kind: network.KindEvent, ev: randomEvent(rng, false), count: count})
		case r == 1:
			steps = append(steps, step{kind: network.KindEvent, ev: randomEvent(rng, true), prio: true, count: count})
		default:
			kind := network.KindData
			if r < 5 {
				kind = []network.Kind{network.KindFragment, network.KindFragmentEnd}[r%2]
			}
			steps = append(steps, step{kind: kind, len: 4 + rng.IntN(segment-3), count: count})
			count++
		}
	}
	steps = append(steps, step{kind: network.KindEvent, ev: network.Event{Kind: network.EventEndOfPartition}, count: count})
	return steps
}

// payload is data buffer seq's bytes on a channel: its sequence number,
// then a pattern.
func payload(dst []byte, seq uint32, n int) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, seq)
	for i := 4; i < n; i++ {
		dst = append(dst, byte(int(seq)+i))
	}
	return dst
}

// produce plays steps into sub with buffers of a small pool.
func produce(ctx context.Context, sub network.Subpartition, pool *network.Pool, steps []step) error {
	var seq uint32
	for _, s := range steps {
		switch {
		case s.prio:
			sub.SendPriority(network.NewEventBuffer(s.ev), nil)
		case s.kind == network.KindEvent:
			sub.Send(network.NewEventBuffer(s.ev))
		default:
			b, err := pool.Request(ctx)
			if err != nil {
				return err
			}
			b.Kind = s.kind
			b.Data = payload(b.Data, seq, s.len)
			seq++
			sub.Send(b)
		}
	}
	return nil
}

// consume polls g until every channel ended and checks what each delivered
// against its script: data in order with their kind and bytes, events in
// their place and equal to what was sent, priority events before every
// buffer sent after them; the credit accounting after every poll.
func consume(t *testing.T, rng *rand.Rand, g *network.InputGate, scripts [][]step) error {
	channels := len(scripts)
	type expect struct {
		data   []step // data steps in order
		events []step // in-order events
		prios  []step // priority events
	}
	exp := make([]expect, channels)
	for ch, steps := range scripts {
		for _, s := range steps {
			switch {
			case s.prio:
				exp[ch].prios = append(exp[ch].prios, s)
			case s.kind == network.KindEvent:
				exp[ch].events = append(exp[ch].events, s)
			default:
				exp[ch].data = append(exp[ch].data, s)
			}
		}
	}
	next := make([]int, channels)   // data received per channel
	nextEv := make([]int, channels) // events received
	nextPr := make([]int, channels) // priority events received
	var held []struct {
		ch int
		b  *network.Buffer
	}
	var want []byte
	ended := 0
	deadline := time.Now().Add(20 * time.Second)
	for ended < channels {
		ch, b, ok := g.Poll()
		if !ok {
			// Nothing more can come while the consumer holds the credit.
			for _, h := range held {
				g.Release(h.ch, h.b)
			}
			held = held[:0]
			if time.Now().After(deadline) {
				return fmt.Errorf("timed out: %d of %d channels ended, received %v data %v events", ended, channels, next, nextEv)
			}
			select {
			case <-g.Notify():
			case <-time.After(10 * time.Millisecond):
			}
			continue
		}
		if err := g.CheckCredit(); err != nil {
			return fmt.Errorf("credit accounting: %v", err)
		}
		e := &exp[ch]
		switch {
		case b.IsData():
			if next[ch] >= len(e.data) {
				return fmt.Errorf("ch%d: data buffer beyond the %d sent", ch, len(e.data))
			}
			s := e.data[next[ch]]
			want = payload(want[:0], uint32(next[ch]), s.len)
			if b.Kind != s.kind || !bytes.Equal(b.Data, want) {
				return fmt.Errorf("ch%d: data buffer %d: got kind %d %d bytes (seq %d), want kind %d %d bytes",
					ch, next[ch], b.Kind, len(b.Data), binary.LittleEndian.Uint32(b.Data), s.kind, s.len)
			}
			next[ch]++
			held = append(held, struct {
				ch int
				b  *network.Buffer
			}{ch, b})
			// Release at random, sometimes holding buffers back.
			for len(held) > 0 && rng.IntN(3) != 0 {
				i := rng.IntN(len(held))
				g.Release(held[i].ch, held[i].b)
				held = append(held[:i], held[i+1:]...)
			}
		case b.Event.Priority:
			if nextPr[ch] >= len(e.prios) {
				return fmt.Errorf("ch%d: unexpected priority event %+v", ch, b.Event)
			}
			s := e.prios[nextPr[ch]]
			if b.Event != s.ev {
				return fmt.Errorf("ch%d: priority event %d: got %+v, want %+v", ch, nextPr[ch], b.Event, s.ev)
			}
			if next[ch] > int(s.count) {
				return fmt.Errorf("ch%d: priority event %d sent after %d data buffers arrived after %d", ch, nextPr[ch], s.count, next[ch])
			}
			nextPr[ch]++
		default:
			if nextEv[ch] >= len(e.events) {
				return fmt.Errorf("ch%d: unexpected event %+v", ch, b.Event)
			}
			s := e.events[nextEv[ch]]
			if b.Event != s.ev || next[ch] != int(s.count) {
				return fmt.Errorf("ch%d: event %d: got %+v after %d data buffers, want %+v after %d",
					ch, nextEv[ch], b.Event, next[ch], s.ev, s.count)
			}
			nextEv[ch]++
			if b.Event.Kind == network.EventEndOfPartition {
				if nextPr[ch] != len(e.prios) {
					return fmt.Errorf("ch%d: ended with %d of %d priority events", ch, nextPr[ch], len(e.prios))
				}
				ended++
			}
		}
	}
	for _, h := range held {
		g.Release(h.ch, h.b)
	}
	return g.CheckCredit()
}

// TestExchangeOrdered runs the exchange contract over loopback in both
// directions at once: each node has a gate whose channels' senders are on
// the other node, so both dial each other concurrently. Producers send
// data, fragments, events with every field set and priority events from
// small pools while the consumers poll, hold and release at random.
func TestExchangeOrdered(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	a, b := newNode(t, Config{}), newNode(t, Config{})
	const segment = 256
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	type side struct {
		recv, send testNode
		edge       uint32
		gate       *network.InputGate
		scripts    [][]step
	}
	sides := []*side{{recv: b, send: a, edge: 1}, {recv: a, send: b, edge: 2}}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for _, s := range sides {
		channels := 2 + rng.IntN(4)
		exclusive, floating := 1+rng.IntN(2), rng.IntN(4)
		s.gate = network.NewInputGate(channels, exclusive, floating)
		_, capacity := s.gate.BufferUsage()
		pool := network.NewPool(capacity, segment)
		t.Logf("edge %d: %d channels, %d exclusive, %d floating", s.edge, channels, exclusive, floating)
		for ch := range channels {
			steps := script(rng, 200+rng.IntN(200), segment)
			s.scripts = append(s.scripts, steps)
			id := ChannelID{Attempt: 1, Edge: s.edge, From: uint32(ch), To: 0}
			sub := network.NewPipelinedSubpartition()
			if err := s.send.ConnectSender(s.recv.Addr(), id, sub); err != nil {
				t.Fatal(err)
			}
			wg.Add(2)
			go func() {
				defer wg.Done()
				if err := s.recv.ConnectReceiver(ctx, s.send.Addr(), id, s.gate, ch, pool); err != nil {
					errs <- err
				}
			}()
			ppool := network.NewPool(1+rng.IntN(3), segment)
			go func() {
				defer wg.Done()
				if err := produce(ctx, sub, ppool, steps); err != nil {
					errs <- err
				}
			}()
		}
	}
	var cwg sync.WaitGroup
	for i, s := range sides {
		cwg.Add(1)
		crng := rand.New(rand.NewPCG(seed, uint64(i+1)))
		go func() {
			defer cwg.Done()
			if err := consume(t, crng, s.gate, s.scripts); err != nil {
				errs <- fmt.Errorf("edge %d: %w", s.edge, err)
			}
		}()
	}
	cwg.Wait()
	cancel()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	checkNoLoss(t, a, b)
	// One connection per direction: each node dialed the other once.
	for _, n := range []testNode{a, b} {
		n.mu.Lock()
		if len(n.conns) != 2 {
			t.Errorf("%s has %d connections, want 2 (one dialed, one accepted)", n.Addr(), len(n.conns))
		}
		n.mu.Unlock()
	}
}

// setup1 connects one channel from a to b with a gate of exclusive and
// floating credit and returns the subpartition, the gate, the producer's
// pool and the channel.
func setup1(t *testing.T, a, b testNode, exclusive, floating int) (*network.PipelinedSubpartition, *network.InputGate, *network.Pool, ChannelID) {
	t.Helper()
	id := ChannelID{Attempt: 7, Edge: 3, From: 1, To: 2}
	g := network.NewInputGate(1, exclusive, floating)
	sub := network.NewPipelinedSubpartition()
	if err := a.ConnectSender(b.Addr(), id, sub); err != nil {
		t.Fatal(err)
	}
	if err := b.ConnectReceiver(context.Background(), a.Addr(), id, g, 0, network.NewPool(exclusive+floating, 64)); err != nil {
		t.Fatal(err)
	}
	return sub, g, network.NewPool(32, 64), id
}

// TestBackpressureAndPriority: a consumer that does not release stops the
// sender at the credit it granted (exclusive plus floating), the rest waits
// at the sender as backlog; a priority barrier overtakes it; each release
// lets one more buffer through.
func TestBackpressureAndPriority(t *testing.T) {
	a, b := newNode(t, Config{}), newNode(t, Config{})
	sub, g, pool, id := setup1(t, a, b, 2, 3)
	for i := range 10 {
		sub.Send(fill(t, pool, network.KindData, []byte{byte(i)}))
	}
	waitFor(t, "5 buffers at the gate", func() bool { used, _ := g.BufferUsage(); return used == 5 })
	quiesce(t, a.Node, b.Node)
	if used, capacity := g.BufferUsage(); used != 5 || capacity != 5 {
		t.Fatalf("gate holds %d of %d buffers, want 5 of 5", used, capacity)
	}
	if sub.Backlog() != 5 || senderCredit(a.Node, b.Addr(), id) != 0 {
		t.Fatalf("sender backlog %d credit %d, want 5 and 0", sub.Backlog(), senderCredit(a.Node, b.Addr(), id))
	}
	if err := g.CheckCredit(); err != nil {
		t.Fatal(err)
	}

	overtook := 0
	sub.SendPriority(network.NewEventBuffer(network.Event{Kind: network.EventBarrier, ID: 9, Priority: true,
		Checkpoint: checkpoint.Options{Unaligned: true}}), func(*network.Buffer) { overtook++ })
	if overtook != 5 {
		t.Errorf("the barrier overtook %d buffers at the sender, want 5", overtook)
	}
	var pb *network.Buffer
	waitFor(t, "the priority barrier", func() bool {
		var ok bool
		_, pb, ok = g.PollPriority()
		return ok
	})
	if pb.Event.ID != 9 || pb.Overtook != 5 {
		t.Errorf("priority event %+v overtook %d, want barrier 9 overtaking the 5 received", pb.Event, pb.Overtook)
	}
	if sub.Backlog() != 5 {
		t.Errorf("sender backlog %d after the barrier, want 5", sub.Backlog())
	}

	for i := range 10 {
		_, buf := pollBuffer(t, g)
		if buf.Data[0] != byte(i) {
			t.Fatalf("buffer %d carries %d", i, buf.Data[0])
		}
		g.Release(0, buf)
		quiesce(t, a.Node, b.Node)
		if err := g.CheckCredit(); err != nil {
			t.Fatal(err)
		}
		if used, _ := g.BufferUsage(); used > 5 {
			t.Fatalf("gate holds %d buffers beyond its capacity 5", used)
		}
		if want := max(5-(i+1), 0); sub.Backlog() != want {
			t.Fatalf("after %d releases the sender's backlog is %d, want %d", i+1, sub.Backlog(), want)
		}
	}
	if n := pool.InUse(); n != 0 {
		t.Errorf("%d producer buffers not recycled", n)
	}
	checkNoLoss(t, a, b)
}

// TestBacklogAnnouncement: a channel without exclusive credit gets floating
// credit only by announcing its backlog.
func TestBacklogAnnouncement(t *testing.T) {
	a, b := newNode(t, Config{}), newNode(t, Config{})
	sub, g, pool, _ := setup1(t, a, b, 0, 3)
	for i := range 4 {
		sub.Send(fill(t, pool, network.KindData, []byte{byte(i)}))
	}
	waitFor(t, "3 buffers on floating credit", func() bool { used, _ := g.BufferUsage(); return used == 3 })
	quiesce(t, a.Node, b.Node)
	if sub.Backlog() != 1 {
		t.Fatalf("sender backlog %d, want 1", sub.Backlog())
	}
	for i := range 4 {
		_, buf := pollBuffer(t, g)
		if buf.Data[0] != byte(i) {
			t.Fatalf("buffer %d carries %d", i, buf.Data[0])
		}
		g.Release(0, buf)
	}
	quiesce(t, a.Node, b.Node)
	if err := g.CheckCredit(); err != nil {
		t.Fatal(err)
	}
	checkNoLoss(t, a, b)
}

// TestBufferSizeAnnouncement: the gate's announced buffer size reaches the
// sender's subpartition.
func TestBufferSizeAnnouncement(t *testing.T) {
	a, b := newNode(t, Config{}), newNode(t, Config{})
	sub, g, _, _ := setup1(t, a, b, 2, 0)
	quiesce(t, a.Node, b.Node)
	g.AnnounceBufferSize(1000)
	waitFor(t, "the buffer size at the sender", func() bool { return sub.BufferSizeLimit().Load() == 1000 })
	g.AnnounceBufferSize(300)
	waitFor(t, "the new buffer size at the sender", func() bool { return sub.BufferSizeLimit().Load() == 300 })
	checkNoLoss(t, a, b)
}

// TestOpenBeforeSender: the receiver may open the channel before its
// sender is connected; what was sent before the sender connected moves then.
func TestOpenBeforeSender(t *testing.T) {
	a, b := newNode(t, Config{}), newNode(t, Config{})
	id := ChannelID{Attempt: 1}
	g := network.NewInputGate(1, 2, 0)
	if err := b.ConnectReceiver(context.Background(), a.Addr(), id, g, 0, network.NewPool(2, 64)); err != nil {
		t.Fatal(err)
	}
	quiesce(t, a.Node, b.Node)
	sub := network.NewPipelinedSubpartition()
	pool := network.NewPool(4, 64)
	sub.Send(fill(t, pool, network.KindData, []byte("early")))
	if err := a.ConnectSender(b.Addr(), id, sub); err != nil {
		t.Fatal(err)
	}
	if err := a.ConnectSender(b.Addr(), id, sub); err == nil {
		t.Error("a second ConnectSender of the same channel succeeded")
	}
	_, buf := pollBuffer(t, g)
	if string(buf.Data) != "early" {
		t.Errorf("got %q", buf.Data)
	}
	g.Release(0, buf)
	checkNoLoss(t, a, b)
}

// TestAttemptsIsolated: after CloseAttempt, frames of the old attempt are
// dropped and the new attempt's channel with the same edge and subtasks
// gets only its own.
func TestAttemptsIsolated(t *testing.T) {
	a, b := newNode(t, Config{}), newNode(t, Config{})
	old := ChannelID{Attempt: 1, Edge: 1, From: 0, To: 0}
	oldG := network.NewInputGate(1, 4, 0)
	oldSub := network.NewPipelinedSubpartition()
	pool := network.NewPool(16, 64)
	if err := a.ConnectSender(b.Addr(), old, oldSub); err != nil {
		t.Fatal(err)
	}
	if err := b.ConnectReceiver(context.Background(), a.Addr(), old, oldG, 0, network.NewPool(4, 64)); err != nil {
		t.Fatal(err)
	}
	oldSub.Send(fill(t, pool, network.KindData, []byte("old")))
	quiesce(t, a.Node, b.Node)

	// The receiver restarts first: the old sender still holds credit and
	// sends, and its frames find no channel.
	b.CloseAttempt(1)
	oldSub.Send(fill(t, pool, network.KindData, []byte("late")))
	oldSub.Send(network.NewEventBuffer(network.Event{Kind: network.EventWatermark, Timestamp: 5}))
	quiesce(t, a.Node, b.Node)
	if n := oldG.QueuedBuffers(); n != 1 {
		t.Errorf("the old gate holds %d buffers, want the one sent before CloseAttempt", n)
	}
	if err := b.ConnectReceiver(context.Background(), a.Addr(), old, network.NewInputGate(1, 1, 0), 0, network.NewPool(1, 64)); !errors.Is(err, ErrAttemptClosed) {
		t.Errorf("connecting a closed attempt: %v, want ErrAttemptClosed", err)
	}
	a.CloseAttempt(1)
	oldSub.Send(fill(t, pool, network.KindData, []byte("after")))

	cur := ChannelID{Attempt: 2, Edge: 1, From: 0, To: 0}
	g := network.NewInputGate(1, 2, 0)
	sub := network.NewPipelinedSubpartition()
	if err := a.ConnectSender(b.Addr(), cur, sub); err != nil {
		t.Fatal(err)
	}
	if err := b.ConnectReceiver(context.Background(), a.Addr(), cur, g, 0, network.NewPool(2, 64)); err != nil {
		t.Fatal(err)
	}
	sub.Send(fill(t, pool, network.KindData, []byte("new")))
	_, buf := pollBuffer(t, g)
	if string(buf.Data) != "new" {
		t.Errorf("the new attempt received %q", buf.Data)
	}
	g.Release(0, buf)
	quiesce(t, a.Node, b.Node)
	if n := g.QueuedBuffers(); n != 0 {
		t.Errorf("the new gate holds %d more buffers", n)
	}
	if oldSub.Backlog() != 1 {
		t.Errorf("the closed sender polled its subpartition: backlog %d, want 1", oldSub.Backlog())
	}
	checkNoLoss(t, a, b)
}

// TestPeerLost: closing a node breaks its connections; the peer's
// OnPeerLost fires once per connection with the closed node's name, and
// nothing hangs. The closing node reports nothing.
func TestPeerLost(t *testing.T) {
	for _, closeSender := range []bool{true, false} {
		t.Run(fmt.Sprintf("close sender=%v", closeSender), func(t *testing.T) {
			a, b := newNode(t, Config{}), newNode(t, Config{})
			sub, g, pool, _ := setup1(t, a, b, 2, 0)
			for range 5 {
				sub.Send(fill(t, pool, network.KindData, []byte("x")))
			}
			waitFor(t, "2 buffers", func() bool { used, _ := g.BufferUsage(); return used == 2 })
			closed, survivor := a, b
			if !closeSender {
				closed, survivor = b, a
			}
			if err := closed.Close(); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "OnPeerLost", func() bool { peers, _ := survivor.lost.get(); return len(peers) > 0 })
			peers, errs := survivor.lost.get()
			if len(peers) != 1 || peers[0] != closed.Addr() || !errors.Is(errs[0], ErrPeerLost) {
				t.Errorf("OnPeerLost(%v, %v), want once for %s with ErrPeerLost", peers, errs, closed.Addr())
			}
			t.Logf("lost: %v", errs[0])
			if peers, _ := closed.lost.get(); len(peers) != 0 {
				t.Errorf("the closed node reported lost peers %v", peers)
			}
			if err := closed.ConnectSender(survivor.Addr(), ChannelID{Attempt: 9}, network.NewPipelinedSubpartition()); !errors.Is(err, ErrClosed) {
				t.Errorf("ConnectSender on a closed node: %v", err)
			}
			if closeSender {
				err := b.ConnectReceiver(context.Background(), a.Addr(), ChannelID{Attempt: 9}, network.NewInputGate(1, 1, 0), 0, network.NewPool(1, 64))
				if err == nil {
					t.Error("dialing a closed node succeeded")
				}
				t.Logf("dial a closed node: %v", err)
			} else {
				// The sender stopped: its data stays queued.
				sub.Send(fill(t, pool, network.KindData, []byte("y")))
				if sub.Backlog() != 4 {
					t.Errorf("backlog %d after the receiver was lost, want 4", sub.Backlog())
				}
			}
		})
	}
}

// TestCloseDuringTraffic closes both nodes while producers send and the
// consumer releases: every goroutine ends (goleak), nothing blocks.
func TestCloseDuringTraffic(t *testing.T) {
	a, b := newNode(t, Config{OnPeerLost: func(string, error) {}}), newNode(t, Config{OnPeerLost: func(string, error) {}})
	const channels = 3
	g := network.NewInputGate(channels, 2, 2)
	rpool := network.NewPool(channels*2+2, 1024)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for ch := range channels {
		id := ChannelID{Attempt: 1, From: uint32(ch)}
		sub := network.NewPipelinedSubpartition()
		if err := a.ConnectSender(b.Addr(), id, sub); err != nil {
			t.Fatal(err)
		}
		if err := b.ConnectReceiver(ctx, a.Addr(), id, g, ch, rpool); err != nil {
			t.Fatal(err)
		}
		pool := network.NewPool(4, 1024)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				buf, err := pool.Request(ctx)
				if err != nil {
					return
				}
				buf.Data = buf.Data[:1024]
				sub.Send(buf)
			}
		}()
	}
	wg.Add(1)
	received := make(chan struct{}, 1)
	go func() {
		defer wg.Done()
		n := 0
		for ctx.Err() == nil {
			ch, buf, ok := g.Poll()
			if !ok {
				select {
				case <-g.Notify():
				case <-ctx.Done():
				}
				continue
			}
			if buf.IsData() {
				g.Release(ch, buf)
			}
			if n++; n == 100 {
				received <- struct{}{}
			}
		}
	}()
	select {
	case <-received:
	case <-time.After(10 * time.Second):
		t.Fatal("no traffic")
	}
	a.Close()
	b.Close()
	cancel()
	wg.Wait()
}
