package task

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weirstream/weir/internal/checkpoint/barrier"
	"github.com/weirstream/weir/internal/checkpoint/metadata"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/clock"
	"github.com/weirstream/weir/internal/graph"
	"github.com/weirstream/weir/internal/keygroup"
	"github.com/weirstream/weir/internal/metrics"
	"github.com/weirstream/weir/internal/network"
)

// Options configures Execute. Zero fields take the documented defaults.
type Options struct {
	// JobName names the job in logs and operator contexts.
	JobName string
	// SegmentSize is the size of a network buffer in bytes; default 32 KiB.
	SegmentSize int
	// BuffersPerChannel is the exclusive credit of every input channel;
	// default 2.
	BuffersPerChannel int
	// FloatingBuffersPerGate is the floating credit of every input gate;
	// default 8. Negative means 0.
	FloatingBuffersPerGate int
	// OverdraftBuffers is how many buffers an output partition lends
	// beyond its pool to a writer in the middle of a record or source
	// batch, so that the work before a barrier finishes without waiting
	// for backpressure; default 5, negative means 0
	// (taskmanager.network.memory.max-overdraft-buffers-per-gate).
	OverdraftBuffers int
	// BufferTimeout is how long a partially filled buffer may wait before it
	// is sent; 0 means the default of 100ms, negative means only when full or
	// idle.
	BufferTimeout time.Duration
	// Logger receives the runtime's logs; default slog.Default().
	Logger *slog.Logger
	// Clock tells processing time; default the system clock.
	Clock clock.Clock
	// AutoWatermarkInterval is how often watermark assigners emit; default
	// 200ms.
	AutoWatermarkInterval time.Duration
	// StateDir is the root of local working directories for operator state
	// (Pebble); default "weir-data/state".
	StateDir string

	// Checkpoints is where the asynchronous phase writes state files;
	// nil: snapshots are taken and acknowledged but not persisted.
	Checkpoints *storage.Storage
	// CheckpointJob is the job's directory in Checkpoints
	// (storage.SanitizeJob of the job name).
	CheckpointJob string
	// CheckpointMode is how tasks with several inputs treat barriers:
	// barrier.ExactlyOnce (aligned, the default) or barrier.AtLeastOnce.
	CheckpointMode barrier.Mode
	// FinalCheckpoint makes every task whose input ended wait, before it
	// finishes, until a checkpoint it took after the end completes, so that
	// two-phase-commit sinks commit the last records. The driver triggers
	// that checkpoint once SourcesEnded is closed.
	FinalCheckpoint bool
	// CheckpointInterval is the job's periodic checkpoint interval, for
	// operators that check their settings against it (a transactional
	// sink's timeout); 0 when the job takes no periodic checkpoints.
	CheckpointInterval time.Duration
	// Restore is the checkpoint the job starts from; nil for a fresh start.
	// Its files are read from RestoreStorage.
	Restore        *metadata.Checkpoint
	RestoreStorage *storage.Storage
	RestoreJob     string
	// RestoreOwned says the job owns the restored checkpoint (resumed
	// with latest, or restored in CLAIM mode): its shared files may be
	// referenced by new checkpoints instead of uploaded again, when they
	// are in the job's own directory. Otherwise (NO_CLAIM, a savepoint)
	// the first checkpoint uploads everything and depends on nothing of
	// the restored snapshot.
	RestoreOwned bool
	// AllowNonRestoredState drops, with a warning, the state of operators
	// the job no longer has instead of failing
	// (execution.state-recovery.ignore-unclaimed-state).
	AllowNonRestoredState bool
	// RunID tells this deployment's files (a sink's) from those of earlier
	// runs; default a random hex string.
	RunID string
	// Hooks inject failures in tests.
	Hooks FaultHooks
	// Metrics, if set, receives every subtask's metrics (a group of scope
	// metrics.ScopeTask per subtask and metrics.ScopeOperator per chained
	// operator, registered when Run starts and removed when it returns;
	// see metrics_registry.go); JobID labels them. Sources' own counts
	// (a source operator's numRecordsOut, a source task's numRecordsIn)
	// need CountRecords, which costs an indirect call per record; without
	// it they are known only where the source writes straight to the
	// network. Default: the registry of Deploy's context (WithMetrics),
	// else none.
	Metrics *metrics.Registry
	JobID   string
	// CountRecords makes tasks publish their operators' record counts
	// for RecordCounts (per buffer or batch), and sources count theirs.
	CountRecords bool
	// Incremental asks backends that can (pebble) for native, incremental
	// snapshots instead of full canonical streams.
	Incremental bool
	// ChannelStateFileSubtasks is how many subtasks share one
	// channel-state file per checkpoint; default 5, 1 is a file per
	// subtask (execution.checkpointing.unaligned.max-subtasks-per-channel-state-file).
	ChannelStateFileSubtasks int
	// SkipChannelState restores Restore without its in-flight data
	// (execution.state-recovery.without-channel-state.checkpoint-id): the
	// records an unaligned checkpoint persisted in the network are lost.
	SkipChannelState bool
	// LocalRecovery keeps local copies of the subtasks' keyed state and
	// restores from them (localrecovery.go); default off.
	LocalRecovery LocalRecoveryOptions
	// Debloat, if set, turns buffer debloating on: every subtask with an
	// input gate sizes the buffers its senders fill to its throughput
	// (network.Debloater). Zero fields take Flink's defaults (a negative
	// threshold means 0); MaxSize and Buffers are set per gate (the
	// segment size, the gate's credit capacity). nil: buffers are sent
	// when full.
	Debloat *network.DebloatConfig
	// Placement, if set, deploys part of the job: the subtasks it calls
	// local, in a task manager of a cluster. nil deploys every subtask.
	Placement *Placement
}

// Placement is the part of a job one process runs (a task manager's
// slots) and how its channels reach the subtasks that run elsewhere.
type Placement struct {
	// Local reports whether subtask subtask of vertex (graph.Vertex.ID)
	// runs in this process; nil: every subtask does.
	Local func(vertex, subtask int) bool
	// Remote connects the channels between a local and a remote subtask.
	Remote RemoteExchange
	// Loopback sends every channel through Remote, also those between
	// two local subtasks (both of its ends are connected here): the
	// transport's tests run with the jobs of the in-process tests.
	Loopback bool
}

// ChannelRef names one channel of a job graph the same way in every
// process that runs the job: input Input of consumer vertex ToVertex
// (its index in graph.Vertex.Inputs), from producer subtask From to
// consumer subtask To.
type ChannelRef struct {
	ToVertex, Input, From, To int
}

// RemoteExchange is the network transport between processes (a TCP
// connection per pair of task managers): it implements the sender and
// receiver sides of the exchange contract (network.Subpartition,
// network.InputChannel) for channels whose other end runs elsewhere.
type RemoteExchange interface {
	// ConnectSender feeds the channel ref, whose consumer runs elsewhere,
	// from the local producer's subpartition sub.
	ConnectSender(ref ChannelRef, sub network.Subpartition) error
	// ConnectReceiver delivers the channel ref, whose producer runs
	// elsewhere, into input channel ch of gate g; received data is read
	// into buffers of pool, which the gate's credit keeps from running dry.
	ConnectReceiver(ref ChannelRef, g *network.InputGate, ch int, pool *network.Pool) error
}

func (o *Options) local(vertex, subtask int) bool {
	return o.Placement == nil || o.Placement.Local == nil || o.Placement.Local(vertex, subtask)
}

// remoteInput reports whether the channel from producer subtask subtask of
// vertex into a local consumer goes through Placement.Remote.
func (o *Options) remoteInput(vertex, subtask int) bool {
	return o.Placement != nil && (o.Placement.Loopback || !o.local(vertex, subtask))
}

// FaultHooks inject failures, for tests. Nil fields do nothing.
type FaultHooks struct {
	// Sync runs at the start of a subtask's synchronous snapshot phase;
	// an error fails the subtask.
	Sync func(vertex, subtask int, id int64) error
	// Upload runs at the start of the asynchronous phase; an error declines
	// the checkpoint.
	Upload func(vertex, subtask int, id int64) error
	// ChannelState runs before a channel-state file of checkpoint id is
	// written; an error fails that write (the checkpoint is declined).
	ChannelState func(id int64) error
}

// Defaults of Options.
const (
	DefaultSegmentSize       = 32 << 10
	DefaultBuffersPerChannel = 2
	DefaultFloatingPerGate   = 8
	DefaultBufferTimeout     = 100 * time.Millisecond
	DefaultOverdraftBuffers  = 5
	// DefaultChannelStateFileSubtasks is Flink's default of
	// execution.checkpointing.unaligned.max-subtasks-per-channel-state-file.
	DefaultChannelStateFileSubtasks = 5
)

func (o *Options) ensureDefaults() {
	if o.SegmentSize <= 0 {
		o.SegmentSize = DefaultSegmentSize
	}
	if o.BuffersPerChannel <= 0 {
		o.BuffersPerChannel = DefaultBuffersPerChannel
	}
	if o.FloatingBuffersPerGate == 0 {
		o.FloatingBuffersPerGate = DefaultFloatingPerGate
	} else if o.FloatingBuffersPerGate < 0 {
		o.FloatingBuffersPerGate = 0
	}
	if o.BufferTimeout == 0 {
		o.BufferTimeout = DefaultBufferTimeout
	}
	if o.ChannelStateFileSubtasks <= 0 {
		o.ChannelStateFileSubtasks = DefaultChannelStateFileSubtasks
	}
	if o.OverdraftBuffers == 0 {
		o.OverdraftBuffers = DefaultOverdraftBuffers
	} else if o.OverdraftBuffers < 0 {
		o.OverdraftBuffers = 0
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Clock == nil {
		o.Clock = clock.Real()
	}
	if o.AutoWatermarkInterval <= 0 {
		o.AutoWatermarkInterval = 200 * time.Millisecond
	}
	if o.StateDir == "" {
		o.StateDir = filepath.Join("weir-data", "state")
	}
	if o.RunID == "" {
		// 64 bits: a run's file names must not collide with those of an
		// earlier run that retained checkpoints still reference (changelog
		// segments and materializations are named after the run).
		var b [8]byte
		_, _ = rand.Read(b[:])
		o.RunID = fmt.Sprintf("%x", b)
	}
}

// Job is a deployed job graph: every subtask built and wired, not yet
// running.
type Job struct {
	// The run's local state directory is claimed (created and locked) by
	// the first operator that needs it, and released by Run at the end.
	stateMu      sync.Mutex
	stateLock    stateDirLock
	stateCreated []string
	stateErr     error
	stateClaimed bool
	staleSwept   bool

	acks         chan Ack
	sourcesEnded chan struct{}
	sourcesLeft  atomic.Int64
	restored     map[string]*restoredOp
	local        *localRecovery                     // nil: no local recovery
	targets      targets                            // savepoints in progress
	asyncs       asyncCancels                       // ends aborted snapshots' uploads
	channelState map[string][]metadata.ChannelState // restored in-flight data by edge
	chanGroups   []*channelStateGroup
	stateDir     string
	graph        *graph.JobGraph
	tasks        []*task
	opts         Options
	ctx          context.Context
	stop         context.CancelCauseFunc

	// restoreDamage is the first error of a restored read that found the
	// checkpoint's data damaged (ErrRestoreData), for Run.
	restoreDamage atomic.Pointer[error]
}

// Deploy builds every subtask of jg and wires their network channels. ctx
// bounds the job's life: when it ends, Run cancels every task.
func Deploy(ctx context.Context, jg *graph.JobGraph, opts Options) (*Job, error) {
	opts.ensureDefaults()
	metricsFromContext(ctx, &opts)
	jctx, stop := context.WithCancelCause(ctx)
	j := &Job{graph: jg, opts: opts, ctx: jctx, stop: stop, acks: make(chan Ack, 1024), sourcesEnded: make(chan struct{})}
	if opts.Restore != nil {
		var skip func(*metadata.Operator)
		if opts.AllowNonRestoredState {
			skip = func(op *metadata.Operator) {
				opts.Logger.Warn(fmt.Sprintf("Skipping the state of operator uid %q (%s): the job has no operator with that uid and non-restored state is allowed.", op.UID, op.Name))
			}
		}
		r, err := mapRestoredStateAllow(jg, opts.Restore, skip)
		if err != nil {
			stop(err)
			return nil, err
		}
		j.restored = r
		if !opts.SkipChannelState {
			j.channelState = channelStateByEdge(opts.Restore)
			if err := checkChannelStateEdges(jg, opts.Restore.ID, j.channelState); err != nil {
				stop(err)
				return nil, err
			}
		}
		if err := j.checkRestoredFiles(); err != nil {
			stop(err)
			return nil, err
		}
	}
	j.openLocalRecovery()
	// Each run gets its own state directory, so concurrent runs of a job do
	// not collide; Run deletes it at the end.
	var suffix [6]byte
	_, _ = rand.Read(suffix[:])
	j.stateDir = filepath.Join(opts.StateDir, fmt.Sprintf("%s-%x", sanitize(opts.JobName), suffix))

	// Input gates first: one per consumer subtask, channel offsets per edge.
	gates := make(map[*graph.Vertex][]*network.InputGate)
	offsets := make(map[*graph.Edge]int)
	for _, v := range jg.Vertices {
		channels := 0
		for _, e := range v.Inputs {
			offsets[e] = channels
			channels += e.From.Parallelism
		}
		if channels == 0 {
			continue
		}
		gs := make([]*network.InputGate, v.Parallelism)
		for i := range gs {
			if opts.local(v.ID, i) {
				gs[i] = network.NewInputGate(channels, opts.BuffersPerChannel, opts.FloatingBuffersPerGate)
			}
		}
		gates[v] = gs
	}
	for _, v := range jg.Vertices {
		for i := range v.Parallelism {
			if !opts.local(v.ID, i) {
				continue
			}
			t, err := j.buildTask(v, i, gates, offsets)
			if err != nil {
				stop(err)
				return nil, err
			}
			j.tasks = append(j.tasks, t)
		}
	}
	if err := j.connectRemoteInputs(gates, offsets); err != nil {
		stop(err)
		return nil, err
	}
	if j.sourcesLeft.Load() == 0 {
		// A task manager may run no source subtask.
		close(j.sourcesEnded)
	}
	j.groupChannelState(opts.ChannelStateFileSubtasks)
	return j, nil
}

// connectRemoteInputs connects the channels of local input gates whose
// producers run in another process (all of them with Placement.Loopback).
func (j *Job) connectRemoteInputs(gates map[*graph.Vertex][]*network.InputGate, offsets map[*graph.Edge]int) error {
	if j.opts.Placement == nil {
		return nil
	}
	for _, v := range j.graph.Vertices {
		for i, g := range gates[v] {
			if g == nil {
				continue
			}
			// Received data is read into the gate's own pool: its
			// credit capacity, which credit keeps it from exceeding.
			var pool *network.Pool
			for in, e := range v.Inputs {
				from := j.graph.VertexOf[e.From]
				for k := range from.Parallelism {
					if !j.opts.remoteInput(from.ID, k) {
						continue
					}
					if pool == nil {
						pool = network.NewPool(j.opts.BuffersPerChannel*g.NumChannels()+j.opts.FloatingBuffersPerGate, j.opts.SegmentSize)
					}
					ref := ChannelRef{ToVertex: v.ID, Input: in, From: k, To: i}
					if err := j.opts.Placement.Remote.ConnectReceiver(ref, g, offsets[e]+k, pool); err != nil {
						return fmt.Errorf("connect %s (%d) <- %s (%d): %w", v.Name(), i+1, from.Name(), k+1, err)
					}
				}
			}
		}
	}
	return nil
}

func (j *Job) buildTask(v *graph.Vertex, index int, gates map[*graph.Vertex][]*network.InputGate, offsets map[*graph.Edge]int) (*task, error) {
	n := len(v.Nodes)
	t := &task{
		name:          fmt.Sprintf("%s (%d/%d)", v.Name(), index+1, v.Parallelism),
		vertex:        v.ID,
		index:         index,
		parallelism:   v.Parallelism,
		tracker:       &Tracker{Timestamp: NoTimestamp},
		bufferTimeout: j.opts.BufferTimeout,
		clock:         j.opts.Clock,
		ops:           make([]Operator, n),
		ctxs:          make([]*OpContext, n),
		children:      make([][]int, n),
		parts:         make([][]*network.ResultPartition, n),
		info:          metricsInfo{nodes: v.Nodes, taskName: v.Name(), vertexUID: graph.VertexUID(j.opts.JobName, v)},
	}
	pos := make(map[*graph.Node]int, n)
	for i, node := range v.Nodes {
		pos[node] = i
	}
	inputs := make(map[*graph.Node][2]any, n)
	// Build tail first: a node's consumers must exist before it does.
	for i := n - 1; i >= 0; i-- {
		node := v.Nodes[i]
		impl, ok := node.Impl.(NodeImpl)
		if !ok {
			return nil, fmt.Errorf("operator %q has no runtime implementation", node.Name)
		}
		perOutput := make([][]any, impl.NumOutputs())
		for _, e := range node.Outputs {
			if e.Output >= len(perOutput) {
				return nil, fmt.Errorf("operator %q has no output %d", node.Name, e.Output)
			}
			if in, chained := inputs[e.To]; chained && j.graph.VertexOf[e.To] == v && e.Input == 0 {
				perOutput[e.Output] = append(perOutput[e.Output], in[0])
				t.children[i] = append(t.children[i], pos[e.To])
				t.info.chained = append(t.info.chained, chainedEdge{from: i, output: e.Output, to: pos[e.To]})
				continue
			}
			out, rp, err := j.networkOutput(impl.Output(e.Output), e, index, t.tracker, gates, offsets)
			if err != nil {
				return nil, err
			}
			t.partitions = append(t.partitions, rp)
			t.info.parts = append(t.info.parts, opOutput{op: i, output: e.Output})
			t.outParts = append(t.outParts, outPartition{edge: edgeKey(e), unaligned: unalignedEdge(e.Partitioner), consumers: e.To.Parallelism})
			t.parts[i] = append(t.parts[i], rp)
			perOutput[e.Output] = append(perOutput[e.Output], out)
		}
		outs := make([]any, len(perOutput))
		for k, o := range perOutput {
			if len(o) == 1 {
				outs[k] = o[0]
			} else {
				outs[k] = impl.Output(k).Fanout(o)
			}
		}
		parent := i
		keyed := false
		for _, e := range node.Inputs {
			keyed = keyed || e.Partitioner == network.Hash
			if p, ok := pos[e.From]; ok && len(node.Inputs) == 1 && j.graph.VertexOf[e.From] == v {
				parent = p
			}
		}
		kgStart, kgEnd := keygroup.Range(index, node.MaxParallelism, node.Parallelism)
		ctx := &OpContext{
			Name: node.Name, UID: node.UID, Subtask: index, Parallelism: node.Parallelism,
			MaxParallelism: node.MaxParallelism, JobName: j.opts.JobName,
			Logger:  j.opts.Logger.With("operator", node.Name, "subtask", index),
			Tracker: t.tracker, Index: i, Parent: parent,
			KeyGroupStart: kgStart, KeyGroupEnd: kgEnd, Keyed: keyed,
			AutoWatermarkInterval: j.opts.AutoWatermarkInterval,
			StateDir:              filepath.Join(j.stateDir, fmt.Sprintf("%s_%d", sanitize(node.UID), index)),
			Checkpointing:         j.opts.FinalCheckpoint,
			CheckpointInterval:    j.opts.CheckpointInterval,
			RunID:                 j.opts.RunID,
			CountRecords:          j.opts.CountRecords,
			Incremental:           j.opts.Incremental,
			Storage:               j.opts.Checkpoints,
			StorageJob:            j.opts.CheckpointJob,
			task:                  t,
			claimDir:              j.claimStateDir,
		}
		if r := j.restored[node.UID]; r != nil {
			ctx.Restored = r.forSubtask(index, node.Parallelism, kgStart, kgEnd, j.openRestored)
			ctx.Restored.OwnStorage = j.opts.RestoreOwned && j.opts.Checkpoints != nil && j.opts.RestoreStorage.Same(j.opts.Checkpoints) && j.opts.RestoreJob == j.opts.CheckpointJob
		}
		t.ctxs[i] = ctx
		b, err := impl.Build(ctx, outs)
		if err != nil {
			return nil, fmt.Errorf("operator %q subtask %d: %w", node.Name, index, err)
		}
		t.ops[i] = b.Op
		inputs[node] = [2]any{b.Input, b.Input2}
	}
	if src, ok := t.ops[0].(SourceDriver); ok && v.Head().Source {
		t.source = src
	}
	t.acks = j.acks
	t.store, t.storeJob, t.hooks, t.final = j.opts.Checkpoints, j.opts.CheckpointJob, j.opts.Hooks, j.opts.FinalCheckpoint
	t.runID = j.opts.RunID
	t.openRestored = j.openRestored
	t.targets = &j.targets
	t.local = j.local
	t.asyncs = &j.asyncs
	if t.source != nil {
		j.sourcesLeft.Add(1)
		t.onEnded = func() {
			if j.sourcesLeft.Add(-1) == 0 {
				close(j.sourcesEnded)
			}
		}
	}
	if gs := gates[v]; gs != nil {
		t.gate = gs[index]
		t.barriers = barrier.New(t.gate.NumChannels(), j.opts.CheckpointMode)
		t.readers = make([]network.BufferReader, t.gate.NumChannels())
		t.inChans = make([]inChannel, t.gate.NumChannels())
		for _, e := range v.Inputs {
			in := inputs[e.To][min(e.Input, 1)]
			if in == nil {
				return nil, fmt.Errorf("edge %q -> %q: operator %q has no input %d", e.From.Name, e.To.Name, e.To.Name, e.Input)
			}
			r, err := e.From.Impl.(NodeImpl).Output(e.Output).NewReader(in, e.Timestamped, t.tracker)
			if err != nil {
				return nil, fmt.Errorf("edge %q -> %q: %w", e.From.Name, e.To.Name, err)
			}
			for k := range e.From.Parallelism {
				t.readers[offsets[e]+k] = r
				t.inChans[offsets[e]+k] = inChannel{edge: edgeKey(e), producer: k}
			}
			rcs, err := j.recoveredChannels(v, index, e, r, in, t.tracker)
			if err != nil {
				return nil, fmt.Errorf("edge %q -> %q: %w", e.From.Name, e.To.Name, err)
			}
			t.replay = append(t.replay, rcs...)
		}
	} else if t.source == nil {
		return nil, fmt.Errorf("vertex %q has neither a source nor an input", v.Name())
	}
	t.init()
	t.startMetrics(j.opts.Clock)
	t.initDebloat(j.opts.Debloat, j.opts.SegmentSize)
	return t, nil
}

// sanitize keeps a uid usable as a file name.
// SanitizeName makes s usable in a checkpoint file name: every byte
// outside [A-Za-z0-9._-] becomes '_'.
func SanitizeName(s string) string { return sanitize(s) }

func sanitize(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			b[i] = '_'
		}
	}
	return string(b)
}

func (j *Job) networkOutput(impl OutputImpl, e *graph.Edge, index int, tr *Tracker, gates map[*graph.Vertex][]*network.InputGate, offsets map[*graph.Edge]int) (any, *network.ResultPartition, error) {
	to := j.graph.VertexOf[e.To]
	consumers := gates[to]
	targets := make([]network.Target, len(consumers))
	for k, g := range consumers {
		// In process, each subpartition is connected straight to its
		// consumer's input channel; to a consumer in another process,
		// through the remote exchange.
		sub := network.NewPipelinedSubpartition()
		if g != nil && !(j.opts.Placement != nil && j.opts.Placement.Loopback) {
			network.ConnectLocal(sub, g, offsets[e]+index)
		} else if err := j.opts.Placement.Remote.ConnectSender(ChannelRef{ToVertex: to.ID, Input: slices.Index(to.Inputs, e), From: index, To: k}, sub); err != nil {
			return nil, nil, fmt.Errorf("connect %s (%d) -> %s (%d): %w", e.From.Name, index+1, to.Name(), k+1, err)
		}
		targets[k] = sub
	}
	size := len(targets)*j.opts.BuffersPerChannel + j.opts.FloatingBuffersPerGate
	size = max(size, len(targets)+1) // one partial buffer per subpartition and one to send
	rp := network.NewResultPartition(j.ctx, network.NewPoolOverdraft(size, j.opts.OverdraftBuffers, j.opts.SegmentSize), targets)
	out, err := impl.NetworkOutput(EdgeInfo{Partitioner: e.Partitioner, Impl: e.Impl,
		Consumers: e.To.Parallelism, ConsumerMaxParallelism: e.To.MaxParallelism,
		Timestamped: e.Timestamped, Tracker: tr}, rp, index, e.From.Parallelism)
	if err != nil {
		return nil, nil, fmt.Errorf("edge %q -> %q: %w", e.From.Name, e.To.Name, err)
	}
	return out, rp, nil
}

// Run runs every subtask until the job finishes, fails or its context ends,
// and returns the first error: the failure of the first task that failed on
// its own, not the cancellations that followed. Every goroutine has returned
// when Run does.
func (j *Job) Run() error {
	defer j.stop(nil)
	defer j.releaseStateDir()
	// Every run cleans up after dead runs, whatever its backend: a run
	// killed while it kept Pebble state left its directory behind, and the
	// run resuming it may keep no local state at all.
	j.sweepStaleStateDirs()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		first    error
		canceled bool
	)
	j.opts.Logger.Info("job started", "tasks", len(j.tasks))
	defer j.registerMetrics()()
	defer j.sampleMetrics()()
	for _, t := range j.tasks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := t.run(j.ctx)
			t.perf.finish()
			if err == nil {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if errors.Is(err, ErrTaskCanceled) {
				canceled = true
				return
			}
			if first == nil {
				first = err
				j.opts.Logger.Info("task failed; canceling the job", "task", t.name, "err", err)
				var pe *PanicError
				if errors.As(err, &pe) {
					j.opts.Logger.Debug("panic stack", "task", t.name, "stack", string(pe.Stack))
				}
				j.stop(err)
			}
		}()
	}
	wg.Wait()
	if d := j.restoreDamage.Load(); first != nil && d != nil && !errors.Is(first, ErrRestoreData) {
		// The failure came from a restore that stopped before it saw the
		// damage (a parse error in a file whose checksum then failed),
		// or from elsewhere: restoring again fails all the same.
		first = fmt.Errorf("%w (%w)", first, *d)
	}
	if first != nil {
		return first
	}
	if canceled {
		if err := context.Cause(j.ctx); err != nil {
			return err
		}
		return context.Canceled
	}
	return nil
}

// Execute deploys jg and runs it to the end; see Deploy and Job.Run.
func Execute(ctx context.Context, jg *graph.JobGraph, opts Options) error {
	j, err := Deploy(ctx, jg, opts)
	if err != nil {
		return err
	}
	return j.Run()
}

// Post queues m to run on the goroutine of subtask subtask of vertex
// vertex (graph.Vertex.ID), between input buffers or source batches, also
// while the subtask is idle or backpressured. It reports false if there is
// no such subtask.
func (j *Job) Post(vertex, subtask int, m Mail) bool {
	for _, t := range j.tasks {
		if t.vertex == vertex && t.index == subtask {
			t.mail.post(m)
			return true
		}
	}
	return false
}

// NetworkMemory returns the bytes of network buffers the job's pools have
// allocated so far and the most they may ever allocate.
func (j *Job) NetworkMemory() (allocated, capacity int64) {
	for _, t := range j.tasks {
		for _, rp := range t.partitions {
			allocated += rp.Pool().AllocatedBytes()
			capacity += int64(rp.Pool().Size() * rp.Pool().SegmentSize())
		}
	}
	return allocated, capacity
}

// TaskInfo names one subtask.
type TaskInfo struct {
	Vertex, Subtask int
	// Name is the vertex name with Flink's "(2/4)" suffix.
	Name string
}

// Tasks lists every subtask of the job.
func (j *Job) Tasks() []TaskInfo {
	out := make([]TaskInfo, len(j.tasks))
	for i, t := range j.tasks {
		out[i] = TaskInfo{Vertex: t.vertex, Subtask: t.index, Name: t.name}
	}
	return out
}

// RecordCounts returns, with Options.CountRecords, the records the sources
// emitted and the sinks wrote so far, as the tasks last
// published them (per input buffer or source batch, and at their end).
func (j *Job) RecordCounts() (in, out int64) {
	for _, t := range j.tasks {
		in += t.recordsIn.Load()
		out += t.recordsOut.Load()
	}
	return in, out
}

// Cancel stops every task with cause; Run then returns it.
func (j *Job) Cancel(cause error) { j.stop(cause) }

// claimStateDir creates and locks the run's local state directory on first
// use; jobs that keep no local state never create anything.
func (j *Job) claimStateDir() error {
	j.stateMu.Lock()
	defer j.stateMu.Unlock()
	if !j.stateClaimed {
		j.stateClaimed = true
		j.stateLock, j.stateCreated, j.stateErr = claimStateDir(j.stateDir)
		if j.stateErr != nil {
			j.stateErr = fmt.Errorf("local state directory %s: %w", j.stateDir, j.stateErr)
		}
	}
	return j.stateErr
}

// sweepStaleStateDirs deletes, once per run, the state directories of dead
// runs under Options.StateDir. It creates nothing: without a StateDir
// there is nothing to sweep.
func (j *Job) sweepStaleStateDirs() {
	j.stateMu.Lock()
	defer j.stateMu.Unlock()
	if !j.staleSwept {
		j.staleSwept = true
		removeStaleStateDirs(j.opts.StateDir, j.stateDir, j.opts.Logger)
	}
}

func (j *Job) releaseStateDir() {
	j.stateMu.Lock()
	defer j.stateMu.Unlock()
	if j.stateLock == nil {
		return
	}
	if err := releaseStateDir(j.stateLock, j.stateDir, j.stateCreated); err != nil {
		j.opts.Logger.Warn("could not delete the job's state directory", "dir", j.stateDir, "err", err)
	}
	j.stateLock = nil
}
