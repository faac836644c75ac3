package storage_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/checkpoint/storage/s3test"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// fastRetries keep the retry tests fast: 1ms doubling up to 4ms.
var fastRetries = storage.RetryOptions{InitialBackoff: time.Millisecond, MaxBackoff: 4 * time.Millisecond}

// openS3 starts a gofakes3 server and opens storage on its prefix "chk"
// through a client whose AWS SDK makes one attempt per request (so that
// every injected failure reaches weir's retries), with retry options o,
// logging into the returned buffer.
func openS3(t *testing.T, o storage.RetryOptions) (*s3test.Server, *storage.Storage, *syncBuffer) {
	t.Helper()
	srv := s3test.NewServer(t)
	logs := &syncBuffer{}
	b, err := storage.NewRetryBucket(storage.NewBlobBucket(srv.OpenBucket("chk", 1)), storage.Options{
		Logger: slog.New(slog.NewTextHandler(logs, nil)), Retry: o})
	if err != nil {
		t.Fatal(err)
	}
	s := storage.OpenBucket(b)
	t.Cleanup(func() { s.Close() })
	return srv, s, logs
}

// Transient failures of every operation (503 SlowDown, 500 InternalError,
// a dropped connection), fewer than the attempts, are retried with a
// warning each that names the object and the error, and the operation
// succeeds.
func TestS3RetriesTransientFailures(t *testing.T) {
	ctx := context.Background()
	type op struct {
		name, method, key string
		// run performs the operation on s, prepared by setup.
		run func(s *storage.Storage) error
	}
	data := bytes.Repeat([]byte("state"), 1000)
	var handle storage.FileHandle
	setup := func(t *testing.T, s *storage.Storage) {
		handle = writeFile(t, s, "job", 1, "a.kst", data)
		if err := s.WriteMetadata(ctx, "job", 1, []byte("one")); err != nil {
			t.Fatal(err)
		}
	}
	ops := []op{
		{"write-file", "PUT", "chk/job/chk-2/b.kst", func(s *storage.Storage) error {
			w, err := s.CreateFile(ctx, "job", 2, "b.kst")
			if err != nil {
				return err
			}
			h, err := storage.WriteAll(w, func(w io.Writer) error { _, err := w.Write(data); return err })
			if err == nil && (h.Size != int64(len(data))) {
				return errors.New("wrong size")
			}
			if err == nil {
				_, err = s.ReadFile(ctx, "job", h)
			}
			return err
		}},
		{"write-metadata", "PUT", "chk/job/chk-2/_metadata", func(s *storage.Storage) error {
			if err := s.WriteMetadata(ctx, "job", 2, []byte("two")); err != nil {
				return err
			}
			_, err := s.ReadMetadata(ctx, "job", 2)
			return err
		}},
		{"read-file", "GET", "chk/job/chk-1/a.kst", func(s *storage.Storage) error {
			got, err := s.ReadFile(ctx, "job", handle)
			if err == nil && !bytes.Equal(got, data) {
				return errors.New("wrong content")
			}
			return err
		}},
		{"latest", "GET", "", func(s *storage.Storage) error {
			c, err := s.Latest(ctx, "job", nil)
			if err == nil && c.ID != 1 {
				return errors.New("wrong checkpoint")
			}
			return err
		}},
		{"delete", "DELETE", "chk/job/chk-1/a.kst", func(s *storage.Storage) error {
			return s.DeleteFile(ctx, "job", handle.Path)
		}},
		{"attributes", "HEAD", "chk/job/chk-1/_metadata", func(s *storage.Storage) error {
			l, err := s.ListCheckpoints(ctx, "job")
			if err == nil && (len(l) != 1 || !l[0].Complete) {
				return errors.New("checkpoint 1 not complete")
			}
			return err
		}},
	}
	faults := map[string]func(method, key string) s3test.Fault{
		"slowdown": func(m, k string) s3test.Fault { return s3test.SlowDown(m, k, 2) },
		"internal": func(m, k string) s3test.Fault {
			return s3test.Fault{Method: m, Key: k, Times: 2, Status: http.StatusInternalServerError}
		},
		"drop": func(m, k string) s3test.Fault { return s3test.Fault{Method: m, Key: k, Times: 2, Drop: true} },
	}
	for _, o := range ops {
		for fname, fault := range faults {
			t.Run(o.name+"/"+fname, func(t *testing.T) {
				srv, s, logs := openS3(t, fastRetries)
				setup(t, s)
				before := srv.Count(o.method, o.key)
				srv.Inject(fault(o.method, o.key))
				if err := o.run(s); err != nil {
					t.Fatalf("%s with 2 transient failures: %v\n%s", o.name, err, logs)
				}
				if n := srv.Count(o.method, o.key) - before; n < 3 {
					t.Errorf("%d %s requests, want at least 3 (2 failed, 1 retried)", n, o.method)
				}
				// Go's HTTP client itself resends an idempotent request
				// (GET, HEAD) whose reused connection was dropped, so a drop
				// may not reach weir.
				warnings, want := strings.Count(logs.String(), "transient error, retrying"), 2
				if fname == "drop" && o.method != "PUT" && warnings >= 1 {
					want = warnings
				}
				if warnings != want {
					t.Errorf("%d retry warnings, want %d:\n%s", warnings, want, logs)
				}
				if key := strings.TrimPrefix(o.key, "chk/"); key != "" && !strings.Contains(logs.String(), "key="+key) {
					t.Errorf("warnings do not name %s:\n%s", key, logs)
				}
			})
		}
	}
}

// A failure that persists is retried MaxAttempts times and then
// returned, saying so; the failed write leaves no object behind.
func TestS3GivesUpAfterMaxAttempts(t *testing.T) {
	o := fastRetries
	o.MaxAttempts = 3
	srv, s, logs := openS3(t, o)
	srv.Inject(s3test.SlowDown("PUT", "chk/job/chk-1/*", 0))
	ctx := context.Background()
	w, err := s.CreateFile(ctx, "job", 1, "f")
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("x"))
	_, err = w.Finish()
	if err == nil || !storage.IsTransient(err) || !strings.Contains(err.Error(), "gave up after 3 attempts") || !strings.Contains(err.Error(), "SlowDown") {
		t.Fatalf("err = %v, want a transient SlowDown error after 3 attempts", err)
	}
	if n := srv.Count("PUT", "chk/job/chk-1/f"); n != 3 {
		t.Errorf("%d uploads, want 3", n)
	}
	if n := strings.Count(logs.String(), "level=WARN"); n != 2 {
		t.Errorf("%d warnings, want 2 (one per retry):\n%s", n, logs)
	}
	srv.Clear()
	if l, err := s.ListCheckpoints(ctx, "job"); err != nil || len(l) != 0 {
		t.Fatalf("after the failed upload: %v, %v; want nothing", l, err)
	}
}

// Answers that do not go away (403 AccessDenied, 404, 400) are not
// retried.
func TestS3DoesNotRetryPermanentErrors(t *testing.T) {
	srv, s, logs := openS3(t, fastRetries)
	srv.Inject(s3test.Fault{Method: "PUT", Key: "chk/job/chk-1/f", Status: http.StatusForbidden, Code: "AccessDenied"})
	w, err := s.CreateFile(context.Background(), "job", 1, "f")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Finish(); err == nil || storage.IsTransient(err) || !strings.Contains(err.Error(), "AccessDenied") {
		t.Fatalf("err = %v, want a permanent AccessDenied", err)
	}
	if n := srv.Count("PUT", "chk/job/chk-1/f"); n != 1 {
		t.Errorf("%d uploads, want 1", n)
	}
	if logs.String() != "" {
		t.Errorf("retry warnings for a permanent error:\n%s", logs)
	}
}

// The waits between attempts end with the context the write was started
// with: a canceled checkpoint stops retrying at once.
func TestS3RetryStopsWithContext(t *testing.T) {
	o := storage.RetryOptions{MaxAttempts: 100, InitialBackoff: time.Hour, MaxBackoff: time.Hour}
	srv, s, logs := openS3(t, o)
	srv.Inject(s3test.SlowDown("PUT", "", 0))
	ctx, cancel := context.WithCancel(context.Background())
	w, err := s.CreateFile(ctx, "job", 1, "f")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := w.Finish()
		done <- err
	}()
	waitUntil(t, 10*time.Second, "the first retry warning", func() bool { return strings.Contains(logs.String(), "retrying") })
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "SlowDown") {
			t.Fatalf("err = %v, want the SlowDown error and the cancellation", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Finish still waiting 10s after its context was canceled")
	}
}

// An object larger than MaxReplayBytes streams: it is stored as usual,
// and a failed upload is not sent again whole.
func TestS3LargeObjectsStream(t *testing.T) {
	o := fastRetries
	o.MaxReplayBytes = 1 << 10
	srv, s, _ := openS3(t, o)
	ctx := context.Background()
	data := bytes.Repeat([]byte("0123456789abcdef"), 512) // 8 KiB
	h := writeFile(t, s, "job", 1, "big", data)
	if got, err := s.ReadFile(ctx, "job", h); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back: %d bytes, %v", len(got), err)
	}
	srv.Inject(s3test.SlowDown("PUT", "chk/job/chk-2/big", 1))
	w, err := s.CreateFile(ctx, "job", 2, "big")
	if err != nil {
		t.Fatal(err)
	}
	w.Write(data)
	if _, err := w.Finish(); err == nil || !storage.IsTransient(err) {
		t.Fatalf("streamed upload with a failure: %v, want the transient error", err)
	}
	if n := srv.Count("PUT", "chk/job/chk-2/big"); n != 1 {
		t.Errorf("%d uploads of a streamed object, want 1", n)
	}
}

// The AWS SDK retries a failed request on its own (3 attempts): one 500
// never reaches weir's retries.
func TestS3SDKRetriesFirst(t *testing.T) {
	srv := s3test.NewServer(t)
	logs := &syncBuffer{}
	s, err := storage.OpenWith(context.Background(), srv.URL("chk"), storage.Options{
		Logger: slog.New(slog.NewTextHandler(logs, nil)), Retry: fastRetries})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	srv.Inject(s3test.Fault{Method: "PUT", Key: "chk/job/chk-1/f", Times: 1, Status: http.StatusInternalServerError})
	writeFile(t, s, "job", 1, "f", []byte("x"))
	if n := srv.Count("PUT", "chk/job/chk-1/f"); n != 2 {
		t.Errorf("%d uploads, want 2", n)
	}
	if logs.String() != "" {
		t.Errorf("weir retried what the SDK retried:\n%s", logs)
	}
}

func TestRetryOptionsValidate(t *testing.T) {
	_, err := storage.OpenWith(context.Background(), "mem://", storage.Options{Retry: storage.RetryOptions{
		MaxAttempts: -1, InitialBackoff: 2 * time.Second, MaxBackoff: time.Second}})
	if err == nil || !strings.Contains(err.Error(), "retry attempts -1") || !strings.Contains(err.Error(), "at least the initial backoff") {
		t.Fatalf("err = %v, want both problems", err)
	}
}

// waitUntil polls cond every millisecond until it holds, and fails the
// test naming what never happened after timeout.
func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(time.Millisecond)
	}
}

// BenchmarkS3WriteFile measures a checkpoint file upload to gofakes3 with
// weir's retries (the write held in memory and sent at Finish) and without
// (streamed to the SDK as written).
func BenchmarkS3WriteFile(b *testing.B) {
	for _, size := range []int{64 << 10, 4 << 20} {
		for _, mode := range []struct {
			name string
			o    storage.RetryOptions
		}{{"retry", storage.RetryOptions{}}, {"noretry", storage.RetryOptions{MaxAttempts: 1, MaxReplayBytes: -1}}} {
			b.Run(fmt.Sprintf("%dKiB/%s", size>>10, mode.name), func(b *testing.B) {
				srv := s3test.NewServer(b)
				bk, err := storage.NewRetryBucket(storage.NewBlobBucket(srv.OpenBucket("chk", 3)), storage.Options{Retry: mode.o})
				if err != nil {
					b.Fatal(err)
				}
				s := storage.OpenBucket(bk)
				defer s.Close()
				data := bytes.Repeat([]byte{7}, size)
				ctx := context.Background()
				b.SetBytes(int64(size))
				b.ResetTimer()
				for i := range b.N {
					w, err := s.CreateFile(ctx, "job", 1, fmt.Sprintf("f%d", i))
					if err != nil {
						b.Fatal(err)
					}
					if _, err := storage.WriteAll(w, func(w io.Writer) error { _, err := w.Write(data); return err }); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
