// Package resttest builds monitor.Jobs by hand for tests of the REST API
// and of what reads it (the CLI, the dashboard, the checkpoint doctor): a
// job of three vertices with known task metrics, checkpoint statistics
// and metrics, a manual clock, and controls the test drives (cancel,
// trigger a checkpoint, trigger a savepoint).
package resttest

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weirstream/weir/internal/checkpoint/stats"
	"github.com/weirstream/weir/internal/metrics"
	"github.com/weirstream/weir/internal/monitor"
	"github.com/weirstream/weir/internal/task"
)

// The fixture's identity and times.
const (
	JobID   = "0a1b2c3d4e5f60718293a4b5c6d7e8f9"
	JobName = "orders"
	// OtherJobID labels metric groups of another job in the same registry,
	// which the API must not count.
	OtherJobID = "ffffffffffffffffffffffffffffffff"
)

// T0 is when the fixture's job was submitted; it runs from T0+1s and the
// clock reads Now.
var (
	T0  = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	Now = T0.Add(10 * time.Minute)
)

// Vertex ids of the fixture: a source of 2 subtasks, a window and map
// chain of 2 fed by hash, a sink of 1 fed by rebalance.
var (
	SourceID = vertexID("source")
	WindowID = vertexID("window")
	SinkID   = vertexID("sink")
)

func vertexID(uid string) string {
	sum := md5.Sum([]byte(uid))
	return hex.EncodeToString(sum[:])
}

// Vertices are the fixture's vertices.
func Vertices() []monitor.Vertex {
	return []monitor.Vertex{
		{ID: SourceID, Index: 0, Name: "Source: numbers", Parallelism: 2, MaxParallelism: 128,
			Operators: []monitor.Operator{{Name: "Source: numbers", UID: "source"}}},
		{ID: WindowID, Index: 1, Name: "Window(5s) -> Map", Parallelism: 2, MaxParallelism: 128,
			Operators: []monitor.Operator{{Name: "Window(5s)", UID: "window"}, {Name: "Map", UID: "map"}},
			Inputs:    []monitor.Input{{Vertex: 0, ShipStrategy: "HASH"}}},
		{ID: SinkID, Index: 2, Name: "Sink: out", Parallelism: 1, MaxParallelism: 128,
			Operators: []monitor.Operator{{Name: "Sink: out", UID: "sink"}},
			Inputs:    []monitor.Input{{Vertex: 1, ShipStrategy: "REBALANCE"}}},
	}
}

// TaskMetrics are the fixture's subtasks' metrics. Their backpressured
// times sit on the levels' boundaries: source 0 at 0.10 (ok), source 1
// at 0.5 (low), window 0 just above 0.5 (high), window 1 just above 0.10
// (low), sink 0 at 0 (ok); the vertices' levels are low, high and ok.
func TaskMetrics() []task.TaskMetrics {
	m := func(v, s int, name string, busy, idle, bp float64) task.TaskMetrics {
		return task.TaskMetrics{Vertex: v, Subtask: s, Name: name, BusyTimeMsPerSecond: busy,
			IdleTimeMsPerSecond: idle, BackPressuredTimeMsPerSecond: bp, InPoolUsage: 0.25, OutPoolUsage: 0.5,
			InputQueueLength: 2, OutputQueueLength: 3, CheckpointStartDelayNanos: 4e6,
			CheckpointAlignmentTime: 5e6, DebloatedBufferSize: 32768}
	}
	return []task.TaskMetrics{
		m(0, 0, "Source: numbers (1/2)", 900, 0, 100),
		m(0, 1, "Source: numbers (2/2)", 500, 0, 500),
		m(1, 0, "Window(5s) -> Map (1/2)", 499, 0, 501),
		m(1, 1, "Window(5s) -> Map (2/2)", 799, 100, 101),
		m(2, 0, "Sink: out (1/1)", 200, 800, 0),
	}
}

// Records and bytes the fixture's task groups count, per vertex and
// subtask: [vertex][subtask].
var (
	RecordsIn  = [][]int64{{0, 0}, {1000, 2000}, {2700}}
	RecordsOut = [][]int64{{1500, 1500}, {900, 1800}, {0}}
	BytesIn    = [][]int64{{0, 0}, {10000, 20000}, {27000}}
	BytesOut   = [][]int64{{15000, 15000}, {9000, 18000}, {0}}
)

// Checkpoint ids of the fixture's statistics: completed 11 (discarded
// since), failed 12, completed 13, savepoint 14, 15 in progress with one
// acknowledgement; the job was restored from 10.
const (
	CheckpointCompleted  = 13
	CheckpointFailed     = 12
	CheckpointSavepoint  = 14
	CheckpointInProgress = 15
	CheckpointRestored   = 10
	// FailureMessage is checkpoint 12's.
	FailureMessage = "checkpoint expired before completing"
)

// Clock is a manual clock.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// Now reads the clock.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Set sets the clock.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// Deployment is a fake monitor.Deployment whose metrics the test sets.
type Deployment struct {
	mu    sync.Mutex
	tasks []task.TaskMetrics
}

var _ monitor.Deployment = (*Deployment)(nil)

// Metrics returns a copy of the metrics set last.
func (d *Deployment) Metrics() []task.TaskMetrics {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.tasks)
}

// Set replaces the metrics.
func (d *Deployment) Set(tasks []task.TaskMetrics) {
	d.mu.Lock()
	d.tasks = slices.Clone(tasks)
	d.mu.Unlock()
}

// Result is the outcome of a checkpoint the fake control takes.
type Result struct {
	ID  int64
	Err error
}

// SavepointResult is the outcome of a savepoint the fake control takes.
type SavepointResult struct {
	ID   int64
	Path string
	Err  error
}

// Savepoints is the fixture's fake TriggerSavepoint control: it records
// the requests and takes each result from Results, or ends with the
// context. Its methods are those the REST server asks of a job's
// savepoint control.
type Savepoints struct {
	// Results feeds TriggerSavepoint. Unbuffered unless the test makes
	// another.
	Results chan SavepointResult

	mu       sync.Mutex
	requests []monitor.SavepointRequest
}

// CanTakeSavepoints reports true: the fake is a savepoint control.
func (s *Savepoints) CanTakeSavepoints() bool { return true }

// TriggerSavepoint records req and returns the next result of Results.
func (s *Savepoints) TriggerSavepoint(ctx context.Context, req monitor.SavepointRequest) (monitor.SavepointResult, error) {
	s.mu.Lock()
	s.requests = append(s.requests, req)
	s.mu.Unlock()
	select {
	case r := <-s.Results:
		return monitor.SavepointResult{ID: r.ID, Path: r.Path}, r.Err
	case <-ctx.Done():
		return monitor.SavepointResult{}, ctx.Err()
	}
}

// Requests are the requests TriggerSavepoint got, in order.
func (s *Savepoints) Requests() []monitor.SavepointRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// Job is the fixture: a running monitor.Job and the fakes behind it.
type Job struct {
	*monitor.Job
	Clock      *Clock
	Deployment *Deployment
	// Results feeds TriggerCheckpoint: each call takes the next result,
	// or ends with the context. Unbuffered unless the test makes another.
	Results chan Result
	// Savepoints is its TriggerSavepoint control.
	Savepoints *Savepoints

	cancels  atomic.Int32
	triggers atomic.Int32
}

// Cancels is how often the job's Cancel control was called.
func (j *Job) Cancels() int { return int(j.cancels.Load()) }

// Triggers is how often its TriggerCheckpoint control was called.
func (j *Job) Triggers() int { return int(j.triggers.Load()) }

// NewJob returns the fixture, running: submitted at T0, running from
// T0+1s after one restart (its cause at T0+3s), with the checkpoints,
// task metrics and metric groups described above; the clock reads Now.
func NewJob() *Job {
	clock := &Clock{t: T0}
	j := &Job{Job: monitor.NewJob(JobID, JobName, Vertices(), clock.Now, 0), Clock: clock,
		Deployment: &Deployment{}, Results: make(chan Result),
		Savepoints: &Savepoints{Results: make(chan SavepointResult)}}
	j.Config = map[string]string{"parallelism.default": "2", "pipeline.name": JobName,
		"rest.auth.token": "s3cr3t", "restart-strategy.type": "exponential-delay",
		"execution.checkpointing.interval": "10 s"}
	j.Checkpoint = monitor.CheckpointConfig{Enabled: true, Mode: "exactly_once", Interval: 10 * time.Second,
		Timeout: 10 * time.Minute, MaxConcurrent: 1, NumRetained: 1, Retention: "RETAIN_ON_CANCELLATION",
		StateBackend: "hashmap", Storage: "file:///ck", AlignedTimeout: 0, Incremental: false}
	j.SetControls(monitor.Controls{
		Cancel: func() { j.cancels.Add(1) },
		TriggerCheckpoint: func(ctx context.Context) (int64, error) {
			j.triggers.Add(1)
			select {
			case r := <-j.Results:
				return r.ID, r.Err
			case <-ctx.Done():
				return 0, ctx.Err()
			}
		},
		TriggerSavepoint: j.Savepoints.TriggerSavepoint,
	})
	clock.Set(T0.Add(time.Second))
	j.SetState(monitor.Running)
	clock.Set(T0.Add(3 * time.Second))
	j.Failed(errors.New("source failed: connection reset\n\tat reader"))
	j.Deployment.Set(TaskMetrics())
	j.Deployed(j.Deployment, true)
	fillCheckpoints(j.Checkpoints)
	fillMetrics(j.Metrics)
	clock.Set(Now)
	return j
}

// NewFinishedJob returns a job that ran and finished, with no controls.
func NewFinishedJob(id, name string) *monitor.Job {
	clock := &Clock{t: T0}
	j := monitor.NewJob(id, name, Vertices(), clock.Now, 0)
	clock.Set(T0.Add(time.Second))
	j.SetState(monitor.Running)
	clock.Set(T0.Add(time.Minute))
	j.SetState(monitor.Finished)
	clock.Set(Now)
	return j
}

// ack returns the acknowledgement of a subtask triggered at trig, acked
// after d.
func ack(vertex, index int, trig time.Time, d time.Duration, size int64) stats.Subtask {
	return stats.Subtask{Vertex: vertex, Index: index, AckTime: trig.Add(d), EndToEnd: d,
		StartDelay: d / 10, Alignment: d / 20, Sync: d / 5, Async: d / 2, CheckpointedSize: size}
}

// allSubtasks lists (vertex, index) of every subtask of the fixture.
var allSubtasks = [][2]int{{0, 0}, {0, 1}, {1, 0}, {1, 1}, {2, 0}}

func fillCheckpoints(t *stats.Tracker) {
	t.Restored(stats.Restored{ID: CheckpointRestored, Time: T0.Add(500 * time.Millisecond),
		ExternalPath: "file:///ck/orders/chk-10"})
	complete := func(id int64, kind stats.Kind, trig time.Time, took time.Duration, sizes []int64, full int64) {
		t.Triggered(id, trig, kind, 5)
		var sum int64
		for i, s := range allSubtasks {
			t.Acked(id, ack(s[0], s[1], trig, took*time.Duration(i+1)/5, sizes[i]))
			sum += sizes[i]
		}
		t.Completed(id, trig.Add(took), sum, full, 0, "file:///ck/orders/chk-"+strconv.FormatInt(id, 10))
	}
	complete(11, stats.KindCheckpoint, T0.Add(10*time.Second), 2*time.Second, []int64{100, 200, 300, 400, 0}, 1000)
	t.Triggered(CheckpointFailed, T0.Add(20*time.Second), stats.KindCheckpoint, 5)
	for _, s := range allSubtasks[:3] {
		t.Acked(CheckpointFailed, ack(s[0], s[1], T0.Add(20*time.Second), time.Second, 50))
	}
	t.Failed(CheckpointFailed, T0.Add(30*time.Second), FailureMessage)
	complete(CheckpointCompleted, stats.KindCheckpoint, T0.Add(40*time.Second), time.Second,
		[]int64{500, 500, 1000, 1000, 0}, 5000)
	complete(CheckpointSavepoint, stats.KindSavepoint, T0.Add(50*time.Second), 5*time.Second,
		[]int64{400, 400, 600, 600, 0}, 6000)
	t.Discarded(11)
	t.Triggered(CheckpointInProgress, T0.Add(60*time.Second), stats.KindCheckpoint, 5)
	t.Acked(CheckpointInProgress, ack(0, 0, T0.Add(60*time.Second), 300*time.Millisecond, 70))
}

func fillMetrics(r *metrics.Registry) {
	names := []string{"Source: numbers", "Window(5s) -> Map", "Sink: out"}
	ids := []string{SourceID, WindowID, SinkID}
	for v := range RecordsIn {
		for s := range RecordsIn[v] {
			g := r.Group(metrics.ScopeTask, metrics.Label{Name: metrics.LabelJobID, Value: JobID},
				metrics.Label{Name: metrics.LabelJobName, Value: JobName},
				metrics.Label{Name: metrics.LabelTaskName, Value: names[v]},
				metrics.Label{Name: metrics.LabelSubtaskIndex, Value: strconv.Itoa(s)},
				metrics.Label{Name: metrics.LabelVertexID, Value: ids[v]})
			g.Counter("numRecordsIn").Add(RecordsIn[v][s])
			g.Counter("numRecordsOut").Add(RecordsOut[v][s])
			g.Counter("numBytesIn").Add(BytesIn[v][s])
			g.Counter("numBytesOut").Add(BytesOut[v][s])
			if v == 2 {
				h := g.Histogram("latency", 0)
				for i := 1; i <= 100; i++ {
					h.Update(float64(i))
				}
			}
		}
	}
	op := r.Group(metrics.ScopeOperator, metrics.Label{Name: metrics.LabelJobID, Value: JobID},
		metrics.Label{Name: metrics.LabelSubtaskIndex, Value: "0"},
		metrics.Label{Name: metrics.LabelVertexID, Value: WindowID},
		metrics.Label{Name: metrics.LabelOperatorName, Value: "Map"})
	op.Counter("numRecordsOut").Add(RecordsOut[1][0])
	other := r.Group(metrics.ScopeTask, metrics.Label{Name: metrics.LabelJobID, Value: OtherJobID},
		metrics.Label{Name: metrics.LabelSubtaskIndex, Value: "0"},
		metrics.Label{Name: metrics.LabelVertexID, Value: WindowID})
	other.Counter("numRecordsIn").Add(99999)
	job := r.Group(metrics.ScopeJob, metrics.Label{Name: metrics.LabelJobID, Value: JobID},
		metrics.Label{Name: metrics.LabelJobName, Value: JobName})
	job.Gauge("numRestarts", func() float64 { return 1 })
	job.Gauge("lastCheckpointDuration", func() float64 { return 5000 })
	job.Counter("numberOfCompletedCheckpoints").Add(3)
}
