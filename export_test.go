package weir

import (
	"context"
	"fmt"
	"io"

	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/checkpoint/metadata"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/clock"
	"github.com/weirstream/weir/internal/graph"
	"github.com/weirstream/weir/internal/network"
	"github.com/weirstream/weir/internal/runner"
	"github.com/weirstream/weir/internal/task"
)

// TestHooks inject failures into a job run, for the external tests.
type TestHooks struct {
	// Sync and Upload run at the start of a subtask's synchronous and
	// asynchronous snapshot phases.
	Sync, Upload func(vertex, subtask int, id int64) error
	// ChannelState runs before a channel-state file of checkpoint id is
	// written; an error fails the write.
	ChannelState func(id int64) error
	// BeforeMetadata runs before a checkpoint's _metadata is written.
	BeforeMetadata func(id int64) error
	// Completed observes completed checkpoints.
	Completed func(id int64, cp *metadata.Checkpoint)
	// Storage replaces the checkpoint storage Options.Checkpoint.Dir names.
	Storage *storage.Storage
	// Clock replaces the system clock.
	Clock clock.Clock
	// Materialize runs at the end of a changelog materialization's upload;
	// an error fails that materialization.
	Materialize func(uid string, subtask int, id int64) error
}

// SetTestHooks installs h in env; call it before Execute.
func SetTestHooks(env *Environment, h TestHooks) {
	env.hooks = testHooks{
		task:        task.FaultHooks{Sync: h.Sync, Upload: h.Upload, ChannelState: h.ChannelState},
		runner:      runner.Hooks{BeforeMetadata: h.BeforeMetadata, Completed: h.Completed, Storage: h.Storage},
		materialize: h.Materialize,
		clock:       h.Clock,
	}
}

// ExecuteResult runs the job like Execute and also reports what the runner
// did.
func (e *Environment) ExecuteResult(ctx context.Context, name string) (runner.Result, error) {
	return e.execute(ctx, name)
}

// TriggerCanonicalCheckpoint is TriggerCheckpoint with the operators
// writing the canonical format whatever the configuration (what a
// savepoint will ask for).
func (e *Environment) TriggerCanonicalCheckpoint(ctx context.Context) (int64, error) {
	return e.triggerCheckpoint(ctx, checkpoint.FormatCanonical)
}

// StageRefs passes s through an operator that, at its first checkpoint,
// writes a file of its own under the job's shared/ directory and lists it
// as referenced by its state (metadata.Subtask.Refs) in every checkpoint
// until it has seen release records; it reports the file's path to staged.
// It stands for a sink that stages data in checkpoint storage and commits
// it much later.
func StageRefs[T any](s *DataStream[T], release int64, staged func(path string)) *DataStream[T] {
	return connect(s, &graph.Node{Name: "Stage"}, newNodeImpl(func(ctx *task.OpContext, out network.Output[T]) (task.Built, error) {
		op := &stagingOp[T]{opBase: newOpBase(ctx), out: out, release: release, staged: staged}
		return task.Built{Op: op, Input: network.Output[T](op)}, nil
	}))
}

type stagingOp[T any] struct {
	opBase
	out     network.Output[T]
	n       int64
	release int64
	staged  func(string)
	ref     *storage.FileHandle
	done    bool
}

func (m *stagingOp[T]) Collect(v T) {
	m.n++
	m.out.Collect(v)
}

func (m *stagingOp[T]) SnapshotState(id int64, _ checkpoint.Options) (task.OperatorSnapshot, error) {
	c := m.ctx
	if c.Storage == nil {
		return task.OperatorSnapshot{}, nil
	}
	if m.n >= m.release {
		m.ref, m.done = nil, true
	}
	if m.ref == nil && !m.done {
		fw, err := c.Storage.CreateSharedFile(context.Background(), c.StorageJob, fmt.Sprintf("staged-%s-%d-%d", c.RunID, c.Subtask, id))
		if err != nil {
			return task.OperatorSnapshot{}, err
		}
		h, err := storage.WriteAll(fw, func(w io.Writer) error {
			_, err := fmt.Fprintf(w, "staged by subtask %d at checkpoint %d\n", c.Subtask, id)
			return err
		})
		if err != nil {
			return task.OperatorSnapshot{}, err
		}
		m.ref = &h
		m.staged(h.Path)
	}
	if m.ref == nil {
		return task.OperatorSnapshot{}, nil
	}
	return task.OperatorSnapshot{Refs: []storage.FileHandle{*m.ref}}, nil
}
