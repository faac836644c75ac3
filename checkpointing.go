package weir

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/weirstream/weir/internal/checkpoint/coordinator"
	"github.com/weirstream/weir/internal/checkpoint/metadata"
	"github.com/weirstream/weir/internal/clock"
	"github.com/weirstream/weir/internal/keyed"
	"github.com/weirstream/weir/internal/restart"
	"github.com/weirstream/weir/internal/runner"
	"github.com/weirstream/weir/internal/task"
)

// CheckpointOptions configure checkpoints and where a job starts from. The
// zero value disables checkpointing; every field documents its default and
// its configuration key.
type CheckpointOptions struct {
	// Interval between periodic checkpoints. Default 0: checkpointing off
	// (execution.checkpointing.interval).
	Interval time.Duration
	// Dir is the checkpoint storage: a path, file://, mem:// or a gocloud
	// blob URL (s3://...). Default "weir-data/checkpoints"
	// (execution.checkpointing.dir).
	Dir string
	// Incremental makes the pebble backend checkpoint incrementally: only
	// the files created since the last completed checkpoint are uploaded,
	// unchanged ones are shared (execution.checkpointing.incremental,
	// default false). The hashmap backend always takes full snapshots.
	Incremental bool
	// Mode is CheckpointingExactlyOnce (aligned barriers, the default) or
	// CheckpointingAtLeastOnce (execution.checkpointing.mode).
	Mode string
	// Timeout after which a pending checkpoint expires. Default 10 minutes
	// (execution.checkpointing.timeout).
	Timeout time.Duration
	// MinPause between the completion of a checkpoint and the next periodic
	// trigger. Default 0 (execution.checkpointing.min-pause).
	MinPause time.Duration
	// MaxConcurrent checkpoints in progress. Default 1
	// (execution.checkpointing.max-concurrent-checkpoints).
	MaxConcurrent int
	// TolerableFailures is how many consecutive failed checkpoints the job
	// survives before it fails over. Default 0
	// (execution.checkpointing.tolerable-failed-checkpoints).
	TolerableFailures int
	// NumRetained completed checkpoints. Default 1
	// (execution.checkpointing.num-retained).
	NumRetained int
	// Retention of completed checkpoints when the job ends:
	// "RETAIN_ON_CANCELLATION" (default), "DELETE_ON_CANCELLATION" or
	// "NO_EXTERNALIZED_CHECKPOINTS"
	// (execution.checkpointing.externalized-checkpoint-retention).
	Retention string
	// RestorePath is the checkpoint to start from: a chk-<n> directory, or
	// "latest" for the newest complete checkpoint of the job under Dir.
	// Default empty: a fresh start (execution.state-recovery.path).
	RestorePath string
	// ClaimMode says who owns the snapshot RestorePath names:
	// ClaimModeNoClaim (the default, as Flink: nothing of it is ever
	// deleted or shared, and the first checkpoint is a full one) or
	// ClaimModeClaim (it becomes one of the job's retained checkpoints and
	// is deleted once subsumed). RestoreLatest always claims: the job
	// resumes its own checkpoints (execution.state-recovery.claim-mode).
	ClaimMode string
	// AllowNonRestoredState lets a restore drop, with a warning, the state
	// of operator uids the job no longer has; otherwise such a restore
	// fails naming them. Default false
	// (execution.state-recovery.ignore-unclaimed-state).
	AllowNonRestoredState bool
	// SavepointDir is where a savepoint goes when its trigger names no
	// directory. Default empty: the trigger must name one
	// (execution.checkpointing.savepoint-dir).
	SavepointDir string
	// Unaligned checkpoints let barriers overtake the data queued in the
	// network, which the tasks persist with the checkpoint instead: the
	// checkpoint time no longer depends on backpressure. They need
	// exactly-once mode and MaxConcurrent 1; otherwise the job logs a
	// warning and checkpoints aligned. Default false
	// (execution.checkpointing.unaligned.enabled). See
	// docs/checkpointing.md.
	Unaligned bool
	// AlignedCheckpointTimeout, with Unaligned, starts every checkpoint
	// aligned and switches it to unaligned where its barriers are still
	// held up this long after the trigger: a checkpoint persists in-flight
	// data only under backpressure. Default 0: unaligned from the start
	// (execution.checkpointing.aligned-checkpoint-timeout).
	AlignedCheckpointTimeout time.Duration
	// MaxSubtasksPerChannelStateFile is how many subtasks share one file
	// for the in-flight data of an unaligned checkpoint: fewer, larger
	// files. 1 writes a file per subtask. Default 5
	// (execution.checkpointing.unaligned.max-subtasks-per-channel-state-file).
	MaxSubtasksPerChannelStateFile int
	// RecoverWithoutChannelState names a checkpoint to restore without
	// its in-flight data, the escape hatch for channel state that cannot
	// be read: the records it held are lost. Default -1: none
	// (execution.state-recovery.without-channel-state.checkpoint-id).
	RecoverWithoutChannelState int64
	// LocalBackup keeps, besides the upload, a local copy of every
	// subtask's keyed state for the latest completed checkpoint, so that
	// a restart on this machine can skip the download (Flink's local
	// recovery; see docs/local-recovery.md). Pebble incremental
	// checkpoints keep the snapshot directory they uploaded from (a
	// rename, nothing written); full checkpoints write their stream a
	// second time, to a local file. Default false; RecoverFromLocal
	// implies it (execution.checkpointing.local-backup.enabled).
	LocalBackup bool
	// RecoverFromLocal restores each subtask from its local copy when one
	// matches the restored checkpoint exactly, reading none of its keyed
	// state from Dir; the other subtasks (no copy, another key-group range
	// after rescaling, a damaged copy) read Dir, with a warning. Default
	// false (execution.state-recovery.from-local).
	RecoverFromLocal bool
	// LocalBackupDirs are the root directories of the local copies;
	// subtask i uses LocalBackupDirs[i % len]. For the pebble backend
	// they should be on the file system of Options.StateDir (copies are
	// then renames, restores hard links). Default
	// <Options.StateDir>/local-recovery
	// (execution.checkpointing.local-backup.dirs).
	LocalBackupDirs []string
}

// unaligned reports whether checkpoints run unaligned, and why not if they
// were asked to and cannot.
func (c *CheckpointOptions) unaligned() (bool, string) {
	switch {
	case !c.Unaligned:
		return false, ""
	case c.Mode != CheckpointingExactlyOnce:
		return false, "unaligned checkpoints need execution.checkpointing.mode EXACTLY_ONCE; checkpointing aligned"
	case c.MaxConcurrent != 1:
		return false, fmt.Sprintf("unaligned checkpoints need execution.checkpointing.max-concurrent-checkpoints 1, not %d; checkpointing aligned", c.MaxConcurrent)
	}
	return true, ""
}

// Checkpointing modes.
const (
	CheckpointingExactlyOnce = "EXACTLY_ONCE"
	CheckpointingAtLeastOnce = "AT_LEAST_ONCE"
)

// RestoreLatest as CheckpointOptions.RestorePath resumes from the newest
// complete checkpoint of the job.
const RestoreLatest = runner.RestoreLatest

func (c *CheckpointOptions) ensureDefaults() {
	if c.Dir == "" {
		c.Dir = filepath.Join("weir-data", "checkpoints")
	}
	if c.Mode == "" {
		c.Mode = CheckpointingExactlyOnce
	}
	c.Mode = strings.ToUpper(c.Mode)
	if c.Timeout == 0 {
		c.Timeout = 10 * time.Minute
	}
	if c.MaxConcurrent == 0 {
		c.MaxConcurrent = 1
	}
	if c.NumRetained == 0 {
		c.NumRetained = 1
	}
	if c.Retention == "" {
		c.Retention = string(runner.RetainOnCancellation)
	}
	c.Retention = strings.ToUpper(c.Retention)
	if c.ClaimMode == "" {
		c.ClaimMode = ClaimModeNoClaim
	}
	c.ClaimMode = strings.ToUpper(c.ClaimMode)
}

// Restore modes (CheckpointOptions.ClaimMode), Flink's names.
const (
	ClaimModeClaim   = runner.ClaimModeClaim
	ClaimModeNoClaim = runner.ClaimModeNoClaim
)

func (c *CheckpointOptions) validate() []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.Interval < 0 {
		bad("checkpoint interval %v must not be negative", c.Interval)
	}
	if c.Mode != CheckpointingExactlyOnce && c.Mode != CheckpointingAtLeastOnce {
		bad("checkpointing mode %q must be %s or %s", c.Mode, CheckpointingExactlyOnce, CheckpointingAtLeastOnce)
	}
	if c.Timeout < 0 {
		bad("checkpoint timeout %v must be positive", c.Timeout)
	}
	if c.MinPause < 0 {
		bad("checkpoint min pause %v must not be negative", c.MinPause)
	}
	if c.MaxConcurrent < 1 {
		bad("max concurrent checkpoints %d must be at least 1", c.MaxConcurrent)
	}
	if c.TolerableFailures < 0 {
		bad("tolerable failed checkpoints %d must not be negative", c.TolerableFailures)
	}
	if c.NumRetained < 1 {
		bad("retained checkpoints %d must be at least 1", c.NumRetained)
	}
	if c.MaxSubtasksPerChannelStateFile < 0 {
		bad("max subtasks per channel-state file %d must be at least 1", c.MaxSubtasksPerChannelStateFile)
	}
	for _, d := range c.LocalBackupDirs {
		if strings.TrimSpace(d) == "" {
			bad("local backup directories %q must not contain an empty path", c.LocalBackupDirs)
			break
		}
	}
	if c.AlignedCheckpointTimeout < 0 {
		bad("aligned checkpoint timeout %v must not be negative", c.AlignedCheckpointTimeout)
	}
	if c.ClaimMode != ClaimModeClaim && c.ClaimMode != ClaimModeNoClaim {
		bad("restore mode %q must be %s or %s", c.ClaimMode, ClaimModeNoClaim, ClaimModeClaim)
	}
	switch runner.Retention(c.Retention) {
	case runner.RetainOnCancellation, runner.DeleteOnCancellation, runner.NoExternalizedCheckpoints:
	default:
		bad("checkpoint retention %q must be %s, %s or %s", c.Retention, runner.RetainOnCancellation, runner.DeleteOnCancellation, runner.NoExternalizedCheckpoints)
	}
	return errs
}

// RestartOptions choose the restart strategy, with Flink's keys and
// defaults. Zero fields take the default of the chosen strategy.
type RestartOptions struct {
	// Type is "none", "fixed-delay", "failure-rate" or "exponential-delay".
	// Default: exponential-delay when checkpointing is enabled, none
	// otherwise (restart-strategy.type).
	Type string
	// FixedDelayAttempts (default 1) and FixedDelay (default 1s)
	// (restart-strategy.fixed-delay.*).
	FixedDelayAttempts int
	FixedDelay         time.Duration
	// MaxFailuresPerInterval (default 1), FailureRateInterval (default 1
	// min) and FailureRateDelay (default 1s)
	// (restart-strategy.failure-rate.*).
	MaxFailuresPerInterval int
	FailureRateInterval    time.Duration
	FailureRateDelay       time.Duration
	// InitialBackoff (default 1s), MaxBackoff (default 1 min),
	// BackoffMultiplier (default 1.5), ResetBackoffThreshold (default 1h),
	// JitterFactor (default 0.1; negative for none)
	// (restart-strategy.exponential-delay.*).
	InitialBackoff        time.Duration
	MaxBackoff            time.Duration
	BackoffMultiplier     float64
	ResetBackoffThreshold time.Duration
	JitterFactor          float64
}

func (r RestartOptions) config(checkpointing bool) restart.Config {
	c := restart.Default(checkpointing)
	if r.Type != "" {
		c.Type = strings.ToLower(r.Type)
	}
	set := func(dst *time.Duration, v time.Duration) {
		if v != 0 {
			*dst = v
		}
	}
	if r.FixedDelayAttempts != 0 {
		c.FixedDelayAttempts = r.FixedDelayAttempts
	}
	set(&c.FixedDelay, r.FixedDelay)
	if r.MaxFailuresPerInterval != 0 {
		c.MaxFailuresPerInterval = r.MaxFailuresPerInterval
	}
	set(&c.FailureRateInterval, r.FailureRateInterval)
	set(&c.FailureRateDelay, r.FailureRateDelay)
	set(&c.InitialBackoff, r.InitialBackoff)
	set(&c.MaxBackoff, r.MaxBackoff)
	if r.BackoffMultiplier != 0 {
		c.BackoffMultiplier = r.BackoffMultiplier
	}
	set(&c.ResetBackoffThreshold, r.ResetBackoffThreshold)
	switch {
	case r.JitterFactor < 0:
		c.JitterFactor = 0
	case r.JitterFactor > 0:
		c.JitterFactor = r.JitterFactor
	}
	return c
}

// testHooks inject failures, observe checkpoints and drive the clock in
// tests; export_test.go installs them in an Environment.
type testHooks struct {
	task   task.FaultHooks
	runner runner.Hooks // its Storage replaces the storage Dir names
	// materialize runs at the end of a changelog materialization's upload;
	// an error fails it.
	materialize func(uid string, subtask int, id int64) error
	clock       clock.Clock // nil: the system clock
}

// JobStatus is a running job's progress (Options.OnStatus).
type JobStatus struct {
	// RecordsIn are the records the sources emitted and RecordsOut those
	// the sinks wrote since the last (re)start.
	RecordsIn, RecordsOut int64
	// Restarts counts the restarts after failures.
	Restarts int
	// LastCheckpoint is the id of the latest completed checkpoint (0:
	// none), LastCheckpointTime when it completed and LastCheckpointBytes
	// its size.
	LastCheckpoint      int64
	LastCheckpointTime  time.Time
	LastCheckpointBytes int64
	// Changelog are the changelog state backend's figures (zero when it
	// is off).
	Changelog ChangelogMetrics
	// Tasks are every subtask's backpressure and checkpoint metrics
	// (Flink's busyTimeMsPerSecond, backPressuredTimeMsPerSecond,
	// inPoolUsage, ...), see TaskMetrics and docs/metrics.md.
	Tasks []TaskMetrics
}

// TaskMetrics are one subtask's backpressure and checkpoint metrics under
// Flink's names (JobStatus.Tasks): the share of the last few seconds it was
// busy, idle (waiting for input) and backpressured (waiting for an output
// buffer) in milliseconds per second, its network buffer usage and queue
// lengths, and the start delay and alignment of its last checkpoint. The
// JSON keys are Flink's metric names. See docs/metrics.md.
type TaskMetrics = task.TaskMetrics

func statusFunc(f func(JobStatus), m *keyed.Metrics) func(runner.Status) {
	if f == nil {
		return nil
	}
	return func(s runner.Status) {
		js := JobStatus{RecordsIn: s.RecordsIn, RecordsOut: s.RecordsOut, Restarts: s.Restarts,
			Changelog: ChangelogMetrics(m.Figures()), Tasks: s.Tasks}
		if s.Last != nil {
			js.LastCheckpoint, js.LastCheckpointBytes = s.Last.ID, s.Last.Bytes
			js.LastCheckpointTime = time.UnixMilli(s.Last.CompletionTime)
		}
		f(js)
	}
}

// CompletedCheckpoint describes a completed checkpoint
// (Options.OnCheckpointComplete).
type CompletedCheckpoint struct {
	ID int64
	// Duration runs from the trigger to the durable _metadata.
	Duration time.Duration
	// CheckpointedBytes were uploaded for this checkpoint; FullBytes is
	// everything it references (they differ for incremental checkpoints).
	CheckpointedBytes, FullBytes int64
	// MaxSync and MaxAsync are the longest synchronous and asynchronous
	// phases among the subtasks; MaxStartDelay and MaxAlignment likewise.
	MaxSync, MaxAsync, MaxStartDelay, MaxAlignment time.Duration
	// Changelog are the changelog state backend's figures after this
	// checkpoint, its materialized and non-materialized sizes included.
	Changelog ChangelogMetrics
	// Unaligned is set when at least one subtask snapshotted unaligned;
	// UnalignedSubtasks counts them. PersistedBytes is the in-flight data
	// (channel state) the checkpoint persisted, part of CheckpointedBytes.
	Unaligned         bool
	UnalignedSubtasks int
	PersistedBytes    int64
	// Subtasks are every subtask's figures, by vertex and subtask index.
	Subtasks []SubtaskCheckpoint
}

// SubtaskCheckpoint is one subtask's part of a completed checkpoint
// (Flink's SubtaskStateStats).
type SubtaskCheckpoint struct {
	// Vertex is the task's position in the job graph, Subtask its index.
	Vertex, Subtask int
	// EndToEnd runs from the trigger to the subtask's acknowledgement;
	// StartDelay to the first barrier reaching it; Alignment is how long
	// its inputs were (partly) blocked; Sync and Async are its snapshot
	// phases.
	EndToEnd, StartDelay, Alignment, Sync, Async time.Duration
	// Bytes is its checkpointed size, PersistedBytes the in-flight data it
	// persisted (part of Bytes).
	Bytes, PersistedBytes int64
	// Unaligned: it snapshotted unaligned or its barriers overtook data.
	Unaligned bool
}

func completedFunc(f func(CompletedCheckpoint), m *keyed.Metrics) func(coordinator.Completed, *metadata.Checkpoint) {
	return func(a coordinator.Completed, cp *metadata.Checkpoint) {
		m.CheckpointCompleted(cp)
		if f == nil {
			return
		}
		f(CompletedCheckpoint{ID: a.ID, Duration: a.Duration, CheckpointedBytes: cp.Bytes, FullBytes: cp.FullBytes,
			MaxSync: a.Stats.MaxSync.D, MaxAsync: a.Stats.MaxAsync.D, MaxStartDelay: a.Stats.MaxStartDelay.D,
			MaxAlignment: a.Stats.MaxAlignment.D, Changelog: ChangelogMetrics(m.Figures()),
			Unaligned: a.Stats.UnalignedTasks > 0, UnalignedSubtasks: a.Stats.UnalignedTasks, PersistedBytes: a.Stats.PersistedBytes,
			Subtasks: subtaskCheckpoints(a.Stats.Tasks)})
	}
}

// ErrTooManyCheckpointFailures is matched (errors.Is) by Execute's error
// when the job failed because more consecutive checkpoints failed than
// CheckpointOptions.TolerableFailures allows (and the restart strategy
// allowed no more restarts).
var ErrTooManyCheckpointFailures = runner.ErrTooManyCheckpointFailures

func subtaskCheckpoints(reports []coordinator.TaskReport) []SubtaskCheckpoint {
	out := make([]SubtaskCheckpoint, len(reports))
	for i, r := range reports {
		st := r.Stats
		out[i] = SubtaskCheckpoint{Vertex: r.Task.Vertex, Subtask: r.Task.Subtask, EndToEnd: r.EndToEnd,
			StartDelay: st.StartDelay, Alignment: st.Alignment, Sync: st.Sync, Async: st.Async,
			Bytes: st.Bytes, PersistedBytes: st.PersistedBytes, Unaligned: st.Unaligned}
	}
	return out
}
