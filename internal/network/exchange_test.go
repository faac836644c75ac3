package network

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// connectLocal connects a new PipelinedSubpartition to every channel of g
// and returns them, indexed by channel.
func connectLocal(g *InputGate) []*PipelinedSubpartition {
	subs := make([]*PipelinedSubpartition, g.NumChannels())
	for ch := range subs {
		subs[ch] = NewPipelinedSubpartition()
		ConnectLocal(subs[ch], g, ch)
	}
	return subs
}

// TestExchangeConcurrent runs producers on their own goroutines, each
// sending data buffers from a small pool, events and priority events through
// a local connection, while the consumer polls and releases on another. It
// checks that every data buffer arrives exactly once in order, that an event
// keeps its place among the data, and that a priority event arrives before
// every buffer sent after it (it may overtake those sent before).
func TestExchangeConcurrent(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	for round := range uint64(8) {
		rng := rand.New(rand.NewPCG(seed, round))
		channels := 1 + rng.IntN(4)
		exclusive := 1 + rng.IntN(2)
		floating := rng.IntN(4)
		perChannel := 300 + rng.IntN(300)
		g := NewInputGate(channels, exclusive, floating)
		subs := connectLocal(g)

		// A buffer's first byte says what it is; the data buffer's sequence
		// number, or for an event the number of data buffers sent before it,
		// follows.
		const data, event, prio = 0, 1, 2
		var wg sync.WaitGroup
		for ch := range channels {
			prng := rand.New(rand.NewPCG(seed, round<<8|uint64(ch)))
			pool := NewPool(2+prng.IntN(3), 16)
			wg.Add(1)
			go func() {
				defer wg.Done()
				seq := uint32(0)
				for seq < uint32(perChannel) {
					switch r := prng.IntN(20); {
					case r == 0:
						b := NewEventBuffer(Event{Kind: EventWatermark, Timestamp: int64(seq)})
						subs[ch].Send(b)
					case r == 1:
						b := NewEventBuffer(Event{Kind: EventBarrier, ID: int64(seq), Priority: true})
						subs[ch].SendPriority(b, nil)
					default:
						b, err := pool.Request(context.Background())
						if err != nil {
							panic(err)
						}
						b.Data = binary.LittleEndian.AppendUint32(b.Data, seq)
						seq++
						subs[ch].Send(b)
					}
				}
				subs[ch].Send(NewEventBuffer(Event{Kind: EventEndOfPartition, Timestamp: int64(seq)}))
			}()
		}

		next := make([]uint32, channels)    // next data sequence number per channel
		lastPrio := make([]int64, channels) // data sent before the last priority event
		ended := 0
		deadline := time.NewTimer(20 * time.Second)
		for ended < channels {
			ch, b, ok := g.Poll()
			if !ok {
				select {
				case <-g.Notify():
				case <-deadline.C:
					t.Fatalf("seed %d round %d: stuck with %d of %d channels ended, next %v", seed, round, ended, channels, next)
				}
				continue
			}
			if b.IsData() {
				got := binary.LittleEndian.Uint32(b.Data)
				if got != next[ch] {
					t.Fatalf("seed %d round %d: channel %d delivered %d, want %d", seed, round, ch, got, next[ch])
				}
				next[ch]++
				g.Release(ch, b)
				continue
			}
			switch ev := b.Event; {
			case ev.Priority:
				// Sent when ev.ID data buffers had been sent: none of
				// those after it may have arrived yet.
				if int64(next[ch]) > ev.ID {
					t.Fatalf("seed %d round %d: channel %d: priority event sent after %d data buffers arrived after %d", seed, round, ch, ev.ID, next[ch])
				}
				if ev.ID < lastPrio[ch] {
					t.Fatalf("seed %d round %d: channel %d: priority events out of order: %d after %d", seed, round, ch, ev.ID, lastPrio[ch])
				}
				lastPrio[ch] = ev.ID
			default:
				if int64(next[ch]) != ev.Timestamp {
					t.Fatalf("seed %d round %d: channel %d: %v sent after %d data buffers arrived after %d", seed, round, ch, ev.Kind, ev.Timestamp, next[ch])
				}
				if ev.Kind == EventEndOfPartition {
					ended++
				}
			}
			if err := g.CheckCredit(); err != nil {
				t.Fatalf("seed %d round %d: %v", seed, round, err)
			}
		}
		wg.Wait()
		for ch, sub := range subs {
			if n := sub.Queued(); n != 0 {
				t.Fatalf("seed %d round %d: channel %d: %d buffers left at the sender", seed, round, ch, n)
			}
		}
	}
}

// Moving a data buffer through a local connection and releasing it
// allocates nothing once the queues have grown.
func TestExchangeSteadyStateDoesNotAllocate(t *testing.T) {
	g := NewInputGate(2, 2, 2)
	subs := connectLocal(g)
	pool := NewPool(8, 64)
	step := func() {
		for _, sub := range subs {
			for range 3 {
				sub.Send(pool.TryRequest())
			}
		}
		for {
			ch, b, ok := g.Poll()
			if !ok {
				break
			}
			g.Release(ch, b)
		}
	}
	step()
	if n := testing.AllocsPerRun(100, step); n != 0 {
		t.Fatalf("%.1f allocations per round", n)
	}
	if pool.InUse() != 0 {
		t.Fatalf("%d buffers not recycled", pool.InUse())
	}
}
