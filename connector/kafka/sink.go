package kafka

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/weirstream/weir"
)

// DeliveryGuarantee is what a Sink promises about the records it writes
// when the job fails and restores (Flink's DeliveryGuarantee).
type DeliveryGuarantee int

const (
	// AtLeastOnce (the default, the zero value) waits at every checkpoint
	// barrier until the brokers acknowledged every record written before
	// it: a restore may write records again, never loses one.
	AtLeastOnce DeliveryGuarantee = iota
	// None produces asynchronously and never waits: records still
	// buffered when the job fails are lost, and a restore may write
	// records again.
	None
	// ExactlyOnce writes the records of each checkpoint interval and
	// subtask in a Kafka transaction, committed when the checkpoint
	// completes: read with read_committed isolation, every record is in
	// the topic once. It needs SinkOptions.TransactionalIDPrefix.
	ExactlyOnce
)

// String returns "none", "at-least-once" or "exactly-once".
func (d DeliveryGuarantee) String() string {
	switch d {
	case None:
		return "none"
	case AtLeastOnce:
		return "at-least-once"
	case ExactlyOnce:
		return "exactly-once"
	}
	return fmt.Sprintf("DeliveryGuarantee(%d)", int(d))
}

// ParseDeliveryGuarantee parses "none", "at-least-once" or
// "exactly-once" (case-insensitive; Flink's NONE, AT_LEAST_ONCE and
// EXACTLY_ONCE too).
func ParseDeliveryGuarantee(s string) (DeliveryGuarantee, error) {
	switch strings.ReplaceAll(strings.ToLower(strings.TrimSpace(s)), "_", "-") {
	case "none":
		return None, nil
	case "at-least-once":
		return AtLeastOnce, nil
	case "exactly-once":
		return ExactlyOnce, nil
	}
	return 0, fmt.Errorf("kafka sink: unknown delivery guarantee %q: want none, at-least-once or exactly-once", s)
}

// DefaultTransactionTimeout is the default SinkOptions.TransactionTimeout:
// the largest timeout brokers accept by default
// (transaction.max.timeout.ms = 15 min). A transaction pre-committed at a
// barrier must survive until its checkpoint completes, also across a
// failure and restore, so the Kafka producer's default of 60 s is short;
// Flink's FlinkKafkaProducer used 1 h, which default brokers reject.
const DefaultTransactionTimeout = 15 * time.Minute

// SinkOptions configure a Sink.
type SinkOptions struct {
	Client
	// Topic is the topic of records whose serializer left Record.Topic
	// empty; it may be empty if the serializer names every record's
	// topic.
	Topic string
	// Delivery is the delivery guarantee; default AtLeastOnce.
	Delivery DeliveryGuarantee
	// TransactionalIDPrefix (Flink's transactional.id.prefix) starts the
	// transactional ids of an ExactlyOnce sink (prefix-subtask-n); it is
	// required for ExactlyOnce and must be unique per job writing to the
	// cluster: a job fences the producers, and aborts the open
	// transactions, of any other job with the same prefix.
	TransactionalIDPrefix string
	// TransactionTimeout (transaction.timeout.ms) is how long the brokers
	// keep a transaction open before they abort it; default
	// DefaultTransactionTimeout (15 min). It must exceed the checkpoint
	// interval, and should exceed the longest time from a barrier to the
	// completion of its checkpoint, including a restore after a failure:
	// a transaction aborted before its commit makes the commit fail (its
	// records are lost; weir says so and does not go on). Brokers reject
	// timeouts over transaction.max.timeout.ms (15 min by default).
	TransactionTimeout time.Duration
}

// DefaultDeliveryTimeout bounds how long a sink's client tries to
// deliver a record (kgo.RecordDeliveryTimeout, Kafka's delivery.timeout.ms
// and its default): a write blocked on a full buffer, or a flush at a
// barrier, fails the task after it instead of waiting forever for brokers
// that are gone. Client.Opts may set another.
const DefaultDeliveryTimeout = 2 * time.Minute

// clientOpts returns the franz-go options of the sink's clients, then
// more: the sink's defaults come before Client.Opts, which may change them.
func (o SinkOptions) clientOpts(more ...kgo.Opt) []kgo.Opt {
	c := o.Client
	c.Opts = append([]kgo.Opt{kgo.RecordDeliveryTimeout(DefaultDeliveryTimeout)}, c.Opts...)
	return c.opts(more...)
}

// withDefaults returns o with its defaults filled in.
func (o SinkOptions) withDefaults() SinkOptions {
	if o.TransactionTimeout == 0 {
		o.TransactionTimeout = DefaultTransactionTimeout
	}
	return o
}

// Validate reports every problem of the options at once.
func (o SinkOptions) Validate() error {
	o = o.withDefaults()
	var errs []error
	if err := o.Client.validate(); err != nil {
		errs = append(errs, err)
	}
	switch o.Delivery {
	case None, AtLeastOnce:
	case ExactlyOnce:
		if o.TransactionalIDPrefix == "" {
			errs = append(errs, errors.New("kafka sink: exactly-once needs a TransactionalIDPrefix (transactional.id.prefix), unique per job writing to the cluster"))
		}
		if o.TransactionTimeout < time.Millisecond || o.TransactionTimeout > (1<<31-1)*time.Millisecond {
			errs = append(errs, fmt.Errorf("kafka sink: TransactionTimeout (transaction.timeout.ms) %s: want 1ms up to the brokers' transaction.max.timeout.ms (15 min by default)", o.TransactionTimeout))
		}
	default:
		errs = append(errs, fmt.Errorf("kafka sink: unknown delivery guarantee %d: want None, AtLeastOnce or ExactlyOnce", int(o.Delivery)))
	}
	return errors.Join(errs...)
}

// NewSink returns a sink that writes serialize(v) for every record v to
// Kafka with the options' delivery guarantee. serialize returning a nil
// record skips v; an error fails the job. Record.Partition is used only
// with a manual partitioner in Client.Opts
// (kgo.RecordPartitioner(kgo.ManualPartitioner())); by default records are
// partitioned by key, as the Java client does. Record.Offset is ignored; a
// zero Record.Timestamp is the time of the write.
//
// AtLeastOnce and ExactlyOnce sinks are weir.TwoPhaseCommitSinks. An
// ExactlyOnce sink writes the records of each checkpoint interval and
// subtask s in a transaction of its own, with the transactional id
// prefix-s-n: n counts the subtask's transactions, each opened at the
// first record after a barrier and in a client of its own. At a barrier
// the writer flushes the transaction and hands its producer id and epoch to
// the checkpoint; the commit, when the checkpoint completes, ends it. A
// restored run commits the transactions of the checkpoint it restores
// (from any process: it ends them by their producer id and epoch) and then
// aborts those an earlier run left open: it initializes prefix-s-(n+1),
// prefix-s-(n+2)... (n being the number of the last transaction the
// checkpoint holds for s, and for every earlier subtask that the
// subtask takes over after a change of parallelism) up to the first id the
// brokers never saw. A job starting without a checkpoint does the same
// from n = 1, for its subtasks and for subtasks s+P, s+2P... of an earlier
// run with more subtasks, so a job that starts afresh with the prefix of a
// job that ran long re-initializes every id that job used (a request
// each): give a new job a new prefix. Without checkpointing, each subtask
// writes one transaction, committed at the end of the input.
//
// An ExactlyOnce commit fails (ErrTxnLost, naming the transactional id)
// if the brokers aborted the transaction (it outlived TransactionTimeout)
// or another producer took its transactional id: weir does not claim
// records are written that are not. An ExactlyOnce writer is not created
// when TransactionTimeout does not exceed the checkpoint interval.
//
// Writers count numRecordsSend (records produced) and
// numRecordsSendErrors (produces that failed) in the sink operator's
// metric group (weir.SinkContext.Metrics).
func NewSink[T any](opts SinkOptions, serialize func(T) (*Record, error)) weir.Sink[T] {
	s := &sink[T]{opts: opts.withDefaults(), serialize: serialize, txns: newTxnRegistry()}
	if s.opts.Delivery == None {
		return s
	}
	return &tpcSink[T]{sink: s}
}

// sink is the sink of every delivery guarantee; tpcSink adds the commit.
type sink[T any] struct {
	opts      SinkOptions
	serialize func(T) (*Record, error)
	txns      *txnRegistry
}

// tpcSink is an AtLeastOnce or ExactlyOnce sink: a weir.TwoPhaseCommitSink.
type tpcSink[T any] struct {
	*sink[T]
}

var (
	_ weir.Sink[int]               = (*sink[int])(nil)
	_ weir.TwoPhaseCommitSink[int] = (*tpcSink[int])(nil)
	_ weir.PreCommitter            = (*writer[int])(nil)
)

// Name names the sink operator.
func (s *sink[T]) Name() string {
	if s.opts.Topic == "" {
		return "Kafka"
	}
	return "Kafka(" + s.opts.Topic + ")"
}

// commitTimeout bounds a commit's and an abort's retries of a
// coordinator that keeps answering retriable errors.
const commitTimeout = 2 * time.Minute

// Commit implements weir.TwoPhaseCommitSink: it commits the transaction
// of an ExactlyOnce writer. With its client still open in this process
// (the common case: the checkpoint completed while the job runs), it ends
// the transaction with it; otherwise it sends EndTxn with the handle's
// producer id and epoch (see endTxn). Committing a committed transaction
// succeeds; an aborted one fails with ErrTxnLost.
func (s *tpcSink[T]) Commit(ctx weir.SinkContext, txn []byte) error {
	h, err := decodeHandle(txn)
	if err != nil {
		return err
	}
	s.txns.noteRestored(ctx, h)
	if h.marker {
		return nil
	}
	cctx, cancel := context.WithTimeout(context.Background(), commitTimeout)
	defer cancel()
	if p := s.txns.takePreCommitted(h); p != nil {
		err := p.cl.EndTransaction(cctx, kgo.TryCommit)
		p.cl.Close()
		if err == nil {
			return nil
		}
		// The outcome is unknown (the coordinator moved, the
		// connection broke): ask again with EndTxn, which answers
		// whether the transaction is committed.
		if ctx.Logger != nil {
			ctx.Logger.Warn("kafka sink: commit failed, retrying by producer id", "transactional.id", h.id, "error", err)
		}
	}
	cl, err := kgo.NewClient(s.opts.clientOpts()...)
	if err != nil {
		return fmt.Errorf("kafka sink: commit %s: %w", h.id, err)
	}
	defer cl.Close()
	return endTxn(cctx, cl, h, s.opts.TransactionTimeout)
}

// CreateWriter implements weir.Sink.
func (s *sink[T]) CreateWriter(ctx weir.SinkContext) (weir.SinkWriter[T], error) {
	if err := s.opts.Validate(); err != nil {
		return nil, err
	}
	if s.serialize == nil {
		return nil, errors.New("kafka sink: no serializer: pass NewSink a function from the record to a *kafka.Record")
	}
	if err := s.opts.checkInterval(ctx.CheckpointInterval); err != nil {
		return nil, err
	}
	if s.opts.Delivery == ExactlyOnce && ctx.CheckpointInterval <= 0 && ctx.Subtask == 0 && ctx.Logger != nil {
		ctx.Logger.Warn("kafka sink: exactly-once without checkpointing commits only at the end of a bounded input: "+
			"on an unbounded input nothing becomes visible, and the brokers abort the open transactions after "+
			"TransactionTimeout (transaction.timeout.ms); set execution.checkpointing.interval",
			"prefix", s.opts.TransactionalIDPrefix, "transactionTimeout", s.opts.withDefaults().TransactionTimeout)
	}
	wctx, cancel := context.WithCancel(context.Background())
	w := &writer[T]{s: s, ctx: ctx, wctx: wctx, cancel: cancel,
		sent: ctx.Metrics.Counter("numRecordsSend"), sendErrors: ctx.Metrics.Counter("numRecordsSendErrors")}
	if s.opts.Delivery != ExactlyOnce {
		cl, err := kgo.NewClient(s.opts.clientOpts()...)
		if err != nil {
			cancel()
			return nil, fmt.Errorf("kafka sink: %w", err)
		}
		w.cl = cl
		return w, nil
	}
	next, err := s.abortLingering(ctx)
	if err != nil {
		cancel()
		return nil, err
	}
	w.last, w.next = next-1, next
	s.txns.liveWriter(ctx)
	return w, nil
}

// abortLingering aborts the transactions that earlier runs of the
// subtask of ctx (and of the earlier subtasks it took over) left open,
// and returns the number of the writer's first transaction (see
// NewSink).
func (s *sink[T]) abortLingering(ctx weir.SinkContext) (int64, error) {
	restored := s.txns.takeRestored(ctx)
	cl, err := kgo.NewClient(s.opts.clientOpts()...)
	if err != nil {
		return 0, fmt.Errorf("kafka sink: %w", err)
	}
	defer cl.Close()
	actx, cancel := context.WithTimeout(context.Background(), commitTimeout)
	defer cancel()
	prefix, timeout := s.opts.TransactionalIDPrefix, s.opts.TransactionTimeout
	inited := 0
	next := int64(1)
	if len(restored) == 0 {
		// No checkpoint says where the transactions of this subtask
		// (and of higher subtasks of a larger earlier run) are: scan
		// from the first.
		for sub := ctx.Subtask; ; sub += ctx.Parallelism {
			n, err := abortChain(actx, cl, prefix, sub, 1, timeout)
			inited += n
			if err != nil {
				return 0, err
			}
			if n == 1 && sub != ctx.Subtask {
				break // subtask sub never wrote: nor did higher ones
			}
		}
	} else {
		if last, ok := restored[ctx.Subtask]; ok {
			next = last + 1
		} else {
			restored[ctx.Subtask] = 0
		}
		for sub, last := range restored {
			n, err := abortChain(actx, cl, prefix, sub, last+1, timeout)
			inited += n
			if err != nil {
				return 0, err
			}
		}
	}
	if ctx.Logger != nil {
		ctx.Logger.Info("kafka sink: aborted lingering transactions", "prefix", prefix, "subtask", ctx.Subtask,
			"restored", len(restored) > 0, "initialized", inited, "next", transactionalID(prefix, ctx.Subtask, next))
	}
	return next, nil
}

// checkInterval checks that an exactly-once sink's transactions outlive
// the checkpoint interval iv (0: checkpointing off).
func (o SinkOptions) checkInterval(iv time.Duration) error {
	if o.Delivery != ExactlyOnce || iv <= 0 || o.withDefaults().TransactionTimeout > iv {
		return nil
	}
	return fmt.Errorf("kafka sink: TransactionTimeout (transaction.timeout.ms) %s must exceed the checkpoint interval "+
		"(execution.checkpointing.interval) %s: every transaction stays open for at least one interval", o.withDefaults().TransactionTimeout, iv)
}

// txnRegistry is what an ExactlyOnce sink's writers and commits share in
// a process: the clients of pre-committed transactions, and what the
// commits of a restore tell the writers created after them.
type txnRegistry struct {
	mu sync.Mutex
	// pre holds the client of every transaction pre-committed in this
	// process and not committed yet, by transactional id.
	pre map[string]*preCommitted
	// restored holds, per run and earlier subtask, the highest
	// transaction number the restored checkpoint holds; the writer of
	// the run's subtask that owns the earlier subtask takes it.
	restored map[restoredKey]int64
	// live holds the writers created, per run and subtask: commits
	// they make are not restores.
	live map[restoredKey]bool
}

type restoredKey struct {
	run     string
	subtask int
}

type preCommitted struct {
	h     txnHandle
	cl    *kgo.Client
	owner any // the writer that pre-committed it
}

func newTxnRegistry() *txnRegistry {
	return &txnRegistry{pre: map[string]*preCommitted{}, restored: map[restoredKey]int64{}, live: map[restoredKey]bool{}}
}

// noteRestored records the transaction number of a handle committed by
// the subtask of ctx before its writer exists: a restore.
func (r *txnRegistry) noteRestored(ctx weir.SinkContext, h txnHandle) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.live[restoredKey{ctx.RunID, ctx.Subtask}] {
		return
	}
	for k := range r.restored {
		if k.run != ctx.RunID {
			delete(r.restored, k) // an earlier run's, whose writers all exist
		}
	}
	k := restoredKey{ctx.RunID, h.subtask}
	if n, ok := r.restored[k]; !ok || h.n > n {
		r.restored[k] = h.n
	}
}

// takeRestored returns and forgets the transaction numbers noted for the
// earlier subtasks that the subtask of ctx owns, by earlier subtask.
func (r *txnRegistry) takeRestored(ctx weir.SinkContext) map[int]int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[int]int64{}
	for k, n := range r.restored {
		if k.run == ctx.RunID && k.subtask%ctx.Parallelism == ctx.Subtask {
			out[k.subtask] = n
			delete(r.restored, k)
		}
	}
	return out
}

// liveWriter notes that the writer of the subtask of ctx exists.
func (r *txnRegistry) liveWriter(ctx weir.SinkContext) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.live[restoredKey{ctx.RunID, ctx.Subtask}] = true
}

// closeWriter forgets the writer of the subtask of ctx.
func (r *txnRegistry) closeWriter(ctx weir.SinkContext) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.live, restoredKey{ctx.RunID, ctx.Subtask})
}

func (r *txnRegistry) addPreCommitted(p *preCommitted) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pre[p.h.id] = p
}

// takePreCommitted returns and forgets the client of the transaction of
// h, nil if it is not open in this process.
func (r *txnRegistry) takePreCommitted(h txnHandle) *preCommitted {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.pre[h.id]
	if p == nil || p.h.producer != h.producer || p.h.epoch != h.epoch {
		return nil
	}
	delete(r.pre, h.id)
	return p
}

// dropPreCommitted closes and forgets the clients of the pre-committed
// transactions of owner, a writer that closes; their commits, if any, go
// by producer id.
func (r *txnRegistry) dropPreCommitted(owner any) {
	r.mu.Lock()
	var cls []*kgo.Client
	for id, p := range r.pre {
		if p.owner == owner {
			cls = append(cls, p.cl)
			delete(r.pre, id)
		}
	}
	r.mu.Unlock()
	for _, cl := range cls {
		cl.Close()
	}
}
