package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"slices"
	"syscall"
	"testing"
	"time"

	"gocloud.dev/blob/memblob"
)

type codedErr struct {
	code   string
	status int
}

func (e codedErr) Error() string       { return fmt.Sprintf("api error %s (%d)", e.code, e.status) }
func (e codedErr) ErrorCode() string   { return e.code }
func (e codedErr) HTTPStatusCode() int { return e.status }

func TestIsTransient(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{errors.New("disk full"), false},
		{context.Canceled, false},
		{fmt.Errorf("write: %w", context.DeadlineExceeded), false},
		{fmt.Errorf("x: %w", ErrNotFound), false},
		{fmt.Errorf("x: %w", ErrCorrupt), false},
		{fmt.Errorf("x: %w", ErrLockLost), false},
		{fmt.Errorf("blob: %w", codedErr{"SlowDown", 503}), true},
		{codedErr{"InternalError", 500}, true},
		{codedErr{"", 502}, true},
		{codedErr{"", 504}, true},
		{codedErr{"TooManyRequests", 429}, true},
		{codedErr{"RequestTimeout", 400}, true},
		{codedErr{"AccessDenied", 403}, false},
		{codedErr{"NoSuchBucket", 404}, false},
		{codedErr{"PreconditionFailed", 412}, false},
		{&url.Error{Op: "Put", URL: "http://x", Err: io.EOF}, true},
		{&url.Error{Op: "Put", URL: "http://x", Err: context.Canceled}, false},
		{fmt.Errorf("read: %w", syscall.ECONNRESET), true},
		{fmt.Errorf("dial: %w", syscall.ECONNREFUSED), true},
		{io.ErrUnexpectedEOF, true},
	} {
		if got := IsTransient(c.err); got != c.want {
			t.Errorf("IsTransient(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// The waits double from InitialBackoff up to MaxBackoff, each drawn from
// [d/2, d].
func TestRetryBackoff(t *testing.T) {
	o := RetryOptions{InitialBackoff: 100 * time.Millisecond, MaxBackoff: time.Second}
	for _, j := range []float64{0, 0.999999} {
		o.jitter = func() float64 { return j }
		var got []time.Duration
		for a := 1; a <= 6; a++ {
			got = append(got, o.backoff(a).Round(time.Millisecond))
		}
		want := []time.Duration{50, 100, 200, 400, 500, 500}
		if j > 0 {
			want = []time.Duration{100, 200, 400, 800, 1000, 1000}
		}
		for i := range want {
			want[i] *= time.Millisecond
		}
		if !slices.Equal(got, want) {
			t.Errorf("jitter %v: waits %v, want %v", j, got, want)
		}
	}
}

// do retries a transient error until MaxAttempts, waiting the backoff
// between attempts, and returns a permanent error at once.
func TestRetryDo(t *testing.T) {
	var waits []time.Duration
	o := RetryOptions{MaxAttempts: 4, InitialBackoff: 10 * time.Millisecond, MaxBackoff: time.Second,
		jitter: func() float64 { return 0 },
		sleep:  func(_ context.Context, d time.Duration) error { waits = append(waits, d); return nil }}
	o.EnsureDefaults()
	r := newRetryBucket(NewBlobBucket(memblob.OpenBucket(nil)), o, nil).(*retryBucket)
	defer r.Close()
	ctx := context.Background()
	calls := 0
	err := r.do(ctx, "write", "k", func() error { calls++; return codedErr{"SlowDown", 503} })
	if calls != 4 || !slices.Equal(waits, []time.Duration{5 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond}) {
		t.Errorf("%d calls, waits %v; want 4 calls, waits 5ms 10ms 20ms", calls, waits)
	}
	if err == nil || err.Error() != "api error SlowDown (503) (gave up after 4 attempts)" {
		t.Errorf("err = %v", err)
	}
	calls, waits = 0, nil
	if err := r.do(ctx, "write", "k", func() error { calls++; return errors.New("permanent") }); calls != 1 || err == nil {
		t.Errorf("permanent error: %d calls, %v", calls, err)
	}
	calls = 0
	if err := r.do(ctx, "write", "k", func() error {
		if calls++; calls < 3 {
			return codedErr{"InternalError", 500}
		}
		return nil
	}); err != nil || calls != 3 {
		t.Errorf("two failures then success: %d calls, %v", calls, err)
	}
}
