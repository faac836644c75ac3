package doctor

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/checkpoint/metadata"
	"github.com/weirstream/weir/internal/checkpoint/stats"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/monitor"
	"github.com/weirstream/weir/internal/task"
)

type deployment []task.TaskMetrics

func (d deployment) Metrics() []task.TaskMetrics { return d }

func TestDoctorFromJob(t *testing.T) {
	vs := []monitor.Vertex{
		{Index: 0, Name: "Source: Events", Parallelism: 1},
		{Index: 1, Name: "Sink", Parallelism: 2, Inputs: []monitor.Input{{Vertex: 0, ShipStrategy: "REBALANCE"}}},
	}
	j := monitor.NewJob("0123", "orders", vs, func() time.Time { return t0 }, 0)
	j.Checkpoint = monitor.CheckpointConfig{Enabled: true, Interval: time.Second, Timeout: time.Minute,
		TolerableFailures: 2, StateBackend: "pebble", Incremental: true}
	j.Config["taskmanager.network.memory.buffer-debloat.enabled"] = "true"
	j.Deployed(deployment{{Vertex: 1, Subtask: 1, BusyTimeMsPerSecond: 900}}, false)
	j.Failed(errors.New("job orders: " + tolerableFailureMessage + " The latest checkpoint failed due to ..."))
	tr := j.Checkpoints
	ack := func(id int64, v, i int, async time.Duration, size int64) {
		tr.Acked(id, stats.Subtask{Vertex: v, Index: i, AckTime: t0.Add(time.Duration(id) * time.Second).Add(async),
			EndToEnd: async, Async: async, CheckpointedSize: size})
	}
	trig := func(id int64) time.Time { return t0.Add(time.Duration(id) * time.Second) }
	tr.Triggered(1, trig(1), stats.KindCheckpoint, 3)
	ack(1, 0, 0, 0, 8)
	ack(1, 1, 0, ms(300), 100)
	ack(1, 1, 1, ms(20), 100)
	tr.Completed(1, trig(1).Add(ms(310)), 208, 208, 0, "chk-1")
	tr.Triggered(2, trig(2), stats.KindCheckpoint, 3)
	ack(2, 0, 0, 0, 8)
	ack(2, 1, 0, ms(20), 100)
	tr.Failed(2, trig(2).Add(time.Minute), "Checkpoint 2 of job orders expired before completing. coordinator: checkpoint expired")
	tr.Triggered(3, trig(3), stats.KindCheckpoint, 3)
	tr.Failed(3, trig(3).Add(ms(5)), "Decline checkpoint 3 by task 1/1 of job orders at 2026-01-01T00:00:03.005Z. "+
		"asynchronous phase of checkpoint 3 failed in Sink (2/2): disk full")
	tr.Triggered(4, trig(4), stats.KindSavepoint, 3)
	tr.Failed(4, trig(4), "Checkpoint 4 of job orders subsumed by completed checkpoint 5.")
	tr.Triggered(5, trig(5), stats.KindCheckpoint, 3)
	tr.Failed(5, trig(5), "Checkpoint 5 of job orders aborted: CheckpointCoordinator shutdown. coordinator: shut down")
	tr.Triggered(6, trig(6), stats.KindCheckpoint, 3) // in progress

	in := FromJob(j, 0)
	if in.Job != "orders" || in.Source != SourceLive || !in.FailuresKnown || in.JobFailovers != 1 || len(in.Tasks) != 1 {
		t.Fatalf("input %+v", in)
	}
	wantCfg := Config{Known: true, Interval: time.Second, Timeout: time.Minute, TolerableFailures: 2, Backend: "pebble",
		Incremental: true, BufferDebloat: true}
	if in.Config != wantCfg {
		t.Errorf("config %+v, want %+v", in.Config, wantCfg)
	}
	if len(in.Vertices) != 2 || !in.Vertices[1].InputsKnown || !slices.Equal(in.Vertices[1].Inputs, []Edge{{Vertex: 0}}) {
		t.Errorf("vertices %+v", in.Vertices)
	}
	if len(in.Checkpoints) != 1 {
		t.Fatalf("checkpoints %+v", in.Checkpoints)
	}
	c := in.Checkpoints[0]
	if c.ID != 1 || c.EndToEnd != ms(310) || len(c.Subtasks) != 3 || c.Subtasks[1].Async != ms(300) || c.Subtasks[1].FullSize != 100 {
		t.Errorf("checkpoint %+v", c)
	}
	if len(in.Failures) != 2 {
		t.Fatalf("failures %+v", in.Failures)
	}
	exp, dec := in.Failures[0], in.Failures[1]
	if exp.ID != 2 || exp.Reason != ReasonExpired || !exp.PendingKnown || !slices.Equal(exp.Pending, []SubtaskRef{{1, 1}}) {
		t.Errorf("expired %+v", exp)
	}
	if dec.ID != 3 || dec.Reason != ReasonAsyncFailure || dec.Task == nil || *dec.Task != (SubtaskRef{1, 1}) ||
		dec.Cause != "asynchronous phase of checkpoint 3 failed in Sink (2/2): disk full" ||
		!strings.HasSuffix(dec.Message, "at 2026-01-01T00:00:03.005Z.") {
		t.Errorf("declined %+v", dec)
	}
	if got := FromJob(j, 1); len(got.Checkpoints)+len(got.Failures) != 1 || got.Failures[0].ID != 3 {
		t.Errorf("window of 1: %+v %+v", got.Checkpoints, got.Failures)
	}

	r, ok := Handle(j, 10).(Report)
	if !ok || r.Findings[0].Cause != CauseExpired || r.Findings[0].SubtaskName != "Sink (2/2)" {
		t.Fatalf("Handle: %#v", Handle(j, 10))
	}
}

func TestDoctorClassifyFailure(t *testing.T) {
	for _, tc := range []struct {
		msg, reason, cause string
		task               *SubtaskRef
	}{
		{"Checkpoint 7 of job my job expired before completing. coordinator: checkpoint expired", ReasonExpired, "", nil},
		{"Decline checkpoint 7 by task 2/3 of job my job at 2026-01-01T00:00:00Z. Received checkpoint barrier for " +
			"checkpoint 8 before completing current checkpoint 7. Skipping current checkpoint.", ReasonSubsumed,
			"Received checkpoint barrier for checkpoint 8 before completing current checkpoint 7. Skipping current checkpoint.", &SubtaskRef{2, 3}},
		{"Decline checkpoint 7 by task 0/0 of job j at 2026-01-01T00:00:00.123456789Z. operator \"x\": at 12:00. boom",
			ReasonDeclined, "operator \"x\": at 12:00. boom", &SubtaskRef{0, 0}},
		{"Decline checkpoint 7 by task 0/0 of job j at 2026-01-01T00:00:00Z.", ReasonDeclined, "", &SubtaskRef{0, 0}},
		{"Could not complete the pending checkpoint 7. write _metadata: disk full", ReasonIOError, "", nil},
		{"Checkpoint 7 of job j subsumed by completed checkpoint 8.", ReasonSubsumed, "", nil},
		{"Checkpoint 7 of job j aborted: Checkpoint Coordinator is suspending. coordinator: stopped", "job-failing", "", nil},
		{"something else", "unknown", "", nil},
	} {
		f := classifyFailure(tc.msg)
		if f.Reason != tc.reason || f.Cause != tc.cause || !sameRef(f.Task, tc.task) {
			t.Errorf("classifyFailure(%q) = %+v, want reason %s cause %q task %v", tc.msg, f, tc.reason, tc.cause, tc.task)
		}
	}
}

// writeLog writes what a weir job logs about its checkpoints, with
// handler, to a file.
func writeLog(t *testing.T, json bool) string {
	t.Helper()
	var buf bytes.Buffer
	var h slog.Handler = slog.NewTextHandler(&buf, nil)
	if json {
		h = slog.NewJSONHandler(&buf, nil)
	}
	log := slog.New(h)
	log.Info("running job", "job", "orders v2", "parallelism", 2, "config", map[string]string{
		"execution.checkpointing.interval": "200 ms", "execution.checkpointing.timeout": "1 s",
		"execution.checkpointing.tolerable-failed-checkpoints": "3", "execution.checkpointing.dir": "s3://bucket/a b",
		"state.backend.type": "pebble", "execution.checkpointing.incremental": "true"})
	jl := log.With("job", "orders v2")
	jl.Info("job started", "tasks", 3)
	jl.Warn("Checkpoint 4 of job orders v2 expired before completing.", "checkpoint", int64(4), "reason", "expired",
		"cause", errors.New("coordinator: checkpoint expired"))
	jl.Info("Received late message for now expired checkpoint attempt 4 from task 1/1 of job orders v2.")
	jl.Warn("Checkpoint 5 of job orders v2 expired before completing.", "checkpoint", int64(5), "reason", "expired",
		"pending", "1/0 1/1")
	jl.Warn("Decline checkpoint 6 by task 1/0 of job orders v2 at 2026-01-01T00:00:06Z.", "checkpoint", int64(6),
		"reason", "async-failure", "cause", errors.New("asynchronous phase of checkpoint 6 failed in Sink (1/2): \"quoted\"\nnewline"))
	jl.Info("Checkpoint 7 of job orders v2 aborted: CheckpointCoordinator shutdown.", "checkpoint", int64(7), "reason", "job-canceled")
	jl.Error(tolerableFailureMessage+" The latest checkpoint failed due to x.", "checkpoint", int64(6), "reason", "async-failure")
	// A decline of the job being canceled, and the failover it triggers,
	// do not count.
	jl.Warn("Decline checkpoint 8 by task 1/0 of job orders v2 at 2026-01-01T00:00:08Z.", "checkpoint", int64(8),
		"reason", "async-failure", "cause", errors.New("asynchronous phase of checkpoint 8 failed in Sink (1/2): write: context canceled"))
	jl.Error(tolerableFailureMessage+" The latest checkpoint failed due to x.", "checkpoint", int64(8), "reason", "async-failure")
	other := log.With("job", "other")
	other.Warn("Checkpoint 9 of job other expired before completing.", "checkpoint", int64(9), "reason", "expired")
	p := filepath.Join(t.TempDir(), "job.log")
	if err := os.WriteFile(p, append([]byte("not a log line\n"), buf.Bytes()...), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDoctorReadLog(t *testing.T) {
	for _, json := range []bool{false, true} {
		var in Input
		if err := readLog(writeLog(t, json), "orders v2", "orders_v2", &in); err != nil {
			t.Fatal(err)
		}
		want := Config{Known: true, Interval: 200 * time.Millisecond, Timeout: time.Second, TolerableFailures: 3,
			Backend: "pebble", Incremental: true}
		if in.Config != want {
			t.Errorf("json %v: config %+v, want %+v", json, in.Config, want)
		}
		if in.JobFailovers != 1 || len(in.Failures) != 4 || !stopping(in.Failures[3]) {
			t.Fatalf("json %v: failovers %d, failures %+v", json, in.JobFailovers, in.Failures)
		}
		e4, e5, d6 := in.Failures[0], in.Failures[1], in.Failures[2]
		if e4.ID != 4 || e4.Reason != ReasonExpired || e4.PendingKnown || !slices.Equal(e4.Pending, []SubtaskRef{{1, 1}}) ||
			e4.Time.IsZero() || e4.Cause != "coordinator: checkpoint expired" {
			t.Errorf("json %v: %+v", json, e4)
		}
		if e5.ID != 5 || !e5.PendingKnown || !slices.Equal(e5.Pending, []SubtaskRef{{1, 0}, {1, 1}}) {
			t.Errorf("json %v: %+v", json, e5)
		}
		if d6.ID != 6 || d6.Reason != ReasonAsyncFailure || d6.Task == nil || *d6.Task != (SubtaskRef{1, 0}) ||
			d6.Cause != "asynchronous phase of checkpoint 6 failed in Sink (1/2): \"quoted\"\nnewline" {
			t.Errorf("json %v: %+v", json, d6)
		}
	}
	var in Input
	if err := readLog(filepath.Join(t.TempDir(), "nosuch"), "j", "j", &in); err == nil {
		t.Error("a missing log is no error")
	}
	p := filepath.Join(t.TempDir(), "x")
	os.WriteFile(p, []byte("hello\nworld\n"), 0o644)
	if err := readLog(p, "j", "j", &in); err == nil || !strings.Contains(err.Error(), "not a weir log") {
		t.Errorf("a file that is no log: %v", err)
	}
}

func TestDoctorParseGoMap(t *testing.T) {
	got := parseGoMap("map[execution.checkpointing.dir:s3://b/x y execution.checkpointing.interval:1 s]")
	if len(got) != 2 || got["execution.checkpointing.dir"] != "s3://b/x y" || got["execution.checkpointing.interval"] != "1 s" {
		t.Errorf("parseGoMap = %v", got)
	}
	if parseGoMap("nope") != nil {
		t.Error("not a map")
	}
}

// writeMeta writes checkpoint c of job under dir, with TaskStats.
func writeMeta(t *testing.T, dir string, c metadata.Checkpoint) {
	t.Helper()
	ctx := context.Background()
	s, err := storage.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	payload, err := metadata.Encode(&c)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.WriteMetadata(ctx, c.Job, c.ID, payload); err != nil {
		t.Fatal(err)
	}
}

func meta(job string, id int64, keyed int64) metadata.Checkpoint {
	const base = 1767225600000
	trig := base + id*1000
	return metadata.Checkpoint{Job: job, ID: id, TriggerTime: trig, CompletionTime: trig + 600, Bytes: keyed + 8, FullBytes: keyed + 8,
		Operators: []metadata.Operator{
			{UID: "src", Name: "Source: Events", Parallelism: 1, MaxParallelism: 128,
				Subtasks: []metadata.Subtask{{KeyGroupEnd: 127, Lists: []metadata.List{{Name: "splits", Elements: [][]byte{make([]byte, 8)}}}}}},
			{UID: "count", Name: "Count", Parallelism: 1, MaxParallelism: 128,
				Subtasks: []metadata.Subtask{{KeyGroupEnd: 127, Keyed: &storage.FileHandle{Path: "chk-1/op-count-0.kst", Size: keyed}}}},
		},
		Tasks: []metadata.TaskStats{
			{Vertex: 0, Name: "Source: Events", Bytes: 8},
			{Vertex: 1, Name: "Count -> Sink", EndToEnd: 600, StartDelay: 1, Async: 599, Bytes: keyed},
		}}
}

func TestDoctorFromCheckpoints(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	for id := int64(1); id <= 5; id++ {
		writeMeta(t, dir, meta("orders", id, 1000*id))
	}
	// An incomplete checkpoint after the last complete one.
	if err := os.MkdirAll(filepath.Join(dir, "orders", "chk-6"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "orders", "chk-6", "part"), []byte("x"), 0o644)

	for _, tc := range []struct{ dir, job string }{{dir, "orders"}, {dir, ""}, {filepath.Join(dir, "orders"), ""}} {
		in, err := FromCheckpoints(ctx, tc.dir, tc.job, 4, "")
		if err != nil {
			t.Fatalf("%+v: %v", tc, err)
		}
		if in.Job != "orders" || in.Source != SourceOffline || in.FailuresKnown || in.Config.Known ||
			in.Location != filepath.Join(dir, "orders") {
			t.Errorf("%+v: input %+v", tc, in)
		}
		if len(in.Checkpoints) != 4 || in.Checkpoints[0].ID != 2 {
			t.Fatalf("%+v: checkpoints %+v", tc, in.Checkpoints)
		}
		c := in.Checkpoints[3]
		if c.EndToEnd != ms(600) || c.FullSize != 5008 || len(c.Subtasks) != 2 || c.Subtasks[1].Async != ms(599) ||
			c.Subtasks[1].FullSize != 5000 || c.Subtasks[0].FullSize != 8 {
			t.Errorf("checkpoint %+v", c)
		}
		wantV := []Vertex{{Index: 0, Name: "Source: Events", Parallelism: 1, Inputs: []Edge{}},
			{Index: 1, Name: "Count -> Sink", Parallelism: 1, Inputs: []Edge{{Vertex: 0}}}}
		if len(in.Vertices) != 2 || in.Vertices[1].Name != wantV[1].Name || in.Vertices[1].Parallelism != 1 ||
			!slices.Equal(in.Vertices[1].Inputs, wantV[1].Inputs) || in.Vertices[1].InputsKnown {
			t.Errorf("vertices %+v", in.Vertices)
		}
		if !strings.Contains(strings.Join(in.Notes, " "), "Checkpoint 6 has no _metadata") {
			t.Errorf("notes %v", in.Notes)
		}
		r := Diagnose(in, Options{})
		// Slow (600 ms of a 1 s interval inferred), async at Count, and
		// the state grows 2000 -> 5000 bytes: too little to matter.
		if len(r.Findings) != 1 || r.Findings[0].Cause != CauseAsyncPhase || r.Findings[0].SubtaskName != "Count -> Sink (1/1)" ||
			r.Interval != time.Second || !r.IntervalInferred {
			t.Errorf("report:\n%s", r.Text())
		}
	}

	// Errors.
	empty := t.TempDir()
	if _, err := FromCheckpoints(ctx, empty, "", 10, ""); !errors.Is(err, ErrNoCheckpoints) {
		t.Errorf("empty directory: %v", err)
	}
	if _, err := FromCheckpoints(ctx, dir, "nosuch", 10, ""); !errors.Is(err, ErrNoCheckpoints) {
		t.Errorf("unknown job: %v", err)
	}
	if _, err := FromCheckpoints(ctx, filepath.Join(empty, "missing"), "", 10, ""); err == nil {
		t.Errorf("missing directory: no error")
	}
	writeMeta(t, dir, meta("payments", 1, 10))
	if _, err := FromCheckpoints(ctx, dir, "", 10, ""); !errors.Is(err, ErrAmbiguous) || !strings.Contains(err.Error(), "orders, payments") {
		t.Errorf("two jobs: %v", err)
	}
	bad := filepath.Join(dir, "broken", "chk-3")
	os.MkdirAll(bad, 0o755)
	os.WriteFile(filepath.Join(bad, storage.MetadataName), []byte("garbage"), 0o644)
	if _, err := FromCheckpoints(ctx, dir, "broken", 10, ""); !errors.Is(err, ErrUnreadable) {
		t.Errorf("corrupt _metadata: %v", err)
	}
	if _, err := FromCheckpoints(ctx, dir, "orders", 10, filepath.Join(empty, "nosuch.log")); err == nil {
		t.Errorf("missing log: no error")
	}

	// With the log: the failures, the configuration; a job with failures
	// only in its log is diagnosed too.
	log := writeLog(t, false)
	writeMeta(t, dir, meta("orders v2", 3, 10))
	in, err := FromCheckpoints(ctx, dir, "orders v2", 10, log)
	if err != nil {
		t.Fatal(err)
	}
	if in.Job != "orders v2" || !in.FailuresKnown || !in.Config.Known || len(in.Failures) != 4 || len(in.Checkpoints) != 1 {
		t.Fatalf("with log: %+v", in)
	}
	if _, err := FromCheckpoints(ctx, empty, "orders v2", 10, log); err != nil {
		t.Errorf("failures only in the log: %v", err)
	}
}

// Offline, the job graph recorded in _metadata decides who feeds whom: in
// a join of two sources, a late second source is blamed, not the join's
// alignment (which a guessed chain A -> B -> Join would misread).
func TestDoctorOfflineUsesRecordedGraph(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	for id := int64(1); id <= 4; id++ {
		trig := int64(1767225600000) + id*1000
		writeMeta(t, dir, metadata.Checkpoint{Job: "join", ID: id, TriggerTime: trig, CompletionTime: trig + 720, Bytes: 30, FullBytes: 30,
			Operators: []metadata.Operator{{UID: "j", Name: "Join", Parallelism: 1, MaxParallelism: 128,
				Subtasks: []metadata.Subtask{{KeyGroupEnd: 127, Lists: []metadata.List{{Name: "x", Elements: [][]byte{make([]byte, 30)}}}}}}},
			Graph: []metadata.GraphVertex{
				{Vertex: 0, Name: "Source: A", Parallelism: 1, UIDs: []string{"a"}},
				{Vertex: 1, Name: "Source: B", Parallelism: 1, UIDs: []string{"b"}},
				{Vertex: 2, Name: "Join", Parallelism: 1, UIDs: []string{"j"}, Inputs: []metadata.GraphInput{{Vertex: 0}, {Vertex: 1}}},
			},
			Tasks: []metadata.TaskStats{
				{Vertex: 0, Name: "Source: A", EndToEnd: 5},
				{Vertex: 1, Name: "Source: B", EndToEnd: 705, StartDelay: 700},
				{Vertex: 2, Name: "Join", EndToEnd: 720, StartDelay: 5, Alignment: 705, Sync: 5, Bytes: 30},
			}})
	}
	in, err := FromCheckpoints(ctx, dir, "join", 4, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(in.Vertices) != 3 || !in.Vertices[2].InputsKnown || len(in.Vertices[2].Inputs) != 2 || len(in.Vertices[1].Inputs) != 0 {
		t.Fatalf("vertices %+v", in.Vertices)
	}
	r := Diagnose(in, Options{})
	if len(r.Findings) == 0 || r.Findings[0].Cause != CauseStartDelay || r.Findings[0].VertexIndex != 1 {
		t.Fatalf("want the late Source: B blamed:\n%s", r.Text())
	}
}
