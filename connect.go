package weir

import (
	"errors"

	"github.com/weirstream/weir/internal/graph"
	"github.com/weirstream/weir/internal/network"
	"github.com/weirstream/weir/internal/task"
)

// Two-input operators.
//
// Connect joins two streams of possibly different types into one operator
// that sees the records of both, each through its own method
// (ProcessElement1, ProcessElement2). The operator's task reads both inputs
// through one input gate, so it behaves like an operator after a Union:
// its event time is the minimum of both inputs' watermarks, and checkpoint
// barriers are aligned across the channels of both inputs (at-least-once
// mode: counted across both). A two-input operator always heads a task of
// its own.

// ConnectedStreams are two streams read by one two-input operator: CoMap,
// CoFlatMap or CoProcess.
type ConnectedStreams[IN1, IN2 any] struct {
	first  *DataStream[IN1]
	second *DataStream[IN2]
}

// Connect connects two streams for a two-input operator.
func Connect[IN1, IN2 any](first *DataStream[IN1], second *DataStream[IN2]) *ConnectedStreams[IN1, IN2] {
	if first.env != second.env {
		first.env.errorf("Connect: the streams belong to different environments")
	}
	return &ConnectedStreams[IN1, IN2]{first: first, second: second}
}

// connectTwo adds node n fed by every producer of first (input 0) and of
// second (input 1).
func connectTwo[IN1, IN2, OUT any](first *DataStream[IN1], second *DataStream[IN2], n *graph.Node, impl *nodeImpl[OUT]) *DataStream[OUT] {
	out := connect(first, n, impl)
	addInputs(second, n, 1)
	return out
}

// addInputs connects every producer of in to input i of n.
func addInputs[IN any](in *DataStream[IN], n *graph.Node, i int) {
	for _, u := range in.ups {
		var edgeImpl any
		if u.key != nil {
			edgeImpl = u.key
		}
		e := in.env.graph.Connect(u.node, n, u.part, edgeImpl)
		e.Output, e.Input = u.output, i
	}
}

// CoProcessFunction handles the records of two connected streams. It may
// also implement Opener, EndOfInputHandler, BarrierFlusher,
// WatermarkListener and Closer.
type CoProcessFunction[IN1, IN2, OUT any] interface {
	// ProcessElement1 handles a record of the first input.
	ProcessElement1(ctx *Context[OUT], v IN1) error
	// ProcessElement2 handles a record of the second input.
	ProcessElement2(ctx *Context[OUT], v IN2) error
}

// CoProcess applies a two-input function to every record of both inputs.
// newFn is called once per subtask; the value's fields belong to that
// subtask.
func CoProcess[IN1, IN2, OUT any](c *ConnectedStreams[IN1, IN2], newFn func() CoProcessFunction[IN1, IN2, OUT]) *DataStream[OUT] {
	return coProcess(c, "CoProcess", newFn)
}

func coProcess[IN1, IN2, OUT any](c *ConnectedStreams[IN1, IN2], name string, newFn func() CoProcessFunction[IN1, IN2, OUT]) *DataStream[OUT] {
	return connectTwo(c.first, c.second, &graph.Node{Name: name}, newNodeImpl(func(ctx *task.OpContext, out network.Output[OUT]) (task.Built, error) {
		fn := newFn()
		if fn == nil {
			return task.Built{}, errors.New(name + ": the function factory returned nil")
		}
		op := &coProcessOp[IN1, IN2, OUT]{processOp: processOp[IN1, OUT]{opBase: newOpBase(ctx)}, fn: fn}
		op.processOp.fn = endAndClose[IN1, OUT]{fn}
		op.pctx = &Context[OUT]{op: ctx, out: out, ops: op.opState}
		return task.Built{Op: op, Input: network.Output[IN1](coInput1[IN1, IN2, OUT]{op}), Input2: network.Output[IN2](coInput2[IN1, IN2, OUT]{op})}, nil
	}))
}

// coProcessOp reuses processOp's lifecycle (Open, EndInput, Close, which
// look at the user function through endAndClose) and adds the second input.
type coProcessOp[IN1, IN2, OUT any] struct {
	processOp[IN1, OUT]
	fn CoProcessFunction[IN1, IN2, OUT]
}

// endAndClose gives processOp a ProcessFunction whose optional interfaces
// are those of the two-input function.
type endAndClose[IN1, OUT any] struct{ fn any }

func (endAndClose[IN1, OUT]) ProcessElement(*Context[OUT], IN1) error { return nil }

func (e endAndClose[IN1, OUT]) Open(ctx *Context[OUT]) error {
	if o, ok := e.fn.(Opener[OUT]); ok {
		return o.Open(ctx)
	}
	return nil
}

func (e endAndClose[IN1, OUT]) EndOfInput(ctx *Context[OUT]) error {
	if h, ok := e.fn.(EndOfInputHandler[OUT]); ok {
		return h.EndOfInput(ctx)
	}
	return nil
}

func (e endAndClose[IN1, OUT]) FlushBeforeBarrier(ctx *Context[OUT]) error {
	if f, ok := e.fn.(BarrierFlusher[OUT]); ok {
		return f.FlushBeforeBarrier(ctx)
	}
	return nil
}

func (e endAndClose[IN1, OUT]) OnWatermark(ctx *Context[OUT], wm int64) error {
	if l, ok := e.fn.(WatermarkListener[OUT]); ok {
		return l.OnWatermark(ctx, wm)
	}
	return nil
}

func (e endAndClose[IN1, OUT]) Close() error {
	if c, ok := e.fn.(Closer); ok {
		return c.Close()
	}
	return nil
}

type coInput1[IN1, IN2, OUT any] struct{ p *coProcessOp[IN1, IN2, OUT] }

func (c coInput1[IN1, IN2, OUT]) Collect(v IN1) {
	p := c.p
	p.tr.Cur = p.id
	if err := p.fn.ProcessElement1(p.pctx, v); err != nil {
		p.ctx.Fail(err)
	}
	p.tr.Cur = p.parent
}

type coInput2[IN1, IN2, OUT any] struct{ p *coProcessOp[IN1, IN2, OUT] }

func (c coInput2[IN1, IN2, OUT]) Collect(v IN2) {
	p := c.p
	p.tr.Cur = p.id
	if err := p.fn.ProcessElement2(p.pctx, v); err != nil {
		p.ctx.Fail(err)
	}
	p.tr.Cur = p.parent
}

// CoMap maps the records of the first input with map1 and those of the
// second with map2 into one stream.
func CoMap[IN1, IN2, OUT any](c *ConnectedStreams[IN1, IN2], map1 func(IN1) OUT, map2 func(IN2) OUT) *DataStream[OUT] {
	fn := coFlat[IN1, IN2, OUT]{
		f1: func(v IN1, out Collector[OUT]) { out.Collect(map1(v)) },
		f2: func(v IN2, out Collector[OUT]) { out.Collect(map2(v)) },
	}
	return coProcess(c, "CoMap", func() CoProcessFunction[IN1, IN2, OUT] { return fn })
}

// CoFlatMap calls flat1 for every record of the first input and flat2 for
// every record of the second; each emits any number of records to out.
func CoFlatMap[IN1, IN2, OUT any](c *ConnectedStreams[IN1, IN2], flat1 func(v IN1, out Collector[OUT]), flat2 func(v IN2, out Collector[OUT])) *DataStream[OUT] {
	fn := coFlat[IN1, IN2, OUT]{f1: flat1, f2: flat2}
	return coProcess(c, "CoFlatMap", func() CoProcessFunction[IN1, IN2, OUT] { return fn })
}

type coFlat[IN1, IN2, OUT any] struct {
	f1 func(IN1, Collector[OUT])
	f2 func(IN2, Collector[OUT])
}

func (c coFlat[IN1, IN2, OUT]) ProcessElement1(ctx *Context[OUT], v IN1) error {
	c.f1(v, ctx.out)
	return nil
}

func (c coFlat[IN1, IN2, OUT]) ProcessElement2(ctx *Context[OUT], v IN2) error {
	c.f2(v, ctx.out)
	return nil
}

// KeyedConnectedStreams are two keyed streams with the same key type read
// by one keyed two-input operator (KeyedCoProcess): the records of both
// with equal keys meet on one subtask, with one keyed state and one set of
// timers per key.
type KeyedConnectedStreams[K, IN1, IN2 any] struct {
	first  *KeyedStream[K, IN1]
	second *KeyedStream[K, IN2]
}

// ConnectKeyed connects two streams keyed by the same key type. Both keys
// must be encoded alike (KeyBy's built-in codec, or the same codec given to
// KeyByCodec): the encoding decides the key group, and so the subtask.
func ConnectKeyed[K, IN1, IN2 any](first *KeyedStream[K, IN1], second *KeyedStream[K, IN2]) *KeyedConnectedStreams[K, IN1, IN2] {
	if first.s.env != second.s.env {
		first.s.env.errorf("ConnectKeyed: the streams belong to different environments")
	}
	return &KeyedConnectedStreams[K, IN1, IN2]{first: first, second: second}
}

// KeyedCoProcessFunction handles the records of two keyed streams with
// keyed state and timers shared by both inputs. It may also implement
// KeyedOpener, TimerHandler and Closer.
type KeyedCoProcessFunction[K, IN1, IN2, OUT any] interface {
	// ProcessElement1 handles a record of the first input.
	ProcessElement1(ctx *KeyedContext[K, OUT], v IN1) error
	// ProcessElement2 handles a record of the second input.
	ProcessElement2(ctx *KeyedContext[K, OUT], v IN2) error
}

// KeyedCoProcess applies a keyed two-input function to every record of
// both inputs, with the record's key as the current key. newFn is called
// once per subtask.
func KeyedCoProcess[K, IN1, IN2, OUT any](c *KeyedConnectedStreams[K, IN1, IN2], newFn func() KeyedCoProcessFunction[K, IN1, IN2, OUT]) *DataStream[OUT] {
	return keyedCoProcess(c, "KeyedCoProcess", newFn)
}

func keyedCoProcess[K, IN1, IN2, OUT any](c *KeyedConnectedStreams[K, IN1, IN2], name string, newFn func() KeyedCoProcessFunction[K, IN1, IN2, OUT]) *DataStream[OUT] {
	env := c.first.s.env
	return connectTwo(c.first.s, c.second.s, &graph.Node{Name: name}, newNodeImpl(func(ctx *task.OpContext, out network.Output[OUT]) (task.Built, error) {
		fn := newFn()
		if fn == nil {
			return task.Built{}, errors.New(name + ": the function factory returned nil")
		}
		op := &keyedCoProcessOp[K, IN1, IN2, OUT]{fn: fn, key1: c.first.key, key2: c.second.key}
		op.keyedOp = newKeyedOp(ctx, env, fn, c.first.keyCodec, out)
		return task.Built{Op: op, Input: network.Output[IN1](keyedCoInput1[K, IN1, IN2, OUT]{op}),
			Input2: network.Output[IN2](keyedCoInput2[K, IN1, IN2, OUT]{op})}, nil
	}))
}

type keyedCoProcessOp[K, IN1, IN2, OUT any] struct {
	*keyedOp[K, OUT]
	fn   KeyedCoProcessFunction[K, IN1, IN2, OUT]
	key1 func(IN1) K
	key2 func(IN2) K
}

type keyedCoInput1[K, IN1, IN2, OUT any] struct {
	p *keyedCoProcessOp[K, IN1, IN2, OUT]
}

func (c keyedCoInput1[K, IN1, IN2, OUT]) Collect(v IN1) {
	p := c.p
	p.tr.Cur = p.id
	p.setKey(p.key1(v))
	if err := p.fn.ProcessElement1(p.kctx, v); err != nil {
		p.ctx.Fail(err)
	}
	p.tr.Cur = p.parent
}

type keyedCoInput2[K, IN1, IN2, OUT any] struct {
	p *keyedCoProcessOp[K, IN1, IN2, OUT]
}

func (c keyedCoInput2[K, IN1, IN2, OUT]) Collect(v IN2) {
	p := c.p
	p.tr.Cur = p.id
	p.setKey(p.key2(v))
	if err := p.fn.ProcessElement2(p.kctx, v); err != nil {
		p.ctx.Fail(err)
	}
	p.tr.Cur = p.parent
}
