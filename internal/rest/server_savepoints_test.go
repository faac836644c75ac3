package rest

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/monitor"
	"github.com/weirstream/weir/internal/rest/resttest"
)

// savepointFixture is fixture whose running job takes its savepoints with
// the fixture's fake control (j.Savepoints).
func savepointFixture(t *testing.T, cfg Config) (*Server, *resttest.Job) {
	t.Helper()
	j := resttest.NewJob()
	cfg.savepoints = func(mj *monitor.Job) savepointer {
		if mj == j.Job {
			return j.Savepoints
		}
		return jobSavepointer(mj)
	}
	return start(t, cfg, j.Job, resttest.NewFinishedJob(finishedID, "done")), j
}

// postJSON POSTs body to path of s.
func postJSON(t *testing.T, s *Server, path, body string) answer {
	t.Helper()
	return call(t, nil, http.MethodPost, s.URL(), path, "", body)
}

// accepted checks a 202 TriggerResponse and returns its request id.
func accepted(t *testing.T, a answer) string {
	t.Helper()
	if a.status != http.StatusAccepted {
		t.Fatalf("trigger: %d %s", a.status, a.body)
	}
	var tr TriggerResponse
	onlyFields(t, "trigger", decode(t, "trigger", a, &tr), "request-id:string")
	return tr.RequestID
}

// savepointStatus GETs a savepoint trigger's status.
func savepointStatus(t *testing.T, s *Server, id string) (SavepointTriggerStatus, any) {
	t.Helper()
	var st SavepointTriggerStatus
	v := getOK(t, s, jobPrefix+"/savepoints/"+id, &st)
	return st, v
}

// savepointDone waits until savepoint trigger id completed.
func savepointDone(t *testing.T, s *Server, id string) (SavepointTriggerStatus, any) {
	t.Helper()
	var st SavepointTriggerStatus
	var v any
	eventually(t, "the savepoint to finish", func() bool {
		st, v = savepointStatus(t, s, id)
		return st.Status.ID == OperationCompleted
	})
	return st, v
}

// nthRequest waits for the fake control's n-th request and returns it.
func nthRequest(t *testing.T, j *resttest.Job, n int) monitor.SavepointRequest {
	t.Helper()
	eventually(t, "the savepoint request", func() bool { return len(j.Savepoints.Requests()) >= n })
	return j.Savepoints.Requests()[n-1]
}

func TestTriggerSavepoint(t *testing.T) {
	s, j := savepointFixture(t, Config{})

	// Success: the location is answered; the request reached the control
	// as sent.
	id := accepted(t, postJSON(t, s, jobPrefix+"/savepoints", `{"target-directory":"/sp","formatType":"native"}`))
	st, v := savepointStatus(t, s, id)
	if st.Status.ID != OperationInProgress || st.Operation != nil {
		t.Errorf("before the result: %s", v)
	}
	onlyFields(t, "in progress", v, "status:object operation:null")
	if got, want := nthRequest(t, j, 1), (monitor.SavepointRequest{Target: "/sp", Format: "native"}); got != want {
		t.Errorf("request %+v, want %+v", got, want)
	}
	const loc = "file:///sp/savepoint-0a1b2c-0123456789ab"
	j.Savepoints.Results <- resttest.SavepointResult{ID: 16, Path: loc}
	st, v = savepointDone(t, s, id)
	onlyFields(t, "completed", v, "status:object operation:object")
	onlyFields(t, "completed", at(t, v, "operation"), "location:string")
	if st.Operation.Location != loc {
		t.Errorf("completed: %+v", st.Operation)
	}

	// Failure: the cause, as the checkpoint trigger reports it.
	id = accepted(t, postJSON(t, s, jobPrefix+"/savepoints", ""))
	if got, want := nthRequest(t, j, 2), (monitor.SavepointRequest{Format: "canonical"}); got != want {
		t.Errorf("request without a body %+v, want %+v", got, want)
	}
	j.Savepoints.Results <- resttest.SavepointResult{Err: errors.New("savepoint declined: task not ready")}
	st, v = savepointDone(t, s, id)
	onlyFields(t, "failed", at(t, v, "operation"), "failure-cause:object")
	onlyFields(t, "failure cause", at(t, v, "operation", "failure-cause"),
		"class:string stack-trace:string serialized-throwable:string")
	if fc := st.Operation.FailureCause; fc == nil || fc.StackTrace != "savepoint declined: task not ready" ||
		fc.Class != "weir.CheckpointException" || st.Operation.Location != "" {
		t.Errorf("failed: %+v", st.Operation)
	}

	// cancel-job is stop-with-savepoint without drain; the format in any
	// case.
	id = accepted(t, postJSON(t, s, jobPrefix+"/savepoints", `{"cancel-job":true,"formatType":"Canonical"}`))
	if got, want := nthRequest(t, j, 3), (monitor.SavepointRequest{Format: "canonical", Stop: true}); got != want {
		t.Errorf("cancel-job request %+v, want %+v", got, want)
	}
	j.Savepoints.Results <- resttest.SavepointResult{ID: 17, Path: loc + "2"}
	if st, _ := savepointDone(t, s, id); st.Operation.Location != loc+"2" {
		t.Errorf("cancel-job: %+v", st.Operation)
	}

	// A savepoint's trigger id is not a checkpoint's, nor another job's.
	wantError(t, do(t, s, http.MethodGet, jobPrefix+"/checkpoints/"+id), http.StatusNotFound, "Checkpoint trigger")
	wantError(t, do(t, s, http.MethodGet, "/jobs/"+finishedID+"/savepoints/"+id), http.StatusNotFound,
		"Savepoint trigger "+id+" of job "+finishedID+" not found")
	wantError(t, do(t, s, http.MethodGet, jobPrefix+"/savepoints/0123"), http.StatusNotFound,
		"Savepoint trigger 0123", "last 100 results")
	if n := len(j.Savepoints.Requests()); n != 3 {
		t.Errorf("%d savepoint requests, want 3", n)
	}
}

func TestStopWithSavepoint(t *testing.T) {
	s, j := savepointFixture(t, Config{})

	id := accepted(t, postJSON(t, s, jobPrefix+"/stop", `{"targetDirectory":"s3://b/sp","drain":true,"formatType":"NATIVE"}`))
	want := monitor.SavepointRequest{Target: "s3://b/sp", Format: "native", Stop: true, Drain: true}
	if got := nthRequest(t, j, 1); got != want {
		t.Errorf("request %+v, want %+v", got, want)
	}
	j.Savepoints.Results <- resttest.SavepointResult{ID: 3, Path: "s3://b/sp/savepoint-0a1b2c-000000000000"}
	if st, _ := savepointDone(t, s, id); st.Operation.Location != "s3://b/sp/savepoint-0a1b2c-000000000000" {
		t.Errorf("stop: %+v", st.Operation)
	}

	// Without a body: stop without drain into the default directory.
	id = accepted(t, postJSON(t, s, jobPrefix+"/stop", ""))
	if got, want := nthRequest(t, j, 2), (monitor.SavepointRequest{Format: "canonical", Stop: true}); got != want {
		t.Errorf("request without a body %+v, want %+v", got, want)
	}
	j.Savepoints.Results <- resttest.SavepointResult{Err: monitor.ErrNotRunning}
	st, _ := savepointDone(t, s, id)
	if fc := st.Operation.FailureCause; fc == nil || fc.Class != "weir.JobNotRunningException" {
		t.Errorf("stop of a job that ended meanwhile: %+v", st.Operation)
	}
}

// A client-given trigger id names the operation: the same id again
// answers the same operation and takes no second savepoint, also once it
// completed and from the other endpoint, as Flink's operation cache.
func TestSavepointTriggerIDIsIdempotent(t *testing.T) {
	s, j := savepointFixture(t, Config{})
	const tid = "00112233445566778899AABBCCDDEEFF"
	const lower = "00112233445566778899aabbccddeeff"
	body := `{"triggerId":"` + tid + `","target-directory":"/a"}`
	if id := accepted(t, postJSON(t, s, jobPrefix+"/savepoints", body)); id != lower {
		t.Errorf("request id %q, want the given one %q", id, lower)
	}
	nthRequest(t, j, 1)
	if id := accepted(t, postJSON(t, s, jobPrefix+"/savepoints", `{"triggerId":"`+lower+`","target-directory":"/b"}`)); id != lower {
		t.Errorf("again: request id %q", id)
	}
	j.Savepoints.Results <- resttest.SavepointResult{ID: 1, Path: "/a/savepoint-1"}
	if st, _ := savepointDone(t, s, tid); st.Operation.Location != "/a/savepoint-1" {
		t.Errorf("completed: %+v", st.Operation)
	}
	for path, body := range map[string]string{"/savepoints": body, "/stop": `{"triggerId":"` + lower + `","drain":true}`} {
		if id := accepted(t, postJSON(t, s, jobPrefix+path, body)); id != lower {
			t.Errorf("POST %s again: request id %q", path, id)
		}
	}
	if st, _ := savepointStatus(t, s, lower); st.Operation == nil || st.Operation.Location != "/a/savepoint-1" {
		t.Errorf("after the repeats: %+v", st)
	}
	if reqs := j.Savepoints.Requests(); len(reqs) != 1 || reqs[0].Target != "/a" {
		t.Errorf("savepoint requests %+v, want the first alone", reqs)
	}
	// Another id is another savepoint.
	id := accepted(t, postJSON(t, s, jobPrefix+"/savepoints", `{"triggerId":"ffeeddccbbaa99887766554433221100"}`))
	nthRequest(t, j, 2)
	if id != "ffeeddccbbaa99887766554433221100" {
		t.Errorf("second id %q", id)
	}
	// Once the job ended (stopped by that savepoint, say), the repeated id
	// still answers its operation; a new one is refused.
	j.SetState(monitor.Finished)
	if id := accepted(t, postJSON(t, s, jobPrefix+"/stop", `{"triggerId":"`+lower+`"}`)); id != lower {
		t.Errorf("repeat after the end: request id %q", id)
	}
	wantError(t, postJSON(t, s, jobPrefix+"/stop", `{"triggerId":"99999999999999999999999999999999"}`),
		http.StatusConflict, "terminal state FINISHED")
}

func TestSavepointBadRequests(t *testing.T) {
	s, j := savepointFixture(t, Config{})
	for _, c := range []struct {
		path, body string
		fragments  []string
	}{
		{"/savepoints", `{"formatType":"delta"}`, []string{`Unknown formatType "delta"`, "valid: CANONICAL (the default), NATIVE"}},
		{"/stop", `{"formatType":"full"}`, []string{`Unknown formatType "full"`, "CANONICAL", "NATIVE"}},
		{"/savepoints", `{"triggerId":"abc"}`, []string{`triggerId "abc"`, "32 hex digits"}},
		{"/stop", `{"triggerId":"zz112233445566778899aabbccddeeff"}`, []string{"32 hex digits"}},
		// Flink spells the directory differently in the two bodies; the
		// wrong spelling must not silently take the default directory.
		{"/stop", `{"target-directory":"/sp"}`, []string{"not a stop-with-savepoint request", `unknown field "target-directory"`, `"targetDirectory"`}},
		{"/savepoints", `{"targetDirectory":"/sp"}`, []string{"not a savepoint trigger request", `unknown field "targetDirectory"`, `"target-directory"`}},
		{"/savepoints", `{"cancel-job":"yes"}`, []string{"not a savepoint trigger request"}},
		{"/stop", `{"drain":`, []string{"not a stop-with-savepoint request"}},
	} {
		wantError(t, postJSON(t, s, jobPrefix+c.path, c.body), http.StatusBadRequest, c.fragments...)
	}
	wantError(t, do(t, s, http.MethodGet, jobPrefix+"/savepoints/0123?wait=x"), http.StatusBadRequest,
		`wait="x"`, "0 to 60000")
	wantError(t, do(t, s, http.MethodGet, jobPrefix+"/savepoints/0123?wait=60001"), http.StatusBadRequest, "0 to 60000")
	if n := len(j.Savepoints.Requests()); n != 0 {
		t.Errorf("%d savepoints taken for bad requests", n)
	}
}

// A job that ended, or that cannot take savepoints, answers 409 at once.
func TestSavepointConflicts(t *testing.T) {
	s, _ := savepointFixture(t, Config{})
	for _, path := range []string{"/savepoints", "/stop"} {
		wantError(t, postJSON(t, s, "/jobs/"+finishedID+path, ""), http.StatusConflict,
			"Job "+finishedID+" has already reached the terminal state FINISHED", "no more savepoints")
	}

	// A running job without a savepoint control, with checkpointing on
	// and off.
	bare := func(id string, checkpointing bool) *monitor.Job {
		m := monitor.NewJob(id, "bare", resttest.Vertices(), nil, 0)
		m.Checkpoint.Enabled = checkpointing
		m.SetControls(monitor.Controls{Cancel: func() {}})
		m.SetState(monitor.Running)
		return m
	}
	const on, off = "22222222222222222222222222222222", "33333333333333333333333333333333"
	s = start(t, Config{savepoints: func(*monitor.Job) savepointer { return nil }}, bare(on, true), bare(off, false))
	for _, path := range []string{"/savepoints", "/stop"} {
		wantError(t, postJSON(t, s, "/jobs/"+on+path, ""), http.StatusConflict,
			"Job "+on+" cannot take savepoints", "no savepoint control")
		wantError(t, postJSON(t, s, "/jobs/"+off+path, ""), http.StatusConflict,
			"Job "+off+" cannot take savepoints", "checkpointing is off", "execution.checkpointing.interval")
	}

	// Checkpointing off is refused at once even with a savepoint control
	// (the runtime gives every job one).
	fake := &resttest.Savepoints{Results: make(chan resttest.SavepointResult)}
	s = start(t, Config{savepoints: func(*monitor.Job) savepointer { return fake }}, bare(off, false))
	wantError(t, postJSON(t, s, "/jobs/"+off+"/stop", ""), http.StatusConflict, "checkpointing is off")
	if n := len(fake.Requests()); n != 0 {
		t.Errorf("%d savepoints asked of a job without checkpointing", n)
	}
}

// Savepoint triggers waiting for their result are bounded as checkpoint
// triggers are, each kind on its own.
func TestRunningSavepointsBounded(t *testing.T) {
	s, j := savepointFixture(t, Config{})
	for i := range maxRunningTriggers {
		path := []string{"/savepoints", "/stop"}[i%2]
		accepted(t, postJSON(t, s, jobPrefix+path, ""))
	}
	wantError(t, postJSON(t, s, jobPrefix+"/savepoints", ""), http.StatusTooManyRequests,
		"16 savepoint triggers are still running", "GET /jobs/"+resttest.JobID+"/savepoints/<triggerid>")
	wantError(t, postJSON(t, s, jobPrefix+"/stop", ""), http.StatusTooManyRequests, "savepoint triggers")
	accepted(t, postJSON(t, s, jobPrefix+"/checkpoints", "")) // another kind
	nthRequest(t, j, maxRunningTriggers)
	j.Savepoints.Results <- resttest.SavepointResult{Path: "/sp/1"}
	eventually(t, "a trigger slot to free", func() bool {
		return postJSON(t, s, jobPrefix+"/savepoints", "").status == http.StatusAccepted
	})
	// The rest end with the server (Close cancels their context).
}

// wait=<ms> holds the status answer until the savepoint finished.
func TestSavepointStatusWaits(t *testing.T) {
	s, j := savepointFixture(t, Config{})
	id := accepted(t, postJSON(t, s, jobPrefix+"/savepoints", ""))
	nthRequest(t, j, 1)

	start := time.Now()
	var st SavepointTriggerStatus
	getOK(t, s, jobPrefix+"/savepoints/"+id+"?wait=50", &st)
	if st.Status.ID != OperationInProgress || time.Since(start) < 50*time.Millisecond {
		t.Errorf("wait=50 on a running savepoint: %+v after %v", st, time.Since(start))
	}

	go func() {
		time.Sleep(100 * time.Millisecond)
		j.Savepoints.Results <- resttest.SavepointResult{Path: "/sp/waited"}
	}()
	start = time.Now()
	getOK(t, s, jobPrefix+"/savepoints/"+strings.ToUpper(id)+"?wait=30000", &st)
	if st.Status.ID != OperationCompleted || st.Operation.Location != "/sp/waited" {
		t.Errorf("wait=30000: %+v", st)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the answer came %v after the request, not when the savepoint completed", d)
	}
	// A finished savepoint answers at once.
	start = time.Now()
	getOK(t, s, jobPrefix+"/savepoints/"+id+"?wait=30000", &st)
	if d := time.Since(start); st.Status.ID != OperationCompleted || d > 5*time.Second {
		t.Errorf("finished, wait=30000: %+v after %v", st, d)
	}
}

// Close cancels the savepoints still running and waits for them.
func TestCloseCancelsSavepoints(t *testing.T) {
	s, j := savepointFixture(t, Config{})
	id := accepted(t, postJSON(t, s, jobPrefix+"/stop", ""))
	nthRequest(t, j, 1)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	tr, ok := s.triggers.get(triggerKey{savepointTrigger, resttest.JobID, id})
	if !ok || !tr.done || !errors.Is(tr.result.err, context.Canceled) ||
		failureClass(tr.result.err) != "weir.CheckpointCanceledException" {
		t.Errorf("savepoint after Close: %+v", tr)
	}
}

// Without the test knob the server asks monitor.Job itself: the fixture's
// fake control is reached through monitor.Controls.
func TestMonitorJobSavepoints(t *testing.T) {
	s, j := fixture(t, Config{})
	id := accepted(t, postJSON(t, s, jobPrefix+"/stop", `{"drain":true}`))
	j.Savepoints.Results <- resttest.SavepointResult{Path: "/sp/through-monitor"}
	if st, _ := savepointDone(t, s, id); st.Operation.Location != "/sp/through-monitor" {
		t.Errorf("through monitor.Job: %+v", st.Operation)
	}
	if reqs := j.Savepoints.Requests(); !slices.Equal(reqs, []monitor.SavepointRequest{{Format: "canonical", Stop: true, Drain: true}}) {
		t.Errorf("requests %+v", reqs)
	}
	wantError(t, postJSON(t, s, "/jobs/"+finishedID+"/savepoints", ""), http.StatusConflict, "terminal state")
}
