package weir

import (
	"errors"
	"time"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/graph"
	"github.com/weirstream/weir/internal/keyed"
	"github.com/weirstream/weir/internal/network"
	"github.com/weirstream/weir/internal/task"
	"github.com/weirstream/weir/internal/window"
)

// TimeWindow is the half-open interval [Start, End) of Unix milliseconds.
type TimeWindow struct {
	Start, End int64
}

// MaxTimestamp is the last millisecond in the window, the timestamp of its
// results.
func (w TimeWindow) MaxTimestamp() int64 { return w.End - 1 }

// WindowAssigner decides which windows a record belongs to, by its event
// time or by processing time. Build one with the Tumbling, Sliding and
// Session constructors.
type WindowAssigner struct {
	a window.Assigner
}

// TumblingEventTimeWindows assigns each record to the one window of length
// size that contains its timestamp; windows start at multiples of size
// (plus an offset, see WithOffset) since the epoch.
func TumblingEventTimeWindows(size time.Duration) WindowAssigner {
	return WindowAssigner{window.Assigner{Kind: window.Tumbling, Size: size.Milliseconds(), Slide: size.Milliseconds(), EventTime: true}}
}

// TumblingProcessingTimeWindows is TumblingEventTimeWindows on processing
// time.
func TumblingProcessingTimeWindows(size time.Duration) WindowAssigner {
	a := TumblingEventTimeWindows(size)
	a.a.EventTime = false
	return a
}

// SlidingEventTimeWindows assigns each record to the size/slide windows of
// length size, starting every slide, that contain its timestamp.
func SlidingEventTimeWindows(size, slide time.Duration) WindowAssigner {
	return WindowAssigner{window.Assigner{Kind: window.Sliding, Size: size.Milliseconds(), Slide: slide.Milliseconds(), EventTime: true}}
}

// SlidingProcessingTimeWindows is SlidingEventTimeWindows on processing
// time.
func SlidingProcessingTimeWindows(size, slide time.Duration) WindowAssigner {
	a := SlidingEventTimeWindows(size, slide)
	a.a.EventTime = false
	return a
}

// EventTimeSessionWindows groups a key's records into sessions: a record
// opens the window [ts, ts+gap), and windows that overlap or touch merge.
func EventTimeSessionWindows(gap time.Duration) WindowAssigner {
	return WindowAssigner{window.Assigner{Kind: window.Session, Gap: gap.Milliseconds(), EventTime: true}}
}

// ProcessingTimeSessionWindows is EventTimeSessionWindows on processing
// time.
func ProcessingTimeSessionWindows(gap time.Duration) WindowAssigner {
	a := EventTimeSessionWindows(gap)
	a.a.EventTime = false
	return a
}

// WithOffset shifts tumbling and sliding windows by offset (for example to
// align daily windows with a time zone).
func (a WindowAssigner) WithOffset(offset time.Duration) WindowAssigner {
	a.a.Offset = offset.Milliseconds()
	return a
}

// WindowedStream is a keyed stream cut into windows; apply a window
// function (Reduce, Aggregate, ProcessWindow, ...) to get the results.
type WindowedStream[K, T any] struct {
	ks       *KeyedStream[K, T]
	assigner WindowAssigner
	lateness int64
	// node and late are set once a window function is applied.
	node *graph.Node
	impl interface{ addSide(sideOutput) int }
	late *DataStream[T]
}

// Window cuts a keyed stream into the windows a assigns.
func Window[K, T any](ks *KeyedStream[K, T], a WindowAssigner) *WindowedStream[K, T] {
	if err := a.a.Validate(); err != nil {
		ks.s.env.errorf("Window: %v", err)
	}
	return &WindowedStream[K, T]{ks: ks, assigner: a}
}

// AllowedLateness keeps event-time windows for d after their end: a record
// that arrives late, but by no more than d, updates the window and fires it
// again. Default 0.
func (w *WindowedStream[K, T]) AllowedLateness(d time.Duration) *WindowedStream[K, T] {
	if d < 0 {
		w.ks.s.env.errorf("AllowedLateness %v must not be negative", d)
	}
	w.lateness = d.Milliseconds()
	return w
}

// LateData returns the records dropped for arriving after their windows'
// allowed lateness (Flink's sideOutputLateData). Call it after applying the
// window function; records nobody reads are dropped.
func LateData[K, T any](w *WindowedStream[K, T]) *DataStream[T] {
	env := w.ks.s.env
	if w.node == nil {
		env.errorf("LateData: apply a window function (Reduce, Aggregate, ProcessWindow) first")
		return &DataStream[T]{env: env}
	}
	if w.late == nil {
		side := newOutputImpl[T]()
		side.like = w.ks.s.ups[0].out
		idx := w.impl.addSide(side)
		w.late = &DataStream[T]{env: env, ups: []upstream[T]{{node: w.node, output: idx, out: side}}}
	}
	return w.late
}

func (n *nodeImpl[OUT]) addSide(s sideOutput) int {
	n.sides = append(n.sides, s)
	return len(n.sides)
}

// ProcessWindowFunction computes a window's results from all its records.
type ProcessWindowFunction[K, IN, OUT any] interface {
	Process(ctx *WindowContext[K, OUT], window TimeWindow, elements []IN) error
}

// ProcessWindowFunc adapts a function to ProcessWindowFunction.
type ProcessWindowFunc[K, IN, OUT any] func(ctx *WindowContext[K, OUT], window TimeWindow, elements []IN) error

// Process calls f.
func (f ProcessWindowFunc[K, IN, OUT]) Process(ctx *WindowContext[K, OUT], window TimeWindow, elements []IN) error {
	return f(ctx, window, elements)
}

// WindowContext is what a window function sees when a window fires.
type WindowContext[K, OUT any] struct {
	key  K
	emit func(OUT)
	op   *task.OpContext
}

// Emit sends v downstream with the window's max timestamp.
func (c *WindowContext[K, OUT]) Emit(v OUT) { c.emit(v) }

// Key is the key whose window fired.
func (c *WindowContext[K, OUT]) Key() K { return c.key }

// CurrentWatermark is the operator's current event time.
func (c *WindowContext[K, OUT]) CurrentWatermark() int64 { return c.op.CurrentWatermark() }

// Reduce folds each window's records with reduce and emits one result per
// window firing.
func Reduce[K, T any](w *WindowedStream[K, T], reduce func(a, b T) T) *DataStream[T] {
	return ReduceWindows(w, reduce, func(_ K, _ TimeWindow, v T) T { return v })
}

// ReduceWindows is Reduce with the key and window passed to result, which
// makes the emitted record.
func ReduceWindows[K, T, OUT any](w *WindowedStream[K, T], reduce func(a, b T) T, result func(key K, window TimeWindow, v T) OUT) *DataStream[OUT] {
	in := w.ks.s.ups[0].out
	return applyWindow(w, "Window(Reduce)", func(_ *task.OpContext, rt *keyed.Runtime, emit func(OUT)) (window.Contents[K, T], error) {
		return window.NewReduce(rt, in.codecOf(), reduce,
			func(k K, w window.Window, v T) OUT { return result(k, TimeWindow(w), v) }, emit)
	})
}

// Aggregate aggregates each window's records with agg and emits the result
// per window firing. The accumulator needs a codec (codec.For[ACC] when
// ACC is a basic type) with the Pebble backend; AggregateWithCodec sets one.
func Aggregate[K, IN, ACC, OUT any](w *WindowedStream[K, IN], agg AggregateFunction[IN, ACC, OUT]) *DataStream[OUT] {
	return AggregateWindows(w, agg, nil, func(_ K, _ TimeWindow, v OUT) OUT { return v })
}

// AggregateWindows is Aggregate with an accumulator codec (nil means
// codec.For[ACC]) and the key and window passed to result, which makes the
// emitted record.
func AggregateWindows[K, IN, ACC, R, OUT any](w *WindowedStream[K, IN], agg AggregateFunction[IN, ACC, R], accCodec codec.Codec[ACC], result func(key K, window TimeWindow, v R) OUT) *DataStream[OUT] {
	if accCodec == nil {
		var ok bool
		if accCodec, ok = codec.For[ACC](); !ok {
			w.ks.s.env.errorf("Aggregate: the accumulator type %s has no built-in codec: pass one to AggregateWindows", typeNameOf[ACC]())
		}
	}
	return applyWindow(w, "Window(Aggregate)", func(_ *task.OpContext, rt *keyed.Runtime, emit func(OUT)) (window.Contents[K, IN], error) {
		return window.NewAggregate[K, IN, ACC, R, OUT](rt, accCodec, agg,
			func(k K, w window.Window, v R) OUT { return result(k, TimeWindow(w), v) }, emit)
	})
}

// ProcessWindow calls fn with all records of each window when it fires.
// newFn is called once per subtask.
func ProcessWindow[K, IN, OUT any](w *WindowedStream[K, IN], newFn func() ProcessWindowFunction[K, IN, OUT]) *DataStream[OUT] {
	in := w.ks.s.ups[0].out
	return applyWindow(w, "Window(Process)", func(op *task.OpContext, rt *keyed.Runtime, emit func(OUT)) (window.Contents[K, IN], error) {
		fn := newFn()
		if fn == nil {
			return nil, errors.New("ProcessWindow: the function factory returned nil")
		}
		ctx := &WindowContext[K, OUT]{emit: emit, op: op}
		return window.NewProcess(rt, in.codecOf(), func(key K, w window.Window, vs []IN) error {
			ctx.key = key
			return fn.Process(ctx, TimeWindow(w), vs)
		})
	})
}

func applyWindow[K, IN, OUT any](w *WindowedStream[K, IN], name string,
	newContents func(op *task.OpContext, rt *keyed.Runtime, emit func(OUT)) (window.Contents[K, IN], error)) *DataStream[OUT] {
	env := w.ks.s.env
	if w.node != nil {
		env.errorf("%s: a WindowedStream takes one window function", name)
	}
	impl := &nodeImpl[OUT]{main: newOutputImpl[OUT]()}
	impl.build = func(ctx *task.OpContext, outs []any) (task.Built, error) {
		out := outs[0].(network.Output[OUT])
		var late network.Output[IN]
		if len(outs) > 1 {
			late = outs[1].(network.Output[IN])
		}
		spec := window.Spec[K, IN]{Key: w.ks.key, KeyCodec: w.ks.keyCodec, Assigner: w.assigner.a, Lateness: w.lateness}
		op := &windowOp[K, IN]{opBase: newOpBase(ctx)}
		op.w = window.New(ctx, env.keyedConfig, spec, late, func(rt *keyed.Runtime) (window.Contents[K, IN], error) {
			return newContents(ctx, rt, out.Collect)
		})
		return task.Built{Op: op, Input: network.Output[IN](op)}, nil
	}
	out := connect(w.ks.s, &graph.Node{Name: name}, impl)
	w.node = out.ups[0].node
	w.impl = impl
	return out
}

// windowOp is the window operator of one subtask (see internal/window).
type windowOp[K, IN any] struct {
	opBase
	w *window.Operator[K, IN]
}

func (o *windowOp[K, IN]) Open() error  { return o.w.Open() }
func (o *windowOp[K, IN]) Close() error { return o.w.Close() }

func (o *windowOp[K, IN]) Collect(v IN) {
	o.tr.Cur = o.id
	if err := o.w.Process(v); err != nil {
		o.ctx.Fail(err)
	}
	o.tr.Cur = o.parent
}

// SnapshotState adds the window contents (keyed state) and timers.
func (o *windowOp[K, IN]) SnapshotState(id int64, opts checkpoint.Options) (task.OperatorSnapshot, error) {
	s, _ := o.opBase.SnapshotState(id, opts)
	return s, o.w.Runtime().Snapshot(id, opts, &s)
}

// NotifyCheckpointComplete implements task.CheckpointListener.
func (o *windowOp[K, IN]) NotifyCheckpointComplete(id int64) error {
	return o.w.Runtime().NotifyCheckpointComplete(id)
}

// NotifyCheckpointAborted implements task.CheckpointListener.
func (o *windowOp[K, IN]) NotifyCheckpointAborted(id int64) error {
	return o.w.Runtime().NotifyCheckpointAborted(id)
}

func (o *windowOp[K, IN]) ProcessWatermark(wm int64) error { return o.w.Runtime().AdvanceWatermark(wm) }
