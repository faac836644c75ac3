package network

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/keygroup"
)

// recordingTarget keeps every buffer sent to it, copying the bytes so the
// buffer can be recycled at once.
type recordingTarget struct{ bufs []*Buffer }

func (r *recordingTarget) Send(b *Buffer) {
	c := &Buffer{Data: append([]byte(nil), b.Data...), Kind: b.Kind, Event: b.Event}
	r.bufs = append(r.bufs, c)
	b.Recycle()
}
func (r *recordingTarget) SendPriority(b *Buffer, _ func(*Buffer)) { r.Send(b) }

type sliceOutput[T any] struct{ got []T }

func (s *sliceOutput[T]) Collect(v T) { s.got = append(s.got, v) }

func newTestPartition(n, segment int) (*ResultPartition, []*recordingTarget) {
	rts := make([]*recordingTarget, n)
	targets := make([]Target, n)
	for i := range rts {
		rts[i] = &recordingTarget{}
		targets[i] = rts[i]
	}
	return NewResultPartition(context.Background(), NewPool(n*2+1, segment), targets), rts
}

// decodeAll reads every buffer a target received back into records.
func decodeAll[T any](t *testing.T, dec Decoder[T], rt *recordingTarget) []T {
	t.Helper()
	out := &sliceOutput[T]{}
	r := NewRecordReader(dec, Output[T](out))
	for _, b := range rt.bufs {
		if b.Kind == KindEvent {
			continue
		}
		if len(b.Data) > 256 {
			t.Fatalf("buffer of %d bytes exceeds the segment", len(b.Data))
		}
		if err := r.Read(0, b); err != nil {
			t.Fatal(err)
		}
	}
	return out.got
}

// Records of every size, including ones several segments long, arrive whole
// and in order.
func TestWriterReaderRoundTripWithFragments(t *testing.T) {
	rp, rts := newTestPartition(1, 256)
	w := NewRecordWriter(rp, codec.String())
	var want []string
	for i := range 200 {
		s := strings.Repeat(string(rune('a'+i%26)), (i*37)%900)
		want = append(want, s)
		w.Emit(0, s)
	}
	rp.BroadcastEvent(Event{Kind: EventEndOfPartition})
	got := decodeAll(t, codec.String(), rts[0])
	if !slices.Equal(got, want) {
		t.Fatalf("got %d records, want %d; first mismatch at %d", len(got), len(want), firstDiff(got, want))
	}
	last := rts[0].bufs[len(rts[0].bufs)-1]
	if last.Kind != KindEvent || last.Event.Kind != EventEndOfPartition {
		t.Fatal("end of partition is not the last buffer")
	}
	if rp.Pool().InUse() != 0 {
		t.Fatalf("%d buffers not recycled", rp.Pool().InUse())
	}
}

func firstDiff[T comparable](a, b []T) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func TestReaderRejectsCorruptBuffer(t *testing.T) {
	r := NewRecordReader(codec.Int64(), Output[int64](&sliceOutput[int64]{}))
	err := r.Read(3, &Buffer{Data: []byte{1, 2, 3}})
	if err == nil || !strings.Contains(err.Error(), "channel 3") {
		t.Fatalf("err = %v, want a decode error naming channel 3", err)
	}
}

func routed(t *testing.T, p Partitioner, index, producers, consumers int, channel func(int64) int, records int64) [][]int64 {
	t.Helper()
	rp, rts := newTestPartition(consumers, 256)
	out, err := NewPartitionedOutput(p, NewRecordWriter(rp, codec.Int64()), index, producers, channel)
	if err != nil {
		t.Fatal(err)
	}
	for i := range records {
		out.Collect(i)
	}
	rp.Flush()
	res := make([][]int64, consumers)
	for i, rt := range rts {
		res[i] = decodeAll(t, codec.Int64(), rt)
	}
	return res
}

func TestForwardPartitioner(t *testing.T) {
	got := routed(t, Forward, 2, 4, 4, nil, 100)
	for i, recs := range got {
		if (i == 2) != (len(recs) == 100) || (i != 2 && len(recs) != 0) {
			t.Fatalf("subpartition %d got %d records", i, len(recs))
		}
	}
	if _, err := NewPartitionedOutput(Forward, NewRecordWriter(newTestPartitionOnly(3), codec.Int64()), 0, 2, nil); err == nil {
		t.Fatal("forward edge 2 -> 3 accepted")
	}
}

func TestRebalancePartitionerIsRoundRobin(t *testing.T) {
	got := routed(t, Rebalance, 1, 3, 4, nil, 103)
	for i, recs := range got {
		want := 25
		if i == 1 || i == 2 || i == 3 {
			want = 26 // starts at channel index%4 = 1
		}
		if len(recs) != want {
			t.Fatalf("subpartition %d got %d records, want %d", i, len(recs), want)
		}
		for k := 1; k < len(recs); k++ {
			if recs[k]-recs[k-1] != 4 {
				t.Fatalf("subpartition %d: %d then %d, not round robin", i, recs[k-1], recs[k])
			}
		}
	}
}

func TestRescalePartitioner(t *testing.T) {
	// 2 producers, 4 consumers: producer 1 feeds consumers 2 and 3 only.
	got := routed(t, Rescale, 1, 2, 4, nil, 10)
	if len(got[0])+len(got[1]) != 0 || len(got[2]) != 5 || len(got[3]) != 5 {
		t.Fatalf("rescale 2->4 from producer 1: %v", got)
	}
	// 4 producers, 2 consumers: producer 3 feeds consumer 1 only.
	got = routed(t, Rescale, 3, 4, 2, nil, 10)
	if len(got[0]) != 0 || len(got[1]) != 10 {
		t.Fatalf("rescale 4->2 from producer 3: %v", got)
	}
	for _, tc := range []struct{ i, u, d, lo, hi int }{{0, 3, 7, 0, 2}, {2, 3, 7, 4, 7}, {5, 6, 4, 3, 4}} {
		if lo, hi := RescaleRange(tc.i, tc.u, tc.d); lo != tc.lo || hi != tc.hi {
			t.Errorf("RescaleRange(%d,%d,%d) = [%d,%d), want [%d,%d)", tc.i, tc.u, tc.d, lo, hi, tc.lo, tc.hi)
		}
	}
}

func TestHashPartitionerRoutesByKeyGroup(t *testing.T) {
	const consumers, maxP = 3, 128
	var buf []byte
	channel := func(v int64) int {
		buf = codec.Int64().Append(buf[:0], v%17)
		return keygroup.OperatorIndex(keygroup.Of(buf, maxP), maxP, consumers)
	}
	got := routed(t, Hash, 0, 1, consumers, channel, 1000)
	owner := map[int64]int{}
	for sub, recs := range got {
		lo, hi := keygroup.Range(sub, maxP, consumers)
		for _, v := range recs {
			key := v % 17
			if o, seen := owner[key]; seen && o != sub {
				t.Fatalf("key %d went to subtasks %d and %d", key, o, sub)
			}
			owner[key] = sub
			kg := keygroup.Of(codec.Int64().Append(nil, key), maxP)
			if kg < lo || kg > hi {
				t.Fatalf("key %d in key group %d went to subtask %d owning [%d,%d]", key, kg, sub, lo, hi)
			}
		}
	}
	if len(owner) != 17 {
		t.Fatalf("saw %d keys, want 17", len(owner))
	}
	if _, err := NewPartitionedOutput(Hash, NewRecordWriter(newTestPartitionOnly(1), codec.Int64()), 0, 1, nil); err == nil {
		t.Fatal("hash partitioner without a channel function accepted")
	}
}

func newTestPartitionOnly(n int) *ResultPartition { rp, _ := newTestPartition(n, 256); return rp }

func TestBroadcastPartitioner(t *testing.T) {
	got := routed(t, Broadcast, 0, 1, 3, nil, 500)
	for i, recs := range got {
		if len(recs) != 500 || recs[0] != 0 || recs[499] != 499 {
			t.Fatalf("subpartition %d got %d records", i, len(recs))
		}
	}
}

// A writer canceled while it waits for a buffer in the middle of a record
// must not leave an already sent buffer as its current one: Close would
// recycle a buffer the consumer still holds (a race, wiped data, and a
// double recycle that blocks the pool forever).
func TestCancelDuringOverflowKeepsSentBuffersConsumers(t *testing.T) {
	for _, recLen := range []int{40, 300} { // a record that spills to a new buffer; one that fragments
		g := NewInputGate(1, 4, 0)
		ctx, cancel := context.WithCancel(context.Background())
		rp := NewResultPartition(ctx, NewPool(2, 64), []Target{connectLocal(g)[0]})
		w := NewRecordWriter(rp, codec.String())
		rec := strings.Repeat("r", recLen)
		done := make(chan any, 1)
		go func() {
			defer func() { done <- recover() }()
			for {
				w.Emit(0, rec) // blocks once both buffers are in the gate
			}
		}()
		for rp.Pool().InUse() < 2 || rp.Pool().Available() {
			time.Sleep(time.Millisecond)
		}
		time.Sleep(10 * time.Millisecond)
		cancel()
		if _, ok := (<-done).(*CanceledError); !ok {
			t.Fatal("writer did not stop with a CanceledError")
		}
		rp.Close()
		drained := make(chan struct{})
		go func() {
			defer close(drained)
			for {
				ch, b, ok := g.Poll()
				if !ok {
					return
				}
				if b.IsData() && len(b.Data) == 0 {
					t.Error("consumer got a buffer wiped by the producer's Close")
				}
				g.Release(ch, b)
			}
		}()
		select {
		case <-drained:
		case <-time.After(5 * time.Second):
			t.Fatalf("record of %d bytes: draining blocked: a buffer was recycled twice", recLen)
		}
		if n := rp.Pool().InUse(); n != 0 {
			t.Fatalf("record of %d bytes: %d buffers not back in the pool", recLen, n)
		}
	}
}

// waitFor polls cond until it holds, failing the test after a deadline.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// blockedWriter returns a partition whose only consumer never reads, with a
// pool of 2 buffers of 64 bytes, and a record that needs a buffer each.
func blockedWriter(ctx context.Context) (*ResultPartition, *InputGate, *RecordWriter[string], string) {
	g := NewInputGate(1, 1, 0)
	rp := NewResultPartition(ctx, NewPool(2, 64), []Target{connectLocal(g)[0]})
	return rp, g, NewRecordWriter(rp, codec.String()), strings.Repeat("r", 60)
}

// A user function that recovers the cancellation panic and emits again does
// not get to wait again or carry on silently: every later wait panics at
// once and the partition keeps the error for the task.
func TestCanceledWriterStaysStopped(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	rp, _, w, rec := blockedWriter(ctx)
	panics := make(chan any, 3)
	go func() {
		for range 3 {
			func() {
				defer func() { panics <- recover() }()
				for {
					w.Emit(0, rec)
				}
			}()
		}
	}()
	waitFor(t, "the writer is blocked on the pool", func() bool { return rp.Pool().InUse() == 2 && !rp.Pool().Available() })
	cancel()
	for i := range 3 {
		select {
		case p := <-panics:
			if _, ok := p.(*CanceledError); !ok {
				t.Fatalf("panic %d = %v, want a *CanceledError", i, p)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("writer blocked again after recovering cancellation %d", i)
		}
	}
	var ce *CanceledError
	if err := rp.Err(); !errors.As(err, &ce) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Err() = %v, want a *CanceledError wrapping context.Canceled", err)
	}
}

// fakeYielder is urgent work a test queues for a blocked writer.
type fakeYielder struct {
	urgent chan struct{}
	ran    chan struct{} // receives once per RunUrgent
	err    error
}

func (y *fakeYielder) Urgent() <-chan struct{} { return y.urgent }
func (y *fakeYielder) RunUrgent() error {
	y.ran <- struct{}{}
	return y.err
}

// A writer blocked on a full pool serves its task's urgent work and goes
// back to waiting; failed urgent work stops it with a *YieldError.
func TestBlockedWriterServesUrgentWork(t *testing.T) {
	rp, g, w, rec := blockedWriter(context.Background())
	y := &fakeYielder{urgent: make(chan struct{}, 1), ran: make(chan struct{}, 1)}
	rp.SetYielder(y)
	emitted := make(chan any, 1)
	go func() {
		defer func() { emitted <- recover() }()
		for range 3 { // the third needs a buffer the consumer still holds
			w.Emit(0, rec)
		}
	}()
	waitFor(t, "the writer is blocked on the pool", func() bool { return rp.Pool().InUse() == 2 && !rp.Pool().Available() })
	for i := range 2 {
		y.urgent <- struct{}{}
		select {
		case <-y.ran:
		case p := <-emitted:
			t.Fatalf("writer returned (%v) instead of serving urgent work", p)
		case <-time.After(10 * time.Second):
			t.Fatalf("blocked writer did not serve urgent work %d", i)
		}
	}
	// The writer still waits for a buffer: give it one.
	ch, b, ok := g.Poll()
	if !ok {
		t.Fatal("nothing delivered")
	}
	g.Release(ch, b)
	select {
	case p := <-emitted:
		if p != nil {
			t.Fatalf("writer panicked: %v", p)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("writer did not resume after a buffer was released")
	}

	// Failed urgent work stops the writer for good.
	boom := errors.New("boom")
	y.err = boom
	go func() {
		defer func() { emitted <- recover() }()
		for {
			w.Emit(0, rec)
		}
	}()
	waitFor(t, "the writer is blocked on the pool again", func() bool { return rp.Pool().InUse() == 2 && !rp.Pool().Available() })
	y.urgent <- struct{}{}
	<-y.ran
	select {
	case p := <-emitted:
		if ye, ok := p.(*YieldError); !ok || !errors.Is(ye, boom) {
			t.Fatalf("panic = %v, want a *YieldError wrapping boom", p)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("writer did not stop after its urgent work failed")
	}
	if !errors.Is(rp.Err(), boom) {
		t.Fatalf("Err() = %v, want boom", rp.Err())
	}
}
