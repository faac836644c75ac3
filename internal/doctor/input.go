// Package doctor explains why a job's checkpoints are slow or failing, as
// the troubleshooting section of Flink's checkpointing documentation
// does by hand: it reads the statistics of the last checkpoints (every
// subtask's start delay, alignment, synchronous and asynchronous phase,
// size), the failed checkpoints, the current task metrics (busy, idle,
// backpressured time, input and output pool usage) and the checkpoint
// configuration, and names the cause, the subtask where it shows and the
// remedy with the configuration keys to change.
//
// The core is deterministic: Diagnose(Input, Options) returns a Report
// and does nothing else. Two constructors build the Input: FromJob from
// a running job (monitor.Job, what the REST API shows) and
// FromCheckpoints from the retained checkpoints of a job that no longer
// runs (their _metadata records every subtask's statistics), with the
// job's log for the failed checkpoints, which _metadata cannot hold.
// Handle is the REST hook: GET /jobs/{jobid}/doctor.
//
// The rules and their thresholds are documented in docs/doctor.md and on
// Options.
package doctor

import (
	"fmt"
	"strings"
	"time"

	"github.com/weirstream/weir/internal/task"
)

// Input is everything Diagnose looks at.
type Input struct {
	// Job is the job's name (or id), Source where the input came from:
	// SourceLive or SourceOffline, and Location the checkpoint directory
	// or URL read.
	Job      string `json:"job"`
	Source   string `json:"source"`
	Location string `json:"location,omitempty"`
	// Checkpoints are the completed checkpoints of the window, oldest
	// first.
	Checkpoints []Checkpoint `json:"checkpoints"`
	// Failures are the failed checkpoints of the window, oldest first.
	Failures []Failure `json:"failures"`
	// FailuresKnown is false when failed checkpoints cannot be seen (a
	// job read offline without its log): their absence means nothing.
	FailuresKnown bool `json:"failuresKnown"`
	// JobFailovers counts the times the job failed over because it
	// exceeded the tolerable checkpoint failures, when known.
	JobFailovers int `json:"jobFailovers"`
	// Tasks are the current metrics of every subtask; empty offline.
	Tasks []task.TaskMetrics `json:"tasks,omitempty"`
	// Vertices are the job's vertices by Index (topological order).
	Vertices []Vertex `json:"vertices"`
	// Config is the checkpoint configuration.
	Config Config `json:"config"`
	// Notes are remarks of the constructor about what it could not read;
	// the report repeats them.
	Notes []string `json:"notes,omitempty"`
}

// Sources of an Input.
const (
	SourceLive    = "live"
	SourceOffline = "offline"
)

// Checkpoint is one completed checkpoint.
type Checkpoint struct {
	// ID is the checkpoint's id.
	ID int64 `json:"id"`
	// TriggerTime and CompletionTime are when it was triggered and
	// completed (zero if unknown).
	TriggerTime    time.Time `json:"triggerTime"`
	CompletionTime time.Time `json:"completionTime"`
	// EndToEnd is from the trigger to the completion.
	EndToEnd time.Duration `json:"endToEnd"`
	// CheckpointedSize is what it uploaded, FullSize everything it
	// references (equal for a full checkpoint), PersistedData the
	// in-flight data of an unaligned checkpoint.
	CheckpointedSize int64 `json:"checkpointedSize"`
	FullSize         int64 `json:"fullSize"`
	PersistedData    int64 `json:"persistedData,omitempty"`
	Unaligned        bool  `json:"unaligned,omitempty"`
	// Subtasks are the acknowledgements, by vertex and index.
	Subtasks []Subtask `json:"subtasks"`
}

// Subtask is one subtask's acknowledgement of a checkpoint.
type Subtask struct {
	// Vertex is the job vertex's index, Index the subtask's.
	Vertex int `json:"vertex"`
	Index  int `json:"subtask"`
	// EndToEnd runs from the trigger to the acknowledgement; StartDelay
	// to the first barrier reaching the subtask; Alignment from the first
	// to the last barrier; Sync and Async are the snapshot's phases.
	EndToEnd   time.Duration `json:"endToEnd"`
	StartDelay time.Duration `json:"startDelay"`
	Alignment  time.Duration `json:"alignment"`
	Sync       time.Duration `json:"sync"`
	Async      time.Duration `json:"async"`
	// CheckpointedSize is what the subtask uploaded, PersistedData the
	// in-flight data among it; FullSize is the size of all its state in
	// the checkpoint, 0 if unknown (incremental checkpoints read live).
	CheckpointedSize int64 `json:"checkpointedSize"`
	PersistedData    int64 `json:"persistedData,omitempty"`
	FullSize         int64 `json:"fullSize,omitempty"`
	Unaligned        bool  `json:"unaligned,omitempty"`
}

// departure is when the subtask forwarded its barrier, counted from the
// trigger: its first barrier, the alignment, then the synchronous phase.
func (s Subtask) departure() time.Duration { return s.StartDelay + s.Alignment + s.Sync }

// Ref returns the subtask's reference.
func (s Subtask) Ref() SubtaskRef { return SubtaskRef{Vertex: s.Vertex, Index: s.Index} }

// SubtaskRef names a subtask.
type SubtaskRef struct {
	// Vertex is the job vertex's index, Index the subtask's.
	Vertex int `json:"vertex"`
	Index  int `json:"subtask"`
}

// String renders the reference as the coordinator's logs do: "vertex/index".
func (r SubtaskRef) String() string { return fmt.Sprintf("%d/%d", r.Vertex, r.Index) }

// Failure is one failed checkpoint.
type Failure struct {
	// ID is the checkpoint's id, Time when it failed (zero if unknown).
	ID   int64     `json:"id"`
	Time time.Time `json:"time"`
	// Reason is the coordinator's short reason: ReasonExpired,
	// ReasonDeclined, ReasonAsyncFailure, ReasonIOError, ReasonSubsumed,
	// or another one that does not count against the tolerable failures
	// (job-canceled, job-failing, task-failure, task-not-ready).
	Reason string `json:"reason"`
	// Message is what the coordinator said, Cause the error behind it (a
	// declining task's message).
	Message string `json:"message"`
	Cause   string `json:"cause,omitempty"`
	// Task is the subtask that declined, if it was declined.
	Task *SubtaskRef `json:"task,omitempty"`
	// Acked are the acknowledgements that arrived before the failure;
	// Pending the subtasks known not to have acknowledged by then
	// (offline: those whose acknowledgement was logged as late);
	// PendingKnown says whether Pending is complete.
	Acked        []Subtask    `json:"acked,omitempty"`
	Pending      []SubtaskRef `json:"pending,omitempty"`
	PendingKnown bool         `json:"pendingKnown"`
}

// The coordinator's reasons (coordinator.Reason.String) the doctor
// distinguishes.
const (
	ReasonExpired      = "expired"
	ReasonDeclined     = "declined"
	ReasonAsyncFailure = "async-failure"
	ReasonIOError      = "io-error"
	ReasonSubsumed     = "subsumed"
)

// counted reports whether a failure for reason counts against the
// tolerable failures (coordinator.Reason.Counts).
func counted(reason string) bool {
	switch reason {
	case ReasonExpired, ReasonDeclined, ReasonAsyncFailure, ReasonIOError:
		return true
	}
	return false
}

// stopping reports whether a failure came from the job stopping (its
// uploads canceled as it was canceled or failed over), not from the
// checkpoint itself.
func stopping(f Failure) bool {
	return strings.Contains(f.Cause, "context canceled") || strings.Contains(f.Message, "context canceled")
}

// Vertex is one job vertex (a chain of operators run as one task).
type Vertex struct {
	// Index is its position in the job graph, every vertex after its
	// inputs.
	Index       int    `json:"index"`
	Name        string `json:"name"`
	Parallelism int    `json:"parallelism"`
	// Inputs are the edges feeding it; InputsKnown is false offline, where
	// each vertex is taken to read every subtask of the one before.
	Inputs      []Edge `json:"inputs"`
	InputsKnown bool   `json:"inputsKnown"`
}

// Edge is an input of a vertex.
type Edge struct {
	// Vertex is the producing vertex's index.
	Vertex int `json:"vertex"`
	// Forward: each subtask reads only the producer's subtask of the same
	// index (Flink's FORWARD ship strategy).
	Forward bool `json:"forward,omitempty"`
}

// Config is the checkpoint configuration.
type Config struct {
	// Known is false when the configuration could not be read (offline
	// without the job's log): the other fields are then Flink's and
	// weir's defaults, and Interval is inferred from trigger times.
	Known bool `json:"known"`
	// Interval between checkpoints; IntervalInferred says it was derived
	// from the checkpoints' trigger times. 0: unknown.
	Interval         time.Duration `json:"interval"`
	IntervalInferred bool          `json:"intervalInferred,omitempty"`
	// Timeout after which a checkpoint expires.
	Timeout time.Duration `json:"timeout"`
	// TolerableFailures is execution.checkpointing.tolerable-failed-checkpoints.
	TolerableFailures int `json:"tolerableFailures"`
	// Unaligned checkpoints, and the aligned-checkpoint-timeout.
	Unaligned      bool          `json:"unaligned"`
	AlignedTimeout time.Duration `json:"alignedTimeout,omitempty"`
	// Backend is the state backend (hashmap or pebble); Incremental and
	// Changelog its checkpoint modes.
	Backend     string `json:"backend"`
	Incremental bool   `json:"incremental"`
	Changelog   bool   `json:"changelog"`
	// BufferDebloat: taskmanager.network.memory.buffer-debloat.enabled.
	BufferDebloat bool `json:"bufferDebloat"`
}

// defaultConfig is the configuration of a job that sets nothing.
func defaultConfig() Config {
	return Config{Timeout: 10 * time.Minute, Backend: "hashmap"}
}

// incremental reports whether checkpoints are incremental: only the pebble
// backend takes incremental checkpoints; hashmap ignores the setting.
func (c Config) incremental() bool { return c.Incremental && strings.EqualFold(c.Backend, "pebble") }
