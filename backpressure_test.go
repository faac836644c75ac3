package weir

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

type countingSource struct{ emitted *atomic.Int64 }

func (c countingSource) CreateReader(SourceContext) (SourceReader[int64], error) {
	return &countingReader{c: c}, nil
}

type countingReader struct {
	c    countingSource
	next int64
}

func (r *countingReader) ReadBatch(out Collector[int64]) (ReadStatus, error) {
	for range 64 {
		out.Collect(r.next)
		r.next++
		r.c.emitted.Add(1)
	}
	return MoreAvailable, nil
}
func (r *countingReader) Close() error { return nil }

type slowSink struct{ consumed *atomic.Int64 }

func (s slowSink) CreateWriter(SinkContext) (SinkWriter[int64], error) { return s, nil }
func (s slowSink) Write(int64) error {
	if s.consumed.Add(1)%64 == 0 {
		time.Sleep(200 * time.Microsecond)
	}
	return nil
}
func (s slowSink) Flush() error { return nil }
func (s slowSink) Close() error { return nil }

// A fast source feeding a deliberately slow sink over the network is slowed
// down to the sink's pace: the records in flight never exceed what the
// configured buffer pools hold, and the pools never allocate past their
// bound.
func TestBackpressureBoundsMemory(t *testing.T) {
	const bufferSize = 1024 // 128 int64 records per buffer
	env := NewEnvironment(Options{Parallelism: 2, BufferSize: bufferSize, BufferTimeout: -1,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	var emitted, consumed atomic.Int64
	s := FromSource(env, countingSource{&emitted})
	m := Map(s.Rebalance(), func(v int64) int64 { return v }).SetParallelism(1)
	SinkTo(m, slowSink{&consumed}).SetParallelism(1)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	j, err := env.deploy(ctx, "backpressure")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- j.Run() }()

	_, capacity := j.NetworkMemory()
	// 2 producers x (1 consumer x 2 exclusive + 8 floating) buffers.
	if want := int64(2 * (1*2 + 8) * bufferSize); capacity != want {
		t.Fatalf("pool capacity %d bytes, want %d", capacity, want)
	}
	// Records that may be anywhere between source and sink: every pooled
	// buffer full, plus the records a producer is encoding when it blocks.
	maxInFlight := capacity/8 + 2*64
	deadline := time.Now().Add(1500 * time.Millisecond)
	var samples, worst int64
	for time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
		// Read emitted first: e-c then underestimates what is in flight when
		// c is read, so exceeding the bound is a real violation.
		e := emitted.Load()
		c := consumed.Load()
		worst = max(worst, e-c)
		if e-c > maxInFlight {
			t.Fatalf("%d records in flight (emitted %d, consumed %d); buffers hold at most %d", e-c, e, c, maxInFlight)
		}
		if alloc, _ := j.NetworkMemory(); alloc > capacity {
			t.Fatalf("pools allocated %d bytes, bound is %d", alloc, capacity)
		}
		samples++
	}
	cancel()
	<-done
	if consumed.Load() < 1000 {
		t.Fatalf("sink consumed only %d records: the job did not run", consumed.Load())
	}
	// The source is throttled to the sink's pace: without backpressure it
	// would emit millions of records per second.
	if e, c := emitted.Load(), consumed.Load(); e > c+maxInFlight {
		t.Fatalf("source ran ahead: emitted %d, consumed %d", e, c)
	}
	t.Logf("%d samples, worst in flight %d records (bound %d), sink consumed %d", samples, worst, maxInFlight, consumed.Load())
}

type blockedSink struct{ release chan struct{} }

func (s blockedSink) CreateWriter(SinkContext) (SinkWriter[int64], error) { return s, nil }
func (s blockedSink) Write(int64) error                                   { <-s.release; return nil }
func (s blockedSink) Flush() error                                        { return nil }
func (s blockedSink) Close() error                                        { return nil }

// Mail reaches a source even while it is fully backpressured (its consumer
// does not consume at all), and a failing mail fails the job with an error
// naming the task's operator.
func TestMailIsServedUnderBackpressure(t *testing.T) {
	env := NewEnvironment(Options{Parallelism: 1, BufferSize: 1024,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	var emitted atomic.Int64
	s := FromSource(env, countingSource{&emitted}).Name("numbers")
	release := make(chan struct{})
	SinkTo(s.Rebalance(), blockedSink{release})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	j, err := env.deploy(ctx, "mail")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- j.Run() }()
	// Wait until the source is stuck: its pool is exhausted.
	for prev := int64(-1); ; time.Sleep(20 * time.Millisecond) {
		e := emitted.Load()
		if e == prev && e > 0 {
			break
		}
		prev = e
	}
	ran := make(chan struct{})
	if !j.Post(0, 0, func() error { close(ran); return nil }) {
		t.Fatal("no subtask 0 of vertex 0")
	}
	select {
	case <-ran:
	case <-time.After(5 * time.Second):
		t.Fatal("mail to a backpressured source was not served")
	}
	if j.Post(7, 0, func() error { return nil }) {
		t.Fatal("Post to a missing vertex reported success")
	}
	failed := make(chan struct{})
	j.Post(0, 0, func() error { close(failed); return errors.New("mail failed") })
	<-failed
	close(release) // the sink is stuck in user code until then
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "mail failed") || !strings.Contains(err.Error(), "numbers") {
			t.Fatalf("err = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a failing mail did not fail the job")
	}
}
