// Package kafkatest starts in-process Kafka brokers for tests: kfake,
// franz-go's implementation of the Kafka protocol (produce, fetch, groups,
// transactions, read_committed isolation), with its fault injection
// (kfake.Cluster.Fault). It is not a real broker: no replication, no disk
// unless asked, timings of its own.
package kafkatest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Start starts a cluster of brokers on 127.0.0.1 (three unless opts say
// otherwise) that closes when the test ends.
func Start(t testing.TB, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(3)}, opts...)...)
	if err != nil {
		t.Fatalf("kfake: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// Client returns a client of the cluster at seeds that closes when the
// test ends.
func Client(t testing.TB, seeds []string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...)}, opts...)...)
	if err != nil {
		t.Fatalf("kafka client: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// CreateTopic creates topic with partitions partitions.
func CreateTopic(t testing.TB, seeds []string, topic string, partitions int32) {
	t.Helper()
	adm := kadm.NewClient(Client(t, seeds))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, partitions, 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
}

// Produce writes values to topic (round robin over its partitions unless
// a record names one) and waits until every one is acknowledged.
func Produce(t testing.TB, seeds []string, records ...*kgo.Record) {
	t.Helper()
	cl := Client(t, seeds, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, records...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// ReadCommitted reads every committed record of topic, with read_committed
// isolation, up to the last stable offsets it sees first (an open
// transaction's records are not read), in
// partition order.
func ReadCommitted(t testing.TB, seeds []string, topic string) []*kgo.Record {
	t.Helper()
	recs, err := ReadCommittedErr(seeds, topic)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// ReadCommittedErr is ReadCommitted returning its error.
func ReadCommittedErr(seeds []string, topic string) ([]*kgo.Record, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		return nil, err
	}
	defer adm.Close()
	ends, err := kadm.NewClient(adm).ListCommittedOffsets(ctx, topic) // last stable offsets
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("end offsets of %s: %w", topic, err)
	}
	want := map[int32]int64{}
	starts := map[int32]kgo.Offset{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
			starts[o.Partition] = kgo.NewOffset().AtStart()
		}
	})
	if len(want) == 0 {
		return nil, nil
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords(),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: starts}))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	// Control records (transaction markers) are kept, so that every
	// offset below a partition's end offset is seen: a partition is read
	// once its last offset came, a data record or a marker.
	byPart := map[int32][]*kgo.Record{}
	for len(want) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("read %s: partitions %v not read to their end offsets: %w", topic, want, err)
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) { ferr = err })
		if ferr != nil {
			return nil, fmt.Errorf("read %s: %w", topic, ferr)
		}
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			end, ok := want[p.Partition]
			if !ok {
				return
			}
			for _, r := range p.Records {
				if r.Offset < end && !r.Attrs.IsControl() {
					byPart[p.Partition] = append(byPart[p.Partition], r)
				}
				if r.Offset >= end-1 {
					delete(want, p.Partition)
				}
			}
		})
	}
	var out []*kgo.Record
	for p := int32(0); len(byPart) > 0; p++ {
		out = append(out, byPart[p]...)
		delete(byPart, p)
	}
	return out, nil
}
