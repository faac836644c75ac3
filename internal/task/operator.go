// Package task runs a job graph: one goroutine per subtask, each owning a
// chain of operators, its input gate and its result partitions.
//
// Lifecycle of a subtask, in order: every chained operator is opened, tail
// first, so an operator's consumers are ready before it emits; the task then
// reads its source or its input gate until every input has ended; it calls
// EndInput on every operator head first (an operator may emit final results
// there, which its chained consumers see before their own EndInput); it sends
// end-of-partition on every output; last it closes every operator, head first.
// On failure or cancellation the task skips to closing, returns partially
// filled buffers to their pools and reports the first error.
//
// Errors name the operator and subtask (OperatorError). A panic in user code
// is recovered into an OperatorError whose cause is a *PanicError. To know
// which chained operator was running, every operator sets Tracker.Cur to its
// own index on entry and back to its chain parent's index on return: two
// stores per record instead of a deferred recover per call.
package task

import (
	"context"
	"errors"
	"fmt"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"log/slog"
	"math"
	"time"

	"github.com/weirstream/weir/internal/network"
)

// Operator is one operator instance in a task's chain. All methods are called
// from the task's goroutine.
type Operator interface {
	// Open prepares the operator; it is called before any record arrives.
	Open() error
	// EndInput is called once after the operator's last input record of a
	// bounded input; it may emit.
	EndInput() error
	// Close releases resources. It is called exactly once, also after a
	// failure, and must not emit.
	Close() error
}

// WatermarkHandler is implemented by operators that react to watermarks
// (event-time timers, windows). An operator sees a watermark after every
// record that preceded it and before it is forwarded to its consumers.
type WatermarkHandler interface {
	ProcessWatermark(wm int64) error
}

// PreBarrier is implemented by operators that buffer records: at a
// checkpoint, before any operator of the chain is snapshotted and before
// the barrier goes downstream, each is asked, head first, to emit what it
// buffers, so that those records are in the checkpoint's state downstream
// (Flink's prepareSnapshotPreBarrier).
type PreBarrier interface {
	PrepareSnapshotPreBarrier(id int64) error
}

// WatermarkAssigner marks operators that generate the watermarks of their
// output themselves (OpContext.EmitWatermark): watermarks from upstream stop
// at them, except the final one (math.MaxInt64) at the end of input.
type WatermarkAssigner interface {
	AssignsWatermarks()
}

// ReadStatus is what a source read reports.
type ReadStatus int

const (
	// MoreAvailable means Read may be called again at once.
	MoreAvailable ReadStatus = iota
	// NothingAvailable means the source has nothing now; the task waits for
	// the source's Ready channel, if it has one, or a short back-off.
	NothingAvailable
	// EndOfInput means the source is exhausted.
	EndOfInput
)

// SourceDriver is the chain head of a source task.
type SourceDriver interface {
	Operator
	// Read emits a batch of records downstream.
	Read() (ReadStatus, error)
	// Ready returns a channel that is signalled when data may be available
	// after NothingAvailable, or nil to poll after a back-off.
	Ready() <-chan struct{}
}

// RecordCounter is implemented by operators that count records: sources
// the records they emit (in), sinks the records they write (out). The task
// reads the counts on its own goroutine and publishes them per input buffer
// or source batch (Job.RecordCounts).
type RecordCounter interface {
	RecordCount() (in, out int64)
}

// Built is one subtask's instance of a stream node.
type Built struct {
	Op Operator
	// Input is the operator's input, a network.Output[IN] as any; nil for
	// sources.
	Input any
	// Input2 is the second input of a two-input operator, a
	// network.Output[IN2] as any; edges with graph.Edge.Input 1 feed it.
	Input2 any
}

// NodeImpl is what the API layer stores in graph.Node.Impl: it builds the
// node's operator and, for each of its outputs (0 is the main output, others
// are side outputs, see graph.Edge.Output), the typed plumbing around the
// output's record type.
type NodeImpl interface {
	// Build creates the operator of one subtask. outs[i] is output i's
	// network.Output[T] as any: what every consumer of that output reads,
	// or a dropping output if it has none. Sinks get no outputs.
	Build(ctx *OpContext, outs []any) (Built, error)
	// NumOutputs is the number of outputs (main and side).
	NumOutputs() int
	// Output returns the plumbing of output i.
	Output(i int) OutputImpl
}

// OutputImpl builds the plumbing of one operator output with record type T.
type OutputImpl interface {
	// Fanout returns a network.Output[T] that passes each record to every
	// one of outs (each a network.Output[T]); with no outs it drops records.
	Fanout(outs []any) any
	// NetworkOutput returns a network.Output[T] that writes records to rp,
	// routed by e's partitioner, for producer subtask index of producers.
	NetworkOutput(e EdgeInfo, rp *network.ResultPartition, index, producers int) (any, error)
	// NewReader returns a reader that decodes records of type T into in, a
	// network.Output[T] as any, for the consumer task whose tracker is tr.
	NewReader(in any, timestamped bool, tr *Tracker) (network.BufferReader, error)
	// NewKeyFilteredReader is NewReader (e.Timestamped, e.Tracker: the
	// consumer's) that passes on only the records that hash edge e routes
	// to consumer subtask index of e.Consumers: in-flight data of an
	// unaligned checkpoint restored at another parallelism.
	NewKeyFilteredReader(in any, e EdgeInfo, index int) (network.BufferReader, error)
}

// EdgeInfo describes a network edge to OutputImpl.NetworkOutput.
type EdgeInfo struct {
	Partitioner network.Partitioner
	// Impl is graph.Edge.Impl.
	Impl any
	// Consumers and ConsumerMaxParallelism describe the target operator.
	Consumers, ConsumerMaxParallelism int
	// Timestamped edges carry each record's timestamp (Tracker.Timestamp of
	// the producer) in front of it.
	Timestamped bool
	// Tracker is the producing task's.
	Tracker *Tracker
}

// NoTimestamp is Tracker.Timestamp for records without an event time.
const NoTimestamp = math.MinInt64

// Tracker is the per-task record context: which chained operator is
// running, for error attribution, and the event timestamp of the record
// being processed.
type Tracker struct {
	// Cur is the index of the running operator in the task's chain.
	Cur int
	// Timestamp is the event time (Unix ms) of the current record, or
	// NoTimestamp. Operators that emit derived records leave it alone, so a
	// derived record keeps its input's timestamp.
	Timestamp int64
	// Cur is written several times per record: keep each task's tracker on
	// cache lines of its own, or parallel subtasks slow each other down.
	_ [120]byte
}

// OpContext is what an operator instance knows about where it runs.
type OpContext struct {
	Name, UID            string
	Subtask, Parallelism int
	MaxParallelism       int
	JobName              string
	Logger               *slog.Logger
	Tracker              *Tracker
	// Index is the operator's index in its task's chain; Parent is the index
	// of the chained operator that feeds it (its own index for a head).
	Index, Parent int
	// KeyGroupStart and KeyGroupEnd are the inclusive key-group range the
	// subtask owns.
	KeyGroupStart, KeyGroupEnd int
	// Keyed is set for operators whose input is partitioned by key.
	Keyed bool
	// AutoWatermarkInterval is how often watermark assigners emit.
	AutoWatermarkInterval time.Duration
	// StateDir is a local working directory for this operator subtask's
	// state; it is not created. Call ClaimStateDir before using it.
	StateDir string
	// Checkpointing is set when the job takes checkpoints that end with a
	// final one: two-phase-commit sinks then commit on checkpoint
	// completion only, not at the end of input.
	Checkpointing bool
	// CheckpointInterval is Options.CheckpointInterval: the periodic
	// checkpoint interval, 0 without periodic checkpoints.
	CheckpointInterval time.Duration
	// RunID tells this deployment's files from those of earlier runs.
	RunID string
	// Incremental asks for native, incremental snapshots of the pebble
	// backend (OperatorSnapshot.Native).
	Incremental bool
	// CountRecords asks sources to count the records they emit
	// (RecordCounter), which costs an indirect call per record.
	CountRecords bool
	// Restored is this subtask's share of the operator's state in the
	// checkpoint the job restores from; nil on a fresh start or when the
	// checkpoint has no state for the operator.
	Restored *RestoredState
	// Storage and StorageJob are the checkpoint storage and the job's
	// directory in it; Storage is nil when the job takes no checkpoints.
	Storage    *storage.Storage
	StorageJob string

	task     *task
	claimDir func() error
	failure  error // the first Fail, kept in case user code recovers it
}

// ClaimStateDir makes sure the run's local state directory, under which
// StateDir lies, exists and is locked for this run (so that a later run
// does not take it for the leftover of a dead one); it is deleted when the
// job ends.
func (c *OpContext) ClaimStateDir() error {
	if c.claimDir == nil {
		return nil
	}
	return c.claimDir()
}

// Post runs fn on the task's goroutine as soon as it is between records;
// unlike Schedule it may be called from any goroutine. An error from fn
// fails the task, attributed to this operator.
func (c *OpContext) Post(fn func() error) {
	t, op := c.task, c.Index
	t.mail.post(func() error {
		t.tracker.Cur = op
		if err := fn(); err != nil {
			return t.opError(op, err)
		}
		return nil
	})
}

// FileBase is the prefix of the operator subtask's checkpoint files:
// op-<uid>-<subtask>, the uid made file-name safe.
func (c *OpContext) FileBase() string { return fmt.Sprintf("op-%s-%d", sanitize(c.UID), c.Subtask) }

// CreateSnapshotFile starts data file name of snapshot id for an
// asynchronous phase: under chk-<id>/ in the job's checkpoint storage, or
// in the savepoint's own directory. It returns nil and no error when the
// snapshot is not persisted (no checkpoint storage).
func (c *OpContext) CreateSnapshotFile(ctx context.Context, id int64, name string) (storage.FileWriter, error) {
	if _, sp := c.task.targets.get(id); c.task.store == nil && !sp {
		return nil, nil
	}
	return c.task.createFile(ctx, id, name)
}

// Now returns the task's processing time.
func (c *OpContext) Now() time.Time { return c.task.clock.Now() }

// Schedule runs fn on the task's goroutine once processing time reaches at.
// An error from fn fails the task, attributed to this operator.
func (c *OpContext) Schedule(at time.Time, fn func() error) {
	c.task.schedule(at, c.Index, fn)
}

// EmitWatermark sends watermark wm downstream of this operator; only
// WatermarkAssigner operators call it. Watermarks that do not advance are
// dropped.
func (c *OpContext) EmitWatermark(wm int64) error {
	return c.task.emitWatermark(c.Index, wm)
}

// EmitIdle tells consumers downstream of this operator to ignore its
// watermark until it emits again (idle) or to count it again (active).
func (c *OpContext) EmitIdle(idle bool) { c.task.emitIdle(c.Index, idle) }

// CurrentWatermark returns the last watermark the task received on its
// inputs (math.MinInt64 before the first).
func (c *OpContext) CurrentWatermark() int64 { return c.task.watermark }

// Fail aborts the task with err attributed to this operator. It does not
// return: it unwinds to the task, which closes the chain and reports an
// OperatorError. The failure is also recorded: a user function that
// recovers it does not save the task, which fails with the first err as
// soon as the user function returns.
func (c *OpContext) Fail(err error) {
	if c.failure == nil {
		c.failure = err
	}
	panic(&opFailure{op: c.Index, err: err})
}

type opFailure struct {
	op  int
	err error
}

// OperatorError is how a failing operator ends a job: it names the operator,
// its subtask and the cause.
type OperatorError struct {
	Operator string
	UID      string
	// Subtask is the failing subtask's index, counting from 0.
	Subtask     int
	Parallelism int
	Err         error
}

// Error names the subtask as Flink does, counting from 1: "(2/4)".
func (e *OperatorError) Error() string {
	return fmt.Sprintf("operator %q (subtask %d/%d) failed: %v", e.Operator, e.Subtask+1, e.Parallelism, e.Err)
}

// Unwrap returns the cause.
func (e *OperatorError) Unwrap() error { return e.Err }

// PanicError is the cause of an OperatorError raised by a panic in user code.
type PanicError struct {
	Value any
	// Stack is the goroutine's stack at the panic, for logs; it is not part
	// of Error.
	Stack []byte
}

// Error renders the panic value.
func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }

// Unwrap returns the panic value if it is an error.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// ErrTaskCanceled is the cause a task reports when it stopped because the job
// was canceled or another task failed.
var ErrTaskCanceled = errors.New("task canceled")
