// Package prom exports weir's metric registries to Prometheus, the way
// Flink's PrometheusReporter does with the prefix weir instead of flink:
//
//   - A metric's name is weir_<scope>_<name>, every character outside
//     [a-zA-Z0-9:_] replaced by '_': the task metric buffers.inPoolUsage
//     is weir_taskmanager_job_task_buffers_inPoolUsage, the job metric
//     lastCheckpointDuration weir_jobmanager_job_lastCheckpointDuration.
//   - Its labels are its group's (job_id, job_name, task_name,
//     subtask_index, operator_name, ...), their values filtered the same
//     way unless Collector.KeepLabelValues is set (Flink's
//     metrics.reporter.prom.filterLabelValueCharacters, default true).
//     Groups of one family with different label names are padded with
//     empty values, as Prometheus wants one set of label names per family.
//   - Counters, gauges and meters (their rate per second) are Prometheus
//     gauges, as Flink exports them: a weir counter may be set back (a
//     restarted job counts anew), which a Prometheus counter must not.
//   - Histograms are summaries: the quantiles 0.5, 0.75, 0.95, 0.98, 0.99
//     and 0.999 of the histogram's window of recent values, its count and
//     sum of every value.
//
// The collector reads the registries when scraped; it keeps no state. Two
// groups with the same scope and labels (a restarted task registering
// before the old one is gone, or two chained operators of one name without
// an operator_id) export the first group's values only.
package prom

import (
	"net/http"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/weirstream/weir/internal/metrics"
)

// Prefix starts every exported metric name.
const Prefix = "weir"

// Quantiles are the quantiles a histogram's summary reports, Flink's.
var Quantiles = []float64{0.5, 0.75, 0.95, 0.98, 0.99, 0.999}

// Name is the Prometheus name of the metric called name in scope.
func Name(scope, name string) string {
	return Prefix + "_" + Filter(scope) + "_" + Filter(name)
}

// Filter replaces every character outside [a-zA-Z0-9:_] with '_', as
// Flink's reporter does for names and label values.
func Filter(s string) string {
	ok := true
	for i := 0; i < len(s) && ok; i++ {
		ok = allowed(s[i])
	}
	if ok {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		if r < 0x80 && allowed(byte(r)) {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

func allowed(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == ':'
}

// labelOrder is the order of the known labels in an exported family;
// others follow in alphabetical order.
var labelOrder = []string{
	metrics.LabelJobID, metrics.LabelJobName, metrics.LabelTaskName, metrics.LabelSubtaskIndex,
	metrics.LabelOperatorName, metrics.LabelOperatorID, metrics.LabelVertexID,
}

// Collector is a prometheus.Collector of weir metric registries. It is
// unchecked (Describe sends nothing): the metrics come and go with the
// job's deployments. Collect may be called concurrently.
type Collector struct {
	regs []*metrics.Registry
	// KeepLabelValues exports label values as they are instead of
	// replacing the characters outside [a-zA-Z0-9:_].
	KeepLabelValues bool
}

var _ prometheus.Collector = (*Collector)(nil)

// NewCollector returns a collector of regs.
func NewCollector(regs ...*metrics.Registry) *Collector {
	return &Collector{regs: slices.Clone(regs)}
}

// Handler serves regs in Prometheus's text exposition format, for
// mounting at /metrics. A metric that cannot be exported is left out and
// the rest still served.
func Handler(regs ...*metrics.Registry) http.Handler {
	r := prometheus.NewRegistry()
	r.MustRegister(NewCollector(regs...))
	return promhttp.HandlerFor(r, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// Describe sends nothing: the collector is unchecked.
func (c *Collector) Describe(chan<- *prometheus.Desc) {}

// family is the exported metrics of one name.
type family struct {
	name, help string
	summary    bool
	labels     []string // the union of the groups' label names, in labelOrder
	members    []member
}

type member struct {
	group  *metrics.Group
	metric metrics.Metric
}

// Collect reads every metric of the registries.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	byName := map[string]*family{}
	var order []*family
	for _, reg := range c.regs {
		for _, g := range reg.Groups() {
			g.Each(func(name string, m metrics.Metric) {
				fq := Name(g.Scope(), name)
				f := byName[fq]
				summary := m.Kind() == metrics.KindHistogram
				if f == nil {
					f = &family{name: fq, help: name + " (scope: " + g.Scope() + ")", summary: summary}
					byName[fq] = f
					order = append(order, f)
				} else if f.summary != summary {
					return // one family, one type: the first group's
				}
				for _, l := range g.Labels() {
					if n := Filter(l.Name); !slices.Contains(f.labels, n) {
						f.labels = append(f.labels, n)
					}
				}
				f.members = append(f.members, member{g, m})
			})
		}
	}
	for _, f := range order {
		c.collect(ch, f)
	}
}

func (c *Collector) collect(ch chan<- prometheus.Metric, f *family) {
	slices.SortFunc(f.labels, cmpLabel)
	desc := prometheus.NewDesc(f.name, f.help, f.labels, nil)
	seen := map[string]bool{}
	for _, mb := range f.members {
		values := make([]string, len(f.labels))
		for _, l := range mb.group.Labels() {
			v := l.Value
			if !c.KeepLabelValues {
				v = Filter(v)
			}
			values[slices.Index(f.labels, Filter(l.Name))] = v
		}
		key := strings.Join(values, "\xff")
		if seen[key] {
			continue
		}
		seen[key] = true
		var (
			m   prometheus.Metric
			err error
		)
		if h, ok := mb.metric.(*metrics.Histogram); ok {
			s := h.Snapshot()
			q := make(map[float64]float64, len(Quantiles))
			for _, x := range Quantiles {
				q[x] = s.Quantile(x)
			}
			m, err = prometheus.NewConstSummary(desc, uint64(max(s.Count, 0)), s.Sum, q, values...)
		} else {
			m, err = prometheus.NewConstMetric(desc, prometheus.GaugeValue, mb.metric.Value(), values...)
		}
		if err != nil {
			m = prometheus.NewInvalidMetric(desc, err)
		}
		ch <- m
	}
}

// cmpLabel orders label names: the known ones in labelOrder, then the
// others alphabetically.
func cmpLabel(a, b string) int {
	ia, ib := slices.Index(labelOrder, a), slices.Index(labelOrder, b)
	switch {
	case ia >= 0 && ib >= 0:
		return ia - ib
	case ia >= 0:
		return -1
	case ib >= 0:
		return 1
	}
	return strings.Compare(a, b)
}
