package clock

import (
	"sync"
	"testing"
	"time"
)

var epoch = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// recv returns the value waiting on c, failing if there is none.
func recv(t *testing.T, c <-chan time.Time) time.Time {
	t.Helper()
	select {
	case v := <-c:
		return v
	default:
		t.Fatal("timer has not fired")
		return time.Time{}
	}
}

// empty fails if a value is waiting on c.
func empty(t *testing.T, c <-chan time.Time) {
	t.Helper()
	select {
	case v := <-c:
		t.Fatalf("timer fired unexpectedly with %v", v)
	default:
	}
}

func TestManualNowAdvanceSet(t *testing.T) {
	m := NewManual(epoch)
	if got := m.Now(); !got.Equal(epoch) {
		t.Fatalf("Now() = %v, want %v", got, epoch)
	}
	m.Advance(time.Second)
	if got, want := m.Now(), epoch.Add(time.Second); !got.Equal(want) {
		t.Fatalf("after Advance: Now() = %v, want %v", got, want)
	}
	m.Set(epoch.Add(time.Hour))
	if got, want := m.Now(), epoch.Add(time.Hour); !got.Equal(want) {
		t.Fatalf("after Set: Now() = %v, want %v", got, want)
	}
}

func TestManualTimerFires(t *testing.T) {
	m := NewManual(epoch)
	tm := m.NewTimer(10 * time.Second)
	if got := m.Waiters(); got != 1 {
		t.Fatalf("Waiters() = %d, want 1", got)
	}
	m.Advance(9 * time.Second)
	empty(t, tm.C())
	m.Advance(time.Second)
	if got, want := recv(t, tm.C()), epoch.Add(10*time.Second); !got.Equal(want) {
		t.Fatalf("fired with %v, want the deadline %v", got, want)
	}
	if got := m.Waiters(); got != 0 {
		t.Fatalf("Waiters() after firing = %d, want 0", got)
	}
	m.Advance(time.Hour)
	empty(t, tm.C()) // one-shot
}

func TestManualTimerFiresOnSetPastDeadline(t *testing.T) {
	m := NewManual(epoch)
	tm := m.NewTimer(time.Second)
	m.Set(epoch.Add(time.Minute))
	if got, want := recv(t, tm.C()), epoch.Add(time.Second); !got.Equal(want) {
		t.Fatalf("fired with %v, want %v", got, want)
	}
	if got, want := m.Now(), epoch.Add(time.Minute); !got.Equal(want) {
		t.Fatalf("Now() = %v, want %v", got, want)
	}
}

func TestManualTimerNonPositiveFiresAtOnce(t *testing.T) {
	for _, d := range []time.Duration{0, -time.Second} {
		m := NewManual(epoch)
		tm := m.NewTimer(d)
		if got := recv(t, tm.C()); !got.Equal(epoch) {
			t.Fatalf("NewTimer(%v) fired with %v, want %v", d, got, epoch)
		}
		if m.Waiters() != 0 {
			t.Fatalf("NewTimer(%v): Waiters() = %d, want 0", d, m.Waiters())
		}
	}
}

func TestManualDeadlineOrder(t *testing.T) {
	// One Advance past several deadlines fires each due timer with its own
	// deadline, not the time Advance moved to.
	m := NewManual(epoch)
	ds := []time.Duration{5, 1, 3, 3, 2, 4}
	var tms []Timer
	for _, d := range ds {
		tms = append(tms, m.NewTimer(d*time.Second))
	}
	m.Advance(3 * time.Second)
	for i, d := range ds {
		if d <= 3 {
			if got, want := recv(t, tms[i].C()), epoch.Add(d*time.Second); !got.Equal(want) {
				t.Fatalf("timer %d fired with %v, want %v", i, got, want)
			}
		} else {
			empty(t, tms[i].C())
		}
	}
	if got := m.Waiters(); got != 2 {
		t.Fatalf("Waiters() = %d, want 2", got)
	}
}

func TestManualHeapOrder(t *testing.T) {
	// Many timers with stops and resets: each fires exactly at its deadline,
	// which checks the heap's position tracking.
	m := NewManual(epoch)
	const n = 200
	tms := make([]Timer, n)
	for i := range n {
		tms[i] = m.NewTimer(time.Duration((i*37)%n+1) * time.Millisecond)
	}
	// Stop every third timer, then reset every fifth to a later deadline.
	for i := 0; i < n; i += 3 {
		tms[i].Stop()
	}
	for i := 0; i < n; i += 5 {
		tms[i].Reset(time.Second)
	}
	for step := 1; step <= n; step++ {
		m.Advance(time.Millisecond)
		for i := range n {
			d := time.Duration((i*37)%n+1) * time.Millisecond
			due := d == time.Duration(step)*time.Millisecond && i%3 != 0 && i%5 != 0
			select {
			case v := <-tms[i].C():
				if !due {
					t.Fatalf("step %d: timer %d fired with %v", step, i, v)
				}
			default:
				if due {
					t.Fatalf("step %d: timer %d did not fire", step, i)
				}
			}
		}
	}
	m.Advance(time.Second)
	for i := 0; i < n; i += 5 {
		// Reset at epoch, so the deadline is epoch+1s.
		if got, want := recv(t, tms[i].C()), epoch.Add(time.Second); !got.Equal(want) {
			t.Fatalf("reset timer %d fired with %v, want %v", i, got, want)
		}
	}
	if got := m.Waiters(); got != 0 {
		t.Fatalf("Waiters() = %d, want 0", got)
	}
}

func TestManualStop(t *testing.T) {
	m := NewManual(epoch)
	tm := m.NewTimer(time.Second)
	if !tm.Stop() {
		t.Fatal("Stop of an armed timer = false, want true")
	}
	if tm.Stop() {
		t.Fatal("second Stop = true, want false")
	}
	if m.Waiters() != 0 {
		t.Fatalf("Waiters() = %d, want 0", m.Waiters())
	}
	m.Advance(time.Hour)
	empty(t, tm.C())
}

func TestManualStopDrainsUndelivered(t *testing.T) {
	m := NewManual(epoch)
	tm := m.NewTimer(time.Second)
	m.Advance(time.Second)
	// Fired but not received: Stop reports it active and discards the value,
	// as time.Timer does since Go 1.23.
	if !tm.Stop() {
		t.Fatal("Stop of a fired, unreceived timer = false, want true")
	}
	empty(t, tm.C())
	if tm.Stop() {
		t.Fatal("Stop after the drain = true, want false")
	}
}

func TestManualStopAfterReceive(t *testing.T) {
	m := NewManual(epoch)
	tm := m.NewTimer(time.Second)
	m.Advance(time.Second)
	recv(t, tm.C())
	if tm.Stop() {
		t.Fatal("Stop after receive = true, want false")
	}
}

func TestManualReset(t *testing.T) {
	m := NewManual(epoch)
	tm := m.NewTimer(time.Second)
	m.Advance(500 * time.Millisecond)
	if !tm.Reset(time.Second) { // new deadline epoch+1.5s
		t.Fatal("Reset of an armed timer = false, want true")
	}
	m.Advance(600 * time.Millisecond)
	empty(t, tm.C())
	m.Advance(400 * time.Millisecond)
	if got, want := recv(t, tm.C()), epoch.Add(1500*time.Millisecond); !got.Equal(want) {
		t.Fatalf("fired with %v, want %v", got, want)
	}
	if tm.Reset(time.Second) {
		t.Fatal("Reset of a fired, received timer = true, want false")
	}
	if m.Waiters() != 1 {
		t.Fatalf("Waiters() = %d, want 1", m.Waiters())
	}
	m.Advance(time.Second)
	recv(t, tm.C())

	// Reset discards an undelivered value.
	m.Advance(time.Hour)
	tm.Reset(time.Second)
	m.Advance(time.Second)
	if !tm.Reset(0) {
		t.Fatal("Reset of a fired, unreceived timer = false, want true")
	}
	if got, want := recv(t, tm.C()), m.Now(); !got.Equal(want) {
		t.Fatalf("Reset(0) fired with %v, want %v", got, want)
	}
	empty(t, tm.C())
}

func TestManualBackwards(t *testing.T) {
	m := NewManual(epoch)
	tm := m.NewTimer(time.Second)
	m.Set(epoch.Add(-time.Hour))
	empty(t, tm.C())
	m.Advance(time.Hour)
	empty(t, tm.C())
	m.Advance(time.Second)
	if got, want := recv(t, tm.C()), epoch.Add(time.Second); !got.Equal(want) {
		t.Fatalf("fired with %v, want %v", got, want)
	}
}

// TestManualConcurrent drives a goroutine that sleeps on timers from the test
// goroutine, using Waiters to know when it is blocked.
func TestManualConcurrent(t *testing.T) {
	m := NewManual(epoch)
	const rounds = 100
	woke := make(chan time.Time)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tm := m.NewTimer(time.Second)
		for range rounds {
			woke <- <-tm.C()
			tm.Reset(time.Second)
		}
		tm.Stop()
	}()
	for i := range rounds {
		for m.Waiters() == 0 {
			time.Sleep(10 * time.Microsecond)
		}
		m.Advance(time.Second)
		if got, want := <-woke, epoch.Add(time.Duration(i+1)*time.Second); !got.Equal(want) {
			t.Fatalf("round %d: woke with %v, want %v", i, got, want)
		}
	}
	wg.Wait()
	if m.Waiters() != 0 {
		t.Fatalf("Waiters() = %d, want 0", m.Waiters())
	}
}

// TestManualRace exercises every method from several goroutines for the race
// detector.
func TestManualRace(t *testing.T) {
	m := NewManual(epoch)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tm := m.NewTimer(time.Duration(g+1) * time.Millisecond)
			for i := range 500 {
				switch i % 4 {
				case 0:
					tm.Reset(time.Duration(i%7) * time.Millisecond)
				case 1:
					tm.Stop()
				case 2:
					select {
					case <-tm.C():
					default:
					}
				case 3:
					m.Advance(time.Millisecond)
				}
				_ = m.Now()
				_ = m.Waiters()
			}
			tm.Stop()
		}()
	}
	wg.Wait()
	if m.Waiters() != 0 {
		t.Fatalf("Waiters() = %d, want 0", m.Waiters())
	}
}
