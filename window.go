package weir

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/graph"
	"github.com/weirstream/weir/internal/network"
	"github.com/weirstream/weir/internal/state"
	"github.com/weirstream/weir/internal/task"
	"github.com/weirstream/weir/internal/timer"
)

// TimeWindow is the half-open interval [Start, End) of Unix milliseconds.
type TimeWindow struct {
	Start, End int64
}

// MaxTimestamp is the last millisecond in the window, the timestamp of its
// results.
func (w TimeWindow) MaxTimestamp() int64 { return w.End - 1 }

// intersects reports whether w and o overlap or touch (Flink's rule for
// merging session windows).
func (w TimeWindow) intersects(o TimeWindow) bool { return w.Start <= o.End && w.End >= o.Start }

func (w TimeWindow) cover(o TimeWindow) TimeWindow {
	return TimeWindow{Start: min(w.Start, o.Start), End: max(w.End, o.End)}
}

// namespace encodes w as the state namespace of its contents.
func (w TimeWindow) namespace(dst []byte) []byte {
	dst = binary.BigEndian.AppendUint64(dst, uint64(w.Start))
	return binary.BigEndian.AppendUint64(dst, uint64(w.End))
}

func windowFromNamespace(ns []byte) TimeWindow {
	return TimeWindow{Start: int64(binary.BigEndian.Uint64(ns)), End: int64(binary.BigEndian.Uint64(ns[8:]))}
}

var timeWindowCodec = codec.Func(
	func(dst []byte, w TimeWindow) []byte { return w.namespace(dst) },
	func(src []byte) (TimeWindow, int, error) {
		if len(src) < 16 {
			return TimeWindow{}, 0, codec.ErrCorrupt
		}
		return windowFromNamespace(src), 16, nil
	})

type windowKind uint8

const (
	tumbling windowKind = iota + 1
	sliding
	session
)

// WindowAssigner decides which windows a record belongs to, by its event
// time or by processing time. Build one with the Tumbling, Sliding and
// Session constructors.
type WindowAssigner struct {
	kind                     windowKind
	size, slide, offset, gap int64 // milliseconds
	eventTime                bool
}

// TumblingEventTimeWindows assigns each record to the one window of length
// size that contains its timestamp; windows start at multiples of size
// (plus an offset, see WithOffset) since the epoch.
func TumblingEventTimeWindows(size time.Duration) WindowAssigner {
	return WindowAssigner{kind: tumbling, size: size.Milliseconds(), slide: size.Milliseconds(), eventTime: true}
}

// TumblingProcessingTimeWindows is TumblingEventTimeWindows on processing
// time.
func TumblingProcessingTimeWindows(size time.Duration) WindowAssigner {
	a := TumblingEventTimeWindows(size)
	a.eventTime = false
	return a
}

// SlidingEventTimeWindows assigns each record to the size/slide windows of
// length size, starting every slide, that contain its timestamp.
func SlidingEventTimeWindows(size, slide time.Duration) WindowAssigner {
	return WindowAssigner{kind: sliding, size: size.Milliseconds(), slide: slide.Milliseconds(), eventTime: true}
}

// SlidingProcessingTimeWindows is SlidingEventTimeWindows on processing
// time.
func SlidingProcessingTimeWindows(size, slide time.Duration) WindowAssigner {
	a := SlidingEventTimeWindows(size, slide)
	a.eventTime = false
	return a
}

// EventTimeSessionWindows groups a key's records into sessions: a record
// opens the window [ts, ts+gap), and windows that overlap or touch merge.
func EventTimeSessionWindows(gap time.Duration) WindowAssigner {
	return WindowAssigner{kind: session, gap: gap.Milliseconds(), eventTime: true}
}

// ProcessingTimeSessionWindows is EventTimeSessionWindows on processing
// time.
func ProcessingTimeSessionWindows(gap time.Duration) WindowAssigner {
	a := EventTimeSessionWindows(gap)
	a.eventTime = false
	return a
}

// WithOffset shifts tumbling and sliding windows by offset (for example to
// align daily windows with a time zone).
func (a WindowAssigner) WithOffset(offset time.Duration) WindowAssigner {
	a.offset = offset.Milliseconds()
	return a
}

func (a WindowAssigner) validate() error {
	switch a.kind {
	case tumbling, sliding:
		if a.size <= 0 || a.slide <= 0 {
			return fmt.Errorf("window size %dms and slide %dms must be at least 1ms", a.size, a.slide)
		}
		if a.offset < 0 || a.offset >= a.slide {
			return fmt.Errorf("window offset %dms must be in [0, slide %dms)", a.offset, a.slide)
		}
	case session:
		if a.gap <= 0 {
			return fmt.Errorf("session gap %dms must be at least 1ms", a.gap)
		}
	default:
		return errors.New("window assigner not set: use a Tumbling, Sliding or Session constructor")
	}
	return nil
}

// windowStart is Flink's TimeWindow.getWindowStartWithOffset.
func windowStart(ts, offset, size int64) int64 {
	r := (ts - offset + size) % size
	if r < 0 {
		r += size
	}
	return ts - r
}

// assign appends the windows containing ts to dst.
func (a WindowAssigner) assign(dst []TimeWindow, ts int64) []TimeWindow {
	switch a.kind {
	case session:
		return append(dst, TimeWindow{Start: ts, End: ts + a.gap})
	default:
		last := windowStart(ts, a.offset, a.slide)
		for start := last; start > ts-a.size; start -= a.slide {
			dst = append(dst, TimeWindow{Start: start, End: start + a.size})
		}
		return dst
	}
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
	if err := a.validate(); err != nil {
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
	rt   *keyedRuntime
}

// Emit sends v downstream with the window's max timestamp.
func (c *WindowContext[K, OUT]) Emit(v OUT) { c.emit(v) }

// Key is the key whose window fired.
func (c *WindowContext[K, OUT]) Key() K { return c.key }

// CurrentWatermark is the operator's current event time.
func (c *WindowContext[K, OUT]) CurrentWatermark() int64 { return c.rt.op.CurrentWatermark() }

// Reduce folds each window's records with reduce and emits one result per
// window firing.
func Reduce[K, T any](w *WindowedStream[K, T], reduce func(a, b T) T) *DataStream[T] {
	return ReduceWindows(w, reduce, func(_ K, _ TimeWindow, v T) T { return v })
}

// ReduceWindows is Reduce with the key and window passed to result, which
// makes the emitted record.
func ReduceWindows[K, T, OUT any](w *WindowedStream[K, T], reduce func(a, b T) T, result func(key K, window TimeWindow, v T) OUT) *DataStream[OUT] {
	in := w.ks.s.ups[0].out
	return applyWindow(w, "Window(Reduce)", func(rt *keyedRuntime, emit func(OUT)) (windowContents[K, T], error) {
		codecT := in.codecOf()
		v, err := state.NewValue(rt.backend, state.ValueDescriptor[T]{Name: "window-contents", Codec: codecT})
		if err != nil {
			return nil, err
		}
		return &reduceContents[K, T, OUT]{v: v, reduce: reduce, result: result, emit: emit}, nil
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
	return applyWindow(w, "Window(Aggregate)", func(rt *keyedRuntime, emit func(OUT)) (windowContents[K, IN], error) {
		v, err := state.NewValue(rt.backend, state.ValueDescriptor[ACC]{Name: "window-contents", Codec: accCodec})
		if err != nil {
			return nil, err
		}
		return &aggregateContents[K, IN, ACC, R, OUT]{v: v, agg: agg, result: result, emit: emit}, nil
	})
}

// ProcessWindow calls fn with all records of each window when it fires.
// newFn is called once per subtask.
func ProcessWindow[K, IN, OUT any](w *WindowedStream[K, IN], newFn func() ProcessWindowFunction[K, IN, OUT]) *DataStream[OUT] {
	in := w.ks.s.ups[0].out
	return applyWindow(w, "Window(Process)", func(rt *keyedRuntime, emit func(OUT)) (windowContents[K, IN], error) {
		codecIN := in.codecOf()
		l, err := state.NewList(rt.backend, state.ListDescriptor[IN]{Name: "window-contents", Codec: codecIN})
		if err != nil {
			return nil, err
		}
		fn := newFn()
		if fn == nil {
			return nil, errors.New("ProcessWindow: the function factory returned nil")
		}
		return &processContents[K, IN, OUT]{l: l, fn: fn, ctx: WindowContext[K, OUT]{emit: emit, rt: rt}}, nil
	})
}

// windowContents keeps the contents of a key's windows, in the window's
// namespace, and computes results.
type windowContents[K, IN any] interface {
	add(ns []byte, v IN) error
	// mergeInto folds the contents of sources into target and clears them.
	mergeInto(target []byte, sources [][]byte) error
	clear(ns []byte) error
	fire(key K, ns []byte, w TimeWindow) error
}

func applyWindow[K, IN, OUT any](w *WindowedStream[K, IN], name string,
	newContents func(rt *keyedRuntime, emit func(OUT)) (windowContents[K, IN], error)) *DataStream[OUT] {
	env := w.ks.s.env
	if w.node != nil {
		env.errorf("%s: a WindowedStream takes one window function", name)
	}
	impl := &nodeImpl[OUT]{main: newOutputImpl[OUT]()}
	impl.build = func(ctx *task.OpContext, outs []any) (task.Built, error) {
		op := &windowOp[K, IN, OUT]{opBase: newOpBase(ctx), w: w, out: outs[0].(network.Output[OUT])}
		if len(outs) > 1 {
			op.late = outs[1].(network.Output[IN])
		}
		op.rt = newKeyedRuntime(ctx, env.opts)
		op.rt.onTimer = op.onTimer
		op.newContents = newContents
		return task.Built{Op: op, Input: network.Output[IN](op)}, nil
	}
	out := connect(w.ks.s, &graph.Node{Name: name}, impl)
	w.node = out.ups[0].node
	w.impl = impl
	return out
}

// windowOp is Flink's WindowOperator with the default triggers: an
// event-time window fires when the watermark passes its max timestamp (and
// again for every late record within the allowed lateness), a
// processing-time window when processing time does; a window's contents
// are dropped at max timestamp + allowed lateness.
type windowOp[K, IN, OUT any] struct {
	opBase
	w           *WindowedStream[K, IN]
	rt          *keyedRuntime
	out         network.Output[OUT]
	late        network.Output[IN]
	newContents func(rt *keyedRuntime, emit func(OUT)) (windowContents[K, IN], error)
	contents    windowContents[K, IN]
	sessions    state.Value[[]TimeWindow] // per key, for merging windows
	key         K
	windows     []TimeWindow
	nsBuf       []byte
	srcNS       [][]byte
}

func (o *windowOp[K, IN, OUT]) Open() error {
	if err := o.rt.open(); err != nil {
		return err
	}
	var err error
	o.contents, err = o.newContents(o.rt, o.out.Collect)
	if err != nil {
		return err
	}
	if o.w.assigner.kind == session {
		o.sessions, err = state.NewValue(o.rt.backend, state.ValueDescriptor[[]TimeWindow]{
			Name: "session-windows", Codec: codec.SliceOf(timeWindowCodec)})
	}
	return err
}

func (o *windowOp[K, IN, OUT]) Close() error { return o.rt.close() }

// SnapshotState adds the window contents (keyed state) and timers.
func (o *windowOp[K, IN, OUT]) SnapshotState(id int64, opts checkpoint.Options) (task.OperatorSnapshot, error) {
	s, _ := o.opBase.SnapshotState(id, opts)
	return s, o.rt.snapshot(id, opts, &s)
}

// NotifyCheckpointComplete implements task.CheckpointListener.
func (o *windowOp[K, IN, OUT]) NotifyCheckpointComplete(id int64) error {
	return o.rt.NotifyCheckpointComplete(id)
}

// NotifyCheckpointAborted implements task.CheckpointListener.
func (o *windowOp[K, IN, OUT]) NotifyCheckpointAborted(id int64) error {
	return o.rt.NotifyCheckpointAborted(id)
}

func (o *windowOp[K, IN, OUT]) ProcessWatermark(wm int64) error { return o.rt.advanceWatermark(wm) }

func (o *windowOp[K, IN, OUT]) eventTime() bool { return o.w.assigner.eventTime }

func (o *windowOp[K, IN, OUT]) cleanupTime(w TimeWindow) int64 {
	if !o.eventTime() {
		return w.MaxTimestamp()
	}
	if t := w.MaxTimestamp() + o.w.lateness; t >= w.MaxTimestamp() {
		return t
	}
	return math.MaxInt64
}

func (o *windowOp[K, IN, OUT]) isLate(w TimeWindow) bool {
	return o.eventTime() && o.cleanupTime(w) <= o.rt.op.CurrentWatermark()
}

func (o *windowOp[K, IN, OUT]) Collect(v IN) {
	o.tr.Cur = o.id
	if err := o.process(v); err != nil {
		o.ctx.Fail(err)
	}
	o.tr.Cur = o.parent
}

func (o *windowOp[K, IN, OUT]) process(v IN) error {
	k := o.w.ks.key(v)
	o.rt.setKey(o.w.ks.keyCodec.Append(o.rt.keyBuf[:0], k))
	o.key = k
	var ts int64
	if o.eventTime() {
		var ok bool
		ts, ok = o.tr.Timestamp, o.tr.Timestamp != task.NoTimestamp
		if !ok {
			return errors.New("event-time window got a record without a timestamp: assign them with AssignTimestampsAndWatermarks")
		}
	} else {
		ts = o.rt.op.Now().UnixMilli()
	}
	o.windows = o.w.assigner.assign(o.windows[:0], ts)
	if o.w.assigner.kind == session {
		merged, err := o.mergeSession(o.windows[0])
		if err != nil {
			return err
		}
		if merged == nil {
			return o.dropLate(v)
		}
		o.windows = append(o.windows[:0], *merged)
	}
	added := false
	for _, w := range o.windows {
		if o.isLate(w) {
			continue
		}
		added = true
		ns := w.namespace(o.nsBuf[:0])
		o.nsBuf = ns
		if err := o.contents.add(ns, v); err != nil {
			return err
		}
		if o.eventTime() && w.MaxTimestamp() <= o.rt.op.CurrentWatermark() {
			// Late but within the allowed lateness: fire again at once.
			saved := o.tr.Timestamp
			if err := o.fire(w, ns); err != nil {
				return err
			}
			o.tr.Timestamp = saved
		} else {
			o.registerTimer(w.MaxTimestamp(), ns)
		}
		if c := o.cleanupTime(w); c != w.MaxTimestamp() && c != math.MaxInt64 {
			o.registerTimer(c, ns)
		}
	}
	if !added {
		return o.dropLate(v)
	}
	return nil
}

func (o *windowOp[K, IN, OUT]) dropLate(v IN) error {
	if o.late != nil {
		o.late.Collect(v)
	}
	return nil
}

func (o *windowOp[K, IN, OUT]) registerTimer(ts int64, ns []byte) {
	t := o.rt.timerFor(ts, ns)
	if o.eventTime() {
		o.rt.registerEventTime(t)
	} else {
		o.rt.registerProcessingTime(t)
	}
}

func (o *windowOp[K, IN, OUT]) deleteTimer(ts int64, ns []byte) {
	t := o.rt.timerFor(ts, ns)
	if o.eventTime() {
		o.rt.deleteEventTime(t)
	} else {
		o.rt.deleteProcessingTime(t)
	}
}

// mergeSession adds the new session window to the key's sessions, merging
// every session it touches, and returns the window the record belongs to,
// or nil if that window is already late.
func (o *windowOp[K, IN, OUT]) mergeSession(nw TimeWindow) (*TimeWindow, error) {
	o.sessions.SetNamespace(nil)
	cur, _, err := o.sessions.Get()
	if err != nil {
		return nil, err
	}
	merged := nw
	var absorbed []TimeWindow
	keep := make([]TimeWindow, 0, len(cur)+1)
	for _, w := range cur {
		if w.intersects(nw) {
			merged = merged.cover(w)
			absorbed = append(absorbed, w)
		} else {
			keep = append(keep, w)
		}
	}
	if o.isLate(merged) {
		return nil, nil
	}
	if len(absorbed) == 1 && absorbed[0] == merged {
		return &merged, nil // falls into an existing session
	}
	target := merged.namespace(nil)
	o.srcNS = o.srcNS[:0]
	for _, w := range absorbed {
		ns := w.namespace(nil)
		o.srcNS = append(o.srcNS, ns)
		o.deleteTimer(w.MaxTimestamp(), ns)
		if c := o.cleanupTime(w); c != w.MaxTimestamp() && c != math.MaxInt64 {
			o.deleteTimer(c, ns)
		}
	}
	if len(o.srcNS) > 0 {
		if err := o.contents.mergeInto(target, o.srcNS); err != nil {
			return nil, err
		}
	}
	keep = append(keep, merged)
	slices.SortFunc(keep, func(a, b TimeWindow) int { return int(a.Start - b.Start) })
	if err := o.sessions.Update(keep); err != nil {
		return nil, err
	}
	return &merged, nil
}

func (o *windowOp[K, IN, OUT]) onTimer(t timer.Timer, _ bool) error {
	k, _, err := o.w.ks.keyCodec.Decode(t.Key)
	if err != nil {
		return fmt.Errorf("decode timer key: %w", err)
	}
	o.key = k
	w := windowFromNamespace(t.Namespace)
	// A session that merged away had its timers deleted: a timer that fires
	// belongs to a live window.
	if t.Timestamp == w.MaxTimestamp() {
		if err := o.fire(w, t.Namespace); err != nil {
			return err
		}
	}
	if t.Timestamp == o.cleanupTime(w) {
		return o.cleanup(w, t.Namespace)
	}
	return nil
}

func (o *windowOp[K, IN, OUT]) fire(w TimeWindow, ns []byte) error {
	o.tr.Timestamp = w.MaxTimestamp()
	return o.contents.fire(o.key, ns, w)
}

func (o *windowOp[K, IN, OUT]) cleanup(w TimeWindow, ns []byte) error {
	if err := o.contents.clear(ns); err != nil {
		return err
	}
	if o.w.assigner.kind != session {
		return nil
	}
	o.sessions.SetNamespace(nil)
	cur, _, err := o.sessions.Get()
	if err != nil {
		return err
	}
	keep := slices.DeleteFunc(slices.Clone(cur), func(s TimeWindow) bool { return s == w })
	if len(keep) == 0 {
		return o.sessions.Clear()
	}
	return o.sessions.Update(keep)
}

type reduceContents[K, T, OUT any] struct {
	v      state.Value[T]
	reduce func(a, b T) T
	result func(K, TimeWindow, T) OUT
	emit   func(OUT)
}

func (c *reduceContents[K, T, OUT]) add(ns []byte, v T) error {
	c.v.SetNamespace(ns)
	cur, ok, err := c.v.Get()
	if err != nil {
		return err
	}
	if ok {
		v = c.reduce(cur, v)
	}
	return c.v.Update(v)
}

func (c *reduceContents[K, T, OUT]) mergeInto(target []byte, sources [][]byte) error {
	for _, ns := range sources {
		c.v.SetNamespace(ns)
		v, ok, err := c.v.Get()
		if err != nil {
			return err
		}
		if err := c.v.Clear(); err != nil {
			return err
		}
		if ok {
			if err := c.add(target, v); err != nil {
				return err
			}
		}
	}
	return nil
}

func (c *reduceContents[K, T, OUT]) clear(ns []byte) error {
	c.v.SetNamespace(ns)
	return c.v.Clear()
}

func (c *reduceContents[K, T, OUT]) fire(key K, ns []byte, w TimeWindow) error {
	c.v.SetNamespace(ns)
	v, ok, err := c.v.Get()
	if err != nil || !ok {
		return err
	}
	c.emit(c.result(key, w, v))
	return nil
}

type aggregateContents[K, IN, ACC, R, OUT any] struct {
	v      state.Value[ACC]
	agg    AggregateFunction[IN, ACC, R]
	result func(K, TimeWindow, R) OUT
	emit   func(OUT)
}

func (c *aggregateContents[K, IN, ACC, R, OUT]) add(ns []byte, v IN) error {
	c.v.SetNamespace(ns)
	acc, ok, err := c.v.Get()
	if err != nil {
		return err
	}
	if !ok {
		acc = c.agg.CreateAccumulator()
	}
	return c.v.Update(c.agg.Add(v, acc))
}

func (c *aggregateContents[K, IN, ACC, R, OUT]) mergeInto(target []byte, sources [][]byte) error {
	c.v.SetNamespace(target)
	acc, ok, err := c.v.Get()
	if err != nil {
		return err
	}
	for _, ns := range sources {
		c.v.SetNamespace(ns)
		a, found, err := c.v.Get()
		if err != nil {
			return err
		}
		if err := c.v.Clear(); err != nil {
			return err
		}
		switch {
		case !found:
		case !ok:
			acc, ok = a, true
		default:
			acc = c.agg.Merge(acc, a)
		}
	}
	if !ok {
		return nil
	}
	c.v.SetNamespace(target)
	return c.v.Update(acc)
}

func (c *aggregateContents[K, IN, ACC, R, OUT]) clear(ns []byte) error {
	c.v.SetNamespace(ns)
	return c.v.Clear()
}

func (c *aggregateContents[K, IN, ACC, R, OUT]) fire(key K, ns []byte, w TimeWindow) error {
	c.v.SetNamespace(ns)
	acc, ok, err := c.v.Get()
	if err != nil || !ok {
		return err
	}
	c.emit(c.result(key, w, c.agg.GetResult(acc)))
	return nil
}

type processContents[K, IN, OUT any] struct {
	l   state.List[IN]
	fn  ProcessWindowFunction[K, IN, OUT]
	ctx WindowContext[K, OUT]
}

func (c *processContents[K, IN, OUT]) add(ns []byte, v IN) error {
	c.l.SetNamespace(ns)
	return c.l.Add(v)
}

func (c *processContents[K, IN, OUT]) mergeInto(target []byte, sources [][]byte) error {
	for _, ns := range sources {
		c.l.SetNamespace(ns)
		vs, err := c.l.Get()
		if err != nil {
			return err
		}
		vs = slices.Clone(vs)
		if err := c.l.Clear(); err != nil {
			return err
		}
		if len(vs) > 0 {
			c.l.SetNamespace(target)
			if err := c.l.AddAll(vs); err != nil {
				return err
			}
		}
	}
	return nil
}

func (c *processContents[K, IN, OUT]) clear(ns []byte) error {
	c.l.SetNamespace(ns)
	return c.l.Clear()
}

func (c *processContents[K, IN, OUT]) fire(key K, ns []byte, w TimeWindow) error {
	c.l.SetNamespace(ns)
	vs, err := c.l.Get()
	if err != nil || len(vs) == 0 {
		return err
	}
	c.ctx.key = key
	return c.fn.Process(&c.ctx, w, vs)
}
