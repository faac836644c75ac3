package rest

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/weirstream/weir/internal/monitor"
)

// savepointer takes a job's savepoints: it is what the savepoint
// endpoints need of a monitor.Job, whose Controls.TriggerSavepoint it
// calls.
type savepointer interface {
	// CanTakeSavepoints reports whether the job has a TriggerSavepoint
	// control.
	CanTakeSavepoints() bool
	// TriggerSavepoint takes a savepoint (see monitor.Controls) and
	// returns it once it completed; monitor.ErrNotRunning once the job
	// ended.
	TriggerSavepoint(ctx context.Context, req monitor.SavepointRequest) (monitor.SavepointResult, error)
}

// jobSavepointer is the savepointer of j: the job itself.
func jobSavepointer(j *monitor.Job) savepointer { return j }

var _ savepointer = (*monitor.Job)(nil)

// maxSavepointWait bounds the wait query parameter of the savepoint
// status endpoint.
const maxSavepointWait = time.Minute

// parseSavepointFormat maps a request's formatType, in any case, to
// monitor.SavepointRequest's Format; empty is canonical.
func parseSavepointFormat(f string) (string, error) {
	switch strings.ToUpper(f) {
	case "", SavepointFormatCanonical:
		return "canonical", nil
	case SavepointFormatNative:
		return "native", nil
	}
	return "", errorf(http.StatusBadRequest, "Unknown formatType %q; valid: %s (the default), %s (in any case)",
		f, SavepointFormatCanonical, SavepointFormatNative)
}

// decodeBody decodes an optional JSON body into v; fields v does not have
// are an error (a misspelt target directory must not silently take the
// default one).
func decodeBody(r *http.Request, v any) error {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}

// triggerSavepoint is POST /jobs/{jobid}/savepoints.
func (s *Server) triggerSavepoint(r *http.Request) (any, error) {
	j, err := s.job(r)
	if err != nil {
		return nil, err
	}
	var body SavepointTriggerRequest
	if err := decodeBody(r, &body); err != nil {
		return nil, errorf(http.StatusBadRequest, "Request body is not a savepoint trigger request "+
			`({"target-directory":"/dir","cancel-job":false,"formatType":"CANONICAL|NATIVE","triggerId":"32 hex `+
			`digits"}, every field optional): %v`, err)
	}
	return s.savepoint(j, body.TriggerID, body.FormatType,
		monitor.SavepointRequest{Target: body.TargetDirectory, Stop: body.CancelJob})
}

// stopWithSavepoint is POST /jobs/{jobid}/stop.
func (s *Server) stopWithSavepoint(r *http.Request) (any, error) {
	j, err := s.job(r)
	if err != nil {
		return nil, err
	}
	var body StopWithSavepointRequest
	if err := decodeBody(r, &body); err != nil {
		return nil, errorf(http.StatusBadRequest, "Request body is not a stop-with-savepoint request "+
			`({"targetDirectory":"/dir","drain":false,"formatType":"CANONICAL|NATIVE","triggerId":"32 hex `+
			`digits"}, every field optional): %v`, err)
	}
	return s.savepoint(j, body.TriggerID, body.FormatType,
		monitor.SavepointRequest{Target: body.TargetDirectory, Stop: true, Drain: body.Drain})
}

// savepoint starts savepoint req of j in the background as trigger
// triggerID (empty: a generated id) with format.
func (s *Server) savepoint(j *monitor.Job, triggerID, format string, req monitor.SavepointRequest) (any, error) {
	var err error
	if req.Format, err = parseSavepointFormat(format); err != nil {
		return nil, err
	}
	id := newTriggerID()
	if triggerID != "" {
		if id, err = parseTriggerID(triggerID); err != nil {
			return nil, errorf(http.StatusBadRequest, "%v", err)
		}
	}
	k := triggerKey{kind: savepointTrigger, job: j.ID, id: id}
	// A repeated trigger id answers its operation, whatever the job
	// became since.
	if triggerID != "" && s.triggers.has(k) {
		return withStatus{status: http.StatusAccepted, body: TriggerResponse{RequestID: id}}, nil
	}
	if st := j.Status().State; st.Terminal() {
		return nil, errorf(http.StatusConflict, "Job %s has already reached the terminal state %s: it takes no "+
			"more savepoints", j.ID, st)
	}
	// The runtime would refuse it too, but only once the request was
	// accepted.
	if !j.Checkpoint.Enabled {
		return nil, errorf(http.StatusConflict, "Job %s cannot take savepoints: checkpointing is off, and "+
			"weir takes savepoints with the checkpoint coordinator (run the job with "+
			"execution.checkpointing.interval set)", j.ID)
	}
	sp := s.cfg.savepoints(j)
	if sp == nil || !sp.CanTakeSavepoints() {
		return nil, errorf(http.StatusConflict, "Job %s cannot take savepoints: its runtime offers no savepoint "+
			"control", j.ID)
	}
	return s.launch(k, func(ctx context.Context) outcome {
		res, err := sp.TriggerSavepoint(ctx, req)
		return outcome{savepoint: res, err: err}
	})
}

// savepointTriggerStatus is GET /jobs/{jobid}/savepoints/{triggerid}.
// weir's wait=<ms> holds the answer until the savepoint finished or that
// long passed: a stop-with-savepoint ends the job, and with it the
// process and its server, soon after the savepoint completed; a client
// that waits on the server gets the result in that window, one that
// polls may ask too late.
func (s *Server) savepointTriggerStatus(r *http.Request) (any, error) {
	j, err := s.job(r)
	if err != nil {
		return nil, err
	}
	var wait time.Duration
	if q := r.URL.Query().Get("wait"); q != "" {
		ms, err := strconv.ParseInt(q, 10, 64)
		if err != nil || ms < 0 || time.Duration(ms)*time.Millisecond > maxSavepointWait {
			return nil, errorf(http.StatusBadRequest, "Bad query parameter wait=%q: want the milliseconds to wait "+
				"for the savepoint to finish, 0 to %d", q, maxSavepointWait.Milliseconds())
		}
		wait = time.Duration(ms) * time.Millisecond
	}
	id := strings.ToLower(r.PathValue("triggerid"))
	k := triggerKey{kind: savepointTrigger, job: j.ID, id: id}
	tr, ok := s.triggers.get(k)
	if !ok {
		return nil, errorf(http.StatusNotFound, "Savepoint trigger %s of job %s not found (the server keeps "+
			"the last %d results)", r.PathValue("triggerid"), j.ID, maxFinishedTriggers)
	}
	if !tr.done && wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-tr.finished:
		case <-t.C:
		case <-r.Context().Done():
		}
		t.Stop()
		if again, ok := s.triggers.get(k); ok {
			tr = again
		}
	}
	if !tr.done {
		return SavepointTriggerStatus{Status: QueueStatus{ID: OperationInProgress}}, nil
	}
	op := &SavepointOperation{}
	if err := tr.result.err; err != nil {
		op.FailureCause = failureCause(err)
	} else {
		op.Location = tr.result.savepoint.Path
	}
	return SavepointTriggerStatus{Status: QueueStatus{ID: OperationCompleted}, Operation: op}, nil
}
