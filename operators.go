package weir

import (
	"fmt"

	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/graph"
	"github.com/weirstream/weir/internal/metrics"
	"github.com/weirstream/weir/internal/network"
	"github.com/weirstream/weir/internal/operator"
	"github.com/weirstream/weir/internal/task"
)

// opBase holds what every operator needs: error attribution and its
// operator state.
type opBase struct {
	ctx        *task.OpContext
	tr         *task.Tracker
	id, parent int
	opState    *operator.State
}

func newOpBase(ctx *task.OpContext) opBase {
	os := operator.NewState(ctx.Restored, func(err error) { ctx.Fail(err) })
	return opBase{ctx: ctx, tr: ctx.Tracker, id: ctx.Index, parent: ctx.Parent, opState: os}
}

// SnapshotState copies the operator's list states.
func (b *opBase) SnapshotState(int64, checkpoint.Options) (task.OperatorSnapshot, error) {
	return task.OperatorSnapshot{Lists: b.opState.Snapshot()}, nil
}

func (opBase) Open() error     { return nil }
func (opBase) EndInput() error { return nil }
func (opBase) Close() error    { return nil }

// FromSource adds a source to the job. Its parallelism is the job default
// unless set on the returned stream.
func FromSource[T any](env *Environment, src Source[T]) *DataStream[T] {
	return fromSource(env, src, newNodeImpl(func(ctx *task.OpContext, out network.Output[T]) (task.Built, error) {
		return task.Built{Op: newSourceOp(ctx, src, out)}, nil
	}))
}

func newSourceOp[T any](ctx *task.OpContext, src Source[T], out network.Output[T]) *sourceOp[T] {
	return &sourceOp[T]{opBase: newOpBase(ctx), src: src, out: out, count: countingOutput[T]{out: out}}
}

// fromSource adds the source node that impl builds.
func fromSource[T any](env *Environment, src Source[T], impl *nodeImpl[T]) *DataStream[T] {
	n := &graph.Node{Name: "Source", Source: true}
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
	count  countingOutput[T]
	// metrics is the operator's group, set by RegisterMetrics when the
	// job exports metrics.
	metrics *MetricGroup
}

// countingOutput counts the records a source emits (Job.RecordCounts).
type countingOutput[T any] struct {
	out network.Output[T]
	n   int64
}

func (c *countingOutput[T]) Collect(v T) {
	c.n++
	c.out.Collect(v)
}

// RecordCount implements task.RecordCounter.
func (s *sourceOp[T]) RecordCount() (in, out int64) { return s.count.n, 0 }

// RegisterMetrics implements task.MetricsReporter: the reader's metrics
// (SourceContext.Metrics) go into the operator's group.
func (s *sourceOp[T]) RegisterMetrics(g *metrics.Group) { s.metrics = newMetricGroup(g, s.ctx.Logger) }

// NotifyCheckpointComplete implements task.CheckpointListener: it tells a
// reader that is a CheckpointListener.
func (s *sourceOp[T]) NotifyCheckpointComplete(id int64) error {
	if l, ok := s.reader.(CheckpointListener); ok {
		return l.NotifyCheckpointComplete(id)
	}
	return nil
}

// NotifyCheckpointAborted implements task.CheckpointListener.
func (s *sourceOp[T]) NotifyCheckpointAborted(int64) error { return nil }

func (s *sourceOp[T]) Open() error {
	var restored [][]byte
	if s.ctx.Restored != nil {
		// Restored, even without a splits list: the reader resumes with
		// exactly these (possibly no) splits instead of starting over.
		restored = [][]byte{}
		if l, ok := s.ctx.Restored.List(sourceSplitsState); ok {
			restored = l.Elements
		}
	}
	r, err := s.src.CreateReader(SourceContext{Subtask: s.ctx.Subtask, Parallelism: s.ctx.Parallelism,
		Operator: s.ctx.Name, Logger: s.ctx.Logger, RestoredSplits: restored, Metrics: s.metrics,
		CheckpointInterval: s.ctx.CheckpointInterval, state: s.opState})
	s.reader = r
	if _, ok := r.(CheckpointedReader); err == nil && !ok && s.ctx.Checkpointing && s.ctx.Subtask == 0 {
		s.ctx.Logger.Warn("this source's reader does not implement weir.CheckpointedReader: after a restore it reads its input from the start, so what it feeds is at least once, not exactly once")
	}
	return err
}

func (s *sourceOp[T]) Read() (task.ReadStatus, error) {
	var out Collector[T] = s.out
	if s.ctx.CountRecords {
		out = &s.count
	}
	st, err := s.reader.ReadBatch(out)
	return task.ReadStatus(st), err
}

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
func (s *sourceOp[T]) SnapshotState(id int64, opts checkpoint.Options) (task.OperatorSnapshot, error) {
	if cr, ok := s.reader.(CheckpointedReader); ok {
		splits, err := cr.SnapshotSplits()
		if err != nil {
			return task.OperatorSnapshot{}, fmt.Errorf("snapshot source splits: %w", err)
		}
		l, err := s.opState.List(sourceSplitsState, false)
		if err != nil {
			return task.OperatorSnapshot{}, err
		}
		if splits == nil {
			splits = [][]byte{} // finished: an empty list, not "no state"
		}
		l.Elements = splits
	}
	return s.opBase.SnapshotState(id, opts)
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
		op := &sinkOp[T]{opBase: newOpBase(ctx), sink: sink, post: ctx.Post}
		return task.Built{Op: op, Input: network.Output[T](op)}, nil
	}))
	return &DataSink{env: s.env, node: n}
}

// sinkOp runs a sink. For a TwoPhaseCommitSink it drives the protocol, and
// with a PreCommitSyncer writer it keeps this order for every transaction,
// whatever the order in which overlapping checkpoints
// (max-concurrent-checkpoints > 1) finish their phases:
//
//	PreCommit (synchronous phase of its checkpoint N)
//	  < SyncPreCommitted (asynchronous phase of N or of any later checkpoint)
//	  < Commit (completion of N or of any later checkpoint)
//
// Every checkpoint's state lists all transactions pending at its barrier,
// not only its own, and a restore commits them all; so the asynchronous
// phase of checkpoint M makes every transaction it lists durable, not only
// the one pre-committed at M. Checkpoint N+1 can then complete only once
// N's transaction is synced too, even if N's asynchronous phase has not
// reached the sink yet (it finds the work done and does nothing). Each
// transaction is synced once (operator.Sync); a phase that needs it while another
// syncs it waits for that sync. The commit checks it again, on the task
// goroutine: a transaction is never committed before its sync returned nil.
type sinkOp[T any] struct {
	opBase
	sink   Sink[T]
	writer SinkWriter[T]
	tpc    TwoPhaseCommitSink[T]
	pre    PreCommitter
	// syncer is pre as a PreCommitSyncer, nil if PreCommit makes its
	// transactions durable itself.
	syncer  PreCommitSyncer
	pending []operator.Txn // pre-committed, not yet committed, oldest first
	written int64
	// post runs fn on the task goroutine, where an error fails the task
	// (OpContext.Post; unit tests replace it).
	post func(fn func() error)
	// metrics is the operator's group, set by RegisterMetrics when the
	// job exports metrics.
	metrics *MetricGroup
}

// RegisterMetrics implements task.MetricsReporter: the writer's metrics
// (SinkContext.Metrics) go into the operator's group.
func (s *sinkOp[T]) RegisterMetrics(g *metrics.Group) { s.metrics = newMetricGroup(g, s.ctx.Logger) }

// RecordCount implements task.RecordCounter.
func (s *sinkOp[T]) RecordCount() (in, out int64) { return 0, s.written }

// sinkTxnState is the union list state a two-phase-commit sink keeps its
// pending transactions in: every subtask of a restored sink sees them all
// and commits those of the old subtasks it owns (old index mod new
// parallelism), which matches how the file sink divides leftover files.
const sinkTxnState = "sink-transactions"

// newTxnSync returns the sync of transaction txn, pre-committed at
// checkpoint id. Its failure also fails the task: no checkpoint that lists
// the transaction can complete any more (each one's asynchronous phase
// declines with the same error), so only a restore from the last completed
// checkpoint, which does not list it, makes progress; the restored writer
// deletes the pending file and its records are replayed, exactly once.
func (s *sinkOp[T]) newTxnSync(id int64, txn []byte) *operator.Sync {
	sy, post := s.syncer, s.post
	return operator.NewSync(func() error {
		if err := sy.SyncPreCommitted(txn); err != nil {
			err = fmt.Errorf("sync transaction pre-committed at checkpoint %d: %w", id, err)
			post(func() error { return err })
			return err
		}
		return nil
	})
}

func (s *sinkOp[T]) sinkContext() SinkContext {
	return SinkContext{Subtask: s.ctx.Subtask, Parallelism: s.ctx.Parallelism,
		Operator: s.ctx.Name, Logger: s.ctx.Logger, RunID: s.ctx.RunID, Metrics: s.metrics,
		CheckpointInterval: s.ctx.CheckpointInterval, state: s.opState}
}

func (s *sinkOp[T]) Open() error {
	sc := s.sinkContext()
	if tpc, ok := s.sink.(TwoPhaseCommitSink[T]); ok {
		s.tpc = tpc
		// Commit what the restored checkpoint pre-committed before the
		// writer exists: the writer then discards every other leftover.
		if r := s.ctx.Restored; r != nil {
			l, _ := r.List(sinkTxnState)
			for _, e := range l.Elements {
				t, err := operator.DecodeTxn(e)
				if err != nil {
					return err
				}
				if t.Subtask%s.ctx.Parallelism != s.ctx.Subtask {
					continue
				}
				if err := tpc.Commit(sc, t.Data); err != nil {
					return fmt.Errorf("commit transaction of restored checkpoint %d: %w", t.Checkpoint, err)
				}
			}
		}
	}
	w, err := s.sink.CreateWriter(sc)
	s.writer = w
	if err != nil {
		return err
	}
	if s.tpc != nil {
		pre, ok := w.(PreCommitter)
		if !ok {
			return fmt.Errorf("the writer of two-phase-commit sink %q does not implement PreCommitter", s.ctx.Name)
		}
		s.pre = pre
		s.syncer, _ = pre.(PreCommitSyncer)
		// Register the list now: a restored one is replaced at the next
		// snapshot by this subtask's own pending transactions.
		if _, err := s.opState.List(sinkTxnState, true); err != nil {
			return err
		}
	}
	return nil
}

func (s *sinkOp[T]) Collect(v T) {
	s.tr.Cur = s.id
	s.written++
	if err := s.writer.Write(v); err != nil {
		s.ctx.Fail(err)
	}
	s.tr.Cur = s.parent
}

func (s *sinkOp[T]) EndInput() error {
	if err := s.writer.Flush(); err != nil {
		return err
	}
	if s.tpc == nil || s.ctx.Checkpointing {
		return nil // the final checkpoint pre-commits and commits the rest
	}
	txn, err := s.pre.PreCommit(0)
	if err != nil || txn == nil {
		return err
	}
	if s.syncer != nil {
		if err := s.syncer.SyncPreCommitted(txn); err != nil {
			return err
		}
	}
	return s.tpc.Commit(s.sinkContext(), txn)
}

// SnapshotState pre-commits the open transaction and stores every pending
// one. With a PreCommitSyncer, the asynchronous phase (Persist) syncs every
// pending transaction that is not durable yet, this checkpoint's and
// earlier ones' (see sinkOp).
func (s *sinkOp[T]) SnapshotState(id int64, opts checkpoint.Options) (task.OperatorSnapshot, error) {
	if s.tpc != nil {
		txn, err := s.pre.PreCommit(id)
		if err != nil {
			return task.OperatorSnapshot{}, fmt.Errorf("pre-commit: %w", err)
		}
		if txn != nil {
			t := operator.Txn{Checkpoint: id, Subtask: s.ctx.Subtask, Data: txn}
			if s.syncer != nil {
				t.Durable = s.newTxnSync(id, txn)
			}
			s.pending = append(s.pending, t)
		}
		l, err := s.opState.List(sinkTxnState, true)
		if err != nil {
			return task.OperatorSnapshot{}, err
		}
		l.Elements = make([][]byte, len(s.pending))
		for i, t := range s.pending {
			l.Elements[i] = t.Encode()
		}
		snap, err := s.opBase.SnapshotState(id, opts)
		var syncs []*operator.Sync
		for _, t := range s.pending {
			if t.Durable != nil {
				syncs = append(syncs, t.Durable)
			}
		}
		if len(syncs) > 0 {
			snap.Persist = func() error {
				for _, d := range syncs {
					if err := d.Wait(); err != nil {
						return err
					}
				}
				return nil
			}
		}
		return snap, err
	}
	return s.opBase.SnapshotState(id, opts)
}

// NotifyCheckpointComplete commits every transaction pre-committed at or
// before checkpoint id, each once it is durable, and then tells a writer
// that is a CheckpointListener. Checkpoint id listed them
// all and completed, so its asynchronous phase has synced them: wait
// returns at once. Should one not be synced yet, it is synced here, on the
// task goroutine, before its commit; should its sync have failed, nothing
// more is committed and the task fails.
func (s *sinkOp[T]) NotifyCheckpointComplete(id int64) error {
	if err := s.commitThrough(id); err != nil {
		return err
	}
	if l, ok := s.writer.(CheckpointListener); ok {
		return l.NotifyCheckpointComplete(id)
	}
	return nil
}

// commitThrough commits the pending transactions of checkpoints up to id.
func (s *sinkOp[T]) commitThrough(id int64) error {
	n := 0
	for _, t := range s.pending {
		if t.Checkpoint > id {
			break
		}
		if t.Durable != nil {
			if err := t.Durable.Wait(); err != nil {
				return fmt.Errorf("transaction of checkpoint %d is not durable, not committing it: %w", t.Checkpoint, err)
			}
		}
		if err := s.tpc.Commit(s.sinkContext(), t.Data); err != nil {
			return fmt.Errorf("commit transaction of checkpoint %d: %w", t.Checkpoint, err)
		}
		n++
	}
	s.pending = s.pending[n:]
	return nil
}

// NotifyCheckpointAborted keeps the transactions: the next completed
// checkpoint commits them (they are in its state too).
func (s *sinkOp[T]) NotifyCheckpointAborted(int64) error { return nil }

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
