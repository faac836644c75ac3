package weir_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/internal/checkpoint/metadata"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/checkpoint/storage/s3test"
	"github.com/weirstream/weir/sink"
)

// The counter job with incremental pebble checkpoints on s3:// (an
// in-process S3 server), canceled after 3 checkpoints and resumed from the
// latest one, commits every running count exactly once.
func TestS3ResumeIncremental(t *testing.T) {
	dir := t.TempDir()
	url := s3test.Start(t)
	onS3 := func(o *weir.Options) { o.Checkpoint.Dir, o.Checkpoint.Incremental = url, true }
	if _, err := restoreRun(t, dir, 2, weir.BackendPebble, "", 3, onS3); !errors.Is(err, context.Canceled) {
		t.Fatalf("first run: %v, want it canceled after 3 checkpoints", err)
	}
	if _, err := restoreRun(t, dir, 2, weir.BackendPebble, weir.RestoreLatest, 0, onS3); err != nil {
		t.Fatalf("resumed run: %v", err)
	}
	checkCounterOutput(t, filepath.Join(dir, "out"), 150_000, 97)
	s, err := storage.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if shared, err := s.ListShared(context.Background(), "counter"); err != nil || len(shared) == 0 {
		t.Fatalf("shared files on S3: %v, %v; want the incremental checkpoints' SST files", shared, err)
	}
}

// s3Env is the counter job over n records at parallelism 2 with pebble
// incremental checkpoints every 10ms on srv, through an S3 client that
// does not retry (so that every injected fault reaches weir's retries,
// which wait 1-10ms here), logs captured. Restarts are off: a failure
// ends the run. So that the input cannot end before the checkpoints a
// test needs (on a loaded machine), past half of it the job sleeps 1ms
// per 16 records until minCompleted checkpoints completed.
func s3Env(t *testing.T, dir string, srv *s3test.Server, n int64, co weir.CheckpointOptions, minCompleted int64) (*weir.Environment, *lockedBuffer) {
	t.Helper()
	logs := &lockedBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, nil))
	b, err := storage.NewRetryBucket(storage.NewBlobBucket(srv.OpenBucket("checkpoints", 1)), storage.Options{Logger: logger,
		Retry: storage.RetryOptions{InitialBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	store := storage.OpenBucket(b)
	t.Cleanup(func() { store.Close() })
	co.Interval, co.Incremental = 10*time.Millisecond, true
	env := weir.NewEnvironment(weir.Options{Parallelism: 2, StateBackend: weir.BackendPebble, StateDir: filepath.Join(dir, "state"),
		Logger: logger, Checkpoint: co, Restart: weir.RestartOptions{Type: "none"}})
	var completed, seen atomic.Int64
	weir.SetTestHooks(env, weir.TestHooks{Storage: store, Completed: func(int64, *metadata.Checkpoint) { completed.Add(1) }})
	counterJobWith(env, n, 97, sink.Files(filepath.Join(dir, "out"), func(s string) string { return s }), counterHooks{
		// Every 16th record: a source reads batches of 2048 records and
		// takes a trigger only between batches.
		throttle: func(i int64) bool { return seen.Add(1) > n/2 && i%16 == 0 && completed.Load() < minCompleted }})
	return env, logs
}

// Transient S3 failures (503 SlowDown, 500 InternalError, dropped
// connections) on uploads, _metadata and listings are retried: every
// checkpoint completes (no failure is tolerated), each retry is logged,
// and the output is exactly once.
func TestS3TransientFailuresRetried(t *testing.T) {
	dir := t.TempDir()
	srv := s3test.NewServer(t)
	srv.Inject(s3test.SlowDown("PUT", "checkpoints/counter/chk-2/*", 2))
	srv.Inject(s3test.Fault{Method: "PUT", Key: "checkpoints/counter/shared/*", Times: 2, Status: http.StatusInternalServerError})
	srv.Inject(s3test.Fault{Method: "PUT", Key: "checkpoints/counter/chk-3/_metadata", Times: 2, Drop: true})
	srv.Inject(s3test.SlowDown("PUT", "checkpoints/counter/chk-4/_metadata", 2))
	env, logs := s3Env(t, dir, srv, 60_000, weir.CheckpointOptions{}, 4)
	res, err := env.ExecuteResult(context.Background(), "counter")
	if err != nil {
		t.Fatalf("%v\n%s", err, logs)
	}
	if res.Latest == nil || res.Latest.ID < 4 {
		t.Fatalf("latest checkpoint %v, want at least 4 (the faults cover 2 to 4)\n%s", res.Latest, logs)
	}
	checkCounterOutput(t, filepath.Join(dir, "out"), 60_000, 97)
	if n := strings.Count(logs.String(), "transient error, retrying"); n != 8 {
		t.Errorf("%d retry warnings, want 8 (2 per fault)\n%s", n, logs)
	}
	for _, key := range []string{"counter/chk-2/", "counter/shared/", "counter/chk-3/_metadata", "counter/chk-4/_metadata"} {
		if !strings.Contains(logs.String(), "key="+key) {
			t.Errorf("no retry warning names %s", key)
		}
	}
}

// Uploads of one checkpoint that keep failing decline it (DeclineAsync)
// once the retries are used up; within the tolerance the job goes on,
// without a restart, to an exactly-once result.
func TestS3PersistentFailureDeclines(t *testing.T) {
	dir := t.TempDir()
	srv := s3test.NewServer(t)
	srv.Inject(s3test.SlowDown("PUT", "checkpoints/counter/chk-2/*", 0))
	env, logs := s3Env(t, dir, srv, 60_000, weir.CheckpointOptions{TolerableFailures: 1}, 2)
	res, err := env.ExecuteResult(context.Background(), "counter")
	if err != nil {
		t.Fatalf("%v\n%s", err, logs)
	}
	if res.Restarts != 0 {
		t.Fatalf("%d restarts, want none", res.Restarts)
	}
	checkCounterOutput(t, filepath.Join(dir, "out"), 60_000, 97)
	if !strings.Contains(logs.String(), "Decline checkpoint 2 by task") || !strings.Contains(logs.String(), "gave up after 5 attempts") {
		t.Errorf("no decline of checkpoint 2 after 5 attempts logged:\n%s", logs)
	}
	if res.Latest == nil || res.Latest.ID <= 2 {
		t.Errorf("latest checkpoint %v, want one after 2", res.Latest)
	}
}

// With every checkpoint's uploads failing, one failure more than
// tolerated fails the job with Flink's message.
func TestS3PersistentFailureExceedsTolerance(t *testing.T) {
	srv := s3test.NewServer(t)
	srv.Inject(s3test.SlowDown("PUT", "checkpoints/counter/chk-*/*", 0))
	env, logs := s3Env(t, t.TempDir(), srv, 1_000_000, weir.CheckpointOptions{TolerableFailures: 1}, 0)
	_, err := env.ExecuteResult(context.Background(), "counter")
	if !errors.Is(err, weir.ErrTooManyCheckpointFailures) || !strings.Contains(err.Error(), "Exceeded checkpoint tolerable failure threshold.") {
		t.Fatalf("err = %v, want the tolerable failure threshold message\n%s", err, logs)
	}
}

// A slow store: the uploads of checkpoint 2 hang (until the job ends and
// cancels them), longer than execution.checkpointing.timeout, so it
// expires; within the tolerance the job goes on to an exactly-once
// result.
func TestS3SlowStoreExpires(t *testing.T) {
	dir := t.TempDir()
	srv := s3test.NewServer(t)
	srv.Inject(s3test.Latency("PUT", "checkpoints/counter/chk-2/*", time.Minute, 0))
	// The timeout leaves the other checkpoints ample time under -race.
	env, logs := s3Env(t, dir, srv, 60_000, weir.CheckpointOptions{Timeout: 2 * time.Second, TolerableFailures: 1}, 2)
	res, err := env.ExecuteResult(context.Background(), "counter")
	if err != nil {
		t.Fatalf("%v\n%s", err, logs)
	}
	// Only checkpoint 2: its hung uploads are canceled when it expires,
	// and do not hold up the tasks' later checkpoints or their end.
	if !strings.Contains(logs.String(), "Checkpoint 2 of job counter expired before completing.") ||
		strings.Count(logs.String(), "expired before completing") != 1 {
		t.Fatalf("want checkpoint 2, and only it, to expire:\n%s", logs)
	}
	if res.Restarts != 0 || res.Latest == nil || res.Latest.ID <= 2 {
		t.Fatalf("%d restarts, latest %v; want none and a checkpoint after 2", res.Restarts, res.Latest)
	}
	checkCounterOutput(t, filepath.Join(dir, "out"), 60_000, 97)
}
