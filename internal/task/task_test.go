package task

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/weirstream/weir/internal/network"
	"github.com/weirstream/weir/internal/watermark"
)

type wmOp struct {
	seen []int64
}

func (o *wmOp) Open() error     { return nil }
func (o *wmOp) EndInput() error { return nil }
func (o *wmOp) Close() error    { return nil }
func (o *wmOp) ProcessWatermark(wm int64) error {
	o.seen = append(o.seen, wm)
	return nil
}

type eventTarget struct{ events []network.Event }

func (e *eventTarget) Send(b *network.Buffer) {
	if b.Kind == network.KindEvent {
		e.events = append(e.events, b.Event)
	}
	b.Recycle()
}
func (e *eventTarget) SendPriority(b *network.Buffer, _ func(*network.Buffer)) { e.Send(b) }

// A task forwards the minimum watermark of its live input channels, once it
// moves forward, to its chained operators and then its outputs; a channel
// whose data ended no longer holds the watermark back.
func TestWatermarkIsMinimumOverLiveChannels(t *testing.T) {
	op := &wmOp{}
	out := &eventTarget{}
	rp := network.NewResultPartition(context.Background(), network.NewPool(2, 64), []network.Target{out})
	tk := &task{
		ops:        []Operator{op},
		ctxs:       []*OpContext{{Name: "op"}},
		tracker:    &Tracker{},
		partitions: []*network.ResultPartition{rp},
		children:   [][]int{nil},
		parts:      [][]*network.ResultPartition{{rp}},
		inputWM:    watermark.NewCombiner(3),
	}
	tk.init()
	step := func(ch int, ev network.Event) {
		t.Helper()
		if err := tk.handleEvent(ch, ev); err != nil {
			t.Fatal(err)
		}
	}
	wm := func(ts int64) network.Event { return network.Event{Kind: network.EventWatermark, Timestamp: ts} }
	step(0, wm(10)) // others have none yet: nothing
	step(1, wm(5))
	step(2, wm(7))                                                         // min(10, 5, 7) = 5
	step(1, wm(20))                                                        // min(10, 20, 7) = 7
	step(2, network.Event{Kind: network.EventWatermarkStatus, Idle: true}) // ch2 idle: min(10, 20) = 10
	step(2, network.Event{Kind: network.EventWatermarkStatus, Idle: false})
	step(2, wm(12))                                      // active again: min(10, 20, 12) = 10, no change
	step(0, wm(30))                                      // min(30, 20, 12) = 12
	step(2, network.Event{Kind: network.EventEndOfData}) // ch2 ended: min(30, 20) = 20
	step(0, network.Event{Kind: network.EventEndOfData})
	step(1, network.Event{Kind: network.EventEndOfData}) // all ended: end of event time
	want := []int64{5, 7, 10, 12, 20, math.MaxInt64}
	if !slices.Equal(op.seen, want) {
		t.Fatalf("operator saw watermarks %v, want %v", op.seen, want)
	}
	var forwarded []int64
	for _, ev := range out.events {
		if ev.Kind == network.EventWatermark {
			forwarded = append(forwarded, ev.Timestamp)
		}
	}
	if !slices.Equal(forwarded, want) {
		t.Fatalf("forwarded watermarks %v, want %v", forwarded, want)
	}
}

type assignerOp struct{ wmOp }

func (assignerOp) AssignsWatermarks() {}

// Watermarks from upstream stop at an operator that assigns its own, except
// the final one; an assigner's idleness reaches the outputs as a status.
func TestAssignerOwnsItsWatermarks(t *testing.T) {
	head, asg, tail := &wmOp{}, &assignerOp{}, &wmOp{}
	out := &eventTarget{}
	rp := network.NewResultPartition(context.Background(), network.NewPool(2, 64), []network.Target{out})
	tk := &task{
		ops:      []Operator{head, asg, tail},
		ctxs:     []*OpContext{{Name: "head"}, {Name: "assigner", Index: 1}, {Name: "tail", Index: 2}},
		tracker:  &Tracker{},
		children: [][]int{{1}, {2}, nil},
		parts:    [][]*network.ResultPartition{nil, nil, {rp}},
		inputWM:  watermark.NewCombiner(1),
	}
	tk.init()
	if err := tk.handleEvent(0, network.Event{Kind: network.EventWatermark, Timestamp: 50}); err != nil {
		t.Fatal(err)
	}
	if err := tk.ctxs[1].EmitWatermark(7); err != nil {
		t.Fatal(err)
	}
	tk.ctxs[1].EmitIdle(true)
	if err := tk.handleEvent(0, network.Event{Kind: network.EventEndOfData}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(head.seen, []int64{50, math.MaxInt64}) || len(asg.seen) != 1 || !slices.Equal(tail.seen, []int64{7, math.MaxInt64}) {
		t.Fatalf("head %v assigner %v tail %v", head.seen, asg.seen, tail.seen)
	}
	var kinds []string
	for _, ev := range out.events {
		kinds = append(kinds, ev.Kind.String())
	}
	if !slices.Equal(kinds, []string{"Watermark", "WatermarkStatus", "Watermark"}) {
		t.Fatalf("events %v", kinds)
	}
}

// Upstream idleness stops at an assigner heading a task, as it does at a
// chained one: the assigner alone decides whether its output is idle.
func TestUpstreamIdlenessStopsAtHeadAssigner(t *testing.T) {
	asg := &assignerOp{}
	out := &eventTarget{}
	rp := network.NewResultPartition(context.Background(), network.NewPool(2, 64), []network.Target{out})
	tk := &task{
		ops:      []Operator{asg},
		ctxs:     []*OpContext{{Name: "assigner"}},
		tracker:  &Tracker{},
		children: [][]int{nil},
		parts:    [][]*network.ResultPartition{{rp}},
		inputWM:  watermark.NewCombiner(1),
	}
	tk.init()
	for _, idle := range []bool{true, false} {
		if err := tk.handleEvent(0, network.Event{Kind: network.EventWatermarkStatus, Idle: idle}); err != nil {
			t.Fatal(err)
		}
	}
	if len(out.events) != 0 {
		t.Fatalf("upstream status passed the assigner: %v", out.events)
	}
}
