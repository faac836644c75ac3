package network

import (
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/checkpoint"
)

func dataBuf(v byte) *Buffer { return &Buffer{Data: []byte{v}} }

func collectData(dst *[]byte) func(*Buffer) {
	return func(b *Buffer) { *dst = append(*dst, b.Data...) }
}

// A priority barrier overtakes every queued data buffer and shows them; a
// barrier sent in order can be moved ahead later, overtaking only the data
// before it.
func TestSubpartitionOvertaking(t *testing.T) {
	s := NewPipelinedSubpartition()
	s.Send(dataBuf(1))
	s.Send(dataBuf(2))
	s.Send(NewEventBuffer(Event{Kind: EventBarrier, ID: 5}))
	s.Send(dataBuf(3))
	if !s.BarrierQueued(5) || s.BarrierQueued(6) {
		t.Fatal("BarrierQueued wrong")
	}
	var got []byte
	if !s.PrioritizeBarrier(5, collectData(&got)) || !slices.Equal(got, []byte{1, 2}) {
		t.Fatalf("PrioritizeBarrier overtook %v, want [1 2]", got)
	}
	if s.PrioritizeBarrier(5, nil) || s.BarrierQueued(5) {
		t.Fatal("the barrier is still found after it was moved")
	}
	got = nil
	s.SendPriority(NewEventBuffer(Event{Kind: EventBarrier, ID: 6, Priority: true}), collectData(&got))
	if !slices.Equal(got, []byte{1, 2, 3}) {
		t.Fatalf("SendPriority overtook %v, want [1 2 3]", got)
	}
	var order []string
	for {
		b, _ := s.PollNext(10)
		if b == nil {
			break
		}
		if b.Kind == KindEvent {
			if !b.Event.Priority {
				t.Fatalf("barrier %d is not a priority event", b.Event.ID)
			}
			order = append(order, b.Event.Kind.String()+string('0'+rune(b.Event.ID)))
		} else {
			order = append(order, string('0'+rune(b.Data[0])))
		}
	}
	if want := []string{"Barrier5", "Barrier6", "1", "2", "3"}; !slices.Equal(order, want) {
		t.Fatalf("queue order %v, want %v", order, want)
	}
}

// A barrier of an aligned checkpoint with a timeout, received behind data,
// is announced at once; PrioritizeBarrier then moves it ahead of that data
// as a priority event that knows how many buffers it overtook, which
// Overtaken shows.
func TestGateAnnouncesAndPrioritizesBarrier(t *testing.T) {
	g := NewInputGate(1, 4, 0)
	sub := connectLocal(g)[0]
	opts := checkpoint.Options{Unaligned: true, AlignedTimeout: time.Millisecond}
	sub.Send(dataBuf(1))
	sub.Send(dataBuf(2))
	sub.Send(NewEventBuffer(Event{Kind: EventBarrier, ID: 7, Timestamp: 100, Checkpoint: opts}))
	sub.Send(dataBuf(3))

	ch, b, ok := g.Poll()
	if !ok || b.Kind != KindEvent || b.Event.Kind != EventAnnouncement || b.Event.ID != 7 || b.Event.Timestamp != 100 || !b.Event.Checkpoint.Timeoutable() {
		t.Fatalf("first poll: %v %+v, want the announcement of barrier 7", ok, b)
	}
	if g.PrioritizeBarrier(ch, 8) {
		t.Fatal("PrioritizeBarrier found a barrier that was never sent")
	}
	if !g.PrioritizeBarrier(ch, 7) {
		t.Fatal("PrioritizeBarrier did not find barrier 7")
	}
	_, b, ok = g.Poll()
	if !ok || b.Kind != KindEvent || b.Event.Kind != EventBarrier || !b.Event.Priority || b.Overtook != 2 {
		t.Fatalf("second poll: %+v, want priority barrier 7 that overtook 2 buffers", b)
	}
	var got []byte
	g.Overtaken(ch, b.Overtook, collectData(&got))
	if !slices.Equal(got, []byte{1, 2}) {
		t.Fatalf("Overtaken shows %v, want [1 2]", got)
	}
	var rest []byte
	for {
		ch, b, ok := g.Poll()
		if !ok {
			break
		}
		rest = append(rest, b.Data...)
		g.Release(ch, b)
	}
	if !slices.Equal(rest, []byte{1, 2, 3}) {
		t.Fatalf("data after the barrier: %v, want [1 2 3]", rest)
	}
	if err := g.CheckCredit(); err != nil {
		t.Fatal(err)
	}
}

// A record reader stops after a whole record once stop is set and goes on
// from where it stopped.
func TestRecordReaderStops(t *testing.T) {
	c := codec.Int64()
	out := &sliceOutput[int64]{}
	r := NewRecordReader(c, Output[int64](out))
	b := &Buffer{Data: c.Append(c.Append(c.Append(nil, 1), 2), 3)}
	var stop atomic.Bool
	stop.Store(true)
	off, err := r.ReadFrom(0, b, 0, &stop)
	if err != nil || off == 0 || off == len(b.Data) || !slices.Equal(out.got, []int64{1}) {
		t.Fatalf("stopped at %d of %d with %v (%v), want after the first record", off, len(b.Data), out.got, err)
	}
	off, err = r.ReadFrom(0, b, off, nil)
	if err != nil || off != len(b.Data) || !slices.Equal(out.got, []int64{1, 2, 3}) {
		t.Fatalf("went on to %d of %d with %v (%v)", off, len(b.Data), out.got, err)
	}
}

// Overdraft buffers are lent beyond the pool's size only to
// TryRequestOverdraft, and Available stays false until the pool is back
// under its size.
func TestPoolOverdraft(t *testing.T) {
	p := NewPoolOverdraft(2, 3, 16)
	var out []*Buffer
	for range 2 {
		out = append(out, p.TryRequest())
	}
	if p.TryRequest() != nil || p.Available() {
		t.Fatal("a full pool hands out a buffer for new work")
	}
	for i := range 3 {
		b := p.TryRequestOverdraft()
		if b == nil {
			t.Fatalf("overdraft buffer %d refused", i)
		}
		out = append(out, b)
	}
	if p.TryRequestOverdraft() != nil || p.InUse() != 5 {
		t.Fatalf("overdraft beyond its limit (%d in use)", p.InUse())
	}
	for i, b := range out {
		b.Recycle()
		if want := i >= 3; p.Available() != want {
			t.Fatalf("after %d recycled: Available %v, want %v", i+1, p.Available(), want)
		}
	}
	if p.AllocatedBytes() != 5*16 {
		t.Fatalf("allocated %d bytes, want 80", p.AllocatedBytes())
	}
}

// The buffers a priority event overtook are found by sequence number: a
// barrier moved ahead after the event was polled (an aligned timeout of an
// older checkpoint) does not shift them onto a buffer that came after it.
func TestOvertakenAfterAnotherBarrierMovedAhead(t *testing.T) {
	g := NewInputGate(1, 8, 0)
	sub := connectLocal(g)[0]
	sub.Send(dataBuf(1))
	sub.Send(NewEventBuffer(Event{Kind: EventBarrier, ID: 7}))
	sub.Send(dataBuf(2))
	sub.SendPriority(NewEventBuffer(Event{Kind: EventBarrier, ID: 8, Priority: true}), nil)
	sub.Send(dataBuf(3))
	ch, b8, ok := g.Poll()
	if !ok || b8.Event.ID != 8 || !b8.Event.Priority {
		t.Fatalf("first poll: %+v, want priority barrier 8", b8)
	}
	if !g.PrioritizeBarrier(ch, 7) {
		t.Fatal("barrier 7 not found")
	}
	var got []byte
	g.Overtaken(ch, b8.Overtook, collectData(&got))
	if !slices.Equal(got, []byte{1, 2}) {
		t.Fatalf("barrier 8 overtook %v, want [1 2]", got)
	}
}
