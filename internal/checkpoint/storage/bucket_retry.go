package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/url"
	"syscall"
	"time"
)

// Retries.
//
// Object stores fail now and then in ways that go away: an S3 503 SlowDown
// or 500 InternalError, a reset connection, a timeout. The AWS SDK already
// retries each HTTP request (3 attempts, randomized exponential backoff);
// on top of that, Open wraps every object-store bucket (not local
// directories, not mem://) in a retryBucket, which retries whole
// operations on transient errors (IsTransient) with exponential backoff and
// jitter, a bounded number of times, and logs a warning per retry:
//
//   - Attributes, List, Delete and opening a reader are repeated as they
//     are (each is idempotent; deleting twice is not an error to callers,
//     who ignore ErrNotFound on delete).
//   - A write is kept in memory up to RetryOptions.MaxReplayBytes and sent
//     at Finish; if the upload fails it is sent again whole. This is safe
//     because every checkpoint file has a name no other write uses (file
//     names carry the run and checkpoint, _metadata belongs to one
//     checkpoint id), and an upload publishes its object atomically: a
//     retry after an upload that did land rewrites the same bytes. A
//     larger object is streamed as it is written and is not sent again
//     (the SDK still retries each part of its multipart upload).
//   - Reads that fail mid-stream are not retried here: the reader's caller
//     sees the error (and every read is verified by size and checksum).
//   - Conditional creates (the job lease) are not retried: a retry after an
//     upload that landed would find its own object and report a conflict.
//
// The waits end early, with the operation's last error, when the context
// the operation was started with ends: for a checkpoint's files that is
// the context of the task's asynchronous phase.

// Defaults of RetryOptions.
const (
	DefaultRetryAttempts   = 5
	DefaultRetryBackoff    = 200 * time.Millisecond
	DefaultRetryMaxBackoff = 5 * time.Second
	DefaultMaxReplayBytes  = 16 << 20
)

// RetryOptions configure the retries of transient errors on object stores
// (see Options.Retry). The zero value means every default.
type RetryOptions struct {
	// MaxAttempts is how many times an operation is tried, the first
	// attempt included. Default DefaultRetryAttempts (5); 1 disables
	// weir's retries (the SDK's own remain).
	MaxAttempts int
	// InitialBackoff is the wait before the second attempt; each later
	// wait doubles, up to MaxBackoff. Every wait is drawn uniformly from
	// [d/2, d] (jitter) so that subtasks failing together do not retry
	// together. Default DefaultRetryBackoff (200ms).
	InitialBackoff time.Duration
	// MaxBackoff caps a wait. Default DefaultRetryMaxBackoff (5s).
	MaxBackoff time.Duration
	// MaxReplayBytes is the largest object that is kept in memory while it
	// is written so that a failed upload can be sent again whole. Larger
	// objects stream and are not retried as a whole. Default
	// DefaultMaxReplayBytes (16 MiB, the size below which the S3 driver
	// sends an object in one request and holds it in memory anyway);
	// negative: no object is kept, writes are not retried.
	MaxReplayBytes int64

	// sleep waits for d or until ctx ends (test knob; nil: a timer).
	sleep func(ctx context.Context, d time.Duration) error
	// jitter returns a number in [0, 1) (test knob; nil: math/rand/v2).
	jitter func() float64
}

// EnsureDefaults fills in the defaults of unset fields.
func (o *RetryOptions) EnsureDefaults() {
	if o.MaxAttempts == 0 {
		o.MaxAttempts = DefaultRetryAttempts
	}
	if o.InitialBackoff == 0 {
		o.InitialBackoff = DefaultRetryBackoff
	}
	if o.MaxBackoff == 0 {
		o.MaxBackoff = DefaultRetryMaxBackoff
	}
	if o.MaxReplayBytes == 0 {
		o.MaxReplayBytes = DefaultMaxReplayBytes
	}
	if o.sleep == nil {
		o.sleep = sleepCtx
	}
	if o.jitter == nil {
		o.jitter = rand.Float64
	}
}

// Validate reports every invalid field at once.
func (o *RetryOptions) Validate() error {
	var errs []error
	if o.MaxAttempts < 0 {
		errs = append(errs, fmt.Errorf("retry attempts %d: must be at least 1 (1: no retries)", o.MaxAttempts))
	}
	if o.InitialBackoff < 0 {
		errs = append(errs, fmt.Errorf("retry backoff %v: must be positive", o.InitialBackoff))
	}
	if o.MaxBackoff < 0 {
		errs = append(errs, fmt.Errorf("retry max backoff %v: must be positive", o.MaxBackoff))
	}
	if o.InitialBackoff > 0 && o.MaxBackoff > 0 && o.MaxBackoff < o.InitialBackoff {
		errs = append(errs, fmt.Errorf("retry max backoff %v: must be at least the initial backoff %v", o.MaxBackoff, o.InitialBackoff))
	}
	return errors.Join(errs...)
}

// backoff returns the wait after the given failed attempt (1-based).
func (o *RetryOptions) backoff(attempt int) time.Duration {
	d := o.InitialBackoff
	for i := 1; i < attempt && d < o.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, o.MaxBackoff)
	return d/2 + time.Duration(o.jitter()*float64(d/2+1))
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// IsTransient reports whether err is a failure of an object store that may
// go away if the operation is tried again: HTTP 500, 502, 503, 504 and
// 429 answers, throttling and internal-error codes (SlowDown,
// InternalError, ServiceUnavailable, RequestTimeout, Throttling...), and
// transport failures (reset or refused connections, unexpected EOF,
// timeouts). Context cancellation and deadlines, ErrNotFound, ErrCorrupt
// and other answers (403, 404, 412, ...) are not transient.
func IsTransient(err error) bool {
	switch {
	case err == nil,
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, ErrNotFound), errors.Is(err, ErrCorrupt), errors.Is(err, ErrInvalidName),
		errors.Is(err, ErrUnsupportedVersion), errors.Is(err, ErrLockLost), errors.Is(err, errExists):
		return false
	}
	// An error code (smithy.APIError in the AWS SDK) says most.
	var coded interface{ ErrorCode() string }
	if errors.As(err, &coded) {
		if _, ok := transientCodes[coded.ErrorCode()]; ok {
			return true
		}
	}
	// Then the HTTP status (awshttp.ResponseError).
	var status interface{ HTTPStatusCode() int }
	if errors.As(err, &status) {
		switch status.HTTPStatusCode() {
		case 429, 500, 502, 503, 504:
			return true
		}
		if status.HTTPStatusCode() != 0 {
			return false // an answer, and not one that goes away
		}
	}
	// No answer at all: the request did not get through.
	var ue *url.Error
	if errors.As(err, &ue) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ETIMEDOUT) ||
		errors.Is(err, io.ErrUnexpectedEOF)
}

// transientCodes are the error codes of answers worth retrying (S3's and
// the AWS SDK's throttling codes).
var transientCodes = map[string]struct{}{
	"SlowDown": {}, "InternalError": {}, "ServiceUnavailable": {}, "RequestTimeout": {},
	"RequestTimeoutException": {}, "Throttling": {}, "ThrottlingException": {},
	"ThrottledException": {}, "RequestThrottled": {}, "RequestThrottledException": {},
	"TooManyRequestsException": {}, "RequestLimitExceeded": {}, "BandwidthLimitExceeded": {},
	"OperationAborted": {},
}

// retryBucket retries the operations of b on transient errors; see the
// comment at the top of this file.
type retryBucket struct {
	b   Bucket
	o   RetryOptions // defaults filled in
	log *slog.Logger
}

var (
	_ Bucket             = (*retryBucket)(nil)
	_ conditionalCreator = (*retryBucket)(nil)
	_ ObjectWriter       = (*replayWriter)(nil)
)

// NewRetryBucket wraps b so that its operations are retried on transient
// errors as o.Retry says, with a warning to o.Logger per retry, as Open
// does for object stores. Use it for buckets opened with a custom client
// (NewBlobBucket); the returned Bucket owns b. Invalid options are
// reported, all at once.
func NewRetryBucket(b Bucket, o Options) (Bucket, error) {
	if err := o.Retry.Validate(); err != nil {
		return nil, err
	}
	o.Retry.EnsureDefaults()
	return newRetryBucket(b, o.Retry, o.Logger), nil
}

// newRetryBucket wraps b; o must have its defaults and be valid.
func newRetryBucket(b Bucket, o RetryOptions, log *slog.Logger) Bucket {
	if o.MaxAttempts <= 1 && o.MaxReplayBytes < 0 {
		return b
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &retryBucket{b: b, o: o, log: log}
}

// do runs f until it succeeds, fails for good, or MaxAttempts ran out;
// op and key name the operation in warnings and in the error.
func (r *retryBucket) do(ctx context.Context, op, key string, f func() error) error {
	for attempt := 1; ; attempt++ {
		err := f()
		if err == nil || !IsTransient(err) {
			return err
		}
		if attempt >= r.o.MaxAttempts {
			if attempt > 1 {
				return fmt.Errorf("%w (gave up after %d attempts)", err, attempt)
			}
			return err
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%w (not retried: %w)", err, context.Cause(ctx))
		}
		d := r.o.backoff(attempt)
		r.log.Warn("checkpoint storage: transient error, retrying",
			"op", op, "key", key, "attempt", attempt, "max_attempts", r.o.MaxAttempts, "backoff", d, "err", err)
		if werr := r.o.sleep(ctx, d); werr != nil {
			return fmt.Errorf("%w (retry abandoned after %d attempts: %w)", err, attempt, werr)
		}
	}
}

func (r *retryBucket) NewWriter(ctx context.Context, key string) (ObjectWriter, error) {
	if r.o.MaxReplayBytes < 0 {
		var w ObjectWriter
		err := r.do(ctx, "create", key, func() (err error) { w, err = r.b.NewWriter(ctx, key); return err })
		return w, err
	}
	return &replayWriter{r: r, ctx: ctx, key: key}, nil
}

func (r *retryBucket) NewReader(ctx context.Context, key string) (io.ReadCloser, error) {
	var rc io.ReadCloser
	err := r.do(ctx, "open", key, func() (err error) { rc, err = r.b.NewReader(ctx, key); return err })
	return rc, err
}

func (r *retryBucket) Attributes(ctx context.Context, key string) (ObjectInfo, error) {
	var info ObjectInfo
	err := r.do(ctx, "stat", key, func() (err error) { info, err = r.b.Attributes(ctx, key); return err })
	return info, err
}

func (r *retryBucket) Delete(ctx context.Context, key string) error {
	attempt := 0
	return r.do(ctx, "delete", key, func() error {
		attempt++
		err := r.b.Delete(ctx, key)
		if attempt > 1 && errors.Is(err, ErrNotFound) {
			return nil // an earlier attempt that reported a failure deleted it
		}
		return err
	})
}

func (r *retryBucket) List(ctx context.Context, prefix, delimiter string) ([]ObjectInfo, error) {
	var out []ObjectInfo
	err := r.do(ctx, "list", prefix, func() (err error) { out, err = r.b.List(ctx, prefix, delimiter); return err })
	return out, err
}

// createIfAbsent is not retried: see the comment at the top of the file.
func (r *retryBucket) createIfAbsent(ctx context.Context, key string, data []byte) error {
	return createIfAbsent(ctx, r.b, key, data)
}

func (r *retryBucket) Close() error { return r.b.Close() }

// replayWriter keeps what is written in memory and uploads it at Finish,
// again on a transient failure; past MaxReplayBytes it streams instead.
type replayWriter struct {
	r    *retryBucket
	ctx  context.Context
	key  string
	buf  []byte
	w    ObjectWriter // set once streaming
	done bool
}

func (w *replayWriter) Write(p []byte) (int, error) {
	switch {
	case w.done:
		return 0, errors.New("storage: write after Finish or Abort")
	case w.w != nil:
		return w.w.Write(p)
	case int64(len(w.buf)+len(p)) <= w.r.o.MaxReplayBytes:
		w.buf = append(w.buf, p...)
		return len(p), nil
	}
	// Too large to keep: stream from here on, without whole-object retries.
	err := w.r.do(w.ctx, "create", w.key, func() (err error) { w.w, err = w.r.b.NewWriter(w.ctx, w.key); return err })
	if err != nil {
		return 0, err
	}
	if _, err := w.w.Write(w.buf); err != nil {
		return 0, err
	}
	w.buf = nil
	return w.w.Write(p)
}

func (w *replayWriter) Finish() error {
	if w.done {
		return errors.New("storage: Finish after Finish or Abort")
	}
	w.done = true
	if w.w != nil {
		return w.w.Finish()
	}
	buf := w.buf
	w.buf = nil
	return w.r.do(w.ctx, "write", w.key, func() error {
		ow, err := w.r.b.NewWriter(w.ctx, w.key)
		if err != nil {
			return err
		}
		if _, err := ow.Write(buf); err != nil {
			_ = ow.Abort()
			return err
		}
		return ow.Finish()
	})
}

func (w *replayWriter) Abort() error {
	if w.done {
		return nil
	}
	w.done, w.buf = true, nil
	if w.w != nil {
		return w.w.Abort()
	}
	return nil
}
