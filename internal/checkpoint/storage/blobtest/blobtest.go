// Package blobtest wraps a storage.Bucket to inject faults and record
// operations, for testing the checkpoint storage protocol: errors by
// operation and key pattern, and writes that "crash" part-way, leaving the
// object partially written (a torn, non-atomic store) or absent.
package blobtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"sync"

	"github.com/weirstream/weir/internal/checkpoint/storage"
)

// Op names a Bucket operation for fault rules and the operation log.
type Op string

// Operations.
const (
	OpNewWriter  Op = "newwriter"
	OpWrite      Op = "write"
	OpFinish     Op = "finish"
	OpAbort      Op = "abort"
	OpNewReader  Op = "newreader"
	OpRead       Op = "read"
	OpAttributes Op = "attributes"
	OpDelete     Op = "delete"
	OpList       Op = "list" // matched against the list prefix
)

// ErrInjected is the default injected error.
var ErrInjected = errors.New("blobtest: injected fault")

// CrashMode says what a crashed write leaves behind.
type CrashMode int

const (
	// LeavePartial commits the bytes written before the crash point: the
	// object becomes visible, truncated (a store without atomic publish, or
	// a torn write).
	LeavePartial CrashMode = iota
	// LeaveAbsent discards the object, as an atomic store would.
	LeaveAbsent
)

// Bucket is a fault-injecting, recording storage.Bucket. Its methods are
// safe for concurrent use.
type Bucket struct {
	inner storage.Bucket

	mu      sync.Mutex
	rules   []*rule
	crashes []*crash
	log     []string
}

var _ storage.Bucket = (*Bucket)(nil)

type rule struct {
	op    Op
	glob  string
	err   error
	times int // remaining; <0 forever
}

type crash struct {
	glob  string
	after int64
	mode  CrashMode
	times int
}

// New wraps inner.
func New(inner storage.Bucket) *Bucket { return &Bucket{inner: inner} }

// Fail makes the next times operations op on keys matching pathGlob (as in
// path.Match; "*" does not cross '/') fail with err (ErrInjected if nil).
// times <= 0 means forever. A failed NewWriter, Write or Finish leaves the
// object absent.
func (b *Bucket) Fail(op Op, pathGlob string, err error, times int) {
	if err == nil {
		err = ErrInjected
	}
	if times <= 0 {
		times = -1
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.rules = append(b.rules, &rule{op: op, glob: pathGlob, err: err, times: times})
}

// CrashWrite makes the next times writers (times <= 0: all) on keys
// matching pathGlob crash after `after` bytes: later bytes are silently
// dropped, Finish returns ErrInjected and the object is left as mode says.
func (b *Bucket) CrashWrite(pathGlob string, after int64, mode CrashMode, times int) {
	if times <= 0 {
		times = -1
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.crashes = append(b.crashes, &crash{glob: pathGlob, after: after, mode: mode, times: times})
}

// Clear removes all fault rules and crash rules.
func (b *Bucket) Clear() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.rules, b.crashes = nil, nil
}

// Ops returns the operations so far as "op key" strings, in order. Write
// and Read are not recorded (their number depends on buffering).
func (b *Bucket) Ops() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.log...)
}

// ResetOps clears the operation log.
func (b *Bucket) ResetOps() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.log = nil
}

func match(glob, key string) bool {
	ok, err := path.Match(glob, key)
	return err == nil && ok
}

// check records op (unless Write/Read) and returns an injected error.
func (b *Bucket) check(op Op, key string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if op != OpWrite && op != OpRead {
		b.log = append(b.log, string(op)+" "+key)
	}
	for _, r := range b.rules {
		if r.op != op || r.times == 0 || !match(r.glob, key) {
			continue
		}
		if r.times > 0 {
			r.times--
		}
		return fmt.Errorf("%s %s: %w", op, key, r.err)
	}
	return nil
}

func (b *Bucket) takeCrash(key string) *crash {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range b.crashes {
		if c.times == 0 || !match(c.glob, key) {
			continue
		}
		if c.times > 0 {
			c.times--
		}
		cc := *c
		return &cc
	}
	return nil
}

// NewWriter implements storage.Bucket.
func (b *Bucket) NewWriter(ctx context.Context, key string) (storage.ObjectWriter, error) {
	if err := b.check(OpNewWriter, key); err != nil {
		return nil, err
	}
	w, err := b.inner.NewWriter(ctx, key)
	if err != nil {
		return nil, err
	}
	return &writer{b: b, w: w, key: key, crash: b.takeCrash(key)}, nil
}

var _ storage.ObjectWriter = (*writer)(nil)

type writer struct {
	b     *Bucket
	w     storage.ObjectWriter
	key   string
	crash *crash
	n     int64
}

func (w *writer) Write(p []byte) (int, error) {
	if err := w.b.check(OpWrite, w.key); err != nil {
		return 0, err
	}
	if w.crash != nil {
		keep := max(0, min(int64(len(p)), w.crash.after-w.n))
		w.n += int64(len(p))
		if keep > 0 {
			if _, err := w.w.Write(p[:keep]); err != nil {
				return 0, err
			}
		}
		return len(p), nil // the rest is lost with the "crashed" process
	}
	n, err := w.w.Write(p)
	w.n += int64(n)
	return n, err
}

func (w *writer) Finish() error {
	if err := w.b.check(OpFinish, w.key); err != nil {
		_ = w.w.Abort()
		return err
	}
	if w.crash != nil && w.n > w.crash.after {
		if w.crash.mode == LeavePartial {
			if err := w.w.Finish(); err != nil {
				return err
			}
		} else {
			_ = w.w.Abort()
		}
		return fmt.Errorf("finish %s: crashed after %d of %d bytes: %w", w.key, w.crash.after, w.n, ErrInjected)
	}
	return w.w.Finish()
}

func (w *writer) Abort() error {
	_ = w.b.check(OpAbort, w.key)
	return w.w.Abort()
}

// NewReader implements storage.Bucket.
func (b *Bucket) NewReader(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := b.check(OpNewReader, key); err != nil {
		return nil, err
	}
	r, err := b.inner.NewReader(ctx, key)
	if err != nil {
		return nil, err
	}
	return &reader{b: b, r: r, key: key}, nil
}

type reader struct {
	b   *Bucket
	r   io.ReadCloser
	key string
}

func (r *reader) Read(p []byte) (int, error) {
	if err := r.b.check(OpRead, r.key); err != nil {
		return 0, err
	}
	return r.r.Read(p)
}

func (r *reader) Close() error { return r.r.Close() }

// Attributes implements storage.Bucket.
func (b *Bucket) Attributes(ctx context.Context, key string) (storage.ObjectInfo, error) {
	if err := b.check(OpAttributes, key); err != nil {
		return storage.ObjectInfo{}, err
	}
	return b.inner.Attributes(ctx, key)
}

// Delete implements storage.Bucket.
func (b *Bucket) Delete(ctx context.Context, key string) error {
	if err := b.check(OpDelete, key); err != nil {
		return err
	}
	return b.inner.Delete(ctx, key)
}

// List implements storage.Bucket. Fault rules match the prefix.
func (b *Bucket) List(ctx context.Context, prefix, delimiter string) ([]storage.ObjectInfo, error) {
	if err := b.check(OpList, prefix); err != nil {
		return nil, err
	}
	return b.inner.List(ctx, prefix, delimiter)
}

// Close implements storage.Bucket; it closes the wrapped bucket.
func (b *Bucket) Close() error { return b.inner.Close() }
