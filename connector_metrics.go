package weir

import (
	"log/slog"
	"slices"
	"strings"

	"github.com/weirstream/weir/internal/metrics"
	"github.com/weirstream/weir/internal/metrics/prom"
)

// MetricGroup registers metrics in a source's or sink's operator group
// (Flink's operator metric group): they show in the REST API's subtask
// metrics (as "<operator>.<key>.<value>.<name>" in a child group), the
// dashboard and /metrics with the operator's labels (plus a child group's
// key=value), and are removed with the operator's own metrics when the
// job's run ends (a restarted job registers them anew).
//
// A nil *MetricGroup is valid and registers nothing (tests, jobs without
// metrics): its counters still count. Its methods are safe for concurrent
// use. Mistakes (a name the operator's built-in metrics use, a name
// registered before as another kind, a child key that is already a label
// or no valid label name on /metrics) are logged and the metric or group
// is not registered; nothing panics.
type MetricGroup struct {
	g   *metrics.Group
	log *slog.Logger
	// reserved are the names of the operator's built-in metrics (only in
	// the operator's own group).
	reserved []string
}

// newMetricGroup wraps the operator group g, nil if g is nil.
func newMetricGroup(g *metrics.Group, log *slog.Logger) *MetricGroup {
	if g == nil {
		return nil
	}
	if log == nil {
		log = slog.Default()
	}
	return &MetricGroup{g: g, log: log, reserved: g.Names()}
}

// usable reports whether name may be registered: not empty, not one of
// the operator's own metrics. Whether it is taken by another kind is
// checked as it is registered (Group.TryCounter, TryGauge), in one step,
// so concurrent callers cannot both pass.
func (g *MetricGroup) usable(name string) bool {
	if name == "" || slices.Contains(g.reserved, name) {
		g.log.Warn("connector metric not registered: the name is empty or one of the operator's own metrics", "metric", name)
		return false
	}
	return true
}

// otherKind logs that name was not registered as kind: it is taken by a
// metric of another kind.
func (g *MetricGroup) otherKind(name string, kind metrics.Kind) {
	registered := "unknown"
	if m, ok := g.g.Get(name); ok {
		registered = m.Kind().String()
	}
	g.log.Warn("connector metric not registered: the name is taken by a metric of another kind",
		"metric", name, "kind", kind.String(), "registered", registered)
}

// Counter registers (or returns, when registered before) the counter
// called name.
func (g *MetricGroup) Counter(name string) *Counter {
	if g == nil || !g.usable(name) {
		return &Counter{c: &metrics.Counter{}}
	}
	c, ok := g.g.TryCounter(name)
	if !ok {
		g.otherKind(name, metrics.KindCounter)
		return &Counter{c: &metrics.Counter{}}
	}
	return &Counter{c: c}
}

// Gauge registers a gauge called name; value is read from other goroutines
// (the REST API's, the Prometheus scraper's) and must be safe for that. A
// second Gauge of the same name replaces the first one's function.
func (g *MetricGroup) Gauge(name string, value func() float64) {
	if g == nil || value == nil || !g.usable(name) {
		return
	}
	if _, ok := g.g.TryGauge(name, value); !ok {
		g.otherKind(name, metrics.KindGauge)
	}
}

// Group returns the child group whose metrics carry the extra label
// key=value (Flink's addGroup(key, value)), such as one per partition;
// asking again for the same key and value returns the same group. key is
// taken as /metrics exports it, every character outside [a-zA-Z0-9:_]
// replaced by '_' (topic-partition becomes topic_partition): it must then
// be a valid Prometheus label name (a letter or '_' first, no ':', not
// starting with "__") and not a label the group has already (job_id,
// operator_name, ..., or a parent's key), however spelt (operator-name,
// job.id). Otherwise the mistake is logged and Group returns nil, a valid
// group that registers nothing.
func (g *MetricGroup) Group(key, value string) *MetricGroup {
	if g == nil {
		return nil
	}
	name, ok := exportedLabelName(key)
	if !ok {
		g.log.Warn("connector metric group not created: its key is not a valid Prometheus label name once characters outside [a-zA-Z0-9_] are replaced by '_' (a letter or '_' first, not \"__\" first)",
			"key", key, "exported", name)
		return nil
	}
	if slices.ContainsFunc(g.g.Labels(), func(l metrics.Label) bool { return prom.Filter(l.Name) == name }) {
		g.log.Warn("connector metric group not created: its key is already a label of the group as /metrics exports it",
			"key", key, "exported", name)
		return nil
	}
	return &MetricGroup{g: g.g.Child(metrics.Label{Name: key, Value: value}), log: g.log}
}

// exportedLabelName is key as /metrics exports a label name (prom.Filter)
// and whether Prometheus accepts it: [a-zA-Z_][a-zA-Z0-9_]*, not starting
// with "__" (reserved for Prometheus' own labels).
func exportedLabelName(key string) (string, bool) {
	name := prom.Filter(key)
	if name == "" || strings.HasPrefix(name, "__") || name[0] >= '0' && name[0] <= '9' || strings.ContainsRune(name, ':') {
		return name, false
	}
	return name, true
}

// Counter is a connector's count (records sent, errors). Its methods are
// safe for concurrent use; a nil *Counter counts nothing.
type Counter struct{ c *metrics.Counter }

// Inc adds one.
func (c *Counter) Inc() {
	if c != nil {
		c.c.Inc()
	}
}

// Add adds n.
func (c *Counter) Add(n int64) {
	if c != nil {
		c.c.Add(n)
	}
}

// Count is the current count, 0 for a nil counter.
func (c *Counter) Count() int64 {
	if c == nil {
		return 0
	}
	return c.c.Count()
}
