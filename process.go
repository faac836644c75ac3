package weir

import (
	"fmt"
	"log/slog"

	"github.com/weirstream/weir/internal/graph"
	"github.com/weirstream/weir/internal/network"
	"github.com/weirstream/weir/internal/operator"
	"github.com/weirstream/weir/internal/task"
)

// ProcessFunction is the most general operator: it sees each record with a
// Context through which it emits any number of records. It may also
// implement Opener, EndOfInputHandler, BarrierFlusher, WatermarkListener
// and Closer.
type ProcessFunction[IN, OUT any] interface {
	// ProcessElement handles one record. An error fails the job.
	ProcessElement(ctx *Context[OUT], v IN) error
}

// ProcessFunc adapts a plain function to ProcessFunction.
type ProcessFunc[IN, OUT any] func(ctx *Context[OUT], v IN) error

// ProcessElement calls f.
func (f ProcessFunc[IN, OUT]) ProcessElement(ctx *Context[OUT], v IN) error { return f(ctx, v) }

// Opener is implemented by functions that prepare themselves before the
// first record, per subtask.
type Opener[OUT any] interface {
	Open(ctx *Context[OUT]) error
}

// EndOfInputHandler is implemented by functions that emit final results when
// a bounded input ends.
type EndOfInputHandler[OUT any] interface {
	EndOfInput(ctx *Context[OUT]) error
}

// BarrierFlusher is implemented by functions that buffer records (a local
// pre-aggregation, a mini-batch): FlushBeforeBarrier is called at every
// checkpoint before the operator's state is snapshotted and before the
// barrier goes downstream, and must emit what the function buffers, so
// that no buffered record is lost by a restore from that checkpoint
// (Flink's prepareSnapshotPreBarrier). Emit the rest at EndOfInput.
type BarrierFlusher[OUT any] interface {
	FlushBeforeBarrier(ctx *Context[OUT]) error
}

// WatermarkListener is implemented by functions that buffer records with
// event timestamps: OnWatermark is called with every watermark before it is
// forwarded, so what the function emits there (EmitWithTimestamp) comes
// before the watermark downstream and is not late.
type WatermarkListener[OUT any] interface {
	OnWatermark(ctx *Context[OUT], watermark int64) error
}

// Closer is implemented by functions that release resources when the
// subtask ends, after success or failure.
type Closer interface {
	Close() error
}

// Context is what a ProcessFunction sees of its subtask. It is owned by the
// subtask's goroutine and valid for the subtask's life.
type Context[OUT any] struct {
	op  *task.OpContext
	out network.Output[OUT]
	ops *operator.State
}

func (c *Context[OUT]) operatorState() *operator.State { return c.ops }

// Emit sends v downstream.
func (c *Context[OUT]) Emit(v OUT) { c.out.Collect(v) }

// Timestamp is the event time of the record being processed, and false if
// it has none.
func (c *Context[OUT]) Timestamp() (int64, bool) {
	ts := c.op.Tracker.Timestamp
	return ts, ts != task.NoTimestamp
}

// EmitWithTimestamp sends v downstream with event timestamp ts instead of
// the current record's (for records a function buffered: see
// WatermarkListener and BarrierFlusher).
func (c *Context[OUT]) EmitWithTimestamp(v OUT, ts int64) {
	tr := c.op.Tracker
	saved := tr.Timestamp
	tr.Timestamp = ts
	c.out.Collect(v)
	tr.Timestamp = saved
}

// Subtask is the index of this parallel instance, 0 <= Subtask < Parallelism.
func (c *Context[OUT]) Subtask() int { return c.op.Subtask }

// Parallelism is the operator's number of subtasks.
func (c *Context[OUT]) Parallelism() int { return c.op.Parallelism }

// Operator is the operator's name.
func (c *Context[OUT]) Operator() string { return c.op.Name }

// Logger returns a logger that names the job, operator and subtask.
func (c *Context[OUT]) Logger() *slog.Logger { return c.op.Logger }

// Process applies fn to every record. When s is keyed (KeyBy), fn sees each
// key's records on one subtask.
//
// Every subtask calls the same fn, concurrently, like an http.Handler: keep
// per-subtask state out of it, or use ProcessEach.
func Process[IN, OUT any](s *DataStream[IN], fn ProcessFunction[IN, OUT]) *DataStream[OUT] {
	return ProcessEach(s, func() ProcessFunction[IN, OUT] { return fn })
}

// ProcessEach is Process with one function value per subtask: newFn is
// called once for each subtask, before it opens, so the value's fields are
// owned by that subtask's goroutine alone.
func ProcessEach[IN, OUT any](s *DataStream[IN], newFn func() ProcessFunction[IN, OUT]) *DataStream[OUT] {
	return connect(s, &graph.Node{Name: "Process"}, newNodeImpl(func(ctx *task.OpContext, out network.Output[OUT]) (task.Built, error) {
		fn := newFn()
		if fn == nil {
			return task.Built{}, fmt.Errorf("ProcessEach: the function factory returned nil")
		}
		op := &processOp[IN, OUT]{opBase: newOpBase(ctx), fn: fn}
		op.pctx = &Context[OUT]{op: ctx, out: out, ops: op.opState}
		return task.Built{Op: op, Input: network.Output[IN](op)}, nil
	}))
}

type processOp[IN, OUT any] struct {
	opBase
	fn   ProcessFunction[IN, OUT]
	pctx *Context[OUT]
}

func (p *processOp[IN, OUT]) Collect(v IN) {
	p.tr.Cur = p.id
	if err := p.fn.ProcessElement(p.pctx, v); err != nil {
		p.ctx.Fail(err)
	}
	p.tr.Cur = p.parent
}

func (p *processOp[IN, OUT]) Open() error {
	if o, ok := p.fn.(Opener[OUT]); ok {
		return o.Open(p.pctx)
	}
	return nil
}

// ProcessWatermark implements task.WatermarkHandler.
func (p *processOp[IN, OUT]) ProcessWatermark(wm int64) error {
	if l, ok := p.fn.(WatermarkListener[OUT]); ok {
		return l.OnWatermark(p.pctx, wm)
	}
	return nil
}

// PrepareSnapshotPreBarrier implements task.PreBarrier.
func (p *processOp[IN, OUT]) PrepareSnapshotPreBarrier(int64) error {
	if f, ok := p.fn.(BarrierFlusher[OUT]); ok {
		return f.FlushBeforeBarrier(p.pctx)
	}
	return nil
}

func (p *processOp[IN, OUT]) EndInput() error {
	if h, ok := p.fn.(EndOfInputHandler[OUT]); ok {
		return h.EndOfInput(p.pctx)
	}
	return nil
}

func (p *processOp[IN, OUT]) Close() error {
	if c, ok := p.fn.(Closer); ok {
		return c.Close()
	}
	return nil
}
