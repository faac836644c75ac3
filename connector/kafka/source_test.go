package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weirstream/weir"
	"github.com/weirstream/weir/internal/kafkatest"
	"go.uber.org/goleak"
)

func TestJavaStringHashCode(t *testing.T) {
	// Java's "x".hashCode() values (computed by hand and by the JDK's
	// definition: s[0]*31^(n-1) + ... + s[n-1] over UTF-16 code units).
	for s, want := range map[string]int32{
		"": 0, "a": 97, "topic": 110546223, "Kafka": 72255238, "hello": 99162322,
		"é": 233, "😀": 1772899, // a surrogate pair: 0xD83D*31 + 0xDE00
		"orders-events-2026": 71483982,
	} {
		if got := javaStringHashCode(s); got != want {
			t.Errorf("javaStringHashCode(%q) = %d, want %d", s, got, want)
		}
	}
}

func TestOwnerMatchesFlink(t *testing.T) {
	// Flink's KafkaSourceEnumerator.getSplitOwner, step by step.
	flink := func(topic string, partition int32, n int) int {
		start := int((javaStringHashCode(topic)*31)&0x7FFFFFFF) % n
		return (start + int(partition)) % n
	}
	for _, topic := range []string{"topic", "Kafka", "a", "orders-events-2026"} {
		for n := 1; n <= 7; n++ {
			for p := int32(0); p < 20; p++ {
				if got, want := owner(topic, p, n), flink(topic, p, n); got != want {
					t.Fatalf("owner(%q, %d, %d) = %d, want %d", topic, p, n, got, want)
				}
			}
		}
	}
	// "topic": (110546223*31) & 0x7FFFFFFF = 3426932913 & 0x7FFFFFFF = 1279449265; % 4 = 1.
	if got := owner("topic", 0, 4); got != 1 {
		t.Fatalf("owner(topic, 0, 4) = %d, want 1", got)
	}
}

func TestSplitEncoding(t *testing.T) {
	sp := split{tp: tp{"orders", 7}, next: 42, stop: noStop}
	got, err := decodeSplit(sp.encode())
	if err != nil || got != sp {
		t.Fatalf("round trip: %+v, %v; want %+v", got, err, sp)
	}
	b := sp.encode()
	b[0] = 9
	if _, err := decodeSplit(b); err == nil || !strings.Contains(err.Error(), "version 9") {
		t.Fatalf("unknown version: %v", err)
	}
	if _, err := decodeSplit(sp.encode()[:10]); err == nil {
		t.Fatal("a truncated split state decoded")
	}
}

func TestBadOptions(t *testing.T) {
	ok := SourceOptions{Client: Client{Brokers: []string{"127.0.0.1:9092"}}, Topics: []string{"t"}}
	yes := true
	for _, c := range []struct {
		name string
		edit func(*SourceOptions)
		want string
	}{
		{"no topics", func(o *SourceOptions) { o.Topics = nil }, "no topics"},
		{"both", func(o *SourceOptions) { o.TopicPattern = "t.*" }, "both Topics and TopicPattern"},
		{"bad regexp", func(o *SourceOptions) { o.Topics, o.TopicPattern = nil, "t(" }, "not a valid regexp"},
		{"committed without group", func(o *SourceOptions) { o.StartingOffsets = Committed(Earliest()) }, "set GroupID"},
		{"bad reset", func(o *SourceOptions) { o.StartingOffsets = Committed(Timestamp(time.Now())); o.GroupID = "g" }, "must be Earliest() or Latest()"},
		{"commit without group", func(o *SourceOptions) { o.CommitOffsetsOnCheckpoint = &yes }, "set GroupID"},
		{"no brokers", func(o *SourceOptions) { o.Brokers = nil }, "no brokers"},
	} {
		o := ok
		c.edit(&o)
		err := NewSource(o, valueString).Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
		}
		if _, err := NewSource(o, valueString).CreateReader(weir.SourceContext{Parallelism: 1}); err == nil {
			t.Errorf("%s: CreateReader accepted the options", c.name)
		}
	}
	if err := NewSource(ok, valueString).Validate(); err != nil {
		t.Fatalf("good options: %v", err)
	}
	// Every problem at once.
	err := NewSource(SourceOptions{}, valueString).Validate()
	if err == nil || !strings.Contains(err.Error(), "no brokers") || !strings.Contains(err.Error(), "no topics") {
		t.Fatalf("empty options: %v", err)
	}
}

func valueString(r *Record) (string, error) { return string(r.Value), nil }

// cluster starts kfake brokers and returns their addresses.
func cluster(t *testing.T, opts ...kfake.Opt) (*kfake.Cluster, []string) {
	c := kafkatest.Start(t, opts...)
	return c, c.ListenAddrs()
}

// produce writes n records "p<partition>-<i>" to each partition of topic
// from index from, with timestamps base+i seconds.
func produce(t *testing.T, seeds []string, topic string, parts []int32, from, n int, base time.Time) {
	t.Helper()
	var recs []*kgo.Record
	for _, p := range parts {
		for i := from; i < from+n; i++ {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Value: fmt.Appendf(nil, "p%d-%d", p, i),
				Timestamp: base.Add(time.Duration(i) * time.Second)})
		}
	}
	kafkatest.Produce(t, seeds, recs...)
}

// want lists the values produce writes.
func want(parts []int32, from, n int) []string {
	var out []string
	for _, p := range parts {
		for i := from; i < from+n; i++ {
			out = append(out, fmt.Sprintf("p%d-%d", p, i))
		}
	}
	return out
}

type collect[T any] struct{ got []T }

func (c *collect[T]) Collect(v T) { c.got = append(c.got, v) }

// open opens a reader or fails the test; it is closed at the end.
func open[T any](t *testing.T, s *Source[T], ctx weir.SourceContext, store knownStore) *reader[T] {
	t.Helper()
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	r, err := newReader(s, ctx, store)
	if err != nil {
		t.Fatalf("reader %d/%d: %v", ctx.Subtask, ctx.Parallelism, err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// drain reads r until done says so (or it ends), waiting on Ready; it
// fails the test after 20 s.
func drain[T any](t *testing.T, r *reader[T], out *collect[T], done func() bool) weir.ReadStatus {
	t.Helper()
	deadline := time.NewTimer(20 * time.Second)
	defer deadline.Stop()
	for !done() {
		st, err := r.ReadBatch(out)
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		switch st {
		case weir.EndOfInput:
			return st
		case weir.NothingAvailable:
			select {
			case <-r.Ready():
			case <-time.After(50 * time.Millisecond): // discovery happens off the Ready path too
			case <-deadline.C:
				t.Fatalf("read %d records, scenario not reached in 20s", len(out.got))
			}
		}
	}
	return weir.MoreAvailable
}

func snapshot[T any](t *testing.T, r *reader[T]) []split {
	t.Helper()
	bs, err := r.SnapshotSplits()
	if err != nil {
		t.Fatal(err)
	}
	var out []split
	for _, b := range bs {
		sp, err := decodeSplit(b)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, sp)
	}
	return out
}

// splitsString shows splits with their offsets (a split's String is its
// partition's).
func splitsString(sps []split) string {
	var b strings.Builder
	for _, sp := range sps {
		fmt.Fprintf(&b, "[%s next %d stop %d]", sp.tp, sp.next, sp.stop)
	}
	return b.String()
}

func sorted(v []string) []string { v = slices.Clone(v); slices.Sort(v); return v }

func TestStartingOffsets(t *testing.T) {
	_, seeds := cluster(t)
	kafkatest.CreateTopic(t, seeds, "so", 2)
	base := time.UnixMilli(1_700_000_000_000)
	produce(t, seeds, "so", []int32{0, 1}, 0, 10, base)
	adm := kadm.NewClient(kafkatest.Client(t, seeds))
	os := make(kadm.Offsets)
	os.AddOffset("so", 0, 3, -1)
	if r, err := adm.CommitOffsets(context.Background(), "g", os); err != nil || r.Error() != nil {
		t.Fatalf("commit: %v %v", err, r.Error())
	}
	past := make(kadm.Offsets) // past the log end
	past.AddOffset("so", 1, 50, -1)
	if r, err := adm.CommitOffsets(context.Background(), "past", past); err != nil || r.Error() != nil {
		t.Fatalf("commit: %v %v", err, r.Error())
	}
	for _, c := range []struct {
		init  OffsetsInitializer
		group string
		want  map[int32]int64
	}{
		{Earliest(), "", map[int32]int64{0: 0, 1: 0}},
		{OffsetsInitializer{}, "", map[int32]int64{0: 0, 1: 0}},
		{Latest(), "", map[int32]int64{0: 10, 1: 10}},
		{Committed(Earliest()), "g", map[int32]int64{0: 3, 1: 0}},
		{Committed(Latest()), "g", map[int32]int64{0: 3, 1: 10}},
		{Timestamp(base.Add(6 * time.Second)), "", map[int32]int64{0: 6, 1: 6}},
		{Timestamp(base.Add(time.Hour)), "", map[int32]int64{0: 10, 1: 10}},
		{Offsets(map[string]map[int32]int64{"so": {1: 7}}, Latest()), "", map[int32]int64{0: 10, 1: 7}},
		// Offsets past the log end start at the end.
		{Offsets(map[string]map[int32]int64{"so": {0: 20, 1: 7}}, Earliest()), "", map[int32]int64{0: 10, 1: 7}},
		{Committed(Earliest()), "past", map[int32]int64{0: 0, 1: 10}},
	} {
		s := NewSource(SourceOptions{Client: Client{Brokers: seeds}, Topics: []string{"so"}, GroupID: c.group,
			StartingOffsets: c.init, PartitionDiscoveryInterval: -1}, valueString)
		r := open(t, s, weir.SourceContext{Parallelism: 1}, nil)
		got := map[int32]int64{}
		for _, sp := range snapshot(t, r) {
			got[sp.partition] = sp.next
		}
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%s: starting offsets %v, want %v", c.init, got, c.want)
		}
		// Reading from them gives the records from there on.
		var wantVals []string
		for p, off := range c.want {
			wantVals = append(wantVals, want([]int32{p}, int(off), 10-int(off))...)
		}
		out := &collect[string]{}
		drain(t, r, out, func() bool { return len(out.got) >= len(wantVals) })
		if fmt.Sprint(sorted(out.got)) != fmt.Sprint(sorted(wantVals)) {
			t.Errorf("%s: read %v, want %v", c.init, sorted(out.got), sorted(wantVals))
		}
		r.Close()
	}
}

// An explicit offset past the log end starts at the end: the records
// produced afterwards are all read (the client would reset the offset
// out of range to the log start, and the reader skip the records below
// the offset asked for).
func TestExplicitOffsetPastTheEnd(t *testing.T) {
	_, seeds := cluster(t)
	kafkatest.CreateTopic(t, seeds, "pe", 1)
	produce(t, seeds, "pe", []int32{0}, 0, 5, time.Now())
	s := NewSource(SourceOptions{Client: Client{Brokers: seeds}, Topics: []string{"pe"},
		StartingOffsets: Offsets(map[string]map[int32]int64{"pe": {0: 20}}, Earliest()), PartitionDiscoveryInterval: -1}, valueString)
	r := open(t, s, weir.SourceContext{Parallelism: 1}, nil)
	if sps := snapshot(t, r); len(sps) != 1 || sps[0].next != 5 {
		t.Fatalf("splits %s, want pe/0 starting at the log end 5", splitsString(sps))
	}
	produce(t, seeds, "pe", []int32{0}, 5, 20, time.Now()) // offsets 5..24
	out := &collect[string]{}
	drain(t, r, out, func() bool { return len(out.got) >= 20 })
	if fmt.Sprint(out.got) != fmt.Sprint(want([]int32{0}, 5, 20)) {
		t.Fatalf("read %v, want the 20 records produced after the start", out.got)
	}
}

// With read_committed, Timestamp past every record starts at the last
// stable offset, not the high watermark: a transaction open at start is
// read once it commits.
func TestTimestampReadCommittedOpenTransaction(t *testing.T) {
	_, seeds := cluster(t)
	kafkatest.CreateTopic(t, seeds, "ts", 1)
	produce(t, seeds, "ts", []int32{0}, 0, 5, time.Now())
	txn := kafkatest.Client(t, seeds, kgo.TransactionalID("tx"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx := context.Background()
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := txn.ProduceSync(ctx, &kgo.Record{Topic: "ts", Partition: 0, Value: []byte("in-txn")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	s := NewSource(SourceOptions{Client: Client{Brokers: seeds}, Topics: []string{"ts"},
		StartingOffsets: Timestamp(time.Now().Add(time.Hour)), PartitionDiscoveryInterval: -1}, valueString)
	r := open(t, s, weir.SourceContext{Parallelism: 1}, nil)
	if sps := snapshot(t, r); len(sps) != 1 || sps[0].next != 5 {
		t.Fatalf("splits %s, want ts/0 starting at the last stable offset 5 (the open transaction's record)", splitsString(sps))
	}
	if err := txn.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	out := &collect[string]{}
	drain(t, r, out, func() bool { return len(out.got) >= 1 })
	if fmt.Sprint(out.got) != "[in-txn]" {
		t.Fatalf("read %v, want the committed transaction's record", out.got)
	}
}

// A restored split past its partition's end (the topic re-created) fails
// the restore, naming the partition and both offsets; one before the log
// start resumes there.
func TestRestorePastTheEndFails(t *testing.T) {
	_, seeds := cluster(t)
	kafkatest.CreateTopic(t, seeds, "rp", 2)
	produce(t, seeds, "rp", []int32{0, 1}, 0, 5, time.Now())
	s := NewSource(SourceOptions{Client: Client{Brokers: seeds}, Topics: []string{"rp"}, PartitionDiscoveryInterval: -1}, valueString)
	restored := [][]byte{split{tp: tp{"rp", 0}, next: 3, stop: noStop}.encode(), split{tp: tp{"rp", 1}, next: 20, stop: noStop}.encode()}
	r, err := s.CreateReader(weir.SourceContext{Parallelism: 1, RestoredSplits: restored})
	if err == nil {
		r.Close()
		t.Fatal("restored a split at offset 20 of a partition ending at 5")
	}
	for _, w := range []string{"rp/1", "offset 20", "end 5"} {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("error %q does not say %q", err, w)
		}
	}
	t.Log(err)
	// In range: the restore reads on from the checkpoint's offsets.
	restored[1] = split{tp: tp{"rp", 1}, next: 5, stop: noStop}.encode()
	rr := open(t, s, weir.SourceContext{Parallelism: 1, RestoredSplits: restored}, &memKnown{})
	produce(t, seeds, "rp", []int32{1}, 5, 2, time.Now())
	out := &collect[string]{}
	drain(t, rr, out, func() bool { return len(out.got) >= 4 })
	if got, w := sorted(out.got), sorted(append(want([]int32{0}, 3, 2), want([]int32{1}, 5, 2)...)); fmt.Sprint(got) != fmt.Sprint(w) {
		t.Fatalf("read %v, want %v", got, w)
	}
}

func TestBoundedReadsWhatIsThereAtStart(t *testing.T) {
	_, seeds := cluster(t)
	kafkatest.CreateTopic(t, seeds, "b", 3)
	produce(t, seeds, "b", []int32{0, 1, 2}, 0, 20, time.Now())
	// A committed and an aborted transaction on partition 1: the source
	// reads the first, skips the second, and still finds the end of the
	// partition behind their markers.
	txn := kafkatest.Client(t, seeds, kgo.TransactionalID("tx"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx := context.Background()
	for _, commit := range []bool{true, false} {
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		v := "txn-aborted"
		if commit {
			v = "txn-committed"
		}
		if err := txn.ProduceSync(ctx, &kgo.Record{Topic: "b", Partition: 1, Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := txn.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	src := NewSource(SourceOptions{Client: Client{Brokers: seeds}, Topics: []string{"b"}, Bounded: true}, valueString)
	var got []string
	var readers []*reader[string]
	for i := range 2 {
		readers = append(readers, open(t, src, weir.SourceContext{Subtask: i, Parallelism: 2}, nil))
	}
	// Records produced after the start are not read.
	produce(t, seeds, "b", []int32{0, 1, 2}, 20, 5, time.Now())
	for _, r := range readers {
		out := &collect[string]{}
		if st := drain(t, r, out, func() bool { return false }); st != weir.EndOfInput {
			t.Fatalf("bounded reader did not end: %v", st)
		}
		got = append(got, out.got...)
		if sps := snapshot(t, r); len(sps) != 0 {
			t.Fatalf("finished reader snapshots splits %v", sps)
		}
	}
	w := append(want([]int32{0, 1, 2}, 0, 20), "txn-committed")
	if fmt.Sprint(sorted(got)) != fmt.Sprint(sorted(w)) {
		t.Fatalf("bounded read %d records %v, want %d %v", len(got), sorted(got), len(w), sorted(w))
	}
	// A reader without partitions ends at once.
	r := open(t, src, weir.SourceContext{Subtask: 3, Parallelism: 4}, nil)
	if len(r.splits) == 0 {
		st, err := r.ReadBatch(&collect[string]{})
		if err != nil || st != weir.EndOfInput {
			t.Fatalf("reader without splits: %v %v", st, err)
		}
	}
}

// unionState simulates weir's union list state across a restore: every
// new subtask gets every element the old ones stored.
func unionState(stores []*memKnown) []*memKnown {
	var all []string
	for _, s := range stores {
		all = append(all, s.v...)
	}
	return []*memKnown{{v: all}}
}

func TestSnapshotRestoreAtAnotherParallelism(t *testing.T) {
	_, seeds := cluster(t)
	kafkatest.CreateTopic(t, seeds, "r", 4)
	const n = 1500
	produce(t, seeds, "r", []int32{0, 1, 2, 3}, 0, n, time.Now())
	src := NewSource(SourceOptions{Client: Client{Brokers: seeds}, Topics: []string{"r"}, PartitionDiscoveryInterval: -1}, valueString)

	// Run 1 at parallelism 2: one batch each (mid-topic), snapshot, stop.
	var first []string
	var splits [][]byte
	var stores []*memKnown
	for i := range 2 {
		st := &memKnown{}
		r := open(t, src, weir.SourceContext{Subtask: i, Parallelism: 2}, st)
		out := &collect[string]{}
		drain(t, r, out, func() bool { return len(out.got) > 0 })
		first = append(first, out.got...)
		bs, err := r.SnapshotSplits()
		if err != nil {
			t.Fatal(err)
		}
		splits = append(splits, bs...)
		stores = append(stores, st)
		r.Close()
	}
	if len(first) >= 4*n || len(splits) != 4 {
		t.Fatalf("run 1 read %d of %d records, %d splits: want a mid-topic snapshot of 4 splits", len(first), 4*n, len(splits))
	}
	// Run 2 at parallelism 3, splits dealt round robin as weir does.
	union := unionState(stores)[0]
	var second []string
	for i := range 3 {
		var mine [][]byte
		for k := i; k < len(splits); k += 3 {
			mine = append(mine, splits[k])
		}
		r := open(t, src, weir.SourceContext{Subtask: i, Parallelism: 3, RestoredSplits: append([][]byte{}, mine...)}, &memKnown{v: union.v})
		out := &collect[string]{}
		wantN := 0
		for _, sp := range snapshot(t, r) {
			wantN += n - int(sp.next)
		}
		drain(t, r, out, func() bool { return len(out.got) >= wantN })
		second = append(second, out.got...)
	}
	all := append(first, second...)
	if fmt.Sprint(sorted(all)) != fmt.Sprint(sorted(want([]int32{0, 1, 2, 3}, 0, n))) {
		t.Fatalf("runs read %d records (%d + %d), want each of %d exactly once", len(all), len(first), len(second), 4*n)
	}
}

func TestDeserializerErrorNamesTheRecord(t *testing.T) {
	_, seeds := cluster(t)
	kafkatest.CreateTopic(t, seeds, "d", 1)
	produce(t, seeds, "d", []int32{0}, 0, 5, time.Now())
	src := NewSource(SourceOptions{Client: Client{Brokers: seeds}, Topics: []string{"d"}, Bounded: true},
		func(r *Record) (int, error) {
			if string(r.Value) == "p0-3" {
				return 0, errors.New("not a number")
			}
			return strconv.Atoi(strings.TrimPrefix(string(r.Value), "p0-"))
		})
	r := open(t, src, weir.SourceContext{Parallelism: 1}, nil)
	out := &collect[int]{}
	deadline := time.Now().Add(20 * time.Second)
	var err error
	for err == nil && time.Now().Before(deadline) {
		var st weir.ReadStatus
		st, err = r.ReadBatch(out)
		if st == weir.NothingAvailable && err == nil {
			select {
			case <-r.Ready():
			case <-time.After(time.Second):
			}
		}
	}
	if err == nil || !strings.Contains(err.Error(), `topic "d" partition 0 at offset 3`) || !strings.Contains(err.Error(), "not a number") {
		t.Fatalf("error %v, want one naming topic d partition 0 offset 3", err)
	}
	if fmt.Sprint(out.got) != "[0 1 2]" {
		t.Fatalf("emitted %v before the bad record, want [0 1 2]", out.got)
	}
	if sps := snapshot(t, r); len(sps) != 1 || sps[0].next != 3 {
		t.Fatalf("snapshot after the error %v: want the bad record (offset 3) still to read", sps)
	}
}

func TestFetchErrorsAreRetried(t *testing.T) {
	c, seeds := cluster(t)
	kafkatest.CreateTopic(t, seeds, "f", 2)
	produce(t, seeds, "f", []int32{0, 1}, 0, 300, time.Now())
	h := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch}, Topic: "f", Err: kerr.NotLeaderForPartition, Count: 4})
	defer h.Remove()
	src := NewSource(SourceOptions{Client: Client{Brokers: seeds}, Topics: []string{"f"}, Bounded: true}, valueString)
	r := open(t, src, weir.SourceContext{Parallelism: 1}, nil)
	out := &collect[string]{}
	if st := drain(t, r, out, func() bool { return false }); st != weir.EndOfInput {
		t.Fatalf("status %v", st)
	}
	if h.Hits() == 0 {
		t.Fatal("the fetch fault never fired")
	}
	if fmt.Sprint(sorted(out.got)) != fmt.Sprint(sorted(want([]int32{0, 1}, 0, 300))) {
		t.Fatalf("read %d records through %d fetch faults, want each of 600 once", len(out.got), h.Hits())
	}
}

// readUntilErr reads r until ReadBatch fails and returns the error; it
// fails the test if r reads on without an error for 20 s.
func readUntilErr[T any](t *testing.T, r *reader[T], out *collect[T]) error {
	t.Helper()
	deadline := time.NewTimer(20 * time.Second)
	defer deadline.Stop()
	for {
		st, err := r.ReadBatch(out)
		switch {
		case err != nil:
			return err
		case st == weir.EndOfInput:
			t.Fatalf("the reader ended after %d records without an error", len(out.got))
		case st == weir.NothingAvailable:
			select {
			case <-r.Ready():
			case <-deadline.C:
				t.Fatalf("no error in 20s (%d records read)", len(out.got))
			}
		}
	}
}

// A fetch error franz-go does not retry fails ReadBatch, naming the
// partition, also when the fetch holds no records: a persistent
// TOPIC_AUTHORIZATION_FAILED, and a single UNKNOWN_SERVER_ERROR (kerr
// counts it non-retriable, so franz-go hands it over rather than retry).
func TestFatalFetchErrorFailsRead(t *testing.T) {
	for _, c := range []struct {
		err   *kerr.Error
		count int
	}{{kerr.TopicAuthorizationFailed, -1}, {kerr.UnknownServerError, 1}} {
		t.Run(c.err.Message, func(t *testing.T) {
			if kerr.IsRetriable(c.err) {
				t.Fatalf("%v is retriable: this test wants one franz-go gives up on", c.err)
			}
			cl, seeds := cluster(t)
			kafkatest.CreateTopic(t, seeds, "ff", 1)
			produce(t, seeds, "ff", []int32{0}, 0, 5, time.Now())
			// The error replaces the records: the fetch holds no record.
			h := cl.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch}, Topic: "ff", Err: c.err, Count: c.count})
			defer h.Remove()
			s := NewSource(SourceOptions{Client: Client{Brokers: seeds}, Topics: []string{"ff"}, PartitionDiscoveryInterval: -1}, valueString)
			r := open(t, s, weir.SourceContext{Parallelism: 1, Logger: quietLogger()}, nil)
			out := &collect[string]{}
			err := readUntilErr(t, r, out)
			if !errors.Is(err, c.err) || !strings.Contains(err.Error(), `topic "ff" partition 0`) {
				t.Fatalf("error %v, want %v naming topic ff partition 0", err, c.err)
			}
			if h.Hits() == 0 {
				t.Fatal("the fault never fired")
			}
			t.Logf("%d records read before: %v", len(out.got), err)
		})
	}
}

func TestPartitionDiscovery(t *testing.T) {
	_, seeds := cluster(t)
	kafkatest.CreateTopic(t, seeds, "disc", 2)
	// A metadata age of 50ms lets the client find the new partitions'
	// leaders at once (the default waits 5s between refreshes).
	fast := Client{Brokers: seeds, Opts: []kgo.Opt{kgo.MetadataMinAge(50 * time.Millisecond)}}
	src := NewSource(SourceOptions{Client: fast, TopicPattern: "di.c", PartitionDiscoveryInterval: 30 * time.Millisecond}, valueString)
	start := time.Now()
	stores := []*memKnown{{}, {}}
	readers := []*reader[string]{
		open(t, src, weir.SourceContext{Subtask: 0, Parallelism: 2}, stores[0]),
		open(t, src, weir.SourceContext{Subtask: 1, Parallelism: 2}, stores[1]),
	}
	adm := kadm.NewClient(kafkatest.Client(t, seeds))
	if r, err := adm.CreatePartitions(context.Background(), 2, "disc"); err != nil || r.Error() != nil {
		t.Fatalf("create partitions: %v %v", err, r.Error())
	}
	produce(t, seeds, "disc", []int32{0, 1, 2, 3}, 0, 10, time.Now())
	outs := []*collect[string]{{}, {}}
	for len(outs[0].got)+len(outs[1].got) < 40 {
		for i, r := range readers {
			st, err := r.ReadBatch(outs[i])
			if err != nil {
				t.Fatal(err)
			}
			if st == weir.NothingAvailable {
				select {
				case <-r.Ready():
				case <-time.After(20 * time.Millisecond):
				}
			}
		}
	}
	for i, r := range readers {
		for _, v := range outs[i].got {
			var p int32
			fmt.Sscanf(v, "p%d-", &p)
			if o := owner("disc", p, 2); o != i {
				t.Fatalf("subtask %d read %s of partition %d, owned by %d", i, v, p, o)
			}
		}
		if len(r.splits) == 0 {
			t.Fatalf("subtask %d holds no partition", i)
		}
	}
	t.Logf("read all at %v", time.Since(start))
	got := sorted(append(outs[0].got, outs[1].got...))
	if fmt.Sprint(got) != fmt.Sprint(sorted(want([]int32{0, 1, 2, 3}, 0, 10))) {
		t.Fatalf("read %v", got)
	}
	// Restore at parallelism 3: partitions go where the splits go, and
	// discovery (which runs at once after a restore) takes none again.
	var splits [][]byte
	for _, r := range readers {
		bs, err := r.SnapshotSplits()
		if err != nil {
			t.Fatal(err)
		}
		splits = append(splits, bs...)
		r.Close()
	}
	union := unionState(stores)[0]
	if len(splits) != 4 {
		t.Fatalf("%d splits, want 4", len(splits))
	}
	var restored []*reader[string]
	for i := range 3 {
		var mine [][]byte
		for k := i; k < len(splits); k += 3 {
			mine = append(mine, splits[k])
		}
		restored = append(restored, open(t, src, weir.SourceContext{Subtask: i, Parallelism: 3, RestoredSplits: mine}, &memKnown{v: union.v}))
	}
	for _, r := range restored {
		rounds := r.rounds.Load()
		deadline := time.Now().Add(10 * time.Second)
		for r.rounds.Load() < rounds+3 {
			if time.Now().After(deadline) {
				t.Fatal("no discovery round after the restore")
			}
			r.ReadBatch(&collect[string]{})
			time.Sleep(5 * time.Millisecond)
		}
		r.ReadBatch(&collect[string]{})
	}
	t.Logf("rounds done at %v", time.Since(start))
	total := 0
	for i, r := range restored {
		total += len(r.splits)
		for k := range r.splits {
			found := false
			for j := i; j < len(splits); j += 3 {
				sp, _ := decodeSplit(splits[j])
				found = found || sp.tp == k
			}
			if !found {
				t.Fatalf("subtask %d took partition %s again after the restore", i, k)
			}
		}
	}
	if total != 4 {
		t.Fatalf("%d partitions held after the restore, want 4", total)
	}
}

func quietLogger() *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	return slog.New(slog.DiscardHandler)
}

// Offsets are committed to the group when a checkpoint completes: those
// of that checkpoint's snapshot, also when a later checkpoint's snapshot
// was taken already (overlapping checkpoints).
func TestOffsetsCommittedOnCheckpointComplete(t *testing.T) {
	_, seeds := cluster(t)
	kafkatest.CreateTopic(t, seeds, "c", 2)
	produce(t, seeds, "c", []int32{0, 1}, 0, 30, time.Now())
	src := NewSource(SourceOptions{Client: Client{Brokers: seeds}, Topics: []string{"c"}, GroupID: "mon", PartitionDiscoveryInterval: -1}, valueString)
	r := open(t, src, weir.SourceContext{Parallelism: 1}, nil)
	out := &collect[string]{}
	drain(t, r, out, func() bool { return len(out.got) == 60 })
	if _, err := r.SnapshotSplitsFor(7); err != nil {
		t.Fatal(err)
	}
	produce(t, seeds, "c", []int32{0, 1}, 30, 10, time.Now())
	drain(t, r, out, func() bool { return len(out.got) == 80 })
	if _, err := r.SnapshotSplitsFor(8); err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(kafkatest.Client(t, seeds))
	awaitCommitted := func(want int64) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			resp, err := adm.FetchOffsets(context.Background(), "mon")
			if err == nil && resp.Error() == nil {
				o0, _ := resp.Lookup("c", 0)
				o1, _ := resp.Lookup("c", 1)
				if o0.At == want && o1.At == want {
					return
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("group offsets never reached %d/%d: %v %v", want, want, resp, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if err := r.NotifyCheckpointComplete(7); err != nil {
		t.Fatal(err)
	}
	awaitCommitted(30) // checkpoint 7's offsets, not checkpoint 8's
	if err := r.NotifyCheckpointComplete(8); err != nil {
		t.Fatal(err)
	}
	awaitCommitted(40)
	// A new source starting from the committed offsets reads what comes
	// after them only.
	produce(t, seeds, "c", []int32{0, 1}, 40, 2, time.Now())
	src2 := NewSource(SourceOptions{Client: Client{Brokers: seeds}, Topics: []string{"c"}, GroupID: "mon",
		StartingOffsets: Committed(Earliest()), Bounded: true}, valueString)
	r2 := open(t, src2, weir.SourceContext{Parallelism: 1}, nil)
	out2 := &collect[string]{}
	drain(t, r2, out2, func() bool { return false })
	if fmt.Sprint(sorted(out2.got)) != fmt.Sprint(sorted(want([]int32{0, 1}, 40, 2))) {
		t.Fatalf("read %v after the committed offsets", out2.got)
	}
}

func TestMissingTopicFailsClearly(t *testing.T) {
	_, seeds := cluster(t)
	src := NewSource(SourceOptions{Client: Client{Brokers: seeds}, Topics: []string{"nope"}}, valueString)
	r, err := src.CreateReader(weir.SourceContext{Parallelism: 1})
	if err == nil || !strings.Contains(err.Error(), `topic "nope"`) {
		t.Fatalf("error %v, want one naming the missing topic", err)
	}
	if r != nil { // a typed nil *reader would be a non-nil interface
		t.Fatalf("CreateReader returned reader %#v with its error, want nil", r)
	}
	t.Log(err)
}

// TestMain checks that readers join their goroutines and close their
// clients.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// commitRecorder stands in for the group commit: it records the offset
// of partition c/0 of every commit, the most commits in flight at once,
// and holds the first commit until release is closed.
type commitRecorder struct {
	started  chan struct{} // the first commit started
	release  chan struct{}
	mu       sync.Mutex
	began    bool
	inflight int
	most     int
	done     []int64 // offsets committed, in order of completion
}

func newCommitRecorder() *commitRecorder {
	return &commitRecorder{started: make(chan struct{}), release: make(chan struct{})}
}

func (c *commitRecorder) commit(ctx context.Context, os kadm.Offsets) error {
	o, _ := os.Lookup("c", 0)
	c.mu.Lock()
	c.inflight++
	c.most = max(c.most, c.inflight)
	first := !c.began
	c.began = true
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.inflight--
		c.done = append(c.done, o.At)
		c.mu.Unlock()
	}()
	if first {
		close(c.started)
		select {
		case <-c.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func (c *commitRecorder) committed() []int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.done)
}

// snapshots reads 10 more records of partition c/0 and snapshots for
// checkpoint id, for each id.
func snapshots(t *testing.T, r *reader[string], seeds []string, ids ...int64) {
	t.Helper()
	out := &collect[string]{}
	for i, id := range ids {
		produce(t, seeds, "c", []int32{0}, 10*i, 10, time.Now())
		drain(t, r, out, func() bool { return len(out.got) == 10*(i+1) })
		if _, err := r.SnapshotSplitsFor(id); err != nil {
			t.Fatal(err)
		}
	}
}

// Group commits never go backwards: one commit at a time, the newest
// offsets; those of checkpoints that completed while a commit was slow
// are replaced by the newest.
func TestGroupCommitsInOrder(t *testing.T) {
	_, seeds := cluster(t)
	kafkatest.CreateTopic(t, seeds, "c", 1)
	src := NewSource(SourceOptions{Client: Client{Brokers: seeds}, Topics: []string{"c"}, GroupID: "mon", PartitionDiscoveryInterval: -1}, valueString)
	r := open(t, src, weir.SourceContext{Parallelism: 1}, nil)
	rec := newCommitRecorder()
	r.commitFn = rec.commit
	snapshots(t, r, seeds, 1, 2, 3) // offsets 10, 20, 30
	if err := r.NotifyCheckpointComplete(1); err != nil {
		t.Fatal(err)
	}
	select {
	case <-rec.started:
	case <-time.After(10 * time.Second):
		t.Fatal("checkpoint 1's commit never started")
	}
	// Checkpoints 2 and 3 complete while 1's commit hangs. No other
	// commit may start meanwhile; give one (a bug) 300ms to show.
	for _, id := range []int64{2, 3} {
		if err := r.NotifyCheckpointComplete(id); err != nil {
			t.Fatal(err)
		}
	}
	for wait := time.Now().Add(300 * time.Millisecond); time.Now().Before(wait); time.Sleep(5 * time.Millisecond) {
		rec.mu.Lock()
		n := rec.inflight
		rec.mu.Unlock()
		if n > 1 {
			break
		}
	}
	close(rec.release)
	deadline := time.Now().Add(10 * time.Second)
	for !slices.Contains(rec.committed(), 30) {
		if time.Now().After(deadline) {
			t.Fatalf("checkpoint 3's offsets never committed; committed %v", rec.committed())
		}
		time.Sleep(5 * time.Millisecond)
	}
	r.Close()
	if got := rec.committed(); fmt.Sprint(got) != "[10 30]" || rec.most != 1 {
		t.Fatalf("commits %v with up to %d at once, want [10 30] one at a time", got, rec.most)
	}
}

// Close lets the last commit finish, for a bounded time.
func TestCloseGivesTheLastCommitAGrace(t *testing.T) {
	_, seeds := cluster(t)
	kafkatest.CreateTopic(t, seeds, "c", 1)
	src := NewSource(SourceOptions{Client: Client{Brokers: seeds}, Topics: []string{"c"}, GroupID: "mon", PartitionDiscoveryInterval: -1}, valueString)

	// A commit notified just before Close lands (on kfake).
	r := open(t, src, weir.SourceContext{Parallelism: 1}, nil)
	snapshots(t, r, seeds, 1)
	if err := r.NotifyCheckpointComplete(1); err != nil {
		t.Fatal(err)
	}
	r.Close()
	adm := kadm.NewClient(kafkatest.Client(t, seeds))
	resp, err := adm.FetchOffsets(context.Background(), "mon")
	if err != nil || resp.Error() != nil {
		t.Fatalf("the commit notified before Close never landed: fetch the group's offsets: %v %v", err, resp.Error())
	}
	if o, _ := resp.Lookup("c", 0); o.At != 10 {
		t.Fatalf("group offset %d after Close, want checkpoint 1's 10", o.At)
	}

	// A commit that hangs is canceled after the grace.
	src = NewSource(SourceOptions{Client: Client{Brokers: seeds}, Topics: []string{"c"}, GroupID: "mon",
		StartingOffsets: Latest(), PartitionDiscoveryInterval: -1}, valueString)
	r = open(t, src, weir.SourceContext{Parallelism: 1}, nil)
	snapshots(t, r, seeds, 1)
	rec := newCommitRecorder() // never released
	r.commitFn, r.commitGrace = rec.commit, 100*time.Millisecond
	if err := r.NotifyCheckpointComplete(1); err != nil {
		t.Fatal(err)
	}
	<-rec.started
	closed := make(chan struct{})
	go func() { r.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close waits on a hanging commit")
	}
	if got := rec.committed(); fmt.Sprint(got) != "[20]" {
		t.Fatalf("commits %v, want the hanging one returned (canceled)", got)
	}
}

// The deserializer sees each record's key, value, headers and timestamp,
// also across partitions and when the record before had headers and this
// one has none (the source reuses one Record).
func TestDeserializerSeesKeyValueHeadersTimestamp(t *testing.T) {
	_, seeds := cluster(t)
	kafkatest.CreateTopic(t, seeds, "h", 2)
	ts := time.UnixMilli(1_700_000_000_000)
	kafkatest.Produce(t, seeds,
		&kgo.Record{Topic: "h", Partition: 0, Key: []byte("k1"), Value: []byte("v1"), Timestamp: ts,
			Headers: []kgo.RecordHeader{{Key: "a", Value: []byte("1")}, {Key: "b", Value: []byte("2")}}},
		&kgo.Record{Topic: "h", Partition: 0, Key: []byte("k2"), Value: []byte("v2"), Timestamp: ts.Add(time.Second)},
		&kgo.Record{Topic: "h", Partition: 1, Value: []byte("v3"), Timestamp: ts.Add(2 * time.Second),
			Headers: []kgo.RecordHeader{{Key: "c", Value: []byte("3")}}})
	src := NewSource(SourceOptions{Client: Client{Brokers: seeds}, Topics: []string{"h"}, Bounded: true}, func(r *Record) (string, error) {
		s := fmt.Sprintf("%s/%d@%d %s=%s t%d", r.Topic, r.Partition, r.Offset, r.Key, r.Value, r.Timestamp.UnixMilli()-ts.UnixMilli())
		if r.Headers == nil {
			s += " nil"
		}
		for _, h := range r.Headers {
			s += " " + h.Key + ":" + string(h.Value)
		}
		return s, nil
	})
	r := open(t, src, weir.SourceContext{Parallelism: 1}, nil)
	out := &collect[string]{}
	drain(t, r, out, func() bool { return false })
	want := []string{"h/0@0 k1=v1 t0 a:1 b:2", "h/0@1 k2=v2 t1000 nil", "h/1@0 =v3 t2000 c:3"}
	if got := sorted(out.got); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("the deserializer saw %q, want %q", got, want)
	}
}
