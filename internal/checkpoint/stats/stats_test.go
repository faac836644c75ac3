package stats

import (
	"testing"
	"time"
)

func TestTrackerLifecycle(t *testing.T) {
	tr := NewTracker(3)
	t0 := time.UnixMilli(1_000_000)
	tr.Restored(Restored{ID: 7, Time: t0, ExternalPath: "weir-data/checkpoints/job/chk-7"})
	for id := int64(8); id <= 12; id++ {
		at := t0.Add(time.Duration(id) * time.Second)
		tr.Triggered(id, at, KindCheckpoint, 2)
		tr.Acked(id, Subtask{Vertex: 1, Index: 0, AckTime: at.Add(30 * time.Millisecond), CheckpointedSize: 100, Sync: time.Millisecond})
		tr.Acked(id, Subtask{Vertex: 0, Index: 0, AckTime: at.Add(10 * time.Millisecond), CheckpointedSize: 50, Unaligned: id == 9})
		tr.Acked(id, Subtask{Vertex: 0, Index: 0, AckTime: at.Add(20 * time.Millisecond), CheckpointedSize: 50}) // duplicate: ignored
		switch id {
		case 10:
			tr.Failed(id, at.Add(time.Second), "Checkpoint expired before completing.")
		case 12: // still in progress
		default:
			tr.Completed(id, at.Add(time.Duration(id)*10*time.Millisecond), 150, 150*id, 0, "chk")
		}
	}
	tr.Discarded(9)
	s := tr.Snapshot()
	want := Counts{Restored: 1, Total: 5, InProgress: 1, Completed: 3, Failed: 1}
	if s.Counts != want || tr.Counts() != want {
		t.Fatalf("counts %+v, want %+v", s.Counts, want)
	}
	if len(s.History) != 3 || s.History[0].ID != 12 || s.History[2].ID != 10 {
		t.Fatalf("history %+v", s.History)
	}
	if h := s.History[0]; h.Status != InProgress || h.CheckpointedSize != 150 || h.EndToEnd() != 30*time.Millisecond || len(h.Subtasks) != 2 {
		t.Fatalf("in progress %+v", h)
	}
	if st, ok := s.History[0].Subtask(1, 0); !ok || st.Sync != time.Millisecond {
		t.Fatalf("subtask lookup %+v %v", st, ok)
	}
	if s.LatestCompleted == nil || s.LatestCompleted.ID != 11 || s.LatestCompleted.EndToEnd() != 110*time.Millisecond ||
		s.LatestCompleted.StateSize != 1650 {
		t.Fatalf("latest completed %+v", s.LatestCompleted)
	}
	if s.LatestFailed == nil || s.LatestFailed.ID != 10 || s.LatestFailed.FailureMessage == "" || s.LatestFailed.EndToEnd() != time.Second {
		t.Fatalf("latest failed %+v", s.LatestFailed)
	}
	if s.LatestRestored == nil || s.LatestRestored.ID != 7 {
		t.Fatalf("restored %+v", s.LatestRestored)
	}
	e2e := s.Summaries.EndToEnd
	if e2e.Count != 3 || e2e.Min != 80 || e2e.Max != 110 || e2e.Quantile(0.5) != 90 {
		t.Fatalf("end-to-end summary %+v p50 %v", e2e, e2e.Quantile(0.5))
	}
	if _, ok := tr.Checkpoint(8); ok {
		t.Fatal("checkpoint 8 fell out of the history but is still found")
	}
	c, ok := tr.Checkpoint(11)
	if !ok || c.Status != Completed {
		t.Fatalf("checkpoint 11: %+v %v", c, ok)
	}
	// Reports about unknown or finished checkpoints change nothing.
	tr.Acked(11, Subtask{Vertex: 5})
	tr.Failed(11, t0, "late")
	if c2, _ := tr.Checkpoint(11); len(c2.Subtasks) != 2 || c2.Status != Completed {
		t.Fatalf("a finished checkpoint changed: %+v", c2)
	}
}
