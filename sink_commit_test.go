package weir

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/task"
)

// memTxnSink is a TwoPhaseCommitSink whose transactions live in memory and
// behave like the file sink's pending files: a transaction is pending after
// PreCommit, synced after SyncPreCommitted, and committed (gone from the
// pending place) after Commit, so a sync after the commit fails as the
// file sink's open of a renamed file does. It records whatever breaks the
// order PreCommit < SyncPreCommitted < Commit. Safe for concurrent use:
// the sink runtime syncs on other goroutines.
type memTxnSink struct {
	mu        sync.Mutex
	seq       int
	open      []int
	txns      map[string]*memTxn
	committed []int // records of committed transactions, in commit order
	// failSync makes SyncPreCommitted of that transaction fail.
	failSync map[string]error
	// violations describes every commit of a transaction not synced.
	violations []string
	events     []string
}

type memTxn struct {
	records []int
	synced  bool
	done    bool // committed
	syncs   int
}

func newMemTxnSink() *memTxnSink {
	return &memTxnSink{txns: map[string]*memTxn{}, failSync: map[string]error{}}
}

func (m *memTxnSink) CreateWriter(SinkContext) (SinkWriter[int], error) { return memTxnWriter{m}, nil }

func (m *memTxnSink) Commit(_ SinkContext, txn []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.txns[string(txn)]
	if t == nil {
		return fmt.Errorf("unknown transaction %s", txn)
	}
	m.events = append(m.events, "commit "+string(txn))
	if t.done {
		return nil
	}
	if !t.synced {
		m.violations = append(m.violations, fmt.Sprintf("transaction %s committed before it was synced", txn))
	}
	t.done = true
	m.committed = append(m.committed, t.records...)
	return nil
}

type memTxnWriter struct{ m *memTxnSink }

func (w memTxnWriter) Write(v int) error {
	w.m.mu.Lock()
	defer w.m.mu.Unlock()
	w.m.open = append(w.m.open, v)
	return nil
}

func (memTxnWriter) Flush() error { return nil }
func (memTxnWriter) Close() error { return nil }

func (w memTxnWriter) PreCommit(int64) ([]byte, error) {
	m := w.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.open) == 0 {
		return nil, nil
	}
	name := "t" + strconv.Itoa(m.seq)
	m.seq++
	m.txns[name] = &memTxn{records: m.open}
	m.open = nil
	m.events = append(m.events, "precommit "+name)
	return []byte(name), nil
}

func (w memTxnWriter) SyncPreCommitted(txn []byte) error {
	m := w.m
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.txns[string(txn)]
	if t == nil || t.done {
		return fmt.Errorf("sync %s: no such pending transaction", txn)
	}
	m.events = append(m.events, "sync "+string(txn))
	t.syncs++
	if err := m.failSync[string(txn)]; err != nil {
		return err
	}
	t.synced = true
	return nil
}

// check fails t on every commit before a sync and every transaction synced
// more than once.
func (m *memTxnSink) check(t *testing.T) {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, v := range m.violations {
		t.Error(v)
	}
	for name, tx := range m.txns {
		if tx.syncs > 1 {
			t.Errorf("transaction %s synced %d times, want once", name, tx.syncs)
		}
	}
	if t.Failed() {
		t.Logf("events: %v", m.events)
	}
}

// testSinkOp is the sink runtime of subtask 0 of 1 over sink, opened as in
// a checkpointed job; what it posts to the task goroutine is run at once
// and its error collected.
type testSinkOp struct {
	*sinkOp[int]
	mu     sync.Mutex
	posted []error
}

func newTestSinkOp(t *testing.T, sk TwoPhaseCommitSink[int]) *testSinkOp {
	t.Helper()
	ctx := &task.OpContext{Name: "Sink: test", UID: "sink", Subtask: 0, Parallelism: 1, MaxParallelism: 128,
		Tracker: &task.Tracker{}, Checkpointing: true, RunID: "run"}
	op := &testSinkOp{}
	op.sinkOp = &sinkOp[int]{opBase: newOpBase(ctx), sink: sk, post: func(fn func() error) {
		if err := fn(); err != nil {
			op.mu.Lock()
			op.posted = append(op.posted, err)
			op.mu.Unlock()
		}
	}}
	if err := op.Open(); err != nil {
		t.Fatal(err)
	}
	return op
}

func (op *testSinkOp) postedErrors() []error {
	op.mu.Lock()
	defer op.mu.Unlock()
	return slices.Clone(op.posted)
}

// snapshot runs the synchronous phase of checkpoint id and returns its
// asynchronous part for the sink (a no-op when there is none).
func (op *testSinkOp) snapshot(t *testing.T, id int64) func() error {
	t.Helper()
	snap, err := op.SnapshotState(id, checkpoint.Options{})
	if err != nil {
		t.Fatalf("snapshot %d: %v", id, err)
	}
	if snap.Persist == nil {
		return func() error { return nil }
	}
	return snap.Persist
}

func (op *testSinkOp) write(vs ...int) {
	for _, v := range vs {
		op.Collect(v)
	}
}

// Checkpoints 1 and 2 overlap: 2's asynchronous phase runs and 2 completes
// before 1's asynchronous phase got to the sink. Committing at 2 commits
// 1's transaction too, which must be synced by then; 1's late asynchronous
// phase then has nothing left to do and does not fail.
func TestSinkCommitAfterOverlappingCheckpointSyncsEarlierTransaction(t *testing.T) {
	m := newMemTxnSink()
	op := newTestSinkOp(t, m)
	op.write(1, 2)
	persist1 := op.snapshot(t, 1)
	op.write(3)
	persist2 := op.snapshot(t, 2)
	if err := persist2(); err != nil {
		t.Fatalf("asynchronous phase of checkpoint 2: %v", err)
	}
	if err := op.NotifyCheckpointComplete(2); err != nil {
		t.Fatalf("completion of checkpoint 2: %v", err)
	}
	if err := persist1(); err != nil {
		t.Errorf("late asynchronous phase of checkpoint 1, subsumed by 2: %v", err)
	}
	m.check(t)
	if !slices.Equal(m.committed, []int{1, 2, 3}) {
		t.Errorf("committed %v, want [1 2 3]", m.committed)
	}
	if errs := op.postedErrors(); len(errs) > 0 {
		t.Errorf("task failed: %v", errs)
	}
}

// Should a completion come before any asynchronous phase synced the
// transactions it commits, the commit syncs them first, on the task
// goroutine, and the late phases find nothing to do.
func TestSinkCommitSyncsTransactionsNoPhaseSyncedYet(t *testing.T) {
	m := newMemTxnSink()
	op := newTestSinkOp(t, m)
	op.write(1)
	persist1 := op.snapshot(t, 1)
	op.write(2)
	persist2 := op.snapshot(t, 2)
	if err := op.NotifyCheckpointComplete(2); err != nil {
		t.Fatalf("completion of checkpoint 2: %v", err)
	}
	for i, p := range []func() error{persist2, persist1} {
		if err := p(); err != nil {
			t.Errorf("late asynchronous phase of checkpoint %d: %v", 2-i, err)
		}
	}
	m.check(t)
	if !slices.Equal(m.committed, []int{1, 2}) {
		t.Errorf("committed %v, want [1 2]", m.committed)
	}
}

// A failed sync is not dropped: the checkpoint of the transaction and every
// later one listing it decline with the error, the task is told to fail
// once, and nothing is committed, not even by a completion (which the
// coordinator would not send, since the checkpoint declined).
func TestSinkSyncFailureDeclinesEveryCheckpointListingItAndFailsTask(t *testing.T) {
	m := newMemTxnSink()
	injected := errors.New("injected fsync failure")
	m.failSync["t0"] = injected
	op := newTestSinkOp(t, m)
	op.write(1)
	persist1 := op.snapshot(t, 1)
	op.write(2)
	persist2 := op.snapshot(t, 2)
	persist3 := op.snapshot(t, 3) // nothing written since 2: no transaction of its own
	for i, p := range []func() error{persist2, persist1, persist3} {
		if err := p(); !errors.Is(err, injected) {
			t.Errorf("asynchronous phase %d: %v, want the injected sync failure", i, err)
		}
	}
	if errs := op.postedErrors(); len(errs) != 1 || !errors.Is(errs[0], injected) {
		t.Errorf("errors posted to the task: %v, want the injected sync failure once", errs)
	}
	if err := op.NotifyCheckpointComplete(3); !errors.Is(err, injected) {
		t.Errorf("completion of checkpoint 3: %v, want the injected sync failure", err)
	}
	if len(m.committed) != 0 {
		t.Errorf("committed %v although transaction t0 is not durable", m.committed)
	}
	m.check(t)
	if n := m.txns["t0"].syncs; n != 1 {
		t.Errorf("the failed sync ran %d times, want once (a retried fsync proves nothing)", n)
	}
}

// Randomized interleavings of writes, synchronous phases, asynchronous
// phases running concurrently on their own goroutines, and completions (of
// a checkpoint whose asynchronous phase succeeded, newer than the last
// completed one, as the coordinator sends them): every transaction is
// synced once and before its commit, every asynchronous phase succeeds,
// also one that runs after a later checkpoint subsumed its own, and every
// record is committed exactly once, in order.
func TestSinkCommitOrderUnderRandomOverlap(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	type phase struct {
		id      int64
		release chan struct{}
		done    chan error
		err     error
		ran     bool
	}
	releaseAll := func(ps []*phase) {
		for _, p := range ps {
			select {
			case <-p.release:
			default:
				close(p.release)
			}
		}
	}
	for round := range 200 {
		m := newMemTxnSink()
		op := newTestSinkOp(t, m)
		var (
			pending []*phase // triggered, neither completed nor subsumed
			all     []*phase
			next    = int64(1)
			written []int
		)
		trigger := func() {
			p := &phase{id: next, release: make(chan struct{}), done: make(chan error, 1)}
			persist := op.snapshot(t, next)
			next++
			go func() {
				<-p.release
				p.done <- persist()
			}()
			pending = append(pending, p)
			all = append(all, p)
		}
		// acked waits for p's asynchronous phase if it was released.
		acked := func(p *phase) bool {
			if !p.ran {
				select {
				case <-p.release:
				default:
					return false
				}
				p.err, p.ran = <-p.done, true
			}
			return p.err == nil
		}
		complete := func(p *phase) {
			if err := op.NotifyCheckpointComplete(p.id); err != nil {
				t.Fatalf("round %d: completion of checkpoint %d: %v", round, p.id, err)
			}
			// p and the older pending checkpoints are done; the phases
			// of subsumed ones may still run, late.
			old := slices.DeleteFunc(slices.Clone(pending), func(q *phase) bool { return q.id > p.id })
			releaseAll(old)
			pending = slices.DeleteFunc(pending, func(q *phase) bool { return q.id <= p.id })
		}
		for range 40 {
			switch rng.IntN(4) {
			case 0:
				for range rng.IntN(4) {
					written = append(written, len(written))
					op.write(written[len(written)-1])
				}
			case 1:
				if len(pending) < 3 { // max-concurrent-checkpoints 3
					trigger()
				}
			case 2:
				if len(pending) > 0 {
					releaseAll([]*phase{pending[rng.IntN(len(pending))]})
				}
			case 3:
				var ok []*phase
				for _, p := range pending {
					if acked(p) {
						ok = append(ok, p)
					}
				}
				if len(ok) > 0 {
					complete(ok[rng.IntN(len(ok))])
				}
			}
		}
		// The final checkpoint commits everything written.
		trigger()
		releaseAll(all)
		final := all[len(all)-1]
		if acked(final) {
			complete(final)
		}
		for _, p := range all {
			acked(p)
			if p.err != nil {
				t.Errorf("round %d: asynchronous phase of checkpoint %d: %v", round, p.id, p.err)
			}
		}
		m.check(t)
		if !slices.Equal(m.committed, written) {
			t.Errorf("round %d: committed %v, want %v", round, m.committed, written)
		}
		if errs := op.postedErrors(); len(errs) > 0 {
			t.Errorf("round %d: task failed: %v", round, errs)
		}
		if t.Failed() {
			return
		}
	}
}
