package kafka

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weirstream/weir"
	"github.com/weirstream/weir/internal/kafkatest"
)

func testLogger() *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// stringRecord serializes a string as a record value.
func stringRecord(s string) (*Record, error) { return &Record{Value: []byte(s)}, nil }

// eoSink returns an exactly-once sink of strings to topic.
func eoSink(seeds []string, topic, prefix string, edit ...func(*SinkOptions)) *tpcSink[string] {
	o := SinkOptions{Client: Client{Brokers: seeds}, Topic: topic, Delivery: ExactlyOnce, TransactionalIDPrefix: prefix}
	for _, e := range edit {
		e(&o)
	}
	return NewSink(o, stringRecord).(*tpcSink[string])
}

func sinkCtx(run string, subtask, parallelism int) weir.SinkContext {
	return weir.SinkContext{Subtask: subtask, Parallelism: parallelism, Operator: "sink", RunID: run, Logger: testLogger()}
}

// newWriter creates the writer of sink s for ctx.
func newWriter(t *testing.T, s weir.Sink[string], ctx weir.SinkContext) *writer[string] {
	t.Helper()
	w, err := s.CreateWriter(ctx)
	if err != nil {
		t.Fatalf("create writer: %v", err)
	}
	return w.(*writer[string])
}

func write(t *testing.T, w *writer[string], vs ...string) {
	t.Helper()
	for _, v := range vs {
		if err := w.Write(v); err != nil {
			t.Fatalf("write %q: %v", v, err)
		}
	}
}

func preCommit(t *testing.T, w *writer[string], id int64) []byte {
	t.Helper()
	h, err := w.PreCommit(id)
	if err != nil {
		t.Fatalf("pre-commit %d: %v", id, err)
	}
	return h
}

func commit(t *testing.T, s weir.TwoPhaseCommitSink[string], ctx weir.SinkContext, h []byte) {
	t.Helper()
	if err := s.Commit(ctx, h); err != nil {
		t.Fatalf("commit: %v", err)
	}
}

// committed returns the values of topic, read_committed, sorted.
func committed(t *testing.T, seeds []string, topic string) []string {
	t.Helper()
	var out []string
	for _, r := range kafkatest.ReadCommitted(t, seeds, topic) {
		out = append(out, string(r.Value))
	}
	slices.Sort(out)
	return out
}

// expect checks that topic holds want, read_committed. On a real broker
// a committed transaction's markers reach its partitions after EndTxn
// answered, so a read right after a commit may miss its records (kfake
// writes them at once): expect reads again until it sees want or 20 s
// passed, which only ever waits for missing records, so a duplicate
// still fails.
func expect(t *testing.T, seeds []string, topic string, want ...string) {
	t.Helper()
	slices.Sort(want)
	deadline := time.Now().Add(20 * time.Second)
	for {
		got := committed(t, seeds, topic)
		if slices.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s holds %q, want %q", topic, got, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// ongoing returns the transactional ids with prefix whose transaction is
// open.
func ongoing(t *testing.T, seeds []string, prefix string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := kadm.NewClient(kafkatest.Client(t, seeds)).ListTransactions(ctx, nil, []string{"Ongoing"})
	if err != nil {
		t.Fatalf("list transactions: %v", err)
	}
	var out []string
	for _, id := range l.TransactionalIDs() {
		if prefix == "" || strings.HasPrefix(id, prefix+"-") {
			out = append(out, id)
		}
	}
	return out
}

func sinkCluster(t *testing.T, topic string, opts ...kfake.Opt) []string {
	t.Helper()
	c := kafkatest.Start(t, opts...)
	seeds := c.ListenAddrs()
	kafkatest.CreateTopic(t, seeds, topic, 3)
	return seeds
}

// Records of an exactly-once writer are invisible until the commit of
// their checkpoint, visible once after it, also when the same handle is
// committed again; the open transaction of a closed writer is aborted.
func TestExactlyOnceCommitCycle(t *testing.T) {
	t.Parallel()
	seeds := sinkCluster(t, "out")
	s := eoSink(seeds, "out", "cycle")
	ctx := sinkCtx("r1", 0, 1)
	w := newWriter(t, s, ctx)
	write(t, w, "a", "b")
	h1 := preCommit(t, w, 1)
	write(t, w, "c")
	expect(t, seeds, "out")
	if n := w.sent.Count(); n != 3 {
		t.Errorf("numRecordsSend %d, want 3", n)
	}
	commit(t, s, ctx, h1)
	expect(t, seeds, "out", "a", "b")
	commit(t, s, ctx, h1)
	h2 := preCommit(t, w, 2)
	// A barrier without records pre-commits nothing: a marker.
	h3 := preCommit(t, w, 3)
	if mh, err := decodeHandle(h3); err != nil || !mh.marker || mh.n != 2 {
		t.Fatalf("handle of an empty checkpoint: %+v, %v; want a marker of transaction 2", mh, err)
	}
	commit(t, s, ctx, h3)
	write(t, w, "d")
	commit(t, s, ctx, h2)
	commit(t, s, ctx, h2)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	expect(t, seeds, "out", "a", "b", "c")
	if o := ongoing(t, seeds, "cycle"); len(o) != 0 {
		t.Fatalf("transactions %v still open after Close", o)
	}
	// And once more by producer id, as a restore would.
	commit(t, eoSink(seeds, "out", "cycle"), sinkCtx("r2", 0, 1), h1)
	expect(t, seeds, "out", "a", "b", "c")
}

// A pre-committed transaction is committed from another process (a sink
// without its client), twice.
func TestCommitFromAnotherProcess(t *testing.T) {
	t.Parallel()
	seeds := sinkCluster(t, "out")
	w := newWriter(t, eoSink(seeds, "out", "other"), sinkCtx("r1", 0, 1))
	write(t, w, "x", "y", "z")
	h := preCommit(t, w, 1)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	expect(t, seeds, "out")
	other := eoSink(seeds, "out", "other")
	commit(t, other, sinkCtx("r2", 0, 1), h)
	commit(t, other, sinkCtx("r2", 0, 1), h)
	expect(t, seeds, "out", "x", "y", "z")
}

// Restoring twice from the same checkpoint commits its transaction each
// time and aborts what the earlier runs left open: every record once. The
// writer of the first run, a zombie that still runs, is fenced.
func TestRestoreTwiceFromSameCheckpoint(t *testing.T) {
	t.Parallel()
	seeds := sinkCluster(t, "out")
	// Run 1: checkpoint 1 completes but the crash comes before its
	// commit; checkpoint 2 is pre-committed, never completed; a third
	// transaction is open.
	w1 := newWriter(t, eoSink(seeds, "out", "twice"), sinkCtx("r1", 0, 1))
	write(t, w1, "1", "2", "3")
	h1 := preCommit(t, w1, 1)
	write(t, w1, "4", "5")
	preCommit(t, w1, 2)
	write(t, w1, "6")
	if err := w1.flush(); err != nil {
		t.Fatal(err)
	}

	restore := func(run string) (*tpcSink[string], *writer[string], weir.SinkContext) {
		s := eoSink(seeds, "out", "twice") // another process
		ctx := sinkCtx(run, 0, 1)
		commit(t, s, ctx, h1)
		return s, newWriter(t, s, ctx), ctx
	}
	// Run 2 restores checkpoint 1, writes checkpoint 2 again and fails
	// before it completes.
	_, w2, _ := restore("r2")
	expect(t, seeds, "out", "1", "2", "3")
	if o := ongoing(t, seeds, "twice"); len(o) != 0 {
		t.Fatalf("run 2 left transactions %v of run 1 open", o)
	}
	write(t, w2, "4", "5")
	preCommit(t, w2, 2)
	write(t, w2, "6")
	if err := w2.flush(); err != nil {
		t.Fatal(err)
	}
	// Run 3 restores checkpoint 1 again and completes.
	s3, w3, ctx3 := restore("r3")
	expect(t, seeds, "out", "1", "2", "3")
	write(t, w3, "4", "5", "6")
	commit(t, s3, ctx3, preCommit(t, w3, 2))
	write(t, w3, "7")
	commit(t, s3, ctx3, preCommit(t, w3, 3))
	expect(t, seeds, "out", "1", "2", "3", "4", "5", "6", "7")
	if o := ongoing(t, seeds, "twice"); len(o) != 0 {
		t.Fatalf("transactions %v still open", o)
	}
	// The zombies of runs 1 and 2 fail, saying why.
	for i, w := range []*writer[string]{w1, w2} {
		_ = w.Write("zombie")
		_, err := w.PreCommit(9)
		if err == nil || !strings.Contains(err.Error(), "transactional id twice-0-") || !strings.Contains(err.Error(), "another producer uses it") {
			t.Errorf("zombie of run %d: pre-commit: %v, want an error saying another producer uses its transactional id", i+1, err)
		}
		w.Close()
	}
	expect(t, seeds, "out", "1", "2", "3", "4", "5", "6", "7")
}

// A restore with fewer subtasks aborts the open transactions of the
// earlier subtasks it took over, and commits theirs; a fresh start with
// the prefix aborts those of an earlier run with more subtasks too.
func TestLingeringOfLargerParallelismAborted(t *testing.T) {
	t.Parallel()
	seeds := sinkCluster(t, "out")
	run1 := func(prefix string) [][]byte {
		s := eoSink(seeds, "out", prefix)
		var hs [][]byte
		for sub := range 3 {
			w := newWriter(t, s, sinkCtx("r1", sub, 3))
			write(t, w, fmt.Sprintf("%s-%d-a", prefix, sub))
			hs = append(hs, preCommit(t, w, 1))
			write(t, w, fmt.Sprintf("%s-%d-b", prefix, sub))
			preCommit(t, w, 2)
			write(t, w, fmt.Sprintf("%s-%d-c", prefix, sub))
			if err := w.flush(); err != nil {
				t.Fatal(err)
			}
			// No Close: the process died.
			t.Cleanup(func() { w.Close() })
		}
		if o := ongoing(t, seeds, prefix); len(o) != 9 {
			t.Fatalf("run 1 has %d open transactions %v, want 9", len(o), o)
		}
		return hs
	}

	// Restore checkpoint 1 with one subtask.
	hs := run1("shrink")
	s := eoSink(seeds, "out", "shrink")
	ctx := sinkCtx("r2", 0, 1)
	for _, h := range hs {
		commit(t, s, ctx, h)
	}
	w := newWriter(t, s, ctx)
	if o := ongoing(t, seeds, "shrink"); len(o) != 0 {
		t.Fatalf("transactions %v of the earlier subtasks still open", o)
	}
	if w.next != 2 {
		t.Errorf("the restored writer's first transaction is %d, want 2 (after the restored 1, reusing the aborted 2's id)", w.next)
	}
	w.Close()

	// Fresh start (no checkpoint) with one subtask.
	run1("fresh")
	w = newWriter(t, eoSink(seeds, "out", "fresh"), sinkCtx("r2", 0, 1))
	w.Close()
	if o := ongoing(t, seeds, "fresh"); len(o) != 0 {
		t.Fatalf("transactions %v of the earlier subtasks still open after a fresh start", o)
	}
	expect(t, seeds, "out", "shrink-0-a", "shrink-1-a", "shrink-2-a")
}

// Faults: produce errors that franz-go retries (one after the append), EndTxn answered with
// retriable errors (CONCURRENT_TRANSACTIONS, a load in progress, a
// timeout after the commit happened), in the commit by client and by
// producer id: nothing lost, nothing twice. A produce error that is not
// retriable fails the pre-commit loudly.
func TestExactlyOnceUnderFaults(t *testing.T) {
	t.Parallel()
	c := kafkatest.Start(t)
	seeds := c.ListenAddrs()
	kafkatest.CreateTopic(t, seeds, "out", 3)
	// Retry soon: kgo waits seconds before it refreshes metadata.
	fast := func(o *SinkOptions) {
		o.Opts = []kgo.Opt{kgo.MetadataMinAge(20 * time.Millisecond), kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond })}
	}
	s := eoSink(seeds, "out", "faults", fast)
	ctx := sinkCtx("r1", 0, 1)
	w := newWriter(t, s, ctx)

	// A timeout answered after the append (the retry is deduplicated by
	// sequence number), and a refusal before it.
	produce := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "out", Err: kerr.RequestTimedOut, Count: 2},
		kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "out", Err: kerr.NotEnoughReplicas, Count: 1})
	write(t, w, "p1", "p2", "p3", "p4")
	h1 := preCommit(t, w, 1)
	if produce.Hits() != 3 {
		t.Fatalf("produce fault hit %d times, want 3", produce.Hits())
	}
	end := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.EndTxn}, Err: kerr.ConcurrentTransactions, Count: 2},
		kfake.Fault{Keys: []kmsg.Key{kmsg.EndTxn}, Err: kerr.CoordinatorLoadInProgress, Count: 2})
	commit(t, s, ctx, h1)
	if end.Hits() != 4 {
		t.Fatalf("EndTxn faults hit %d times, want 4", end.Hits())
	}
	expect(t, seeds, "out", "p1", "p2", "p3", "p4")

	// The commit by producer id, with a timeout answered after the
	// coordinator committed: the retry finds it committed.
	write(t, w, "q1", "q2")
	h2 := preCommit(t, w, 2)
	w.Close()
	end = c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.EndTxn}, Err: kerr.RequestTimedOut, Count: 1},
		kfake.Fault{Keys: []kmsg.Key{kmsg.EndTxn}, Err: kerr.ConcurrentTransactions, Count: 2})
	other := eoSink(seeds, "out", "faults", fast)
	commit(t, other, sinkCtx("r2", 0, 1), h2)
	if end.Hits() != 3 {
		t.Fatalf("EndTxn faults hit %d times, want 3", end.Hits())
	}
	expect(t, seeds, "out", "p1", "p2", "p3", "p4", "q1", "q2")

	// A produce error no retry helps fails the task at the barrier.
	w = newWriter(t, other, sinkCtx("r2", 0, 1))
	defer w.Close()
	c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "out", Err: kerr.InvalidRecord, Count: -1})
	write(t, w, "lost")
	_, err := w.PreCommit(3)
	if n := w.sendErrors.Count(); n != 1 {
		t.Errorf("numRecordsSendErrors %d, want 1", n)
	}
	if err == nil || !errors.Is(err, kerr.InvalidRecord) || !strings.Contains(err.Error(), "faults-0-") {
		t.Fatalf("pre-commit after a failed produce: %v, want INVALID_RECORD naming the transaction", err)
	}
}

// A transaction the brokers aborted (it outlived its timeout) is never
// reported committed: the commit fails, naming it, by client and by
// producer id.
func TestTimedOutTransactionFailsCommit(t *testing.T) {
	t.Parallel()
	seeds := sinkCluster(t, "out")
	s := eoSink(seeds, "out", "timeout", func(o *SinkOptions) { o.TransactionTimeout = 300 * time.Millisecond })
	ctx := sinkCtx("r1", 0, 1)
	w := newWriter(t, s, ctx)
	defer w.Close()
	write(t, w, "a")
	h1 := preCommit(t, w, 1)
	write(t, w, "b")
	h2 := preCommit(t, w, 2)
	// Wait until the brokers aborted both.
	deadline := time.Now().Add(30 * time.Second)
	for len(ongoing(t, seeds, "timeout")) > 0 {
		if time.Now().After(deadline) {
			t.Fatal("the brokers never aborted the timed-out transactions")
		}
		time.Sleep(50 * time.Millisecond)
	}
	for name, try := range map[string]func() error{
		"by client":      func() error { return s.Commit(ctx, h1) },
		"by producer id": func() error { return eoSink(seeds, "out", "timeout").Commit(sinkCtx("r2", 0, 1), h2) },
	} {
		err := try()
		if !errors.Is(err, ErrTxnLost) || !strings.Contains(err.Error(), "timeout-0-") {
			t.Errorf("commit %s of a timed-out transaction: %v, want ErrTxnLost naming it", name, err)
		}
	}
	expect(t, seeds, "out")
}

// At-least-once writers flush at the barrier: every record is in the
// topic when PreCommit returns; None writers do not wait.
func TestAtLeastOnceFlushesAtBarrier(t *testing.T) {
	t.Parallel()
	seeds := sinkCluster(t, "out")
	s := NewSink(SinkOptions{Client: Client{Brokers: seeds}, Topic: "out"}, stringRecord)
	tpc, ok := s.(weir.TwoPhaseCommitSink[string])
	if !ok {
		t.Fatal("an at-least-once sink is not a TwoPhaseCommitSink")
	}
	w := newWriter(t, tpc, sinkCtx("r1", 0, 1))
	write(t, w, "a", "b", "c")
	if h := preCommit(t, w, 1); h != nil {
		t.Fatalf("at-least-once pre-commit returned a transaction %x", h)
	}
	expect(t, seeds, "out", "a", "b", "c")
	w.Close()

	none := NewSink(SinkOptions{Client: Client{Brokers: seeds}, Topic: "out", Delivery: None}, stringRecord)
	if _, ok := none.(weir.TwoPhaseCommitSink[string]); ok {
		t.Fatal("a sink without guarantee is a TwoPhaseCommitSink")
	}
	w = newWriter(t, none, sinkCtx("r1", 0, 1))
	write(t, w, "d")
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	expect(t, seeds, "out", "a", "b", "c", "d")
}

func TestSinkBadOptions(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		o    SinkOptions
		want []string
	}{
		{SinkOptions{Delivery: ExactlyOnce}, []string{"no brokers", "needs a TransactionalIDPrefix"}},
		{SinkOptions{Client: Client{Brokers: []string{"localhost"}}, Delivery: DeliveryGuarantee(7)},
			[]string{`broker "localhost": want host:port`, "unknown delivery guarantee 7"}},
		{SinkOptions{Client: Client{Brokers: []string{"h:1"}}, Delivery: ExactlyOnce, TransactionalIDPrefix: "p", TransactionTimeout: -time.Second},
			[]string{"TransactionTimeout (transaction.timeout.ms) -1s"}},
	} {
		err := c.o.Validate()
		if err == nil {
			t.Errorf("%+v: valid", c.o)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%+v: %v, want it to say %q", c.o, err, w)
			}
		}
		if _, err := NewSink(c.o, stringRecord).CreateWriter(sinkCtx("r", 0, 1)); err == nil {
			t.Errorf("%+v: writer created", c.o)
		}
	}
	eo := SinkOptions{Client: Client{Brokers: []string{"h:1"}}, Delivery: ExactlyOnce, TransactionalIDPrefix: "p", TransactionTimeout: time.Minute}
	if err := eo.checkInterval(time.Minute); err == nil || !strings.Contains(err.Error(),
		"TransactionTimeout (transaction.timeout.ms) 1m0s must exceed the checkpoint interval (execution.checkpointing.interval) 1m0s") {
		t.Errorf("timeout = checkpoint interval: %v", err)
	}
	if err := eo.checkInterval(59 * time.Second); err != nil {
		t.Errorf("timeout > checkpoint interval: %v", err)
	}
	if err := eo.checkInterval(0); err != nil {
		t.Errorf("checkpointing off: %v", err)
	}
	ctx := sinkCtx("r", 0, 1)
	ctx.CheckpointInterval = 20 * time.Minute
	if _, err := NewSink(SinkOptions{Client: Client{Brokers: []string{"h:1"}}, Delivery: ExactlyOnce, TransactionalIDPrefix: "p"},
		stringRecord).CreateWriter(ctx); err == nil || !strings.Contains(err.Error(), "TransactionTimeout (transaction.timeout.ms) 15m0s must exceed the checkpoint interval (execution.checkpointing.interval) 20m0s") {
		t.Errorf("default timeout under a 20 min checkpoint interval: %v", err)
	}
	if err := (SinkOptions{Client: Client{Brokers: []string{"h:1"}}}).Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
	for s, want := range map[string]DeliveryGuarantee{"none": None, "at-least-once": AtLeastOnce, "EXACTLY_ONCE": ExactlyOnce} {
		if got, err := ParseDeliveryGuarantee(s); err != nil || got != want {
			t.Errorf("ParseDeliveryGuarantee(%q) = %v, %v; want %v", s, got, err, want)
		}
		if want.String() != strings.ReplaceAll(strings.ToLower(s), "_", "-") {
			t.Errorf("%v.String() = %q", want, want.String())
		}
	}
	if _, err := ParseDeliveryGuarantee("twice"); err == nil || !strings.Contains(err.Error(), `"twice": want none, at-least-once or exactly-once`) {
		t.Errorf("ParseDeliveryGuarantee(twice): %v", err)
	}
}

func TestHandleEncoding(t *testing.T) {
	t.Parallel()
	for _, h := range []txnHandle{
		{marker: true, subtask: 3, n: 0},
		{marker: true, subtask: 0, n: 1 << 40},
		{subtask: 7, n: 12, producer: 1<<62 + 5, epoch: 300, id: "p-7-12"},
	} {
		got, err := decodeHandle(h.encode())
		if err != nil || got != h {
			t.Errorf("round trip of %+v: %+v, %v", h, got, err)
		}
	}
	for _, b := range [][]byte{nil, {2, 1}, {1, 9}, {1, 1, 0, 1, 0}, {1, 0, 0, 0, 9}} {
		if _, err := decodeHandle(b); !errors.Is(err, errBadHandle) {
			t.Errorf("decode %x: %v, want errBadHandle", b, err)
		}
	}
}
