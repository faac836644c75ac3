package metrics

import (
	"fmt"
	"sync"
	"testing"
)

// TryCounter and TryGauge refuse a name taken by another kind, without a
// panic and without touching the metric registered first; for their own
// kind they return the metric registered before (a gauge's function
// replaced).
func TestTryRegisterOtherKind(t *testing.T) {
	g := NewRegistry().Group(ScopeOperator)
	c, ok := g.TryCounter("sent")
	if !ok || c == nil {
		t.Fatalf("TryCounter on a new name = %v, %v", c, ok)
	}
	c.Add(7)
	if again, ok := g.TryCounter("sent"); !ok || again != c {
		t.Fatalf("TryCounter again = %p, %v; want the same counter %p", again, ok, c)
	}
	if gg, ok := g.TryGauge("sent", func() float64 { return -1 }); ok || gg != nil {
		t.Fatalf("TryGauge on a counter's name = %v, %v; want nil, false", gg, ok)
	}
	if m, _ := g.Get("sent"); m != Metric(c) || m.Value() != 7 {
		t.Fatalf("after the refused gauge, sent is %v (%v), want the counter at 7", m, m.Value())
	}

	gg, ok := g.TryGauge("lag", func() float64 { return 1 })
	if !ok || gg.Value() != 1 {
		t.Fatalf("TryGauge on a new name = %v, %v", gg, ok)
	}
	if again, ok := g.TryGauge("lag", func() float64 { return 2 }); !ok || again != gg || gg.Value() != 2 {
		t.Fatalf("TryGauge again = %p, %v, value %v; want the same gauge %p reading the new function (2)", again, ok, gg.Value(), gg)
	}
	if c, ok := g.TryCounter("lag"); ok || c != nil {
		t.Fatalf("TryCounter on a gauge's name = %v, %v; want nil, false", c, ok)
	}
	if got := g.Names(); len(got) != 2 {
		t.Fatalf("names %v, want [sent lag]", got)
	}
}

// Goroutines registering the same names as counters and as gauges at
// once: for each name exactly one kind wins, the other is refused, and
// nothing panics (run with -race).
func TestTryRegisterConcurrentKinds(t *testing.T) {
	const names = 300
	g := NewRegistry().Group(ScopeOperator)
	var wg sync.WaitGroup
	won := make([][2]bool, names) // [counter, gauge]
	start := make(chan struct{})
	for i := range names {
		name := fmt.Sprintf("m%d", i)
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			_, won[i][0] = g.TryCounter(name)
		}()
		go func() {
			defer wg.Done()
			<-start
			_, won[i][1] = g.TryGauge(name, func() float64 { return 1 })
		}()
	}
	close(start)
	wg.Wait()
	for i, w := range won {
		m, ok := g.Get(fmt.Sprintf("m%d", i))
		switch {
		case !ok:
			t.Fatalf("m%d not registered", i)
		case w[0] == w[1]:
			t.Fatalf("m%d: counter registered %v, gauge registered %v; want exactly one", i, w[0], w[1])
		case w[0] && m.Kind() != KindCounter, w[1] && m.Kind() != KindGauge:
			t.Fatalf("m%d is a %s, but the other kind was told it won", i, m.Kind())
		}
	}
}

// A gauge is never visible to readers before its function is set: a
// reader walking the group while new gauges are registered never calls a
// missing function.
func TestGaugeNewWhileRead(t *testing.T) {
	g := NewRegistry().Group(ScopeTask)
	done := make(chan struct{})
	stop := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			g.Each(func(_ string, m Metric) { _ = m.Value() })
		}
	}()
	for i := range 5000 {
		g.Gauge(fmt.Sprintf("g%d", i), func() float64 { return 1 })
	}
	close(stop)
	<-done
}
