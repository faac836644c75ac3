package rest

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/monitor"
	"github.com/weirstream/weir/internal/rest/resttest"
)

func TestClient(t *testing.T) {
	s, j := fixture(t, Config{AuthToken: "tok"})
	ctx := t.Context()
	c := NewClient(s.URL()+"/", "tok", nil)
	if c.URL() != s.URL() {
		t.Errorf("URL %s", c.URL())
	}

	jobs, err := c.Jobs(ctx)
	if err != nil || len(jobs) != 2 || jobs[0].JID != resttest.JobID {
		t.Fatalf("Jobs: %+v %v", jobs, err)
	}
	d, err := c.Job(ctx, resttest.JobID)
	if err != nil || len(d.Vertices) != 3 {
		t.Errorf("Job: %+v %v", d, err)
	}
	if st, err := c.JobStatus(ctx, resttest.JobID); err != nil || st != "RUNNING" {
		t.Errorf("JobStatus: %q %v", st, err)
	}
	cs, err := c.Checkpoints(ctx, resttest.JobID)
	if err != nil || cs.Counts.Total != 5 {
		t.Errorf("Checkpoints: %+v %v", cs.Counts, err)
	}
	if cd, err := c.CheckpointDetails(ctx, resttest.JobID, 12); err != nil || cd.Status != "FAILED" {
		t.Errorf("CheckpointDetails: %+v %v", cd, err)
	}
	if b, err := c.Backpressure(ctx, resttest.JobID, resttest.WindowID); err != nil || b.Level != "high" {
		t.Errorf("Backpressure: %+v %v", b, err)
	}
	if ms, err := c.JobMetrics(ctx, resttest.JobID, "numRestarts"); err != nil || len(ms) != 1 || ms[0].Value != "1" {
		t.Errorf("JobMetrics: %+v %v", ms, err)
	}
	am, err := c.SubtaskMetrics(ctx, resttest.JobID, resttest.WindowID, []string{"numRecordsIn"}, AggSum)
	if err != nil || len(am) != 1 || *am[0].Sum != 3000 || am[0].Max != nil {
		t.Errorf("SubtaskMetrics: %+v %v", am, err)
	}

	// Trigger and await: one checkpoint completes, the next fails.
	go func() {
		j.Results <- resttest.Result{ID: 21}
		j.Results <- resttest.Result{Err: errors.New("declined")}
	}()
	id, err := c.TriggerCheckpoint(ctx, resttest.JobID)
	if err != nil {
		t.Fatal(err)
	}
	if cp, err := c.AwaitCheckpoint(ctx, resttest.JobID, id, time.Millisecond); err != nil || cp != 21 {
		t.Errorf("AwaitCheckpoint: %d %v", cp, err)
	}
	id, err = c.TriggerCheckpoint(ctx, resttest.JobID)
	if err != nil {
		t.Fatal(err)
	}
	var failed *CheckpointFailedError
	if _, err := c.AwaitCheckpoint(ctx, resttest.JobID, id, time.Millisecond); !errors.As(err, &failed) ||
		failed.Message != "declined" {
		t.Errorf("AwaitCheckpoint of a failed checkpoint: %v", err)
	}

	if err := c.CancelJob(ctx, resttest.JobID); err != nil || j.Cancels() != 1 {
		t.Errorf("CancelJob: %v, %d calls", err, j.Cancels())
	}
	err = c.CancelJob(ctx, finishedID)
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusConflict || StatusOf(err) != http.StatusConflict ||
		!strings.Contains(ae.Message(), "terminal state FINISHED") {
		t.Errorf("CancelJob of a finished job: %v", err)
	}
	_, err = c.Job(ctx, "nope")
	if StatusOf(err) != http.StatusNotFound || err.Error() != "GET /jobs/nope: 404 Not Found: Job nope not found" {
		t.Errorf("Job(nope): %v", err)
	}
	_, err = NewClient(s.URL(), "", nil).Jobs(ctx)
	if StatusOf(err) != http.StatusUnauthorized {
		t.Errorf("without the token: %v", err)
	}
}

func TestClientErrors(t *testing.T) {
	// A server that does not speak the API.
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "bad gateway from a proxy", http.StatusBadGateway)
	}))
	defer hs.Close()
	_, err := NewClient(hs.URL, "", hs.Client()).Overview(t.Context())
	if StatusOf(err) != http.StatusBadGateway || !strings.Contains(err.Error(), "bad gateway from a proxy") {
		t.Errorf("non-JSON error: %v", err)
	}

	// A server that does not answer: the error is not an APIError.
	addr := hs.Listener.Addr().String()
	hs.Close()
	_, err = NewClient("http://"+addr, "", nil).Overview(t.Context())
	if err == nil || StatusOf(err) != 0 {
		t.Errorf("closed server: %v", err)
	}

	// AwaitCheckpoint ends with its context.
	s, _ := fixture(t, Config{})
	c := NewClient(s.URL(), "", nil)
	id, err := c.TriggerCheckpoint(t.Context(), resttest.JobID)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := c.AwaitCheckpoint(ctx, resttest.JobID, id, time.Millisecond); !errors.Is(err, context.Canceled) {
		t.Errorf("AwaitCheckpoint with a cancelled context: %v", err)
	}
}

func TestClientSavepoints(t *testing.T) {
	s, j := savepointFixture(t, Config{AuthToken: "tok"})
	ctx := t.Context()
	c := NewClient(s.URL(), "tok", nil)

	// Trigger and await: one savepoint completes, the stop fails.
	id, err := c.TriggerSavepoint(ctx, resttest.JobID, SavepointTriggerRequest{TargetDirectory: "/sp",
		FormatType: SavepointFormatNative})
	if err != nil {
		t.Fatal(err)
	}
	if st, err := c.SavepointTriggerStatus(ctx, resttest.JobID, id, 0); err != nil || st.Status.ID != OperationInProgress {
		t.Errorf("SavepointTriggerStatus: %+v %v", st, err)
	}
	go func() { j.Savepoints.Results <- resttest.SavepointResult{ID: 5, Path: "/sp/savepoint-0a1b2c-1"} }()
	if loc, err := c.AwaitSavepoint(ctx, resttest.JobID, id, time.Millisecond); err != nil || loc != "/sp/savepoint-0a1b2c-1" {
		t.Errorf("AwaitSavepoint: %q %v", loc, err)
	}
	id, err = c.StopWithSavepoint(ctx, resttest.JobID, StopWithSavepointRequest{Drain: true,
		TriggerID: "0123456789abcdef0123456789abcdef"})
	if err != nil || id != "0123456789abcdef0123456789abcdef" {
		t.Fatalf("StopWithSavepoint: %q %v", id, err)
	}
	go func() { j.Savepoints.Results <- resttest.SavepointResult{Err: errors.New("sink refused to commit")} }()
	var failed *SavepointFailedError
	if _, err := c.AwaitSavepoint(ctx, resttest.JobID, id, time.Millisecond); !errors.As(err, &failed) ||
		failed.Message != "sink refused to commit" || failed.Class != "weir.CheckpointException" {
		t.Errorf("AwaitSavepoint of a failed stop: %v", err)
	}
	want := []monitor.SavepointRequest{{Target: "/sp", Format: "native"}, {Format: "canonical", Stop: true, Drain: true}}
	if got := j.Savepoints.Requests(); !slices.Equal(got, want) {
		t.Errorf("requests %+v, want %+v", got, want)
	}

	_, err = c.TriggerSavepoint(ctx, finishedID, SavepointTriggerRequest{})
	if StatusOf(err) != http.StatusConflict || !strings.Contains(err.Error(), "terminal state FINISHED") {
		t.Errorf("TriggerSavepoint of a finished job: %v", err)
	}
	if _, err := c.AwaitSavepoint(ctx, resttest.JobID, "nope", time.Millisecond); StatusOf(err) != http.StatusNotFound {
		t.Errorf("AwaitSavepoint of an unknown trigger: %v", err)
	}

	// AwaitSavepoint ends with its context, also while the server holds
	// the request.
	id, err = c.TriggerSavepoint(ctx, resttest.JobID, SavepointTriggerRequest{})
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := c.AwaitSavepoint(cctx, resttest.JobID, id, time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("AwaitSavepoint past its deadline: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("AwaitSavepoint returned %v after its deadline", d)
	}
}

// AwaitSavepoint against a server that ignores wait and answers at once:
// it asks again every poll, not in a busy loop.
func TestAwaitSavepointPolls(t *testing.T) {
	var calls atomic.Int32
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("wait") != "10000" {
			t.Errorf("query %q, want wait=10000", r.URL.RawQuery)
		}
		st := SavepointTriggerStatus{Status: QueueStatus{ID: OperationInProgress}}
		if calls.Add(1) == 4 {
			st = SavepointTriggerStatus{Status: QueueStatus{ID: OperationCompleted},
				Operation: &SavepointOperation{Location: "/sp/x"}}
		}
		writeJSON(w, http.StatusOK, st)
	}))
	defer hs.Close()
	start := time.Now()
	loc, err := NewClient(hs.URL, "", hs.Client()).AwaitSavepoint(t.Context(), "j", "t", 20*time.Millisecond)
	if err != nil || loc != "/sp/x" {
		t.Fatalf("AwaitSavepoint: %q %v", loc, err)
	}
	if d := time.Since(start); d < 60*time.Millisecond {
		t.Errorf("4 answers in %v: want a poll of 20ms between them", d)
	}
}
