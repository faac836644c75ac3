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
	// EventAnnouncement is a priority event an InputGate makes when it
	// receives the barrier of an aligned checkpoint with a timeout
	// (checkpoint.Options.Timeoutable) behind data: it tells the consumer
	// at once that barrier Event.ID is coming on the channel, so the
	// consumer can time the alignment out (InputGate.PrioritizeBarrier)
	// before it reads up to the barrier. It carries the barrier's fields.
	EventAnnouncement
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
	case EventAnnouncement:
		return "Announcement"
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
	// sequence number of the last buffer its channel received in order
	// before it; those still queued are the ones it overtook
	// (InputGate.Overtaken shows them).
	Overtook int64

	pool *Pool
	seq  int64 // the channel's count of buffers received in order (gate)
}

// NewEventBuffer returns an unpooled buffer carrying ev.
func NewEventBuffer(ev Event) *Buffer { return &Buffer{Kind: KindEvent, Event: ev} }

// IsData reports whether b holds record bytes (whole or fragment) and so
// occupies a credit and a pooled segment.
func (b *Buffer) IsData() bool { return b.Kind != KindEvent }

// Recycle returns a data buffer to its pool. It is a no-op for events. The
// caller must not touch b afterwards.
func (b *Buffer) Recycle() {
	p := b.pool
	if p == nil {
		return
	}
	b.Data = b.Data[:0]
	b.Kind = KindData
	p.free <- b
	p.out.Add(-1) // after the buffer is in free: out >= created - len(free)
	select {
	case p.recycled <- struct{}{}:
	default:
	}
}

// Pool is a bounded set of equally sized buffers. Segments are allocated
// lazily, up to the pool's size plus its overdraft, and never freed while
// the pool lives, so the memory a pool holds is at most
// (Size()+Overdraft())*SegmentSize().
//
// Size bounds the buffers handed out for new work: Available is false and
// TryRequest returns nil once Size buffers are out. Overdraft buffers
// (Flink's taskmanager.network.memory.max-overdraft-buffers-per-gate) are
// lent beyond that by TryRequestOverdraft only, to a writer that is in the
// middle of a record or a source batch and would otherwise block there: a
// large record or a flatMap fan-out finishes, and with it the work before
// a barrier, instead of waiting for backpressure to ease. The task then
// starts no new work until the pool is below Size again.
//
// The request methods must be called by one goroutine, the pool's owner
// (the producing task); Recycle may be called from any goroutine.
type Pool struct {
	free      chan *Buffer
	recycled  chan struct{} // signalled after every Recycle
	size      int
	overdraft int
	segment   int
	created   atomic.Int64
	out       atomic.Int64 // handed out and not recycled yet
}

// NewPool returns a pool of size buffers of segment bytes each, without
// overdraft.
func NewPool(size, segment int) *Pool { return NewPoolOverdraft(size, 0, segment) }

// NewPoolOverdraft returns a pool of size buffers of segment bytes each
// that lends up to overdraft more (TryRequestOverdraft).
func NewPoolOverdraft(size, overdraft, segment int) *Pool {
	if size < 1 || segment < 1 || overdraft < 0 {
		panic("network: pool size and segment must be positive, overdraft not negative")
	}
	return &Pool{free: make(chan *Buffer, size+overdraft), recycled: make(chan struct{}, 1),
		size: size, overdraft: overdraft, segment: segment}
}

// Size is the number of buffers handed out for new work at most.
func (p *Pool) Size() int { return p.size }

// Overdraft is the number of buffers lent beyond Size at most.
func (p *Pool) Overdraft() int { return p.overdraft }

// SegmentSize is the capacity of each buffer in bytes.
func (p *Pool) SegmentSize() int { return p.segment }

// AllocatedBytes is the memory the pool's buffers occupy so far.
func (p *Pool) AllocatedBytes() int64 { return p.created.Load() * int64(p.segment) }

// InUse is the number of buffers handed out and not yet recycled,
// overdraft included.
func (p *Pool) InUse() int { return int(p.out.Load()) }

// TryRequest returns a free buffer, or nil if Size buffers are in use.
func (p *Pool) TryRequest() *Buffer { return p.take(p.size) }

// TryRequestOverdraft returns a free buffer, lending one of the overdraft
// if Size buffers are in use, or nil if Size+Overdraft are.
func (p *Pool) TryRequestOverdraft() *Buffer { return p.take(p.size + p.overdraft) }

// take hands out a buffer if fewer than limit are out. Since Recycle puts
// a buffer into free before it counts it back, out < limit means free has
// one or fewer than limit were created.
func (p *Pool) take(limit int) *Buffer {
	if p.out.Load() >= int64(limit) {
		return nil
	}
	select {
	case b := <-p.free:
		p.out.Add(1)
		return b
	default:
	}
	if c := p.created.Load(); c < int64(p.size+p.overdraft) {
		p.created.Store(c + 1)
		p.out.Add(1)
		return &Buffer{Data: make([]byte, 0, p.segment), pool: p}
	}
	return nil
}

// Request returns a free buffer, waiting until a consumer recycles one or
// ctx ends.
func (p *Pool) Request(ctx context.Context) (*Buffer, error) {
	for {
		if b := p.TryRequest(); b != nil {
			return b, nil
		}
		select {
		case <-p.recycled:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Available reports whether TryRequest would return a buffer.
func (p *Pool) Available() bool { return p.out.Load() < int64(p.size) }

// WaitAvailable blocks until Request would return at once, or ctx ends.
func (p *Pool) WaitAvailable(ctx context.Context) error {
	_, err := p.WaitAvailableOr(ctx, nil)
	return err
}

// WaitAvailableOr is WaitAvailable that also returns, with interrupted set,
// when interrupt receives a value (the task's mailbox), so that a
// backpressured task can still serve control messages.
func (p *Pool) WaitAvailableOr(ctx context.Context, interrupt <-chan struct{}) (interrupted bool, err error) {
	return p.waitOr(ctx, interrupt, p.size)
}

// WaitOverdraftOr is WaitAvailableOr for TryRequestOverdraft.
func (p *Pool) WaitOverdraftOr(ctx context.Context, interrupt <-chan struct{}) (interrupted bool, err error) {
	return p.waitOr(ctx, interrupt, p.size+p.overdraft)
}

func (p *Pool) waitOr(ctx context.Context, interrupt <-chan struct{}, limit int) (bool, error) {
	for p.out.Load() >= int64(limit) {
		select {
		case <-p.recycled:
		case <-interrupt:
			return true, nil
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
	return false, nil
}
