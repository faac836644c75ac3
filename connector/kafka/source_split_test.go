package kafka

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/weirstream/weir"
	"github.com/weirstream/weir/internal/kafkatest"
)

// splitCollector records what a reader does with weir.SplitCollector.
type splitCollector struct {
	t        *testing.T
	opened   []string
	released []string
	got      map[string][]string // split -> values
	ts       map[string]int64    // value -> timestamp
}

var _ weir.SplitCollector[string] = (*splitCollector)(nil)

func newSplitCollector(t *testing.T) *splitCollector {
	return &splitCollector{t: t, got: map[string][]string{}, ts: map[string]int64{}}
}

func (c *splitCollector) Collect(v string) { c.t.Errorf("record %q emitted to no split", v) }
func (c *splitCollector) Split(id string) weir.SplitOutput[string] {
	c.opened = append(c.opened, id)
	return splitOut{c, id}
}
func (c *splitCollector) ReleaseSplit(id string) { c.released = append(c.released, id) }

type splitOut struct {
	c  *splitCollector
	id string
}

func (o splitOut) Collect(v string) {
	o.c.t.Errorf("record %q of split %s without its timestamp", v, o.id)
}
func (o splitOut) CollectWithTimestamp(v string, ts int64) {
	o.c.got[o.id] = append(o.c.got[o.id], v)
	o.c.ts[v] = ts
}

func (c *splitCollector) count() int {
	n := 0
	for _, v := range c.got {
		n += len(v)
	}
	return n
}

// readSplits reads r into c until done or the end, failing after 20s.
func readSplits(t *testing.T, r *reader[string], c *splitCollector, done func() bool) weir.ReadStatus {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !done() {
		st, err := r.ReadBatch(c)
		if err != nil {
			t.Fatal(err)
		}
		if st == weir.EndOfInput {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("scenario not reached: %d records", c.count())
		}
		if st == weir.NothingAvailable {
			select {
			case <-r.Ready():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return weir.MoreAvailable
}

func TestSplitOutputsCarryKafkaTimestamps(t *testing.T) {
	_, seeds := cluster(t)
	kafkatest.CreateTopic(t, seeds, "w", 3)
	base := time.UnixMilli(1_700_000_000_000)
	produce(t, seeds, "w", []int32{0, 1}, 0, 5, base) // partition 2 stays empty

	// Unbounded: every partition has an output from the start, the empty
	// one too (it holds the watermark back, as in Flink).
	src := NewSource(SourceOptions{Client: Client{Brokers: seeds}, Topics: []string{"w"}, PartitionDiscoveryInterval: -1}, valueString)
	r := open(t, src, weir.SourceContext{Parallelism: 1}, nil)
	c := newSplitCollector(t)
	readSplits(t, r, c, func() bool { return c.count() == 10 })
	slices.Sort(c.opened)
	if fmt.Sprint(c.opened) != "[w-0 w-1 w-2]" || len(c.released) != 0 {
		t.Fatalf("opened %v released %v, want outputs w-0 w-1 w-2 and none released", c.opened, c.released)
	}
	for p := range 2 {
		id := fmt.Sprintf("w-%d", p)
		if fmt.Sprint(c.got[id]) != fmt.Sprint(want([]int32{int32(p)}, 0, 5)) {
			t.Fatalf("split %s got %v", id, c.got[id])
		}
		for i := range 5 {
			v := fmt.Sprintf("p%d-%d", p, i)
			if c.ts[v] != base.Add(time.Duration(i)*time.Second).UnixMilli() {
				t.Fatalf("%s has timestamp %d, want its Kafka timestamp %d", v, c.ts[v], base.Add(time.Duration(i)*time.Second).UnixMilli())
			}
		}
	}
	// Metrics: the offset of the last record emitted per partition, and
	// no lag once everything fetched was emitted.
	if got := r.pm[tp{"w", 0}].current.Load(); got != 4 {
		t.Fatalf("currentOffset of w/0 = %d, want 4", got)
	}
	if got := r.pm[tp{"w", 2}].current.Load(); got != -1 {
		t.Fatalf("currentOffset of the empty w/2 = %d, want -1", got)
	}
	if lag := r.lagMax(); lag != 0 {
		t.Fatalf("records-lag-max %v after reading everything, want 0", lag)
	}

	// Bounded: finished partitions are released.
	bsrc := NewSource(SourceOptions{Client: Client{Brokers: seeds}, Topics: []string{"w"}, Bounded: true}, valueString)
	br := open(t, bsrc, weir.SourceContext{Parallelism: 1}, nil)
	bc := newSplitCollector(t)
	if st := readSplits(t, br, bc, func() bool { return false }); st != weir.EndOfInput {
		t.Fatalf("status %v", st)
	}
	slices.Sort(bc.released)
	if fmt.Sprint(bc.released) != "[w-0 w-1]" || bc.count() != 10 {
		t.Fatalf("released %v (want w-0 w-1; the empty w-2 is finished at once and never opened), read %d", bc.released, bc.count())
	}
}

func TestLagAndCommittedOffsetMetrics(t *testing.T) {
	_, seeds := cluster(t)
	kafkatest.CreateTopic(t, seeds, "lag", 1)
	produce(t, seeds, "lag", []int32{0}, 0, 3000, time.Now())
	src := NewSource(SourceOptions{Client: Client{Brokers: seeds}, Topics: []string{"lag"}, GroupID: "lg", PartitionDiscoveryInterval: -1}, valueString)
	r := open(t, src, weir.SourceContext{Parallelism: 1}, nil)
	out := &collect[string]{}
	// One batch (1024 records at most) leaves a lag of at least 3000-1024.
	drain(t, r, out, func() bool { return len(out.got) > 0 })
	m := r.pm[tp{"lag", 0}]
	if lag, want := r.lagMax(), float64(3000-len(out.got)); lag != want || m.current.Load() != int64(len(out.got)-1) {
		t.Fatalf("after %d records: records-lag-max %v, currentOffset %d; want %v and %d", len(out.got), lag, m.current.Load(), want, len(out.got)-1)
	}
	if _, err := r.SnapshotSplits(); err != nil {
		t.Fatal(err)
	}
	r.NotifyCheckpointComplete(1)
	deadline := time.Now().Add(10 * time.Second)
	for m.committed.Load() != int64(len(out.got)) {
		if time.Now().After(deadline) {
			t.Fatalf("committedOffset %d, want %d", m.committed.Load(), len(out.got))
		}
		time.Sleep(5 * time.Millisecond)
	}
	resp, err := kadm.NewClient(kafkatest.Client(t, seeds)).FetchOffsets(context.Background(), "lg")
	if o, _ := resp.Lookup("lag", 0); err != nil || o.At != int64(len(out.got)) {
		t.Fatalf("group offset %v %v, want %d", o.At, err, len(out.got))
	}
}
