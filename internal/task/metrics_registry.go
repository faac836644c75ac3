package task

import (
	"context"
	"math"
	"strconv"
	"sync/atomic"

	"github.com/weirstream/weir/internal/graph"
	"github.com/weirstream/weir/internal/metrics"
	"github.com/weirstream/weir/internal/network"
)

// This file exports every subtask's metrics to Options.Metrics under
// Flink's names: a group of scope metrics.ScopeTask per subtask and one of
// metrics.ScopeOperator per chained operator, registered when Run starts
// and removed when it returns, so a restarted job registers fresh groups.
//
// The record path pays nothing for it: records are counted in plain fields
// of the task goroutine (the network partitions' writers and the input
// readers count every record anyway, sources and sinks count theirs), and
// the task copies the totals into the registry's counters once per input
// buffer or source batch (publishCounts, from tick) and when it ends.
// Meters and gauges are computed when read; the metrics sampler samples the
// meters once a second.

// Metric names, as Flink's (task and operator scope).
const (
	metricRecordsIn         = "numRecordsIn"
	metricRecordsOut        = "numRecordsOut"
	metricBytesIn           = "numBytesIn"
	metricBytesOut          = "numBytesOut"
	metricInputWatermark    = "currentInputWatermark"
	metricOutputWatermark   = "currentOutputWatermark"
	metricPerSecond         = "PerSecond" // a counter's meter: numRecordsIn -> numRecordsInPerSecond
	metricBusy              = "busyTimeMsPerSecond"
	metricIdle              = "idleTimeMsPerSecond"
	metricBackPressured     = "backPressuredTimeMsPerSecond"
	metricAccBusy           = "accumulatedBusyTime"
	metricAccIdle           = "accumulatedIdleTime"
	metricAccBackPressured  = "accumulatedBackPressuredTime"
	metricInPoolUsage       = "buffers.inPoolUsage"
	metricOutPoolUsage      = "buffers.outPoolUsage"
	metricInputQueueLength  = "buffers.inputQueueLength"
	metricOutputQueueLength = "buffers.outputQueueLength"
	metricCheckpointDelay   = "checkpointStartDelayNanos"
	// weir's own: the subtask's state size in its last checkpoint (what
	// Flink shows per subtask in the checkpoint details).
	metricCheckpointSize      = "lastCheckpointSize"
	metricCheckpointPersisted = "lastCheckpointPersistedData"
	metricCheckpointAlignment = "checkpointAlignmentTime"
	metricDebloatedSize       = "debloatedBufferSize"
)

// MetricsReporter is implemented by operators that have metrics of their
// own (a keyed backend's state size, say). With Options.Metrics set, Run
// calls RegisterMetrics once per deployment with the operator's group
// (scope metrics.ScopeOperator), before any task starts; the gauges it
// registers are read from other goroutines and must be safe for that.
type MetricsReporter interface {
	RegisterMetrics(g *metrics.Group)
}

type metricsContextKey struct{}

type contextMetrics struct {
	reg   *metrics.Registry
	jobID string
}

// WithMetrics returns a context under which Deploy registers its metrics in
// reg, labelled with jobID, when Options.Metrics is nil. It is for
// harnesses that run jobs through the public API, which has no metrics
// option of its own (internal/bench); Options.Metrics wins over it.
func WithMetrics(ctx context.Context, reg *metrics.Registry, jobID string) context.Context {
	return context.WithValue(ctx, metricsContextKey{}, contextMetrics{reg: reg, jobID: jobID})
}

// metricsFromContext fills opts.Metrics and opts.JobID from ctx
// (WithMetrics) if opts.Metrics is nil.
func metricsFromContext(ctx context.Context, opts *Options) {
	if opts.Metrics != nil {
		return
	}
	if m, ok := ctx.Value(metricsContextKey{}).(contextMetrics); ok && m.reg != nil {
		opts.Metrics, opts.JobID = m.reg, m.jobID
	}
}

// metricsInfo is what a task keeps of its place in the job graph to name
// and count its metrics (buildTask fills it).
type metricsInfo struct {
	nodes     []*graph.Node // the chained operators, head first
	taskName  string        // the vertex name, without Flink's "(2/4)"
	vertexUID string
	// parts tells, per partition (t.partitions), which operator output
	// writes to it; chained are the edges between chained operators.
	parts   []opOutput
	chained []chainedEdge
}

type opOutput struct{ op, output int }

type chainedEdge struct {
	from, output, to int // operator positions in the chain, from's output
}

// taskExport is a subtask's metrics in the registry. The task goroutine
// publishes the counters; the watermarks are published where they change.
type taskExport struct {
	groups                                   []*metrics.Group // the task's first
	recordsIn, recordsOut, bytesIn, bytesOut *metrics.Counter
	in, out                                  countSum
	inputWM                                  atomic.Int64
	ops                                      []opExport
}

// opExport is one chained operator's metrics. in and out are nil where the
// operator's counts cannot be told apart from its neighbours' (see
// countRecipes); its counters are then not registered.
type opExport struct {
	in, out               countSum
	recordsIn, recordsOut *metrics.Counter
	inputWM, outputWM     atomic.Int64
}

// countSum adds up counts that the task goroutine may read.
type countSum []func() int64

func (c countSum) sum() int64 {
	var n int64
	for _, f := range c {
		n += f()
	}
	return n
}

// publish copies the task goroutine's counts into the registry. It runs on
// the task goroutine.
func (e *taskExport) publish(t *task) {
	e.recordsIn.Set(e.in.sum())
	e.recordsOut.Set(e.out.sum())
	e.bytesIn.Set(t.bytesIn)
	var out int64
	for _, rp := range t.partitions {
		out += rp.BytesSent()
	}
	e.bytesOut.Set(out)
	for i := range e.ops {
		o := &e.ops[i]
		if o.recordsIn != nil {
			o.recordsIn.Set(o.in.sum())
		}
		if o.recordsOut != nil {
			o.recordsOut.Set(o.out.sum())
		}
	}
}

// registerMetrics registers every subtask's groups in Options.Metrics and
// returns what removes them.
func (j *Job) registerMetrics() (unregister func()) {
	reg := j.opts.Metrics
	if reg == nil {
		return func() {}
	}
	var all []*metrics.Group
	for _, t := range j.tasks {
		t.export = t.registerMetrics(reg, j.opts.JobID, j.opts.JobName)
		all = append(all, t.export.groups...)
	}
	return func() { reg.Remove(all...) }
}

func (t *task) registerMetrics(reg *metrics.Registry, jobID, jobName string) *taskExport {
	e := &taskExport{ops: make([]opExport, len(t.ops))}
	e.inputWM.Store(math.MinInt64)
	labels := []metrics.Label{
		{Name: metrics.LabelJobID, Value: jobID},
		{Name: metrics.LabelJobName, Value: jobName},
		{Name: metrics.LabelTaskName, Value: t.info.taskName},
		{Name: metrics.LabelSubtaskIndex, Value: strconv.Itoa(t.index)},
		{Name: metrics.LabelVertexID, Value: t.info.vertexUID},
	}
	g := reg.Group(metrics.ScopeTask, labels...)
	e.groups = append(e.groups, g)
	e.recordsIn, e.recordsOut = g.Counter(metricRecordsIn), g.Counter(metricRecordsOut)
	e.bytesIn, e.bytesOut = g.Counter(metricBytesIn), g.Counter(metricBytesOut)
	for _, c := range []struct {
		name string
		c    *metrics.Counter
	}{{metricRecordsIn, e.recordsIn}, {metricRecordsOut, e.recordsOut}, {metricBytesIn, e.bytesIn}, {metricBytesOut, e.bytesOut}} {
		g.Meter(c.name+metricPerSecond, c.c.Count)
	}
	t.registerTaskGauges(g, e)

	// The task's records in are its head's; its records out are those
	// that left it: written to its network outputs, or by its sinks.
	ins, outs := t.countRecipes()
	e.in = ins[0]
	for _, rp := range t.partitions {
		e.out = append(e.out, rp.RecordsWritten)
	}
	for i, node := range t.info.nodes {
		if node.Sink && outs[i] != nil {
			e.out = append(e.out, outs[i]...)
		}
	}
	for i := range t.ops {
		o := &e.ops[i]
		o.inputWM.Store(math.MinInt64)
		o.outputWM.Store(math.MinInt64)
		node := t.info.nodes[i]
		og := reg.Group(metrics.ScopeOperator, append(labels[:len(labels):len(labels)],
			metrics.Label{Name: metrics.LabelOperatorName, Value: node.Name},
			metrics.Label{Name: metrics.LabelOperatorID, Value: graph.OperatorUID(jobName, node)})...)
		e.groups = append(e.groups, og)
		if o.in = ins[i]; o.in != nil {
			o.recordsIn = og.Counter(metricRecordsIn)
			og.Meter(metricRecordsIn+metricPerSecond, o.recordsIn.Count)
		}
		if o.out = outs[i]; o.out != nil {
			o.recordsOut = og.Counter(metricRecordsOut)
			og.Meter(metricRecordsOut+metricPerSecond, o.recordsOut.Count)
		}
		og.Gauge(metricInputWatermark, func() float64 { return float64(o.inputWM.Load()) })
		og.Gauge(metricOutputWatermark, func() float64 { return float64(o.outputWM.Load()) })
		if r, ok := t.ops[i].(MetricsReporter); ok {
			r.RegisterMetrics(og)
		}
	}
	return e
}

// registerTaskGauges registers the gauges of a task group: what Job.Metrics
// reports, the accumulated times and the input watermark.
func (t *task) registerTaskGauges(g *metrics.Group, e *taskExport) {
	m := &t.perf
	rate := func(k int) func() float64 {
		return func() float64 {
			busy, idle, bp := m.rates()
			return [3]float64{busy, idle, bp}[k]
		}
	}
	g.Gauge(metricBusy, rate(0))
	g.Gauge(metricIdle, rate(1))
	g.Gauge(metricBackPressured, rate(2))
	acc := func(k int) func() float64 {
		return func() float64 {
			if m.clock == nil {
				return 0
			}
			s, _ := m.read()
			busy := max(s.at-s.idle-s.backPressured, 0)
			return float64([3]int64{busy, s.idle, s.backPressured}[k] / 1e6)
		}
	}
	g.Gauge(metricAccBusy, acc(0))
	g.Gauge(metricAccIdle, acc(1))
	g.Gauge(metricAccBackPressured, acc(2))
	g.Gauge(metricInPoolUsage, func() float64 { _, u := t.inputUsage(); return u })
	g.Gauge(metricOutPoolUsage, func() float64 { _, u := t.outputUsage(); return u })
	g.Gauge(metricInputQueueLength, func() float64 { q, _ := t.inputUsage(); return float64(q) })
	g.Gauge(metricOutputQueueLength, func() float64 { q, _ := t.outputUsage(); return float64(q) })
	g.Gauge(metricCheckpointDelay, func() float64 { return float64(m.cpStartDelay.Load()) })
	g.Gauge(metricCheckpointSize, func() float64 { return float64(m.cpSize.Load()) })
	g.Gauge(metricCheckpointPersisted, func() float64 { return float64(m.cpPersisted.Load()) })
	g.Gauge(metricCheckpointAlignment, func() float64 { return float64(m.cpAlignment.Load()) })
	g.Gauge(metricDebloatedSize, func() float64 { return float64(t.debloat.size.Load()) })
	g.Gauge(metricInputWatermark, func() float64 { return float64(e.inputWM.Load()) })
}

// countRecipes says, per chained operator, which of the counts the task
// goroutine keeps add up to the records it took in and gave out (nil:
// unknown). The counts are: the records the input readers passed on (the
// head's input), those each network partition's writer wrote, those a
// source emitted and those a sink wrote (RecordCounter). A chained edge
// carries what another consumer of the same output got, or what a sink at
// its end wrote; an operator whose output reaches only chained operators
// that are not sinks has no count of its own (its records would have to be
// counted per record, which the record path does not pay for).
func (t *task) countRecipes() (ins, outs []countSum) {
	n := len(t.ops)
	ins, outs = make([]countSum, n), make([]countSum, n)
	source, sink := make([]func() int64, n), make([]func() int64, n)
	for i, op := range t.ops {
		c, ok := op.(RecordCounter)
		switch {
		case !ok:
		case t.info.nodes[i].Source && t.ctxs[i].CountRecords:
			source[i] = func() int64 { in, _ := c.RecordCount(); return in }
		case t.info.nodes[i].Sink:
			sink[i] = func() int64 { _, out := c.RecordCount(); return out }
		}
	}
	// recordsOn returns the records operator p gave out on output k.
	recordsOn := func(p, k int) countSum {
		for idx, po := range t.info.parts {
			if po.op == p && po.output == k {
				return countSum{t.partitions[idx].RecordsWritten}
			}
		}
		if k == 0 && source[p] != nil {
			return countSum{source[p]}
		}
		for _, ce := range t.info.chained {
			if ce.from == p && ce.output == k && sink[ce.to] != nil {
				return countSum{sink[ce.to]}
			}
		}
		return nil
	}
	for i := range t.ops {
		switch {
		case source[i] != nil:
			ins[i] = countSum{source[i]}
		case i == 0 && t.readerCounts() != nil:
			ins[i] = t.readerCounts()
		case sink[i] != nil:
			ins[i] = countSum{sink[i]}
		default:
			for _, ce := range t.info.chained {
				if ce.to == i {
					ins[i] = recordsOn(ce.from, ce.output)
				}
			}
		}
		switch {
		case sink[i] != nil:
			outs[i] = countSum{sink[i]}
		case source[i] != nil:
			outs[i] = countSum{source[i]}
		default:
			outs[i] = t.outputCounts(i, recordsOn)
		}
	}
	return ins, outs
}

// readerCounts returns the record counts of the task's input readers, nil
// if it has none or one cannot count.
func (t *task) readerCounts() countSum {
	var out countSum
	seen := map[network.BufferReader]bool{}
	for _, r := range t.readers {
		if seen[r] {
			continue
		}
		seen[r] = true
		rc, ok := r.(interface{ Records() int64 })
		if !ok {
			return nil
		}
		out = append(out, rc.Records)
	}
	return out
}

// outputCounts returns what adds up to the records operator i gave out on
// every output something consumes: nil if one of them is unknown, an empty
// (known, zero) sum if nothing consumes its outputs.
func (t *task) outputCounts(i int, recordsOn func(p, k int) countSum) countSum {
	outputs := map[int]bool{}
	for _, po := range t.info.parts {
		if po.op == i {
			outputs[po.output] = true
		}
	}
	for _, ce := range t.info.chained {
		if ce.from == i {
			outputs[ce.output] = true
		}
	}
	out := countSum{}
	for k := range outputs {
		c := recordsOn(i, k)
		if c == nil {
			return nil
		}
		out = append(out, c...)
	}
	return out
}

// inputUsage returns the buffers queued at the task's input gate and the
// share of its credit in use.
func (t *task) inputUsage() (queued int, usage float64) {
	if t.gate == nil {
		return 0, 0
	}
	queued = t.gate.QueuedBuffers()
	if used, capacity := t.gate.BufferUsage(); capacity > 0 {
		usage = float64(used) / float64(capacity)
	}
	return queued, usage
}

// outputUsage returns the buffers queued in the task's subpartitions and
// the largest share of an output pool in use.
func (t *task) outputUsage() (queued int, usage float64) {
	for _, rp := range t.partitions {
		queued += rp.QueuedBuffers()
		if used, size := rp.Pool().Usage(); size > 0 {
			usage = max(usage, float64(used)/float64(size))
		}
	}
	return queued, usage
}
