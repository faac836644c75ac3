package task

import (
	"context"
	"math"
	"testing"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/graph"
	"github.com/weirstream/weir/internal/metrics"
	"github.com/weirstream/weir/internal/network"
)

type countingOp struct {
	wmOp
	in, out int64
}

func (o *countingOp) RecordCount() (in, out int64) { return o.in, o.out }

// Which operator counts a task can tell, and what it exports: a counting
// source, two chained operators, the second writing to the network on its
// main output and to a chained sink on a side output.
//
//	0 source -> 1 a -> 2 b -(0)-> network
//	                     b -(1)-> 3 sink
func TestTaskMetricsCounts(t *testing.T) {
	src, a, b, snk := &countingOp{}, &wmOp{}, &wmOp{}, &countingOp{}
	rp := network.NewResultPartition(context.Background(), network.NewPool(4, 256), []network.Target{&eventTarget{}})
	w := network.NewRecordWriter(rp, codec.Int64())
	nodes := []*graph.Node{{Name: "src", Source: true}, {Name: "a"}, {Name: "b"}, {Name: "sink", Sink: true}}
	tk := &task{
		name: "src -> a -> b -> sink (1/1)", vertex: 0,
		ops:        []Operator{src, a, b, snk},
		ctxs:       []*OpContext{{Name: "src", CountRecords: true}, {Name: "a", Index: 1}, {Name: "b", Index: 2}, {Name: "sink", Index: 3}},
		tracker:    &Tracker{},
		partitions: []*network.ResultPartition{rp},
		children:   [][]int{{1}, {2}, {3}, nil},
		parts:      [][]*network.ResultPartition{nil, nil, {rp}, nil},
		info: metricsInfo{nodes: nodes, taskName: "src -> a -> b -> sink", vertexUID: "v0",
			parts:   []opOutput{{op: 2, output: 0}},
			chained: []chainedEdge{{0, 0, 1}, {1, 0, 2}, {2, 1, 3}}},
	}
	tk.init()
	reg := metrics.NewRegistry()
	tk.export = tk.registerMetrics(reg, "j1", "job")

	src.in = 100 // emitted
	for i := range int64(60) {
		w.Emit(0, i)
	}
	snk.out = 40
	rp.Flush()
	if err := tk.forwardWatermark(2, 17); err != nil {
		t.Fatal(err)
	}
	tk.publishCounts()

	groups := reg.Groups()
	if len(groups) != 5 || groups[0].Scope() != metrics.ScopeTask {
		t.Fatalf("%d groups", len(groups))
	}
	value := func(g *metrics.Group, name string) (float64, bool) {
		m, ok := g.Get(name)
		if !ok {
			return 0, false
		}
		return m.Value(), true
	}
	task := groups[0]
	for name, want := range map[string]float64{"numRecordsIn": 100, "numRecordsOut": 100, "numBytesIn": 0,
		"numBytesOut": float64(rp.BytesSent()), "currentInputWatermark": math.MinInt64} {
		if got, ok := value(task, name); !ok || got != want {
			t.Errorf("task %s = %v (%v), want %v", name, got, ok, want)
		}
	}
	if task.Label(metrics.LabelTaskName) != "src -> a -> b -> sink" || task.Label(metrics.LabelVertexID) != "v0" ||
		task.Label(metrics.LabelSubtaskIndex) != "0" || task.Label(metrics.LabelJobID) != "j1" {
		t.Errorf("task labels %v", task.Labels())
	}
	// -1: not exported.
	want := []struct{ in, out, wmOut float64 }{{100, 100, math.MinInt64}, {100, -1, math.MinInt64}, {-1, 100, 17}, {40, 40, 17}} // the watermark b forwarded reached the sink
	for i, w := range want {
		g := groups[1+i]
		if g.Scope() != metrics.ScopeOperator || g.Label(metrics.LabelOperatorName) != nodes[i].Name || len(g.Label(metrics.LabelOperatorID)) != 32 {
			t.Fatalf("operator group %d: %s %v", i, g.Scope(), g.Labels())
		}
		for name, w := range map[string]float64{"numRecordsIn": w.in, "numRecordsOut": w.out, "currentOutputWatermark": w.wmOut} {
			got, ok := value(g, name)
			if !ok {
				got = -1
			}
			if got != w {
				t.Errorf("operator %s %s = %v, want %v", nodes[i].Name, name, got, w)
			}
		}
	}
}
