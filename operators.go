package weir

import (
	"fmt"

	"github.com/weirstream/weir/internal/graph"
	"github.com/weirstream/weir/internal/network"
	"github.com/weirstream/weir/internal/state"
	"github.com/weirstream/weir/internal/task"
)

// opBase holds what every operator needs: error attribution and its
// operator state.
type opBase struct {
	ctx        *task.OpContext
	tr         *task.Tracker
	id, parent int
	opState    *operatorState
}

func newOpBase(ctx *task.OpContext) opBase {
	return opBase{ctx: ctx, tr: ctx.Tracker, id: ctx.Index, parent: ctx.Parent,
		opState: newOperatorState(func(err error) { ctx.Fail(err) })}
}

func (opBase) Open() error     { return nil }
func (opBase) EndInput() error { return nil }
func (opBase) Close() error    { return nil }

// FromSource adds a source to the job. Its parallelism is the job default
// unless set on the returned stream.
func FromSource[T any](env *Environment, src Source[T]) *DataStream[T] {
	n := &graph.Node{Name: "Source", Source: true}
	impl := newNodeImpl(func(ctx *task.OpContext, out network.Output[T]) (task.Built, error) {
		return task.Built{Op: &sourceOp[T]{opBase: newOpBase(ctx), src: src, out: out}}, nil
	})
	n.Impl = impl
	env.graph.AddNode(n)
	if named, ok := src.(interface{ Name() string }); ok {
		n.Name = "Source: " + named.Name()
	}
	return &DataStream[T]{env: env, ups: []upstream[T]{{node: n, out: impl.main}}}
}

type sourceOp[T any] struct {
	opBase
	src    Source[T]
	reader SourceReader[T]
	out    network.Output[T]
}

func (s *sourceOp[T]) Open() error {
	r, err := s.src.CreateReader(SourceContext{Subtask: s.ctx.Subtask, Parallelism: s.ctx.Parallelism,
		Operator: s.ctx.Name, Logger: s.ctx.Logger, state: s.opState})
	s.reader = r
	return err
}

func (s *sourceOp[T]) Read() (task.ReadStatus, error) { return s.reader.ReadBatch(s.out) }

func (s *sourceOp[T]) Ready() <-chan struct{} {
	if rn, ok := s.reader.(ReadyNotifier); ok {
		return rn.Ready()
	}
	return nil
}

// sourceSplitsState is the operator list state a source keeps its readers'
// split states in.
const sourceSplitsState = "source-splits"

// SnapshotState stores the reader's unfinished splits, if it is
// checkpointed, in the operator's list state: the position a restore
// resumes from.
func (s *sourceOp[T]) SnapshotState(int64) error {
	cr, ok := s.reader.(CheckpointedReader)
	if !ok {
		return nil
	}
	splits, err := cr.SnapshotSplits()
	if err != nil {
		return fmt.Errorf("snapshot source splits: %w", err)
	}
	l, err := s.opState.store.List(sourceSplitsState, state.SplitDistribute)
	if err != nil {
		return err
	}
	l.Elements = splits
	return nil
}

func (s *sourceOp[T]) Close() error {
	if s.reader == nil {
		return nil
	}
	return s.reader.Close()
}

// Map applies fn to every record.
func Map[IN, OUT any](s *DataStream[IN], fn func(IN) OUT) *DataStream[OUT] {
	return connect(s, &graph.Node{Name: "Map"}, newNodeImpl(func(ctx *task.OpContext, out network.Output[OUT]) (task.Built, error) {
		op := &mapOp[IN, OUT]{opBase: newOpBase(ctx), fn: fn, out: out}
		return task.Built{Op: op, Input: network.Output[IN](op)}, nil
	}))
}

type mapOp[IN, OUT any] struct {
	opBase
	fn  func(IN) OUT
	out network.Output[OUT]
}

func (m *mapOp[IN, OUT]) Collect(v IN) {
	m.tr.Cur = m.id
	m.out.Collect(m.fn(v))
	m.tr.Cur = m.parent
}

// Filter keeps the records for which fn returns true.
func Filter[T any](s *DataStream[T], fn func(T) bool) *DataStream[T] {
	return passThrough(s, connect(s, &graph.Node{Name: "Filter"}, newNodeImpl(func(ctx *task.OpContext, out network.Output[T]) (task.Built, error) {
		op := &filterOp[T]{opBase: newOpBase(ctx), fn: fn, out: out}
		return task.Built{Op: op, Input: network.Output[T](op)}, nil
	})))
}

type filterOp[T any] struct {
	opBase
	fn  func(T) bool
	out network.Output[T]
}

func (f *filterOp[T]) Collect(v T) {
	f.tr.Cur = f.id
	if f.fn(v) {
		f.out.Collect(v)
	}
	f.tr.Cur = f.parent
}

// FlatMap calls fn for every record; fn emits any number of records to out.
// out is valid only during the call.
func FlatMap[IN, OUT any](s *DataStream[IN], fn func(v IN, out Collector[OUT])) *DataStream[OUT] {
	return connect(s, &graph.Node{Name: "FlatMap"}, newNodeImpl(func(ctx *task.OpContext, out network.Output[OUT]) (task.Built, error) {
		op := &flatMapOp[IN, OUT]{opBase: newOpBase(ctx), fn: fn, out: out}
		return task.Built{Op: op, Input: network.Output[IN](op)}, nil
	}))
}

type flatMapOp[IN, OUT any] struct {
	opBase
	fn  func(IN, Collector[OUT])
	out network.Output[OUT]
}

func (f *flatMapOp[IN, OUT]) Collect(v IN) {
	f.tr.Cur = f.id
	f.fn(v, f.out)
	f.tr.Cur = f.parent
}

// SinkTo writes the stream to sink. The returned handle names and sizes the
// sink operator.
func SinkTo[T any](s *DataStream[T], sink Sink[T]) *DataSink {
	n := &graph.Node{Name: "Sink", Sink: true}
	if named, ok := sink.(interface{ Name() string }); ok {
		n.Name = "Sink: " + named.Name()
	}
	connect(s, n, newNodeImpl(func(ctx *task.OpContext, _ network.Output[T]) (task.Built, error) {
		op := &sinkOp[T]{opBase: newOpBase(ctx), sink: sink}
		return task.Built{Op: op, Input: network.Output[T](op)}, nil
	}))
	return &DataSink{env: s.env, node: n}
}

type sinkOp[T any] struct {
	opBase
	sink   Sink[T]
	writer SinkWriter[T]
}

func (s *sinkOp[T]) Open() error {
	w, err := s.sink.CreateWriter(SinkContext{Subtask: s.ctx.Subtask, Parallelism: s.ctx.Parallelism,
		Operator: s.ctx.Name, Logger: s.ctx.Logger, state: s.opState})
	s.writer = w
	return err
}

func (s *sinkOp[T]) Collect(v T) {
	s.tr.Cur = s.id
	if err := s.writer.Write(v); err != nil {
		s.ctx.Fail(err)
	}
	s.tr.Cur = s.parent
}

func (s *sinkOp[T]) EndInput() error { return s.writer.Flush() }

func (s *sinkOp[T]) Close() error {
	if s.writer == nil {
		return nil
	}
	return s.writer.Close()
}

// DataSink is the handle of a sink operator.
type DataSink struct {
	env  *Environment
	node *graph.Node
}

// Name sets the sink's name.
func (d *DataSink) Name(name string) *DataSink { d.node.Name = name; return d }

// UID sets the sink's stable id.
func (d *DataSink) UID(uid string) *DataSink { d.node.UID = uid; return d }

// SetParallelism sets the sink's number of subtasks.
func (d *DataSink) SetParallelism(p int) *DataSink {
	if p < 1 {
		d.env.errorf("sink %q: parallelism %d must be at least 1", d.node.Name, p)
	}
	d.node.Parallelism = p
	return d
}

// DisableChaining runs the sink in a task of its own.
func (d *DataSink) DisableChaining() *DataSink { d.node.NoChain = true; return d }
