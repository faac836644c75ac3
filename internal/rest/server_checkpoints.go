package rest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync"

	"github.com/weirstream/weir/internal/checkpoint/stats"
	"github.com/weirstream/weir/internal/monitor"
)

// maxFinishedTriggers is how many finished checkpoint triggers the server
// remembers; the oldest are forgotten first. Running ones are always
// kept.
const maxFinishedTriggers = 100

// trigger is a checkpoint triggered through the API.
type trigger struct {
	jobID string
	done  bool
	id    int64 // the checkpoint's, once done without err
	err   error
}

// triggers are the checkpoints triggered through the API.
type triggers struct {
	mu       sync.Mutex
	byID     map[string]*trigger
	finished []string // trigger ids, oldest first
}

func newTriggers() *triggers { return &triggers{byID: map[string]*trigger{}} }

// start records a new trigger of job's and returns its id: 32 random hex
// digits, as Flink's trigger ids.
func (t *triggers) start(jobID string) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	t.mu.Lock()
	t.byID[id] = &trigger{jobID: jobID}
	t.mu.Unlock()
	return id
}

// maxRunningTriggers bounds the checkpoint triggers waiting for their
// checkpoint at once: a client hammering POST /checkpoints while the job
// restarts must not pile up goroutines.
const maxRunningTriggers = 16

// running counts the triggers without a result yet.
func (t *triggers) running() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.byID) - len(t.finished)
}

// finish records a trigger's result.
func (t *triggers) finish(id string, checkpoint int64, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	tr := t.byID[id]
	if tr == nil {
		return
	}
	tr.done, tr.id, tr.err = true, checkpoint, err
	t.finished = append(t.finished, id)
	if n := len(t.finished) - maxFinishedTriggers; n > 0 {
		for _, old := range t.finished[:n] {
			delete(t.byID, old)
		}
		t.finished = slices.Delete(t.finished, 0, n)
	}
}

// get returns a copy of trigger id.
func (t *triggers) get(id string) (trigger, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	tr, ok := t.byID[id]
	if !ok {
		return trigger{}, false
	}
	return *tr, true
}

// snapshot is the job's checkpoint statistics (empty without a tracker).
func snapshot(j *monitor.Job) stats.Snapshot {
	if j.Checkpoints == nil {
		return stats.Snapshot{}
	}
	return j.Checkpoints.Snapshot()
}

func (s *Server) checkpoints(r *http.Request) (any, error) {
	j, err := s.job(r)
	if err != nil {
		return nil, err
	}
	return checkpointingStatistics(j, snapshot(j)), nil
}

func (s *Server) checkpointConfig(r *http.Request) (any, error) {
	j, err := s.job(r)
	if err != nil {
		return nil, err
	}
	if !j.Checkpoint.Enabled {
		return nil, errorf(http.StatusNotFound, "Checkpointing is not enabled for job %s "+
			"(set execution.checkpointing.interval)", j.ID)
	}
	return checkpointConfig(j.Checkpoint), nil
}

// checkpoint is the checkpoint of j's history the request's
// {checkpointid} names.
func checkpoint(r *http.Request, j *monitor.Job) (stats.Checkpoint, error) {
	raw := r.PathValue("checkpointid")
	id, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || id < 0 {
		return stats.Checkpoint{}, errorf(http.StatusBadRequest, "Checkpoint id %q is not a number", raw)
	}
	if j.Checkpoints != nil {
		if c, ok := j.Checkpoints.Checkpoint(id); ok {
			return c, nil
		}
	}
	return stats.Checkpoint{}, errorf(http.StatusNotFound, "Could not find checkpointing statistics for "+
		"checkpoint %d of job %s: it is not among the latest (web.checkpoints.history)", id, j.ID)
}

func (s *Server) checkpointDetails(r *http.Request) (any, error) {
	j, err := s.job(r)
	if err != nil {
		return nil, err
	}
	c, err := checkpoint(r, j)
	if err != nil {
		return nil, err
	}
	return checkpointStatistics(j, c), nil
}

func (s *Server) checkpointSubtasks(r *http.Request) (any, error) {
	j, err := s.job(r)
	if err != nil {
		return nil, err
	}
	c, err := checkpoint(r, j)
	if err != nil {
		return nil, err
	}
	v, err := vertex(r, j)
	if err != nil {
		return nil, err
	}
	return taskCheckpointDetails(c, v), nil
}

// triggerCheckpoint is POST /jobs/{jobid}/checkpoints: it starts a
// checkpoint in the background and answers its trigger id at once.
func (s *Server) triggerCheckpoint(r *http.Request) (any, error) {
	j, err := s.job(r)
	if err != nil {
		return nil, err
	}
	var req CheckpointTriggerRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil && !errors.Is(err, io.EOF) {
		return nil, errorf(http.StatusBadRequest, "Request body is not a checkpoint trigger request "+
			`({"checkpointType":"FULL|INCREMENTAL|CONFIGURED"}): %v`, err)
	}
	switch req.CheckpointType {
	case "", CheckpointTypeConfigured, CheckpointTypeFull, CheckpointTypeIncremental:
	default:
		return nil, errorf(http.StatusBadRequest, "Unknown checkpointType %q; valid: %s, %s, %s (weir takes the "+
			"configured kind in every case)", req.CheckpointType, CheckpointTypeConfigured, CheckpointTypeFull,
			CheckpointTypeIncremental)
	}
	if st := j.Status().State; st.Terminal() {
		return nil, errorf(http.StatusConflict, "Job %s has already reached the terminal state %s: it takes no "+
			"more checkpoints", j.ID, st)
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, errorf(http.StatusServiceUnavailable, "The server is shutting down")
	}
	if s.triggers.running() >= maxRunningTriggers {
		s.mu.Unlock()
		return nil, errorf(http.StatusTooManyRequests, "%d checkpoint triggers are still running: wait for one "+
			"to finish (GET /jobs/%s/checkpoints/<triggerid>)", maxRunningTriggers, j.ID)
	}
	id := s.triggers.start(j.ID)
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		cp, err := j.TriggerCheckpoint(s.ctx)
		s.triggers.finish(id, cp, err)
	}()
	return withStatus{status: http.StatusAccepted, body: TriggerResponse{RequestID: id}}, nil
}

// failureClass names the kind of a trigger's failure.
func failureClass(err error) string {
	switch {
	case errors.Is(err, monitor.ErrNotRunning):
		return "weir.JobNotRunningException"
	case errors.Is(err, context.Canceled):
		return "weir.CheckpointCanceledException"
	}
	return "weir.CheckpointException"
}

func (s *Server) checkpointTriggerStatus(r *http.Request) (any, error) {
	j, err := s.job(r)
	if err != nil {
		return nil, err
	}
	id := r.PathValue("triggerid")
	tr, ok := s.triggers.get(id)
	if !ok || tr.jobID != j.ID {
		return nil, errorf(http.StatusNotFound, "Checkpoint trigger %s of job %s not found (the server keeps "+
			"the last %d results)", id, j.ID, maxFinishedTriggers)
	}
	if !tr.done {
		return CheckpointTriggerStatus{Status: QueueStatus{ID: OperationInProgress}}, nil
	}
	op := &CheckpointOperation{}
	if tr.err != nil {
		op.FailureCause = &SerializedThrowable{Class: failureClass(tr.err), StackTrace: tr.err.Error()}
	} else {
		cp := tr.id
		op.CheckpointID = &cp
	}
	return CheckpointTriggerStatus{Status: QueueStatus{ID: OperationCompleted}, Operation: op}, nil
}
