package task

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/weirstream/weir/internal/graph"
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
	// BufferTimeout is how long a partially filled buffer may wait before it
	// is sent; 0 means the default of 100ms, negative means only when full or
	// idle.
	BufferTimeout time.Duration
	// Logger receives the runtime's logs; default slog.Default().
	Logger *slog.Logger
	// Clock tells time for buffer timeouts; default the system clock.
	Clock Clock
}

// Defaults of Options.
const (
	DefaultSegmentSize       = 32 << 10
	DefaultBuffersPerChannel = 2
	DefaultFloatingPerGate   = 8
	DefaultBufferTimeout     = 100 * time.Millisecond
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
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Clock == nil {
		o.Clock = systemClock{}
	}
}

// Job is a deployed job graph: every subtask built and wired, not yet
// running.
type Job struct {
	graph *graph.JobGraph
	tasks []*task
	opts  Options
	ctx   context.Context
	stop  context.CancelCauseFunc
}

// Deploy builds every subtask of jg and wires their network channels. ctx
// bounds the job's life: when it ends, Run cancels every task.
func Deploy(ctx context.Context, jg *graph.JobGraph, opts Options) (*Job, error) {
	opts.ensureDefaults()
	jctx, stop := context.WithCancelCause(ctx)
	j := &Job{graph: jg, opts: opts, ctx: jctx, stop: stop}

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
			gs[i] = network.NewInputGate(channels, opts.BuffersPerChannel, opts.FloatingBuffersPerGate)
		}
		gates[v] = gs
	}
	for _, v := range jg.Vertices {
		for i := range v.Parallelism {
			t, err := j.buildTask(v, i, gates, offsets)
			if err != nil {
				stop(err)
				return nil, err
			}
			j.tasks = append(j.tasks, t)
		}
	}
	return j, nil
}

func (j *Job) buildTask(v *graph.Vertex, index int, gates map[*graph.Vertex][]*network.InputGate, offsets map[*graph.Edge]int) (*task, error) {
	t := &task{
		name:          fmt.Sprintf("%s (%d/%d)", v.Name(), index+1, v.Parallelism),
		index:         index,
		tracker:       &Tracker{},
		bufferTimeout: j.opts.BufferTimeout,
		clock:         j.opts.Clock,
		ops:           make([]Operator, len(v.Nodes)),
		ctxs:          make([]*OpContext, len(v.Nodes)),
	}
	pos := make(map[*graph.Node]int, len(v.Nodes))
	for i, n := range v.Nodes {
		pos[n] = i
	}
	inputs := make(map[*graph.Node]any, len(v.Nodes))
	// Build tail first: a node's consumers must exist before it does.
	for i := len(v.Nodes) - 1; i >= 0; i-- {
		n := v.Nodes[i]
		impl, ok := n.Impl.(NodeImpl)
		if !ok {
			return nil, fmt.Errorf("operator %q has no runtime implementation", n.Name)
		}
		var outs []any
		for _, e := range n.Outputs {
			if in, chained := inputs[e.To]; chained && j.graph.VertexOf[e.To] == v {
				outs = append(outs, in)
				continue
			}
			out, rp, err := j.networkOutput(impl, e, index, gates, offsets)
			if err != nil {
				return nil, err
			}
			t.partitions = append(t.partitions, rp)
			outs = append(outs, out)
		}
		var out any
		switch {
		case n.Sink:
		case len(outs) == 1:
			out = outs[0]
		default:
			out = impl.Fanout(outs)
		}
		parent := i
		if len(n.Inputs) == 1 {
			if p, ok := pos[n.Inputs[0].From]; ok && j.graph.VertexOf[n.Inputs[0].From] == v {
				parent = p
			}
		}
		ctx := &OpContext{
			Name: n.Name, UID: n.UID, Subtask: index, Parallelism: n.Parallelism,
			MaxParallelism: n.MaxParallelism, JobName: j.opts.JobName,
			Logger:  j.opts.Logger.With("operator", n.Name, "subtask", index),
			Tracker: t.tracker, Index: i, Parent: parent,
		}
		b, err := impl.Build(ctx, out)
		if err != nil {
			return nil, fmt.Errorf("operator %q subtask %d: %w", n.Name, index, err)
		}
		t.ops[i], t.ctxs[i] = b.Op, ctx
		inputs[n] = b.Input
	}
	if src, ok := t.ops[0].(SourceDriver); ok && v.Head().Source {
		t.source = src
	}
	if gs := gates[v]; gs != nil {
		t.gate = gs[index]
		t.readers = make([]network.BufferReader, t.gate.NumChannels())
		for _, e := range v.Inputs {
			r, err := e.From.Impl.(NodeImpl).NewReader(inputs[e.To])
			if err != nil {
				return nil, fmt.Errorf("edge %q -> %q: %w", e.From.Name, e.To.Name, err)
			}
			for k := range e.From.Parallelism {
				t.readers[offsets[e]+k] = r
			}
		}
	} else if t.source == nil {
		return nil, fmt.Errorf("vertex %q has neither a source nor an input", v.Name())
	}
	return t, nil
}

func (j *Job) networkOutput(impl NodeImpl, e *graph.Edge, index int, gates map[*graph.Vertex][]*network.InputGate, offsets map[*graph.Edge]int) (any, *network.ResultPartition, error) {
	consumers := gates[j.graph.VertexOf[e.To]]
	targets := make([]network.Target, len(consumers))
	for k, g := range consumers {
		targets[k] = g.Channel(offsets[e] + index)
	}
	size := len(targets)*j.opts.BuffersPerChannel + j.opts.FloatingBuffersPerGate
	size = max(size, len(targets)+1) // one partial buffer per subpartition and one to send
	rp := network.NewResultPartition(j.ctx, network.NewPool(size, j.opts.SegmentSize), targets)
	out, err := impl.NetworkOutput(EdgeInfo{Partitioner: e.Partitioner, Impl: e.Impl,
		Consumers: e.To.Parallelism, ConsumerMaxParallelism: e.To.MaxParallelism}, rp, index, e.From.Parallelism)
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
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		first    error
		canceled bool
	)
	j.opts.Logger.Info("job started", "tasks", len(j.tasks))
	for _, t := range j.tasks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := t.run(j.ctx)
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
