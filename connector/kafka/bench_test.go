package kafka

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/internal/bench"
	"github.com/weirstream/weir/internal/kafkatest"
)

// BenchmarkPassThrough measures a source -> sink pass-through job on kfake:
// a bounded Kafka source over a topic of 4 partitions holding 200,000
// records of 100 bytes, into a Kafka sink on another topic, parallelism 2,
// checkpoints every second, for each delivery guarantee. It reports records
// per second and per CPU-second of the whole process, which includes the
// in-process kfake broker (not a real Kafka: no replication, no disk).
//
//	go test -run '^$' -bench BenchmarkPassThrough -benchtime 3x ./connector/kafka
func BenchmarkPassThrough(b *testing.B) {
	const records = 200_000
	c := kafkatest.Start(b)
	seeds := c.ListenAddrs()
	kafkatest.CreateTopic(b, seeds, "in", 4)
	value := make([]byte, 100)
	for i := range value {
		value[i] = 'a' + byte(i%26)
	}
	recs := make([]*kgo.Record, records)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: "in", Partition: int32(i % 4), Value: value}
	}
	kafkatest.Produce(b, seeds, recs...)
	runs := 0 // output topics are named after their run
	for _, d := range []DeliveryGuarantee{None, AtLeastOnce, ExactlyOnce} {
		b.Run(d.String(), func(b *testing.B) {
			var wall, cpu time.Duration
			var out string
			for range b.N {
				runs++
				out = fmt.Sprintf("out-%d", runs)
				kafkatest.CreateTopic(b, seeds, out, 4)
				env := weir.NewEnvironment(weir.Options{Parallelism: 2, Logger: quietLogger(), StateDir: b.TempDir(),
					Checkpoint: weir.CheckpointOptions{Interval: time.Second, Dir: filepath.Join(b.TempDir(), "chk")}})
				src := NewSource(SourceOptions{Client: Client{Brokers: seeds}, Topics: []string{"in"}, Bounded: true},
					func(r *Record) ([]byte, error) { return r.Value, nil })
				snk := NewSink(SinkOptions{Client: Client{Brokers: seeds}, Topic: out, Delivery: d, TransactionalIDPrefix: out},
					func(v []byte) (*Record, error) { return &Record{Value: v}, nil })
				weir.SinkTo(weir.FromSource[[]byte](env, src), snk)
				c0, t0 := bench.ProcessCPU(), time.Now()
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
				err := env.Execute(ctx, "pass-through")
				cancel()
				wall += time.Since(t0)
				cpu += bench.ProcessCPU() - c0
				if err != nil {
					b.Fatal(err)
				}
			}
			// The last run's output holds every record once.
			if got := len(kafkatest.ReadCommitted(b, seeds, out)); got != records && d != None || got < records {
				b.Fatalf("the output holds %d records, want %d", got, records)
			}
			n := float64(records * b.N)
			b.ReportMetric(n/wall.Seconds(), "records/s")
			b.ReportMetric(n/cpu.Seconds(), "records/CPU-s")
			b.ReportMetric(0, "ns/op")
		})
	}
}
