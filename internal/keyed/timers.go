package keyed

import (
	"time"

	"github.com/weirstream/weir/internal/state"
	"github.com/weirstream/weir/internal/task"
	"github.com/weirstream/weir/internal/timer"
)

// Timers of the current key. ns is the timer's namespace (a window's
// encoding, or nil); the Runtime keeps the slice. Every change is also
// logged when the changelog is on.

func (rt *Runtime) timerFor(ts int64, ns []byte) timer.Timer {
	return timer.Timer{Timestamp: ts, Key: rt.keyBuf, KeyGroup: rt.backend.CurrentKeyGroup(), Namespace: ns}
}

// RegisterEventTime makes the operator's timer callback run for the
// current key once the watermark reaches ts. Registering the same timer
// twice keeps one.
func (rt *Runtime) RegisterEventTime(ts int64, ns []byte) {
	t := rt.timerFor(ts, ns)
	rt.timers.RegisterEventTime(t)
	rt.cl.logTimer(state.TimerRegisterEvent, t)
}

// DeleteEventTime removes an event-time timer of the current key.
func (rt *Runtime) DeleteEventTime(ts int64, ns []byte) {
	t := rt.timerFor(ts, ns)
	rt.timers.DeleteEventTime(t)
	rt.cl.logTimer(state.TimerDeleteEvent, t)
}

// RegisterProcessingTime makes the timer callback run for the current key
// once processing time reaches ts (Unix ms).
func (rt *Runtime) RegisterProcessingTime(ts int64, ns []byte) {
	t := rt.timerFor(ts, ns)
	rt.timers.RegisterProcessingTime(t)
	rt.cl.logTimer(state.TimerRegisterProcessing, t)
	rt.armProcessingTime(t.Timestamp)
}

// DeleteProcessingTime removes a processing-time timer of the current key.
func (rt *Runtime) DeleteProcessingTime(ts int64, ns []byte) {
	t := rt.timerFor(ts, ns)
	rt.timers.DeleteProcessingTime(t)
	rt.cl.logTimer(state.TimerDeleteProcessing, t)
}

// armProcessingTime makes the task fire the processing-time timers due at
// ts once ts has passed: at ts+1 ms, firing the timers up to a millisecond
// before now, as Flink does. A timer for ts promises that everything that
// happens at processing time ts comes before it: a window [s, ts] must not
// fire while a record of its last millisecond can still arrive.
func (rt *Runtime) armProcessingTime(ts int64) {
	if rt.ptWakeup[ts] {
		return
	}
	rt.ptWakeup[ts] = true
	rt.op.Schedule(time.UnixMilli(ts+1), func() error {
		delete(rt.ptWakeup, ts)
		// Up to ts at least: a clock read here that went back must not
		// skip the timer this wake-up is for.
		return rt.timers.AdvanceProcessingTime(max(ts, rt.op.Now().UnixMilli()-1), func(t timer.Timer) error { return rt.fire(t, false) })
	})
}

// AdvanceWatermark fires the event-time timers up to wm.
func (rt *Runtime) AdvanceWatermark(wm int64) error {
	return rt.timers.AdvanceWatermark(wm, func(t timer.Timer) error { return rt.fire(t, true) })
}

// fire runs one timer with its key current. What an event-time timer emits
// carries the timer's time as its timestamp; what a processing-time timer
// emits carries none (as in Flink: wall-clock time is not event time).
func (rt *Runtime) fire(t timer.Timer, eventTime bool) error {
	if eventTime {
		rt.cl.logTimer(state.TimerDeleteEvent, t)
	} else {
		rt.cl.logTimer(state.TimerDeleteProcessing, t)
	}
	rt.keyBuf = append(rt.keyBuf[:0], t.Key...)
	rt.backend.SetCurrentKey(rt.keyBuf, t.KeyGroup)
	rt.hasKey = true
	rt.op.Tracker.Timestamp = task.NoTimestamp
	if eventTime {
		rt.op.Tracker.Timestamp = t.Timestamp
	}
	return rt.onTimer(t, eventTime)
}

// applyTimer applies a replayed timer record of the subtask's key groups
// (others are dropped: rescaling).
func (rt *Runtime) applyTimer(rec []byte) error {
	r, err := state.ParseTimerRecord(rec)
	if err != nil {
		return err
	}
	if r.KeyGroup < rt.op.KeyGroupStart || r.KeyGroup > rt.op.KeyGroupEnd {
		return nil
	}
	t := timer.Timer{Timestamp: r.Timestamp, Key: r.Key, KeyGroup: r.KeyGroup, Namespace: r.Namespace}
	switch r.Op {
	case state.TimerRegisterEvent:
		rt.timers.RegisterEventTime(t)
	case state.TimerRegisterProcessing:
		rt.timers.RegisterProcessingTime(t)
		rt.armProcessingTime(t.Timestamp)
	case state.TimerDeleteEvent:
		rt.timers.DeleteEventTime(t)
	case state.TimerDeleteProcessing:
		rt.timers.DeleteProcessingTime(t)
	}
	return nil
}
