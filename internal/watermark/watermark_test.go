package watermark

import (
	"testing"
	"time"
)

func TestBoundedOutOfOrderness(t *testing.T) {
	for _, c := range []struct {
		name  string
		delay time.Duration
		// events then emits: each step is an event (ev) or, with emit set,
		// a periodic emit expecting want.
		steps []step
	}{
		{"no events", 10 * time.Millisecond, []step{emit(NoWatermark), emit(NoWatermark)}},
		{"in order", 0, []step{ev(5), emit(4), ev(6), ev(7), emit(6)}},
		{"out of order", 10 * time.Millisecond, []step{
			ev(100), emit(89), ev(95), emit(89), ev(120), ev(110), emit(109), ev(50), emit(109),
		}},
		{"exactly maxDelay late is not late", 10 * time.Millisecond, []step{ev(100), emit(89), ev(90), emit(89)}},
		{"sub-millisecond delay truncates", 1500 * time.Microsecond, []step{ev(100), emit(98)}},
		{"negative timestamps", 0, []step{ev(-100), emit(-101), ev(-200), emit(-101)}},
		{"timestamps near MinInt64 do not underflow", time.Second, []step{
			ev(NoWatermark), emit(NoWatermark), ev(NoWatermark + 500), emit(NoWatermark),
			ev(NoWatermark + 1001), emit(NoWatermark), ev(NoWatermark + 1002), emit(NoWatermark + 1),
		}},
		{"MaxInt64 timestamp", 0, []step{ev(MaxWatermark), emit(MaxWatermark - 1)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			run(t, BoundedOutOfOrderness(c.delay), c.steps)
		})
	}
}

func TestMonotonous(t *testing.T) {
	run(t, Monotonous(), []step{emit(NoWatermark), ev(10), emit(9), ev(10), emit(9), ev(3), emit(9), ev(11), emit(10)})
}

func TestBoundedOutOfOrdernessNegativePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("BoundedOutOfOrderness(-1ms) did not panic")
		}
	}()
	BoundedOutOfOrderness(-time.Millisecond)
}

type step struct {
	ts   int64
	emit bool
	want int64
}

func ev(ts int64) step     { return step{ts: ts} }
func emit(want int64) step { return step{emit: true, want: want} }

func run(t *testing.T, g Generator, steps []step) {
	t.Helper()
	for i, s := range steps {
		if !s.emit {
			g.OnEvent(s.ts)
			continue
		}
		if got := g.OnPeriodicEmit(); got != s.want {
			t.Fatalf("step %d: OnPeriodicEmit() = %d, want %d", i, got, s.want)
		}
	}
}
