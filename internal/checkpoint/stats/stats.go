// Package stats keeps a job's checkpoint statistics, as Flink's
// CheckpointStatsTracker does: counts, summaries with quantiles of the
// completed checkpoints, the latest completed, failed and restored one,
// and a bounded history with every subtask's acknowledgement. The runner
// reports to a Tracker from its goroutine; the REST API, the Prometheus
// collector and the checkpoint doctor read Snapshots from any goroutine.
package stats

import (
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/weirstream/weir/internal/metrics"
)

// Status is a checkpoint's state in the statistics (Flink's names).
type Status string

// The statuses.
const (
	InProgress Status = "IN_PROGRESS"
	Completed  Status = "COMPLETED"
	Failed     Status = "FAILED"
)

// Kind is Flink's checkpoint_type.
type Kind string

// The kinds.
const (
	KindCheckpoint Kind = "CHECKPOINT"
	// KindUnaligned is a checkpoint triggered with unaligned barriers.
	KindUnaligned Kind = "UNALIGNED_CHECKPOINT"
	KindSavepoint Kind = "SAVEPOINT"
)

// Subtask is one subtask's acknowledgement of a checkpoint.
type Subtask struct {
	// Vertex is the job vertex (graph.Vertex.ID), Index the subtask.
	Vertex, Index int
	// AckTime is when the acknowledgement reached the coordinator.
	AckTime time.Time
	// EndToEnd runs from the trigger to AckTime; StartDelay to the first
	// barrier reaching the subtask; Alignment is how long its inputs were
	// (partly) blocked; Sync and Async are the snapshot's phases.
	EndToEnd, StartDelay, Alignment, Sync, Async time.Duration
	// CheckpointedSize is what the subtask uploaded for this checkpoint,
	// PersistedData the in-flight data among it.
	CheckpointedSize, PersistedData int64
	// Unaligned: the subtask snapshotted unaligned.
	Unaligned bool
}

// Checkpoint is one checkpoint's statistics.
type Checkpoint struct {
	ID     int64
	Status Status
	Kind   Kind
	// Savepoint is set for savepoints (Kind KindSavepoint).
	Savepoint bool
	// TriggerTime is when it was triggered; LatestAck when the last
	// acknowledgement so far arrived (zero: none).
	TriggerTime, LatestAck time.Time
	// CompletionTime is when it completed (its _metadata durable) and
	// FailureTime when it failed.
	CompletionTime, FailureTime time.Time
	// NumSubtasks is the number of subtasks that must acknowledge it;
	// Subtasks are those that did, sorted by vertex and index.
	NumSubtasks int
	Subtasks    []Subtask
	// CheckpointedSize is what this checkpoint uploaded (summed over the
	// acknowledgements while in progress), StateSize everything it
	// references (Flink's full size; known once it completed, else equal
	// to CheckpointedSize), PersistedData the in-flight data among it.
	CheckpointedSize, StateSize, PersistedData int64
	// Unaligned: at least one subtask snapshotted unaligned.
	Unaligned bool
	// FailureMessage says why it failed.
	FailureMessage string
	// ExternalPath is where a completed checkpoint lives (its chk-<id>
	// directory).
	ExternalPath string
	// Discarded: a completed checkpoint that was subsumed and deleted.
	Discarded bool
}

// EndToEnd is the checkpoint's duration: to its completion or failure,
// or, while in progress, to the latest acknowledgement (Flink's
// end_to_end_duration).
func (c *Checkpoint) EndToEnd() time.Duration {
	switch {
	case c.Status == Completed:
		return c.CompletionTime.Sub(c.TriggerTime)
	case c.Status == Failed:
		return c.FailureTime.Sub(c.TriggerTime)
	case !c.LatestAck.IsZero():
		return c.LatestAck.Sub(c.TriggerTime)
	}
	return 0
}

// Subtask returns the acknowledgement of vertex's subtask index.
func (c *Checkpoint) Subtask(vertex, index int) (Subtask, bool) {
	i, ok := slices.BinarySearchFunc(c.Subtasks, Subtask{Vertex: vertex, Index: index}, cmpSubtask)
	if !ok {
		return Subtask{}, false
	}
	return c.Subtasks[i], true
}

func cmpSubtask(a, b Subtask) int {
	if a.Vertex != b.Vertex {
		return a.Vertex - b.Vertex
	}
	return a.Index - b.Index
}

// Restored is the checkpoint the job (re)started from.
type Restored struct {
	ID           int64
	Time         time.Time
	Savepoint    bool
	ExternalPath string
}

// Counts are Flink's checkpoint counts.
type Counts struct {
	Restored, Total, InProgress, Completed, Failed int64
}

// Summary summarises one figure of the completed checkpoints: the count,
// minimum, maximum, mean and quantiles of a window of the latest values.
type Summary = metrics.HistogramSnapshot

// Summaries are the summaries of the completed checkpoints' figures:
// sizes in bytes, durations in milliseconds.
type Summaries struct {
	CheckpointedSize, StateSize, EndToEnd, PersistedData, ProcessedData Summary
}

// Snapshot is a consistent copy of a Tracker's statistics.
type Snapshot struct {
	Counts    Counts
	Summaries Summaries
	// LatestCompleted is the newest completed checkpoint (not a
	// savepoint), LatestSavepoint the newest completed savepoint,
	// LatestFailed the newest failed one, LatestRestored the last
	// restore; nil if none.
	LatestCompleted, LatestSavepoint, LatestFailed *Checkpoint
	LatestRestored                                 *Restored
	// History is the latest checkpoints, newest first, in progress ones
	// included (at most the tracker's history size).
	History []Checkpoint
}

// DefaultHistorySize is how many checkpoints the history keeps (Flink's
// web.checkpoints.history).
const DefaultHistorySize = 10

// summaryWindow is how many completed checkpoints the summaries cover.
const summaryWindow = 10000

// Tracker collects a job's checkpoint statistics across its restarts.
type Tracker struct {
	historySize int

	mu       sync.Mutex
	counts   Counts
	pending  map[int64]*Checkpoint
	history  []*Checkpoint // newest first
	sums     [5]*ring      // checkpointed, state, e2e, persisted, processed
	latest   *Checkpoint
	savepnt  *Checkpoint
	failed   *Checkpoint
	restored *Restored
}

// NewTracker returns a tracker whose history keeps historySize
// checkpoints (DefaultHistorySize if <= 0).
func NewTracker(historySize int) *Tracker {
	if historySize <= 0 {
		historySize = DefaultHistorySize
	}
	t := &Tracker{historySize: historySize, pending: map[int64]*Checkpoint{}}
	for i := range t.sums {
		t.sums[i] = &ring{vals: make([]float64, 0, 64)}
	}
	return t
}

// Triggered reports that checkpoint id was triggered at at, to be
// acknowledged by numSubtasks subtasks.
func (t *Tracker) Triggered(id int64, at time.Time, kind Kind, numSubtasks int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := &Checkpoint{ID: id, Status: InProgress, Kind: kind, Savepoint: kind == KindSavepoint,
		TriggerTime: at, NumSubtasks: numSubtasks}
	t.pending[id] = c
	t.counts.Total++
	t.counts.InProgress++
	t.addHistory(c)
}

func (t *Tracker) addHistory(c *Checkpoint) {
	t.history = slices.Insert(t.history, 0, c)
	if len(t.history) > t.historySize {
		t.history = t.history[:t.historySize]
	}
}

// Acked reports a subtask's acknowledgement of checkpoint id; ignored if
// id is not in progress.
func (t *Tracker) Acked(id int64, s Subtask) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.pending[id]
	if c == nil {
		return
	}
	i, found := slices.BinarySearchFunc(c.Subtasks, s, cmpSubtask)
	if found {
		return
	}
	c.Subtasks = slices.Insert(c.Subtasks, i, s)
	if s.AckTime.After(c.LatestAck) {
		c.LatestAck = s.AckTime
	}
	c.CheckpointedSize += s.CheckpointedSize
	c.StateSize = c.CheckpointedSize
	c.PersistedData += s.PersistedData
	c.Unaligned = c.Unaligned || s.Unaligned
}

// Completed reports that checkpoint id completed at at with the sizes its
// _metadata recorded, stored at path.
func (t *Tracker) Completed(id int64, at time.Time, checkpointedSize, stateSize, persisted int64, path string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.pending[id]
	if c == nil {
		return
	}
	delete(t.pending, id)
	c.Status, c.CompletionTime, c.ExternalPath = Completed, at, path
	c.CheckpointedSize, c.StateSize, c.PersistedData = checkpointedSize, stateSize, persisted
	t.counts.InProgress--
	t.counts.Completed++
	for i, v := range []float64{float64(checkpointedSize), float64(stateSize), float64(c.EndToEnd().Milliseconds()),
		float64(persisted), 0} {
		t.sums[i].add(v)
	}
	if c.Savepoint {
		t.savepnt = clone(c)
	} else {
		t.latest = clone(c)
	}
}

// Failed reports that checkpoint id failed (was aborted) at at.
func (t *Tracker) Failed(id int64, at time.Time, message string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.pending[id]
	if c == nil {
		return
	}
	delete(t.pending, id)
	c.Status, c.FailureTime, c.FailureMessage = Failed, at, message
	t.counts.InProgress--
	t.counts.Failed++
	t.failed = clone(c)
}

// Discarded reports that completed checkpoint id was subsumed and its
// files deleted.
func (t *Tracker) Discarded(id int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, c := range t.history {
		if c.ID == id && c.Status == Completed {
			c.Discarded = true
		}
	}
}

// Restored reports a restore.
func (t *Tracker) Restored(r Restored) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.counts.Restored++
	t.restored = &r
}

// Counts returns the counts.
func (t *Tracker) Counts() Counts {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.counts
}

// LatestCompleted returns a copy of the newest completed checkpoint and
// the last restore (nil if none), cheaper than a Snapshot.
func (t *Tracker) LatestCompleted() (*Checkpoint, *Restored) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var c *Checkpoint
	if t.latest != nil {
		cp := *t.latest
		c = &cp
	}
	var r *Restored
	if t.restored != nil {
		rr := *t.restored
		r = &rr
	}
	return c, r
}

// Checkpoint returns checkpoint id from the history.
func (t *Tracker) Checkpoint(id int64) (Checkpoint, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, c := range t.history {
		if c.ID == id {
			return *clone(c), true
		}
	}
	return Checkpoint{}, false
}

// clone copies c deeply enough that the tracker may go on changing the
// original; nil stays nil.
func clone(c *Checkpoint) *Checkpoint {
	if c == nil {
		return nil
	}
	cp := *c
	cp.Subtasks = slices.Clone(c.Subtasks)
	return &cp
}

// Snapshot returns a copy of the statistics.
func (t *Tracker) Snapshot() Snapshot {
	// The summaries are sorted outside the lock: the runner reports to
	// the tracker from its goroutine and must not wait for a reader.
	var vals [len(t.sums)][]float64
	var counts [len(t.sums)]int64
	s := t.snapshotLocked(&vals, &counts)
	sums := []*Summary{&s.Summaries.CheckpointedSize, &s.Summaries.StateSize, &s.Summaries.EndToEnd,
		&s.Summaries.PersistedData, &s.Summaries.ProcessedData}
	for i := range sums {
		*sums[i] = metrics.Summarize(vals[i], counts[i])
	}
	sort.SliceStable(s.History, func(i, j int) bool { return s.History[i].ID > s.History[j].ID })
	return s
}

func (t *Tracker) snapshotLocked(vals *[5][]float64, counts *[5]int64) Snapshot {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := Snapshot{Counts: t.counts}
	for i, r := range t.sums {
		vals[i], counts[i] = slices.Clone(r.vals), r.count
	}
	s.LatestCompleted, s.LatestSavepoint, s.LatestFailed = clone(t.latest), clone(t.savepnt), clone(t.failed)
	if t.restored != nil {
		r := *t.restored
		s.LatestRestored = &r
	}
	s.History = make([]Checkpoint, len(t.history))
	for i, c := range t.history {
		s.History[i] = *clone(c)
	}
	return s
}

// ring keeps the last summaryWindow values.
type ring struct {
	vals  []float64
	next  int
	count int64
}

func (r *ring) add(v float64) {
	r.count++
	if len(r.vals) < summaryWindow {
		r.vals = append(r.vals, v)
		return
	}
	r.vals[r.next] = v
	r.next = (r.next + 1) % summaryWindow
}
