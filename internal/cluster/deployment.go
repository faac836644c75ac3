package cluster

import (
	"cmp"
	"context"
	"crypto/rand"
	"fmt"
	"slices"
	"sync"

	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/checkpoint/metadata"
	"github.com/weirstream/weir/internal/graph"
	"github.com/weirstream/weir/internal/runner"
	"github.com/weirstream/weir/internal/task"
)

// remoteDeployment is one attempt of the job, its subtasks running in task
// managers: the runner.Deployment the job manager's runner drives.
type remoteDeployment struct {
	jm      *JobManager
	attempt uint64
	tms     []*tmConn // the task managers that run part of it
	tasks   []task.TaskInfo
	acks    chan task.Ack

	mu           sync.Mutex
	deployed     map[string]bool
	deployErr    error
	deployedAll  chan struct{}
	ended        map[string]bool
	err          error // the first failure, or the cancel cause
	done         chan struct{}
	sourcesLeft  map[string]bool
	sourcesEnded chan struct{}
	counts       map[string]countsMsg
	mirror       *metricsMirror // nil: the job manager has no metrics registry
	// stopCtx unregisters the cancellation of the deployment when the
	// Deploy context ends.
	stopCtx func() bool
}

var _ runner.Deployment = (*remoteDeployment)(nil)

func newRemoteDeployment(jm *JobManager, attempt uint64, jg *graph.JobGraph, slots []*tmConn) *remoteDeployment {
	d := &remoteDeployment{jm: jm, attempt: attempt, acks: make(chan task.Ack, 1024),
		deployed: map[string]bool{}, deployedAll: make(chan struct{}), ended: map[string]bool{}, done: make(chan struct{}),
		sourcesLeft: map[string]bool{}, sourcesEnded: make(chan struct{}), counts: map[string]countsMsg{}}
	seen := map[string]bool{}
	for _, c := range slots {
		if !seen[c.id] {
			seen[c.id] = true
			d.tms = append(d.tms, c)
			d.sourcesLeft[c.id] = true
		}
	}
	d.tasks = taskInfos(jg)
	return d
}

func (d *remoteDeployment) involved(c *tmConn) bool {
	for _, t := range d.tms {
		if t == c {
			return true
		}
	}
	return false
}

// receive handles a message of one of the attempt's task managers.
func (d *remoteDeployment) receive(c *tmConn, m toJM) {
	switch {
	case m.Deployed != nil && m.Deployed.Attempt == d.attempt:
		d.mu.Lock()
		defer d.mu.Unlock()
		if m.Deployed.Err != "" && d.deployErr == nil {
			d.deployErr = fmt.Errorf("task manager %s (%s): %s", c.id, c.name, m.Deployed.Err)
			if m.Deployed.NotRestartable {
				d.deployErr = fmt.Errorf("%w: %w", runner.ErrNotRestartable, d.deployErr)
			}
		}
		d.deployed[c.id] = true
		if len(d.deployed) == len(d.tms) || d.deployErr != nil {
			d.closeDeployedLocked()
		}
	case m.Ack != nil && m.Ack.Attempt == d.attempt:
		select {
		case d.acks <- m.Ack.Ack:
		case <-d.done:
		}
	case m.SourcesEnded != nil && m.SourcesEnded.Attempt == d.attempt:
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.sourcesLeft[c.id] {
			delete(d.sourcesLeft, c.id)
			if len(d.sourcesLeft) == 0 {
				close(d.sourcesEnded)
			}
		}
	case m.Counts != nil && m.Counts.Attempt == d.attempt:
		d.mu.Lock()
		d.counts[c.id] = *m.Counts
		d.mu.Unlock()
		d.mirror.update(m.Counts.Groups)
	case m.Ended != nil && m.Ended.Attempt == d.attempt:
		var err error
		if m.Ended.Err != "" {
			err = fmt.Errorf("task manager %s (%s): %s", c.id, c.name, m.Ended.Err)
			switch m.Ended.Class {
			case classRestoreData:
				err = fmt.Errorf("%w: %w", task.ErrRestoreData, err)
			case classNotRestartable:
				err = fmt.Errorf("%w: %w", runner.ErrNotRestartable, err)
			}
			if m.Ended.Canceled {
				err = nil // a consequence of the cancel, not a cause
			}
		}
		d.partEnded(c, err)
	}
}

func (d *remoteDeployment) closeDeployedLocked() {
	select {
	case <-d.deployedAll:
	default:
		close(d.deployedAll)
	}
}

// lost is called when a task manager's session ended.
func (d *remoteDeployment) lost(c *tmConn, err error) {
	if !d.involved(c) {
		return
	}
	d.mu.Lock()
	if !d.deployed[c.id] && d.deployErr == nil {
		d.deployErr = err
		d.closeDeployedLocked()
	}
	d.mu.Unlock()
	d.partEnded(c, err)
}

// partEnded records that c's part ended (with err if it failed); the first
// failure cancels the other parts.
func (d *remoteDeployment) partEnded(c *tmConn, err error) {
	d.mu.Lock()
	if d.ended[c.id] {
		d.mu.Unlock()
		return
	}
	d.ended[c.id] = true
	first := err != nil && d.err == nil
	if first {
		d.err = err
	}
	all := len(d.ended) == len(d.tms)
	if all {
		close(d.done)
	}
	d.mu.Unlock()
	if first {
		d.jm.log.Info("part of the job failed; canceling the attempt", "attempt", d.attempt, "err", err)
		d.cancelParts(err)
	}
}

func (d *remoteDeployment) awaitDeployed(ctx context.Context) error {
	select {
	case <-d.deployedAll:
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.deployErr
}

func (d *remoteDeployment) cancelParts(cause error) {
	for _, c := range d.tms {
		d.mu.Lock()
		ended := d.ended[c.id]
		d.mu.Unlock()
		if !ended {
			c.send(toTM{Cancel: &cancelMsg{Attempt: d.attempt, Reason: cause.Error()}})
		}
	}
}

// Run waits until every part ended and returns the first failure.
func (d *remoteDeployment) Run() error {
	<-d.done
	if d.stopCtx != nil {
		d.stopCtx()
	}
	d.mirror.close()
	store, local := d.restoreBytes()
	d.jm.mu.Lock()
	if d.jm.current == d {
		d.jm.current = nil
	}
	d.jm.restores = append(d.jm.restores, AttemptRestore{Store: store, Local: local})
	d.jm.mu.Unlock()
	d.broadcast(toTM{Release: &attemptMsg{Attempt: d.attempt}})
	if store+local > 0 {
		d.jm.log.Info("the attempt restored keyed state", "attempt", d.attempt&(1<<32-1), "fromStore", store, "fromLocalCopies", local)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.err
}

// Cancel cancels every part; Run returns cause.
func (d *remoteDeployment) Cancel(cause error) {
	if cause == nil {
		cause = context.Canceled
	}
	d.mu.Lock()
	if d.err == nil {
		d.err = cause
	}
	d.mu.Unlock()
	d.cancelParts(cause)
}

func (d *remoteDeployment) Tasks() []task.TaskInfo        { return d.tasks }
func (d *remoteDeployment) Acks() <-chan task.Ack         { return d.acks }
func (d *remoteDeployment) SourcesEnded() <-chan struct{} { return d.sourcesEnded }

// Metrics returns the subtasks' metrics the parts last sent, by vertex and
// subtask.
func (d *remoteDeployment) Metrics() []task.TaskMetrics {
	d.mu.Lock()
	var out []task.TaskMetrics
	for _, c := range d.counts {
		out = append(out, c.Tasks...)
	}
	d.mu.Unlock()
	slices.SortFunc(out, func(a, b task.TaskMetrics) int {
		return cmp.Or(cmp.Compare(a.Vertex, b.Vertex), cmp.Compare(a.Subtask, b.Subtask))
	})
	return out
}

func (d *remoteDeployment) RecordCounts() (in, out int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, c := range d.counts {
		in += c.In
		out += c.Out
	}
	return in, out
}

// restoreBytes sums what the parts reported of their restores.
func (d *remoteDeployment) restoreBytes() (store, local int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, c := range d.counts {
		store += c.RestoreStore
		local += c.RestoreLocal
	}
	return store, local
}

func (d *remoteDeployment) broadcast(m toTM) {
	for _, c := range d.tms {
		c.send(m)
	}
}

func (d *remoteDeployment) TriggerCheckpoint(id, triggerTime int64, opts checkpoint.Options) {
	d.broadcast(toTM{Trigger: &triggerMsg{Attempt: d.attempt, ID: id, Time: triggerTime, Options: opts}})
}

func (d *remoteDeployment) TriggerSavepoint(id, triggerTime int64, opts checkpoint.Options, target task.Target) {
	loc := target.Store.Location()
	if loc == "" {
		// A savepoint into storage only this process reaches: every
		// subtask declines it.
		for _, t := range d.tasks {
			a := task.Ack{Vertex: t.Vertex, Subtask: t.Subtask, ID: id,
				Declined: &task.Decline{Reason: task.DeclineAsync, Message: "savepoint target is not reachable from the task managers (mem://): use a shared directory or s3://"}}
			select {
			case d.acks <- a:
			case <-d.done:
			}
		}
		return
	}
	d.broadcast(toTM{Trigger: &triggerMsg{Attempt: d.attempt, ID: id, Time: triggerTime, Options: opts,
		Savepoint: &targetMsg{Storage: loc, Dir: target.Dir}}})
}

func (d *remoteDeployment) NotifyCheckpointComplete(id int64, final bool) {
	d.broadcast(toTM{Notify: &notifyMsg{Attempt: d.attempt, ID: id, Complete: true, Final: final}})
}

func (d *remoteDeployment) NotifyCheckpointAborted(id int64) {
	d.broadcast(toTM{Notify: &notifyMsg{Attempt: d.attempt, ID: id}})
}

func encodeCheckpoint(cp *metadata.Checkpoint) ([]byte, error) {
	b, err := metadata.Encode(cp)
	if err != nil {
		return nil, fmt.Errorf("encode the restored checkpoint for the task managers: %w", err)
	}
	return b, nil
}

func newRunID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%x", b)
}
