package monitor

import (
	"testing"
	"time"

	"github.com/weirstream/weir/internal/checkpoint/stats"
	"github.com/weirstream/weir/internal/graph"
	"github.com/weirstream/weir/internal/metrics"
)

func TestJobMetrics(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	j := NewJob("a1b2", "orders", nil, func() time.Time { return now }, 0)
	g := RegisterJobMetrics(j)
	if g.Scope() != metrics.ScopeJob || g.Label(metrics.LabelJobID) != "a1b2" || g.Label(metrics.LabelJobName) != "orders" {
		t.Fatalf("group %s %v", g.Scope(), g.Labels())
	}
	value := func(name string) float64 {
		t.Helper()
		m, ok := g.Get(name)
		if !ok {
			t.Fatalf("no metric %s", name)
		}
		if m.Kind() != metrics.KindGauge {
			t.Fatalf("%s is a %s", name, m.Kind())
		}
		return m.Value()
	}
	expect := func(want map[string]float64) {
		t.Helper()
		for name, w := range want {
			if got := value(name); got != w {
				t.Errorf("%s = %v, want %v", name, got, w)
			}
		}
	}
	expect(map[string]float64{"lastCheckpointDuration": -1, "lastCheckpointSize": -1, "lastCompletedCheckpointId": -1,
		"lastCheckpointRestoreTimestamp": -1, "totalNumberOfCheckpoints": 0, "uptime": 0, "numRestarts": 0})

	j.SetState(Running)
	now = now.Add(3 * time.Second)
	tr := j.Checkpoints
	tr.Triggered(1, now, stats.KindCheckpoint, 2)
	tr.Triggered(2, now, stats.KindCheckpoint, 2)
	tr.Triggered(3, now, stats.KindCheckpoint, 2)
	tr.Completed(1, now.Add(250*time.Millisecond), 100, 400, 7, "/cp/chk-1")
	tr.Failed(2, now.Add(time.Second), "declined")
	now = now.Add(2 * time.Second)
	expect(map[string]float64{"lastCheckpointDuration": 250, "lastCheckpointSize": 100, "lastCheckpointFullSize": 400,
		"lastCheckpointPersistedData": 7, "lastCheckpointProcessedData": 0, "lastCompletedCheckpointId": 1,
		"numberOfCompletedCheckpoints": 1, "numberOfFailedCheckpoints": 1, "numberOfInProgressCheckpoints": 1,
		"totalNumberOfCheckpoints": 3, "uptime": 5000, "downtime": 0})

	// A restart: downtime runs, uptime starts over once running again.
	j.SetState(Restarting)
	j.Deployed(nil, true)
	now = now.Add(700 * time.Millisecond)
	expect(map[string]float64{"uptime": 0, "downtime": 700, "numRestarts": 1, "fullRestarts": 1})
	tr.Restored(stats.Restored{ID: 1, Time: now})
	j.SetState(Running)
	now = now.Add(time.Second)
	expect(map[string]float64{"uptime": 1000, "downtime": 0, "lastCheckpointRestoreTimestamp": float64(now.Add(-time.Second).UnixMilli())})

	j.SetState(Finished)
	expect(map[string]float64{"uptime": -1, "downtime": -1})
}

// The metrics' vertex_id label and the REST API's vertex ids agree.
func TestVertexUIDIsVertexID(t *testing.T) {
	for _, v := range []*graph.Vertex{
		{ID: 0, Nodes: []*graph.Node{{Name: "Source", UID: "src"}}},
		{ID: 3, Nodes: []*graph.Node{{Name: "Map"}}},
	} {
		if got, want := graph.VertexUID("job", v), VertexID("job", v); got != want {
			t.Fatalf("vertex %d: graph.VertexUID %s, monitor.VertexID %s", v.ID, got, want)
		}
	}
}
