package task

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/clock"
	"github.com/weirstream/weir/internal/network"
)

// waitUntil polls cond until it holds, failing the test after a deadline.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// runTask runs tk on its own goroutine and returns its result channel.
func runTask(ctx context.Context, tk *task) <-chan error {
	done := make(chan error, 1)
	go func() { done <- tk.run(ctx) }()
	return done
}

func awaitResult(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("task did not end")
		return nil
	}
}

// backpressured returns a partition whose only consumer never reads: a
// writer blocks once both of its 64-byte buffers are out, with the second
// queued at the sender (backlog 1).
func backpressured(ctx context.Context) (*network.ResultPartition, *network.PipelinedSubpartition) {
	g := network.NewInputGate(1, 1, 0)
	sub := network.NewPipelinedSubpartition()
	network.ConnectLocal(sub, g, 0)
	return network.NewResultPartition(ctx, network.NewPool(2, 64), []network.Target{sub}), sub
}

// swallowingSource is user code at its worst: it recovers every panic of
// the records it emits (or of fail) and claims its input ended cleanly.
type swallowingSource struct {
	ctx       *OpContext
	w         *network.RecordWriter[string]
	fail      error // if set, Read fails its context with it
	recovered atomic.Int32
}

func (s *swallowingSource) Open() error            { return nil }
func (s *swallowingSource) EndInput() error        { return nil }
func (s *swallowingSource) Close() error           { return nil }
func (s *swallowingSource) Ready() <-chan struct{} { return nil }

func (s *swallowingSource) Read() (st ReadStatus, err error) {
	defer func() {
		if recover() != nil {
			s.recovered.Add(1)
			st, err = EndOfInput, nil
		}
	}()
	if s.fail != nil {
		s.ctx.Fail(s.fail)
	}
	rec := strings.Repeat("r", 60)
	for range 100 { // needs 100 buffers: blocks after 2
		s.w.Emit(0, rec)
	}
	return MoreAvailable, nil
}

func newSourceTask(src *swallowingSource, rp *network.ResultPartition) *task {
	tk := &task{
		ops:      []Operator{src},
		ctxs:     []*OpContext{{Name: "source"}},
		tracker:  &Tracker{Timestamp: NoTimestamp},
		source:   src,
		clock:    clock.Real(),
		children: [][]int{nil},
		parts:    [][]*network.ResultPartition{nil},
	}
	if rp != nil {
		tk.partitions = []*network.ResultPartition{rp}
		tk.parts[0] = tk.partitions
	}
	src.ctx = tk.ctxs[0]
	tk.init()
	return tk
}

// A user function that recovers the cancellation of a writer blocked on
// backpressure, and even reports a clean end of input, does not make the
// task finish: it stops as canceled, and its consumers never see an end of
// partition.
func TestRecoveredCancellationStillStopsTheTask(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rp, sub := backpressured(ctx)
	src := &swallowingSource{w: network.NewRecordWriter(rp, codec.String())}
	done := runTask(ctx, newSourceTask(src, rp))
	waitUntil(t, "the source is blocked on backpressure", func() bool { return sub.Backlog() == 1 })
	cancel()
	err := awaitResult(t, done)
	if !errors.Is(err, ErrTaskCanceled) {
		t.Fatalf("task ended with %v, want ErrTaskCanceled", err)
	}
	if src.recovered.Load() == 0 {
		t.Fatal("the source never recovered a cancellation: the test did not test anything")
	}
	if n := sub.Queued(); n != 1 {
		t.Fatalf("%d buffers queued for the consumer, want the one data buffer and no end of partition", n)
	}
}

// A user function that recovers OpContext.Fail does not save the task: it
// fails with the recorded error, attributed to the operator.
func TestRecoveredFailStillFailsTheTask(t *testing.T) {
	boom := errors.New("boom")
	src := &swallowingSource{fail: boom}
	err := awaitResult(t, runTask(context.Background(), newSourceTask(src, nil)))
	var oe *OperatorError
	if !errors.As(err, &oe) || !errors.Is(err, boom) || oe.Operator != "source" {
		t.Fatalf("task ended with %v, want an OperatorError of source wrapping boom", err)
	}
	if src.recovered.Load() != 1 {
		t.Fatalf("source recovered %d times, want 1", src.recovered.Load())
	}
}

// flood is an input reader that emits many records per input buffer, so a
// backpressured task blocks in the middle of a record.
type flood struct {
	w        *network.RecordWriter[string]
	emitting atomic.Bool
}

func (f *flood) Read(ch int, b *network.Buffer) error {
	f.emitting.Store(true)
	defer f.emitting.Store(false)
	rec := strings.Repeat("r", 60)
	for range 100 {
		f.w.Emit(0, rec)
	}
	return nil
}

func (f *flood) Pending(int) []byte { return nil }

func (f *flood) ReadFrom(ch int, b *network.Buffer, _ int, _ *atomic.Bool) (int, error) {
	return len(b.Data), f.Read(ch, b)
}

// A priority event (an unaligned barrier) that reaches a task blocked on
// backpressure in the middle of a record wakes it through its mailbox: the
// task takes the event while still blocked.
func TestPriorityEventReachesBackpressuredTask(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out, outSub := backpressured(ctx)
	in := network.NewInputGate(1, 2, 0)
	upstream := network.NewPipelinedSubpartition()
	network.ConnectLocal(upstream, in, 0)
	reader := &flood{w: network.NewRecordWriter(out, codec.String())}
	taken := make(chan network.Event, 1)
	tk := &task{
		ops:        []Operator{&wmOp{}},
		ctxs:       []*OpContext{{Name: "flood"}},
		tracker:    &Tracker{Timestamp: NoTimestamp},
		gate:       in,
		readers:    []network.BufferReader{reader},
		partitions: []*network.ResultPartition{out},
		clock:      clock.Real(),
		children:   [][]int{nil},
		parts:      [][]*network.ResultPartition{{out}},
		onPriority: func(ch int, ev network.Event) { taken <- ev },
	}
	tk.init()
	done := runTask(ctx, tk)

	upstream.Send(&network.Buffer{Data: []byte{1}})
	waitUntil(t, "the task is blocked in the middle of a record", func() bool {
		return reader.emitting.Load() && outSub.Backlog() == 1
	})
	upstream.SendPriority(network.NewEventBuffer(network.Event{Kind: network.EventBarrier, ID: 7, Priority: true}), nil)
	select {
	case ev := <-taken:
		if ev.ID != 7 {
			t.Fatalf("took %+v, want barrier 7", ev)
		}
	case err := <-done:
		t.Fatalf("task ended (%v) instead of taking the priority event", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the priority event did not reach the backpressured task")
	}
	if !reader.emitting.Load() {
		t.Fatal("the task left the record: it was not woken while blocked")
	}
	cancel()
	if err := awaitResult(t, done); !errors.Is(err, ErrTaskCanceled) {
		t.Fatalf("task ended with %v, want ErrTaskCanceled", err)
	}
}
