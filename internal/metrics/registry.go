package metrics

import (
	"fmt"
	"slices"
	"sync"
	"time"
)

// Label is one name=value pair of a group.
type Label struct{ Name, Value string }

// Group is the metrics of one scope and label set: one job, one subtask,
// one operator of a subtask. Registering a name twice returns the metric
// registered first (for the same kind) so that a restarted task may
// register again.
type Group struct {
	scope  string
	labels []Label
	now    func() time.Time
	reg    *Registry

	mu       sync.RWMutex
	names    []string // registration order
	metrics  map[string]Metric
	children []*Group // Child groups, removed with this one
	removed  bool     // Remove took it out of reg: new children stay out too
}

// Scope is the group's scope, such as ScopeTask.
func (g *Group) Scope() string { return g.scope }

// Labels are the group's labels, in registration order. The caller must
// not modify them.
func (g *Group) Labels() []Label { return g.labels }

// Label is the value of the label called name, "" if there is none.
func (g *Group) Label(name string) string {
	for _, l := range g.labels {
		if l.Name == name {
			return l.Value
		}
	}
	return ""
}

// Child returns the group of g's scope whose labels are g's followed by
// labels, registered in g's registry: Flink's addGroup(key, value), such as
// a connector's group per partition. A second call with the same labels
// returns the same group. Removing g from the registry removes its
// children too; a child asked for after that is not registered.
func (g *Group) Child(labels ...Label) *Group {
	all := append(slices.Clip(g.labels), labels...)
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, c := range g.children {
		if slices.Equal(c.labels, all) {
			return c
		}
	}
	c := &Group{scope: g.scope, labels: all, now: g.now, metrics: map[string]Metric{}}
	g.children = append(g.children, c)
	if g.removed || g.reg == nil {
		c.removed = true
		return c
	}
	c.reg = g.reg
	g.reg.add(c)
	return c
}

// descendants marks g and every group under it removed and appends them
// to out.
func (g *Group) descendants(out []*Group) []*Group {
	g.mu.Lock()
	g.removed = true
	children := slices.Clone(g.children)
	g.mu.Unlock()
	out = append(out, g)
	for _, c := range children {
		out = c.descendants(out)
	}
	return out
}

// Counter registers (or returns) the counter called name. It panics if
// name is registered as another kind: weir's own metrics use TryCounter
// where a name may come from a user.
func (g *Group) Counter(name string) *Counter {
	return register(g, name, func() *Counter { return &Counter{} })
}

// TryCounter registers (or returns) the counter called name, as Counter,
// but returns ok false, registering nothing, if name is registered as
// another kind (which Get tells). The check and the registration are one
// step under the group's lock: two goroutines registering one name as two
// kinds get one metric and one refusal, never a panic.
func (g *Group) TryCounter(name string) (c *Counter, ok bool) {
	return tryRegister(g, name, func() *Counter { return &Counter{} })
}

// Gauge registers a gauge called name that reads f. A second Gauge of the
// same name replaces the function. It panics if name is registered as
// another kind (see TryGauge).
func (g *Group) Gauge(name string, f func() float64) *Gauge {
	gg, ok := g.TryGauge(name, f)
	if !ok {
		panicKind(g, name, KindGauge)
	}
	return gg
}

// TryGauge registers a gauge called name that reads f, as Gauge, but
// returns ok false, registering nothing, if name is registered as another
// kind (see TryCounter).
func (g *Group) TryGauge(name string, f func() float64) (gg *Gauge, ok bool) {
	gg, ok = tryRegister(g, name, func() *Gauge {
		// The function is in place before the gauge is visible to
		// readers (Each, Get): none sees a gauge without one.
		n := &Gauge{}
		n.f.Store(&f)
		return n
	})
	if ok {
		gg.f.Store(&f) // a gauge registered before: replace its function
	}
	return gg, ok
}

// Meter registers (or returns) a meter called name: the rate per second of
// count over DefaultMeterWindow.
func (g *Group) Meter(name string, count func() int64) *Meter {
	return register(g, name, func() *Meter { return &Meter{count: count, now: g.now, window: DefaultMeterWindow} })
}

// Histogram registers (or returns) a histogram called name keeping the
// last window values (DefaultHistogramWindow if window <= 0).
func (g *Group) Histogram(name string, window int) *Histogram {
	if window <= 0 {
		window = DefaultHistogramWindow
	}
	return register(g, name, func() *Histogram { return &Histogram{values: make([]float64, window)} })
}

// register is tryRegister for weir's own metrics, whose names are fixed:
// a name registered as two kinds is a bug, and it panics.
func register[M Metric](g *Group, name string, create func() M) M {
	m, ok := tryRegister(g, name, create)
	if !ok {
		var zero M
		panicKind(g, name, zero.Kind())
	}
	return m
}

// tryRegister returns the metric called name if it is an M, registering
// create's when there is none; ok is false if name is another kind.
func tryRegister[M Metric](g *Group, name string, create func() M) (m M, ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if old, found := g.metrics[name]; found {
		m, ok = old.(M)
		return m, ok
	}
	m = create()
	g.metrics[name] = m
	g.names = append(g.names, name)
	return m, true
}

func panicKind(g *Group, name string, kind Kind) {
	old, _ := g.Get(name)
	panic(fmt.Sprintf("metrics: %s %q registered again as a %s", old.Kind(), name, kind))
}

// Get returns the metric called name.
func (g *Group) Get(name string) (Metric, bool) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	m, ok := g.metrics[name]
	return m, ok
}

// Names lists the group's metrics in registration order.
func (g *Group) Names() []string {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return slices.Clone(g.names)
}

// Each calls f for every metric of the group, in registration order.
func (g *Group) Each(f func(name string, m Metric)) {
	g.mu.RLock()
	names := slices.Clone(g.names)
	ms := make([]Metric, len(names))
	for i, n := range names {
		ms[i] = g.metrics[n]
	}
	g.mu.RUnlock()
	for i, n := range names {
		f(n, ms[i])
	}
}

// Registry holds groups. Its methods are safe for concurrent use.
type Registry struct {
	now func() time.Time

	mu     sync.RWMutex
	groups []*Group
}

// NewRegistry returns an empty registry whose meters use the system
// clock.
func NewRegistry() *Registry { return NewRegistryClock(time.Now) }

// NewRegistryClock returns an empty registry whose meters read now.
func NewRegistryClock(now func() time.Time) *Registry { return &Registry{now: now} }

// Group registers a new group of scope with labels. Two groups may share
// scope and labels (a restarted task registers anew after the old one was
// removed); readers see them in registration order.
func (r *Registry) Group(scope string, labels ...Label) *Group {
	g := &Group{scope: scope, labels: slices.Clone(labels), now: r.now, reg: r, metrics: map[string]Metric{}}
	r.add(g)
	return g
}

func (r *Registry) add(g *Group) {
	r.mu.Lock()
	r.groups = append(r.groups, g)
	r.mu.Unlock()
}

// Remove unregisters groups (a deployment's tasks when it ends) and their
// children (Group.Child).
func (r *Registry) Remove(groups ...*Group) {
	var all []*Group
	for _, g := range groups {
		all = g.descendants(all)
	}
	groups = all
	r.mu.Lock()
	r.groups = slices.DeleteFunc(r.groups, func(g *Group) bool { return slices.Contains(groups, g) })
	r.mu.Unlock()
}

// Groups lists the registered groups in registration order.
func (r *Registry) Groups() []*Group {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Clone(r.groups)
}

// Find lists the groups of scope whose labels include every label of
// match.
func (r *Registry) Find(scope string, match ...Label) []*Group {
	var out []*Group
	for _, g := range r.Groups() {
		if g.scope != scope {
			continue
		}
		ok := true
		for _, l := range match {
			if g.Label(l.Name) != l.Value {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, g)
		}
	}
	return out
}

// Sample samples every meter, so rates stay accurate between readings.
// The owner of the registry calls it about once a second.
func (r *Registry) Sample() {
	for _, g := range r.Groups() {
		g.Each(func(_ string, m Metric) {
			if mm, ok := m.(*Meter); ok {
				mm.Sample()
			}
		})
	}
}
