package network

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// TestGateRandomized drives an InputGate with random sends, polls and
// releases from one goroutine and checks, after every step, the credit
// invariants, that no channel holds more delivered buffers than its credit
// allows, and at the end that every buffer arrived exactly once in per-channel
// order.
func TestGateRandomized(t *testing.T) {
	for seed := range uint64(50) {
		rng := rand.New(rand.NewPCG(seed, 7))
		channels := 1 + rng.IntN(6)
		exclusive := 1 + rng.IntN(3)
		floating := rng.IntN(5)
		g := NewInputGate(channels, exclusive, floating)
		subs := connectLocal(g)
		sent := make([]uint32, channels)
		next := make([]uint32, channels)
		var held []struct {
			ch int
			b  *Buffer
		}
		total := 0
		steps := 2000
		for step := 0; step < steps || total > 0 || len(held) > 0; step++ {
			switch op := rng.IntN(10); {
			case op < 4 && step < steps:
				ch := rng.IntN(channels)
				b := &Buffer{Data: binary.LittleEndian.AppendUint32(nil, sent[ch])}
				sent[ch]++
				total++
				subs[ch].Send(b)
			case op < 7:
				ch, b, ok := g.Poll()
				if !ok {
					continue
				}
				if got := binary.LittleEndian.Uint32(b.Data); got != next[ch] {
					t.Fatalf("seed %d: channel %d delivered %d, want %d", seed, ch, got, next[ch])
				}
				next[ch]++
				total--
				held = append(held, struct {
					ch int
					b  *Buffer
				}{ch, b})
			default:
				if len(held) == 0 {
					continue
				}
				i := rng.IntN(len(held))
				h := held[i]
				held = append(held[:i], held[i+1:]...)
				g.Release(h.ch, h.b)
			}
			if err := g.CheckCredit(); err != nil {
				t.Fatalf("seed %d step %d: %v", seed, step, err)
			}
			perChannel := make([]int, channels)
			for _, h := range held {
				perChannel[h.ch]++
			}
			g.mu.Lock()
			for ch := range channels {
				if n := perChannel[ch] + g.chans[ch].recvQ.len(); n > exclusive+floating {
					t.Fatalf("seed %d: channel %d holds %d buffers, credit allows %d", seed, ch, n, exclusive+floating)
				}
			}
			g.mu.Unlock()
		}
		for ch := range channels {
			if next[ch] != sent[ch] {
				t.Fatalf("seed %d: channel %d delivered %d of %d", seed, ch, next[ch], sent[ch])
			}
		}
	}
}

func TestGateEventsFollowDataAndPriorityOvertakes(t *testing.T) {
	g := NewInputGate(1, 1, 0)
	sub := connectLocal(g)[0]
	sub.Send(&Buffer{Data: []byte{1}})
	sub.Send(&Buffer{Data: []byte{2}}) // no credit: waits at the sender
	sub.Send(NewEventBuffer(Event{Kind: EventWatermark, Timestamp: 5}))
	sub.SendPriority(NewEventBuffer(Event{Kind: EventBarrier, ID: 1, Priority: true}), nil)

	kinds := func() []string {
		var out []string
		for {
			ch, b, ok := g.Poll()
			if !ok {
				return out
			}
			if b.Kind == KindEvent {
				out = append(out, b.Event.Kind.String())
			} else {
				out = append(out, string('0'+rune(b.Data[0])))
				g.Release(ch, b)
			}
		}
	}
	got := kinds()
	want := []string{"Barrier", "1", "2", "Watermark"}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
}

func TestGateBlockedChannel(t *testing.T) {
	g := NewInputGate(2, 2, 0)
	subs := connectLocal(g)
	g.Block(0)
	subs[0].Send(&Buffer{Data: []byte{0}})
	subs[1].Send(&Buffer{Data: []byte{1}})
	ch, b, ok := g.Poll()
	if !ok || ch != 1 {
		t.Fatalf("poll = %d, %v; want channel 1 while 0 is blocked", ch, ok)
	}
	g.Release(ch, b)
	if _, _, ok := g.Poll(); ok {
		t.Fatal("blocked channel delivered")
	}
	subs[0].SendPriority(NewEventBuffer(Event{Kind: EventBarrier, Priority: true}), nil)
	if ch, b, ok := g.Poll(); !ok || ch != 0 || b.Kind != KindEvent {
		t.Fatal("priority event did not pass a blocked channel")
	}
	g.Unblock(0)
	select {
	case <-g.Notify():
	default:
		t.Fatal("unblock with data queued did not notify")
	}
	if ch, _, ok := g.Poll(); !ok || ch != 0 {
		t.Fatal("unblocked channel did not deliver")
	}
}

func TestPoolBoundsAndBlocks(t *testing.T) {
	p := NewPool(2, 64)
	a, b := p.TryRequest(), p.TryRequest()
	if a == nil || b == nil || p.TryRequest() != nil {
		t.Fatal("pool of 2 did not hand out exactly 2 buffers")
	}
	if p.AllocatedBytes() != 128 || p.InUse() != 2 || p.Available() {
		t.Fatalf("allocated %d in use %d", p.AllocatedBytes(), p.InUse())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.Request(ctx); err == nil {
		t.Fatal("Request on an exhausted pool with a canceled context returned a buffer")
	}
	a.Data = append(a.Data, 1, 2, 3)
	a.Recycle()
	if err := p.WaitAvailable(context.Background()); err != nil {
		t.Fatal(err)
	}
	c := p.TryRequest()
	if c != a || len(c.Data) != 0 || cap(c.Data) != 64 {
		t.Fatal("recycled buffer not reused empty")
	}
}
