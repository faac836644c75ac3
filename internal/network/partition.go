package network

import (
	"context"
	"fmt"
	"sync/atomic"
)

// CanceledError is the panic value of a writer whose context ended while it
// waited for a free buffer. The task that owns the writer recovers it and
// ends with Err. The partition also keeps it (Err), so a user function that
// recovers everything cannot make the task carry on: every later wait for a
// buffer panics again at once, and the task checks Err when the user function
// returns.
type CanceledError struct{ Err error }

// Error says the wait for a buffer was canceled.
func (e *CanceledError) Error() string {
	return "network: canceled while waiting for a buffer: " + e.Err.Error()
}

// Unwrap returns the context's error.
func (e *CanceledError) Unwrap() error { return e.Err }

// YieldError is the panic value of a writer whose task's urgent work, run
// while the writer waited for a free buffer (Yielder), failed with Err. Like
// a CanceledError it is kept by the partition (Err).
type YieldError struct{ Err error }

// Error returns the urgent work's error.
func (e *YieldError) Error() string { return e.Err.Error() }

// Unwrap returns the urgent work's error.
func (e *YieldError) Unwrap() error { return e.Err }

// Yielder lets a writer that is blocked on a full pool, possibly in the
// middle of a user function, serve urgent work of its task (priority events:
// an unaligned checkpoint barrier must reach a backpressured task).
type Yielder interface {
	// Urgent returns a channel that receives a value after urgent work
	// was queued. Wake-ups may be spurious.
	Urgent() <-chan struct{}
	// RunUrgent runs the queued urgent work on the calling goroutine, the
	// task's. It must not emit records. An error stops the writer with a
	// *YieldError.
	RunUrgent() error
}

// ResultPartition is the sending end of a producer subtask on one output
// edge: one subpartition per consumer subtask, each with at most one
// partially filled buffer. It is owned by the producing task's goroutine.
type ResultPartition struct {
	ctx     context.Context
	pool    *Pool
	targets []Target
	cur     []*Buffer
	sent    int64
	yield   Yielder
	// exhausted, if set, is set when the pool's regular buffers ran out
	// (SetExhaustedFlag).
	exhausted *atomic.Bool
	stopped   error // *CanceledError or *YieldError: writers panic with it

	observer BackpressureObserver // metrics.go
	limits   []*atomic.Int32      // per subpartition: the buffer size its consumer announced (debloat.go)

	// records and bytes count what the partition carried, for metrics:
	// records written (a broadcast record once) and bytes of data buffers
	// sent. Plain fields: the owning task's goroutine writes and reads them.
	records, bytes int64
}

// NewResultPartition returns a partition sending to targets with buffers from
// pool. Waits for buffers end when ctx does.
func NewResultPartition(ctx context.Context, pool *Pool, targets []Target) *ResultPartition {
	return &ResultPartition{ctx: ctx, pool: pool, targets: targets, cur: make([]*Buffer, len(targets)),
		limits: bufferSizeLimits(targets)}
}

// SetExhaustedFlag makes the partition set f whenever a writer found the
// pool's regular buffers used up in the middle of a record: the owning task
// then stops reading its input buffer after the record (ReadFrom) and waits
// for free buffers at the record boundary, where it can take a checkpoint,
// instead of starting the next record in overdraft.
func (rp *ResultPartition) SetExhaustedFlag(f *atomic.Bool) { rp.exhausted = f }

// SetYielder makes writers blocked on a full pool serve y's urgent work.
func (rp *ResultPartition) SetYielder(y Yielder) { rp.yield = y }

// Err returns why the partition's writers stopped (a *CanceledError or a
// *YieldError), or nil. Once set it stays: the owning task must end.
func (rp *ResultPartition) Err() error { return rp.stopped }

// NumSubpartitions is the number of consumer subtasks.
func (rp *ResultPartition) NumSubpartitions() int { return len(rp.targets) }

// Pool returns the partition's buffer pool.
func (rp *ResultPartition) Pool() *Pool { return rp.pool }

// BuffersSent is the number of data buffers sent so far.
func (rp *ResultPartition) BuffersSent() int64 { return rp.sent }

// RecordsWritten is the number of records written so far by the
// partition's RecordWriters, a broadcast record counted once. Only the
// owning task's goroutine may call it.
func (rp *ResultPartition) RecordsWritten() int64 { return rp.records }

// BytesSent is the number of bytes of data buffers sent so far. Only the
// owning task's goroutine may call it.
func (rp *ResultPartition) BytesSent() int64 { return rp.bytes }

func (rp *ResultPartition) request() *Buffer {
	if rp.stopped == nil {
		if b := rp.pool.TryRequest(); b != nil {
			return b
		}
	}
	return rp.requestSlow()
}

// requestSlow takes an overdraft buffer or waits for a free one, serving
// urgent work meanwhile, and panics with the partition's stop error if it
// cannot have one.
func (rp *ResultPartition) requestSlow() *Buffer {
	if rp.exhausted != nil {
		rp.exhausted.Store(true)
	}
	observed := false
	defer func() {
		if observed {
			rp.observer.BackpressureEnded()
		}
	}()
	for rp.stopped == nil {
		// In the middle of a record or batch: an overdraft buffer lets
		// it finish instead of waiting for the consumers.
		if b := rp.pool.TryRequestOverdraft(); b != nil {
			return b
		}
		if rp.observer != nil && !observed {
			observed = true
			rp.observer.BackpressureStarted()
		}
		var urgent <-chan struct{}
		if rp.yield != nil {
			urgent = rp.yield.Urgent()
		}
		interrupted, err := rp.pool.WaitOverdraftOr(rp.ctx, urgent)
		switch {
		case err != nil:
			rp.stopped = &CanceledError{Err: err}
		case interrupted:
			if err := rp.yield.RunUrgent(); err != nil {
				rp.stopped = &YieldError{Err: err}
			}
		}
	}
	panic(rp.stopped)
}

func (rp *ResultPartition) send(sub int, b *Buffer) {
	rp.sent++
	rp.bytes += int64(len(b.Data))
	rp.targets[sub].Send(b)
}

// Flush sends every partially filled buffer.
func (rp *ResultPartition) Flush() {
	for sub, b := range rp.cur {
		if b != nil && len(b.Data) > 0 {
			rp.cur[sub] = nil
			rp.send(sub, b)
		}
	}
}

// BroadcastEvent flushes every subpartition and then sends ev on each, so the
// event follows every record written before it, or, if it is a priority
// event, overtakes them.
func (rp *ResultPartition) BroadcastEvent(ev Event) { rp.BroadcastPriorityEvent(ev, nil) }

// BroadcastPriorityEvent is BroadcastEvent that, for a priority event,
// shows overtaken every data buffer the event overtook on subpartition sub
// (see Target.SendPriority): the output channel state of an unaligned
// checkpoint. Partially filled buffers are sent first, so they are among
// the overtaken.
func (rp *ResultPartition) BroadcastPriorityEvent(ev Event, overtaken func(sub int, b *Buffer)) {
	rp.Flush()
	for sub := range rp.targets {
		if !ev.Priority {
			rp.targets[sub].Send(NewEventBuffer(ev))
			continue
		}
		var fn func(*Buffer)
		if overtaken != nil {
			fn = func(b *Buffer) { overtaken(sub, b) }
		}
		rp.targets[sub].SendPriority(NewEventBuffer(ev), fn)
	}
}

// barrierPrioritizer is implemented by targets that can move a queued
// barrier ahead (PipelinedSubpartition).
type barrierPrioritizer interface {
	BarrierQueued(id int64) bool
	PrioritizeBarrier(id int64, overtaken func(*Buffer)) bool
}

// BarrierQueued reports whether barrier id still waits in a subpartition.
// Unlike the writing methods it may be called from any goroutine.
func (rp *ResultPartition) BarrierQueued(id int64) bool {
	for _, t := range rp.targets {
		if p, ok := t.(barrierPrioritizer); ok && p.BarrierQueued(id) {
			return true
		}
	}
	return false
}

// PrioritizeBarrier moves barrier id ahead of the data queued before it in
// every subpartition where it still waits (PipelinedSubpartition), showing
// overtaken the data buffers it overtook, and returns how many it moved.
// It may be called from any goroutine.
func (rp *ResultPartition) PrioritizeBarrier(id int64, overtaken func(sub int, b *Buffer)) int {
	n := 0
	for sub, t := range rp.targets {
		p, ok := t.(barrierPrioritizer)
		if ok && p.PrioritizeBarrier(id, func(b *Buffer) { overtaken(sub, b) }) {
			n++
		}
	}
	return n
}

// Close gives partially filled buffers back to the pool without sending them
// (used when the task fails or is canceled).
func (rp *ResultPartition) Close() {
	for sub, b := range rp.cur {
		if b != nil {
			rp.cur[sub] = nil
			b.Recycle()
		}
	}
}

// appendEncoded appends one already encoded record to subpartition sub.
func (rp *ResultPartition) appendEncoded(sub int, rec []byte) {
	b := rp.cur[sub]
	if b == nil {
		b = rp.request()
		rp.cur[sub] = b
	}
	if len(b.Data)+len(rec) <= cap(b.Data) {
		b.Data = append(b.Data, rec...)
		if rp.reachedLimit(sub, len(b.Data)) {
			rp.cut(sub)
		}
		return
	}
	rp.overflow(sub, len(b.Data), rec)
}

// overflow places record rec, which did not fit behind the first n bytes of
// subpartition sub's current buffer, into fresh buffers: whole if it fits in
// one, else as fragments. rp.cur[sub] never points at a buffer already sent,
// so that Close after a canceled request recycles only what is still ours.
func (rp *ResultPartition) overflow(sub, n int, rec []byte) {
	b := rp.cur[sub]
	b.Data = b.Data[:n]
	if n > 0 {
		rp.cur[sub] = nil
		rp.send(sub, b)
		b = rp.request()
		rp.cur[sub] = b
	}
	seg := cap(b.Data)
	if len(rec) <= seg {
		b.Data = append(b.Data, rec...)
		if rp.reachedLimit(sub, len(b.Data)) {
			rp.cut(sub)
		}
		return
	}
	for {
		k := min(seg, len(rec))
		b.Data = append(b.Data[:0], rec[:k]...)
		rec = rec[k:]
		rp.cur[sub] = nil
		if len(rec) == 0 {
			b.Kind = KindFragmentEnd
			rp.send(sub, b)
			return
		}
		b.Kind = KindFragment
		rp.send(sub, b)
		b = rp.request()
		rp.cur[sub] = b
	}
}

// Encoder is the part of a codec a RecordWriter needs.
type Encoder[T any] interface {
	Append(dst []byte, v T) []byte
}

// RecordWriter serializes records of type T into a ResultPartition.
type RecordWriter[T any] struct {
	rp      *ResultPartition
	enc     Encoder[T]
	scratch []byte
	// slack is the free space below which a record is encoded into scratch
	// and copied, instead of straight into the buffer: appending past a
	// buffer's capacity would make append allocate a bigger array. It grows
	// to the largest record seen.
	slack int
}

const minSlack = 256

// NewRecordWriter returns a writer encoding with enc into rp.
func NewRecordWriter[T any](rp *ResultPartition, enc Encoder[T]) *RecordWriter[T] {
	return &RecordWriter[T]{rp: rp, enc: enc, slack: minSlack}
}

// Partition returns the writer's result partition.
func (w *RecordWriter[T]) Partition() *ResultPartition { return w.rp }

// Emit appends v to subpartition sub. It blocks while the pool has no free
// buffer (backpressure), serving the task's urgent work meanwhile
// (SetYielder), and panics with *CanceledError if the partition's context
// ends, or *YieldError if the urgent work fails; after either, every wait
// for a buffer panics at once (Err).
func (w *RecordWriter[T]) Emit(sub int, v T) {
	rp := w.rp
	rp.records++
	b := rp.cur[sub]
	if b == nil {
		b = rp.request()
		rp.cur[sub] = b
	}
	n := len(b.Data)
	if cap(b.Data)-n < w.slack {
		w.scratch = w.enc.Append(w.scratch[:0], v)
		w.slack = max(w.slack, min(len(w.scratch), cap(b.Data)))
		rp.appendEncoded(sub, w.scratch)
		return
	}
	d := w.enc.Append(b.Data, v)
	if cap(d) == cap(b.Data) { // fits: append did not reallocate
		b.Data = b.Data[:len(d)] // same array: store the length only, no write barrier
		if rp.reachedLimit(sub, len(d)) {
			rp.cut(sub)
		}
		return
	}
	w.slack = max(w.slack, min(len(d)-n, cap(b.Data)))
	rp.overflow(sub, n, d[n:])
}

// Broadcast appends v to every subpartition, encoding it once.
func (w *RecordWriter[T]) Broadcast(v T) {
	w.rp.records++
	w.scratch = w.enc.Append(w.scratch[:0], v)
	for sub := range w.rp.targets {
		w.rp.appendEncoded(sub, w.scratch)
	}
}

// Output receives records; operators and writers implement it.
type Output[T any] interface {
	Collect(v T)
}

// Decoder is the part of a codec a RecordReader needs.
type Decoder[T any] interface {
	Decode(src []byte) (T, int, error)
}

// BufferReader turns received data buffers back into records. Read is called
// by the consumer task with the gate channel the buffer came from.
type BufferReader interface {
	Read(ch int, b *Buffer) error
	// ReadFrom reads b from byte offset off on and may stop early, after a
	// whole record, once stop is set; it returns where it stopped
	// (len(b.Data): at the end). See RecordReader.ReadFrom.
	ReadFrom(ch int, b *Buffer, off int, stop *atomic.Bool) (int, error)
	// Pending returns the fragments of a record partly read on ch, which
	// the reader holds until the record's last fragment (nil if none).
	Pending(ch int) []byte
}

// RecordReader decodes buffers of records of type T and passes each record
// to an Output.
type RecordReader[T any] struct {
	dec   Decoder[T]
	out   Output[T]
	frags map[int][]byte // per channel: fragments of a record being reassembled
	// records counts the records passed on, for metrics (Records).
	records int64
}

var _ BufferReader = (*RecordReader[int])(nil)

// NewRecordReader returns a reader decoding with dec into out.
func NewRecordReader[T any](dec Decoder[T], out Output[T]) *RecordReader[T] {
	return &RecordReader[T]{dec: dec, out: out}
}

// Records is the number of records the reader passed on so far. Only the
// goroutine that reads may call it.
func (r *RecordReader[T]) Records() int64 { return r.records }

// Pending returns the bytes of the fragments of a record read so far on
// channel ch whose last fragment has not come yet (nil if none): in flight
// like the buffers still to come, so an unaligned checkpoint persists
// them. The caller must not modify them.
func (r *RecordReader[T]) Pending(ch int) []byte { return r.frags[ch] }

// Read decodes every record of data buffer b, received on channel ch.
func (r *RecordReader[T]) Read(ch int, b *Buffer) error {
	_, err := r.ReadFrom(ch, b, 0, nil)
	return err
}

// ReadFrom decodes the records of b from byte offset off on, and stops
// early, after a whole record, once stop is set (nil: never): a priority
// event wants the task. It returns the offset it stopped at, len(b.Data)
// when it read everything. Fragments are read whole.
func (r *RecordReader[T]) ReadFrom(ch int, b *Buffer, off int, stop *atomic.Bool) (int, error) {
	switch b.Kind {
	case KindData:
		data := b.Data[off:]
		for len(data) > 0 {
			v, n, err := r.dec.Decode(data)
			if err != nil {
				return len(b.Data) - len(data), fmt.Errorf("decode record on channel %d: %w", ch, err)
			}
			data = data[n:]
			r.records++
			r.out.Collect(v)
			if stop != nil && len(data) > 0 && stop.Load() {
				return len(b.Data) - len(data), nil
			}
		}
	case KindFragment:
		if r.frags == nil {
			r.frags = make(map[int][]byte)
		}
		r.frags[ch] = append(r.frags[ch], b.Data...)
	case KindFragmentEnd:
		rec := append(r.frags[ch], b.Data...)
		delete(r.frags, ch)
		v, n, err := r.dec.Decode(rec)
		if err != nil {
			return len(b.Data), fmt.Errorf("decode fragmented record on channel %d: %w", ch, err)
		}
		if n != len(rec) {
			return len(b.Data), fmt.Errorf("decode fragmented record on channel %d: %d trailing bytes", ch, len(rec)-n)
		}
		r.records++
		r.out.Collect(v)
	default:
		return len(b.Data), fmt.Errorf("network: reader got a %v buffer", b.Kind)
	}
	return len(b.Data), nil
}
