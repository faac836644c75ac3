package cluster_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirstream/weir/internal/cluster"
	"github.com/weirstream/weir/internal/jobs"
	"github.com/weirstream/weir/internal/kafkatest"
)

// The counter through Kafka in and out on two task managers over TCP,
// one of them lost after a checkpoint completed and replaced: the Kafka
// sink's transactions are pre-committed in the task managers, committed
// there when checkpoints complete, and the restarted attempt commits the
// restored ones and aborts the lost task manager's open ones: the output
// read with read_committed is exactly once.
func TestClusterCounterThroughKafka(t *testing.T) {
	k := kafkatest.Start(t)
	seeds := k.ListenAddrs()
	const n = 40_000
	kafkatest.CreateTopic(t, seeds, "numbers", 4)
	kafkatest.CreateTopic(t, seeds, "counts", 3)
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: "numbers", Partition: int32(i % 4), Value: []byte(strconv.Itoa(i))}
	}
	kafkatest.Produce(t, seeds, recs...)

	dir := t.TempDir()
	spec := counterSpec(dir, n, 4, "taskmanager.memory.segment-size=1kb")
	spec.Args = []string{"--kafka-brokers", strings.Join(seeds, ","), "--input-topic", "numbers", "--output-topic", "counts",
		"--keys", "97", "--sink-delay", "100us"}
	c := newTestCluster(t, spec, cluster.Security{})
	c.tcp = true
	c.startTM(2, nil)
	kill, _ := c.startTM(2, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- c.runJob(ctx) }()
	waitFor(t, 60*time.Second, "a completed checkpoint", func() bool {
		select {
		case err := <-done:
			t.Fatalf("the job ended (%v) before a checkpoint completed", err)
		default:
		}
		return checkpointsAtLeast(dir, 1)
	})
	kill()
	c.startTM(2, nil)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if a := c.jm.Attempts(); a < 2 {
		t.Fatalf("%d attempts: the lost task manager did not fail the attempt", a)
	}
	out := kafkatest.ReadCommitted(t, seeds, "counts")
	lines := make([]string, len(out))
	for i, r := range out {
		lines[i] = string(r.Value)
	}
	if err := jobs.VerifyCounterOutput(lines, n, 97); err != nil {
		t.Fatalf("committed output (%d lines): %v", len(lines), err)
	}
}
