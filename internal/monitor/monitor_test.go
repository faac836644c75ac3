package monitor

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/checkpoint/stats"
	"github.com/weirstream/weir/internal/graph"
	"github.com/weirstream/weir/internal/network"
	"github.com/weirstream/weir/internal/task"
)

type fakeDeployment []task.TaskMetrics

func (f fakeDeployment) Metrics() []task.TaskMetrics { return f }

func TestJobLifecycleAndControls(t *testing.T) {
	now := time.UnixMilli(1_000)
	j := NewJob(NewJobID(), "counter", nil, func() time.Time { return now }, 0)
	if len(j.ID) != 32 {
		t.Fatalf("job id %q is not 32 hex digits", j.ID)
	}
	if err := j.Cancel(); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("cancel without controls: %v", err)
	}
	canceled := 0
	j.SetControls(Controls{Cancel: func() { canceled++ }, TriggerCheckpoint: func(context.Context) (int64, error) { return 7, nil }})
	j.Deployed(fakeDeployment{{Vertex: 0, Name: "src (1/1)"}}, false)
	now = now.Add(time.Second)
	j.SetState(Running)
	s := j.Status()
	if s.State != Running || len(s.Tasks) != 1 || s.Timestamps[Running] != now || s.Restarts != 0 {
		t.Fatalf("running status %+v", s)
	}
	if id, err := j.TriggerCheckpoint(context.Background()); id != 7 || err != nil {
		t.Fatalf("trigger %d %v", id, err)
	}
	j.Failed(errors.New("boom"))
	j.SetState(Restarting)
	j.Deployed(nil, false)
	j.Deployed(fakeDeployment{}, true)
	if s := j.Status(); s.Restarts != 1 || s.Failure != "boom" || len(s.Exceptions) != 1 || s.State != Restarting {
		t.Fatalf("after a restart %+v", s)
	}
	if err := j.Cancel(); err != nil || canceled != 1 || j.Status().State != Cancelling {
		t.Fatalf("cancel: %v, called %d, state %s", err, canceled, j.Status().State)
	}
	now = now.Add(time.Second)
	j.SetState(Canceled)
	j.SetState(Running) // terminal states stay
	s = j.Status()
	if s.State != Canceled || s.End != now || s.Tasks != nil {
		t.Fatalf("canceled status %+v", s)
	}
	if err := j.Cancel(); !errors.Is(err, ErrNotRunning) || canceled != 1 {
		t.Fatalf("cancel after the end: %v (called %d)", err, canceled)
	}
	if _, err := j.TriggerCheckpoint(context.Background()); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("trigger after the end: %v", err)
	}
	var nilJob *Job
	nilJob.SetState(Running)
	nilJob.Failed(errors.New("x"))
	nilJob.Deployed(nil, true)
}

func TestVertices(t *testing.T) {
	src := &graph.Node{Name: "Source", UID: "src"}
	m := &graph.Node{Name: "Map", UID: "map"}
	sink := &graph.Node{Name: "Sink"}
	v0 := &graph.Vertex{ID: 0, Nodes: []*graph.Node{src, m}, Parallelism: 2}
	v1 := &graph.Vertex{ID: 1, Nodes: []*graph.Node{sink}, Parallelism: 3,
		Inputs: []*graph.Edge{{From: m, To: sink, Partitioner: network.Hash}}}
	g := &graph.JobGraph{Vertices: []*graph.Vertex{v0, v1}, VertexOf: map[*graph.Node]*graph.Vertex{src: v0, m: v0, sink: v1}}
	vs := Vertices("job", g)
	if len(vs) != 2 || vs[0].Name != "Source -> Map" || vs[1].Parallelism != 3 || len(vs[0].Operators) != 2 {
		t.Fatalf("vertices %+v", vs)
	}
	if vs[1].Inputs[0].Vertex != 0 || vs[1].Inputs[0].ShipStrategy != "HASH" {
		t.Fatalf("inputs %+v", vs[1].Inputs)
	}
	if vs[0].ID == vs[1].ID || len(vs[0].ID) != 32 || VertexID("job", v0) != vs[0].ID {
		t.Fatalf("ids %q %q", vs[0].ID, vs[1].ID)
	}
	// The id follows the head's uid, not the job or position.
	if VertexID("other", v0) != vs[0].ID {
		t.Fatal("a uid-derived vertex id changed with the job name")
	}
	j := NewJob("id", "job", vs, nil, 0)
	if v, ok := j.Vertex(vs[1].ID); !ok || v.Index != 1 {
		t.Fatal("vertex by id")
	}
	if v, ok := j.Vertex("1"); !ok || v.ID != vs[1].ID {
		t.Fatal("vertex by index")
	}
	if _, ok := j.Vertex("nope"); ok {
		t.Fatal("unknown vertex found")
	}
}

func TestHistorySizeAndCancelDuringDeploy(t *testing.T) {
	j := NewJob("id", "job", nil, nil, 2)
	for id := int64(1); id <= 3; id++ {
		j.Checkpoints.Triggered(id, time.Now(), stats.KindCheckpoint, 1)
	}
	if h := j.Checkpoints.Snapshot().History; len(h) != 2 || h[0].ID != 3 {
		t.Fatalf("history %+v, want the 2 newest (web.checkpoints.history)", h)
	}
	j.SetControls(Controls{Cancel: func() {}})
	j.SetState(Running)
	if err := j.Cancel(); err != nil {
		t.Fatal(err)
	}
	j.SetState(Restarting) // a restart racing the cancel
	j.SetState(Running)
	if s := j.Status().State; s != Cancelling {
		t.Fatalf("state %s after a deployment during the cancel, want CANCELLING", s)
	}
	j.SetState(Canceled)
	if s := j.Status().State; s != Canceled {
		t.Fatalf("state %s", s)
	}
}
