package coordinator

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/checkpoint"
)

// TestRandomized drives coordinators with random configurations and random
// inputs (including late, duplicate and bogus ones) and checks the
// protocol's invariants on the actions:
//
//   - trigger ids strictly increase;
//   - a checkpoint completes at most once, and only inside the
//     MetadataWritten call for its id, after its WriteMetadata;
//   - a checkpoint ends (completes or aborts) exactly once, and every abort
//     is followed by CleanupFiles and NotifyAborted for it;
//   - pending checkpoints never exceed MaxConcurrent, retained ones never
//     exceed NumRetained, and subsumed ids were completed, oldest first;
//   - nothing is triggered after FailJob or Shutdown;
//   - after a Tick, NextTick is in the future (or zero).
func TestRandomized(t *testing.T) {
	seen := map[string]int{}
	for seed := uint64(1); seed <= 300; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runRandom(t, seed, seen) })
	}
	t.Logf("actions seen: %v", seen)
	// The runs must reach every outcome, or the invariants prove little.
	for _, k := range []string{"Trigger", "Completed", "Subsume", "DiscardState", "FailJob",
		"aborted-" + ReasonExpired.String(), "aborted-" + ReasonSubsumed.String(),
		"aborted-" + ReasonDeclined.String(), "aborted-" + ReasonIOError.String(),
		"aborted-" + ReasonJobCanceled.String(), "aborted-" + ReasonJobFailing.String()} {
		if seen[k] == 0 {
			t.Errorf("no run produced %s (saw %v)", k, seen)
		}
	}
}

func runRandom(t *testing.T, seed uint64, seen map[string]int) {
	rng := rand.New(rand.NewPCG(seed, seed*7919))
	ntasks := 1 + rng.IntN(4)
	cfg := Config{
		Interval:          time.Duration(rng.IntN(4)) * 500 * time.Millisecond,
		MinPause:          time.Duration(rng.IntN(3)) * 300 * time.Millisecond,
		MaxConcurrent:     1 + rng.IntN(3),
		Timeout:           time.Duration(1+rng.IntN(10)) * time.Second,
		TolerableFailures: rng.IntN(4) * rng.IntN(4),
		NumRetained:       1 + rng.IntN(3),
		JobName:           "rnd",
	}
	if rng.IntN(3) == 0 {
		cfg.TolerableFailures = 1000 // long runs that never fail the job
	}
	for i := range ntasks {
		cfg.Tasks = append(cfg.Tasks, TaskID{Vertex: i % 2, Subtask: i / 2})
	}
	now := base
	c, err := New[int64](cfg, now, 1)
	if err != nil {
		t.Fatal(err)
	}
	type state int
	const (
		pendingS state = iota
		finalizingS
		completedS
		abortedS
	)
	cps := map[int64]state{}
	var lastTrigger int64
	var retained []int64
	stopped := false

	check := func(op string, writtenID int64) {
		acts := c.Actions()
		for i, a := range acts {
			name, _, _ := strings.Cut(strings.TrimPrefix(fmt.Sprintf("%T", a), "coordinator."), "[")
			if ab, ok := a.(Aborted); ok {
				name = "aborted-" + ab.Reason.String()
			}
			seen[name]++
			switch a := a.(type) {
			case Trigger:
				if stopped {
					t.Fatalf("%s: trigger %d after stop", op, a.ID)
				}
				if a.ID <= lastTrigger {
					t.Fatalf("%s: trigger id %d after %d", op, a.ID, lastTrigger)
				}
				lastTrigger = a.ID
				cps[a.ID] = pendingS
			case WriteMetadata[int64]:
				if cps[a.ID] != pendingS || len(a.Handles) != ntasks {
					t.Fatalf("%s: write-metadata %d in state %d with %d handles", op, a.ID, cps[a.ID], len(a.Handles))
				}
				cps[a.ID] = finalizingS
			case Completed:
				if writtenID != a.ID {
					t.Fatalf("%s: checkpoint %d completed outside its MetadataWritten", op, a.ID)
				}
				if cps[a.ID] != finalizingS {
					t.Fatalf("%s: checkpoint %d completed in state %d", op, a.ID, cps[a.ID])
				}
				cps[a.ID] = completedS
				retained = append(retained, a.ID)
			case Subsume:
				if len(a.IDs) == 0 || !slices.Equal(a.IDs, retained[:len(a.IDs)]) {
					t.Fatalf("%s: subsume %v, retained %v", op, a.IDs, retained)
				}
				retained = retained[len(a.IDs):]
			case Aborted:
				if s, ok := cps[a.ID]; !ok || s > finalizingS {
					t.Fatalf("%s: abort of %d in state %d (known %v)", op, a.ID, s, ok)
				}
				cps[a.ID] = abortedS
				if i+2 >= len(acts) || acts[i+1] != (CleanupFiles{a.ID}) || acts[i+2] != (NotifyAborted{a.ID}) {
					t.Fatalf("%s: abort of %d not followed by cleanup and notify", op, a.ID)
				}
			case FailJob:
				stopped = true
			}
		}
		n := 0
		for _, s := range cps {
			if s <= finalizingS {
				n++
			}
		}
		if n > cfg.MaxConcurrent || n != len(c.Pending()) {
			t.Fatalf("%s: %d pending (coordinator says %v), max %d", op, n, c.Pending(), cfg.MaxConcurrent)
		}
		if len(retained) > cfg.NumRetained || !slices.Equal(retained, c.Retained()) {
			t.Fatalf("%s: retained %v, coordinator %v", op, retained, c.Retained())
		}
		// After a Tick nothing is overdue; other inputs may leave NextTick in
		// the past (the driver then ticks at once).
		if nt := c.NextTick(); strings.HasPrefix(op, "tick") && !nt.IsZero() && !nt.After(now) {
			t.Fatalf("%s: next tick %v before now %v", op, nt, now)
		}
	}
	pick := func() int64 {
		if p := c.Pending(); len(p) > 0 && rng.IntN(5) > 0 {
			return p[rng.IntN(len(p))]
		}
		if lastTrigger == 0 || rng.IntN(10) == 0 {
			return int64(rng.IntN(20))
		}
		return lastTrigger - int64(rng.IntN(3))
	}
	for step := range 400 {
		now = now.Add(time.Duration(rng.IntN(200)) * time.Millisecond)
		id := pick()
		task := cfg.Tasks[rng.IntN(ntasks)]
		var op string
		var written int64
		switch r := rng.IntN(100); {
		case r < 25:
			op = "tick"
			if nt := c.NextTick(); !nt.IsZero() && rng.IntN(2) == 0 && nt.After(now) {
				now = nt
			}
			c.Tick(now)
		case r < 30:
			op = "trigger"
			got, err := c.TriggerManual(now, checkpoint.FormatConfigured)
			if err == nil && got != lastTrigger+1 && lastTrigger != 0 {
				t.Fatalf("manual trigger got id %d after %d", got, lastTrigger)
			}
			if err != nil && !errors.Is(err, ErrTooManyConcurrent) && !errors.Is(err, ErrStopped) {
				t.Fatalf("manual trigger: %v", err)
			}
		case r < 70:
			op = "ack"
			c.Ack(now, id, task, TaskStats{Sync: time.Millisecond}, id)
		case r < 85:
			op, written = "written", id
			c.MetadataWritten(now, id)
		case r < 88:
			op = "metadata-failed"
			c.MetadataFailed(now, id, errors.New("boom"))
		case r < 93:
			op = "decline"
			c.Decline(now, id, task, errors.New("no"), Reason(1+rng.IntN(int(numReasons))))
		case r < 94 && step > 300:
			op = "shutdown"
			c.Shutdown(now, 0)
			stopped = true
		default:
			op = "tick"
			c.Tick(now)
		}
		check(fmt.Sprintf("%s step %d id=%d", op, step, id), written)
	}
	c.Shutdown(now, 0)
	stopped = true
	check("final shutdown", 0)
	for id, s := range cps {
		if s <= finalizingS {
			t.Fatalf("checkpoint %d still pending after shutdown", id)
		}
	}
}
