package kafka

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/weirstream/weir"
)

// writer writes the records of one subtask. Its methods run on the
// subtask's goroutine; the promises of its produces run on kgo's, and
// only set err.
type writer[T any] struct {
	s    *sink[T]
	ctx  weir.SinkContext
	wctx context.Context // ends at Close: produces blocked on a full buffer return
	// cancel ends wctx.
	cancel context.CancelFunc

	// cl is the producer of None and AtLeastOnce writers.
	cl *kgo.Client

	// ExactlyOnce: txn is the open transaction, nil until the first
	// record after a barrier; next is the number of the next one, last
	// that of the last one pre-committed (next-1 before any).
	txn        *openTxn
	next, last int64

	// sent counts the records produced (numRecordsSend), sendErrors
	// those whose produce failed (numRecordsSendErrors), as Flink's
	// KafkaSink does.
	sent, sendErrors *weir.Counter

	mu  sync.Mutex
	err error // the first failed produce
}

// openTxn is an open transaction and the client that holds it.
type openTxn struct {
	cl *kgo.Client
	id string
	n  int64
}

// asyncErr returns the first produce that failed.
func (w *writer[T]) asyncErr() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// promise returns the promise of a produce to the transaction id ("" if
// not transactional).
func (w *writer[T]) promise(id string) func(*kgo.Record, error) {
	return func(r *kgo.Record, err error) {
		if err == nil {
			return
		}
		w.sendErrors.Inc()
		switch {
		case id != "" && (errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch)):
			err = fmt.Errorf("kafka sink: transactional id %s was fenced: another producer uses it (another job with the same TransactionalIDPrefix %q, or an earlier attempt of this one?), "+
				"or the brokers aborted its transaction after TransactionTimeout %s: %w",
				id, w.s.opts.TransactionalIDPrefix, w.s.opts.withDefaults().TransactionTimeout, err)
		case id != "":
			err = fmt.Errorf("kafka sink: produce to %s[%d] in transaction %s: %w", r.Topic, r.Partition, id, err)
		default:
			err = fmt.Errorf("kafka sink: produce to %s[%d]: %w", r.Topic, r.Partition, err)
		}
		w.mu.Lock()
		if w.err == nil {
			w.err = err
		}
		w.mu.Unlock()
	}
}

// Write implements weir.SinkWriter: it produces serialize(v)
// asynchronously (blocking while kgo's buffer is full) and fails with the
// error of any earlier produce.
func (w *writer[T]) Write(v T) error {
	if err := w.asyncErr(); err != nil {
		return err
	}
	r, err := w.s.serialize(v)
	if err != nil {
		return fmt.Errorf("kafka sink: serialize: %w", err)
	}
	if r == nil {
		return nil
	}
	kr := &kgo.Record{Topic: r.Topic, Partition: r.Partition, Key: r.Key, Value: r.Value, Timestamp: r.Timestamp}
	if kr.Topic == "" {
		kr.Topic = w.s.opts.Topic
		if kr.Topic == "" {
			return errors.New("kafka sink: record without a topic: set SinkOptions.Topic or Record.Topic")
		}
	}
	if len(r.Headers) > 0 {
		kr.Headers = make([]kgo.RecordHeader, len(r.Headers))
		for i, h := range r.Headers {
			kr.Headers[i] = kgo.RecordHeader{Key: h.Key, Value: h.Value}
		}
	}
	cl, id := w.cl, ""
	if w.s.opts.Delivery == ExactlyOnce {
		if w.txn == nil {
			if err := w.begin(); err != nil {
				return err
			}
		}
		cl, id = w.txn.cl, w.txn.id
	}
	cl.Produce(w.wctx, kr, w.promise(id))
	w.sent.Inc()
	return nil
}

// begin opens transaction w.next in a client of its own.
func (w *writer[T]) begin() error {
	id := transactionalID(w.s.opts.TransactionalIDPrefix, w.ctx.Subtask, w.next)
	cl, err := kgo.NewClient(w.s.opts.clientOpts(kgo.TransactionalID(id), kgo.TransactionTimeout(w.s.opts.TransactionTimeout))...)
	if err != nil {
		return fmt.Errorf("kafka sink: client for transaction %s: %w", id, err)
	}
	if err := cl.BeginTransaction(); err != nil {
		cl.Close()
		return fmt.Errorf("kafka sink: begin transaction %s: %w", id, err)
	}
	w.txn = &openTxn{cl: cl, id: id, n: w.next}
	w.next++
	return nil
}

// flush waits until every record produced is acknowledged, and fails if
// one was not.
func (w *writer[T]) flush() error {
	cl := w.cl
	if w.txn != nil {
		cl = w.txn.cl
	}
	if cl != nil {
		if err := cl.Flush(w.wctx); err != nil {
			return fmt.Errorf("kafka sink: flush: %w", err)
		}
	}
	return w.asyncErr()
}

// Flush implements weir.SinkWriter: it waits until the brokers
// acknowledged every record (ExactlyOnce: they become visible with the
// commit).
func (w *writer[T]) Flush() error { return w.flush() }

// PreCommit implements weir.PreCommitter. AtLeastOnce: it flushes and
// returns nil (nothing to commit). ExactlyOnce: it flushes the open
// transaction and returns its handle (a marker if none is open; see
// txnHandle); the next record opens the next transaction.
func (w *writer[T]) PreCommit(int64) ([]byte, error) {
	if err := w.flush(); err != nil {
		return nil, err
	}
	if w.s.opts.Delivery != ExactlyOnce {
		return nil, nil
	}
	t := w.txn
	if t == nil {
		return txnHandle{marker: true, subtask: w.ctx.Subtask, n: w.last}.encode(), nil
	}
	ctx, cancel := context.WithTimeout(w.wctx, commitTimeout)
	defer cancel()
	pid, epoch, err := t.cl.ProducerID(ctx)
	if err != nil {
		if errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch) {
			return nil, fmt.Errorf("kafka sink: transactional id %s was fenced: another producer uses it (another job with the same TransactionalIDPrefix %q?), "+
				"or the brokers aborted its transaction after TransactionTimeout %s: %w",
				t.id, w.s.opts.TransactionalIDPrefix, w.s.opts.withDefaults().TransactionTimeout, err)
		}
		return nil, fmt.Errorf("kafka sink: producer id of transaction %s: %w", t.id, err)
	}
	h := txnHandle{subtask: w.ctx.Subtask, n: t.n, producer: pid, epoch: epoch, id: t.id}
	w.s.txns.addPreCommitted(&preCommitted{h: h, cl: t.cl, owner: w})
	w.txn, w.last = nil, t.n
	return h.encode(), nil
}

// abortTimeout bounds the abort of the open transaction at Close.
const abortTimeout = 5 * time.Second

// Close implements weir.SinkWriter. It aborts the open transaction (best
// effort: a restored writer aborts it too) and closes the clients; the
// transactions it pre-committed stay as they are, for the commits of a
// completed checkpoint or of a restore.
func (w *writer[T]) Close() error {
	w.cancel()
	if w.cl != nil {
		w.cl.Close()
	}
	if t := w.txn; t != nil {
		w.txn = nil
		ctx, cancel := context.WithTimeout(context.Background(), abortTimeout)
		if err := t.cl.AbortBufferedRecords(ctx); err == nil {
			_ = t.cl.EndTransaction(ctx, kgo.TryAbort)
		}
		cancel()
		t.cl.Close()
	}
	if w.s.opts.Delivery == ExactlyOnce {
		w.s.txns.dropPreCommitted(w)
		w.s.txns.closeWriter(w.ctx)
	}
	return nil
}
