package clock

import (
	"sync"
	"time"
)

// Manual is a Clock whose time moves only when Advance or Set is called.
//
// A timer of a Manual clock fires when the clock reaches or passes its
// deadline: Advance and Set send, in deadline order (ties in creation or
// rearm order), on the channel of every timer whose deadline has passed. The
// value sent is the deadline, the time at which the timer fired on the
// manual timeline; a timer armed with d <= 0 fires at once with the current
// time. Sends are non-blocking into a channel of capacity 1, as with
// time.Timer, so Advance never waits for a receiver.
//
// The time may be moved backwards with Set or a negative Advance; no timer
// fires then, and armed timers keep their absolute deadlines.
//
// Manual is safe for concurrent use: a test typically advances it while the
// code under test blocks on a timer in another goroutine, waiting first for
// Waiters to report that the timer is armed.
type Manual struct {
	mu     sync.Mutex
	now    time.Time
	seq    uint64         // arming order, breaks deadline ties
	timers []*manualTimer // min-heap of armed timers by (when, seq)
}

var _ Clock = (*Manual)(nil)

// NewManual returns a Manual clock that reads start.
func NewManual(start time.Time) *Manual { return &Manual{now: start} }

// Now returns the clock's current time.
func (m *Manual) Now() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.now
}

// NewTimer returns a timer firing when the clock reaches Now()+d.
func (m *Manual) NewTimer(d time.Duration) Timer {
	t := &manualTimer{m: m, c: make(chan time.Time, 1), index: -1}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.armLocked(t, d)
	return t
}

// Advance moves the clock forward by d and fires the timers that are due.
func (m *Manual) Advance(d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.setLocked(m.now.Add(d))
}

// Set moves the clock to t and fires the timers that are due.
func (m *Manual) Set(t time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.setLocked(t)
}

// Waiters returns the number of armed timers: made or reset and neither
// fired nor stopped since.
func (m *Manual) Waiters() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.timers)
}

func (m *Manual) setLocked(now time.Time) {
	for len(m.timers) > 0 && !m.timers[0].when.After(now) {
		t := m.timers[0]
		m.removeLocked(t)
		m.now = t.when
		t.send(t.when)
	}
	m.now = now
}

func (m *Manual) armLocked(t *manualTimer, d time.Duration) {
	if d <= 0 {
		t.send(m.now)
		return
	}
	m.seq++
	t.when, t.seq = m.now.Add(d), m.seq
	t.index = len(m.timers)
	m.timers = append(m.timers, t)
	m.up(t.index)
}

// removeLocked takes armed timer t out of the heap.
func (m *Manual) removeLocked(t *manualTimer) {
	i, last := t.index, len(m.timers)-1
	if i != last {
		m.swap(i, last)
	}
	m.timers[last] = nil
	m.timers = m.timers[:last]
	t.index = -1
	if i != last {
		m.down(i)
		m.up(i)
	}
}

func (m *Manual) less(i, j int) bool {
	a, b := m.timers[i], m.timers[j]
	if !a.when.Equal(b.when) {
		return a.when.Before(b.when)
	}
	return a.seq < b.seq
}

func (m *Manual) swap(i, j int) {
	m.timers[i], m.timers[j] = m.timers[j], m.timers[i]
	m.timers[i].index, m.timers[j].index = i, j
}

func (m *Manual) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !m.less(i, p) {
			return
		}
		m.swap(i, p)
		i = p
	}
}

func (m *Manual) down(i int) {
	n := len(m.timers)
	for {
		c := 2*i + 1
		if c >= n {
			return
		}
		if r := c + 1; r < n && m.less(r, c) {
			c = r
		}
		if !m.less(c, i) {
			return
		}
		m.swap(i, c)
		i = c
	}
}

type manualTimer struct {
	m     *Manual
	c     chan time.Time
	when  time.Time
	seq   uint64
	index int // position in m.timers, -1 when not armed
}

var _ Timer = (*manualTimer)(nil)

func (t *manualTimer) C() <-chan time.Time { return t.c }

func (t *manualTimer) Stop() bool {
	t.m.mu.Lock()
	defer t.m.mu.Unlock()
	return t.stopLocked()
}

func (t *manualTimer) Reset(d time.Duration) bool {
	t.m.mu.Lock()
	defer t.m.mu.Unlock()
	active := t.stopLocked()
	t.m.armLocked(t, d)
	return active
}

// stopLocked disarms t and drains an undelivered value, reporting whether
// there was either.
func (t *manualTimer) stopLocked() bool {
	active := t.index >= 0
	if active {
		t.m.removeLocked(t)
	}
	select {
	case <-t.c:
		active = true
	default:
	}
	return active
}

// send delivers v unless a value is already waiting in the channel.
func (t *manualTimer) send(v time.Time) {
	select {
	case t.c <- v:
	default:
	}
}
