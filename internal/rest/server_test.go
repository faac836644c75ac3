package rest

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/monitor"
	"github.com/weirstream/weir/internal/rest/resttest"
)

const finishedID = "11111111111111111111111111111111"

// fixture starts a server showing the running fixture job and a finished
// job.
func fixture(t *testing.T, cfg Config) (*Server, *resttest.Job) {
	t.Helper()
	j := resttest.NewJob()
	return start(t, cfg, j.Job, resttest.NewFinishedJob(finishedID, "done")), j
}

const jobPrefix = "/jobs/" + resttest.JobID

func TestClusterEndpoints(t *testing.T) {
	s, _ := fixture(t, Config{})

	var cfg DashboardConfig
	v := getOK(t, s, "/config", &cfg)
	fields(t, "/config", v, "refresh-interval:number timezone-name:string timezone-offset:number "+
		"flink-version:string weir-version:string features:object")
	fields(t, "/config features", at(t, v, "features"), "web-submit:bool web-cancel:bool web-rescale:bool web-history:bool")
	if cfg.FlinkVersion != "0.1.0-test" || cfg.WeirVersion != "0.1.0-test" || cfg.RefreshInterval != 3000 {
		t.Errorf("/config: %+v", cfg)
	}

	var o ClusterOverview
	v = getOK(t, s, "/overview", &o)
	fields(t, "/overview", v, "taskmanagers:number slots-total:number slots-available:number jobs-running:number "+
		"jobs-finished:number jobs-cancelled:number jobs-failed:number flink-version:string")
	if o.TaskManagers != 1 || o.JobsRunning != 1 || o.JobsFinished != 1 || o.JobsCancelled != 0 ||
		o.JobsFailed != 0 || o.SlotsTotal != 2 || o.FlinkVersion != "0.1.0-test" {
		t.Errorf("/overview: %+v", o)
	}

	var ids JobIDsWithStatus
	v = getOK(t, s, "/jobs", &ids)
	fields(t, "/jobs[0]", at(t, v, "jobs", 0), "id:string status:string")
	want := []JobIDWithStatus{{resttest.JobID, "RUNNING"}, {finishedID, "FINISHED"}}
	if !slices.Equal(ids.Jobs, want) {
		t.Errorf("/jobs: %+v, want %+v", ids.Jobs, want)
	}

	var jo MultipleJobsDetails
	v = getOK(t, s, "/jobs/overview", &jo)
	fields(t, "/jobs/overview[0]", at(t, v, "jobs", 0), "jid:string name:string state:string start-time:number "+
		"end-time:number duration:number last-modification:number tasks:object")
	fields(t, "/jobs/overview[0].tasks", at(t, v, "jobs", 0, "tasks"), "total:number created:number "+
		"scheduled:number deploying:number running:number finished:number canceling:number canceled:number "+
		"failed:number reconciling:number initializing:number")
	run, done := jo.Jobs[0], jo.Jobs[1]
	if run.JID != resttest.JobID || run.Name != resttest.JobName || run.State != "RUNNING" || run.EndTime != -1 ||
		run.StartTime != resttest.T0.UnixMilli() || run.Duration != (10*time.Minute).Milliseconds() ||
		run.Tasks.Total != 5 || run.Tasks.Running != 5 || run.LastModification != resttest.T0.Add(time.Second).UnixMilli() {
		t.Errorf("running job overview: %+v", run)
	}
	if done.State != "FINISHED" || done.EndTime != resttest.T0.Add(time.Minute).UnixMilli() ||
		done.Duration != time.Minute.Milliseconds() || done.Tasks.Finished != 5 || done.Tasks.Running != 0 {
		t.Errorf("finished job overview: %+v", done)
	}
}

func TestJobEndpoints(t *testing.T) {
	s, _ := fixture(t, Config{})

	var d JobDetails
	v := getOK(t, s, jobPrefix, &d)
	fields(t, "job", v, "jid:string name:string isStoppable:bool state:string start-time:number end-time:number "+
		"duration:number maxParallelism:number now:number timestamps:object vertices:array status-counts:object "+
		"plan:object")
	for _, st := range JobStatuses {
		fields(t, "job timestamps", at(t, v, "timestamps"), st+":number")
	}
	for _, st := range ExecutionStates {
		fields(t, "job status-counts", at(t, v, "status-counts"), st+":number")
		fields(t, "job vertex tasks", at(t, v, "vertices", 0, "tasks"), st+":number")
	}
	fields(t, "job vertex", at(t, v, "vertices", 0), "id:string name:string maxParallelism:number "+
		"parallelism:number status:string start-time:number end-time:number duration:number tasks:object metrics:object")
	fields(t, "job vertex metrics", at(t, v, "vertices", 0, "metrics"), "read-bytes:number read-bytes-complete:bool "+
		"write-bytes:number write-bytes-complete:bool read-records:number read-records-complete:bool "+
		"write-records:number write-records-complete:bool accumulated-backpressured-time:number "+
		"accumulated-idle-time:number accumulated-busy-time:number")
	fields(t, "plan", at(t, v, "plan"), "jid:string name:string type:string nodes:array")
	fields(t, "plan node", at(t, v, "plan", "nodes", 1), "id:string parallelism:number operator:string "+
		"operator_strategy:string description:string inputs:array optimizer_properties:object")
	fields(t, "plan input", at(t, v, "plan", "nodes", 1, "inputs", 0), "num:number id:string ship_strategy:string exchange:string")

	if d.State != "RUNNING" || d.EndTime != -1 || d.Now != resttest.Now.UnixMilli() || d.MaxParallelism != 128 ||
		d.Timestamps["RUNNING"] != resttest.T0.Add(time.Second).UnixMilli() || d.Timestamps["FAILED"] != 0 ||
		d.StatusCounts["RUNNING"] != 3 || len(d.Vertices) != 3 {
		t.Fatalf("job details: %+v", d)
	}
	src, win, sink := d.Vertices[0], d.Vertices[1], d.Vertices[2]
	if src.ID != resttest.SourceID || src.Parallelism != 2 || src.Tasks["RUNNING"] != 2 ||
		src.StartTime != resttest.T0.Add(time.Second).UnixMilli() {
		t.Errorf("source vertex: %+v", src)
	}
	// The registry's counters, summed over the subtasks; another job's
	// group of the same vertex id is not counted.
	wantIO := IOMetrics{ReadRecords: 3000, ReadRecordsComplete: true, WriteRecords: 2700, WriteRecordsComplete: true,
		ReadBytes: 30000, ReadBytesComplete: true, WriteBytes: 27000, WriteBytesComplete: true,
		AccumulatedBusyTime: 499 + 799, AccumulatedIdleTime: 100, AccumulatedBackpressuredTime: 501 + 101}
	if win.Metrics != wantIO {
		t.Errorf("window vertex metrics:\n got %+v\nwant %+v", win.Metrics, wantIO)
	}
	if src.Metrics.WriteRecords != 3000 || sink.Metrics.ReadRecords != 2700 {
		t.Errorf("source/sink metrics: %+v / %+v", src.Metrics, sink.Metrics)
	}
	nodes := d.Plan.Nodes
	if len(nodes) != 3 || nodes[0].Inputs != nil || nodes[1].Description != "Window(5s) -> Map" ||
		len(nodes[1].Inputs) != 1 || nodes[1].Inputs[0].ID != resttest.SourceID || nodes[1].Inputs[0].ShipStrategy != "HASH" ||
		nodes[2].Inputs[0].ID != resttest.WindowID || nodes[2].Inputs[0].ShipStrategy != "REBALANCE" {
		t.Errorf("plan: %+v", d.Plan)
	}

	var st JobStatusInfo
	getOK(t, s, jobPrefix+"/status", &st)
	if st.Status != "RUNNING" {
		t.Errorf("status %q", st.Status)
	}

	var c JobConfig
	v = getOK(t, s, jobPrefix+"/config", &c)
	fields(t, "job config", v, "jid:string name:string execution-config:object")
	fields(t, "execution-config", at(t, v, "execution-config"), "execution-mode:string restart-strategy:string "+
		"job-parallelism:number object-reuse-mode:bool user-config:object")
	ec := c.ExecutionConfig
	if ec.ExecutionMode != "PIPELINED" || ec.RestartStrategy != "exponential-delay" || ec.JobParallelism != 2 ||
		ec.UserConfig["pipeline.name"] != resttest.JobName {
		t.Errorf("job config: %+v", c)
	}
	if got := ec.UserConfig["rest.auth.token"]; got != Redacted {
		t.Errorf("the token shows in the job config: %q", got)
	}

	var ex JobExceptions
	v = getOK(t, s, jobPrefix+"/exceptions", &ex)
	fields(t, "exceptions", v, "root-exception:string timestamp:number all-exceptions:array truncated:bool "+
		"exceptionHistory:object")
	fields(t, "exception entry", at(t, v, "exceptionHistory", "entries", 0), "exceptionName:string "+
		"stacktrace:string timestamp:number taskName:null failureLabels:object concurrentExceptions:array")
	if *ex.RootException != "source failed: connection reset\n\tat reader" ||
		*ex.Timestamp != resttest.T0.Add(3*time.Second).UnixMilli() || len(ex.ExceptionHistory.Entries) != 1 ||
		ex.ExceptionHistory.Entries[0].ExceptionName != "source failed: connection reset" {
		t.Errorf("exceptions: %+v", ex)
	}
	v = getOK(t, s, "/jobs/"+finishedID+"/exceptions", nil)
	fields(t, "exceptions of a job that never failed", v, "root-exception:null timestamp:null")

	var vd JobVertexDetails
	v = getOK(t, s, jobPrefix+"/vertices/"+resttest.WindowID, &vd)
	fields(t, "vertex", v, "id:string name:string parallelism:number maxParallelism:number now:number subtasks:array")
	fields(t, "vertex subtask", at(t, v, "subtasks", 1), "subtask:number status:string attempt:number "+
		"endpoint:string start-time:number end-time:number duration:number metrics:object taskmanager-id:string")
	if len(vd.Subtasks) != 2 || vd.Subtasks[1].Metrics.ReadRecords != 2000 || vd.Subtasks[1].Status != "RUNNING" ||
		vd.Subtasks[1].Attempt != 1 || vd.Subtasks[1].Metrics.AccumulatedBusyTime != 799 {
		t.Errorf("vertex details: %+v", vd)
	}
	// A vertex may also be named by its index.
	var byIndex JobVertexDetails
	getOK(t, s, jobPrefix+"/vertices/1", &byIndex)
	if byIndex.ID != resttest.WindowID {
		t.Errorf("vertex 1 is %s", byIndex.ID)
	}
}

// monotone checks min <= p50 <= p90 <= p95 <= p99 <= p999 <= max.
func monotone(t *testing.T, where string, s StatsSummary) {
	t.Helper()
	seq := []float64{float64(s.Min), s.P50, s.P90, s.P95, s.P99, s.P999, float64(s.Max)}
	if !slices.IsSorted(seq) {
		t.Errorf("%s: not monotone: %+v", where, s)
	}
	if float64(s.Avg) < float64(s.Min) || float64(s.Avg) > float64(s.Max) {
		t.Errorf("%s: avg outside [min, max]: %+v", where, s)
	}
}

const summaryFields = "min:number max:number avg:number p50:number p90:number p95:number p99:number p999:number"

const checkpointFields = "className:string id:number status:string is_savepoint:bool savepointFormat:null " +
	"trigger_timestamp:number latest_ack_timestamp:number checkpointed_size:number state_size:number " +
	"end_to_end_duration:number alignment_buffered:number processed_data:number persisted_data:number " +
	"num_subtasks:number num_acknowledged_subtasks:number checkpoint_type:string tasks:object"

const taskCheckpointFields = "id:number status:string latest_ack_timestamp:number checkpointed_size:number " +
	"state_size:number end_to_end_duration:number alignment_buffered:number processed_data:number " +
	"persisted_data:number num_subtasks:number num_acknowledged_subtasks:number"

func TestCheckpointEndpoints(t *testing.T) {
	s, j := fixture(t, Config{})

	var cs CheckpointingStatistics
	v := getOK(t, s, jobPrefix+"/checkpoints", &cs)
	fields(t, "checkpoints", v, "counts:object summary:object latest:object history:array")
	fields(t, "counts", at(t, v, "counts"), "restored:number total:number in_progress:number completed:number failed:number")
	for _, f := range []string{"checkpointed_size", "state_size", "end_to_end_duration", "alignment_buffered",
		"processed_data", "persisted_data"} {
		fields(t, "summary "+f, at(t, v, "summary", f), summaryFields)
	}
	fields(t, "latest", at(t, v, "latest"), "completed:object savepoint:object failed:object restored:object")
	fields(t, "latest completed", at(t, v, "latest", "completed"), checkpointFields+" external_path:string discarded:bool")
	fields(t, "latest failed", at(t, v, "latest", "failed"), checkpointFields+" failure_timestamp:number failure_message:string")
	onlyFields(t, "latest restored", at(t, v, "latest", "restored"),
		"id:number restore_timestamp:number is_savepoint:bool external_path:string")

	c := j.Checkpoints.Counts()
	if want := (CheckpointCounts{Restored: c.Restored, Total: c.Total, InProgress: c.InProgress,
		Completed: c.Completed, Failed: c.Failed}); cs.Counts != want || want.Total != 5 {
		t.Errorf("counts %+v, want the tracker's %+v", cs.Counts, want)
	}
	monotone(t, "checkpointed_size", cs.Summary.CheckpointedSize)
	monotone(t, "state_size", cs.Summary.StateSize)
	monotone(t, "end_to_end_duration", cs.Summary.EndToEndDuration)
	if e := cs.Summary.EndToEndDuration; e.Min != 1000 || e.Max != 5000 || e.P50 != 2000 {
		t.Errorf("end-to-end summary %+v: the completed checkpoints took 2 s, 1 s and 5 s", e)
	}
	if sz := cs.Summary.StateSize; sz.Min != 1000 || sz.Max != 6000 {
		t.Errorf("state size summary %+v", sz)
	}
	l := cs.Latest
	if l.Completed.ID != resttest.CheckpointCompleted || l.Savepoint.ID != resttest.CheckpointSavepoint ||
		!l.Savepoint.IsSavepoint || l.Savepoint.CheckpointType != "SAVEPOINT" || l.Failed.ID != resttest.CheckpointFailed ||
		*l.Failed.FailureMessage != resttest.FailureMessage ||
		*l.Failed.FailureTimestamp != resttest.T0.Add(30*time.Second).UnixMilli() ||
		l.Restored.ID != resttest.CheckpointRestored || l.Restored.ExternalPath != "file:///ck/orders/chk-10" {
		t.Errorf("latest: %+v", l)
	}
	var ids []int64
	for _, h := range cs.History {
		ids = append(ids, h.ID)
	}
	if !slices.Equal(ids, []int64{15, 14, 13, 12, 11}) {
		t.Fatalf("history ids %v, want newest first", ids)
	}
	classes := map[int64]string{15: ClassInProgress, 14: ClassCompleted, 13: ClassCompleted, 12: ClassFailed, 11: ClassCompleted}
	for i, h := range cs.History {
		if h.ClassName != classes[h.ID] || len(h.Tasks) != 3 {
			t.Errorf("history %d: className %q, %d tasks", h.ID, h.ClassName, len(h.Tasks))
		}
		hv := at(t, v, "history", i)
		fields(t, "history entry", hv, checkpointFields)
		fields(t, "history entry task", at(t, hv, "tasks", resttest.WindowID), taskCheckpointFields)
		m := obj(t, hv)
		_, hasPath := m["external_path"]
		_, hasFailure := m["failure_message"]
		if hasPath != (h.ClassName == ClassCompleted) || hasFailure != (h.ClassName == ClassFailed) {
			t.Errorf("history %d (%s): external_path %v, failure_message %v", h.ID, h.ClassName, hasPath, hasFailure)
		}
	}
	if h := cs.History[4]; !*h.Discarded || *h.ExternalPath != "file:///ck/orders/chk-11" || h.EndToEndDuration != 2000 {
		t.Errorf("checkpoint 11: %+v", h)
	}
	if h := cs.History[0]; h.NumAcknowledgedSubtasks != 1 || h.NumSubtasks != 5 || h.CheckpointedSize != 70 ||
		h.LatestAckTimestamp != resttest.T0.Add(60300*time.Millisecond).UnixMilli() || h.EndToEndDuration != 300 {
		t.Errorf("in-progress checkpoint 15: %+v", h)
	}

	var cc CheckpointConfigInfo
	v = getOK(t, s, jobPrefix+"/checkpoints/config", &cc)
	fields(t, "checkpoint config", v, "mode:string interval:number timeout:number min_pause:number "+
		"max_concurrent:number externalization:object state_backend:string checkpoint_storage:string "+
		"unaligned_checkpoints:bool tolerable_failed_checkpoints:number aligned_checkpoint_timeout:number "+
		"checkpoints_after_tasks_finish:bool state_changelog_enabled:bool changelog_periodic_materialization_interval:number")
	fields(t, "externalization", at(t, v, "externalization"), "enabled:bool delete_on_cancellation:bool")
	if cc.Mode != "exactly_once" || cc.Interval != 10000 || cc.Timeout != 600000 || !cc.Externalization.Enabled ||
		cc.Externalization.DeleteOnCancellation || cc.StateBackend != "hashmap" {
		t.Errorf("checkpoint config: %+v", cc)
	}
	wantError(t, do(t, s, http.MethodGet, "/jobs/"+finishedID+"/checkpoints/config"), http.StatusNotFound,
		"Checkpointing is not enabled")

	var cd CheckpointStatistics
	v = getOK(t, s, jobPrefix+"/checkpoints/details/13", &cd)
	fields(t, "checkpoint 13", v, checkpointFields+" external_path:string discarded:bool")
	for _, id := range []string{resttest.SourceID, resttest.WindowID, resttest.SinkID} {
		fields(t, "checkpoint 13 task", at(t, v, "tasks", id), taskCheckpointFields)
	}
	win := cd.Tasks[resttest.WindowID]
	if win.ID != 13 || win.Status != "COMPLETED" || win.CheckpointedSize != 2000 || win.NumSubtasks != 2 ||
		win.NumAcknowledgedSubtasks != 2 || win.EndToEndDuration != 800 ||
		win.LatestAckTimestamp != resttest.T0.Add(40800*time.Millisecond).UnixMilli() {
		t.Errorf("checkpoint 13, window vertex: %+v", win)
	}
	getOK(t, s, jobPrefix+"/checkpoints/details/12", &cd)
	if cd.Status != "FAILED" || *cd.FailureMessage != resttest.FailureMessage || cd.NumAcknowledgedSubtasks != 3 {
		t.Errorf("checkpoint 12: %+v", cd)
	}

	var td TaskCheckpointDetails
	v = getOK(t, s, jobPrefix+"/checkpoints/details/15/subtasks/"+resttest.SourceID, &td)
	fields(t, "subtask details", v, taskCheckpointFields+" summary:object subtasks:array")
	fields(t, "subtask summary", at(t, v, "summary"), "state_size:object checkpointed_size:object "+
		"end_to_end_duration:object checkpoint_duration:object alignment:object start_delay:object")
	fields(t, "summary duration", at(t, v, "summary", "checkpoint_duration"), "sync:object async:object")
	fields(t, "summary alignment", at(t, v, "summary", "alignment"), "buffered:object processed:object persisted:object duration:object")
	fields(t, "summary start_delay", at(t, v, "summary", "start_delay"), summaryFields)
	onlyFields(t, "acknowledged subtask", at(t, v, "subtasks", 0), "className:string index:number status:string "+
		"ack_timestamp:number end_to_end_duration:number state_size:number checkpointed_size:number checkpoint:object "+
		"alignment:object start_delay:number unaligned_checkpoint:bool aborted:bool")
	onlyFields(t, "acknowledged subtask checkpoint", at(t, v, "subtasks", 0, "checkpoint"), "sync:number async:number")
	onlyFields(t, "acknowledged subtask alignment", at(t, v, "subtasks", 0, "alignment"),
		"buffered:number processed:number persisted:number duration:number")
	onlyFields(t, "pending subtask", at(t, v, "subtasks", 1), "className:string index:number status:string")
	if len(td.Subtasks) != 2 || td.Subtasks[0].Status != SubtaskCompleted || td.Subtasks[1].Status != SubtaskPendingOrFailed ||
		*td.Subtasks[0].EndToEndDuration != 300 || *td.Subtasks[0].StartDelay != 30 ||
		td.Subtasks[0].Checkpoint.Sync != 60 || td.Subtasks[0].Checkpoint.Async != 150 ||
		td.Summary.EndToEndDuration.Max != 300 || td.NumAcknowledgedSubtasks != 1 {
		t.Errorf("subtask details of checkpoint 15: %+v", td)
	}

	// Subtask summaries of a completed checkpoint cover every subtask.
	getOK(t, s, jobPrefix+"/checkpoints/details/13/subtasks/"+resttest.WindowID, &td)
	sm := td.Summary
	monotone(t, "subtask e2e", sm.EndToEndDuration)
	monotone(t, "subtask sync", sm.CheckpointDuration.Sync)
	// The window's subtasks acknowledged after 3/5 and 4/5 of the second
	// the checkpoint took.
	if sm.CheckpointedSize.Min != 1000 || sm.CheckpointedSize.Max != 1000 || sm.EndToEndDuration.Min != 600 ||
		sm.EndToEndDuration.Max != 800 || sm.Alignment.Duration.Max != 40 {
		t.Errorf("subtask summary of checkpoint 13: %+v", sm)
	}

	wantError(t, do(t, s, http.MethodGet, jobPrefix+"/checkpoints/details/abc"), http.StatusBadRequest,
		`Checkpoint id "abc" is not a number`)
	wantError(t, do(t, s, http.MethodGet, jobPrefix+"/checkpoints/details/99"), http.StatusNotFound, "checkpoint 99")
	wantError(t, do(t, s, http.MethodGet, jobPrefix+"/checkpoints/details/13/subtasks/nope"), http.StatusNotFound,
		"Vertex nope not found")
}

func TestBackpressure(t *testing.T) {
	for _, c := range []struct {
		ratio float64
		want  string
	}{{0, "ok"}, {0.10, "ok"}, {0.1001, "low"}, {0.5, "low"}, {0.5001, "high"}, {1, "high"}} {
		if got := BackpressureLevel(c.ratio); got != c.want {
			t.Errorf("BackpressureLevel(%v) = %s, want %s", c.ratio, got, c.want)
		}
	}

	s, _ := fixture(t, Config{})
	for _, c := range []struct {
		vertex    string
		level     string
		subLevels []string
		ratios    []float64
	}{
		{resttest.SourceID, "low", []string{"ok", "low"}, []float64{0.1, 0.5}},
		{resttest.WindowID, "high", []string{"high", "low"}, []float64{0.501, 0.101}},
		{resttest.SinkID, "ok", []string{"ok"}, []float64{0}},
	} {
		var b VertexBackPressure
		v := getOK(t, s, jobPrefix+"/vertices/"+c.vertex+"/backpressure", &b)
		fields(t, "backpressure", v, "status:string backpressureLevel:string backpressure-level:string "+
			"end-timestamp:number subtasks:array")
		fields(t, "backpressure subtask", at(t, v, "subtasks", 0), "subtask:number attempt-number:number "+
			"backpressureLevel:string backpressure-level:string ratio:number idleRatio:number busyRatio:number")
		if b.Status != "ok" || b.Level != c.level || b.LevelCamelCase != c.level || len(b.Subtasks) != len(c.subLevels) ||
			b.EndTimestamp != resttest.Now.UnixMilli() {
			t.Errorf("%s: %+v, want level %s", c.vertex, b, c.level)
			continue
		}
		for i, sb := range b.Subtasks {
			if sb.Subtask != i || sb.Level != c.subLevels[i] || sb.LevelCamelCase != c.subLevels[i] || sb.Ratio != c.ratios[i] {
				t.Errorf("%s subtask %d: %+v, want level %s ratio %v", c.vertex, i, sb, c.subLevels[i], c.ratios[i])
			}
			if sum := sb.Ratio + sb.IdleRatio + sb.BusyRatio; sum < 0.999 || sum > 1.001 {
				t.Errorf("%s subtask %d: ratios add up to %v", c.vertex, i, sum)
			}
		}
	}

	// A job without a deployment has no subtasks to report.
	var b VertexBackPressure
	getOK(t, s, "/jobs/"+finishedID+"/vertices/"+resttest.SinkID+"/backpressure", &b)
	if b.Level != "ok" || len(b.Subtasks) != 0 {
		t.Errorf("finished job's backpressure: %+v", b)
	}
}

func TestMetricsEndpoints(t *testing.T) {
	s, _ := fixture(t, Config{})
	ids := func(ms []Metric) []string {
		var out []string
		for _, m := range ms {
			out = append(out, m.ID)
		}
		return out
	}

	var list []Metric
	v := getOK(t, s, jobPrefix+"/metrics", &list)
	onlyFields(t, "job metric", at(t, v, 0), "id:string")
	if got := ids(list); !slices.Equal(got, []string{"numRestarts", "lastCheckpointDuration", "numberOfCompletedCheckpoints"}) {
		t.Errorf("job metrics %v", got)
	}
	v = getOK(t, s, jobPrefix+"/metrics?get=lastCheckpointDuration,nope,numberOfCompletedCheckpoints", &list)
	onlyFields(t, "job metric value", at(t, v, 0), "id:string value:string")
	if want := []Metric{{"lastCheckpointDuration", "5000"}, {"numberOfCompletedCheckpoints", "3"}}; !slices.Equal(list, want) {
		t.Errorf("job metrics get: %+v, want %+v", list, want)
	}

	getOK(t, s, jobPrefix+"/vertices/"+resttest.WindowID+"/metrics", &list)
	names := ids(list)
	for _, want := range []string{"0.numRecordsIn", "1.numBytesOut", "0.Map.numRecordsOut", "1.busyTimeMsPerSecond",
		"0.backPressuredTimeMsPerSecond", "1.debloatedBufferSize"} {
		if !slices.Contains(names, want) {
			t.Errorf("vertex metrics lack %s: %v", want, names)
		}
	}
	if slices.Contains(names, "1.Map.numRecordsOut") {
		t.Errorf("vertex metrics invent an operator group: %v", names)
	}
	getOK(t, s, jobPrefix+"/vertices/"+resttest.WindowID+"/metrics?get=1.numRecordsIn&get=0.Map.numRecordsOut,0.inPoolUsage", &list)
	if want := []Metric{{"1.numRecordsIn", "2000"}, {"0.Map.numRecordsOut", "900"}, {"0.inPoolUsage", "0.25"}}; !slices.Equal(list, want) {
		t.Errorf("vertex metrics get: %+v, want %+v", list, want)
	}

	agg := jobPrefix + "/vertices/" + resttest.WindowID + "/subtasks/metrics"
	var am []AggregatedMetric
	v = getOK(t, s, agg+"?get=numRecordsIn&agg=min,max,sum,avg", &am)
	onlyFields(t, "aggregated", at(t, v, 0), "id:string min:number max:number sum:number avg:number")
	if len(am) != 1 || *am[0].Min != 1000 || *am[0].Max != 2000 || *am[0].Sum != 3000 || *am[0].Avg != 1500 {
		t.Errorf("aggregated numRecordsIn: %s", at(t, v, 0))
	}
	v = getOK(t, s, agg+"?get=numRecordsIn,backPressuredTimeMsPerSecond", &am)
	fields(t, "aggregated, all aggregations", at(t, v, 0), "id:string min:number max:number sum:number avg:number skew:number")
	if len(am) != 2 || *am[0].Skew < 33.33 || *am[0].Skew > 33.34 || *am[1].Max != 501 || *am[1].Min != 101 {
		t.Errorf("aggregated: %s", v)
	}
	am = nil // decoding into used elements would keep their fields
	getOK(t, s, agg+"?get=numRecordsIn&agg=sum&subtasks=1", &am)
	if len(am) != 1 || *am[0].Sum != 2000 || am[0].Min != nil {
		t.Errorf("aggregated over subtask 1: %+v", am)
	}
	am = nil
	getOK(t, s, agg, &am)
	if len(am) == 0 || am[0].ID != "numRecordsIn" || am[0].Sum != nil {
		t.Errorf("aggregated names: %+v", am)
	}
	wantError(t, do(t, s, http.MethodGet, agg+"?get=numRecordsIn&agg=median"), http.StatusBadRequest,
		`Unknown aggregation "median"`, "valid: min, max, sum, avg, skew")
	wantError(t, do(t, s, http.MethodGet, agg+"?get=numRecordsIn&subtasks=0-5"), http.StatusBadRequest, "2 subtasks")
	wantError(t, do(t, s, http.MethodGet, agg+"?get=numRecordsIn&subtasks=x"), http.StatusBadRequest, `"x"`)

	sub := jobPrefix + "/vertices/" + resttest.SinkID + "/subtasks/0/metrics"
	getOK(t, s, sub+"?get=latency_p99,latency_min,latency_max,numRecordsIn", &list)
	if want := []Metric{{"latency_p99", "99.01"}, {"latency_min", "1"}, {"latency_max", "100"}, {"numRecordsIn", "2700"}}; !slices.Equal(list, want) {
		t.Errorf("subtask metrics: %+v, want %+v", list, want)
	}
	wantError(t, do(t, s, http.MethodGet, jobPrefix+"/vertices/"+resttest.SinkID+"/subtasks/1/metrics"),
		http.StatusNotFound, "1 subtasks")
	wantError(t, do(t, s, http.MethodGet, jobPrefix+"/vertices/"+resttest.SinkID+"/subtasks/one/metrics"),
		http.StatusBadRequest, `"one"`)
}

// triggerStatus GETs a trigger's status.
func triggerStatus(t *testing.T, s *Server, id string) (CheckpointTriggerStatus, any) {
	t.Helper()
	var st CheckpointTriggerStatus
	v := getOK(t, s, jobPrefix+"/checkpoints/"+id, &st)
	return st, v
}

func TestTriggerCheckpoint(t *testing.T) {
	s, j := fixture(t, Config{})
	post := func(body string) answer {
		return call(t, nil, http.MethodPost, s.URL(), jobPrefix+"/checkpoints", "", body)
	}

	a := post(`{"checkpointType":"FULL"}`)
	if a.status != http.StatusAccepted {
		t.Fatalf("POST: %d %s", a.status, a.body)
	}
	var tr TriggerResponse
	onlyFields(t, "trigger", decode(t, "trigger", a, &tr), "request-id:string")
	// The fake control holds the checkpoint until the test sends a result.
	st, v := triggerStatus(t, s, tr.RequestID)
	if st.Status.ID != OperationInProgress || st.Operation != nil {
		t.Errorf("before the result: %s", a.body)
	}
	fields(t, "in progress", v, "status:object operation:null")
	j.Results <- resttest.Result{ID: 16}
	eventually(t, "the checkpoint to complete", func() bool {
		st, v = triggerStatus(t, s, tr.RequestID)
		return st.Status.ID == OperationCompleted
	})
	onlyFields(t, "completed", at(t, v, "operation"), "checkpointId:number")
	if *st.Operation.CheckpointID != 16 {
		t.Errorf("completed: %+v", st.Operation)
	}

	a = post("")
	decode(t, "trigger", a, &tr)
	j.Results <- resttest.Result{Err: errors.New("checkpoint declined: task not ready")}
	eventually(t, "the checkpoint to fail", func() bool {
		st, v = triggerStatus(t, s, tr.RequestID)
		return st.Status.ID == OperationCompleted
	})
	fields(t, "failure cause", at(t, v, "operation", "failureCause"), "class:string stack-trace:string serialized-throwable:string")
	if fc := st.Operation.FailureCause; fc == nil || fc.StackTrace != "checkpoint declined: task not ready" ||
		st.Operation.CheckpointID != nil {
		t.Errorf("failed: %+v", st.Operation)
	}
	if j.Triggers() != 2 {
		t.Errorf("%d triggers, want 2", j.Triggers())
	}

	wantError(t, post(`{"checkpointType":"DELTA"}`), http.StatusBadRequest, `Unknown checkpointType "DELTA"`,
		"CONFIGURED, FULL, INCREMENTAL")
	wantError(t, post(`{"checkpointType":`), http.StatusBadRequest, "not a checkpoint trigger request")
	wantError(t, do(t, s, http.MethodGet, jobPrefix+"/checkpoints/0123"), http.StatusNotFound, "Checkpoint trigger 0123")
	// A trigger id belongs to its job.
	wantError(t, do(t, s, http.MethodGet, "/jobs/"+finishedID+"/checkpoints/"+tr.RequestID), http.StatusNotFound)
	wantError(t, call(t, nil, http.MethodPost, s.URL(), "/jobs/"+finishedID+"/checkpoints", "", ""),
		http.StatusConflict, "terminal state FINISHED")
	if j.Triggers() != 2 {
		t.Errorf("%d triggers after the rejected requests, want 2", j.Triggers())
	}

	// A checkpoint still running when the server closes is cancelled:
	// Close returns (the fake control ends with its context).
	a = post("")
	decode(t, "trigger", a, &tr)
	eventually(t, "the third trigger", func() bool { return j.Triggers() == 3 })
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if tr2, ok := s.triggers.get(triggerKey{checkpointTrigger, resttest.JobID, tr.RequestID}); !ok || !tr2.done ||
		!errors.Is(tr2.result.err, context.Canceled) {
		t.Errorf("trigger after Close: %+v", tr2)
	}
}

func TestTriggersForgetTheOldest(t *testing.T) {
	tr := newTriggers()
	var keys []triggerKey
	for i := range maxFinishedTriggers + 5 {
		k := triggerKey{kind: triggerKind(i % 2), job: "job", id: newTriggerID()}
		if added, err := tr.add(k, maxFinishedTriggers+5); !added || err != nil {
			t.Fatalf("add %d: %v %v", i, added, err)
		}
		keys = append(keys, k)
	}
	running := keys[len(keys)-1]
	for _, k := range keys[:len(keys)-1] {
		tr.finish(k, outcome{checkpoint: 1})
	}
	for i, k := range keys[:len(keys)-1] {
		_, ok := tr.get(k)
		if want := i >= len(keys)-1-maxFinishedTriggers; ok != want {
			t.Errorf("finished trigger %d kept: %v, want %v", i, ok, want)
		}
	}
	if st, ok := tr.get(running); !ok || st.done {
		t.Error("the running trigger was forgotten")
	}
}

// A trigger is known to its own kind and job only; the same id may name
// a trigger of another job; a repeated key adds nothing; the bound on
// running triggers counts each kind apart.
func TestTriggerKeys(t *testing.T) {
	tr := newTriggers()
	id := newTriggerID()
	cp := triggerKey{checkpointTrigger, "a", id}
	if added, err := tr.add(cp, 1); !added || err != nil {
		t.Fatalf("add: %v %v", added, err)
	}
	if added, err := tr.add(cp, 1); added || err != nil {
		t.Errorf("add again: %v %v, want an existing trigger", added, err)
	}
	if _, err := tr.add(triggerKey{checkpointTrigger, "a", newTriggerID()}, 1); err != errTooManyTriggers {
		t.Errorf("add beyond the limit: %v", err)
	}
	for _, k := range []triggerKey{{savepointTrigger, "a", id}, {checkpointTrigger, "b", id}} {
		if tr.has(k) {
			t.Errorf("%+v is known", k)
		}
	}
	if added, err := tr.add(triggerKey{savepointTrigger, "a", id}, 1); !added || err != nil {
		t.Errorf("a savepoint trigger beside a running checkpoint trigger: %v %v", added, err)
	}
	tr.finish(cp, outcome{checkpoint: 7})
	st, ok := tr.get(cp)
	if !ok || !st.done || st.result.checkpoint != 7 {
		t.Errorf("finished: %+v", st)
	}
	select {
	case <-st.finished:
	default:
		t.Error("finished channel still open")
	}
	tr.finish(cp, outcome{checkpoint: 8}) // a second result is ignored
	if st, _ := tr.get(cp); st.result.checkpoint != 7 {
		t.Errorf("after a second finish: %+v", st)
	}
	if added, err := tr.add(triggerKey{checkpointTrigger, "a", newTriggerID()}, 1); !added || err != nil {
		t.Errorf("add once a trigger finished: %v %v", added, err)
	}
}

func TestParseTriggerID(t *testing.T) {
	if id, err := parseTriggerID("0123456789ABCDEFabcdef0123456789"); err != nil || id != "0123456789abcdefabcdef0123456789" {
		t.Errorf("valid id: %q %v", id, err)
	}
	for _, bad := range []string{"", "abc", "0123456789abcdefabcdef012345678g", "0123456789abcdefabcdef01234567890"} {
		if _, err := parseTriggerID(bad); err == nil || !strings.Contains(err.Error(), "32 hex digits") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func TestCancel(t *testing.T) {
	s, j := fixture(t, Config{})
	patch := func(path string) answer { return call(t, nil, http.MethodPatch, s.URL(), path, "", "") }

	wantError(t, patch(jobPrefix+"?mode=stop"), http.StatusBadRequest, "only cancels", "POST "+jobPrefix+"/stop")
	wantError(t, patch(jobPrefix+"?mode=halt"), http.StatusBadRequest, `Unknown mode "halt"`)
	if j.Cancels() != 0 {
		t.Fatalf("cancelled by a bad request")
	}
	a := patch(jobPrefix + "?mode=cancel")
	if a.status != http.StatusAccepted || strings.TrimSpace(string(a.body)) != "{}" {
		t.Fatalf("cancel: %d %s", a.status, a.body)
	}
	if j.Cancels() != 1 || j.Status().State != monitor.Cancelling {
		t.Errorf("after cancel: %d calls, state %s", j.Cancels(), j.Status().State)
	}
	// Without a mode, PATCH cancels, as Flink's default.
	if a := patch(jobPrefix); a.status != http.StatusAccepted || j.Cancels() != 2 {
		t.Fatalf("PATCH without mode: %d %s, %d cancel calls", a.status, a.body, j.Cancels())
	}
	wantError(t, patch("/jobs/"+finishedID+"?mode=cancel"), http.StatusConflict, "terminal state FINISHED")
	wantError(t, patch("/jobs/nope?mode=cancel"), http.StatusNotFound, "Job nope not found")
}

func TestErrorAnswers(t *testing.T) {
	s, _ := fixture(t, Config{})
	for _, c := range []struct {
		method, path string
		status       int
		msg          string
	}{
		{"GET", "/nope", 404, "Not found: /nope"},
		{"GET", "/jobs/" + resttest.JobID + "/nope", 404, "Not found: /jobs/" + resttest.JobID + "/nope"},
		{"GET", "/jobs/abc", 404, "Job abc not found"},
		{"GET", "/jobs/abc/checkpoints", 404, "Job abc not found"},
		{"GET", jobPrefix + "/vertices/nope", 404, "Vertex nope not found"},
		{"DELETE", jobPrefix, 405, "Method DELETE not allowed"},
		{"POST", "/overview", 405, "allowed: GET"},
		{"GET", jobPrefix + "/savepoints", 405, "allowed: POST"},
		{"GET", jobPrefix + "/stop", 405, "allowed: POST"},
		{"POST", jobPrefix + "/savepoints/0123", 405, "allowed: GET"},
		{"POST", "/jobs/abc/savepoints", 404, "Job abc not found"},
		{"POST", "/jobs/abc/stop", 404, "Job abc not found"},
		{"GET", "/jobs/abc/savepoints/0123", 404, "Job abc not found"},
		{"GET", jobPrefix + "/doctor", 404, "no checkpoint doctor"},
		{"GET", "/metrics", 404, "no Prometheus endpoint"},
		{"GET", "/index.html", 404, "Not found: /index.html"},
	} {
		t.Run(c.method+c.path, func(t *testing.T) {
			wantError(t, do(t, s, c.method, c.path), c.status, c.msg)
		})
	}
	if a := do(t, s, "DELETE", jobPrefix); a.header.Get("Allow") != "GET, PATCH" {
		t.Errorf("Allow %q", a.header.Get("Allow"))
	}
}

func TestMountedHandlers(t *testing.T) {
	dash := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte("dashboard " + r.URL.Path))
	})
	prom := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		w.Write([]byte("weir_up 1\n"))
	})
	doctor := func(j *monitor.Job, last int) any { return map[string]any{"job": j.Name, "last": last} }
	s, _ := fixture(t, Config{Dashboard: dash, Metrics: prom, Doctor: doctor})

	if a := do(t, s, "GET", "/"); a.status != 200 || string(a.body) != "dashboard /" {
		t.Errorf("/: %d %s", a.status, a.body)
	}
	if a := do(t, s, "GET", "/assets/main.js"); a.status != 200 || string(a.body) != "dashboard /assets/main.js" {
		t.Errorf("/assets/main.js: %d %s", a.status, a.body)
	}
	// API paths never reach the dashboard.
	wantError(t, do(t, s, "GET", "/jobs/abc/nope"), 404)
	if a := do(t, s, "POST", "/index.html"); a.status != 404 {
		t.Errorf("POST to the dashboard: %d", a.status)
	}
	if a := do(t, s, "GET", "/metrics"); a.status != 200 || string(a.body) != "weir_up 1\n" ||
		!strings.HasPrefix(a.header.Get("Content-Type"), "text/plain") {
		t.Errorf("/metrics: %d %s", a.status, a.body)
	}
	v := getOK(t, s, jobPrefix+"/doctor", nil)
	if at(t, v, "job") != resttest.JobName || at(t, v, "last") != float64(0) {
		t.Errorf("doctor: %v", v)
	}
	if v := getOK(t, s, jobPrefix+"/doctor?last=3", nil); at(t, v, "last") != float64(3) {
		t.Errorf("doctor?last=3: %v", v)
	}
	wantError(t, do(t, s, "GET", jobPrefix+"/doctor?last=x"), http.StatusBadRequest, "Bad query parameter last")
	// Flink's versioned prefix.
	var ids JobIDsWithStatus
	getOK(t, s, "/v1/jobs", &ids)
	if len(ids.Jobs) != 2 {
		t.Errorf("/v1/jobs: %+v", ids)
	}
}

func TestAddJobReplaces(t *testing.T) {
	s, _ := fixture(t, Config{})
	s.AddJob(resttest.NewFinishedJob(resttest.JobID, "again"))
	var ids JobIDsWithStatus
	getOK(t, s, "/jobs", &ids)
	if len(ids.Jobs) != 2 || ids.Jobs[0].Status != "FINISHED" {
		t.Errorf("after replacing the running job: %+v", ids)
	}
}

// The typed bodies encode the field names the contract test checks: a
// zero value already carries every required key.
func TestTypesEncodeNulls(t *testing.T) {
	b, _ := json.Marshal(CheckpointTriggerStatus{Status: QueueStatus{ID: OperationInProgress}})
	if string(b) != `{"status":{"id":"IN_PROGRESS"},"operation":null}` {
		t.Errorf("%s", b)
	}
}

// A client cannot pile up triggers that wait for their checkpoints (a job
// that restarts takes none): beyond maxRunningTriggers it gets 429.
func TestRunningTriggersBounded(t *testing.T) {
	s, j := fixture(t, Config{})
	post := func() answer { return call(t, nil, http.MethodPost, s.URL(), jobPrefix+"/checkpoints", "", "") }
	for i := range maxRunningTriggers {
		if a := post(); a.status != http.StatusAccepted {
			t.Fatalf("trigger %d: %d %s", i, a.status, a.body)
		}
	}
	wantError(t, post(), http.StatusTooManyRequests, "checkpoint triggers are still running")
	j.Results <- resttest.Result{ID: 1}
	eventually(t, "a trigger slot to free", func() bool { return post().status == http.StatusAccepted })
	// The rest end with the server (Close cancels their context).
}
