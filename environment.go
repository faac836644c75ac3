package weir

import (
	"context"
	"errors"
	"fmt"

	"github.com/weirstream/weir/internal/graph"
	"github.com/weirstream/weir/internal/task"
)

// Environment collects the dataflow of one job and executes it. Build the
// graph from one goroutine; an Environment runs one job.
type Environment struct {
	opts  Options
	graph graph.Graph
	errs  []error // problems found while the graph was declared
}

// NewEnvironment returns an environment with opts; problems with opts are
// reported by Execute.
func NewEnvironment(opts Options) *Environment {
	opts.EnsureDefaults()
	return &Environment{opts: opts}
}

// Options returns the environment's options with defaults filled in.
func (e *Environment) Options() Options { return e.opts }

func (e *Environment) errorf(format string, args ...any) {
	e.errs = append(e.errs, fmt.Errorf(format, args...))
}

// ErrInvalidJob is wrapped by every error that Execute and Plan return for a
// job that cannot run as declared (bad options, missing codecs, parallelism
// conflicts), as opposed to a failure while it ran.
var ErrInvalidJob = errors.New("invalid job")

// jobGraph validates the declared graph and chains it.
func (e *Environment) jobGraph() (*graph.JobGraph, error) {
	errs := append([]error(nil), e.errs...)
	if err := e.opts.Validate(); err != nil {
		errs = append(errs, err)
	}
	if len(e.graph.Nodes) == 0 {
		errs = append(errs, errors.New("the job has no operators: add a source with FromSource"))
	}
	hasSink := false
	for _, n := range e.graph.Nodes {
		hasSink = hasSink || n.Sink
	}
	if len(e.graph.Nodes) > 0 && !hasSink {
		errs = append(errs, errors.New("the job has no sink: add one with SinkTo"))
	}
	jg, err := graph.Build(&e.graph, graph.Options{
		Parallelism: max(e.opts.Parallelism, 1), MaxParallelism: e.opts.MaxParallelism, Chaining: !e.opts.DisableChaining,
	})
	if err != nil {
		errs = append(errs, err)
	}
	if jg != nil {
		markTimestamped(&e.graph)
		for _, v := range jg.Vertices {
			for _, edge := range v.Outputs {
				if o, ok := edge.From.Impl.(outputs); ok && !o.output(edge.Output).hasCodec() {
					errs = append(errs, fmt.Errorf("operator %q sends records of type %s over a network edge to %q, which needs a codec: set one with WithCodec",
						edge.From.Name, o.output(edge.Output).typeName(), edge.To.Name))
				}
			}
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w: %w", ErrInvalidJob, errors.Join(errs...))
	}
	return jg, nil
}

type outputs interface {
	output(i int) codecChecker
}

type timestampAssigner interface {
	assignsTimestamps() bool
}

// markTimestamped marks the edges whose records carry event timestamps:
// those downstream of a timestamp assigner. Node IDs are topological.
func markTimestamped(g *graph.Graph) {
	ts := make([]bool, len(g.Nodes))
	for _, n := range g.Nodes {
		if a, ok := n.Impl.(timestampAssigner); ok && a.assignsTimestamps() {
			ts[n.ID] = true
		}
		for _, e := range n.Inputs {
			ts[n.ID] = ts[n.ID] || ts[e.From.ID]
		}
	}
	for _, n := range g.Nodes {
		for _, e := range n.Outputs {
			e.Timestamped = ts[n.ID]
		}
	}
}

// Plan returns the job graph Execute would run, one vertex (a chain of
// operators run by one task per subtask) per line with its outgoing edges.
func (e *Environment) Plan() (string, error) {
	jg, err := e.jobGraph()
	if err != nil {
		return "", err
	}
	return jg.String(), nil
}

// Execute runs the job until every source is exhausted and every record has
// reached its sinks, a task fails, or ctx ends. It returns nil after a clean
// finish, the first failure (an *OperatorError for failures in operators),
// or ctx's error after cancellation. Every goroutine the job started has
// ended when Execute returns.
func (e *Environment) Execute(ctx context.Context, name string) error {
	j, err := e.deploy(ctx, name)
	if err != nil {
		return err
	}
	return j.Run()
}

func (e *Environment) deploy(ctx context.Context, name string) (*task.Job, error) {
	jg, err := e.jobGraph()
	if err != nil {
		return nil, err
	}
	return task.Deploy(ctx, jg, task.Options{
		JobName:                name,
		SegmentSize:            e.opts.BufferSize,
		BuffersPerChannel:      e.opts.BuffersPerChannel,
		FloatingBuffersPerGate: e.opts.FloatingBuffersPerGate,
		BufferTimeout:          e.opts.BufferTimeout,
		Logger:                 e.opts.Logger.With("job", name),
		Clock:                  e.opts.clock,
		AutoWatermarkInterval:  e.opts.AutoWatermarkInterval,
		StateDir:               e.opts.StateDir,
	})
}

// OperatorError is the error a job fails with when one of its operators
// fails: it names the operator, the subtask and the cause.
type OperatorError = task.OperatorError

// PanicError is the cause inside an OperatorError when user code panicked.
type PanicError = task.PanicError
