// Package s3test runs S3-compatible servers for tests of checkpoint storage
// on s3:// URLs: an in-process gofakes3 server (memory backend) that can
// inject HTTP-level faults (error answers such as 503 SlowDown, dropped
// connections, latency), and, where a `weed` binary is installed, a real
// SeaweedFS server.
//
// Both hand out URLs that storage.Open accepts:
//
//	s3://<bucket>/<prefix>?endpoint=http://127.0.0.1:<port>&region=us-east-1&use_path_style=true&disable_https=true
//
// endpoint points the AWS SDK at the server, use_path_style puts the bucket
// in the path (no DNS name per bucket), disable_https matches the plain
// HTTP endpoint; region is required by the SDK and ignored by the servers.
// Credentials come from the SDK's usual chain: Start sets
// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and points the shared
// config and credentials files at nothing) with t.Setenv, so tests that use
// it cannot call t.Parallel, and child processes (the weir binary) inherit
// them. Importing this package links the s3blob driver.
//
// # Faults
//
// Server.Inject makes matching requests fail before they reach the fake
// S3: a Fault names a method and a glob on the object key (path.Match, '*'
// does not cross '/'), how many matching requests it affects, and what
// happens to them. The AWS SDK retries 5xx answers and dropped connections
// itself (3 attempts, with a randomized backoff of up to seconds, which
// gocloud's s3:// URLs cannot change: AWS_MAX_ATTEMPTS is ignored there);
// Server.OpenBucket opens the bucket through a client that makes exactly
// the attempts a test asks for, so that a test of weir's own retries
// counts failures exactly and stays fast.
package s3test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"gocloud.dev/blob"
	"gocloud.dev/blob/s3blob" // also registers s3:// URLs
)

// Region is the region the URLs name; the servers ignore it.
const Region = "us-east-1"

// DefaultBucket is the bucket Start and NewServer create.
const DefaultBucket = "weir-test"

// Start starts a gofakes3 server for the test (stopped by t.Cleanup) and
// returns the URL of the prefix "checkpoints" in its bucket.
func Start(t testing.TB) string {
	t.Helper()
	return NewServer(t).URL("checkpoints")
}

// Server is an in-process S3-compatible server with fault injection. Its
// methods are safe for concurrent use.
type Server struct {
	// Endpoint is the server's base URL, http://127.0.0.1:<port>.
	Endpoint string
	// Bucket is the bucket the server was started with.
	Bucket string

	t       testing.TB
	srv     *httptest.Server
	closing chan struct{}

	mu       sync.Mutex
	faults   []*activeFault
	requests []Request
}

// Request is one request the server received, fault-injected or not.
type Request struct {
	Method string
	// Key is the object key ("" for requests on the bucket, such as
	// listings).
	Key string
	// Query is the raw query string (multipart uploads carry uploadId and
	// partNumber there).
	Query string
	// Fault is the status code the request was failed with, -1 for a
	// dropped connection, 0 if it reached the fake S3.
	Fault int
}

// NewServer starts a gofakes3 server (memory backend) on 127.0.0.1 with
// bucket DefaultBucket, sets the credentials the AWS SDK needs (see the
// package doc) and stops the server when the test ends.
func NewServer(t testing.TB) *Server {
	t.Helper()
	SetCredentials(t)
	backend := s3mem.New()
	if err := backend.CreateBucket(DefaultBucket); err != nil {
		t.Fatalf("s3test: create bucket %s: %v", DefaultBucket, err)
	}
	faker := gofakes3.New(backend, gofakes3.WithAutoBucket(false))
	s := &Server{Bucket: DefaultBucket, t: t, closing: make(chan struct{})}
	s.srv = httptest.NewServer(s.wrap(faker.Server()))
	s.Endpoint = s.srv.URL
	t.Cleanup(func() {
		close(s.closing) // wakes delayed requests
		s.srv.Close()
	})
	return s
}

// SetCredentials sets, for the test, the environment the AWS SDK reads
// credentials from (fixed test keys) and points its shared config and
// credentials files at an empty directory, so that the developer's own
// AWS configuration plays no part.
func SetCredentials(t testing.TB) {
	t.Helper()
	none := filepath.Join(t.TempDir(), "none")
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID":           "weir-test",
		"AWS_SECRET_ACCESS_KEY":       "weir-test-secret",
		"AWS_SESSION_TOKEN":           "",
		"AWS_PROFILE":                 "",
		"AWS_CONFIG_FILE":             none,
		"AWS_SHARED_CREDENTIALS_FILE": none,
		"AWS_EC2_METADATA_DISABLED":   "true",
	} {
		t.Setenv(k, v)
	}
}

// OpenBucket opens prefix ("" for the bucket root) of the server's bucket
// through an S3 client of its own whose SDK makes sdkAttempts attempts per
// request (1: the SDK does not retry; the s3:// URLs always get the SDK's
// default of 3, see the package doc). The caller closes the bucket
// (storage.NewBlobBucket's Close does).
func (s *Server) OpenBucket(prefix string, sdkAttempts int) *blob.Bucket {
	s.t.Helper()
	client := s3.New(s3.Options{
		Region:       Region,
		BaseEndpoint: aws.String(s.Endpoint),
		UsePathStyle: true,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "weir-test", SecretAccessKey: "weir-test-secret"}, nil
		}),
		Retryer: retry.AddWithMaxAttempts(retry.NewStandard(func(o *retry.StandardOptions) {
			o.RateLimiter = ratelimit.None
		}), sdkAttempts),
	})
	b, err := s3blob.OpenBucket(context.Background(), client, s.Bucket, nil)
	if err != nil {
		s.t.Fatalf("s3test: open bucket %s: %v", s.Bucket, err)
	}
	if p := strings.Trim(prefix, "/"); p != "" {
		b = blob.PrefixedBucket(b, p+"/")
	}
	return b
}

// URL returns the s3:// URL of prefix (no leading or trailing slash
// needed; "" for the bucket root) in the server's bucket.
func (s *Server) URL(prefix string) string {
	return BucketURL(s.Endpoint, s.Bucket, prefix)
}

// BucketURL returns the s3:// URL of prefix in bucket on the
// S3-compatible server at endpoint (http://host:port).
func BucketURL(endpoint, bucket, prefix string) string {
	q := url.Values{}
	q.Set("endpoint", endpoint)
	q.Set("region", Region)
	q.Set("use_path_style", "true")
	q.Set("disable_https", "true")
	u := url.URL{Scheme: "s3", Host: bucket, RawQuery: q.Encode()}
	if p := strings.Trim(prefix, "/"); p != "" {
		u.Path = "/" + p
	}
	return u.String()
}

// Fault says what happens to the requests it matches.
type Fault struct {
	// Method matches the HTTP method (GET, PUT, POST, HEAD, DELETE); ""
	// matches any.
	Method string
	// Key is a path.Match glob on the object key relative to the bucket
	// (with Start's URL: "checkpoints/<job>/chk-2/*"); "" matches any
	// request, bucket requests (listings) included.
	Key string
	// Times is how many matching requests the fault affects; <= 0: all of
	// them until Clear.
	Times int
	// Status is the HTTP status of the error answer, with an S3 error
	// body of code Code. Zero with neither Drop nor Delay set: 503.
	Status int
	// Code is the S3 error code; default SlowDown for 503,
	// InternalError for 500, ServiceUnavailable for other statuses.
	Code string
	// Drop closes the connection without an answer instead (the client
	// sees a reset connection or an unexpected EOF).
	Drop bool
	// Delay holds the request this long before it is failed or, with
	// neither Status nor Drop set, before it is served normally.
	Delay time.Duration
}

// SlowDown is a Fault that answers the next times requests of method on
// keys matching key with 503 SlowDown.
func SlowDown(method, key string, times int) Fault {
	return Fault{Method: method, Key: key, Times: times, Status: http.StatusServiceUnavailable, Code: "SlowDown"}
}

// Latency is a Fault that delays the next times requests of method on keys
// matching key by d, then serves them.
func Latency(method, key string, d time.Duration, times int) Fault {
	return Fault{Method: method, Key: key, Times: times, Delay: d}
}

type activeFault struct {
	Fault
	left int // <0: forever
}

// Inject adds fault f. Faults are checked in the order they were added;
// the first that matches a request (and has requests left) applies.
func (s *Server) Inject(f Fault) {
	if f.Status == 0 && !f.Drop && f.Delay == 0 {
		f.Status = http.StatusServiceUnavailable
	}
	if f.Code == "" && f.Status != 0 {
		switch f.Status {
		case http.StatusServiceUnavailable:
			f.Code = "SlowDown"
		case http.StatusInternalServerError:
			f.Code = "InternalError"
		default:
			f.Code = "ServiceUnavailable"
		}
	}
	left := f.Times
	if left <= 0 {
		left = -1
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, &activeFault{Fault: f, left: left})
}

// Clear removes every fault.
func (s *Server) Clear() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = nil
}

// Requests returns the requests received so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Count returns how many requests of method ("" any) on keys matching the
// glob key ("" any) the server received, failed ones included.
func (s *Server) Count(method, key string) int {
	n := 0
	for _, r := range s.Requests() {
		if matches(method, key, r.Method, r.Key) {
			n++
		}
	}
	return n
}

func matches(method, glob, gotMethod, gotKey string) bool {
	if method != "" && !strings.EqualFold(method, gotMethod) {
		return false
	}
	if glob == "" {
		return true
	}
	ok, err := path.Match(glob, gotKey)
	return err == nil && ok
}

// take returns the fault that applies to a request and records it.
func (s *Server) take(r *http.Request, key string) *Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	var applied *Fault
	for _, f := range s.faults {
		if f.left == 0 || !matches(f.Method, f.Key, r.Method, key) {
			continue
		}
		if f.left > 0 {
			f.left--
		}
		ff := f.Fault
		applied = &ff
		break
	}
	rec := Request{Method: r.Method, Key: key, Query: r.URL.RawQuery}
	if applied != nil {
		switch {
		case applied.Drop:
			rec.Fault = -1
		default:
			rec.Fault = applied.Status
		}
	}
	s.requests = append(s.requests, rec)
	return applied
}

// wrap puts fault injection in front of h.
func (s *Server) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Path style: /<bucket>/<key>.
		_, key, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
		f := s.take(r, key)
		if f == nil {
			h.ServeHTTP(w, r)
			return
		}
		if f.Delay > 0 {
			t := time.NewTimer(f.Delay)
			select {
			case <-t.C:
			case <-r.Context().Done():
				t.Stop()
				return
			case <-s.closing:
				t.Stop()
				drop(w) // no answer: an empty 200 would look like success
				return
			}
		}
		switch {
		case f.Drop:
			drop(w)
		case f.Status != 0:
			writeError(w, r, f.Status, f.Code)
		default:
			h.ServeHTTP(w, r)
		}
	})
}

// drop closes the connection under w without answering.
func drop(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic("s3test: the response writer cannot be hijacked") // httptest servers' can
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0) // a reset, not an orderly close
	}
	_ = conn.Close()
}

func writeError(w http.ResponseWriter, r *http.Request, status int, code string) {
	w.Header().Set("Content-Type", "application/xml")
	w.Header().Set("x-amz-request-id", "s3test-fault")
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "0")
	}
	w.WriteHeader(status)
	if r.Method == http.MethodHead {
		return
	}
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>`+"\n"+
		`<Error><Code>%s</Code><Message>injected by s3test</Message><Resource>%s</Resource><RequestId>s3test-fault</RequestId></Error>`,
		code, r.URL.Path)
}

// waitFor polls ready every 50ms until it returns nil or timeout passes;
// it returns the last error then.
func waitFor(ctx context.Context, timeout time.Duration, ready func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := ready()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %v: %w", timeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// freePorts returns n distinct TCP ports that were free on 127.0.0.1 a
// moment ago.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("s3test: find a free port: %v", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}
