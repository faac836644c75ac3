package clock

import (
	"testing"
	"time"
)

func TestRealNow(t *testing.T) {
	c := Real()
	before := time.Now()
	now := c.Now()
	if now.Before(before) || now.After(time.Now()) {
		t.Fatalf("Now() = %v, not between %v and the time after", now, before)
	}
}

func TestRealTimer(t *testing.T) {
	c := Real()
	tm := c.NewTimer(time.Millisecond)
	select {
	case <-tm.C():
	case <-time.After(10 * time.Second):
		t.Fatal("timer did not fire")
	}
	if tm.Stop() {
		t.Fatal("Stop after receiving = true, want false")
	}
	if tm.Reset(time.Hour) {
		t.Fatal("Reset of a fired timer = true, want false")
	}
	if !tm.Stop() {
		t.Fatal("Stop of an armed timer = false, want true")
	}
	select {
	case v := <-tm.C():
		t.Fatalf("stopped timer delivered %v", v)
	default:
	}
}
