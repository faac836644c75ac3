package rest

import (
	"strconv"
	"strings"
	"time"

	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/internal/checkpoint/stats"
	"github.com/weirstream/weir/internal/metrics"
	"github.com/weirstream/weir/internal/monitor"
	"github.com/weirstream/weir/internal/task"
)

// ms is t in Unix milliseconds, 0 for the zero time.
func ms(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// orNever is t in Unix milliseconds, -1 for the zero time.
func orNever(t time.Time) int64 {
	if t.IsZero() {
		return -1
	}
	return t.UnixMilli()
}

// executionState is the state of a job's subtasks in Flink's words, as
// far as the job's state tells: weir does not track subtasks one by one.
func executionState(s monitor.State) string {
	switch s {
	case monitor.Initializing:
		return "INITIALIZING"
	case monitor.Running:
		return "RUNNING"
	case monitor.Restarting:
		return "CREATED"
	case monitor.Cancelling:
		return "CANCELING"
	case monitor.Canceled:
		return "CANCELED"
	case monitor.Finished:
		return "FINISHED"
	case monitor.Failed:
		return "FAILED"
	}
	return "CREATED"
}

// jobTimes are a job's start and end (-1 while it runs) and its duration
// until the end or now.
func jobTimes(st monitor.Status, now time.Time) (start, end, duration int64) {
	start, end = ms(st.Start), orNever(st.End)
	until := now
	if !st.End.IsZero() {
		until = st.End
	}
	return start, end, max(until.Sub(st.Start).Milliseconds(), 0)
}

// lastModification is the latest state change.
func lastModification(st monitor.Status) int64 {
	var last time.Time
	for _, t := range st.Timestamps {
		if t.After(last) {
			last = t
		}
	}
	return ms(last)
}

// numSubtasks is the number of subtasks of the job.
func numSubtasks(j *monitor.Job) int {
	n := 0
	for _, v := range j.Vertices {
		n += v.Parallelism
	}
	return n
}

// jobParallelism is the largest vertex parallelism (the slots the job
// takes) or, with max, the largest max parallelism.
func jobParallelism(j *monitor.Job, maxParallelism bool) int {
	p := 0
	for _, v := range j.Vertices {
		if maxParallelism {
			p = max(p, v.MaxParallelism)
		} else {
			p = max(p, v.Parallelism)
		}
	}
	return p
}

func jobOverview(j *monitor.Job, st monitor.Status, now time.Time) JobOverview {
	start, end, d := jobTimes(st, now)
	o := JobOverview{JID: j.ID, Name: j.Name, State: string(st.State), StartTime: start, EndTime: end, Duration: d,
		LastModification: lastModification(st)}
	n := numSubtasks(j)
	o.Tasks.Total = n
	switch executionState(st.State) {
	case "INITIALIZING":
		o.Tasks.Initializing = n
	case "RUNNING":
		o.Tasks.Running = n
	case "CREATED":
		o.Tasks.Created = n
	case "CANCELING":
		o.Tasks.Canceling = n
	case "CANCELED":
		o.Tasks.Canceled = n
	case "FINISHED":
		o.Tasks.Finished = n
	case "FAILED":
		o.Tasks.Failed = n
	}
	return o
}

// stateCounts returns every execution state with count 0 but state, which
// has n.
func stateCounts(state string, n int) map[string]int {
	m := make(map[string]int, len(ExecutionStates))
	for _, s := range ExecutionStates {
		m[s] = 0
	}
	m[state] += n
	return m
}

// vertexTimes are a vertex's start (when the job last started running, -1
// before), end and duration.
func vertexTimes(st monitor.Status, now time.Time) (start, end, duration int64) {
	started, ok := st.Timestamps[monitor.Running]
	if !ok {
		return -1, orNever(st.End), -1
	}
	until := now
	if !st.End.IsZero() {
		until = st.End
	}
	return ms(started), orNever(st.End), max(until.Sub(started).Milliseconds(), 0)
}

func jobDetails(j *monitor.Job, st monitor.Status, now time.Time, io func(monitor.Vertex) IOMetrics) JobDetails {
	start, end, d := jobTimes(st, now)
	state := executionState(st.State)
	out := JobDetails{JID: j.ID, Name: j.Name, State: string(st.State), JobType: "STREAMING", StartTime: start,
		EndTime: end, Duration: d, MaxParallelism: jobParallelism(j, true), Now: now.UnixMilli(),
		Timestamps: make(map[string]int64, len(JobStatuses)), Vertices: []JobVertex{},
		StatusCounts: stateCounts(state, len(j.Vertices)),
		Plan:         JobPlan{JID: j.ID, Name: j.Name, Type: "STREAMING", Nodes: []PlanNode{}}}
	for _, s := range JobStatuses {
		out.Timestamps[s] = 0
	}
	for s, t := range st.Timestamps {
		out.Timestamps[string(s)] = ms(t)
	}
	vs, ve, vd := vertexTimes(st, now)
	byIndex := map[int]string{}
	for _, v := range j.Vertices {
		byIndex[v.Index] = v.ID
	}
	for _, v := range j.Vertices {
		out.Vertices = append(out.Vertices, JobVertex{ID: v.ID, Name: v.Name, MaxParallelism: v.MaxParallelism,
			Parallelism: v.Parallelism, Status: state, StartTime: vs, EndTime: ve, Duration: vd,
			Tasks: stateCounts(state, v.Parallelism), Metrics: io(v)})
		node := PlanNode{ID: v.ID, Parallelism: v.Parallelism, Description: description(v),
			OptimizerProperties: map[string]any{}}
		for i, in := range v.Inputs {
			node.Inputs = append(node.Inputs, PlanInput{Num: i, ID: byIndex[in.Vertex], ShipStrategy: in.ShipStrategy,
				Exchange: "pipelined_bounded"})
		}
		out.Plan.Nodes = append(out.Plan.Nodes, node)
	}
	return out
}

// description names a vertex's chained operators, head first, as Flink's
// plan does.
func description(v monitor.Vertex) string {
	if len(v.Operators) == 0 {
		return v.Name
	}
	names := make([]string, len(v.Operators))
	for i, o := range v.Operators {
		names[i] = o.Name
	}
	return strings.Join(names, " -> ")
}

// Redacted replaces the value of a sensitive configuration key
// (config.Sensitive).
const Redacted = config.Redacted

func jobConfig(j *monitor.Job) JobConfig {
	c := JobConfig{JID: j.ID, Name: j.Name, ExecutionConfig: ExecutionConfig{ExecutionMode: "PIPELINED",
		RestartStrategy: "default", JobParallelism: jobParallelism(j, false), UserConfig: map[string]string{}}}
	for k, v := range j.Config {
		if config.Sensitive(k) {
			v = Redacted
		}
		c.ExecutionConfig.UserConfig[k] = v
	}
	if s := j.Config["restart-strategy.type"]; s != "" {
		c.ExecutionConfig.RestartStrategy = s
	}
	if p, err := strconv.Atoi(j.Config["parallelism.default"]); err == nil && p > 0 {
		c.ExecutionConfig.JobParallelism = p
	}
	return c
}

func jobExceptions(st monitor.Status) JobExceptions {
	e := JobExceptions{AllExceptions: []ExecutionException{},
		ExceptionHistory: ExceptionHistory{Entries: []ExceptionEntry{}}}
	if n := len(st.Exceptions); n > 0 {
		last := st.Exceptions[n-1]
		msg, t := last.Message, ms(last.Time)
		if st.Failure != "" {
			msg = st.Failure
		}
		e.RootException, e.Timestamp = &msg, &t
	}
	for i := len(st.Exceptions) - 1; i >= 0; i-- {
		x := st.Exceptions[i]
		name, _, _ := strings.Cut(x.Message, "\n")
		e.ExceptionHistory.Entries = append(e.ExceptionHistory.Entries, ExceptionEntry{ExceptionName: name,
			Stacktrace: x.Message, Timestamp: ms(x.Time), FailureLabels: map[string]string{},
			ConcurrentExceptions: []ExceptionEntry{}})
	}
	return e
}

// statsSummary converts a summary of values.
func statsSummary(s metrics.HistogramSnapshot) StatsSummary {
	if s.Len() == 0 {
		return StatsSummary{}
	}
	return StatsSummary{Min: int64(s.Min), Max: int64(s.Max), Avg: int64(s.Mean + 0.5), P50: s.Quantile(0.5),
		P90: s.Quantile(0.9), P95: s.Quantile(0.95), P99: s.Quantile(0.99), P999: s.Quantile(0.999)}
}

// summarize summarizes values.
func summarize(vals []float64) StatsSummary {
	return statsSummary(metrics.Summarize(vals, int64(len(vals))))
}

func checkpointingStatistics(j *monitor.Job, s stats.Snapshot) CheckpointingStatistics {
	out := CheckpointingStatistics{
		Counts: CheckpointCounts{Restored: s.Counts.Restored, Total: s.Counts.Total, InProgress: s.Counts.InProgress,
			Completed: s.Counts.Completed, Failed: s.Counts.Failed},
		Summary: CheckpointSummary{
			CheckpointedSize: statsSummary(s.Summaries.CheckpointedSize),
			StateSize:        statsSummary(s.Summaries.StateSize),
			EndToEndDuration: statsSummary(s.Summaries.EndToEnd),
			ProcessedData:    statsSummary(s.Summaries.ProcessedData),
			PersistedData:    statsSummary(s.Summaries.PersistedData),
		},
		History: []CheckpointStatistics{},
	}
	latest := func(c *stats.Checkpoint) *CheckpointStatistics {
		if c == nil {
			return nil
		}
		cs := checkpointStatistics(j, *c)
		return &cs
	}
	out.Latest.Completed, out.Latest.Savepoint, out.Latest.Failed =
		latest(s.LatestCompleted), latest(s.LatestSavepoint), latest(s.LatestFailed)
	if r := s.LatestRestored; r != nil {
		out.Latest.Restored = &RestoredCheckpoint{ID: r.ID, RestoreTimestamp: ms(r.Time), IsSavepoint: r.Savepoint,
			ExternalPath: r.ExternalPath}
	}
	for _, c := range s.History {
		out.History = append(out.History, checkpointStatistics(j, c))
	}
	return out
}

// className is a checkpoint status's class name.
func className(s stats.Status) string {
	switch s {
	case stats.Completed:
		return ClassCompleted
	case stats.Failed:
		return ClassFailed
	}
	return ClassInProgress
}

func checkpointStatistics(j *monitor.Job, c stats.Checkpoint) CheckpointStatistics {
	kind := string(c.Kind)
	if kind == "" {
		kind = string(stats.KindCheckpoint)
	}
	cs := CheckpointStatistics{ClassName: className(c.Status), ID: c.ID, Status: string(c.Status),
		IsSavepoint: c.Savepoint, TriggerTimestamp: ms(c.TriggerTime), LatestAckTimestamp: orNever(c.LatestAck),
		CheckpointedSize: c.CheckpointedSize, StateSize: c.StateSize, EndToEndDuration: c.EndToEnd().Milliseconds(),
		PersistedData: c.PersistedData, NumSubtasks: c.NumSubtasks, NumAcknowledgedSubtasks: len(c.Subtasks),
		CheckpointType: kind, Tasks: map[string]TaskCheckpointStatistics{}}
	for _, v := range j.Vertices {
		cs.Tasks[v.ID] = taskCheckpointStatistics(c, v)
	}
	switch c.Status {
	case stats.Completed:
		path, discarded := c.ExternalPath, c.Discarded
		cs.ExternalPath, cs.Discarded = &path, &discarded
	case stats.Failed:
		t, msg := ms(c.FailureTime), c.FailureMessage
		cs.FailureTimestamp, cs.FailureMessage = &t, &msg
	}
	return cs
}

// vertexAcks are the acknowledgements of v's subtasks.
func vertexAcks(c stats.Checkpoint, v monitor.Vertex) []stats.Subtask {
	var out []stats.Subtask
	for _, s := range c.Subtasks {
		if s.Vertex == v.Index {
			out = append(out, s)
		}
	}
	return out
}

func taskCheckpointStatistics(c stats.Checkpoint, v monitor.Vertex) TaskCheckpointStatistics {
	t := TaskCheckpointStatistics{ID: c.ID, Status: string(c.Status), LatestAckTimestamp: -1,
		NumSubtasks: v.Parallelism}
	var latest time.Time
	for _, s := range vertexAcks(c, v) {
		t.NumAcknowledgedSubtasks++
		t.CheckpointedSize += s.CheckpointedSize
		t.PersistedData += s.PersistedData
		if s.AckTime.After(latest) {
			latest = s.AckTime
		}
	}
	// A subtask's acknowledgement carries what it uploaded; the full size
	// of the state it references is known for the whole checkpoint only.
	t.StateSize = t.CheckpointedSize
	if !latest.IsZero() {
		t.LatestAckTimestamp = latest.UnixMilli()
		t.EndToEndDuration = max(latest.Sub(c.TriggerTime).Milliseconds(), 0)
	}
	return t
}

func taskCheckpointDetails(c stats.Checkpoint, v monitor.Vertex) TaskCheckpointDetails {
	d := TaskCheckpointDetails{TaskCheckpointStatistics: taskCheckpointStatistics(c, v)}
	acks := vertexAcks(c, v)
	col := func(f func(stats.Subtask) float64) StatsSummary {
		vals := make([]float64, len(acks))
		for i, s := range acks {
			vals[i] = f(s)
		}
		return summarize(vals)
	}
	msOf := func(d time.Duration) float64 { return float64(d.Milliseconds()) }
	d.Summary = SubtaskCheckpointSummary{
		StateSize:        col(func(s stats.Subtask) float64 { return float64(s.CheckpointedSize) }),
		CheckpointedSize: col(func(s stats.Subtask) float64 { return float64(s.CheckpointedSize) }),
		EndToEndDuration: col(func(s stats.Subtask) float64 { return msOf(s.EndToEnd) }),
		CheckpointDuration: CheckpointDurationSummary{
			Sync:  col(func(s stats.Subtask) float64 { return msOf(s.Sync) }),
			Async: col(func(s stats.Subtask) float64 { return msOf(s.Async) }),
		},
		Alignment: AlignmentSummary{
			Buffered:  summarize(nil),
			Processed: summarize(nil),
			Persisted: col(func(s stats.Subtask) float64 { return float64(s.PersistedData) }),
			Duration:  col(func(s stats.Subtask) float64 { return msOf(s.Alignment) }),
		},
		StartDelay: col(func(s stats.Subtask) float64 { return msOf(s.StartDelay) }),
	}
	d.Subtasks = make([]SubtaskCheckpointStatistics, v.Parallelism)
	for i := range d.Subtasks {
		d.Subtasks[i] = SubtaskCheckpointStatistics{ClassName: "pending", Index: i, Status: SubtaskPendingOrFailed}
	}
	for _, s := range acks {
		if s.Index < 0 || s.Index >= len(d.Subtasks) {
			continue
		}
		ack, e2e, size, delay := s.AckTime.UnixMilli(), s.EndToEnd.Milliseconds(), s.CheckpointedSize,
			s.StartDelay.Milliseconds()
		unaligned, aborted := s.Unaligned, false
		d.Subtasks[s.Index] = SubtaskCheckpointStatistics{ClassName: "completed", Index: s.Index,
			Status: SubtaskCompleted, AckTimestamp: &ack, EndToEndDuration: &e2e, StateSize: &size,
			CheckpointedSize: &size, StartDelay: &delay, UnalignedCheckpoint: &unaligned, Aborted: &aborted,
			Checkpoint: &CheckpointDuration{Sync: s.Sync.Milliseconds(), Async: s.Async.Milliseconds()},
			Alignment:  &CheckpointAlignment{Persisted: s.PersistedData, Duration: s.Alignment.Milliseconds()}}
	}
	return d
}

func checkpointConfig(c monitor.CheckpointConfig) CheckpointConfigInfo {
	ret := strings.ToUpper(c.Retention)
	return CheckpointConfigInfo{Mode: c.Mode, Interval: c.Interval.Milliseconds(), Timeout: c.Timeout.Milliseconds(),
		MinPause: c.MinPause.Milliseconds(), MaxConcurrent: c.MaxConcurrent,
		Externalization: ExternalizationConfig{Enabled: ret != "NO_EXTERNALIZED_CHECKPOINTS",
			DeleteOnCancellation: ret == "DELETE_ON_CANCELLATION"},
		StateBackend: c.StateBackend, CheckpointStorage: c.Storage, UnalignedCheckpoints: c.Unaligned,
		TolerableFailedCheckpoints: c.TolerableFailures, AlignedCheckpointTimeout: c.AlignedTimeout.Milliseconds(),
		CheckpointsAfterTasksFinish: c.CheckpointsAfterTasksDone, StateChangelogEnabled: c.Changelog,
		ChangelogPeriodicMaterializationInterval: c.ChangelogMaterialization.Milliseconds(),
		NumRetained:                              c.NumRetained, Incremental: c.Incremental}
}

// BackpressureLevel is the level of a ratio of backpressured time (0 to
// 1): BackpressureOK up to 0.10, BackpressureLow up to 0.5,
// BackpressureHigh above.
func BackpressureLevel(ratio float64) string {
	switch {
	case ratio <= 0.10:
		return BackpressureOK
	case ratio <= 0.5:
		return BackpressureLow
	}
	return BackpressureHigh
}

// levelRank orders the levels, worst last.
func levelRank(l string) int {
	switch l {
	case BackpressureLow:
		return 1
	case BackpressureHigh:
		return 2
	}
	return 0
}

// subtaskTasks returns v's subtasks' task metrics, by index (nil where a
// subtask reported none).
func subtaskTasks(v monitor.Vertex, tasks []task.TaskMetrics) []*task.TaskMetrics {
	out := make([]*task.TaskMetrics, v.Parallelism)
	for i := range tasks {
		t := &tasks[i]
		if t.Vertex == v.Index && t.Subtask >= 0 && t.Subtask < len(out) {
			out[t.Subtask] = t
		}
	}
	return out
}

func vertexBackPressure(v monitor.Vertex, st monitor.Status, now time.Time) VertexBackPressure {
	b := VertexBackPressure{Status: "ok", Level: BackpressureOK, EndTimestamp: now.UnixMilli(),
		Subtasks: []SubtaskBackPressure{}}
	for i, t := range subtaskTasks(v, st.Tasks) {
		if t == nil {
			continue
		}
		ratio := t.BackPressuredTimeMsPerSecond / 1000
		level := BackpressureLevel(ratio)
		b.Subtasks = append(b.Subtasks, SubtaskBackPressure{Subtask: i, AttemptNumber: st.Restarts, Level: level,
			LevelCamelCase: level, Ratio: ratio, IdleRatio: t.IdleTimeMsPerSecond / 1000,
			BusyRatio: t.BusyTimeMsPerSecond / 1000})
		if levelRank(level) > levelRank(b.Level) {
			b.Level = level
		}
	}
	b.LevelCamelCase = b.Level
	return b
}
