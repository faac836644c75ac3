// Package monitor is what a running job shows to the outside: its
// identity and state, its vertices, the current deployment's task
// metrics, its checkpoint statistics and metric registry, its effective
// configuration, and the controls an operator may use (cancel, trigger a
// checkpoint). The runner and the Environment keep a Job up to date; the
// REST server, the Prometheus collector and the dashboard read it.
package monitor

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/weirstream/weir/internal/checkpoint/stats"
	"github.com/weirstream/weir/internal/graph"
	"github.com/weirstream/weir/internal/metrics"
	"github.com/weirstream/weir/internal/task"
)

// State is a job's state, with Flink's JobStatus names.
type State string

// The states a weir job goes through.
const (
	Initializing State = "INITIALIZING"
	Running      State = "RUNNING"
	Restarting   State = "RESTARTING"
	Cancelling   State = "CANCELLING"
	Canceled     State = "CANCELED"
	Finished     State = "FINISHED"
	Failed       State = "FAILED"
)

// Terminal reports whether the job will not run again.
func (s State) Terminal() bool { return s == Canceled || s == Finished || s == Failed }

// Vertex is one job vertex (a chain of operators run as one task).
type Vertex struct {
	// ID is the vertex's REST id: 32 hex digits derived from its head
	// operator's uid (stable across runs of the same job), as Flink's
	// JobVertexID.
	ID string
	// Index is its position in the job graph (graph.Vertex.ID).
	Index          int
	Name           string
	Parallelism    int
	MaxParallelism int
	// Operators are the chained operators' names and uids, head first.
	Operators []Operator
	// Inputs are the edges entering the vertex.
	Inputs []Input
}

// Operator names one chained operator.
type Operator struct{ Name, UID string }

// Input is an edge into a vertex.
type Input struct {
	// Vertex is the producing vertex's Index.
	Vertex int
	// ShipStrategy is the partitioner in Flink's words (FORWARD, HASH,
	// REBALANCE, RESCALE, BROADCAST).
	ShipStrategy string
}

// VertexID is a vertex's REST id (graph.VertexUID): derived from its head
// operator's uid, or its name and position when it has none.
func VertexID(job string, v *graph.Vertex) string { return graph.VertexUID(job, v) }

// Vertices describes a job graph's vertices.
func Vertices(job string, g *graph.JobGraph) []Vertex {
	out := make([]Vertex, len(g.Vertices))
	for i, v := range g.Vertices {
		vx := Vertex{ID: VertexID(job, v), Index: v.ID, Name: v.Name(), Parallelism: v.Parallelism,
			MaxParallelism: v.Head().MaxParallelism}
		for _, n := range v.Nodes {
			vx.Operators = append(vx.Operators, Operator{Name: n.Name, UID: n.UID})
		}
		for _, e := range v.Inputs {
			vx.Inputs = append(vx.Inputs, Input{Vertex: g.VertexOf[e.From].ID, ShipStrategy: strings.ToUpper(e.Partitioner.String())})
		}
		out[i] = vx
	}
	return out
}

// NewJobID returns a random job id: 32 hex digits, as Flink's JobID.
func NewJobID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Deployment is the running attempt of a job (a *task.Job).
type Deployment interface {
	// Metrics returns every subtask's metrics.
	Metrics() []task.TaskMetrics
}

// CheckpointConfig is the job's checkpointing configuration, as
// GET /jobs/{jobid}/checkpoints/config shows it.
type CheckpointConfig struct {
	Enabled bool
	// Mode is "exactly_once" or "at_least_once".
	Mode                      string
	Interval, Timeout         time.Duration
	MinPause                  time.Duration
	MaxConcurrent             int
	TolerableFailures         int
	NumRetained               int
	Retention                 string
	Unaligned                 bool
	AlignedTimeout            time.Duration
	StateBackend              string
	Incremental               bool
	Changelog                 bool
	ChangelogMaterialization  time.Duration
	Storage                   string
	CheckpointsAfterTasksDone bool
}

// ErrNotRunning is returned by the controls of a job that is not running.
var ErrNotRunning = errors.New("the job is not running")

// Controls are what an operator may do to a running job.
type Controls struct {
	// Cancel stops the job (Flink's cancel): the in-flight checkpoints
	// are aborted, completed ones retained as configured.
	Cancel func()
	// TriggerCheckpoint takes a checkpoint now and returns its id once it
	// completed, or why it failed.
	TriggerCheckpoint func(ctx context.Context) (int64, error)
	// TriggerSavepoint takes a savepoint now (Stop: and then stops the job)
	// and returns it once it completed, or why it failed. nil: the job
	// cannot take savepoints.
	TriggerSavepoint func(ctx context.Context, req SavepointRequest) (SavepointResult, error)
}

// SavepointRequest asks for a savepoint (REST POST /jobs/{id}/savepoints
// and /jobs/{id}/stop, weir savepoint, weir stop).
type SavepointRequest struct {
	// Target is the directory (path or URL) the savepoint directory is
	// made in; empty: execution.checkpointing.savepoint-dir.
	Target string
	// Format is "canonical" (default) or "native".
	Format string
	// Stop stops the job once the savepoint completed (stop-with-savepoint);
	// Drain, with it, first ends the sources and emits the final watermark.
	Stop, Drain bool
}

// SavepointResult is a completed savepoint.
type SavepointResult struct {
	ID int64
	// Path is the savepoint directory's location (a path or URL), what
	// weir run --from takes.
	Path string
}

// Job is the live view of one job. Its methods are safe for concurrent
// use.
type Job struct {
	ID, Name string
	Vertices []Vertex
	// Config are the effective configuration keys and values.
	Config     map[string]string
	Checkpoint CheckpointConfig
	// Checkpoints are the job's checkpoint statistics, Metrics its metric
	// registry.
	Checkpoints *stats.Tracker
	Metrics     *metrics.Registry

	now      func() time.Time
	controls Controls

	mu         sync.Mutex
	state      State
	timestamps map[State]time.Time
	start, end time.Time
	deployment Deployment
	restarts   int
	failure    string
	exceptions []Exception
}

// Exception is a failure of the job (a restart's cause or the final
// error), newest last in Job.Exceptions.
type Exception struct {
	Time    time.Time
	Message string
}

// maxExceptions is how many failures a job remembers.
const maxExceptions = 16

// NewJob returns a job in state Initializing, started now, whose
// checkpoint history keeps historySize checkpoints
// (stats.DefaultHistorySize if <= 0; web.checkpoints.history).
func NewJob(id, name string, vertices []Vertex, now func() time.Time, historySize int) *Job {
	if now == nil {
		now = time.Now
	}
	t := now()
	return &Job{ID: id, Name: name, Vertices: vertices, Config: map[string]string{},
		Checkpoints: stats.NewTracker(historySize), Metrics: metrics.NewRegistryClock(now), now: now,
		state: Initializing, timestamps: map[State]time.Time{Initializing: t}, start: t}
}

// Now is the job's clock.
func (j *Job) Now() time.Time { return j.now() }

// SetControls installs the job's controls.
func (j *Job) SetControls(c Controls) {
	j.mu.Lock()
	j.controls = c
	j.mu.Unlock()
}

// SetState moves the job to s; once terminal, the state stays. A nil Job
// ignores it (as Failed and Deployed do).
func (j *Job) SetState(s State) {
	if j == nil {
		return
	}
	t := j.now()
	j.mu.Lock()
	defer j.mu.Unlock()
	// Once canceling, only the end may follow: a deployment that starts
	// while the cancel takes effect does not make the job running again.
	if j.state.Terminal() || (j.state == Cancelling && !s.Terminal()) {
		return
	}
	j.state = s
	j.timestamps[s] = t
	if s.Terminal() {
		j.end = t
		j.deployment = nil
	}
}

// Failed records a failure: a restart's cause or the final error.
func (j *Job) Failed(err error) {
	if j == nil || err == nil {
		return
	}
	t := j.now()
	j.mu.Lock()
	defer j.mu.Unlock()
	j.failure = err.Error()
	j.exceptions = append(j.exceptions, Exception{Time: t, Message: err.Error()})
	if len(j.exceptions) > maxExceptions {
		j.exceptions = j.exceptions[len(j.exceptions)-maxExceptions:]
	}
}

// Deployed records the current deployment (nil between attempts);
// restart counts it as a restart.
func (j *Job) Deployed(d Deployment, restart bool) {
	if j == nil {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	j.deployment = d
	if restart {
		j.restarts++
	}
}

// Status is a consistent copy of a job's changing fields.
type Status struct {
	State      State
	Start, End time.Time // End is zero while the job runs
	Timestamps map[State]time.Time
	Restarts   int
	// Failure is the last failure's message.
	Failure    string
	Exceptions []Exception
	// Tasks are the current deployment's subtask metrics (nil between
	// attempts and after the end).
	Tasks []task.TaskMetrics
}

// Status returns the job's state and current metrics.
func (j *Job) Status() Status {
	j.mu.Lock()
	s := Status{State: j.state, Start: j.start, End: j.end, Timestamps: make(map[State]time.Time, len(j.timestamps)),
		Restarts: j.restarts, Failure: j.failure, Exceptions: append([]Exception(nil), j.exceptions...)}
	for k, v := range j.timestamps {
		s.Timestamps[k] = v
	}
	d := j.deployment
	j.mu.Unlock()
	if d != nil {
		s.Tasks = d.Metrics()
	}
	return s
}

// Vertex finds a vertex by its REST id or, for people typing URLs, by its
// index in decimal.
func (j *Job) Vertex(id string) (Vertex, bool) {
	for _, v := range j.Vertices {
		if v.ID == id || fmt.Sprint(v.Index) == id {
			return v, true
		}
	}
	return Vertex{}, false
}

// Cancel cancels the job; ErrNotRunning if it ended.
func (j *Job) Cancel() error {
	j.mu.Lock()
	c, state := j.controls.Cancel, j.state
	if c == nil || state.Terminal() {
		j.mu.Unlock()
		return ErrNotRunning
	}
	j.state = Cancelling
	j.timestamps[Cancelling] = j.now()
	j.mu.Unlock()
	c()
	return nil
}

// TriggerCheckpoint takes a checkpoint now (see Controls).
func (j *Job) TriggerCheckpoint(ctx context.Context) (int64, error) {
	j.mu.Lock()
	c, state := j.controls.TriggerCheckpoint, j.state
	j.mu.Unlock()
	if c == nil || state.Terminal() {
		return 0, ErrNotRunning
	}
	return c(ctx)
}

// CanTakeSavepoints reports whether the job has a TriggerSavepoint control.
func (j *Job) CanTakeSavepoints() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.controls.TriggerSavepoint != nil
}

// TriggerSavepoint takes a savepoint now (Controls.TriggerSavepoint), or
// returns ErrNotRunning once the job ended or if it has no such control.
func (j *Job) TriggerSavepoint(ctx context.Context, req SavepointRequest) (SavepointResult, error) {
	j.mu.Lock()
	c, state := j.controls.TriggerSavepoint, j.state
	j.mu.Unlock()
	if c == nil || state.Terminal() {
		return SavepointResult{}, ErrNotRunning
	}
	return c(ctx, req)
}
