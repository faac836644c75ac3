// Package metrics is weir's metric registry: counters, gauges, meters and
// histograms kept in groups, each group a scope (Flink's metric scope,
// such as "taskmanager_job_task") and a set of labels (job_id, task_name,
// subtask_index, ...). The REST API's metric endpoints and the Prometheus
// collector both read the same registry.
//
// Metrics are cheap to update: a Counter is one atomic add, and code on a
// hot path (a task counting records) counts in a plain variable of its own
// goroutine and adds the total to the Counter per buffer or batch. Gauges
// are functions called only when a reader asks. A Meter turns a count into
// a per-second rate over a sliding window; a Histogram keeps a window of
// recent values for quantiles.
package metrics

import (
	"math"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// Scopes of Flink's metric system that weir uses: the job as seen by the
// job manager (checkpoint statistics, restarts), one subtask, and one
// operator of a subtask's chain.
const (
	ScopeJob      = "jobmanager_job"
	ScopeTask     = "taskmanager_job_task"
	ScopeOperator = "taskmanager_job_task_operator"
	// ScopeTaskManagerJob is the job as seen by the task managers: the
	// figures its subtasks share, such as the changelog storage's.
	ScopeTaskManagerJob = "taskmanager_job"
)

// Label names, as Flink's Prometheus reporter names them.
const (
	LabelJobID        = "job_id"
	LabelJobName      = "job_name"
	LabelTaskName     = "task_name"
	LabelSubtaskIndex = "subtask_index"
	LabelOperatorName = "operator_name"
	// LabelOperatorID is the operator's id (graph.OperatorUID), as Flink's
	// operator_id: it tells apart chained operators of the same name.
	LabelOperatorID = "operator_id"
	// LabelVertexID is the job vertex's REST id (a weir addition, so the
	// REST API can find a subtask's group).
	LabelVertexID = "vertex_id"
)

// Kind is the type of a metric.
type Kind uint8

// The kinds of metrics.
const (
	KindCounter Kind = iota
	KindGauge
	KindMeter
	KindHistogram
)

func (k Kind) String() string {
	switch k {
	case KindCounter:
		return "counter"
	case KindGauge:
		return "gauge"
	case KindMeter:
		return "meter"
	case KindHistogram:
		return "histogram"
	}
	return "unknown"
}

// Metric is a *Counter, *Gauge, *Meter or *Histogram.
type Metric interface {
	Kind() Kind
	// Value is the metric's current value as one number: a counter's
	// count, a gauge's value, a meter's rate per second, a histogram's
	// mean.
	Value() float64
}

// Counter is a monotonically increasing count. Its methods are safe for
// concurrent use.
type Counter struct{ n atomic.Int64 }

// Kind is KindCounter.
func (*Counter) Kind() Kind { return KindCounter }

// Inc adds one.
func (c *Counter) Inc() { c.n.Add(1) }

// Add adds n.
func (c *Counter) Add(n int64) { c.n.Add(n) }

// Set replaces the count, for counters published from a goroutine's own
// tally.
func (c *Counter) Set(n int64) { c.n.Store(n) }

// Count is the current count.
func (c *Counter) Count() int64 { return c.n.Load() }

// Value is the count.
func (c *Counter) Value() float64 { return float64(c.n.Load()) }

// Gauge reads a value when asked. Its function must be safe to call from
// any goroutine.
type Gauge struct {
	f atomic.Pointer[func() float64]
}

// Kind is KindGauge.
func (*Gauge) Kind() Kind { return KindGauge }

// Value calls the gauge's function.
func (g *Gauge) Value() float64 { return (*g.f.Load())() }

// DefaultMeterWindow is the span a Meter averages over (Flink's MeterView
// default: 60 s).
const DefaultMeterWindow = 60 * time.Second

// meterSampleInterval is the least time between two samples of a meter.
const meterSampleInterval = time.Second

// Meter is the rate per second of a count over a sliding window. It
// samples the count when read (and when Sample is called), at most once a
// second, and keeps the samples of the window: the rate covers the time
// from the oldest sample kept to now.
type Meter struct {
	count  func() int64
	now    func() time.Time
	window time.Duration

	mu      sync.Mutex
	samples []sample // oldest first
}

type sample struct {
	at time.Time
	n  int64
}

// Kind is KindMeter.
func (*Meter) Kind() Kind { return KindMeter }

// Count is the underlying count.
func (m *Meter) Count() int64 { return m.count() }

// Sample records the count now, if a second has passed since the last
// sample. Readers call it too; calling it regularly (the registry's
// Sample) makes the first reading after a quiet period accurate.
func (m *Meter) Sample() {
	m.mu.Lock()
	m.sampleLocked(m.now())
	m.mu.Unlock()
}

func (m *Meter) sampleLocked(now time.Time) {
	if n := len(m.samples); n > 0 && now.Sub(m.samples[n-1].at) < meterSampleInterval {
		return
	}
	m.samples = append(m.samples, sample{now, m.count()})
	// Keep one sample at or before the window's start.
	cut := 0
	for cut+1 < len(m.samples) && now.Sub(m.samples[cut+1].at) >= m.window {
		cut++
	}
	if cut > 0 {
		m.samples = slices.Delete(m.samples, 0, cut)
	}
}

// Rate is the count's increase per second over the window, 0 before two
// samples a second apart exist.
func (m *Meter) Rate() float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	m.sampleLocked(now)
	if len(m.samples) == 0 {
		return 0
	}
	first := m.samples[0]
	d := now.Sub(first.at)
	if d < meterSampleInterval {
		return 0
	}
	return float64(m.count()-first.n) / d.Seconds()
}

// Value is the rate per second.
func (m *Meter) Value() float64 { return m.Rate() }

// DefaultHistogramWindow is how many recent values a Histogram keeps.
const DefaultHistogramWindow = 1024

// Histogram keeps the last values it was given, for quantiles, and counts
// all of them.
type Histogram struct {
	mu     sync.Mutex
	values []float64 // ring
	next   int
	full   bool
	count  int64
	sum    float64
}

// Kind is KindHistogram.
func (*Histogram) Kind() Kind { return KindHistogram }

// Update adds a value.
func (h *Histogram) Update(v float64) {
	h.mu.Lock()
	h.values[h.next] = v
	h.next++
	if h.next == len(h.values) {
		h.next, h.full = 0, true
	}
	h.count++
	h.sum += v
	h.mu.Unlock()
}

// Value is the mean of the values in the window.
func (h *Histogram) Value() float64 { return h.Snapshot().Mean }

// Snapshot summarises the window.
func (h *Histogram) Snapshot() HistogramSnapshot {
	h.mu.Lock()
	n := h.next
	if h.full {
		n = len(h.values)
	}
	vals := slices.Clone(h.values[:n])
	count, sum := h.count, h.sum
	h.mu.Unlock()
	s := Summarize(vals, count)
	s.Sum = sum
	return s
}

// HistogramSnapshot is a summary of a window of values.
type HistogramSnapshot struct {
	// Count is the number of values ever added; the other fields describe
	// the window (all zero when it is empty).
	Count          int64
	Min, Max, Mean float64
	// Sum is the sum of every value ever added (a Histogram's; Summarize
	// leaves it 0), for Prometheus summaries.
	Sum    float64
	sorted []float64
}

// Summarize summarises vals (reordering them); count is reported as the
// Count.
func Summarize(vals []float64, count int64) HistogramSnapshot {
	s := HistogramSnapshot{Count: count}
	if len(vals) == 0 {
		return s
	}
	sort.Float64s(vals)
	s.sorted = vals
	s.Min, s.Max = vals[0], vals[len(vals)-1]
	var sum float64
	for _, v := range vals {
		sum += v
	}
	s.Mean = sum / float64(len(vals))
	return s
}

// Quantile is the q-quantile (0 <= q <= 1) of the window, interpolated
// between the two nearest values; 0 for an empty window.
func (s HistogramSnapshot) Quantile(q float64) float64 {
	n := len(s.sorted)
	if n == 0 {
		return 0
	}
	pos := math.Max(0, math.Min(1, q)) * float64(n-1)
	lo := int(pos)
	if lo >= n-1 {
		return s.sorted[n-1]
	}
	frac := pos - float64(lo)
	return s.sorted[lo] + frac*(s.sorted[lo+1]-s.sorted[lo])
}

// Len is the number of values in the window.
func (s HistogramSnapshot) Len() int { return len(s.sorted) }
