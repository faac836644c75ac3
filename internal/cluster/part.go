package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weirstream/weir/internal/checkpoint/metadata"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/graph"
	"github.com/weirstream/weir/internal/metrics"
	"github.com/weirstream/weir/internal/network"
	"github.com/weirstream/weir/internal/task"
)

// part is the piece of one attempt a task manager runs: the subtasks
// placed in its slots.
type part struct {
	tm     *TaskManager
	msg    *deployMsg
	send   func(toJM)
	cancel context.CancelCauseFunc
	done   chan struct{}

	deployedSent atomic.Bool
	mu           sync.Mutex
	job          *task.Job
	stores       map[string]*storage.Storage
	closed       bool // the part ended: no storage is opened any more
}

var _ PartRunner = (*part)(nil)

// RunPart deploys the part's subtasks of jg, reports them deployed, runs
// them to the end and reports their checkpoints on the way.
func (p *part) RunPart(ctx context.Context, jg *graph.JobGraph, opts task.Options) error {
	m := p.msg
	if h := GraphHash(jg); h != m.GraphHash {
		return &notRestartableError{fmt.Errorf("the task manager built another job graph (hash %s) than the job manager (%s): run every process with the same binary, job flags and configuration", h, m.GraphHash)}
	}
	defer p.closeStores()
	if err := p.fill(ctx, &opts); err != nil {
		return err
	}
	if opts.Metrics == nil {
		// The part's own registry: its groups go to the job manager
		// with its counts.
		opts.Metrics = metrics.NewRegistry()
	}
	local := func(_, subtask int) bool { return subtask < len(m.Slots) && m.Slots[subtask] == m.Self }
	opts.Placement = &task.Placement{Local: local, Remote: &remote{dp: p.tm.data, attempt: m.Attempt, jg: jg, slots: m.Slots}}
	job, err := task.Deploy(ctx, jg, opts)
	if err != nil {
		if errors.Is(err, task.ErrStateMismatch) {
			return &notRestartableError{err}
		}
		return err
	}
	p.mu.Lock()
	p.job = job
	p.mu.Unlock()
	p.deployedSent.Store(true)
	p.send(toJM{Deployed: &deployedMsg{Attempt: m.Attempt, Tasks: job.Tasks()}})

	fwdDone := make(chan struct{})
	stop := make(chan struct{})
	go func() {
		defer close(fwdDone)
		ended := job.SourcesEnded()
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case a := <-job.Acks():
				p.send(toJM{Ack: &ackMsg{Attempt: m.Attempt, Ack: a}})
			case <-ended:
				ended = nil
				p.send(toJM{SourcesEnded: &attemptMsg{Attempt: m.Attempt}})
			case <-tick.C:
				p.send(toJM{Counts: counts(m.Attempt, job, opts.Metrics)})
			case <-stop:
				return
			}
		}
	}()
	err = job.Run()
	close(stop)
	<-fwdDone
	// Acknowledgements queued when the tasks ended still count (the final
	// checkpoint's).
	for {
		select {
		case a := <-job.Acks():
			p.send(toJM{Ack: &ackMsg{Attempt: m.Attempt, Ack: a}})
			continue
		default:
		}
		break
	}
	p.send(toJM{Counts: counts(m.Attempt, job, nil)}) // the groups are gone
	if err == nil {
		// The job finished: nothing will restore from this task
		// manager's local copies of its checkpoints.
		task.RemoveLocalCopies(opts)
	}
	return err
}

func counts(attempt uint64, job *task.Job, reg *metrics.Registry) *countsMsg {
	in, out := job.RecordCounts()
	store, local := job.RestoreBytes()
	return &countsMsg{Attempt: attempt, In: in, Out: out, RestoreStore: store, RestoreLocal: local,
		Tasks: finiteTaskMetrics(job.Metrics()), Groups: snapshotGroups(reg)}
}

// fill sets the task options the job manager's runner chose for this
// attempt.
func (p *part) fill(ctx context.Context, o *task.Options) error {
	t := p.msg.Task
	o.RunID, o.CheckpointJob, o.FinalCheckpoint = t.RunID, t.CheckpointJob, t.FinalCheckpoint
	o.CheckpointInterval = t.CheckpointInterval
	o.RestoreJob, o.RestoreOwned, o.AllowNonRestoredState = t.RestoreJob, t.RestoreOwned, t.AllowNonRestoredState
	o.SkipChannelState, o.CountRecords, o.JobID = t.SkipChannelState, t.CountRecords, t.JobID
	o.Checkpoints, o.Restore, o.RestoreStorage = nil, nil, nil
	var err error
	if t.Checkpoints != "" {
		if o.Checkpoints, err = p.store(ctx, t.Checkpoints); err != nil {
			return err
		}
	}
	if t.Restore != nil {
		if o.Restore, err = metadata.Decode(t.Restore); err != nil {
			return &notRestartableError{fmt.Errorf("decode the checkpoint to restore: %w", err)}
		}
		if o.RestoreStorage, err = p.store(ctx, t.RestoreStorage); err != nil {
			return err
		}
	}
	return nil
}

// store opens (once per part) the storage at loc.
func (p *part) store(ctx context.Context, loc string) (*storage.Storage, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, fmt.Errorf("checkpoint storage %s: the part of the job ended", loc)
	}
	if s := p.stores[loc]; s != nil {
		return s, nil
	}
	s, err := storage.Open(ctx, loc)
	if err != nil {
		return nil, fmt.Errorf("checkpoint storage %s: %w", loc, err)
	}
	if p.stores == nil {
		p.stores = map[string]*storage.Storage{}
	}
	p.stores[loc] = s
	return s, nil
}

func (p *part) closeStores() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.stores {
		s.Close()
	}
	p.stores = nil
	p.closed = true
}

func (p *part) deployed() *task.Job {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.job
}

func (p *part) trigger(m *triggerMsg) {
	job := p.deployed()
	if job == nil {
		return
	}
	if m.Savepoint == nil {
		job.TriggerCheckpoint(m.ID, m.Time, m.Options)
		return
	}
	st, err := p.store(context.Background(), m.Savepoint.Storage)
	if err != nil {
		// Every subtask declines; the job manager aborts the savepoint.
		for _, t := range job.Tasks() {
			p.send(toJM{Ack: &ackMsg{Attempt: p.msg.Attempt, Ack: task.Ack{Vertex: t.Vertex, Subtask: t.Subtask, ID: m.ID,
				Declined: &task.Decline{Reason: task.DeclineAsync, Message: err.Error()}}}})
		}
		return
	}
	job.TriggerSavepoint(m.ID, m.Time, m.Options, task.Target{Store: st, Dir: m.Savepoint.Dir})
}

func (p *part) notify(m *notifyMsg) {
	job := p.deployed()
	if job == nil {
		return
	}
	if m.Complete {
		job.NotifyCheckpointComplete(m.ID, m.Final)
	} else {
		job.NotifyCheckpointAborted(m.ID)
	}
}

// remote is the part's task.RemoteExchange: channels to subtasks in other
// task managers go through the data plane, addressed by the slot the
// other subtask runs in.
type remote struct {
	dp      DataPlane
	attempt uint64
	jg      *graph.JobGraph
	slots   []string
}

func (r *remote) id(ref task.ChannelRef) ChannelID {
	return ChannelID{Attempt: r.attempt, Edge: uint32(ref.ToVertex<<8 | ref.Input), From: uint32(ref.From), To: uint32(ref.To)}
}

func (r *remote) ConnectSender(ref task.ChannelRef, sub network.Subpartition) error {
	return r.dp.ConnectSender(r.slots[ref.To], r.id(ref), sub)
}

func (r *remote) ConnectReceiver(ref task.ChannelRef, g *network.InputGate, ch int, pool *network.Pool) error {
	return r.dp.ConnectReceiver(r.slots[ref.From], r.id(ref), g, ch, pool)
}

// ChannelID names a channel of an attempt on the data plane.
type ChannelID struct {
	Attempt        uint64
	Edge, From, To uint32
}

// DataPlane moves the buffers of channels between task managers.
type DataPlane interface {
	// Addr is the address other task managers reach this one at.
	Addr() string
	ConnectSender(peer string, id ChannelID, sub network.Subpartition) error
	ConnectReceiver(peer string, id ChannelID, g *network.InputGate, ch int, pool *network.Pool) error
	// CloseAttempt forgets every channel of an attempt.
	CloseAttempt(attempt uint64)
	Close() error
}
