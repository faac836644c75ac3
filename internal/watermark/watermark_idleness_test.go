package watermark

import (
	"testing"
	"time"
)

// fakeNow is a processing time the test moves.
type fakeNow struct{ t time.Time }

func (f *fakeNow) now() time.Time { return f.t }

func TestIdleness(t *testing.T) {
	type op struct {
		advance  time.Duration // move processing time first
		event    bool          // then OnEvent(ts), or OnPeriodicEmit
		ts       int64
		wantWM   int64 // for emits
		wantIdle bool  // IsIdle after the op
	}
	const timeout = time.Second
	e := func(d time.Duration, ts int64) op { return op{advance: d, event: true, ts: ts} }
	p := func(d time.Duration, wm int64, idle bool) op { return op{advance: d, wantWM: wm, wantIdle: idle} }
	for _, c := range []struct {
		name string
		ops  []op
	}{
		{"idle without any event", []op{
			p(0, NoWatermark, false),        // starts the inactivity period
			p(timeout, NoWatermark, false),  // exactly the timeout: not yet
			p(1, NoWatermark, true),         // past it
			p(time.Hour, NoWatermark, true), // stays idle
		}},
		{"events keep it active", []op{
			e(0, 100), p(0, 99, false),
			e(900*time.Millisecond, 200), p(0, 199, false),
			e(900*time.Millisecond, 300), p(0, 299, false),
		}},
		{"inactivity starts at the first emit without events", []op{
			e(0, 100),
			p(0, 99, false),                        // saw an event
			p(5*time.Second, 99, false),            // none since: the period starts now
			p(timeout, 99, false),                  // == timeout
			p(time.Millisecond, NoWatermark, true), // > timeout
		}},
		{"an event makes it active at once", []op{
			p(0, NoWatermark, false), p(2*timeout, NoWatermark, true),
			e(0, 500),
			p(0, 499, false),
			p(0, 499, false), // starts a new period
			p(timeout+1, NoWatermark, true),
		}},
		{"event during idleness then none", []op{
			p(0, NoWatermark, false), p(2*timeout, NoWatermark, true),
			e(0, 10), e(0, 5),
			p(10*timeout, 9, false), // the event counts even though long ago
			p(10*timeout, 9, false), // new period starts
			p(10*timeout, NoWatermark, true),
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			clk := &fakeNow{t: time.Unix(1000, 0)}
			w := WithIdleness(BoundedOutOfOrderness(0), timeout, clk.now)
			for i, o := range c.ops {
				clk.t = clk.t.Add(o.advance)
				if o.event {
					w.OnEvent(o.ts)
					if w.IsIdle() {
						t.Fatalf("op %d: idle right after OnEvent", i)
					}
					continue
				}
				if got := w.OnPeriodicEmit(); got != o.wantWM {
					t.Fatalf("op %d: OnPeriodicEmit() = %d, want %d", i, got, o.wantWM)
				}
				if got := w.IsIdle(); got != o.wantIdle {
					t.Fatalf("op %d: IsIdle() = %v, want %v", i, got, o.wantIdle)
				}
			}
		})
	}
}

func TestIdlenessReadsClockOnlyOnEmit(t *testing.T) {
	reads := 0
	w := WithIdleness(Monotonous(), time.Second, func() time.Time { reads++; return time.Time{} })
	for i := range 1000 {
		w.OnEvent(int64(i))
	}
	if reads != 0 {
		t.Fatalf("OnEvent read the clock %d times", reads)
	}
	w.OnPeriodicEmit() // saw events: no read needed
	if reads != 0 {
		t.Fatalf("emit after events read the clock %d times", reads)
	}
}

func TestIdlenessNonPositiveTimeoutPanics(t *testing.T) {
	for _, d := range []time.Duration{0, -time.Second} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("WithIdleness(timeout %v) did not panic", d)
				}
			}()
			WithIdleness(Monotonous(), d, time.Now)
		}()
	}
}
