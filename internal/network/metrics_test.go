package network

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

type countingObserver struct{ started, ended atomic.Int32 }

func (o *countingObserver) BackpressureStarted() { o.started.Add(1) }
func (o *countingObserver) BackpressureEnded()   { o.ended.Add(1) }

// A writer tells its observer when it starts and stops waiting for a buffer
// in the middle of a record, and only then; the gauges show where the
// buffers are meanwhile.
func TestBlockedWriterReportsBackpressureAndGauges(t *testing.T) {
	rp, g, w, rec := blockedWriter(context.Background())
	o := &countingObserver{}
	rp.SetBackpressureObserver(o)
	// The first record takes buffer A, the second sends A (the consumer
	// has one credit) and takes B: neither waits.
	w.Emit(0, rec)
	w.Emit(0, rec)
	if s, e := o.started.Load(), o.ended.Load(); s != 0 || e != 0 {
		t.Fatalf("writer that never waited reported %d starts, %d ends", s, e)
	}
	// The third sends B, which waits at the sender for credit, and waits
	// for a buffer.
	emitted := make(chan any, 1)
	go func() {
		defer func() { emitted <- recover() }()
		w.Emit(0, rec)
	}()
	waitFor(t, "the writer reports backpressure", func() bool { return o.started.Load() == 1 })
	if e := o.ended.Load(); e != 0 {
		t.Fatalf("blocked writer reported %d ends", e)
	}
	type gauges struct{ inUse, size, outQueued, inQueued, inUsed, inCapacity int }
	read := func() gauges {
		var x gauges
		x.inUse, x.size = rp.Pool().Usage()
		x.outQueued, x.inQueued = rp.QueuedBuffers(), g.QueuedBuffers()
		x.inUsed, x.inCapacity = g.BufferUsage()
		return x
	}
	if got, want := read(), (gauges{inUse: 2, size: 2, outQueued: 1, inQueued: 1, inUsed: 1, inCapacity: 1}); got != want {
		t.Fatalf("while blocked: gauges %+v, want %+v", got, want)
	}
	// The consumer takes A and releases it: B moves to the gate with the
	// credit, and A goes back to the writer.
	ch, b, ok := g.Poll()
	if !ok {
		t.Fatal("nothing delivered")
	}
	g.Release(ch, b)
	select {
	case p := <-emitted:
		if p != nil {
			t.Fatalf("writer panicked: %v", p)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("writer did not resume after a buffer was released")
	}
	if s, e := o.started.Load(), o.ended.Load(); s != 1 || e != 1 {
		t.Fatalf("after the wait: %d starts, %d ends, want 1 and 1", s, e)
	}
	if got, want := read(), (gauges{inUse: 2, size: 2, outQueued: 0, inQueued: 1, inUsed: 1, inCapacity: 1}); got != want {
		t.Fatalf("after the wait: gauges %+v, want %+v", got, want)
	}
}

// A wait that ends with a cancellation panic still reports its end.
func TestCanceledWaitReportsBackpressureEnd(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	rp, _, w, rec := blockedWriter(ctx)
	o := &countingObserver{}
	rp.SetBackpressureObserver(o)
	emitted := make(chan any, 1)
	go func() {
		defer func() { emitted <- recover() }()
		for {
			w.Emit(0, rec)
		}
	}()
	waitFor(t, "the writer reports backpressure", func() bool { return o.started.Load() == 1 })
	cancel()
	select {
	case p := <-emitted:
		if _, ok := p.(*CanceledError); !ok {
			t.Fatalf("panic = %v, want a *CanceledError", p)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("writer did not stop")
	}
	if s, e := o.started.Load(), o.ended.Load(); s != 1 || e != 1 {
		t.Fatalf("%d starts, %d ends, want 1 and 1", s, e)
	}
}

// The gate's buffer usage counts data buffers from their arrival to their
// release, not events; its capacity is every channel's exclusive credit plus
// the floating credit.
func TestInputGateBufferUsage(t *testing.T) {
	for _, tc := range []struct {
		name                        string
		channels, exclusive, floats int
		send                        int // data buffers sent on channel 0
		release                     int // of them polled and released
		wantUsed, wantCapacity      int
	}{
		{name: "empty", channels: 3, exclusive: 2, floats: 8, wantCapacity: 14},
		{name: "exclusive credit only", channels: 1, exclusive: 2, floats: 0, send: 5, wantUsed: 2, wantCapacity: 2},
		{name: "floating credit lent", channels: 2, exclusive: 2, floats: 3, send: 9, wantUsed: 5, wantCapacity: 7},
		{name: "released", channels: 2, exclusive: 2, floats: 3, send: 4, release: 3, wantUsed: 1, wantCapacity: 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewInputGate(tc.channels, tc.exclusive, tc.floats)
			subs := connectLocal(g)
			for range tc.send {
				subs[0].Send(&Buffer{Data: []byte{1}})
			}
			subs[0].Send(NewEventBuffer(Event{Kind: EventWatermark}))
			for range tc.release {
				ch, b, ok := g.Poll()
				if !ok || !b.IsData() {
					t.Fatalf("poll: ok %v, buffer %+v", ok, b)
				}
				g.Release(ch, b)
			}
			if used, capacity := g.BufferUsage(); used != tc.wantUsed || capacity != tc.wantCapacity {
				t.Fatalf("usage %d of %d, want %d of %d", used, capacity, tc.wantUsed, tc.wantCapacity)
			}
		})
	}
}
