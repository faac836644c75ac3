package jobs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weirstream/weir/internal/kafkatest"
)

// kafkaCounter is a kfake cluster holding the counter's input: topic
// "numbers" (4 partitions) with the numbers 0..n-1, and an empty
// "counts" (3 partitions) for its output.
type kafkaCounter struct {
	c     *kfake.Cluster
	seeds []string
	n     int
	dir   string
	// lastLog is the log of the latest run, once it ended.
	lastLog string
	// curLog is the log of the run going on (or the last one).
	curLog atomic.Pointer[lockedLog]
}

func newKafkaCounter(t *testing.T, n int) *kafkaCounter {
	c := kafkatest.Start(t)
	k := &kafkaCounter{c: c, seeds: c.ListenAddrs(), n: n, dir: t.TempDir()}
	kafkatest.CreateTopic(t, k.seeds, "numbers", 4)
	kafkatest.CreateTopic(t, k.seeds, "counts", 3)
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: "numbers", Partition: int32(i % 4), Value: []byte(strconv.Itoa(i))}
	}
	kafkatest.Produce(t, k.seeds, recs...)
	return k
}

// lockedLog collects a job's log for assertions on what happened.
type lockedLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// Contains says whether the log holds s so far.
func (l *lockedLog) Contains(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return bytes.Contains(l.b.Bytes(), []byte(s))
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// run runs the counter through Kafka at parallelism p with more
// configuration; it returns the job's error and log.
func (k *kafkaCounter) run(ctx context.Context, t *testing.T, p int, extra ...string) (error, string) {
	t.Helper()
	args := []string{"--kafka-brokers", strings.Join(k.seeds, ","), "--input-topic", "numbers", "--output-topic", "counts",
		"--keys", "97", "--sink-delay", "60us"}
	sets := append([]string{"parallelism.default=" + strconv.Itoa(p), "execution.checkpointing.interval=20ms",
		"execution.checkpointing.dir=" + filepath.Join(k.dir, "chk"), "state.backend.local-dir=" + filepath.Join(k.dir, "state"),
		"execution.checkpointing.externalized-checkpoint-retention=RETAIN_ON_CANCELLATION",
		"restart-strategy.type=fixed-delay", "restart-strategy.fixed-delay.attempts=20", "restart-strategy.fixed-delay.delay=20ms",
		// Small network buffers: little in flight before the slow sink,
		// so that aligned checkpoints complete often.
		"taskmanager.memory.segment-size=1kb", "rest.port=0"}, extra...)
	log := &lockedLog{}
	k.curLog.Store(log)
	env, _, err := Builtin().Prepare("counter", args, sets, slog.New(slog.NewTextHandler(log, nil)), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	err = env.Execute(ctx, "counter")
	k.lastLog = log.String()
	return err, k.lastLog
}

// verify reads the output topic with read_committed: every key's counts
// exactly once.
func (k *kafkaCounter) verify(t *testing.T) {
	t.Helper()
	recs := kafkatest.ReadCommitted(t, k.seeds, "counts")
	lines := make([]string, len(recs))
	for i, r := range recs {
		lines[i] = string(r.Value)
	}
	if err := VerifyCounterOutput(lines, int64(k.n), 97); err != nil {
		t.Fatalf("committed output (%d lines): %v", len(lines), err)
	}
}

// The counter through Kafka in and out, with broker errors on produce, on
// the transactions' commits, on fetches and on the group's offset
// commits, dropped connections, and task failures (non-retriable broker
// errors at seeded moments fail a task: the job restarts from its latest
// checkpoint): the output read with read_committed is exactly once.
func TestCounterThroughKafkaWithFaults(t *testing.T) {
	t.Parallel()
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 18))
	k := newKafkaCounter(t, 40_000)
	// Retriable errors franz-go and the connectors retry.
	retriable := k.c.Fault(
		kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "counts", Err: kerr.NotEnoughReplicas, Count: 3},
		kfake.Fault{Keys: []kmsg.Key{kmsg.EndTxn}, Err: kerr.ConcurrentTransactions, Count: 3, TopLevel: true},
		kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch}, Topic: "numbers", Err: kerr.NotLeaderForPartition, Count: 3},
	)
	// Task failures: a fetch the broker answers with an unknown error
	// fails a source subtask; a record the broker refuses fails the
	// sink's subtask. Each at a seeded request, the produce one only
	// once the job restarted after the fetch one, so that each fails an
	// attempt of its own and the log names both errors.
	var mu sync.Mutex
	produces, fetches := 0, 0
	failProduceAt, failFetchAt := 10+rng.IntN(40), 2+rng.IntN(6)
	fetchFailed := func() bool {
		l := k.curLog.Load()
		return l != nil && l.Contains("UNKNOWN_SERVER_ERROR")
	}
	fatal := k.c.Fault(
		kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "counts", Err: kerr.InvalidRecord, Count: 1, When: func(kmsg.Request) bool {
			if !fetchFailed() {
				return false
			}
			mu.Lock()
			defer mu.Unlock()
			produces++
			return produces >= failProduceAt
		}},
		kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch}, Topic: "numbers", Err: kerr.UnknownServerError, Count: 1, When: func(kmsg.Request) bool {
			mu.Lock()
			defer mu.Unlock()
			fetches++
			return fetches >= failFetchAt
		}},
	)
	// One dropped connection of a producer and one of a consumer.
	for _, key := range []int16{int16(kmsg.Produce), int16(kmsg.Fetch)} {
		k.c.ControlKey(key, func(kmsg.Request) (kmsg.Response, error, bool) {
			return nil, errors.New("dropped by the test"), true
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	err, log := k.run(ctx, t, 2, "execution.checkpointing.max-concurrent-checkpoints=2")
	if err != nil {
		t.Fatalf("job: %v\n%s", err, log)
	}
	if h := retriable.Hits(); h < 6 {
		t.Errorf("only %d of the retriable faults fired", h)
	}
	if h := fatal.Hits(); h != 2 {
		t.Errorf("%d of the 2 fatal faults fired", h)
	}
	// Each fatal fault failed an attempt: the restart lines name both
	// errors.
	var restarts []string
	for line := range strings.Lines(log) {
		if strings.Contains(line, "failed; restarting") {
			restarts = append(restarts, line)
		}
	}
	for _, e := range []*kerr.Error{kerr.UnknownServerError, kerr.InvalidRecord} {
		if !slices.ContainsFunc(restarts, func(l string) bool { return strings.Contains(l, e.Message) }) {
			t.Errorf("no restart after %s; the restarts:\n%s", e.Message, strings.Join(restarts, ""))
		}
	}
	k.verify(t)
}

// Restoring twice from the same checkpoint: a first run is canceled after
// a few checkpoints (retained); a second run from it is canceled before
// it completes a checkpoint of its own (its transactions stay open, its
// sinks may have committed the restored ones again); a third run from the
// same checkpoint to the end: exactly once (Flink's FLINK-8086).
func TestCounterThroughKafkaRestoreTwice(t *testing.T) {
	t.Parallel()
	k := newKafkaCounter(t, 30_000)
	chk := k.runUntilCheckpoints(t, 2, 3)
	t.Logf("restoring twice from %s", chk)
	// The second run never checkpoints; cancel it once it produced
	// records (into transactions nothing will commit).
	produced := k.c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "counts", Observe: true, Count: -1})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		err, _ := k.run(ctx, t, 2, "execution.state-recovery.path="+chk, "execution.checkpointing.interval=10min")
		done <- err
	}()
	deadline := time.Now().Add(time.Minute)
	for produced.Hits() == 0 {
		select {
		case err := <-done:
			t.Fatalf("the second run ended (%v) before it produced anything", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the second run produced nothing within a minute")
		}
		time.Sleep(5 * time.Millisecond)
	}
	produced.Remove()
	cancel()
	<-done
	err, log := k.run(context.Background(), t, 2, "execution.state-recovery.path="+chk)
	if err != nil {
		t.Fatalf("third run: %v\n%s", err, log)
	}
	k.verify(t)
}

// Rescaling 2 -> 3 -> 1 through retained checkpoints keeps every
// partition's offset: no gap and no replay beyond the checkpoint, so the
// counts are exactly once.
func TestCounterThroughKafkaRescales(t *testing.T) {
	t.Parallel()
	k := newKafkaCounter(t, 30_000)
	chk := k.runUntilCheckpoints(t, 2, 2)
	chk = k.runUntilCheckpointsFrom(t, 3, 2, chk)
	err, log := k.run(context.Background(), t, 1, "execution.state-recovery.path="+chk)
	if err != nil {
		t.Fatalf("last run at parallelism 1: %v\n%s", err, log)
	}
	k.verify(t)
}

// runUntilCheckpoints runs the counter at parallelism p from scratch until
// checkpoints more checkpoints completed, cancels it and returns its newest
// complete checkpoint's directory.
func (k *kafkaCounter) runUntilCheckpoints(t *testing.T, p, checkpoints int) string {
	t.Helper()
	return k.runUntilCheckpointsFrom(t, p, checkpoints, "")
}

// runUntilCheckpointsFrom is runUntilCheckpoints restoring from (a
// checkpoint directory) unless it is empty.
func (k *kafkaCounter) runUntilCheckpointsFrom(t *testing.T, p, checkpoints int, from string) string {
	t.Helper()
	before := k.newestCheckpoint()
	var extra []string
	if from != "" {
		extra = append(extra, "execution.state-recovery.path="+from)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		err, _ := k.run(ctx, t, p, extra...)
		done <- err
	}()
	deadline := time.Now().Add(time.Minute)
	for k.newestCheckpoint() < before+int64(checkpoints) {
		select {
		case err := <-done:
			t.Fatalf("the run at parallelism %d ended (%v) before %d checkpoints completed; raise n:\n%s", p, err, checkpoints, k.lastLog)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d checkpoints did not complete within a minute", checkpoints)
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
	id := k.newestCheckpoint()
	return filepath.Join(k.dir, "chk", "counter", fmt.Sprintf("chk-%d", id))
}

// newestCheckpoint returns the id of the newest complete checkpoint (its
// _metadata written), 0 if none.
func (k *kafkaCounter) newestCheckpoint() int64 {
	ms, _ := filepath.Glob(filepath.Join(k.dir, "chk", "counter", "chk-*", "_metadata"))
	var newest int64
	for _, m := range ms {
		id, err := strconv.ParseInt(strings.TrimPrefix(filepath.Base(filepath.Dir(m)), "chk-"), 10, 64)
		if err == nil && id > newest {
			newest = id
		}
	}
	return newest
}
