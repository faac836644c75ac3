package kafka

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/internal/kafkatest"
	"github.com/weirstream/weir/internal/metrics"
	"github.com/weirstream/weir/internal/task"
	"github.com/weirstream/weir/source"
)

// countingSink counts the commits of transactions (not markers) and
// keeps its writers.
type countingSink struct {
	weir.TwoPhaseCommitSink[int64]
	commits atomic.Int64
	// created, if set, is called with each writer.
	created func(ctx weir.SinkContext, w *writer[int64])
}

func (c *countingSink) CreateWriter(ctx weir.SinkContext) (weir.SinkWriter[int64], error) {
	w, err := c.TwoPhaseCommitSink.CreateWriter(ctx)
	if err == nil && c.created != nil {
		c.created(ctx, w.(*writer[int64]))
	}
	return w, err
}

func (c *countingSink) Commit(ctx weir.SinkContext, txn []byte) error {
	if h, err := decodeHandle(txn); err == nil && !h.marker {
		c.commits.Add(1)
	}
	return c.TwoPhaseCommitSink.Commit(ctx, txn)
}

// A job with checkpoints every 20 ms and failures injected in a map
// function (each restarting the job from its last checkpoint) writes
// every number exactly once to the topic read_committed with an
// exactly-once sink, and at least once with an at-least-once sink.
func TestJobUnderFailures(t *testing.T) {
	t.Parallel()
	for _, d := range []DeliveryGuarantee{ExactlyOnce, AtLeastOnce} {
		t.Run(d.String(), func(t *testing.T) {
			t.Parallel()
			seed := rand.Uint64()
			t.Logf("seed %d", seed)
			rng := rand.New(rand.NewPCG(seed, 0))
			const n, failures = 30_000, 3
			seeds := sinkCluster(t, "out")
			var failAt [failures]int64
			var failed [failures]atomic.Bool
			for i := range failAt {
				// One failure in each of the middle thirds' halves,
				// so that checkpoints complete between them.
				failAt[i] = int64(n/6*(i+1)) + rng.Int64N(n/6)
			}
			dir := t.TempDir()
			env := weir.NewEnvironment(weir.Options{Parallelism: 2, Logger: testLogger(), StateDir: filepath.Join(dir, "state"),
				Checkpoint: weir.CheckpointOptions{Interval: 20 * time.Millisecond, Dir: filepath.Join(dir, "chk")},
				Restart:    weir.RestartOptions{Type: "fixed-delay", FixedDelayAttempts: 2 * failures, FixedDelay: time.Millisecond}})
			nums := weir.FromSource(env, source.Sequence(0, n-1)).UID("numbers")
			mapped := weir.Process(nums, weir.ProcessFunc[int64, int64](func(ctx *weir.Context[int64], i int64) error {
				for k, at := range failAt {
					if i == at && failed[k].CompareAndSwap(false, true) {
						return fmt.Errorf("injected failure at %d", i)
					}
				}
				if i%200 == 0 {
					time.Sleep(time.Millisecond) // let checkpoints happen while records flow
				}
				ctx.Emit(i)
				return nil
			}))
			out := &countingSink{TwoPhaseCommitSink: NewSink(SinkOptions{Client: Client{Brokers: seeds}, Topic: "out", Delivery: d,
				TransactionalIDPrefix: "job"}, func(i int64) (*Record, error) {
				return &Record{Key: []byte(strconv.FormatInt(i%7, 10)), Value: []byte(strconv.FormatInt(i, 10))}, nil
			}).(weir.TwoPhaseCommitSink[int64])}
			weir.SinkTo(mapped, weir.Sink[int64](out)).UID("sink")
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if err := env.Execute(ctx, "kafka-"+d.String()); err != nil {
				t.Fatal(err)
			}
			for k := range failed {
				if !failed[k].Load() {
					t.Fatalf("the failure at %d was never injected", failAt[k])
				}
			}
			if d == ExactlyOnce && out.commits.Load() < failures+1 {
				t.Fatalf("%d transactions committed: the scenario did not run between checkpoints", out.commits.Load())
			}
			// Commit markers may land after the commit answered (see
			// expect): read again while numbers are missing.
			var recs int
			var missing, dups int
			for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
				seen := make([]int, n)
				rs := kafkatest.ReadCommitted(t, seeds, "out")
				for _, r := range rs {
					i, err := strconv.ParseInt(string(r.Value), 10, 64)
					if err != nil || i < 0 || i >= n {
						t.Fatalf("bad record %q", r.Value)
					}
					seen[i]++
				}
				recs, missing, dups = len(rs), 0, 0
				for _, c := range seen {
					switch {
					case c == 0:
						missing++
					case c > 1:
						dups++
					}
				}
				if missing == 0 || time.Now().After(deadline) {
					break
				}
			}
			t.Logf("%d records read, %d transactions committed", recs, out.commits.Load())
			if missing > 0 {
				t.Fatalf("%d of %d numbers missing (%d records read)", missing, n, recs)
			}
			if d == ExactlyOnce && dups > 0 {
				t.Fatalf("%d of %d numbers written more than once", dups, n)
			}
		})
	}
}

// Without checkpointing, an exactly-once sink commits one transaction per
// subtask at the end of the input. Its writers count the records they send
// in the operator's metrics.
func TestJobExactlyOnceWithoutCheckpoints(t *testing.T) {
	t.Parallel()
	const n = 5_000
	seeds := sinkCluster(t, "out")
	var logBuf syncLog
	env := weir.NewEnvironment(weir.Options{Parallelism: 2, Logger: slog.New(slog.NewTextHandler(&logBuf, nil)), StateDir: filepath.Join(t.TempDir(), "state")})
	defer func() {
		// The user is told that nothing commits before the end.
		if !strings.Contains(logBuf.String(), "exactly-once without checkpointing commits only at the end of a bounded input") {
			t.Errorf("no warning about exactly-once without checkpointing in the log:\n%s", logBuf.String())
		}
	}()
	reg := metrics.NewRegistry()
	var mu sync.Mutex
	var writers []*writer[int64]
	out := &countingSink{TwoPhaseCommitSink: NewSink(SinkOptions{Client: Client{Brokers: seeds}, Topic: "out", Delivery: ExactlyOnce,
		TransactionalIDPrefix: "nochk"}, func(i int64) (*Record, error) {
		return &Record{Value: []byte(strconv.FormatInt(i, 10))}, nil
	}).(weir.TwoPhaseCommitSink[int64])}
	out.created = func(ctx weir.SinkContext, w *writer[int64]) {
		mu.Lock()
		defer mu.Unlock()
		writers = append(writers, w)
		if ctx.CheckpointInterval != 0 {
			t.Errorf("checkpoint interval %s without checkpointing", ctx.CheckpointInterval)
		}
		gs := reg.Find(metrics.ScopeOperator, metrics.Label{Name: metrics.LabelOperatorName, Value: "Sink"},
			metrics.Label{Name: metrics.LabelSubtaskIndex, Value: strconv.Itoa(ctx.Subtask)})
		if len(gs) != 1 {
			t.Errorf("sink subtask %d: %d operator metric groups, want 1", ctx.Subtask, len(gs))
		}
		for _, g := range gs {
			for _, name := range []string{"numRecordsSend", "numRecordsSendErrors"} {
				if m, ok := g.Get(name); !ok || m.Kind() != metrics.KindCounter {
					t.Errorf("sink subtask %s: no counter %s", g.Label(metrics.LabelSubtaskIndex), name)
				}
			}
		}
	}
	weir.SinkTo(weir.FromSource(env, source.Sequence(0, n-1)), weir.Sink[int64](out))
	ctx, cancel := context.WithTimeout(task.WithMetrics(context.Background(), reg, "job-1"), time.Minute)
	defer cancel()
	if err := env.Execute(ctx, "kafka-no-checkpoints"); err != nil {
		t.Fatal(err)
	}
	if c := out.commits.Load(); c != 2 {
		t.Fatalf("%d transactions committed, want one per subtask", c)
	}
	var sent, errs int64
	for _, w := range writers {
		sent, errs = sent+w.sent.Count(), errs+w.sendErrors.Count()
	}
	if len(writers) != 2 || sent != n || errs != 0 {
		t.Fatalf("%d writers counted %d records sent and %d send errors, want 2, %d and 0", len(writers), sent, errs, n)
	}
	want := make([]string, n)
	for i := range want {
		want[i] = strconv.Itoa(i)
	}
	expect(t, seeds, "out", want...)
}

// syncLog is a log destination safe for concurrent writers.
type syncLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
