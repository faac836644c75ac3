// Package clock is the processing-time seam of the runtime.
//
// Code that needs wall-clock time or timers takes a Clock instead of calling
// the time package, so tests can drive time with a Manual clock and run
// deterministically and fast. Real is the production implementation; it is a
// thin wrapper over time.Now and time.NewTimer.
//
// Timers follow the Go 1.23+ semantics of time.Timer: a timer fires at most
// once per arming by a non-blocking send on its channel, and after Stop or
// Reset returns no value from before the call is received.
package clock

import "time"

// Clock tells processing time and makes one-shot timers.
//
// Implementations are safe for concurrent use by multiple goroutines.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// NewTimer returns a timer that sends the current time on its channel
	// once, after at least duration d. A d <= 0 fires immediately.
	NewTimer(d time.Duration) Timer
}

// Timer is a one-shot timer made by a Clock, like *time.Timer.
//
// Stop and Reset may be called from any goroutine, including concurrently
// with a receive from C.
type Timer interface {
	// C returns the channel on which the timer delivers its firing time.
	// The channel is the same for the life of the timer and is never closed.
	C() <-chan time.Time
	// Stop prevents the timer from firing and discards an undelivered
	// value. It reports whether the timer was active: armed, or fired with
	// its value not yet received.
	Stop() bool
	// Reset rearms the timer to fire after d, discarding an undelivered
	// value. It reports whether the timer was active, as Stop does.
	Reset(d time.Duration) bool
}

// Real returns the Clock of the time package.
func Real() Clock { return realClock{} }

type realClock struct{}

var _ Clock = realClock{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

var _ Timer = realTimer{}

func (r realTimer) C() <-chan time.Time        { return r.t.C }
func (r realTimer) Stop() bool                 { return r.t.Stop() }
func (r realTimer) Reset(d time.Duration) bool { return r.t.Reset(d) }
