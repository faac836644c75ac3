// Package runner runs one job the way a job master does: it deploys the
// job's tasks, drives the checkpoint coordinator (triggers, acknowledgements,
// _metadata, notifications, retention), takes the final checkpoint of a
// bounded job, and after a failure asks the restart strategy whether and
// when to redeploy the tasks from the latest completed checkpoint.
//
// The coordinator (internal/checkpoint/coordinator) and the restart
// strategy (internal/restart) are deterministic state machines; this
// package is the goroutine and the I/O around them. Everything it does to
// checkpoint storage happens in the order the storage package requires:
// data files are durable before _metadata is written, and a checkpoint is
// reported complete, and sinks commit, only after its _metadata is durable.
package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/checkpoint/coordinator"
	"github.com/weirstream/weir/internal/checkpoint/metadata"
	"github.com/weirstream/weir/internal/checkpoint/registry"
	"github.com/weirstream/weir/internal/checkpoint/stats"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/clock"
	"github.com/weirstream/weir/internal/graph"
	"github.com/weirstream/weir/internal/monitor"
	"github.com/weirstream/weir/internal/network"
	"github.com/weirstream/weir/internal/restart"
	"github.com/weirstream/weir/internal/task"
)

// Retention is execution.checkpointing.externalized-checkpoint-retention:
// what happens to completed checkpoints when the job ends.
type Retention string

// Flink's values.
const (
	// RetainOnCancellation keeps completed checkpoints whatever the end
	// (weir's default: a command-line user expects to resume).
	RetainOnCancellation Retention = "RETAIN_ON_CANCELLATION"
	// DeleteOnCancellation deletes them when the job finishes or is
	// canceled, and keeps them when it fails.
	DeleteOnCancellation Retention = "DELETE_ON_CANCELLATION"
	// NoExternalizedCheckpoints deletes them whenever the job ends.
	NoExternalizedCheckpoints Retention = "NO_EXTERNALIZED_CHECKPOINTS"
)

// Config describes one job run.
type Config struct {
	// JobName names the job in logs and messages.
	JobName string
	Graph   *graph.JobGraph
	// Task is the base of every deployment's task options; the runner sets
	// the checkpoint and restore fields.
	Task task.Options
	// Checkpoint configures the coordinator; Interval 0 disables periodic
	// checkpoints (and the final checkpoint), unless Storage is set and
	// Enabled is true.
	Checkpoint coordinator.Config
	// Enabled turns checkpointing on; it requires Storage.
	Enabled bool
	// SkipChannelStateID is a checkpoint restored without its in-flight
	// data (execution.state-recovery.without-channel-state.checkpoint-id;
	// -1 or 0: none).
	SkipChannelStateID int64
	// Storage holds the job's checkpoints, under JobDir.
	Storage *storage.Storage
	JobDir  string
	// Retention decides what happens to completed checkpoints at the end.
	Retention Retention
	// Restart is the restart strategy; nil means never restart.
	Restart restart.Strategy
	// From is the checkpoint to start from (weir run --from); nil for a
	// fresh start. FromStorage and FromJob locate its files; when they are
	// Storage and JobDir the run owns the checkpoint (it is subsumed like
	// its own).
	From        *metadata.Checkpoint
	FromStorage *storage.Storage
	FromJob     string
	// FromPath is From's directory relative to FromStorage's root
	// ("<job>/chk-<n>" or a savepoint directory), for records;
	// FromLocation is where the user named it, for logs.
	FromPath, FromLocation string
	// Claim says the run owns From (resumed with latest, or restored in
	// CLAIM mode): From counts as one of its retained checkpoints and is
	// deleted once subsumed, and new checkpoints may share its files when
	// it is in the run's own job directory. Otherwise (NO_CLAIM, Flink's
	// default for an explicit path) nothing of From is ever deleted or
	// shared: the first checkpoint uploads everything.
	Claim bool
	// FromRestoreLatest is set when From is the job's own latest
	// checkpoint (RestoreLatest): a resume, not a restore of a snapshot.
	FromRestoreLatest bool
	// SavepointDir is where savepoints go when a request names no target
	// (execution.checkpointing.savepoint-dir); empty: none.
	SavepointDir string
	// Clock drives checkpoint scheduling and restart delays; default real.
	Clock  clock.Clock
	Logger *slog.Logger
	// Hooks inject failures, for tests.
	Hooks Hooks
	// OnCompleted, if set, is called on the runner's goroutine for every
	// completed checkpoint, after its completion line is logged.
	OnCompleted func(a coordinator.Completed, cp *metadata.Checkpoint)
	// Manual carries requests for checkpoints outside the periodic
	// schedule (Flink's manual trigger); nil: none.
	Manual <-chan ManualRequest
	// Status, if set, is called every StatusInterval (default 5s) from the
	// runner's goroutine with the job's progress.
	Status         func(Status)
	StatusInterval time.Duration
	// Monitor, if set, is kept up to date with the job's state, its
	// deployments and its checkpoint statistics (the REST API reads it).
	Monitor *monitor.Job
	// Deploy deploys one attempt of the job; default task.Deploy, every
	// subtask in this process. A cluster's job manager deploys to its
	// task managers instead.
	Deploy func(ctx context.Context, jg *graph.JobGraph, opts task.Options) (Deployment, error)
}

// Deployment is one running attempt of a job, as the runner drives it:
// a *task.Job in process, or the subtasks a cluster's job manager
// deployed to its task managers.
type Deployment interface {
	// Run runs every subtask until the job finishes, fails or is
	// canceled, and returns the first failure.
	Run() error
	// Cancel stops every subtask with cause.
	Cancel(cause error)
	// Tasks lists every subtask.
	Tasks() []task.TaskInfo
	// Acks delivers the subtasks' checkpoint acknowledgements and declines.
	Acks() <-chan task.Ack
	// SourcesEnded is closed once every source subtask read all its input.
	SourcesEnded() <-chan struct{}
	TriggerCheckpoint(id, triggerTime int64, opts checkpoint.Options)
	TriggerSavepoint(id, triggerTime int64, opts checkpoint.Options, target task.Target)
	NotifyCheckpointComplete(id int64, final bool)
	NotifyCheckpointAborted(id int64)
	// RecordCounts and Metrics are what the subtasks last published.
	RecordCounts() (in, out int64)
	Metrics() []task.TaskMetrics
}

var _ Deployment = (*task.Job)(nil)

// Status is a job's progress, for a periodic status line.
type Status struct {
	// RecordsIn are the records the sources emitted, RecordsOut those the
	// sinks wrote, in the current deployment (they start over after a
	// restart).
	RecordsIn, RecordsOut int64
	Restarts              int
	// Last is the latest completed checkpoint, nil if none.
	Last *metadata.Checkpoint
	// Tasks are the current deployment's per-subtask metrics.
	Tasks []task.TaskMetrics
}

// Hooks inject failures, for tests. Nil fields do nothing.
type Hooks struct {
	// BeforeMetadata runs after every data file of checkpoint id is
	// durable and before its _metadata is written; an error fails the
	// _metadata write.
	BeforeMetadata func(id int64) error
	// Completed runs after checkpoint id completed, before tasks are
	// notified.
	Completed func(id int64, cp *metadata.Checkpoint)
	// Storage, if set, replaces the checkpoint storage OpenStorage opens.
	Storage *storage.Storage
}

// ManualRequest asks for a checkpoint now. Reply receives its outcome
// once it completed or failed; it needs room for one value.
type ManualRequest struct {
	Reply chan<- ManualResult
	// Format is the snapshot format the operators write.
	Format checkpoint.Format
	// Savepoint, if set, asks for a savepoint instead of a checkpoint.
	Savepoint *SavepointRequest
}

// SavepointRequest describes a savepoint (ManualRequest.Savepoint).
type SavepointRequest struct {
	// Target is the directory (path or URL) the savepoint directory is
	// made in; empty: Config.SavepointDir.
	Target string
	// Stop stops the job once the savepoint completed
	// (stop-with-savepoint); Drain, with it, ends the sources first.
	Stop, Drain bool
}

// ErrNoSavepointTarget answers a savepoint request without a target when
// execution.checkpointing.savepoint-dir is not set either.
var ErrNoSavepointTarget = errors.New("no savepoint target directory: give one, or set execution.checkpointing.savepoint-dir")

// ManualResult is the outcome of a ManualRequest: the checkpoint id (0 if
// none was triggered) and nil once it completed, or why it failed.
type ManualResult struct {
	ID  int64
	Err error
	// Path is a completed savepoint's directory (a path or URL).
	Path string
}

// ErrCheckpointingDisabled answers manual requests when the job runs
// without checkpoints.
var ErrCheckpointingDisabled = errors.New("checkpointing is not enabled (set execution.checkpointing.interval)")

// Result reports what a run did.
type Result struct {
	// Restarts counts the times the job was redeployed after a failure.
	Restarts int
	// Completed lists the ids of the checkpoints completed by this run.
	Completed []int64
	// Latest is the newest completed checkpoint known at the end, nil if
	// none.
	Latest *metadata.Checkpoint
	// Savepoint is the location of the savepoint a stop-with-savepoint
	// took, if the run ended that way.
	Savepoint string
}

// ErrTooManyCheckpointFailures is matched (errors.Is) by the error of a
// job that failed because more consecutive checkpoints failed than
// execution.checkpointing.tolerable-failed-checkpoints allows. Its text is
// Flink's "Exceeded checkpoint tolerable failure threshold." message.
var ErrTooManyCheckpointFailures = errors.New("exceeded checkpoint tolerable failure threshold")

type checkpointFailuresError struct{ msg string }

func (e *checkpointFailuresError) Error() string { return e.msg }

// Is makes the error match ErrTooManyCheckpointFailures.
func (e *checkpointFailuresError) Is(target error) bool {
	return target == ErrTooManyCheckpointFailures
}

// ErrNotRestartable wraps failures that a restart cannot fix, such as a
// checkpoint whose state does not fit the job.
var ErrNotRestartable = errors.New("not restartable")

// Run runs the job until it finishes, fails beyond what the restart
// strategy allows, or ctx ends (a cancellation: the in-flight checkpoint
// is aborted and its files deleted). It returns nil after a clean finish.
func Run(ctx context.Context, cfg Config) (Result, error) {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Retention == "" {
		cfg.Retention = RetainOnCancellation
	}
	if cfg.Enabled && cfg.Storage == nil {
		return Result{}, errors.New("runner: checkpointing needs checkpoint storage")
	}
	r := &runner{cfg: cfg, log: cfg.Logger, metas: map[int64]*metadata.Checkpoint{}, reg: registry.New()}
	if cfg.Storage != nil {
		r.del = newDeleter(cfg.Storage, cfg.JobDir, cfg.Logger)
	}
	err := r.run(ctx)
	for _, s := range r.spStores {
		_ = s.Close()
	}
	res := Result{Restarts: r.restarts, Completed: r.completedIDs, Latest: r.latest, Savepoint: r.stoppedWith}
	return res, err
}

type runner struct {
	cfg Config
	log *slog.Logger

	nextID   int64
	latest   *metadata.Checkpoint // newest completed checkpoint
	retained []int64              // owned completed checkpoints, oldest first
	metas    map[int64]*metadata.Checkpoint
	// reg decides which acknowledged files may be deleted; del deletes
	// them (and chk-<n> directories) in the background, in order.
	reg          *registry.Registry
	del          *deleter
	completedIDs []int64
	restarts     int
	graph        []metadata.GraphVertex // the job graph as _metadata records it
	bg           sync.WaitGroup         // goroutines waiting for a deletion
	// claimed is a restored snapshot outside the job directory that the
	// run claimed (CLAIM mode): one of the retained ids, deleted from
	// where it is once subsumed.
	claimed *claimedBase
	// spStores are the storages savepoints were written to, closed at the
	// end; stoppedWith is the savepoint a stop-with-savepoint took.
	spStores    []*storage.Storage
	stoppedWith string
}

func (r *runner) run(ctx context.Context) error {
	defer r.bg.Wait()
	defer r.del.wait()
	restoreFrom, restoreStore, restoreJob := r.cfg.From, r.cfg.FromStorage, r.cfg.FromJob
	if err := r.prepareStorage(ctx); err != nil {
		return err
	}
	for {
		err := r.attempt(ctx, restoreFrom, restoreStore, restoreJob)
		r.cfg.Monitor.Deployed(nil, false)
		// No task runs now: delete what the attempt uploaded that no
		// complete checkpoint references (files of checkpoints the end of
		// the attempt aborted, uploads never acknowledged).
		r.sweep(context.WithoutCancel(ctx))
		if err == nil {
			r.endRetention(ctx, DeleteOnCancellation, NoExternalizedCheckpoints)
			r.cfg.Monitor.SetState(monitor.Finished)
			return nil
		}
		if ctx.Err() != nil {
			r.endRetention(context.WithoutCancel(ctx), DeleteOnCancellation, NoExternalizedCheckpoints)
			r.cfg.Monitor.SetState(monitor.Canceled)
			return err
		}
		r.cfg.Monitor.Failed(err)
		// A checkpoint whose state does not fit the job, or whose data is
		// damaged, fails every restore the same way: restarting would
		// loop forever.
		if errors.Is(err, ErrNotRestartable) || errors.Is(err, task.ErrStateMismatch) || errors.Is(err, task.ErrRestoreData) || r.cfg.Restart == nil {
			r.endRetention(ctx, NoExternalizedCheckpoints)
			r.cfg.Monitor.SetState(monitor.Failed)
			return err
		}
		again, delay := r.cfg.Restart.OnFailure(r.cfg.Clock.Now())
		if !again {
			r.log.Error("job failed; the restart strategy allows no more restarts", "strategy", r.cfg.Restart.String(), "err", err)
			r.endRetention(ctx, NoExternalizedCheckpoints)
			r.cfg.Monitor.SetState(monitor.Failed)
			return err
		}
		from := "its initial state"
		switch {
		case r.latest != nil:
			restoreFrom, restoreStore, restoreJob = r.latest, r.cfg.Storage, r.cfg.JobDir
			from = fmt.Sprintf("checkpoint %d", r.latest.ID)
		case restoreFrom != nil:
			from = r.cfg.FromLocation // no checkpoint of its own yet: the snapshot it started from
		}
		r.log.Warn(fmt.Sprintf("Job %s failed; restarting in %s from %s.", r.cfg.JobName, delay, from), "err", err)
		r.cfg.Monitor.SetState(monitor.Restarting)
		if err := sleep(ctx, r.cfg.Clock, delay); err != nil {
			r.cfg.Monitor.SetState(monitor.Canceled)
			return err
		}
		r.restarts++
	}
}

func sleep(ctx context.Context, c clock.Clock, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := c.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// prepareStorage picks the first checkpoint id after every chk-<n> the job
// directory holds, adopts the completed checkpoints when the run starts
// from one of its own (they are subsumed as usual; those newer than it,
// of a timeline the run abandons, are kept intact), and sweeps what a
// killed process left: incomplete checkpoints and unreferenced shared
// files.
func (r *runner) prepareStorage(ctx context.Context) error {
	r.nextID = 1
	if r.cfg.Storage == nil {
		return nil
	}
	entries, err := r.cfg.Storage.ListCheckpoints(ctx, r.cfg.JobDir)
	if err != nil {
		return fmt.Errorf("list checkpoints: %w", err)
	}
	own := r.cfg.From != nil && !r.cfg.From.Savepoint && r.cfg.FromStorage.Same(r.cfg.Storage) && r.cfg.FromJob == r.cfg.JobDir
	// A checkpoint of this directory an earlier run restored in NO_CLAIM
	// mode stays the user's in later runs too: pinned, never adopted.
	pinned := r.noClaimPin(ctx)
	if own && pinned == r.cfg.From.ID && r.cfg.FromRestoreLatest {
		// Resuming the pinned checkpoint itself (the NO_CLAIM run took
		// none of its own): it is still not the job's.
		r.cfg.Claim = false
	}
	for _, e := range entries {
		r.nextID = max(r.nextID, e.ID+1)
		if e.ID == pinned && e.Complete && (r.cfg.From == nil || e.ID != r.cfg.From.ID) {
			if cp, err := r.readOwn(ctx, e.ID); err == nil {
				r.reg.Adopt(e.ID, checkpointSharedPaths(cp))
			}
			continue
		}
		if own && e.Complete && e.ID > r.cfg.From.ID {
			// Newer than the checkpoint restored: not the run's to
			// subsume, but it may share files with the checkpoints the
			// run adopts and subsumes. Pinned (adopted, never released),
			// so that none of its files is deleted with theirs.
			if cp, err := r.readOwn(ctx, e.ID); err == nil {
				r.reg.Adopt(e.ID, checkpointSharedPaths(cp))
			}
			continue
		}
		if !own || !e.Complete || e.ID > r.cfg.From.ID || (e.ID == r.cfg.From.ID && !r.cfg.Claim) {
			continue
		}
		cp := r.cfg.From
		if e.ID != cp.ID {
			if cp, err = r.readOwn(ctx, e.ID); err != nil {
				continue // not adopted: the sweep decides what to do with it
			}
		}
		r.retained = append(r.retained, e.ID)
		r.metas[e.ID] = cp
		r.reg.Adopt(e.ID, checkpointSharedPaths(cp))
	}
	if from := r.cfg.From; from != nil {
		r.nextID = max(r.nextID, from.ID+1)
		switch {
		case own && r.cfg.Claim:
			r.latest = from
		case own:
			// NO_CLAIM of one of the job's own checkpoints: it stays, and
			// so does every file it references, whatever this run
			// subsumes (pinned: adopted, never released).
			r.latest = from
			r.reg.Adopt(from.ID, checkpointSharedPaths(from))
		case r.cfg.Claim:
			r.claimed = &claimedBase{id: from.ID, store: r.cfg.FromStorage, dir: r.cfg.FromJob, path: r.cfg.FromPath, savepoint: from.Savepoint}
			r.retained = append(r.retained, from.ID)
		}
	}
	r.sweep(ctx)
	return r.recordRestore(ctx)
}

// latestID is the newest completed checkpoint the coordinator starts from:
// the latest own one, or a claimed snapshot.
func (r *runner) latestID() int64 {
	var id int64
	if r.latest != nil {
		id = r.latest.ID
	}
	for _, x := range r.retained {
		id = max(id, x)
	}
	return id
}

func (r *runner) readOwn(ctx context.Context, id int64) (*metadata.Checkpoint, error) {
	payload, err := r.cfg.Storage.ReadMetadata(ctx, r.cfg.JobDir, id)
	if err != nil {
		return nil, err
	}
	return metadata.Decode(payload)
}

// endRetention deletes every owned completed checkpoint if the retention
// policy is one of deleting: the directories first, then the shared files
// no checkpoint references any more.
func (r *runner) endRetention(ctx context.Context, deleting ...Retention) {
	if r.cfg.Storage == nil || !slices.Contains(deleting, r.cfg.Retention) {
		return
	}
	r.del.wait()
	r.reg.Idle()
	failed := false
	for _, id := range r.retained {
		if c := r.claimed; c != nil && id == c.id {
			r.claimed = nil
			if len(r.completedIDs) == 0 {
				// Nothing newer exists: the claimed snapshot is all there
				// is of the job's state, whatever the retention says.
				continue
			}
			if err := c.release(ctx); err != nil {
				r.log.Warn("could not delete the claimed snapshot", "snapshot", c.path, "err", err)
			}
			continue
		}
		if err := r.cfg.Storage.DeleteCheckpoint(ctx, r.cfg.JobDir, id); err != nil {
			r.log.Warn("could not delete a checkpoint", "checkpoint", id, "err", err)
			failed = true
			continue
		}
		r.reg.Released(id)
		delete(r.metas, id)
	}
	r.retained = nil
	if failed {
		r.reg.Collect() // a surviving checkpoint may reference them: left to a later sweep
		return
	}
	for _, path := range r.reg.Collect() {
		if err := r.cfg.Storage.DeleteShared(ctx, r.cfg.JobDir, path); err != nil {
			r.log.Warn("could not delete a shared file", "file", path, "err", err)
		}
	}
}

// taskState is what one task's acknowledgement hands the coordinator: the
// state of each of its chained operators.
type taskState = []task.OperatorState

// metaResult is the outcome of one _metadata write.
type metaResult struct {
	id  int64
	err error
}

// attempt deploys the tasks once, restoring from cp if set, and drives
// checkpoints until the tasks end.
func (r *runner) attempt(ctx context.Context, cp *metadata.Checkpoint, cpStore *storage.Storage, cpJob string) error {
	opts := r.cfg.Task
	opts.JobName = r.cfg.JobName
	opts.Clock = r.cfg.Clock
	opts.Logger = r.log
	opts.RunID = ""
	opts.Restore, opts.RestoreStorage, opts.RestoreJob = cp, cpStore, cpJob
	// Only a snapshot the run owns may share files with its checkpoints.
	opts.RestoreOwned = cp != nil && (cp != r.cfg.From || r.cfg.Claim)
	opts.CheckpointInterval = 0
	if r.cfg.Enabled {
		opts.Checkpoints, opts.CheckpointJob, opts.FinalCheckpoint = r.cfg.Storage, r.cfg.JobDir, true
		opts.CheckpointInterval = r.cfg.Checkpoint.Interval
	}
	opts.CountRecords = r.cfg.Status != nil
	if cp != nil {
		what := fmt.Sprintf("checkpoint %d", cp.ID)
		if cp.Savepoint {
			what = "savepoint " + r.cfg.FromLocation
		}
		mode := "CLAIM"
		if cp == r.cfg.From && !r.cfg.Claim {
			mode = "NO_CLAIM"
		}
		r.log.Info(fmt.Sprintf("Restoring job %s from %s.", r.cfg.JobName, what), "restore-mode", mode)
		if opts.SkipChannelState = cp.ID == r.cfg.SkipChannelStateID; opts.SkipChannelState && cp.PersistedBytes > 0 {
			r.log.Warn(fmt.Sprintf("Restoring checkpoint %d without its in-flight data (%s are dropped, as execution.state-recovery.without-channel-state.checkpoint-id says): records are lost.",
				cp.ID, FormatBytes(cp.PersistedBytes)))
		}
	}
	deploy := r.cfg.Deploy
	if deploy == nil {
		deploy = func(ctx context.Context, jg *graph.JobGraph, opts task.Options) (Deployment, error) {
			return task.Deploy(ctx, jg, opts)
		}
	}
	job, err := deploy(ctx, r.cfg.Graph, opts)
	if err != nil {
		if errors.Is(err, task.ErrStateMismatch) {
			return fmt.Errorf("%w: %w", ErrNotRestartable, err)
		}
		return err
	}
	r.reg.Running()
	if m := r.cfg.Monitor; m != nil {
		if cp != nil {
			path := fmt.Sprintf("%s/chk-%d", cpJob, cp.ID)
			if cp.Savepoint {
				path = r.cfg.FromLocation
			}
			m.Checkpoints.Restored(stats.Restored{ID: cp.ID, Time: r.cfg.Clock.Now(), ExternalPath: path, Savepoint: cp.Savepoint})
		}
		m.Deployed(job, r.restarts > 0)
		m.SetState(monitor.Running)
	}
	d := &driver{ctx: ctx, r: r, job: job, names: map[coordinator.TaskID]string{}, meta: make(chan metaResult, 64),
		writing: map[int64]chan struct{}{}, triggers: map[int64]time.Time{}, gone: newGoneQueue(), savepoints: map[int64]*savepointState{}}
	return d.run()
}

// driver runs one deployment's checkpoints.
type driver struct {
	// ctx is the run's: cancelling it (Ctrl-C) also cancels a _metadata
	// write in flight, which aborts that checkpoint.
	ctx   context.Context
	r     *runner
	job   Deployment
	coord *coordinator.Coordinator[taskState]
	names map[coordinator.TaskID]string

	meta    chan metaResult
	writing map[int64]chan struct{} // _metadata writes in flight, closed when done
	// deleted holds, for aborted checkpoints whose _metadata was being
	// written, the outcome of deleting chk-<id>: until it is deleted the
	// checkpoint may look complete, so the tasks are told of the abort
	// (and delete the files only it referenced) only then.
	deleted  map[int64]*deletion
	pending  map[int64]*metadata.Checkpoint
	triggers map[int64]time.Time

	sourcesEnded <-chan struct{}
	finalAfter   int64 // ids >= finalAfter were triggered after the sources ended
	finalDone    bool

	manual map[int64]chan<- ManualResult // manual checkpoints awaiting their outcome
	// gone receives aborted checkpoints whose _metadata was being written
	// once the deletion of their chk-<id> ended: only then are their files
	// released (or kept, if it could not be deleted).
	gone *goneQueue
	// savepoints are this attempt's savepoints, by id; drainID is a
	// stop-with-savepoint with drain (its completion is the final
	// checkpoint).
	savepoints map[int64]*savepointState
	drainID    int64
	// drainFailed: a drain's savepoint failed after the sources ended; no
	// final checkpoint may be taken of that state.
	drainFailed bool
	// stopped is the completed stop-with-savepoint, answered by finish.
	stopped *stopReply
}

// stopReply is a completed stop-with-savepoint's answer, held until the
// tasks ended.
type stopReply struct {
	reply  chan<- ManualResult
	result ManualResult
}

func (d *driver) run() error {
	r := d.r
	done := make(chan error, 1)
	go func() { done <- d.job.Run() }()
	status := d.statusTicker()
	defer status.stop()
	if !r.cfg.Enabled {
		for {
			select {
			case err := <-done:
				return err
			case <-d.job.Acks(): // manual snapshots without storage: nothing to keep
			case req := <-r.cfg.Manual:
				err := ErrCheckpointingDisabled
				if req.Savepoint != nil {
					err = fmt.Errorf("savepoints need checkpointing: %w", err)
				}
				req.Reply <- ManualResult{Err: err}
			case <-status.c():
				status.report()
			}
		}
	}
	var tasks []coordinator.TaskID
	for _, t := range d.job.Tasks() {
		id := coordinator.TaskID{Vertex: t.Vertex, Subtask: t.Subtask}
		tasks = append(tasks, id)
		d.names[id] = t.Name
	}
	cc := r.cfg.Checkpoint
	cc.Tasks, cc.JobName = tasks, r.cfg.JobName
	coord, err := coordinator.New[taskState](cc, r.cfg.Clock.Now(), r.nextID)
	if latest := r.latestID(); err == nil && latest > 0 {
		err = coord.Restore(latest, r.retained)
	}
	if err != nil {
		d.job.Cancel(err)
		<-done
		return fmt.Errorf("%w: %w", ErrNotRestartable, err)
	}
	d.coord = coord
	d.pending = map[int64]*metadata.Checkpoint{}
	d.manual = map[int64]chan<- ManualResult{}
	d.sourcesEnded = d.job.SourcesEnded()

	var timer clock.Timer
	for {
		var tc <-chan time.Time
		if next := d.coord.NextTick(); !next.IsZero() {
			timer = r.cfg.Clock.NewTimer(max(next.Sub(r.cfg.Clock.Now()), 0))
			tc = timer.C()
		}
		var jobErr error
		finished := false
		select {
		case jobErr = <-done:
			finished = true
		case a := <-d.job.Acks():
			d.onAck(a)
		case m := <-d.meta:
			delete(d.writing, m.id)
			if m.err != nil {
				d.coord.MetadataFailed(r.cfg.Clock.Now(), m.id, m.err)
			} else {
				d.coord.MetadataWritten(r.cfg.Clock.Now(), m.id)
			}
		case <-d.sourcesEnded:
			d.sourcesEnded = nil
			d.finalAfter = d.coord.NextID()
			d.coord.EndUnaligned()
		case <-tc:
			d.coord.Tick(r.cfg.Clock.Now())
		case req := <-r.cfg.Manual:
			if req.Savepoint != nil {
				d.triggerSavepoint(req)
				break
			}
			id, err := d.coord.TriggerManual(r.cfg.Clock.Now(), req.Format)
			if err != nil {
				req.Reply <- ManualResult{Err: err}
			} else {
				d.manual[id] = req.Reply
			}
		case <-d.gone.signal:
			for _, g := range d.gone.take() {
				if g.deleted {
					d.r.reg.Aborted(g.id)
				} else {
					// chk-<id> may be complete on disk: its files stay.
					d.r.reg.Keep(g.id)
				}
			}
		case <-status.c():
			status.report()
		}
		if timer != nil {
			timer.Stop()
			timer = nil
		}
		if finished {
			return d.finish(jobErr)
		}
		d.apply()
		if d.finalAfter > 0 && !d.finalDone && !d.drainFailed && len(d.coord.Pending()) == 0 && !d.coord.Stopped() {
			if _, err := d.coord.TriggerManual(r.cfg.Clock.Now(), checkpoint.FormatConfigured); err == nil {
				d.apply()
			}
		}
	}
}

// statusTicker calls Config.Status periodically.
type statusTicker struct {
	d     *driver
	timer clock.Timer
}

func (d *driver) statusTicker() *statusTicker {
	st := &statusTicker{d: d}
	if d.r.cfg.Status != nil {
		if d.r.cfg.StatusInterval <= 0 {
			d.r.cfg.StatusInterval = 5 * time.Second
		}
		st.timer = d.r.cfg.Clock.NewTimer(d.r.cfg.StatusInterval)
	}
	return st
}

func (s *statusTicker) c() <-chan time.Time {
	if s.timer == nil {
		return nil
	}
	return s.timer.C()
}

func (s *statusTicker) report() {
	r := s.d.r
	in, out := s.d.job.RecordCounts()
	r.cfg.Status(Status{RecordsIn: in, RecordsOut: out, Restarts: r.restarts, Last: r.latest, Tasks: s.d.job.Metrics()})
	s.timer.Reset(r.cfg.StatusInterval)
}

func (s *statusTicker) stop() {
	if s.timer != nil {
		s.timer.Stop()
	}
}

// finish shuts the coordinator down once the tasks ended: pending
// checkpoints are aborted and their files deleted.
func (d *driver) finish(jobErr error) error {
	reason := coordinator.ReasonJobCanceled
	if jobErr != nil {
		reason = coordinator.ReasonJobFailing
	}
	// Ids are never reused: the files of this attempt's aborted checkpoints
	// are being deleted in the background, and a restart must not write a
	// checkpoint of the same id meanwhile.
	d.r.nextID = max(d.r.nextID, d.coord.NextID())
	d.coord.Shutdown(d.r.cfg.Clock.Now(), reason)
	d.apply()
	// Late acknowledgements: the coordinator asks to discard their files.
	for drained := false; !drained; {
		select {
		case a := <-d.job.Acks():
			d.onAck(a)
			d.apply()
		default:
			drained = true
		}
	}
	// _metadata writes still in flight end before the runner returns; the
	// cleanup of their checkpoints waits for them.
	for _, ch := range d.writing {
		<-ch
	}
	for id, reply := range d.manual {
		reply <- ManualResult{ID: id, Err: errors.New("the job ended before the checkpoint completed")}
	}
	if s := d.stopped; s != nil {
		// A stop is answered once the tasks ended: only then is its
		// savepoint committed by every sink.
		res := s.result
		if jobErr != nil {
			jobErr = fmt.Errorf("%w: the job failed while it stopped after its savepoint %s completed: %w; "+
				"restore from the savepoint (the restore commits what the savepoint's sinks had not committed yet)",
				ErrNotRestartable, res.Path, jobErr)
			res.Err = jobErr
		}
		s.reply <- res
	}
	return jobErr
}

func (d *driver) onAck(a task.Ack) {
	now := d.r.cfg.Clock.Now()
	if sp := d.savepoints[a.ID]; sp != nil {
		// A savepoint's files are its own directory's: the registry never
		// sees them. A subtask that declines after the savepoint was
		// aborted may have written into its directory since it was
		// deleted.
		if a.Declined != nil && sp.aborted {
			d.discardSavepoint(a.ID, sp)
		}
	} else if a.Declined == nil {
		// From here on only the registry decides when these files go,
		// whatever the coordinator does with the acknowledgement.
		d.r.reg.Acked(a.ID, sharedPaths(a.State))
	} else if d.decided(a.ID) {
		// The subtask may have written part of its state into chk-<id>
		// after the checkpoint's directory was deleted.
		d.r.del.enqueue(deleteJob{dir: a.ID})
	}
	id := coordinator.TaskID{Vertex: a.Vertex, Subtask: a.Subtask}
	if a.Declined != nil {
		reason := coordinator.ReasonDeclined
		switch a.Declined.Reason {
		case task.DeclineAsync:
			reason = coordinator.ReasonAsyncFailure
		case task.DeclineSubsumed:
			reason = coordinator.ReasonSubsumed
		}
		d.coord.Decline(now, a.ID, id, a.Declined, reason)
		return
	}
	if m := d.r.cfg.Monitor; m != nil {
		m.Checkpoints.Acked(a.ID, stats.Subtask{Vertex: a.Vertex, Index: a.Subtask, AckTime: now,
			EndToEnd: now.Sub(d.triggers[a.ID]), StartDelay: a.StartDelay, Alignment: a.Alignment, Sync: a.Sync, Async: a.Async,
			CheckpointedSize: a.Bytes, PersistedData: a.PersistedBytes, Unaligned: a.Unaligned})
	}
	d.coord.Ack(now, a.ID, id, coordinator.TaskStats{StartDelay: a.StartDelay, Alignment: a.Alignment,
		Sync: a.Sync, Async: a.Async, Bytes: a.Bytes, Unaligned: a.Unaligned, PersistedBytes: a.PersistedBytes}, a.State)
}

// apply carries out the coordinator's actions.
func (d *driver) apply() {
	r := d.r
	for _, a := range d.coord.Actions() {
		switch a := a.(type) {
		case coordinator.Trigger:
			d.triggers[a.ID] = a.Timestamp
			if sp := d.savepoints[a.ID]; sp != nil {
				if m := r.cfg.Monitor; m != nil {
					m.Checkpoints.Triggered(a.ID, a.Timestamp, stats.KindSavepoint, len(d.names))
				}
				r.log.Info(fmt.Sprintf("Triggering savepoint %d for job %s into %s (%s format%s).", a.ID, r.cfg.JobName, sp.path, sp.format, sp.kind()))
				d.job.TriggerSavepoint(a.ID, a.Timestamp.UnixMilli(), a.Options, task.Target{Store: sp.store, Dir: sp.dir})
				break
			}
			r.reg.Triggered(a.ID, a.Options.LastCompleted)
			if m := r.cfg.Monitor; m != nil {
				kind := stats.KindCheckpoint
				if a.Options.Unaligned {
					kind = stats.KindUnaligned
				}
				m.Checkpoints.Triggered(a.ID, a.Timestamp, kind, len(d.names))
			}
			d.job.TriggerCheckpoint(a.ID, a.Timestamp.UnixMilli(), a.Options)
		case coordinator.WriteMetadata[taskState]:
			d.writeMetadata(a)
		case coordinator.Completed:
			cp := d.pending[a.ID]
			delete(d.pending, a.ID)
			delete(d.triggers, a.ID)
			if a.Savepoint {
				d.savepointCompleted(a, cp)
				break
			}
			r.latest = cp
			r.metas[a.ID] = cp
			r.retained = append(r.retained, a.ID)
			r.reg.Completed(a.ID, checkpointSharedPaths(cp))
			r.completedIDs = append(r.completedIDs, a.ID)
			if len(r.completedIDs) == 1 {
				r.releaseRestore(a.ID)
			}
			if d.finalAfter > 0 && a.ID >= d.finalAfter {
				d.finalDone = true
			}
			r.log.Info(d.completionLine(a, cp))
			if m := r.cfg.Monitor; m != nil {
				m.Checkpoints.Completed(a.ID, r.cfg.Clock.Now(), cp.Bytes, cp.FullBytes, cp.PersistedBytes,
					fmt.Sprintf("%s/chk-%d", r.cfg.JobDir, a.ID))
			}
			if f := r.cfg.OnCompleted; f != nil {
				f(a, cp)
			}
			if h := r.cfg.Hooks.Completed; h != nil {
				h(a.ID, cp)
			}
			if reply, ok := d.manual[a.ID]; ok {
				reply <- ManualResult{ID: a.ID}
				delete(d.manual, a.ID)
			}
		case coordinator.NotifyComplete:
			d.job.NotifyCheckpointComplete(a.ID, (d.finalAfter > 0 && a.ID >= d.finalAfter) || a.ID == d.drainID)
		case coordinator.Subsume:
			for _, id := range a.IDs {
				r.retained = slices.DeleteFunc(r.retained, func(x int64) bool { return x == id })
				if c := r.claimed; c != nil && id == c.id {
					r.claimed = nil
					if m := r.cfg.Monitor; m != nil {
						m.Checkpoints.Discarded(id)
					}
					r.releaseClaimed(c)
					continue
				}
				r.reg.Released(id)
				delete(r.metas, id)
				if m := r.cfg.Monitor; m != nil {
					m.Checkpoints.Discarded(id)
				}
				r.del.enqueue(deleteJob{dir: id})
			}
		case coordinator.Aborted:
			args := []any{"checkpoint", a.ID, "reason", a.Reason.String()}
			if a.Cause != nil {
				args = append(args, "cause", a.Cause)
			}
			if m := r.cfg.Monitor; m != nil {
				msg := a.Message
				if a.Cause != nil {
					msg += " " + a.Cause.Error()
				}
				m.Checkpoints.Failed(a.ID, r.cfg.Clock.Now(), msg)
			}
			if a.Reason == coordinator.ReasonJobCanceled || a.Reason == coordinator.ReasonJobFailing || a.Reason == coordinator.ReasonSubsumed {
				r.log.Info(a.Message, args...)
			} else {
				r.log.Warn(a.Message, args...)
			}
			if sp := d.savepoints[a.ID]; sp != nil && sp.drain && a.Reason != coordinator.ReasonJobCanceled && a.Reason != coordinator.ReasonJobFailing {
				// The sources have ended their input and the final
				// watermark fired every window: going on would finish the
				// job with what the drain emitted. The attempt fails and
				// restarts from the latest checkpoint, before the drain.
				err := fmt.Errorf("stop-with-savepoint with drain of job %s failed (%s): its sources had already ended their input, so the job restarts from its latest checkpoint", r.cfg.JobName, a.Message)
				r.log.Warn(err.Error())
				d.drainFailed = true
				d.job.Cancel(err)
			} else if sp != nil && sp.stop {
				r.log.Warn(fmt.Sprintf("Stop-with-savepoint of job %s failed; the job goes on running.", r.cfg.JobName))
			}
			if reply, ok := d.manual[a.ID]; ok {
				err := errors.New(a.Message)
				if a.Cause != nil {
					err = fmt.Errorf("%s: %w", a.Message, a.Cause)
				}
				reply <- ManualResult{ID: a.ID, Err: err}
				delete(d.manual, a.ID)
			}
		case coordinator.CleanupFiles:
			delete(d.pending, a.ID)
			delete(d.triggers, a.ID)
			if sp := d.savepoints[a.ID]; sp != nil {
				sp.aborted = true
				d.discardSavepoint(a.ID, sp)
				break
			}
			d.cleanup(a.ID)
		case coordinator.NotifyAborted:
			if d.writing[a.ID] == nil || d.savepoints[a.ID] != nil {
				d.job.NotifyCheckpointAborted(a.ID)
				break
			}
			// Its _metadata is being written: tell the tasks once chk-<id>
			// is gone (never, if it cannot be deleted; the files then stay
			// until the sweep after the attempt, which sees it complete).
			id, deleted, job := a.ID, d.deletion(a.ID), d.job
			r.bg.Add(1)
			go func() {
				defer r.bg.Done()
				<-deleted.done
				if deleted.ok {
					job.NotifyCheckpointAborted(id)
				}
			}()
		case coordinator.DiscardState[taskState]:
			r.log.Info(a.Message)
			if sp := d.savepoints[a.ID]; sp != nil {
				d.discardSavepoint(a.ID, sp) // written after the savepoint was deleted
			} else if d.decided(a.ID) {
				// A late acknowledgement: its private files are in a
				// chk-<id> deleted before they were written, or not yet.
				r.del.enqueue(deleteJob{dir: a.ID})
			} else {
				d.discardPrivate(a.Handle)
			}
		case coordinator.FailJob:
			r.log.Error(a.Message, "checkpoint", a.ID, "reason", a.Reason.String())
			d.job.Cancel(&checkpointFailuresError{fmt.Sprintf("job %s: %s", r.cfg.JobName, a.Message)})
		}
	}
	r.collect()
}

// writeMetadata assembles the checkpoint's metadata from the tasks'
// handles and writes it in the background.
func (d *driver) writeMetadata(a coordinator.WriteMetadata[taskState]) {
	r := d.r
	// The completion time recorded is when the last task acknowledged:
	// _metadata cannot hold the moment it is itself durable.
	cp := &metadata.Checkpoint{Job: r.cfg.JobName, ID: a.ID, Bytes: a.Stats.Bytes,
		TriggerTime: d.triggers[a.ID].UnixMilli(), CompletionTime: r.cfg.Clock.Now().UnixMilli(),
		UnalignedSubtasks: a.Stats.UnalignedTasks, PersistedBytes: a.Stats.PersistedBytes}
	ops := map[string]*metadata.Operator{}
	var order []string
	for _, states := range a.Handles {
		for _, s := range states {
			op := ops[s.UID]
			if op == nil {
				op = &metadata.Operator{UID: s.UID, Name: s.Name, Parallelism: s.Parallelism, MaxParallelism: s.MaxParallelism}
				ops[s.UID] = op
				order = append(order, s.UID)
			}
			op.Subtasks = append(op.Subtasks, s.State)
		}
	}
	for _, uid := range order {
		cp.Operators = append(cp.Operators, *ops[uid])
	}
	cp.FullBytes = cp.FullSize()
	for _, t := range a.Stats.Tasks {
		name := d.names[t.Task]
		if i := strings.LastIndex(name, " ("); i >= 0 {
			name = name[:i]
		}
		cp.Tasks = append(cp.Tasks, metadata.TaskStats{Vertex: t.Task.Vertex, Name: name, Subtask: t.Task.Subtask,
			EndToEnd: t.EndToEnd.Milliseconds(), StartDelay: t.Stats.StartDelay.Milliseconds(),
			Alignment: t.Stats.Alignment.Milliseconds(), Sync: t.Stats.Sync.Milliseconds(), Async: t.Stats.Async.Milliseconds(),
			Bytes: t.Stats.Bytes, PersistedBytes: t.Stats.PersistedBytes, Unaligned: t.Stats.Unaligned})
	}
	cp.Graph = r.graphInfo()
	cp.JobID = r.cfg.Task.JobID
	sp := d.savepoints[a.ID]
	if sp != nil {
		cp.Savepoint, cp.Format = true, sp.format.String()
		if sp.format == checkpoint.FormatNative && !hasNative(cp) {
			// A backend without native files wrote the canonical stream.
			cp.Format = checkpoint.FormatCanonical.String()
		}
	}
	d.pending[a.ID] = cp
	payload, err := metadata.Encode(cp)
	ch := make(chan struct{})
	d.writing[a.ID] = ch
	store, job, hook := r.cfg.Storage, r.cfg.JobDir, r.cfg.Hooks.BeforeMetadata
	ctx := d.ctx
	go func() {
		if err == nil && hook != nil {
			err = hook(a.ID)
		}
		if err == nil && sp != nil {
			err = sp.store.WriteSavepointMetadata(ctx, sp.dir, payload)
		} else if err == nil {
			err = store.WriteMetadata(ctx, job, a.ID, payload)
		}
		close(ch)
		d.meta <- metaResult{id: a.ID, err: err}
	}()
}

// graphInfo describes the job graph for _metadata (computed once).
func (r *runner) graphInfo() []metadata.GraphVertex {
	if r.graph != nil || r.cfg.Graph == nil {
		return r.graph
	}
	g := r.cfg.Graph
	for _, v := range g.Vertices {
		gv := metadata.GraphVertex{Vertex: v.ID, Name: v.Name(), Parallelism: v.Parallelism}
		for _, n := range v.Nodes {
			gv.UIDs = append(gv.UIDs, n.UID)
		}
		for _, e := range v.Inputs {
			gv.Inputs = append(gv.Inputs, metadata.GraphInput{Vertex: g.VertexOf[e.From].ID, Forward: e.Partitioner == network.Forward})
		}
		r.graph = append(r.graph, gv)
	}
	return r.graph
}

// deletion is the outcome of deleting an aborted checkpoint's directory:
// done is closed when the attempt ended, ok says whether it succeeded.
type deletion struct {
	done chan struct{}
	ok   bool
}

// deletion returns the deletion of the aborted checkpoint id's directory.
func (d *driver) deletion(id int64) *deletion {
	if d.deleted == nil {
		d.deleted = map[int64]*deletion{}
	}
	del := d.deleted[id]
	if del == nil {
		del = &deletion{done: make(chan struct{})}
		d.deleted[id] = del
	}
	return del
}

// cleanup deletes aborted checkpoint id's directory and tells the registry
// that id is decided. While its _metadata is being written the checkpoint
// may still become complete on disk: its files are released only once
// chk-<id> is gone (never, if it cannot be deleted: the sweep after the
// attempt then finds it complete and keeps them).
func (d *driver) cleanup(id int64) {
	r := d.r
	wait := d.writing[id]
	if wait == nil {
		r.reg.Aborted(id)
		r.del.enqueue(deleteJob{dir: id})
		return
	}
	del, gone := d.deletion(id), d.gone
	r.del.enqueue(deleteJob{wait: wait, dir: id, done: func(ok bool) {
		del.ok = ok
		close(del.done)
		gone.put(id, ok)
	}})
}

// decided reports whether checkpoint id is neither pending in this attempt,
// nor retained, nor having its _metadata written: aborted, or completed and
// subsumed (or an earlier attempt's, already gone). Its chk-<id> may be
// deleted (again) at any time.
func (d *driver) decided(id int64) bool {
	_, undecided := d.triggers[id]
	return !undecided && id < d.coord.NextID() && !slices.Contains(d.r.retained, id) && d.writing[id] == nil
}

// goneQueue hands the outcomes of deleting aborted checkpoints' directories
// from the deleter to the driver: never blocking the deleter, never losing
// one (after the attempt nobody reads them, and the sweep decides).
type goneQueue struct {
	mu     sync.Mutex
	items  []goneResult
	signal chan struct{} // one pending wake-up at most
}

type goneResult struct {
	id      int64
	deleted bool
}

func newGoneQueue() *goneQueue { return &goneQueue{signal: make(chan struct{}, 1)} }

func (q *goneQueue) put(id int64, deleted bool) {
	q.mu.Lock()
	q.items = append(q.items, goneResult{id, deleted})
	q.mu.Unlock()
	select {
	case q.signal <- struct{}{}:
	default:
	}
}

func (q *goneQueue) take() []goneResult {
	q.mu.Lock()
	defer q.mu.Unlock()
	items := q.items
	q.items = nil
	return items
}

// discardPrivate deletes the private files (under chk-<n>/) of an
// acknowledgement nobody took; its shared files are the registry's.
func (d *driver) discardPrivate(states []task.OperatorState) {
	r := d.r
	for _, s := range states {
		for _, h := range s.State.Files() {
			if strings.HasPrefix(h.Path, storage.SharedDir+"/") {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
			err := r.cfg.Storage.DeleteFile(ctx, r.cfg.JobDir, h.Path)
			cancel()
			if err != nil {
				r.log.Warn("could not delete a discarded state file", "file", h.Path, "err", err)
			}
		}
	}
}

// completionLine is the one line a completed checkpoint logs: its id,
// duration and size, and which subtask had the largest start delay,
// alignment, synchronous and asynchronous phase.
func (d *driver) completionLine(a coordinator.Completed, cp *metadata.Checkpoint) string {
	s := a.Stats
	name := func(m coordinator.Max) string { return d.names[m.Task] }
	parts := ""
	if mat, log, recs, ok := cp.ChangelogParts(); ok {
		parts = fmt.Sprintf(" = materialized %s + log %s of %d records", FormatBytes(mat), FormatBytes(log), recs)
	}
	if s.UnalignedTasks > 0 {
		parts += fmt.Sprintf(", unaligned at %d of %d subtasks, persisted in-flight data %s", s.UnalignedTasks, len(s.Tasks), FormatBytes(s.PersistedBytes))
	} else if s.PersistedBytes > 0 {
		parts += fmt.Sprintf(", persisted in-flight data %s", FormatBytes(s.PersistedBytes))
	}
	return fmt.Sprintf("Completed checkpoint %d for job %s (checkpointed size %s, full size %s%s, checkpointDuration=%d ms): max start delay %s at %s, max alignment %s at %s, max sync %s at %s, max async %s at %s.",
		a.ID, d.r.cfg.JobName, FormatBytes(s.Bytes), FormatBytes(cp.FullBytes), parts, a.Duration.Milliseconds(),
		roundDur(s.MaxStartDelay.D), name(s.MaxStartDelay), roundDur(s.MaxAlignment.D), name(s.MaxAlignment),
		roundDur(s.MaxSync.D), name(s.MaxSync), roundDur(s.MaxAsync.D), name(s.MaxAsync))
}

func roundDur(d time.Duration) time.Duration {
	switch {
	case d >= time.Second:
		return d.Round(time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond)
	}
	return d.Round(time.Microsecond)
}

// FormatBytes renders a size for people: "812 B", "3.2 KiB", "41.0 MiB".
func FormatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
