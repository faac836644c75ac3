package task

import (
	"context"
	"errors"
	"testing"
)

// Aborting a snapshot cancels its asynchronous phases, running or
// starting later, and only its own.
func TestAsyncCancels(t *testing.T) {
	var c asyncCancels
	parent := context.Background()
	a, releaseA := c.start(parent, 1)
	b, releaseB := c.start(parent, 2)
	defer releaseB()
	c.abort(1)
	if !errors.Is(context.Cause(a), errSnapshotAborted) {
		t.Fatalf("phase of aborted snapshot 1: cause %v", context.Cause(a))
	}
	if b.Err() != nil {
		t.Fatalf("phase of snapshot 2 ended with 1's abort: %v", context.Cause(b))
	}
	releaseA()
	late, releaseLate := c.start(parent, 1)
	defer releaseLate()
	if !errors.Is(context.Cause(late), errSnapshotAborted) {
		t.Fatalf("phase started after its abort: cause %v", context.Cause(late))
	}
	d, releaseD := c.start(parent, 3)
	releaseD()
	if d.Err() == nil || len(c.live) != 1 {
		t.Fatalf("released phase: err %v, %d snapshots tracked (want 1: snapshot 2)", d.Err(), len(c.live))
	}
	for id := int64(10); id < 10+3*abortedKept; id++ {
		c.abort(id)
	}
	if len(c.aborted) > abortedKept {
		t.Fatalf("%d aborted ids remembered, want at most %d", len(c.aborted), abortedKept)
	}
	var none *asyncCancels
	if ctx, release := none.start(parent, 1); ctx != parent {
		t.Fatal("nil asyncCancels did not return the parent")
	} else {
		release()
	}
}
