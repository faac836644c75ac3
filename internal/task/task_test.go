package task

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/weirstream/weir/internal/network"
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
func (e *eventTarget) SendPriority(b *network.Buffer) { e.Send(b) }

// A task forwards the minimum watermark of its live input channels, once it
// moves forward, to its chained operators and then its outputs; a channel
// that ended no longer holds the watermark back.
func TestWatermarkIsMinimumOverLiveChannels(t *testing.T) {
	op := &wmOp{}
	out := &eventTarget{}
	tk := &task{
		ops:        []Operator{op},
		ctxs:       []*OpContext{{Name: "op"}},
		tracker:    &Tracker{},
		partitions: []*network.ResultPartition{network.NewResultPartition(context.Background(), network.NewPool(2, 64), []network.Target{out})},
		watermarks: []int64{math.MinInt64, math.MinInt64, math.MinInt64},
		ended:      make([]bool, 3),
		watermark:  math.MinInt64,
	}
	step := func(ch int, wm int64, end bool) {
		t.Helper()
		if end {
			tk.ended[ch] = true
		} else {
			tk.watermarks[ch] = max(tk.watermarks[ch], wm)
		}
		if err := tk.advanceWatermark(); err != nil {
			t.Fatal(err)
		}
	}
	step(0, 10, false) // others still at -inf: nothing
	step(1, 5, false)
	step(2, 7, false)  // min(10, 5, 7) = 5
	step(1, 20, false) // min(10, 20, 7) = 7
	step(2, 6, false)  // lower than before on ch2 is ignored: stays 7... min(10,20,7)=7, no change
	step(2, 0, true)   // ch2 ended: min(10, 20) = 10
	step(0, 30, false) // min(30, 20) = 20
	want := []int64{5, 7, 10, 20}
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
