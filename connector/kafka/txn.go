package kafka

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Transaction handles, the bytes an exactly-once writer's PreCommit
// returns and weir stores in the checkpoint:
//
//	version   1 byte, 1
//	kind      1 byte: 0 marker (nothing to commit), 1 transaction
//	subtask   uvarint, the writer's subtask index
//	n         uvarint, the transaction's number N (transactional id
//	          prefix-subtask-N); for a marker, the highest N the writer
//	          pre-committed (0: none)
//	producer  8 bytes big endian, the producer id (transactions only)
//	epoch     2 bytes big endian, the producer epoch (transactions only)
//	id        the rest: the transactional id (transactions only)
//
// A writer returns a marker at a barrier where it has no open
// transaction, so that every checkpoint holds, for every subtask, the
// number of its last pre-committed transaction: the numbers of the
// transactions an earlier run may have left open start right above it.
const handleVersion = 1

const (
	handleMarker = 0
	handleTxn    = 1
)

// txnHandle is a decoded transaction handle.
type txnHandle struct {
	marker   bool
	subtask  int
	n        int64
	producer int64
	epoch    int16
	id       string // transactional id
}

func (h txnHandle) encode() []byte {
	b := []byte{handleVersion, handleTxn}
	if h.marker {
		b[1] = handleMarker
	}
	b = binary.AppendUvarint(b, uint64(h.subtask))
	b = binary.AppendUvarint(b, uint64(h.n))
	if h.marker {
		return b
	}
	b = binary.BigEndian.AppendUint64(b, uint64(h.producer))
	b = binary.BigEndian.AppendUint16(b, uint16(h.epoch))
	return append(b, h.id...)
}

// errBadHandle says a transaction handle cannot be decoded.
var errBadHandle = errors.New("kafka sink: bad transaction handle")

func decodeHandle(b []byte) (txnHandle, error) {
	if len(b) < 2 {
		return txnHandle{}, fmt.Errorf("%w: %d bytes", errBadHandle, len(b))
	}
	if b[0] != handleVersion {
		return txnHandle{}, fmt.Errorf("%w: version %d, this weir reads version %d", errBadHandle, b[0], handleVersion)
	}
	var h txnHandle
	switch b[1] {
	case handleMarker:
		h.marker = true
	case handleTxn:
	default:
		return txnHandle{}, fmt.Errorf("%w: kind %d", errBadHandle, b[1])
	}
	b = b[2:]
	sub, k := binary.Uvarint(b)
	if k <= 0 || sub > 1<<31 {
		return txnHandle{}, fmt.Errorf("%w: subtask", errBadHandle)
	}
	b = b[k:]
	n, k := binary.Uvarint(b)
	if k <= 0 || n > 1<<62 {
		return txnHandle{}, fmt.Errorf("%w: transaction number", errBadHandle)
	}
	b = b[k:]
	h.subtask, h.n = int(sub), int64(n)
	if h.marker {
		if len(b) != 0 {
			return txnHandle{}, fmt.Errorf("%w: %d trailing bytes after a marker", errBadHandle, len(b))
		}
		return h, nil
	}
	if len(b) < 11 {
		return txnHandle{}, fmt.Errorf("%w: truncated producer id, epoch or transactional id", errBadHandle)
	}
	h.producer = int64(binary.BigEndian.Uint64(b))
	h.epoch = int16(binary.BigEndian.Uint16(b[8:]))
	h.id = string(b[10:])
	return h, nil
}

// transactionalID is Flink's TransactionalIdFactory: prefix-subtask-n.
func transactionalID(prefix string, subtask int, n int64) string {
	return fmt.Sprintf("%s-%d-%d", prefix, subtask, n)
}

// retriableTxnErr says whether a transaction coordinator's answer may
// change on a retry: the coordinator moves or loads, or another operation
// on the transaction (the writing of its markers) is still going on.
func retriableTxnErr(err error) bool {
	var ke *kerr.Error
	if !errors.As(err, &ke) {
		// Not an answer of the broker: a dial or connection error,
		// which kgo already retried; try again.
		return !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
	}
	switch ke {
	case kerr.ConcurrentTransactions, kerr.CoordinatorLoadInProgress, kerr.NotCoordinator,
		kerr.CoordinatorNotAvailable, kerr.RequestTimedOut:
		return true
	}
	return ke.Retriable
}

// backoff is the wait before retry attempt (0-based) of a coordinator
// request: 20 ms doubling up to 1 s.
func backoff(attempt int) time.Duration {
	d := 20 * time.Millisecond << min(attempt, 6)
	return min(d, time.Second)
}

// retryTxn runs do until it succeeds, fails with an error a retry does
// not change, or ctx ends.
func retryTxn(ctx context.Context, do func() error) error {
	for attempt := 0; ; attempt++ {
		err := do()
		if err == nil || !retriableTxnErr(err) {
			return err
		}
		t := time.NewTimer(backoff(attempt))
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (last answer: %v)", ctx.Err(), err)
		case <-t.C:
		}
	}
}

// endTxn sends EndTxn(commit) for the transaction of h to its
// coordinator (kgo finds it: FindCoordinator with the transaction key
// type), retrying retriable answers. It is the commit of a transaction
// whose producer is not in this process: after a restore, or after its
// client failed.
//
// A transaction already committed with that producer id and epoch is
// answered with success (the coordinator's retry detection, also after
// the epoch bump of KIP-890), so commit is idempotent. A transaction that
// was aborted (it timed out) is answered INVALID_TXN_STATE, and one whose
// epoch another InitProducerID bumped since PRODUCER_FENCED or
// INVALID_PRODUCER_EPOCH: endTxn then fails, naming the transaction:
// its records are not in the topic, and saying otherwise would lose them
// silently.
func endTxn(ctx context.Context, cl *kgo.Client, h txnHandle, timeout time.Duration) error {
	err := retryTxn(ctx, func() error {
		req := kmsg.NewPtrEndTxnRequest()
		req.TransactionalID = h.id
		req.ProducerID = h.producer
		req.ProducerEpoch = h.epoch
		req.Commit = true
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		return kerr.ErrorForCode(resp.ErrorCode)
	})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, kerr.InvalidTxnState):
		return fmt.Errorf("%w: transaction %s (producer id %d, epoch %d) was aborted, not committed: it outlived "+
			"transaction.timeout.ms (TransactionTimeout %s) before its checkpoint's commit, and its records are lost (%v)",
			ErrTxnLost, h.id, h.producer, h.epoch, timeout, err)
	case errors.Is(err, kerr.ProducerFenced), errors.Is(err, kerr.InvalidProducerEpoch):
		return fmt.Errorf("%w: transaction %s (producer id %d, epoch %d) cannot be committed: its producer epoch was bumped since "+
			"its pre-commit, because it timed out (transaction.timeout.ms, TransactionTimeout %s) and was aborted, or because another "+
			"producer initialized the transactional id (another job with the same TransactionalIDPrefix?); whether its records are in "+
			"the topic cannot be told (%v)", ErrTxnLost, h.id, h.producer, h.epoch, timeout, err)
	case errors.Is(err, kerr.InvalidProducerIDMapping), errors.Is(err, kerr.TransactionalIDNotFound):
		return fmt.Errorf("%w: transaction %s (producer id %d, epoch %d) is unknown to the brokers: the transactional id "+
			"expired (transactional.id.expiration.ms) or belongs to another producer id now, so whether its records are in "+
			"the topic cannot be told (%v)", ErrTxnLost, h.id, h.producer, h.epoch, err)
	}
	return fmt.Errorf("kafka sink: commit transaction %s (producer id %d, epoch %d): %w", h.id, h.producer, h.epoch, err)
}

// ErrTxnLost is wrapped by the errors of commits that cannot succeed: the
// transaction was aborted or its fate cannot be known. The error names the
// transactional id.
var ErrTxnLost = errors.New("kafka sink: transaction not committed")

// initProducerID sends InitProducerID for transactional id to its
// coordinator, retrying retriable answers, and returns the epoch it got.
// It aborts a transaction the id has open and fences every producer of
// the id; epoch 0 means the brokers had never seen the id (or forgot it:
// transactional.id.expiration.ms).
func initProducerID(ctx context.Context, cl *kgo.Client, id string, timeout time.Duration) (int16, error) {
	var epoch int16
	err := retryTxn(ctx, func() error {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID = &id
		req.TransactionTimeoutMillis = int32(timeout.Milliseconds())
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		epoch = resp.ProducerEpoch
		return kerr.ErrorForCode(resp.ErrorCode)
	})
	if err != nil {
		return 0, fmt.Errorf("kafka sink: abort lingering transaction %s (InitProducerID): %w", id, err)
	}
	return epoch, nil
}

// abortChain aborts the transactions prefix-subtask-from, -from+1, ...
// up to the first id the brokers had never seen (Flink's
// TransactionAborter), and returns how many ids it initialized.
func abortChain(ctx context.Context, cl *kgo.Client, prefix string, subtask int, from int64, timeout time.Duration) (int, error) {
	for n := from; ; n++ {
		epoch, err := initProducerID(ctx, cl, transactionalID(prefix, subtask, n), timeout)
		if err != nil {
			return int(n - from), err
		}
		if epoch == 0 {
			return int(n - from + 1), nil
		}
	}
}
