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
	"errors"
	"fmt"
	"log/slog"
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

// WatermarkHandler is implemented by operators that react to watermarks. The
// task calls it head first; the watermark is forwarded to the task's outputs
// after every chained operator handled it.
type WatermarkHandler interface {
	ProcessWatermark(wm int64) error
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

// Built is one subtask's instance of a stream node.
type Built struct {
	Op Operator
	// Input is the operator's input, a network.Output[IN] as any; nil for
	// sources.
	Input any
}

// NodeImpl is what the API layer stores in graph.Node.Impl: it builds the
// node's operator and the typed plumbing around its output type OUT.
type NodeImpl interface {
	// Build creates the operator of one subtask. out is a network.Output[OUT]
	// as any (nil for sinks).
	Build(ctx *OpContext, out any) (Built, error)
	// Fanout returns a network.Output[OUT] that passes each record to every
	// one of outs (each a network.Output[OUT]); with no outs it drops records.
	Fanout(outs []any) any
	// NetworkOutput returns a network.Output[OUT] that writes records to rp,
	// routed by e's partitioner, for producer subtask index of producers.
	NetworkOutput(e EdgeInfo, rp *network.ResultPartition, index, producers int) (any, error)
	// NewReader returns a reader that decodes records of type OUT into in, a
	// network.Output[OUT] as any.
	NewReader(in any) (network.BufferReader, error)
}

// EdgeInfo describes a network edge to NodeImpl.NetworkOutput.
type EdgeInfo struct {
	Partitioner network.Partitioner
	// Impl is graph.Edge.Impl.
	Impl any
	// Consumers and ConsumerMaxParallelism describe the target operator.
	Consumers, ConsumerMaxParallelism int
}

// Tracker records which chained operator is running, for error attribution.
type Tracker struct {
	// Cur is the index of the running operator in the task's chain.
	Cur int
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
}

// Fail aborts the task with err attributed to this operator. It does not
// return: it unwinds to the task, which closes the chain and reports an
// OperatorError.
func (c *OpContext) Fail(err error) {
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

func (e *OperatorError) Unwrap() error { return e.Err }

// PanicError is the cause of an OperatorError raised by a panic in user code.
type PanicError struct {
	Value any
	// Stack is the goroutine's stack at the panic, for logs; it is not part
	// of Error.
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }

// Unwrap returns the panic value if it is an error.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// ErrTaskCanceled is the cause a task reports when it stopped because the job
// was canceled or another task failed.
var ErrTaskCanceled = errors.New("task canceled")

// Clock tells the time; tests inject their own.
type Clock interface {
	Now() time.Time
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }
