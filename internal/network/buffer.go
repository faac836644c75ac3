package network

import (
	"context"
	"sync/atomic"

	"github.com/weirstream/weir/internal/checkpoint"
)

// Kind says what a Buffer carries.
type Kind uint8

const (
	// KindData is a buffer of whole encoded records.
	KindData Kind = iota
	// KindFragment is a piece of one record larger than a buffer; more
	// pieces follow on the same channel.
	KindFragment
	// KindFragmentEnd is the last piece of a fragmented record.
	KindFragmentEnd
	// KindEvent is an in-band event; Data is empty and the buffer is not
	// pooled.
	KindEvent
)

// EventKind names an in-band event.
type EventKind uint8

const (
	// EventEndOfPartition says the producer subtask will send nothing more on
	// this channel.
	EventEndOfPartition EventKind = iota + 1
	// EventWatermark carries an event-time watermark in Event.Timestamp.
	EventWatermark
	// EventBarrier is checkpoint barrier Event.ID.
	EventBarrier
	// EventCancelBarrier aborts checkpoint Event.ID downstream.
	EventCancelBarrier
	// EventWatermarkStatus says whether the producer is idle (Event.Idle):
	// an idle producer's watermark is ignored downstream until it is active
	// again.
	EventWatermarkStatus
	// EventEndOfData says the producer subtask will send no more records
	// (its input ended); checkpoint barriers and then EventEndOfPartition
	// may still follow, so a final checkpoint can commit what the records
	// produced.
	EventEndOfData
)

// String returns the event kind's name.
func (k EventKind) String() string {
	switch k {
	case EventEndOfPartition:
		return "EndOfPartition"
	case EventWatermark:
		return "Watermark"
	case EventBarrier:
		return "Barrier"
	case EventCancelBarrier:
		return "CancelBarrier"
	case EventWatermarkStatus:
		return "WatermarkStatus"
	case EventEndOfData:
		return "EndOfData"
	}
	return "Unknown"
}

// Event is an in-band control message.
type Event struct {
	Kind EventKind
	// ID is the checkpoint id of barriers.
	ID int64
	// Timestamp is the watermark, or the trigger time of a barrier in Unix
	// milliseconds.
	Timestamp int64
	// Checkpoint are the options of a barrier's checkpoint.
	Checkpoint checkpoint.Options
	// Priority events overtake buffers queued on their channel (unaligned
	// checkpoint barriers).
	Priority bool
	// Idle is the status of EventWatermarkStatus.
	Idle bool
}

// Buffer is one unit of transfer between subtasks. Data buffers come from a
// Pool and must be given back with Recycle by whoever consumed them; event
// buffers are not pooled.
type Buffer struct {
	// Data holds the encoded records; len is the bytes used, cap is the
	// segment size.
	Data []byte
	Kind Kind
	// Event is set when Kind is KindEvent.
	Event Event
	// Overtook is set by the receiving InputGate on a priority event: the
	// number of buffers received before it on its channel and not yet
	// polled, which it overtook (InputGate.Overtaken shows them).
	Overtook int

	pool *Pool
}

// NewEventBuffer returns an unpooled buffer carrying ev.
func NewEventBuffer(ev Event) *Buffer { return &Buffer{Kind: KindEvent, Event: ev} }

// IsData reports whether b holds record bytes (whole or fragment) and so
// occupies a credit and a pooled segment.
func (b *Buffer) IsData() bool { return b.Kind != KindEvent }

// Recycle returns a data buffer to its pool. It is a no-op for events. The
// caller must not touch b afterwards.
func (b *Buffer) Recycle() {
	if b.pool == nil {
		return
	}
	b.Data = b.Data[:0]
	b.Kind = KindData
	b.pool.free <- b
}

// Pool is a bounded set of equally sized buffers. Segments are allocated
// lazily, up to the pool's size, and never freed while the pool lives, so the
// memory a pool holds is at most Size()*SegmentSize().
//
// Request, TryRequest and Reserve must be called by one goroutine, the pool's
// owner (the producing task); Recycle may be called from any goroutine.
type Pool struct {
	free    chan *Buffer
	size    int
	segment int
	created atomic.Int64
	spare   *Buffer // a buffer taken by WaitAvailable, handed out first
}

// NewPool returns a pool of size buffers of segment bytes each.
func NewPool(size, segment int) *Pool {
	if size < 1 || segment < 1 {
		panic("network: pool size and segment must be positive")
	}
	return &Pool{free: make(chan *Buffer, size), size: size, segment: segment}
}

// Size is the maximum number of buffers.
func (p *Pool) Size() int { return p.size }

// SegmentSize is the capacity of each buffer in bytes.
func (p *Pool) SegmentSize() int { return p.segment }

// AllocatedBytes is the memory the pool's buffers occupy so far.
func (p *Pool) AllocatedBytes() int64 { return p.created.Load() * int64(p.segment) }

// InUse is the number of buffers handed out and not yet recycled.
func (p *Pool) InUse() int {
	n := int(p.created.Load()) - len(p.free)
	if p.spare != nil {
		n--
	}
	return n
}

// TryRequest returns a free buffer, or nil if every buffer is in use.
func (p *Pool) TryRequest() *Buffer {
	if b := p.spare; b != nil {
		p.spare = nil
		return b
	}
	select {
	case b := <-p.free:
		return b
	default:
	}
	if c := p.created.Load(); c < int64(p.size) {
		p.created.Store(c + 1)
		return &Buffer{Data: make([]byte, 0, p.segment), pool: p}
	}
	return nil
}

// Request returns a free buffer, waiting until a consumer recycles one or
// ctx ends.
func (p *Pool) Request(ctx context.Context) (*Buffer, error) {
	if b := p.TryRequest(); b != nil {
		return b, nil
	}
	select {
	case b := <-p.free:
		return b, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Available reports whether Request would return at once.
func (p *Pool) Available() bool {
	return p.spare != nil || len(p.free) > 0 || p.created.Load() < int64(p.size)
}

// WaitAvailable blocks until Request would return at once, or ctx ends.
func (p *Pool) WaitAvailable(ctx context.Context) error {
	_, err := p.WaitAvailableOr(ctx, nil)
	return err
}

// WaitAvailableOr is WaitAvailable that also returns, with interrupted set,
// when interrupt receives a value (the task's mailbox), so that a
// backpressured task can still serve control messages.
func (p *Pool) WaitAvailableOr(ctx context.Context, interrupt <-chan struct{}) (interrupted bool, err error) {
	if p.Available() {
		return false, nil
	}
	select {
	case b := <-p.free:
		p.spare = b
		return false, nil
	case <-interrupt:
		return true, nil
	case <-ctx.Done():
		return false, ctx.Err()
	}
}
