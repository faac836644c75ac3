package weir

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// statusRecorder collects the JobStatus reports of a running job.
type statusRecorder struct{ c chan JobStatus }

func newStatusRecorder() *statusRecorder { return &statusRecorder{c: make(chan JobStatus, 1024)} }

// report is Options.OnStatus: it never blocks the job's coordinator.
func (r *statusRecorder) report(s JobStatus) {
	select {
	case r.c <- s:
	default:
	}
}

// until returns the first report for which cond holds, failing the test
// with the last report seen once the deadline passes.
func (r *statusRecorder) until(t *testing.T, deadline time.Duration, what string, cond func(JobStatus) bool) JobStatus {
	t.Helper()
	timeout := time.After(deadline)
	var last []TaskMetrics
	for {
		select {
		case s := <-r.c:
			last = s.Tasks
			if cond(s) {
				return s
			}
		case <-timeout:
			t.Fatalf("no status within %s shows %s; last metrics:\n%s", deadline, what, formatMetrics(last))
		}
	}
}

func formatMetrics(ms []TaskMetrics) string {
	var b strings.Builder
	for _, m := range ms {
		fmt.Fprintf(&b, "  %-28s busy %6.1f idle %6.1f backpressured %6.1f ms/s, inPool %.2f outPool %.2f, inQueue %d outQueue %d\n",
			m.Name, m.BusyTimeMsPerSecond, m.IdleTimeMsPerSecond, m.BackPressuredTimeMsPerSecond,
			m.InPoolUsage, m.OutPoolUsage, m.InputQueueLength, m.OutputQueueLength)
	}
	return b.String()
}

// runForStatus runs env's job until the test ends, then cancels it and
// waits for it.
func runForStatus(t *testing.T, env *Environment, name string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- env.Execute(ctx, name) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("Execute = %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Error("the job did not end after its cancellation")
		}
	})
}

// pacedSource emits a batch of 64 numbers and then has nothing available,
// every other read: its task is idle part of the time.
type pacedSource struct{}

func (pacedSource) CreateReader(SourceContext) (SourceReader[int64], error) {
	return &pacedReader{}, nil
}

type pacedReader struct{ next int64 }

func (r *pacedReader) ReadBatch(out Collector[int64]) (ReadStatus, error) {
	r.next++
	if r.next%2 == 0 {
		return NothingAvailable, nil
	}
	for i := range int64(64) {
		out.Collect(r.next*64 + i)
	}
	return MoreAvailable, nil
}
func (r *pacedReader) Close() error { return nil }

// Once a job has run a while, every subtask's busy, idle and backpressured
// time add up to about a second per second, each rate and pool usage is in
// its range, and every subtask is reported once.
func TestTaskMetricsTimeAddsUp(t *testing.T) {
	rec := newStatusRecorder()
	env := NewEnvironment(Options{Parallelism: 2, BufferSize: 1024, StatusInterval: 50 * time.Millisecond,
		OnStatus: rec.report, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	s := FromSource(env, pacedSource{}).Name("paced")
	m := Map(s.Rebalance(), func(v int64) int64 { return v * 2 }).Name("double")
	SinkTo(m, slowSink{new(atomic.Int64)}).Name("sink")
	runForStatus(t, env, "metrics-add-up")

	// The first reports may come before the job samples its tasks (all
	// rates 0): wait until every subtask has a window, then check the
	// reports that follow.
	rec.until(t, 20*time.Second, "a window for every subtask", func(s JobStatus) bool {
		if len(s.Tasks) == 0 {
			return false
		}
		for _, m := range s.Tasks {
			if m.BusyTimeMsPerSecond+m.IdleTimeMsPerSecond+m.BackPressuredTimeMsPerSecond == 0 {
				return false
			}
		}
		return true
	})
	var st JobStatus
	for range 5 {
		st = rec.until(t, 20*time.Second, "a report", func(JobStatus) bool { return true })
		if len(st.Tasks) != 4 {
			t.Fatalf("%d subtasks reported, want 4 (2 sources, 2 map -> sink):\n%s", len(st.Tasks), formatMetrics(st.Tasks))
		}
		seen := map[[2]int]bool{}
		for _, m := range st.Tasks {
			key := [2]int{m.Vertex, m.Subtask}
			if seen[key] || m.Name == "" {
				t.Fatalf("subtask %v reported twice or without a name:\n%s", key, formatMetrics(st.Tasks))
			}
			seen[key] = true
			sum := m.BusyTimeMsPerSecond + m.IdleTimeMsPerSecond + m.BackPressuredTimeMsPerSecond
			inRange := func(v, lo, hi float64) bool { return v >= lo && v <= hi }
			if !inRange(sum, 900, 1100) || !inRange(m.BusyTimeMsPerSecond, 0, 1000) || !inRange(m.IdleTimeMsPerSecond, 0, 1000) ||
				!inRange(m.BackPressuredTimeMsPerSecond, 0, 1000) || !inRange(m.InPoolUsage, 0, 1) || !inRange(m.OutPoolUsage, 0, 1) ||
				m.InputQueueLength < 0 || m.OutputQueueLength < 0 {
				t.Fatalf("%s: busy+idle+backpressured = %.1f ms/s, or a figure out of its range:\n%s", m.Name, sum, formatMetrics(st.Tasks))
			}
		}
	}
	t.Logf("last report:\n%s", formatMetrics(st.Tasks))
}

// spinSink takes about a millisecond per record, on the CPU.
type spinSink struct{ written *atomic.Int64 }

func (s spinSink) CreateWriter(SinkContext) (SinkWriter[int64], error) { return s, nil }
func (s spinSink) Write(int64) error {
	for start := time.Now(); time.Since(start) < time.Millisecond; {
	}
	s.written.Add(1)
	return nil
}
func (s spinSink) Flush() error { return nil }
func (s spinSink) Close() error { return nil }

// batchSource emits batches of batch numbers as fast as it can.
type batchSource struct {
	batch   int
	emitted *atomic.Int64
}

func (b batchSource) CreateReader(SourceContext) (SourceReader[int64], error) {
	return &batchReader{b: b}, nil
}

type batchReader struct {
	b    batchSource
	next int64
}

func (r *batchReader) ReadBatch(out Collector[int64]) (ReadStatus, error) {
	for range r.b.batch {
		out.Collect(r.next)
		r.next++
		r.b.emitted.Add(1)
	}
	return MoreAvailable, nil
}
func (r *batchReader) Close() error { return nil }

// A fast source feeding a slow sink is backpressured most of the time while
// the sink is busy: Flink's signature of a bottleneck at the sink. The
// source's output pool and the sink's input gate are full. A source of small
// batches waits for a buffer before each batch (the task's awaitOutputs), one
// of large batches in the middle of them (the writer's requestSlow).
func TestBackpressureMetricsSlowSink(t *testing.T) {
	for _, tc := range []struct {
		name  string
		batch int // records per source batch; a buffer holds 128
	}{
		{name: "waits between batches", batch: 64},
		{name: "waits inside a batch", batch: 4096},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := newStatusRecorder()
			env := NewEnvironment(Options{Parallelism: 1, BufferSize: 1024, StatusInterval: 100 * time.Millisecond,
				OnStatus: rec.report, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			var emitted, written atomic.Int64
			s := FromSource(env, batchSource{tc.batch, &emitted}).Name("numbers")
			SinkTo(s.Rebalance(), spinSink{&written}).Name("spin")
			runForStatus(t, env, "metrics-slow-sink")

			find := func(ms []TaskMetrics, prefix string) (TaskMetrics, bool) {
				for _, m := range ms {
					if strings.HasPrefix(m.Name, prefix) {
						return m, true
					}
				}
				return TaskMetrics{}, false
			}
			st := rec.until(t, 20*time.Second, "the source backpressured and the sink busy", func(s JobStatus) bool {
				src, ok1 := find(s.Tasks, "numbers")
				snk, ok2 := find(s.Tasks, "spin")
				return ok1 && ok2 && src.BackPressuredTimeMsPerSecond > 500 && snk.BusyTimeMsPerSecond > 500 &&
					src.OutPoolUsage > 0.5 && snk.InPoolUsage > 0.5 && snk.InputQueueLength > 0
			})
			t.Logf("emitted %d, written %d; metrics:\n%s", emitted.Load(), written.Load(), formatMetrics(st.Tasks))
		})
	}
}
