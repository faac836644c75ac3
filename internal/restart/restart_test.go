package restart

import (
	"strings"
	"testing"
	"time"
)

type decision struct {
	restart bool
	delay   time.Duration
}

func run(t *testing.T, s Strategy, at ...time.Duration) []decision {
	t.Helper()
	base := time.Unix(1000, 0)
	var out []decision
	for _, d := range at {
		r, delay := s.OnFailure(base.Add(d))
		out = append(out, decision{r, delay})
	}
	return out
}

func mustNew(t *testing.T, c Config) Strategy {
	t.Helper()
	s, err := New(c, func() float64 { return 0.5 }) // no jitter: 0.5*2-1 = 0
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestDefaults(t *testing.T) {
	if Default(true).Type != ExponentialDelay || Default(false).Type != None {
		t.Fatal("default strategy types differ from Flink's")
	}
	if err := Default(true).Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestNoneNeverRestarts(t *testing.T) {
	if got := run(t, mustNew(t, Default(false)), 0); got[0].restart {
		t.Fatal("none restarted")
	}
}

func TestFixedDelay(t *testing.T) {
	c := Default(true)
	c.Type, c.FixedDelayAttempts, c.FixedDelay = FixedDelay, 2, 3*time.Second
	got := run(t, mustNew(t, c), 0, time.Hour, 2*time.Hour)
	want := []decision{{true, 3 * time.Second}, {true, 3 * time.Second}, {false, 0}}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("failure %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestFailureRate(t *testing.T) {
	c := Default(true)
	c.Type, c.MaxFailuresPerInterval, c.FailureRateInterval, c.FailureRateDelay = FailureRate, 2, time.Minute, time.Second
	// Two failures a minute are tolerated; a third within the minute of the
	// first is not. Spread out, failures go on forever.
	got := run(t, mustNew(t, c), 0, 30*time.Second, 2*time.Minute, 3*time.Minute+30*time.Second, 3*time.Minute+40*time.Second,
		3*time.Minute+50*time.Second)
	want := []bool{true, true, true, true, true, false}
	for i := range want {
		if got[i].restart != want[i] {
			t.Fatalf("failure %d: restart %v, want %v (%+v)", i, got[i].restart, want[i], got)
		}
	}
}

func TestExponentialDelay(t *testing.T) {
	c := Default(true)
	c.InitialBackoff, c.MaxBackoff, c.BackoffMultiplier, c.ResetBackoffThreshold = time.Second, 10*time.Second, 2, time.Hour
	s := mustNew(t, c)
	// Quick successive failures: 1, 2, 4, 8, 10 (capped) seconds.
	got := run(t, s, 0, 2*time.Second, 5*time.Second, 10*time.Second, 20*time.Second, 31*time.Second)
	want := []time.Duration{1, 2, 4, 8, 10, 10}
	for i, w := range want {
		if !got[i].restart || got[i].delay != w*time.Second {
			t.Fatalf("failure %d: %+v, want restart after %vs", i, got[i], w)
		}
	}
	// After running longer than the reset threshold, the backoff starts over.
	if r, d := s.OnFailure(time.Unix(1000, 0).Add(31*time.Second + 2*time.Hour)); !r || d != time.Second {
		t.Fatalf("after a long healthy run: %v %v, want restart after 1s", r, d)
	}
}

func TestExponentialAttemptsAndJitter(t *testing.T) {
	c := Default(true)
	c.AttemptsBeforeResetBackoff = 2
	s := mustNew(t, c)
	got := run(t, s, 0, time.Second, 3*time.Second)
	if !got[0].restart || !got[1].restart || got[2].restart {
		t.Fatalf("attempts-before-reset-backoff 2: %+v", got)
	}
	c = Default(true)
	for _, r := range []float64{0, 0.999} {
		s, _ := New(c, func() float64 { return r })
		_, d := s.OnFailure(time.Unix(0, 0))
		if d < 900*time.Millisecond || d > 1100*time.Millisecond {
			t.Fatalf("jitter 0.1 around 1s gave %v", d)
		}
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	c := Default(true)
	c.InitialBackoff, c.MaxBackoff, c.BackoffMultiplier, c.JitterFactor = 0, -1, 0.5, 2
	err := c.Validate()
	for _, want := range []string{"initial-backoff", "max-backoff", "backoff-multiplier", "jitter-factor"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("Validate() = %v, missing %s", err, want)
		}
	}
	c.Type = "sometimes"
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "must be one of") {
		t.Fatalf("unknown type: %v", err)
	}
}
