package metrics

import (
	"sync"
	"testing"
	"time"
)

func TestCounterGaugeGroup(t *testing.T) {
	r := NewRegistry()
	g := r.Group(ScopeTask, Label{LabelJobID, "j1"}, Label{LabelSubtaskIndex, "0"})
	c := g.Counter("numRecordsIn")
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1000 {
				c.Inc()
			}
		}()
	}
	wg.Wait()
	if c.Count() != 4000 || g.Counter("numRecordsIn") != c {
		t.Fatalf("count %d, same counter %v", c.Count(), g.Counter("numRecordsIn") == c)
	}
	v := 1.5
	g.Gauge("inPoolUsage", func() float64 { return v })
	if m, ok := g.Get("inPoolUsage"); !ok || m.Value() != 1.5 || m.Kind() != KindGauge {
		t.Fatalf("gauge %v %v", m, ok)
	}
	if got := g.Names(); len(got) != 2 || got[0] != "numRecordsIn" {
		t.Fatalf("names %v", got)
	}
	other := r.Group(ScopeTask, Label{LabelJobID, "j2"})
	if got := r.Find(ScopeTask, Label{LabelJobID, "j1"}); len(got) != 1 || got[0] != g {
		t.Fatalf("find %v", got)
	}
	r.Remove(g)
	if got := r.Groups(); len(got) != 1 || got[0] != other {
		t.Fatalf("groups after remove %v", got)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("registering a name as another kind did not panic")
		}
	}()
	g.Histogram("numRecordsIn", 0)
}

func TestMeterRate(t *testing.T) {
	now := time.Unix(1000, 0)
	r := NewRegistryClock(func() time.Time { return now })
	var n int64
	m := r.Group(ScopeTask).Meter("numRecordsInPerSecond", func() int64 { return n })
	if m.Rate() != 0 {
		t.Fatal("rate before two samples")
	}
	for range 10 {
		now = now.Add(time.Second)
		n += 100
		r.Sample()
	}
	if got := m.Rate(); got != 100 {
		t.Fatalf("rate %v, want 100", got)
	}
	// After the window, old samples drop out: the rate follows the new pace.
	for range 70 {
		now = now.Add(time.Second)
		n += 10
		r.Sample()
	}
	if got := m.Rate(); got != 10 {
		t.Fatalf("rate %v, want 10", got)
	}
}

func TestHistogramQuantiles(t *testing.T) {
	h := (&Registry{now: time.Now}).Group(ScopeJob).Histogram("checkpointDuration", 100)
	for i := 1; i <= 250; i++ {
		h.Update(float64(i))
	}
	s := h.Snapshot()
	if s.Count != 250 || s.Len() != 100 || s.Min != 151 || s.Max != 250 {
		t.Fatalf("snapshot count %d len %d min %v max %v", s.Count, s.Len(), s.Min, s.Max)
	}
	prev := s.Min
	for _, q := range []float64{0, 0.5, 0.9, 0.95, 0.99, 0.999, 1} {
		v := s.Quantile(q)
		if v < prev || v > s.Max {
			t.Fatalf("quantile %v = %v not monotone (prev %v)", q, v, prev)
		}
		prev = v
	}
	if got := s.Quantile(0.5); got != 200.5 {
		t.Fatalf("median %v", got)
	}
	if e := Summarize(nil, 0); e.Quantile(0.5) != 0 || e.Mean != 0 {
		t.Fatal("empty summary")
	}
}

// A restarted task registers its gauges again while readers read them.
func TestGaugeReRegisteredWhileRead(t *testing.T) {
	g := NewRegistry().Group(ScopeTask)
	g.Gauge("x", func() float64 { return 1 })
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 1000 {
			g.Each(func(_ string, m Metric) { _ = m.Value() })
		}
	}()
	for i := range 1000 {
		v := float64(i)
		g.Gauge("x", func() float64 { return v })
	}
	<-done
	if m, _ := g.Get("x"); m.Value() != 999 {
		t.Fatalf("gauge reads %v after re-registration, want 999", m.Value())
	}
}

// A child group carries its parent's labels and its own, is registered in
// the parent's registry, is the same group when asked for again, and goes
// (with its own children) when the parent is removed; one asked for after
// that is not registered.
func TestChildGroupsRemovedWithParent(t *testing.T) {
	r := NewRegistry()
	op := r.Group(ScopeOperator, Label{LabelJobID, "j"}, Label{LabelOperatorName, "src"})
	other := r.Group(ScopeOperator, Label{LabelJobID, "j"}, Label{LabelOperatorName, "map"})
	topic := op.Child(Label{"topic", "t"})
	p0 := topic.Child(Label{"partition", "0"})
	if again := topic.Child(Label{"partition", "0"}); again != p0 {
		t.Fatal("Child with the same labels returned a new group")
	}
	p0.Gauge("currentOffset", func() float64 { return 7 })
	want := []Label{{LabelJobID, "j"}, {LabelOperatorName, "src"}, {"topic", "t"}, {"partition", "0"}}
	if got := p0.Labels(); len(got) != len(want) || got[2] != want[2] || got[3] != want[3] || got[1] != want[1] {
		t.Fatalf("labels %v, want %v", got, want)
	}
	if got := r.Find(ScopeOperator, Label{"partition", "0"}); len(got) != 1 || got[0] != p0 {
		t.Fatalf("find partition 0: %v", got)
	}
	if n := len(r.Groups()); n != 4 {
		t.Fatalf("%d groups registered, want 4", n)
	}
	r.Remove(op)
	if got := r.Groups(); len(got) != 1 || got[0] != other {
		t.Fatalf("after removing the parent: %d groups left, want only the other operator's", len(got))
	}
	late := topic.Child(Label{"partition", "1"})
	late.Counter("x").Inc()
	if n := len(r.Groups()); n != 1 {
		t.Fatalf("a child of a removed group was registered: %d groups", n)
	}
}
