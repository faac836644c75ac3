package weir

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/checkpoint/barrier"
	"github.com/weirstream/weir/internal/checkpoint/coordinator"
	"github.com/weirstream/weir/internal/clock"
	"github.com/weirstream/weir/internal/cluster"
	"github.com/weirstream/weir/internal/graph"
	"github.com/weirstream/weir/internal/keyed"
	"github.com/weirstream/weir/internal/metrics"
	"github.com/weirstream/weir/internal/restart"
	"github.com/weirstream/weir/internal/runner"
	"github.com/weirstream/weir/internal/task"
)

// Environment collects the dataflow of one job and executes it. Build the
// graph from one goroutine; an Environment runs one job.
type Environment struct {
	manual chan runner.ManualRequest // TriggerCheckpoint to the running job
	mu     sync.Mutex
	ended  chan struct{} // while Execute runs: closed when it returns
	opts   Options
	graph  graph.Graph
	errs   []error // problems found while the graph was declared
	// keyedConfig is what the keyed operators' runtimes get: derived from
	// opts, with the current run's metrics sink (set by execute).
	keyedConfig keyed.Config
	// hooks inject failures and a clock in tests (export_test.go).
	hooks testHooks
}

// NewEnvironment returns an environment with opts; problems with opts are
// reported by Execute.
func NewEnvironment(opts Options) *Environment {
	opts.EnsureDefaults()
	return &Environment{opts: opts, manual: make(chan runner.ManualRequest),
		keyedConfig: keyed.Config{Backend: opts.StateBackend, Changelog: opts.Changelog.keyed()}}
}

// Options returns the environment's options with defaults filled in.
func (e *Environment) Options() Options { return e.opts }

func (e *Environment) errorf(format string, args ...any) {
	e.errs = append(e.errs, fmt.Errorf(format, args...))
}

// ErrInvalidJob is wrapped by every error that Execute and Plan return for a
// job that cannot run as declared (bad options, missing codecs, parallelism
// conflicts), as opposed to a failure while it ran.
var ErrInvalidJob = errors.New("invalid job")

// jobGraph validates the declared graph and chains it.
func (e *Environment) jobGraph() (*graph.JobGraph, error) {
	errs := append([]error(nil), e.errs...)
	if err := e.opts.Validate(); err != nil {
		errs = append(errs, err)
	}
	if len(e.graph.Nodes) == 0 {
		errs = append(errs, errors.New("the job has no operators: add a source with FromSource"))
	}
	hasSink := false
	for _, n := range e.graph.Nodes {
		hasSink = hasSink || n.Sink
	}
	if len(e.graph.Nodes) > 0 && !hasSink {
		errs = append(errs, errors.New("the job has no sink: add one with SinkTo"))
	}
	jg, err := graph.Build(&e.graph, graph.Options{
		Parallelism: max(e.opts.Parallelism, 1), MaxParallelism: e.opts.MaxParallelism, Chaining: !e.opts.DisableChaining,
	})
	if err != nil {
		errs = append(errs, err)
	}
	if jg != nil {
		markTimestamped(&e.graph)
		for _, v := range jg.Vertices {
			for _, edge := range v.Outputs {
				if o, ok := edge.From.Impl.(outputs); ok && !o.output(edge.Output).hasCodec() {
					errs = append(errs, fmt.Errorf("operator %q sends records of type %s over a network edge to %q, which needs a codec: set one with WithCodec",
						edge.From.Name, o.output(edge.Output).typeName(), edge.To.Name))
				}
			}
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w: %w", ErrInvalidJob, errors.Join(errs...))
	}
	return jg, nil
}

type outputs interface {
	output(i int) codecChecker
}

type timestampAssigner interface {
	assignsTimestamps() bool
}

// markTimestamped marks the edges whose records carry event timestamps:
// those downstream of a timestamp assigner. Node IDs are topological.
func markTimestamped(g *graph.Graph) {
	ts := make([]bool, len(g.Nodes))
	for _, n := range g.Nodes {
		if a, ok := n.Impl.(timestampAssigner); ok && a.assignsTimestamps() {
			ts[n.ID] = true
		}
		for _, e := range n.Inputs {
			ts[n.ID] = ts[n.ID] || ts[e.From.ID]
		}
	}
	for _, n := range g.Nodes {
		for _, e := range n.Outputs {
			e.Timestamped = ts[n.ID]
		}
	}
}

// Plan returns the job graph Execute would run, one vertex (a chain of
// operators run by one task per subtask) per line with its outgoing edges.
func (e *Environment) Plan() (string, error) {
	jg, err := e.jobGraph()
	if err != nil {
		return "", err
	}
	return jg.String(), nil
}

// Execute runs the job until every source is exhausted and every record has
// reached its sinks, a task fails beyond what the restart strategy allows,
// or ctx ends. It returns nil after a clean finish, the failure (an
// *OperatorError for failures in operators), or ctx's error after
// cancellation. Every goroutine the job started has ended when Execute
// returns.
//
// With checkpointing on (Options.Checkpoint.Interval), the job takes
// periodic checkpoints, restarts from the latest one after a failure, and
// ends a bounded run with a final checkpoint that commits its last output.
func (e *Environment) Execute(ctx context.Context, name string) error {
	_, err := e.execute(ctx, name)
	return err
}

// ErrNoCheckpoint is wrapped by Execute's error when the checkpoint
// Options.Checkpoint.RestorePath names cannot be restored: "latest" and the
// job has no complete checkpoint whose data files are intact, or a named
// checkpoint that is missing, truncated, corrupt, one of whose data files
// is missing or differs from its recorded size or checksum (the error
// names it), or that does not fit the job. Nothing has started then.
var ErrNoCheckpoint = runner.ErrNoCheckpoint

// ErrStateMismatch is wrapped by Execute's error when the state of the
// checkpoint it restores does not fit the job (an operator uid the job
// lacks, another max parallelism, native pebble files restored on the
// hashmap backend): every restore would fail the same way, so the job
// fails without restarting.
var ErrStateMismatch = task.ErrStateMismatch

// ErrNotRunning is returned by TriggerCheckpoint when Execute is not
// running.
var ErrNotRunning = errors.New("the job is not running")

// TriggerCheckpoint takes a checkpoint of the job Execute is running now,
// outside the periodic schedule, and returns its id once it completed (its
// _metadata is durable and sinks were told to commit), or why it could
// not: ErrNotRunning, checkpointing disabled, too many concurrent
// checkpoints, or the checkpoint's failure. ctx bounds the wait.
func (e *Environment) TriggerCheckpoint(ctx context.Context) (int64, error) {
	return e.triggerCheckpoint(ctx, checkpoint.FormatConfigured)
}

func (e *Environment) triggerCheckpoint(ctx context.Context, format checkpoint.Format) (int64, error) {
	r, err := e.manualRequest(ctx, runner.ManualRequest{Format: format})
	return r.ID, err
}

// manualRequest hands req to the running job's runner and waits for its
// outcome.
func (e *Environment) manualRequest(ctx context.Context, req runner.ManualRequest) (runner.ManualResult, error) {
	e.mu.Lock()
	ended := e.ended
	e.mu.Unlock()
	if ended == nil {
		return runner.ManualResult{}, ErrNotRunning
	}
	reply := make(chan runner.ManualResult, 1)
	req.Reply = reply
	select {
	case e.manual <- req:
	case <-ended:
		return runner.ManualResult{}, ErrNotRunning
	case <-ctx.Done():
		return runner.ManualResult{}, ctx.Err()
	}
	select {
	case r := <-reply:
		return r, r.Err
	case <-ctx.Done():
		return runner.ManualResult{}, ctx.Err()
	}
}

// Savepoint formats (SavepointOptions.Format), Flink's names.
const (
	// SavepointCanonical is backend-independent: any state backend
	// restores it (the default).
	SavepointCanonical = "canonical"
	// SavepointNative is the backend's own format (pebble: its SST files,
	// copied into the savepoint): faster to take and restore, restorable
	// only by the same backend.
	SavepointNative = "native"
)

// SavepointOptions describe a savepoint (TriggerSavepoint,
// StopWithSavepoint).
type SavepointOptions struct {
	// Dir is the directory (a path or URL) the savepoint directory
	// savepoint-<job id prefix>-<random> is made in. Default
	// CheckpointOptions.SavepointDir.
	Dir string
	// Format is SavepointCanonical (default) or SavepointNative.
	Format string
	// Drain, for StopWithSavepoint, ends the sources first: they emit the
	// final watermark, so every event-time window fires and every
	// operator's end of input runs before the savepoint. Use it to end a
	// job for good; without it the job resumes from the savepoint with
	// nothing lost or duplicated.
	Drain bool
}

func (o SavepointOptions) format() (checkpoint.Format, error) {
	switch strings.ToLower(o.Format) {
	case "", SavepointCanonical:
		return checkpoint.FormatCanonical, nil
	case SavepointNative:
		return checkpoint.FormatNative, nil
	}
	return 0, fmt.Errorf("savepoint format %q: must be %s or %s", o.Format, SavepointCanonical, SavepointNative)
}

// ErrNoSavepointTarget is returned by TriggerSavepoint and
// StopWithSavepoint when neither the options nor
// CheckpointOptions.SavepointDir name a directory.
var ErrNoSavepointTarget = runner.ErrNoSavepointTarget

// TriggerSavepoint takes a savepoint of the job Execute is running now and
// returns its directory (a path or URL, what RestorePath takes) once its
// _metadata is durable. A savepoint is the user's: self-contained (it can
// be moved or copied elsewhere and restored from there), always aligned,
// never deleted by weir, and it commits no output of two-phase-commit
// sinks. Savepoints need checkpointing enabled (CheckpointOptions.Interval).
// ctx bounds the wait, not the savepoint.
func (e *Environment) TriggerSavepoint(ctx context.Context, o SavepointOptions) (string, error) {
	r, err := e.savepoint(ctx, o, false)
	return r.Path, err
}

// StopWithSavepoint takes a savepoint and then stops the job (Flink's
// stop-with-savepoint): once a subtask took its snapshot it processes
// nothing more; when the savepoint completes two-phase-commit sinks commit
// it and the job finishes (Execute returns nil); if it fails the job goes
// on running. It returns the savepoint's directory.
func (e *Environment) StopWithSavepoint(ctx context.Context, o SavepointOptions) (string, error) {
	r, err := e.savepoint(ctx, o, true)
	return r.Path, err
}

func (e *Environment) savepoint(ctx context.Context, o SavepointOptions, stop bool) (runner.ManualResult, error) {
	format, err := o.format()
	if err != nil {
		return runner.ManualResult{}, err
	}
	return e.manualRequest(ctx, runner.ManualRequest{Format: format,
		Savepoint: &runner.SavepointRequest{Target: o.Dir, Stop: stop, Drain: stop && o.Drain}})
}

func (e *Environment) execute(ctx context.Context, name string) (runner.Result, error) {
	ended := make(chan struct{})
	e.mu.Lock()
	e.ended = ended
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		e.ended = nil
		e.mu.Unlock()
		close(ended)
	}()
	jg, err := e.jobGraph()
	if err != nil {
		return runner.Result{}, err
	}
	if p := cluster.PartFrom(ctx); p != nil {
		// A task manager runs its part of an attempt the job manager
		// deployed: no runner, no checkpoint coordination, no job lock.
		return runner.Result{}, p.RunPart(ctx, jg, e.taskOptions(name))
	}
	co := e.opts.Checkpoint
	enabled := co.Interval > 0
	km := &keyed.Metrics{}
	e.keyedConfig.Metrics = km
	e.keyedConfig.MaterializeHook = e.hooks.materialize
	if e.opts.Changelog.Enabled && !enabled {
		e.opts.Logger.Warn("state.changelog.enabled has no effect without checkpoints: set execution.checkpointing.interval", "job", name)
	}
	if (co.LocalBackup || co.RecoverFromLocal) && !enabled {
		e.opts.Logger.Warn("local recovery (execution.checkpointing.local-backup.enabled, execution.state-recovery.from-local) has no effect without checkpoints: set execution.checkpointing.interval", "job", name)
	}
	unaligned, why := co.unaligned()
	if why != "" && enabled {
		e.opts.Logger.Warn(why, "job", name)
	}
	// One run per job directory: a run that loses the lock is cancelled.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	mon := e.newMonitor(name, jg, cancel)
	cfg := runner.Config{
		Monitor: mon,
		JobName: name, Graph: jg, Task: e.taskOptions(name), Enabled: enabled, SkipChannelStateID: co.RecoverWithoutChannelState,
		Retention: runner.Retention(co.Retention), SavepointDir: co.SavepointDir,
		Checkpoint: coordinator.Config{Interval: co.Interval, MinPause: co.MinPause, MaxConcurrent: co.MaxConcurrent,
			Timeout: co.Timeout, TolerableFailures: co.TolerableFailures, NumRetained: co.NumRetained, Unaligned: unaligned,
			AlignedTimeout: co.AlignedCheckpointTimeout},
		Clock: e.clock(), Logger: e.opts.Logger.With("job", name), Hooks: e.hooks.runner,
		Status: statusFunc(e.opts.OnStatus, km), StatusInterval: e.opts.StatusInterval,
		Manual: e.manual, OnCompleted: completedFunc(e.opts.OnCheckpointComplete, km),
	}
	if d := cluster.DeployerFrom(ctx); d != nil {
		// A cluster's job manager: the attempts run in task managers.
		cfg.Deploy = d.Deploy
	}
	jl := e.opts.JobLock
	cfg.Task.AllowNonRestoredState = co.AllowNonRestoredState
	st, err := runner.OpenStorage(ctx, &cfg, runner.StorageOptions{Dir: co.Dir, RestorePath: co.RestorePath, ClaimMode: co.ClaimMode,
		Force: jl.Force, LeaseDuration: jl.LeaseDuration, RenewInterval: jl.RenewInterval,
		OnLost: func(err error) { cancel(err) }})
	if err != nil {
		return runner.Result{}, err
	}
	defer st.Close()
	if cfg.Restart, err = restart.New(e.opts.Restart.config(enabled), nil); err != nil {
		return runner.Result{}, err
	}
	cfg.Task.JobID = mon.ID
	if e.opts.REST.Enabled {
		cfg.Task.Metrics = mon.Metrics
		km.Register(mon.Metrics.Group(metrics.ScopeTaskManagerJob,
			metrics.Label{Name: metrics.LabelJobID, Value: mon.ID}, metrics.Label{Name: metrics.LabelJobName, Value: name}))
	}
	srv, err := e.startREST(ctx, mon, cfg.Storage, cfg.JobDir)
	if err != nil {
		return runner.Result{}, err
	}
	defer srv.close()
	res, err := runner.Run(ctx, cfg)
	if runner.Retention(co.Retention) != runner.RetainOnCancellation {
		// The checkpoints the local copies are of may be gone: the copies
		// would only take space until the job's next run.
		o := cfg.Task
		o.Checkpoints, o.CheckpointJob, o.Logger = cfg.Storage, cfg.JobDir, cfg.Logger
		task.RemoveLocalCopies(o)
	}
	if lerr := st.LockErr(); lerr != nil && err != nil {
		return res, fmt.Errorf("job %q stopped: %w", name, lerr)
	}
	if err != nil && errors.Is(context.Cause(ctx), ErrCanceled) {
		return res, fmt.Errorf("job %q: %w", name, ErrCanceled)
	}
	return res, err
}

// clock is the job's clock: the system's unless a test set one.
func (e *Environment) clock() clock.Clock {
	if e.hooks.clock != nil {
		return e.hooks.clock
	}
	return clock.Real()
}

func (e *Environment) taskOptions(name string) task.Options {
	mode := barrier.ExactlyOnce
	if e.opts.Checkpoint.Mode == CheckpointingAtLeastOnce {
		mode = barrier.AtLeastOnce
	}
	return task.Options{
		JobName:                  name,
		SegmentSize:              e.opts.BufferSize,
		BuffersPerChannel:        e.opts.BuffersPerChannel,
		FloatingBuffersPerGate:   e.opts.FloatingBuffersPerGate,
		OverdraftBuffers:         e.opts.OverdraftBuffers,
		Debloat:                  e.opts.debloat(),
		BufferTimeout:            e.opts.BufferTimeout,
		Logger:                   e.opts.Logger.With("job", name),
		Clock:                    e.clock(),
		AutoWatermarkInterval:    e.opts.AutoWatermarkInterval,
		StateDir:                 e.opts.StateDir,
		CheckpointMode:           mode,
		Incremental:              e.opts.Checkpoint.Incremental,
		ChannelStateFileSubtasks: e.opts.Checkpoint.MaxSubtasksPerChannelStateFile,
		LocalRecovery: task.LocalRecoveryOptions{Backup: e.opts.Checkpoint.LocalBackup,
			FromLocal: e.opts.Checkpoint.RecoverFromLocal, Dirs: e.opts.Checkpoint.LocalBackupDirs},
		Hooks: e.hooks.task,
	}
}

// deploy builds the job's tasks without a runner, for tests that drive
// checkpoints themselves.
func (e *Environment) deploy(ctx context.Context, name string) (*task.Job, error) {
	jg, err := e.jobGraph()
	if err != nil {
		return nil, err
	}
	return task.Deploy(ctx, jg, e.taskOptions(name))
}

// OperatorError is the error a job fails with when one of its operators
// fails: it names the operator, the subtask and the cause.
type OperatorError = task.OperatorError

// PanicError is the cause inside an OperatorError when user code panicked.
type PanicError = task.PanicError
