package watermark

import (
	"fmt"
	"time"
)

// Idleness wraps a Generator and marks its output idle when no record has
// arrived for a timeout of processing time, so that a source split or
// subtask without data does not hold back the watermark downstream (a
// Combiner ignores idle inputs).
//
// Like Flink's WatermarksWithIdleness, it reads the clock only on periodic
// emits, never per record: the first OnPeriodicEmit that finds no record
// since the previous one starts the inactivity period, and the output turns
// idle at the first OnPeriodicEmit more than the timeout after that. So
// idleness is detected between the timeout and the timeout plus two emit
// intervals after the last record. While idle, OnPeriodicEmit returns
// NoWatermark; the next OnEvent makes the output active again at once.
//
// An Idleness is used by one goroutine.
type Idleness struct {
	gen     Generator
	timeout time.Duration
	now     func() time.Time

	sawEvent      bool      // OnEvent since the last OnPeriodicEmit
	inactive      bool      // an inactivity period has started
	inactiveSince time.Time // its start, when inactive
	idle          bool
}

var _ Generator = (*Idleness)(nil)

// WithIdleness returns gen wrapped to turn idle after timeout without
// records, reading processing time from now (such as clock.Clock.Now). It
// panics if timeout is not positive.
func WithIdleness(gen Generator, timeout time.Duration, now func() time.Time) *Idleness {
	if timeout <= 0 {
		panic(fmt.Sprintf("watermark: idleness timeout %v is not positive", timeout))
	}
	return &Idleness{gen: gen, timeout: timeout, now: now}
}

// OnEvent passes ts to the wrapped generator and marks the output active.
func (w *Idleness) OnEvent(ts int64) {
	w.gen.OnEvent(ts)
	w.sawEvent = true
	w.idle = false
}

// OnPeriodicEmit checks for idleness and returns NoWatermark if the output
// is idle, the wrapped generator's watermark otherwise.
func (w *Idleness) OnPeriodicEmit() int64 {
	switch {
	case w.sawEvent:
		w.sawEvent, w.inactive = false, false
	case !w.inactive:
		w.inactive, w.inactiveSince = true, w.now()
	case w.now().Sub(w.inactiveSince) > w.timeout:
		w.idle = true
	}
	if w.idle {
		return NoWatermark
	}
	return w.gen.OnPeriodicEmit()
}

// IsIdle reports whether the output is idle: the last OnPeriodicEmit found
// it idle and no record has arrived since.
func (w *Idleness) IsIdle() bool { return w.idle }
