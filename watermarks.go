package weir

import (
	"time"

	"github.com/weirstream/weir/internal/graph"
	"github.com/weirstream/weir/internal/network"
	"github.com/weirstream/weir/internal/task"
	"github.com/weirstream/weir/internal/watermark"
)

// WatermarkStrategy says how a stream's records get their event timestamps
// and how its watermarks are generated, as Flink's WatermarkStrategy.
type WatermarkStrategy[T any] struct {
	timestamp    func(v T) int64
	newGenerator func() watermark.Generator
	idleness     time.Duration
}

// BoundedOutOfOrderness is the strategy for records that arrive at most
// maxDelay later than records with a higher timestamp: the watermark trails
// the highest timestamp seen by maxDelay (minus one millisecond).
// timestamp returns a record's event time in Unix milliseconds; it may be
// nil only for FromSourceWithWatermarks, whose readers give each record its
// timestamp (SplitOutput.CollectWithTimestamp).
func BoundedOutOfOrderness[T any](maxDelay time.Duration, timestamp func(v T) int64) WatermarkStrategy[T] {
	return WatermarkStrategy[T]{timestamp: timestamp,
		newGenerator: func() watermark.Generator { return watermark.BoundedOutOfOrderness(maxDelay) }}
}

// MonotonousTimestamps is the strategy for records whose timestamps never
// decrease. timestamp may be nil as for BoundedOutOfOrderness.
func MonotonousTimestamps[T any](timestamp func(v T) int64) WatermarkStrategy[T] {
	return WatermarkStrategy[T]{timestamp: timestamp,
		newGenerator: func() watermark.Generator { return watermark.Monotonous() }}
}

// WithIdleness marks a subtask idle once it saw no record for timeout of
// processing time, so that downstream operators stop waiting for its
// watermark; it becomes active again with its next record. With
// FromSourceWithWatermarks each split has its own timeout: an idle split
// no longer holds back the watermark, and the subtask is idle when all its
// splits are.
func (w WatermarkStrategy[T]) WithIdleness(timeout time.Duration) WatermarkStrategy[T] {
	w.idleness = timeout
	return w
}

// AssignTimestampsAndWatermarks gives every record of s its event timestamp
// and generates watermarks with ws, every AutoWatermarkInterval of
// processing time. Watermarks from upstream stop here; at the end of a
// bounded input the final watermark passes, firing every event-time timer.
// Chained after a source (the usual place), it costs one function call per
// record.
func AssignTimestampsAndWatermarks[T any](s *DataStream[T], ws WatermarkStrategy[T]) *DataStream[T] {
	if ws.newGenerator == nil {
		s.env.errorf("AssignTimestampsAndWatermarks: use BoundedOutOfOrderness or MonotonousTimestamps to build the strategy")
		return s
	}
	if ws.timestamp == nil {
		s.env.errorf("AssignTimestampsAndWatermarks: the watermark strategy has no timestamp function: " +
			"pass one to BoundedOutOfOrderness or MonotonousTimestamps (a nil one is only for FromSourceWithWatermarks, whose readers timestamp their records)")
		return s
	}
	impl := newNodeImpl(func(ctx *task.OpContext, out network.Output[T]) (task.Built, error) {
		op := &watermarkOp[T]{opBase: newOpBase(ctx), ws: ws, gen: ws.newGenerator(), out: out}
		return task.Built{Op: op, Input: network.Output[T](op)}, nil
	})
	impl.assigns = true
	return passThrough(s, connect(s, &graph.Node{Name: "Timestamps/Watermarks"}, impl))
}

type watermarkOp[T any] struct {
	opBase
	ws        WatermarkStrategy[T]
	gen       watermark.Generator
	out       network.Output[T]
	lastEvent time.Time
	idle      bool
}

func (w *watermarkOp[T]) AssignsWatermarks() {}

func (w *watermarkOp[T]) Open() error {
	w.lastEvent = w.ctx.Now()
	w.ctx.Schedule(w.ctx.Now().Add(w.ctx.AutoWatermarkInterval), w.periodic)
	return nil
}

func (w *watermarkOp[T]) Collect(v T) {
	w.tr.Cur = w.id
	ts := w.ws.timestamp(v)
	w.tr.Timestamp = ts
	w.gen.OnEvent(ts)
	if w.ws.idleness > 0 {
		w.lastEvent = w.ctx.Now()
		if w.idle {
			w.idle = false
			w.ctx.EmitIdle(false)
		}
	}
	w.out.Collect(v)
	w.tr.Cur = w.parent
}

// periodic emits the generator's watermark, or marks the output idle.
func (w *watermarkOp[T]) periodic() error {
	now := w.ctx.Now()
	if w.ws.idleness > 0 && !w.idle && now.Sub(w.lastEvent) >= w.ws.idleness {
		w.idle = true
		w.ctx.EmitIdle(true)
	}
	if !w.idle {
		if wm := w.gen.OnPeriodicEmit(); wm != watermark.NoWatermark {
			if err := w.ctx.EmitWatermark(wm); err != nil {
				return err
			}
		}
	}
	w.ctx.Schedule(now.Add(w.ctx.AutoWatermarkInterval), w.periodic)
	return nil
}
