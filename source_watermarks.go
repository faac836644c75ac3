package weir

import (
	"math"
	"time"

	"github.com/weirstream/weir/internal/network"
	"github.com/weirstream/weir/internal/task"
	"github.com/weirstream/weir/internal/watermark"
)

// This file generates watermarks inside a source operator, per split, as
// Flink's SourceOperator with ProgressiveTimestampsAndWatermarks and
// WatermarkOutputMultiplexer do:
//
//   - Every split a reader emits to (SplitCollector.Split) has a generator
//     of its own (and, with WithIdleness, an idleness timer of its own).
//     Records the reader emits to the collector itself, of no split, feed
//     one more, subtask-wide generator, which takes part once it has seen
//     a record with a timestamp. A record of no split without a timestamp
//     (a strategy without a timestamp function) passes on without one and
//     touches no watermark: it neither holds the minimum at none nor keeps
//     the subtask from turning idle.
//   - Every AutoWatermarkInterval the subtask emits the minimum of the
//     watermarks of the outputs that are not idle, when it is higher than
//     the last one emitted (a split without records yet holds it at
//     none). A released split no longer counts.
//   - With WithIdleness, when every split is idle and the subtask-wide
//     output is idle too (no record of no split for the timeout, or none
//     ever), the subtask emits idle; a subtask without splits is idle once
//     the timeout has passed since its start. Its next record makes it
//     active again at once. Without WithIdleness a subtask is never idle:
//     as with Flink's KafkaSource, readers without splits (parallelism
//     above the number of partitions) hold back the watermark downstream.
//   - At the end of a bounded input the final watermark passes as for any
//     source and the periodic emission stops.
//
// Everything runs on the subtask's goroutine: ReadBatch's collectors and
// the periodic emission (a task timer).

// SplitCollector is the Collector a reader's ReadBatch receives from a
// source added with FromSourceWithWatermarks (readers type-assert;
// FromSource's collector does not implement it). Its methods are called
// from the subtask's goroutine only, within ReadBatch.
type SplitCollector[T any] interface {
	// Collector emits records of no split: a subtask-wide generator
	// (and idleness timer) makes their watermarks. It counts for the
	// subtask's watermark once it has seen a record with a timestamp
	// (from the strategy's timestamp function): records without one
	// never hold event time back.
	Collector[T]
	// Split returns split id's output (created on first use): its records
	// drive a watermark generator and an idleness timer of their own. The
	// reader may keep it across ReadBatch calls until it releases the
	// split.
	Split(id string) SplitOutput[T]
	// ReleaseSplit forgets split id (it finished or left): it no longer
	// holds the watermark back. An output kept after its release still
	// emits records, but its timestamps no longer count for the
	// watermark; Split(id) starts a new one.
	ReleaseSplit(id string)
}

// SplitOutput is one split's output.
type SplitOutput[T any] interface {
	// Collector emits v with no timestamp of its own: the strategy's
	// timestamp function gives it one, and without one it carries none
	// (as in Flink; an event-time window downstream then fails the job).
	Collector[T]
	// CollectWithTimestamp emits v with its own event timestamp (Unix ms,
	// e.g. a Kafka record's); the strategy's timestamp function, if it has
	// one, takes precedence (as in Flink).
	CollectWithTimestamp(v T, ts int64)
}

// FromSourceWithWatermarks adds src with ws applied inside the source
// operator: each split of each reader gets its own watermark generator and
// idleness timer, and the subtask's watermark is the minimum over its
// splits that are not idle (see SplitCollector). Readers that do not use
// SplitCollector get one generator per subtask, as with
// AssignTimestampsAndWatermarks chained after FromSource. ws may have no
// timestamp function (BoundedOutOfOrderness[T](d, nil)): the records'
// timestamps then come from SplitOutput.CollectWithTimestamp.
func FromSourceWithWatermarks[T any](env *Environment, src Source[T], ws WatermarkStrategy[T]) *DataStream[T] {
	if ws.newGenerator == nil {
		env.errorf("FromSourceWithWatermarks: build the watermark strategy with BoundedOutOfOrderness or MonotonousTimestamps")
		return FromSource(env, src)
	}
	impl := newNodeImpl(func(ctx *task.OpContext, out network.Output[T]) (task.Built, error) {
		op := &sourceWatermarkOp[T]{sourceOp: newSourceOp(ctx, src, out)}
		op.wm = newSplitWatermarks(ctx, ctx.Tracker, ctx.AutoWatermarkInterval, ws, op.emitTo())
		return task.Built{Op: op}, nil
	})
	impl.assigns = true
	return fromSource(env, src, impl)
}

// sourceWatermarkOp is a source operator that generates the watermarks of
// its output.
type sourceWatermarkOp[T any] struct {
	*sourceOp[T]
	wm *splitWatermarks[T]
}

var (
	_ task.WatermarkAssigner  = (*sourceWatermarkOp[int])(nil)
	_ task.WatermarkHandler   = (*sourceWatermarkOp[int])(nil)
	_ task.SourceDriver       = (*sourceWatermarkOp[int])(nil)
	_ task.CheckpointListener = (*sourceWatermarkOp[int])(nil)
	_ task.MetricsReporter    = (*sourceWatermarkOp[int])(nil)
	_ task.RecordCounter      = (*sourceWatermarkOp[int])(nil)
	_ SplitCollector[int]     = (*splitWatermarks[int])(nil)
)

// AssignsWatermarks implements task.WatermarkAssigner.
func (s *sourceWatermarkOp[T]) AssignsWatermarks() {}

// emitTo is where the records go: counted if the task counts them.
func (s *sourceWatermarkOp[T]) emitTo() Collector[T] {
	if s.ctx.CountRecords {
		return &s.count
	}
	return s.out
}

func (s *sourceWatermarkOp[T]) Open() error {
	if err := s.sourceOp.Open(); err != nil {
		return err
	}
	s.wm.open()
	return nil
}

func (s *sourceWatermarkOp[T]) Read() (task.ReadStatus, error) {
	st, err := s.reader.ReadBatch(s.wm)
	return task.ReadStatus(st), err
}

// ProcessWatermark sees the final watermark (the only one a source gets):
// the periodic emission stops, and an idle output turns active so that
// the final watermark counts downstream at once.
func (s *sourceWatermarkOp[T]) ProcessWatermark(wm int64) error {
	if wm == math.MaxInt64 {
		s.wm.end()
	}
	return nil
}

// watermarkContext is what splitWatermarks needs of its task: a
// *task.OpContext, or a test's fake.
type watermarkContext interface {
	Now() time.Time
	Schedule(at time.Time, fn func() error)
	EmitWatermark(wm int64) error
	EmitIdle(idle bool)
}

var _ watermarkContext = (*task.OpContext)(nil)

// splitWatermarks is the SplitCollector of a source subtask.
type splitWatermarks[T any] struct {
	ctx      watermarkContext
	tr       *task.Tracker
	interval time.Duration // AutoWatermarkInterval
	ws       WatermarkStrategy[T]
	out      Collector[T]
	main     splitOutput[T] // records of no split
	// splits are the outputs of the splits not released, by id.
	splits map[string]*splitOutput[T]
	// emitted is the last watermark emitted.
	emitted int64
	// idle is set while the subtask's output is marked idle.
	idle  bool
	ended bool
}

// splitOutput is one split's output, or the subtask-wide one.
type splitOutput[T any] struct {
	w        *splitWatermarks[T]
	gen      watermark.Generator
	idleness *watermark.Idleness // gen itself, nil without WithIdleness
	// used is set by the first record with a timestamp: the subtask-wide
	// output counts for the watermark only from then on.
	used bool
}

var _ SplitOutput[int] = (*splitOutput[int])(nil)

func newSplitWatermarks[T any](ctx watermarkContext, tr *task.Tracker, interval time.Duration, ws WatermarkStrategy[T], out Collector[T]) *splitWatermarks[T] {
	w := &splitWatermarks[T]{ctx: ctx, tr: tr, interval: interval, ws: ws, out: out,
		splits: map[string]*splitOutput[T]{}, emitted: watermark.NoWatermark}
	w.main = w.newOutput()
	return w
}

func (w *splitWatermarks[T]) newOutput() splitOutput[T] {
	o := splitOutput[T]{w: w, gen: w.ws.newGenerator()}
	if w.ws.idleness > 0 {
		o.idleness = watermark.WithIdleness(o.gen, w.ws.idleness, w.ctx.Now)
		o.gen = o.idleness
	}
	return o
}

func (w *splitWatermarks[T]) open() {
	w.ctx.Schedule(w.ctx.Now().Add(w.interval), w.periodic)
}

// Collect emits a record of no split.
func (w *splitWatermarks[T]) Collect(v T) { w.main.emit(v, task.NoTimestamp) }

// Split returns split id's output.
func (w *splitWatermarks[T]) Split(id string) SplitOutput[T] {
	o := w.splits[id]
	if o == nil {
		no := w.newOutput()
		o = &no
		w.splits[id] = o
	}
	return o
}

// ReleaseSplit forgets split id.
func (w *splitWatermarks[T]) ReleaseSplit(id string) { delete(w.splits, id) }

func (o *splitOutput[T]) Collect(v T) { o.emit(v, task.NoTimestamp) }

func (o *splitOutput[T]) CollectWithTimestamp(v T, ts int64) { o.emit(v, ts) }

// emit gives v its timestamp (the strategy's function's, else ts), feeds
// the output's generator and sends v on. A record of no split without a
// timestamp only passes on: counting it would make the subtask-wide output
// count at none, or keep it from turning idle, with no timestamp ever to
// move it.
func (o *splitOutput[T]) emit(v T, ts int64) {
	w := o.w
	if w.ws.timestamp != nil {
		ts = w.ws.timestamp(v)
	}
	if ts != task.NoTimestamp || o != &w.main {
		o.gen.OnEvent(ts) // NoTimestamp (a split's) leaves a generator's maximum alone but counts as activity
		if ts != task.NoTimestamp {
			o.used = true
		}
		if w.idle {
			w.idle = false
			w.ctx.EmitIdle(false)
		}
	}
	w.tr.Timestamp = ts
	w.out.Collect(v)
}

// periodic emits the minimum watermark of the outputs that are not idle,
// or marks the subtask idle when all are.
func (w *splitWatermarks[T]) periodic() error {
	if w.ended {
		return nil
	}
	wm, active := watermark.MaxWatermark, false
	take := func(o *splitOutput[T], counts bool) {
		v := o.gen.OnPeriodicEmit() // every time: it runs the idleness timer
		if !counts || (o.idleness != nil && o.idleness.IsIdle()) {
			return
		}
		active = true
		wm = min(wm, v)
	}
	take(&w.main, w.main.used)
	for _, o := range w.splits {
		take(o, true)
	}
	allIdle := !active && w.main.idleness != nil && w.main.idleness.IsIdle()
	switch {
	case active:
		if w.idle {
			w.idle = false
			w.ctx.EmitIdle(false)
		}
		if wm != watermark.NoWatermark && wm > w.emitted {
			w.emitted = wm
			if err := w.ctx.EmitWatermark(wm); err != nil {
				return err
			}
		}
	case allIdle && !w.idle:
		w.idle = true
		w.ctx.EmitIdle(true)
	}
	w.ctx.Schedule(w.ctx.Now().Add(w.interval), w.periodic)
	return nil
}

// end stops the periodic emission at the final watermark.
func (w *splitWatermarks[T]) end() {
	w.ended = true
	if w.idle {
		w.idle = false
		w.ctx.EmitIdle(false)
	}
}
