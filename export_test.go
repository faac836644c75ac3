package weir

import (
	"context"

	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/checkpoint/metadata"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/clock"
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
