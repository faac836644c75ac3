package cluster

import (
	"math"
	"slices"
	"strings"
	"sync"

	"github.com/weirstream/weir/internal/metrics"
	"github.com/weirstream/weir/internal/task"
)

// The metrics of the subtasks a task manager runs reach the job manager
// with the part's counts, once a second: their groups of Flink's task and
// operator scopes (records, bytes, watermarks, busy and back-pressured
// time, state sizes), mirrored in the job manager's registry under the
// same scopes and labels, and their task.TaskMetrics. So the job
// manager's REST API, dashboard and Prometheus endpoint show every
// subtask of the job wherever it runs, one second behind at most.

// metricGroup is a snapshot of one metrics group of a part.
type metricGroup struct {
	Scope  string          `json:"scope"`
	Labels []metrics.Label `json:"labels"`
	Values []metricValue   `json:"values"`
}

// metricValue is one metric's value; Counter says it is a counter.
type metricValue struct {
	Name    string  `json:"name"`
	Value   float64 `json:"value"`
	Counter bool    `json:"counter,omitempty"`
}

// snapshotGroups reads every metric of reg. Histograms are left out (a
// summary does not cross as one value), and so are values JSON cannot
// carry (NaN, infinities: a watermark not yet set).
func snapshotGroups(reg *metrics.Registry) []metricGroup {
	if reg == nil {
		return nil
	}
	var out []metricGroup
	for _, g := range reg.Groups() {
		mg := metricGroup{Scope: g.Scope(), Labels: g.Labels()}
		g.Each(func(name string, m metrics.Metric) {
			if m.Kind() == metrics.KindHistogram {
				return
			}
			if v := m.Value(); !math.IsNaN(v) && !math.IsInf(v, 0) {
				mg.Values = append(mg.Values, metricValue{Name: name, Value: v, Counter: m.Kind() == metrics.KindCounter})
			}
		})
		out = append(out, mg)
	}
	return out
}

// finiteTaskMetrics returns ms with every value JSON cannot carry set to 0.
func finiteTaskMetrics(ms []task.TaskMetrics) []task.TaskMetrics {
	finite := func(f *float64) {
		if math.IsNaN(*f) || math.IsInf(*f, 0) {
			*f = 0
		}
	}
	for i := range ms {
		m := &ms[i]
		for _, f := range []*float64{&m.BusyTimeMsPerSecond, &m.IdleTimeMsPerSecond, &m.BackPressuredTimeMsPerSecond, &m.InPoolUsage, &m.OutPoolUsage} {
			finite(f)
		}
	}
	return ms
}

// metricsMirror holds, in the job manager's registry, the groups of one
// attempt's parts: each metric a gauge (or counter) of the last value its
// part sent. close removes them when the attempt ends, as a task's own
// groups go when it ends.
type metricsMirror struct {
	reg *metrics.Registry

	mu     sync.Mutex
	groups map[string]*mirrorGroup // by scope and labels
	closed bool
}

type mirrorGroup struct {
	g        *metrics.Group
	vals     map[string]float64 // guarded by the mirror's mu
	counters map[string]*metrics.Counter
}

func newMetricsMirror(reg *metrics.Registry) *metricsMirror {
	if reg == nil {
		return nil
	}
	return &metricsMirror{reg: reg, groups: map[string]*mirrorGroup{}}
}

func groupKey(scope string, labels []metrics.Label) string {
	var b strings.Builder
	b.WriteString(scope)
	for _, l := range labels {
		b.WriteString("\x00" + l.Name + "=" + l.Value)
	}
	return b.String()
}

// update records a part's snapshot.
func (m *metricsMirror) update(gs []metricGroup) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	for _, sg := range gs {
		key := groupKey(sg.Scope, sg.Labels)
		mg := m.groups[key]
		if mg == nil {
			mg = &mirrorGroup{g: m.reg.Group(sg.Scope, slices.Clone(sg.Labels)...), vals: map[string]float64{},
				counters: map[string]*metrics.Counter{}}
			m.groups[key] = mg
		}
		for _, v := range sg.Values {
			if v.Counter {
				c := mg.counters[v.Name]
				if c == nil {
					c = mg.g.Counter(v.Name)
					mg.counters[v.Name] = c
				}
				c.Set(int64(v.Value))
				continue
			}
			if _, ok := mg.vals[v.Name]; !ok {
				name := v.Name
				mg.g.Gauge(name, func() float64 {
					m.mu.Lock()
					defer m.mu.Unlock()
					return mg.vals[name]
				})
			}
			mg.vals[v.Name] = v.Value
		}
	}
}

// close removes the mirrored groups from the registry.
func (m *metricsMirror) close() {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	all := make([]*metrics.Group, 0, len(m.groups))
	for _, mg := range m.groups {
		all = append(all, mg.g)
	}
	m.reg.Remove(all...)
}
