package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/weirstream/weir/internal/ha"
)

// ErrLeadershipLost cancels a job manager's run when its leadership in the
// high-availability store ended: another job manager may lead now, and
// only one may drive the job's checkpoints.
var ErrLeadershipLost = errors.New("the job manager lost its leadership")

// HAJob is a job run by whichever job manager of a cluster leads it in
// etcd (high-availability.type etcd).
type HAJob struct {
	Store *ha.Etcd
	// JobID names the job in the store (its checkpoint directory name).
	JobID string
	// Address is the leader's RPC address task managers connect to.
	Address string
	Spec    []byte
	Logger  *slog.Logger
}

// Resume is where a new leader resumes the job: the checkpoint the last
// leader recorded as its latest, or, with ID 0, none recorded although the
// last leader ran the job: the newest complete checkpoint in storage, if
// any (its sinks may have committed one before it could record it).
type Resume = ha.Pointer

// Lead campaigns for the leadership of the cluster (a standby blocks here
// until the leader is gone), then runs the job: run gets the checkpoint
// to resume from (nil for a fresh start) and a function to record every
// completed checkpoint in the store. The run is canceled with
// ErrLeadershipLost if the leadership ends. When the job ends for good
// its terminal status is recorded, so that no later leader runs it again,
// and the leadership is resigned.
func Lead(ctx context.Context, h HAJob, run func(ctx context.Context, resume *Resume, completed func(id int64, path string)) error) error {
	log := h.Logger
	if log == nil {
		log = slog.Default()
	}
	log.Info("campaigning for leadership", "address", h.Address)
	l, err := h.Store.Campaign(ctx, h.Address)
	if err != nil {
		return fmt.Errorf("high availability: campaign: %w", err)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = l.Resign(rctx)
	}()
	log.Info("leading the cluster", "address", h.Address, "epoch", l.Epoch())
	if st, ok, err := l.JobStatus(ctx, h.JobID); err != nil {
		return fmt.Errorf("high availability: %w", err)
	} else if ok {
		log.Info("the job already ended under an earlier leader; nothing to do", "job", h.JobID, "status", st)
		return nil
	}
	var resume *Resume
	if p, ok, err := l.LatestCheckpoint(ctx, h.JobID); err != nil {
		return fmt.Errorf("high availability: %w", err)
	} else if ok {
		resume = &p
		log.Info("resuming the job from the latest checkpoint the last leader recorded", "job", h.JobID, "checkpoint", p.ID, "path", p.Path)
	} else if _, ran, err := l.Job(ctx, h.JobID); err != nil {
		return fmt.Errorf("high availability: %w", err)
	} else if ran {
		// The last leader ran the job and died before it recorded a
		// checkpoint, possibly after one completed (its sinks may have
		// committed it): resume from the newest complete checkpoint in
		// storage, if there is one, as after a recorded one.
		resume = &Resume{}
		log.Info("the last leader ran the job but recorded no checkpoint; resuming from the newest complete checkpoint in storage, if any", "job", h.JobID)
	}
	if err := l.PutJob(ctx, h.JobID, h.Spec); err != nil {
		return fmt.Errorf("high availability: %w", err)
	}
	rctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		select {
		case <-l.Lost():
			cancel(ErrLeadershipLost)
		case <-rctx.Done():
		}
	}()
	completed := func(id int64, path string) {
		wctx, c := context.WithTimeout(rctx, 10*time.Second)
		defer c()
		if err := l.SetLatestCheckpoint(wctx, h.JobID, ha.Pointer{ID: id, Path: path, Time: time.Now()}); err != nil {
			log.Warn("could not record the completed checkpoint in the high-availability store", "checkpoint", id, "err", err)
			return
		}
		if err := l.SetCheckpointCounter(wctx, h.JobID, id+1); err != nil && !errors.Is(err, ha.ErrCounterDecrease) {
			log.Warn("could not record the checkpoint counter in the high-availability store", "checkpoint", id, "err", err)
		}
	}
	err = run(rctx, resume, completed)
	if errors.Is(context.Cause(rctx), ErrLeadershipLost) {
		return fmt.Errorf("job %s: %w", h.JobID, ErrLeadershipLost)
	}
	if ctx.Err() != nil {
		// This process is stopping (a signal): the job is not over, a
		// standby takes it over.
		return err
	}
	status := ha.StatusFinished
	if err != nil {
		status = ha.StatusFailed
	}
	sctx, c := context.WithTimeout(context.Background(), 10*time.Second)
	defer c()
	if serr := l.SetJobStatus(sctx, h.JobID, status); serr != nil {
		log.Warn("could not record the job's end in the high-availability store", "status", status, "err", serr)
	}
	return err
}
