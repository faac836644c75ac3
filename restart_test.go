package weir_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/internal/clock"
	"github.com/weirstream/weir/sink"
	"github.com/weirstream/weir/source"
)

// Each restart strategy, driven by a manual clock: the job fails `failures`
// times; every restart must wait exactly its delay (within the strategy's
// jitter), and the strategy decides when to give up.
func TestRestartStrategiesWithDrivenClock(t *testing.T) {
	cases := []struct {
		name     string
		opts     weir.RestartOptions
		failures int64
		delays   []time.Duration // expected delay of each restart
		jitter   float64
		wantErr  bool // the strategy gives up
	}{
		{name: "none", opts: weir.RestartOptions{Type: "none"}, failures: 1, wantErr: true},
		{name: "fixed-delay", opts: weir.RestartOptions{Type: "fixed-delay", FixedDelayAttempts: 2, FixedDelay: 10 * time.Second},
			failures: 3, delays: []time.Duration{10 * time.Second, 10 * time.Second}, wantErr: true},
		{name: "fixed-delay-recovers", opts: weir.RestartOptions{Type: "fixed-delay", FixedDelayAttempts: 2, FixedDelay: 10 * time.Second},
			failures: 2, delays: []time.Duration{10 * time.Second, 10 * time.Second}},
		{name: "failure-rate", opts: weir.RestartOptions{Type: "failure-rate", MaxFailuresPerInterval: 2,
			FailureRateInterval: time.Minute, FailureRateDelay: 5 * time.Second},
			failures: 3, delays: []time.Duration{5 * time.Second, 5 * time.Second}, wantErr: true},
		{name: "exponential-delay", opts: weir.RestartOptions{Type: "exponential-delay", InitialBackoff: time.Second,
			MaxBackoff: 4 * time.Second, BackoffMultiplier: 2},
			failures: 3, delays: []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}, jitter: 0.1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clk := clock.NewManual(time.Unix(1_700_000_000, 0))
			opts := weir.Options{Logger: quietLogger(t), Restart: c.opts}
			env := weir.NewEnvironment(opts)
			weir.SetTestHooks(env, weir.TestHooks{Clock: clk})
			var attempts atomic.Int64
			nums := weir.FromSource(env, source.Sequence(0, 999))
			failing := weir.Map(nums, func(i int64) int64 {
				if i == 0 && attempts.Add(1) <= c.failures {
					panic("injected failure")
				}
				return i
			})
			weir.SinkTo(failing, sink.Discard[int64]())
			done := make(chan error, 1)
			go func() { done <- env.Execute(context.Background(), "restarts") }()

			for i, d := range c.delays {
				waitFor(t, func() bool { return clk.Waiters() == 1 }, "the runner waiting to restart")
				if got := attempts.Load(); got != int64(i+1) {
					t.Fatalf("before restart %d: %d attempts", i+1, got)
				}
				early := time.Duration(float64(d)*(1-c.jitter)) - time.Millisecond
				clk.Advance(early)
				time.Sleep(20 * time.Millisecond)
				if got := attempts.Load(); got != int64(i+1) {
					t.Fatalf("restart %d came before %s", i+1, early)
				}
				clk.Advance(time.Duration(float64(d)*(1+c.jitter)) - early + time.Millisecond)
				waitFor(t, func() bool { return attempts.Load() == int64(i+2) }, "the restart")
			}
			select {
			case err := <-done:
				var pe *weir.PanicError
				if c.wantErr != (err != nil) || (err != nil && !errors.As(err, &pe)) {
					t.Fatalf("Execute = %v, want failure %v", err, c.wantErr)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the job did not end")
			}
		})
	}
}

func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
