package kafka

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/weirstream/weir"
	"github.com/weirstream/weir/internal/kafkatest"
	filesink "github.com/weirstream/weir/sink"
)

// A job reads a 4-partition topic with a bounded Kafka source at
// parallelism 2 into sink.Files, with checkpoints, and a user function
// fails once after a checkpoint completed: the restart resumes every
// partition from the checkpointed offsets, and the committed output holds
// every record exactly once.
func TestJobExactlyOnceThroughAFailure(t *testing.T) {
	_, seeds := cluster(t)
	kafkatest.CreateTopic(t, seeds, "job", 4)
	const n = 2000
	parts := []int32{0, 1, 2, 3}
	produce(t, seeds, "job", parts, 0, n, time.Now())

	dir := t.TempDir()
	var completed atomic.Int64
	var failed atomic.Bool
	opts := weir.Options{Parallelism: 2, StateDir: filepath.Join(dir, "state"), Logger: quietLogger(),
		Checkpoint:           weir.CheckpointOptions{Interval: 10 * time.Millisecond, Dir: filepath.Join(dir, "chk")},
		Restart:              weir.RestartOptions{Type: "fixed-delay", FixedDelayAttempts: 3, FixedDelay: time.Millisecond},
		OnCheckpointComplete: func(weir.CompletedCheckpoint) { completed.Add(1) }}
	env := weir.NewEnvironment(opts)
	src := NewSource(SourceOptions{Client: Client{Brokers: seeds}, Topics: []string{"job"}, Bounded: true, GroupID: "job-group"}, valueString)
	recs := weir.FromSource(env, src).UID("kafka")
	slow := weir.ProcessEach(recs, func() weir.ProcessFunction[string, string] {
		seen := 0
		return weir.ProcessFunc[string, string](func(ctx *weir.Context[string], v string) error {
			seen++
			if seen%50 == 0 {
				time.Sleep(time.Millisecond) // checkpoints complete while records flow
			}
			if seen > 500 && completed.Load() >= 2 && failed.CompareAndSwap(false, true) {
				return errors.New("injected failure")
			}
			ctx.Emit(v)
			return nil
		})
	}).UID("slow")
	weir.SinkTo(slow, filesink.Files(filepath.Join(dir, "out"), func(s string) string { return s }))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// The job succeeds only by restarting after the injected failure.
	if err := env.Execute(ctx, "kafka-job"); err != nil {
		t.Fatal(err)
	}
	if !failed.Load() {
		t.Fatal("the job ended before the failure was injected (after a second completed checkpoint)")
	}
	got := map[string]int{}
	entries, err := os.ReadDir(filepath.Join(dir, "out"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, "out", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Fields(string(data)) {
			got[l]++
		}
	}
	var bad []string
	for _, v := range want(parts, 0, n) {
		if got[v] != 1 {
			bad = append(bad, fmt.Sprintf("%s×%d", v, got[v]))
		}
		delete(got, v)
	}
	if len(bad) > 0 || len(got) > 0 {
		t.Fatalf("output not exactly once: %d records wrong (first %v), %d unexpected", len(bad), bad[:min(len(bad), 10)], len(got))
	}
	t.Logf("%d checkpoints completed", completed.Load())
}

// gather is a sink collecting what its writers write.
type gather struct {
	mu  sync.Mutex
	got []string
}

func (g *gather) CreateWriter(weir.SinkContext) (weir.SinkWriter[string], error) {
	return gatherWriter{g}, nil
}

type gatherWriter struct{ g *gather }

func (w gatherWriter) Write(v string) error {
	w.g.mu.Lock()
	w.g.got = append(w.g.got, v)
	w.g.mu.Unlock()
	return nil
}
func (w gatherWriter) Flush() error { return nil }
func (w gatherWriter) Close() error { return nil }

// With FromSourceWithWatermarks and a strategy without a timestamp
// function, records carry their Kafka timestamps (per partition
// watermarks): event-time windows downstream fire with the right counts
// and the final watermark ends them.
func TestJobEventTimeWindowsOnKafkaTimestamps(t *testing.T) {
	_, seeds := cluster(t)
	kafkatest.CreateTopic(t, seeds, "ev", 3)
	base := time.UnixMilli(0)
	// 20 records per partition, 5 s apart: four per 20 s window.
	var recs []*kgo.Record
	for p := int32(0); p < 3; p++ {
		for i := range 20 {
			recs = append(recs, &kgo.Record{Topic: "ev", Partition: p, Key: []byte{byte('a' + p)}, Value: fmt.Appendf(nil, "%c", 'a'+p),
				Timestamp: base.Add(time.Duration(i) * 5 * time.Second)})
		}
	}
	kafkatest.Produce(t, seeds, recs...)
	env := weir.NewEnvironment(weir.Options{Parallelism: 2, Logger: quietLogger()})
	src := NewSource(SourceOptions{Client: Client{Brokers: seeds}, Topics: []string{"ev"}, Bounded: true}, valueString)
	s := weir.FromSourceWithWatermarks(env, src, weir.MonotonousTimestamps[string](nil))
	w := weir.Window(weir.KeyBy(s, func(v string) string { return v }), weir.TumblingEventTimeWindows(20*time.Second))
	counts := weir.AggregateWindows(w, countAgg{}, nil, func(k string, win weir.TimeWindow, n int64) string {
		return fmt.Sprintf("%s[%d]=%d", k, win.Start/1000, n)
	})
	out := &gather{}
	weir.SinkTo(counts, out)
	late := &gather{}
	weir.SinkTo(weir.LateData(w), late)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := env.Execute(ctx, "kafka-windows"); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, k := range []string{"a", "b", "c"} {
		for start := 0; start < 100; start += 20 {
			want = append(want, fmt.Sprintf("%s[%d]=4", k, start))
		}
	}
	if got := sorted(out.got); fmt.Sprint(got) != fmt.Sprint(want) || len(late.got) != 0 {
		t.Fatalf("windows %v, want %v; late %v", got, want, late.got)
	}
}

// countAgg counts records.
type countAgg struct{}

func (countAgg) CreateAccumulator() int64      { return 0 }
func (countAgg) Add(_ string, acc int64) int64 { return acc + 1 }
func (countAgg) GetResult(acc int64) int64     { return acc }
func (countAgg) Merge(a, b int64) int64        { return a + b }

// timerLog records, for each event-time timer that fires, the watermark
// that fired it and the test's phase then.
type timerLog struct {
	mu    sync.Mutex
	fired map[int64][2]int64 // timer -> {watermark, phase}
}

func (l *timerLog) get(ts int64) ([2]int64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	v, ok := l.fired[ts]
	return v, ok
}

// timersAt registers event-time timers at 20 s, 50 s and 90 s on its first
// record and logs their firing.
type timersAt struct {
	log   *timerLog
	phase *atomic.Int64
	set   *weir.ValueState[bool]
}

func (f *timersAt) Open(ctx *weir.KeyedContext[int, string]) error {
	var err error
	f.set, err = weir.GetValueState(ctx, weir.ValueStateDescriptor[bool]{Name: "set"})
	return err
}

func (f *timersAt) ProcessElement(ctx *weir.KeyedContext[int, string], _ string) error {
	if ok, _ := f.set.Value(); !ok {
		for _, s := range []int64{20, 50, 90} {
			ctx.RegisterEventTimeTimer(s * 1000)
		}
		f.set.Update(true)
	}
	return nil
}

func (f *timersAt) OnTimer(ctx *weir.KeyedContext[int, string], t weir.Timer) error {
	f.log.mu.Lock()
	f.log.fired[t.Timestamp] = [2]int64{ctx.CurrentWatermark(), f.phase.Load()}
	f.log.mu.Unlock()
	return nil
}

// Per-partition watermarks (Flink's KafkaSource): one subtask reads three
// partitions; partition 0 is at 100 s of event time, partition 1 (slow)
// at 30 s, partition 2 is empty. The empty partition goes idle and does
// not hold event time back (the 20 s timer fires; without WithIdleness it
// never does); the slow one does: the watermark that fires the 20 s timer
// is at most 30 s, and the 50 s timer fires only once partition 1 got
// records past 50 s (phase 2). With one watermark for the whole subtask
// the 50 s and 90 s timers would fire with the 20 s one, in phase 1.
func TestPerPartitionWatermarksSlowAndIdlePartitions(t *testing.T) {
	_, seeds := cluster(t)
	kafkatest.CreateTopic(t, seeds, "wm", 3)
	at := func(p int32, sec int) *kgo.Record {
		return &kgo.Record{Topic: "wm", Partition: p, Value: []byte("x"), Timestamp: time.UnixMilli(int64(sec) * 1000)}
	}
	var recs []*kgo.Record
	for s := 0; s <= 100; s += 10 {
		recs = append(recs, at(0, s))
	}
	for s := 0; s <= 30; s += 10 {
		recs = append(recs, at(1, s))
	}
	kafkatest.Produce(t, seeds, recs...)

	env := weir.NewEnvironment(weir.Options{Parallelism: 1, Logger: quietLogger(), AutoWatermarkInterval: 20 * time.Millisecond})
	src := NewSource(SourceOptions{Client: Client{Brokers: seeds}, Topics: []string{"wm"}, PartitionDiscoveryInterval: -1}, valueString)
	s := weir.FromSourceWithWatermarks(env, src, weir.MonotonousTimestamps[string](nil).WithIdleness(100*time.Millisecond))
	log := &timerLog{fired: map[int64][2]int64{}}
	var phase atomic.Int64
	phase.Store(1)
	weir.SinkTo(weir.KeyedProcess(weir.KeyBy(s, func(string) int { return 0 }), func() weir.KeyedProcessFunction[int, string, string] {
		return &timersAt{log: log, phase: &phase}
	}), &gather{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- env.Execute(ctx, "kafka-partition-watermarks") }()
	await := func(ts int64) [2]int64 {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			if v, ok := log.get(ts); ok {
				return v
			}
			select {
			case err := <-done:
				t.Fatalf("the job ended (%v) before the %d ms timer fired", err, ts)
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("the %d ms timer did not fire within 30s (an idle partition holding event time back?)", ts)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	if v := await(20_000); v[0] > 30_000 || v[1] != 1 {
		t.Fatalf("the 20 s timer fired at watermark %d in phase %d: the slow partition (at 30 s) did not hold event time back", v[0], v[1])
	}
	if v, ok := log.get(50_000); ok {
		t.Fatalf("the 50 s timer fired at watermark %d before the slow partition passed 50 s", v[0])
	}
	phase.Store(2)
	var more []*kgo.Record
	for s := 40; s <= 100; s += 10 {
		more = append(more, at(1, s))
	}
	kafkatest.Produce(t, seeds, more...)
	for _, ts := range []int64{50_000, 90_000} {
		if v := await(ts); v[1] != 2 {
			t.Fatalf("the %d ms timer fired in phase %d", ts, v[1])
		}
	}
	cancel()
	<-done
}
