package rest

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"

	"github.com/weirstream/weir/internal/checkpoint/stats"
	"github.com/weirstream/weir/internal/monitor"
)

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
	return s.launch(triggerKey{kind: checkpointTrigger, job: j.ID, id: newTriggerID()}, func(ctx context.Context) outcome {
		cp, err := j.TriggerCheckpoint(ctx)
		return outcome{checkpoint: cp, err: err}
	})
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

// failureCause is a triggered operation's failure as Flink reports it:
// stack-trace holds the error's message.
func failureCause(err error) *SerializedThrowable {
	return &SerializedThrowable{Class: failureClass(err), StackTrace: err.Error()}
}

func (s *Server) checkpointTriggerStatus(r *http.Request) (any, error) {
	j, err := s.job(r)
	if err != nil {
		return nil, err
	}
	id := r.PathValue("triggerid")
	tr, ok := s.triggers.get(triggerKey{kind: checkpointTrigger, job: j.ID, id: id})
	if !ok {
		return nil, errorf(http.StatusNotFound, "Checkpoint trigger %s of job %s not found (the server keeps "+
			"the last %d results)", id, j.ID, maxFinishedTriggers)
	}
	if !tr.done {
		return CheckpointTriggerStatus{Status: QueueStatus{ID: OperationInProgress}}, nil
	}
	op := &CheckpointOperation{}
	if err := tr.result.err; err != nil {
		op.FailureCause = failureCause(err)
	} else {
		cp := tr.result.checkpoint
		op.CheckpointID = &cp
	}
	return CheckpointTriggerStatus{Status: QueueStatus{ID: OperationCompleted}, Operation: op}, nil
}
