package operator

import (
	"encoding/binary"
	"errors"
	"sync"
)

// Txn is a two-phase-commit sink's pre-committed transaction, as its
// union list state keeps it: the checkpoint that pre-committed it, the
// subtask that wrote it and the writer's bytes.
type Txn struct {
	Checkpoint int64
	Subtask    int
	Data       []byte
	// Durable syncs the transaction once; nil if the writer makes its
	// transactions durable in PreCommit. It is not part of the encoding.
	Durable *Sync
}

// ErrCorruptTxn is returned by DecodeTxn for bytes Encode did not write.
var ErrCorruptTxn = errors.New("corrupt sink transaction")

// Encode returns t as stored in the sink's list state:
// uvarint(checkpoint) uvarint(subtask) data.
func (t Txn) Encode() []byte {
	b := binary.AppendUvarint(nil, uint64(t.Checkpoint))
	b = binary.AppendUvarint(b, uint64(t.Subtask))
	return append(b, t.Data...)
}

// DecodeTxn reads what Encode wrote; Data aliases b.
func DecodeTxn(b []byte) (Txn, error) {
	cp, n := binary.Uvarint(b)
	if n <= 0 {
		return Txn{}, ErrCorruptTxn
	}
	sub, m := binary.Uvarint(b[n:])
	if m <= 0 {
		return Txn{}, ErrCorruptTxn
	}
	return Txn{Checkpoint: int64(cp), Subtask: int(sub), Data: b[n+m:]}, nil
}

// Sync makes one pre-committed transaction durable exactly once, on
// whichever goroutine asks first: the asynchronous phase of any checkpoint
// that lists the transaction or, as a last resort, the commit. Later
// callers wait for that sync and get its result. A failed sync is final:
// after a failed fsync the kernel may have dropped the dirty pages, so a
// retry that succeeds proves nothing.
type Sync struct {
	once sync.Once
	run  func() error
	err  error
}

// NewSync returns the Sync that runs run once.
func NewSync(run func() error) *Sync { return &Sync{run: run} }

// Wait syncs the transaction unless that was done (or is being done), and
// returns the outcome.
func (d *Sync) Wait() error {
	d.once.Do(func() {
		d.err = d.run()
		d.run = nil
	})
	return d.err
}
