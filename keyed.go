package weir

import (
	"errors"
	"fmt"
	"log/slog"
	"reflect"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/graph"
	"github.com/weirstream/weir/internal/keyed"
	"github.com/weirstream/weir/internal/keygroup"
	"github.com/weirstream/weir/internal/network"
	"github.com/weirstream/weir/internal/operator"
	"github.com/weirstream/weir/internal/task"
	"github.com/weirstream/weir/internal/timer"
)

// KeyedStream is a stream partitioned by key: every record with the same key
// goes to the same subtask of the next operator, chosen by key group
// (murmur3 of the key's encoding modulo max parallelism). Operators on a
// keyed stream (KeyedProcess, Window) get keyed state and timers.
type KeyedStream[K, T any] struct {
	s        *DataStream[T]
	key      func(T) K
	keyCodec codec.Codec[K]
}

// keySelector is what a hash edge needs: the key bytes of a record.
type keySelector[T any] struct {
	encode func(dst []byte, v T) []byte
}

// channels returns, for a hash edge to consumers subtasks with maxP key
// groups, the function that maps a record to its consumer subtask. Each
// producer subtask calls it once and owns the returned function.
func (k *keySelector[T]) channels(consumers, maxP int) func(T) int {
	var buf []byte
	return func(v T) int {
		buf = k.encode(buf[:0], v)
		return keygroup.OperatorIndex(keygroup.Of(buf, maxP), maxP, consumers)
	}
}

// KeyBy partitions the stream by the key that key extracts. K must have a
// built-in codec (codec.For); use KeyByCodec otherwise.
func KeyBy[T, K any](s *DataStream[T], key func(T) K) *KeyedStream[K, T] {
	kc, ok := codec.For[K]()
	if !ok {
		s.env.errorf("KeyBy: key type %s has no built-in codec: use KeyByCodec", reflect.TypeFor[K]())
	}
	return KeyByCodec(s, key, kc)
}

// KeyByCodec is KeyBy with an explicit codec for the key; the key's encoding
// decides its key group, so it must be deterministic.
func KeyByCodec[T, K any](s *DataStream[T], key func(T) K, kc codec.Codec[K]) *KeyedStream[K, T] {
	out := s.withPartitioner(network.Hash)
	ks := &keySelector[T]{encode: func(dst []byte, v T) []byte { return kc.Append(dst, key(v)) }}
	for i := range out.ups {
		out.ups[i].key = ks
	}
	return &KeyedStream[K, T]{s: out, key: key, keyCodec: kc}
}

// Stream returns the partitioned stream for operators that need no keyed
// state: they still see every record of a key on one subtask.
func (ks *KeyedStream[K, T]) Stream() *DataStream[T] { return ks.s }

// Timer says which timer fired.
type Timer struct {
	// Timestamp is the time the timer was registered for (Unix ms).
	Timestamp int64
	// EventTime is true for event-time timers, false for processing-time
	// ones.
	EventTime bool
}

// KeyedProcessFunction handles the records of a keyed stream with keyed
// state and timers. It may also implement KeyedOpener, TimerHandler and
// Closer.
type KeyedProcessFunction[K, IN, OUT any] interface {
	ProcessElement(ctx *KeyedContext[K, OUT], v IN) error
}

// KeyedProcessFunc adapts a function to KeyedProcessFunction.
type KeyedProcessFunc[K, IN, OUT any] func(ctx *KeyedContext[K, OUT], v IN) error

// ProcessElement calls f.
func (f KeyedProcessFunc[K, IN, OUT]) ProcessElement(ctx *KeyedContext[K, OUT], v IN) error {
	return f(ctx, v)
}

// KeyedOpener is implemented by keyed functions that prepare themselves, and
// obtain their state handles, before the first record.
type KeyedOpener[K, OUT any] interface {
	Open(ctx *KeyedContext[K, OUT]) error
}

// TimerHandler is implemented by keyed functions that register timers.
// OnTimer runs with the timer's key as the current key.
type TimerHandler[K, OUT any] interface {
	OnTimer(ctx *KeyedContext[K, OUT], t Timer) error
}

// KeyedProcess applies a keyed function to every record of ks. newFn is
// called once per subtask; the value's fields belong to that subtask.
func KeyedProcess[K, IN, OUT any](ks *KeyedStream[K, IN], newFn func() KeyedProcessFunction[K, IN, OUT]) *DataStream[OUT] {
	env := ks.s.env
	return connect(ks.s, &graph.Node{Name: "KeyedProcess"}, newNodeImpl(func(ctx *task.OpContext, out network.Output[OUT]) (task.Built, error) {
		fn := newFn()
		if fn == nil {
			return task.Built{}, errors.New("KeyedProcess: the function factory returned nil")
		}
		op := &keyedProcessOp[K, IN, OUT]{fn: fn, key: ks.key}
		op.keyedOp = newKeyedOp(ctx, env, fn, ks.keyCodec, out)
		return task.Built{Op: op, Input: network.Output[IN](op)}, nil
	}))
}

type keyedProcessOp[K, IN, OUT any] struct {
	*keyedOp[K, OUT]
	fn  KeyedProcessFunction[K, IN, OUT]
	key func(IN) K
}

func (p *keyedProcessOp[K, IN, OUT]) Collect(v IN) {
	p.tr.Cur = p.id
	p.setKey(p.key(v))
	if err := p.fn.ProcessElement(p.kctx, v); err != nil {
		p.ctx.Fail(err)
	}
	p.tr.Cur = p.parent
}

// keyedOp is what every operator with keyed state and timers shares: the
// keyed runtime, the user function's context and its optional KeyedOpener,
// TimerHandler and Closer (fn).
type keyedOp[K, OUT any] struct {
	opBase
	fn       any
	keyCodec codec.Codec[K]
	rt       *keyed.Runtime
	kctx     *KeyedContext[K, OUT]
}

func newKeyedOp[K, OUT any](ctx *task.OpContext, env *Environment, fn any, kc codec.Codec[K], out network.Output[OUT]) *keyedOp[K, OUT] {
	op := &keyedOp[K, OUT]{opBase: newOpBase(ctx), fn: fn, keyCodec: kc}
	op.rt = keyed.New(ctx, env.keyedConfig, op.onTimer)
	keyed.SetKeyCodec(op.rt, kc)
	op.kctx = &KeyedContext[K, OUT]{rt: op.rt, op: ctx, out: out, ops: op.opState}
	return op
}

// setKey makes k the current key of state and timers.
func (p *keyedOp[K, OUT]) setKey(k K) {
	p.rt.SetKey(p.keyCodec.Append(p.rt.KeyBuf(), k))
	p.kctx.key = k
}

func (p *keyedOp[K, OUT]) Open() error {
	if err := p.rt.Open(); err != nil {
		return err
	}
	if o, ok := p.fn.(KeyedOpener[K, OUT]); ok {
		return o.Open(p.kctx)
	}
	return nil
}

func (p *keyedOp[K, OUT]) onTimer(t timer.Timer, eventTime bool) error {
	h, ok := p.fn.(TimerHandler[K, OUT])
	if !ok {
		return nil
	}
	k, _, err := p.keyCodec.Decode(t.Key)
	if err != nil {
		return fmt.Errorf("decode timer key: %w", err)
	}
	p.kctx.key = k
	return h.OnTimer(p.kctx, Timer{Timestamp: t.Timestamp, EventTime: eventTime})
}

// SnapshotState adds the keyed state and timers to the operator state.
func (p *keyedOp[K, OUT]) SnapshotState(id int64, opts checkpoint.Options) (task.OperatorSnapshot, error) {
	s, _ := p.opBase.SnapshotState(id, opts)
	return s, p.rt.Snapshot(id, opts, &s)
}

// NotifyCheckpointComplete implements task.CheckpointListener.
func (p *keyedOp[K, OUT]) NotifyCheckpointComplete(id int64) error {
	return p.rt.NotifyCheckpointComplete(id)
}

// NotifyCheckpointAborted implements task.CheckpointListener.
func (p *keyedOp[K, OUT]) NotifyCheckpointAborted(id int64) error {
	return p.rt.NotifyCheckpointAborted(id)
}

func (p *keyedOp[K, OUT]) ProcessWatermark(wm int64) error {
	return p.rt.AdvanceWatermark(wm)
}

func (p *keyedOp[K, OUT]) Close() error {
	var err error
	if c, ok := p.fn.(Closer); ok {
		err = c.Close()
	}
	return errors.Join(err, p.rt.Close())
}

// KeyedContext is what a keyed function sees of its subtask and its current
// key. It is owned by the subtask's goroutine.
type KeyedContext[K, OUT any] struct {
	rt  *keyed.Runtime
	op  *task.OpContext
	out network.Output[OUT]
	key K
	ops *operator.State
}

func (c *KeyedContext[K, OUT]) operatorState() *operator.State { return c.ops }

// Emit sends v downstream, with the current record's (or timer's)
// timestamp.
func (c *KeyedContext[K, OUT]) Emit(v OUT) { c.out.Collect(v) }

// CurrentKey is the key of the record (or timer) being processed.
func (c *KeyedContext[K, OUT]) CurrentKey() K { return c.key }

// Timestamp is the event time of the record being processed (in OnTimer:
// the time of an event-time timer; none for a processing-time timer), and
// false if there is none.
func (c *KeyedContext[K, OUT]) Timestamp() (int64, bool) {
	ts := c.op.Tracker.Timestamp
	return ts, ts != task.NoTimestamp
}

// CurrentWatermark is the operator's current event time (math.MinInt64
// before the first watermark).
func (c *KeyedContext[K, OUT]) CurrentWatermark() int64 { return c.op.CurrentWatermark() }

// CurrentProcessingTime is the processing time in Unix milliseconds.
func (c *KeyedContext[K, OUT]) CurrentProcessingTime() int64 { return c.op.Now().UnixMilli() }

// RegisterEventTimeTimer makes OnTimer run for the current key once the
// watermark reaches ts. Registering the same time twice keeps one timer.
func (c *KeyedContext[K, OUT]) RegisterEventTimeTimer(ts int64) {
	c.rt.RegisterEventTime(ts, nil)
}

// DeleteEventTimeTimer removes an event-time timer of the current key.
func (c *KeyedContext[K, OUT]) DeleteEventTimeTimer(ts int64) {
	c.rt.DeleteEventTime(ts, nil)
}

// RegisterProcessingTimeTimer makes OnTimer run for the current key once
// processing time reaches ts (Unix ms).
func (c *KeyedContext[K, OUT]) RegisterProcessingTimeTimer(ts int64) {
	c.rt.RegisterProcessingTime(ts, nil)
}

// DeleteProcessingTimeTimer removes a processing-time timer of the current
// key.
func (c *KeyedContext[K, OUT]) DeleteProcessingTimeTimer(ts int64) {
	c.rt.DeleteProcessingTime(ts, nil)
}

// Subtask is the index of this parallel instance.
func (c *KeyedContext[K, OUT]) Subtask() int { return c.op.Subtask }

// Parallelism is the operator's number of subtasks.
func (c *KeyedContext[K, OUT]) Parallelism() int { return c.op.Parallelism }

// Logger returns a logger that names the job, operator and subtask.
func (c *KeyedContext[K, OUT]) Logger() *slog.Logger { return c.op.Logger }

func (c *KeyedContext[K, OUT]) keyedRuntime() *keyed.Runtime { return c.rt }
