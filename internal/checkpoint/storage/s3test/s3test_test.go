package s3test_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/checkpoint/storage/s3test"
)

// Start's URL opens with storage.Open, and what is written there is in the
// server's bucket under the prefix.
func TestStartURLOpens(t *testing.T) {
	ctx := context.Background()
	u := s3test.Start(t)
	if !strings.HasPrefix(u, "s3://"+s3test.DefaultBucket+"/checkpoints?") {
		t.Fatalf("URL %s", u)
	}
	s, err := storage.Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.WriteMetadata(ctx, "job", 1, []byte("m")); err != nil {
		t.Fatal(err)
	}
	if got, err := s.ReadMetadata(ctx, "job", 1); err != nil || string(got) != "m" {
		t.Fatalf("ReadMetadata = %q, %v", got, err)
	}
}

// Faults apply to the requests they match, as many times as they say, in
// the order they were injected; every request is counted.
func TestInjectAndCount(t *testing.T) {
	srv := s3test.NewServer(t)
	b := storage.NewBlobBucket(srv.OpenBucket("p", 1))
	defer b.Close()
	ctx := context.Background()
	put := func(key string) error {
		w, err := b.NewWriter(ctx, key)
		if err != nil {
			return err
		}
		w.Write([]byte(key))
		return w.Finish()
	}
	srv.Inject(s3test.Fault{Method: "PUT", Key: "p/a/*", Times: 1, Status: http.StatusInternalServerError})
	srv.Inject(s3test.SlowDown("put", "p/a/*", 1))
	srv.Inject(s3test.Fault{Method: "GET", Key: "p/a/x", Times: 1, Drop: true})
	for i, want := range []string{"InternalError", "SlowDown", ""} {
		err := put("a/x")
		if (want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), want)) {
			t.Fatalf("put %d: %v, want %q", i, err, want)
		}
	}
	if err := put("b/y"); err != nil {
		t.Fatalf("put outside the faults' keys: %v", err)
	}
	if _, err := b.NewReader(ctx, "a/x"); err == nil {
		// Go's HTTP client may resend a GET on a dropped reused
		// connection; then the fault was used up by that first attempt.
		if n := srv.Count("GET", "p/a/x"); n != 2 {
			t.Fatalf("read after a dropped connection succeeded after %d requests, want 2", n)
		}
	}
	if n := srv.Count("PUT", "p/a/x"); n != 3 {
		t.Errorf("%d PUT p/a/x, want 3", n)
	}
	var faults []int
	for _, r := range srv.Requests() {
		faults = append(faults, r.Fault)
	}
	if faults[0] != 500 || faults[1] != 503 || faults[2] != 0 || faults[4] != -1 {
		t.Errorf("faults recorded %v, want 500 503 0 0 -1 ...", faults)
	}
	srv.Inject(s3test.SlowDown("", "", 0))
	if err := put("c/z"); err == nil {
		t.Fatal("put with a fault on everything succeeded")
	}
	srv.Clear()
	if err := put("c/z"); err != nil {
		t.Fatalf("put after Clear: %v", err)
	}
}

// Latency delays a request and then serves it; a client that gives up
// earlier gets its own error, and a delayed request does not hold up the
// server's shutdown.
func TestLatency(t *testing.T) {
	srv := s3test.NewServer(t)
	// Not closed: Close would wait for the request left hanging below,
	// which only the server's shutdown, after this test, ends.
	b := storage.NewBlobBucket(srv.OpenBucket("", 1))
	ctx := context.Background()
	w, _ := b.NewWriter(ctx, "k")
	w.Write([]byte("v"))
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	srv.Inject(s3test.Latency("GET", "k", 50*time.Millisecond, 1))
	start := time.Now()
	r, err := b.NewReader(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(r)
	r.Close()
	if d := time.Since(start); d < 50*time.Millisecond || string(data) != "v" {
		t.Fatalf("delayed read took %v and read %q, want >= 50ms and v", d, data)
	}
	srv.Inject(s3test.Latency("GET", "k", time.Hour, 0))
	tctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := b.NewReader(tctx, "k"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("read with an hour of latency and a 50ms deadline: %v", err)
	}
	go func() { // left hanging: the cleanup must end it
		if r, err := b.NewReader(ctx, "k"); err == nil {
			r.Close()
		}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for srv.Count("GET", "k") < 3 {
		if time.Now().After(deadline) {
			t.Fatal("the third read never reached the server")
		}
		time.Sleep(time.Millisecond)
	}
}

// SeaweedFS skips without a weed binary; with one, its URL opens.
func TestSeaweedFS(t *testing.T) {
	u := s3test.SeaweedFS(t)
	ctx := context.Background()
	s, err := storage.Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.WriteMetadata(ctx, "job", 1, []byte("m")); err != nil {
		t.Fatal(err)
	}
}
