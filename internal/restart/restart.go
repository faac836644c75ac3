// Package restart decides whether and when a failed job restarts, with
// Apache Flink's restart strategies and their configuration keys:
//
//   - none: never restart;
//   - fixed-delay: restart up to Attempts times, each after Delay;
//   - failure-rate: restart after Delay unless more than
//     MaxFailuresPerInterval failures happened within FailureRateInterval;
//   - exponential-delay: restart after a backoff that starts at
//     InitialBackoff and grows by BackoffMultiplier up to MaxBackoff, with
//     ±JitterFactor random jitter; the backoff resets once the job ran for
//     ResetBackoffThreshold without failing; after AttemptsBeforeResetBackoff
//     restarts without such a reset the job fails.
//
// A Strategy is a deterministic state machine: the caller reports each
// failure with the time it happened and gets the decision back. It has no
// clock or goroutine of its own and is not safe for concurrent use.
package restart

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// Types of strategy, as restart-strategy.type spells them.
const (
	None             = "none"
	FixedDelay       = "fixed-delay"
	FailureRate      = "failure-rate"
	ExponentialDelay = "exponential-delay"
)

// Config holds every strategy's settings; Type picks the strategy. The
// defaults are Flink's.
type Config struct {
	// Type is restart-strategy.type. Default: exponential-delay when
	// checkpointing is enabled, none otherwise (Default).
	Type string

	// FixedDelayAttempts is restart-strategy.fixed-delay.attempts (1).
	FixedDelayAttempts int
	// FixedDelay is restart-strategy.fixed-delay.delay (1s).
	FixedDelay time.Duration

	// MaxFailuresPerInterval is
	// restart-strategy.failure-rate.max-failures-per-interval (1).
	MaxFailuresPerInterval int
	// FailureRateInterval is
	// restart-strategy.failure-rate.failure-rate-interval (1min).
	FailureRateInterval time.Duration
	// FailureRateDelay is restart-strategy.failure-rate.delay (1s).
	FailureRateDelay time.Duration

	// InitialBackoff is restart-strategy.exponential-delay.initial-backoff
	// (1s).
	InitialBackoff time.Duration
	// MaxBackoff is restart-strategy.exponential-delay.max-backoff (1min).
	MaxBackoff time.Duration
	// BackoffMultiplier is
	// restart-strategy.exponential-delay.backoff-multiplier (1.5).
	BackoffMultiplier float64
	// ResetBackoffThreshold is
	// restart-strategy.exponential-delay.reset-backoff-threshold (1h).
	ResetBackoffThreshold time.Duration
	// JitterFactor is restart-strategy.exponential-delay.jitter-factor (0.1).
	JitterFactor float64
	// AttemptsBeforeResetBackoff is
	// restart-strategy.exponential-delay.attempts-before-reset-backoff
	// (unlimited: 0 means math.MaxInt).
	AttemptsBeforeResetBackoff int
}

// Default returns Flink's defaults; with checkpointing the strategy is
// exponential-delay, without it none.
func Default(checkpointing bool) Config {
	c := Config{
		Type:                   None,
		FixedDelayAttempts:     1,
		FixedDelay:             time.Second,
		MaxFailuresPerInterval: 1,
		FailureRateInterval:    time.Minute,
		FailureRateDelay:       time.Second,
		InitialBackoff:         time.Second,
		MaxBackoff:             time.Minute,
		BackoffMultiplier:      1.5,
		ResetBackoffThreshold:  time.Hour,
		JitterFactor:           0.1,
	}
	if checkpointing {
		c.Type = ExponentialDelay
	}
	return c
}

// Validate reports every invalid setting of the chosen strategy at once.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	switch c.Type {
	case None:
	case FixedDelay:
		if c.FixedDelayAttempts < 0 {
			bad("restart-strategy.fixed-delay.attempts %d must not be negative", c.FixedDelayAttempts)
		}
		if c.FixedDelay < 0 {
			bad("restart-strategy.fixed-delay.delay %v must not be negative", c.FixedDelay)
		}
	case FailureRate:
		if c.MaxFailuresPerInterval < 1 {
			bad("restart-strategy.failure-rate.max-failures-per-interval %d must be at least 1", c.MaxFailuresPerInterval)
		}
		if c.FailureRateInterval <= 0 {
			bad("restart-strategy.failure-rate.failure-rate-interval %v must be positive", c.FailureRateInterval)
		}
		if c.FailureRateDelay < 0 {
			bad("restart-strategy.failure-rate.delay %v must not be negative", c.FailureRateDelay)
		}
	case ExponentialDelay:
		if c.InitialBackoff <= 0 {
			bad("restart-strategy.exponential-delay.initial-backoff %v must be positive", c.InitialBackoff)
		}
		if c.MaxBackoff < c.InitialBackoff {
			bad("restart-strategy.exponential-delay.max-backoff %v must not be below initial-backoff %v", c.MaxBackoff, c.InitialBackoff)
		}
		if c.BackoffMultiplier < 1 {
			bad("restart-strategy.exponential-delay.backoff-multiplier %v must be at least 1", c.BackoffMultiplier)
		}
		if c.ResetBackoffThreshold <= 0 {
			bad("restart-strategy.exponential-delay.reset-backoff-threshold %v must be positive", c.ResetBackoffThreshold)
		}
		if c.JitterFactor < 0 || c.JitterFactor > 1 {
			bad("restart-strategy.exponential-delay.jitter-factor %v must be between 0 and 1", c.JitterFactor)
		}
		if c.AttemptsBeforeResetBackoff < 0 {
			bad("restart-strategy.exponential-delay.attempts-before-reset-backoff %d must not be negative", c.AttemptsBeforeResetBackoff)
		}
	default:
		bad("restart-strategy.type %q must be one of %s, %s, %s, %s", c.Type, None, FixedDelay, FailureRate, ExponentialDelay)
	}
	return errors.Join(errs...)
}

// Strategy decides on restarts.
type Strategy interface {
	// OnFailure records a failure that happened at now and returns whether
	// the job restarts and after how long.
	OnFailure(now time.Time) (restart bool, delay time.Duration)
	// String describes the strategy for logs.
	String() string
}

// New returns the strategy c describes. jitter returns a uniform random
// number in [0, 1) for the exponential backoff's jitter; nil uses
// math/rand.
func New(c Config, jitter func() float64) (Strategy, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	switch c.Type {
	case FixedDelay:
		return &fixedDelay{attempts: c.FixedDelayAttempts, delay: c.FixedDelay}, nil
	case FailureRate:
		return &failureRate{max: c.MaxFailuresPerInterval, interval: c.FailureRateInterval, delay: c.FailureRateDelay}, nil
	case ExponentialDelay:
		if jitter == nil {
			jitter = rand.Float64
		}
		attempts := c.AttemptsBeforeResetBackoff
		if attempts == 0 {
			attempts = math.MaxInt
		}
		return &exponential{c: c, attemptsLeft: attempts, jitter: jitter}, nil
	}
	return noRestart{}, nil
}

type noRestart struct{}

func (noRestart) OnFailure(time.Time) (bool, time.Duration) { return false, 0 }
func (noRestart) String() string                            { return "no restarts" }

type fixedDelay struct {
	attempts, used int
	delay          time.Duration
}

func (f *fixedDelay) OnFailure(time.Time) (bool, time.Duration) {
	if f.used >= f.attempts {
		return false, 0
	}
	f.used++
	return true, f.delay
}

func (f *fixedDelay) String() string {
	return fmt.Sprintf("fixed delay (%d attempts, %v delay)", f.attempts, f.delay)
}

type failureRate struct {
	max      int
	interval time.Duration
	delay    time.Duration
	failures []time.Time // the last max failures, oldest first
}

// OnFailure restarts unless this failure makes more than max failures
// within interval: Flink keeps the last max failure times and refuses when
// the queue is full and its oldest entry is within the interval.
func (f *failureRate) OnFailure(now time.Time) (bool, time.Duration) {
	if len(f.failures) == f.max && now.Sub(f.failures[0]) <= f.interval {
		return false, 0
	}
	if len(f.failures) == f.max {
		f.failures = f.failures[1:]
	}
	f.failures = append(f.failures, now)
	return true, f.delay
}

func (f *failureRate) String() string {
	return fmt.Sprintf("failure rate (%d per %v, %v delay)", f.max, f.interval, f.delay)
}

type exponential struct {
	c            Config
	backoff      time.Duration // last backoff before jitter; 0 before the first failure
	last         time.Time
	attemptsLeft int
	jitter       func() float64
}

func (e *exponential) OnFailure(now time.Time) (bool, time.Duration) {
	if e.backoff == 0 || now.Sub(e.last) >= e.c.ResetBackoffThreshold+e.backoff {
		// First failure, or the job ran long enough since the last restart.
		e.backoff = e.c.InitialBackoff
		e.attemptsLeft = e.c.AttemptsBeforeResetBackoff
		if e.attemptsLeft == 0 {
			e.attemptsLeft = math.MaxInt
		}
	} else {
		next := time.Duration(float64(e.backoff) * e.c.BackoffMultiplier)
		e.backoff = min(max(next, e.backoff), e.c.MaxBackoff)
	}
	e.last = now
	if e.attemptsLeft <= 0 {
		return false, 0
	}
	e.attemptsLeft--
	d := e.backoff
	if j := e.c.JitterFactor; j > 0 {
		d += time.Duration((e.jitter()*2 - 1) * j * float64(e.backoff))
	}
	return true, max(d, 0)
}

func (e *exponential) String() string {
	return fmt.Sprintf("exponential delay (%v to %v, x%v)", e.c.InitialBackoff, e.c.MaxBackoff, e.c.BackoffMultiplier)
}
