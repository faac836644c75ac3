package weir_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/internal/checkpoint/metadata"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/checkpoint/storage/blobtest"
	"github.com/weirstream/weir/sink"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// failureEnv is the counter job over n records at parallelism 2 with
// checkpoints every 10ms into a fault-injecting store over dir/chk, logs
// captured.
func failureEnv(t *testing.T, dir string, n int64, co weir.CheckpointOptions, hooks weir.TestHooks) (*weir.Environment, *blobtest.Bucket, *lockedBuffer) {
	t.Helper()
	inner, err := storage.OpenLocation(context.Background(), filepath.Join(dir, "chk"))
	if err != nil {
		t.Fatal(err)
	}
	faults := blobtest.New(inner)
	hooks.Storage = storage.OpenBucket(faults)
	t.Cleanup(func() { hooks.Storage.Close() })
	logs := &lockedBuffer{}
	co.Interval = 10 * time.Millisecond
	opts := weir.Options{Parallelism: 2, Logger: slog.New(slog.NewTextHandler(logs, nil)), Checkpoint: co,
		Restart: weir.RestartOptions{Type: "none"}}
	env := weir.NewEnvironment(opts)
	weir.SetTestHooks(env, hooks)
	var never atomic.Bool
	never.Store(true)
	counterJob(env, n, 97, sink.Files(filepath.Join(dir, "out"), func(s string) string { return s }), -1, &never)
	return env, faults, logs
}

func checkpointsLeft(t *testing.T, s *storage.Storage) []storage.CheckpointEntry {
	t.Helper()
	es, err := s.ListCheckpoints(context.Background(), "counter")
	if err != nil {
		t.Fatal(err)
	}
	return es
}

// Failed uploads within execution.checkpointing.tolerable-failed-checkpoints
// abort their checkpoints (files deleted) and the job carries on to an
// exactly-once result without restarting.
func TestUploadFailuresWithinTolerance(t *testing.T) {
	dir := t.TempDir()
	var store *storage.Storage
	env, faults, logs := failureEnv(t, dir, 60_000, weir.CheckpointOptions{TolerableFailures: 2}, weir.TestHooks{})
	faults.Fail(blobtest.OpFinish, "counter/chk-2/*.kst", nil, 1)
	faults.Fail(blobtest.OpFinish, "counter/chk-3/*.kst", nil, 1)
	res, err := env.ExecuteResult(context.Background(), "counter")
	if err != nil {
		t.Fatalf("%v\n%s", err, logs)
	}
	if res.Restarts != 0 {
		t.Fatalf("%d restarts, want none", res.Restarts)
	}
	checkCounterOutput(t, filepath.Join(dir, "out"), 60_000, 97)
	store, _ = storage.Open(context.Background(), filepath.Join(dir, "chk"))
	defer store.Close()
	for _, e := range checkpointsLeft(t, store) {
		if e.ID == 2 || e.ID == 3 || !e.Complete {
			t.Errorf("checkpoint %d (complete %v) left behind", e.ID, e.Complete)
		}
	}
	if !strings.Contains(logs.String(), "Decline checkpoint 2 by task") {
		t.Errorf("no decline logged for checkpoint 2:\n%s", logs)
	}
}

// One failure more than tolerated fails the job with Flink's message.
func TestToleranceExceededFailsTheJob(t *testing.T) {
	env, faults, logs := failureEnv(t, t.TempDir(), 1_000_000, weir.CheckpointOptions{TolerableFailures: 1}, weir.TestHooks{})
	faults.Fail(blobtest.OpFinish, "counter/chk-*/*.kst", nil, 0)
	_, err := env.ExecuteResult(context.Background(), "counter")
	if !errors.Is(err, weir.ErrTooManyCheckpointFailures) || !strings.Contains(err.Error(), "Exceeded checkpoint tolerable failure threshold.") {
		t.Fatalf("err = %v, want the tolerable failure threshold message\n%s", err, logs)
	}
}

// A checkpoint still pending after execution.checkpointing.timeout expires
// with Flink's log line; with no tolerance the job fails. Not parallel:
// on a loaded machine checkpoint 1 too may outlast the 100 ms timeout.
func TestCheckpointExpires(t *testing.T) {
	hooks := weir.TestHooks{Upload: func(_, _ int, id int64) error {
		if id == 2 {
			time.Sleep(300 * time.Millisecond)
		}
		return nil
	}}
	env, _, logs := failureEnv(t, t.TempDir(), 1_000_000, weir.CheckpointOptions{Timeout: 100 * time.Millisecond}, hooks)
	_, err := env.ExecuteResult(context.Background(), "counter")
	if !errors.Is(err, weir.ErrTooManyCheckpointFailures) || !strings.Contains(err.Error(), "Exceeded checkpoint tolerable failure threshold.") {
		t.Fatalf("err = %v, want the tolerable failure threshold message\n%s", err, logs)
	}
	if !strings.Contains(logs.String(), "Checkpoint 2 of job counter expired before completing.") {
		t.Fatalf("no expiry logged:\n%s", logs)
	}
}

// Cancelling the job aborts the in-flight checkpoint and deletes its
// files; completed checkpoints stay with RETAIN_ON_CANCELLATION and go with
// DELETE_ON_CANCELLATION.
func TestCancelAbortsInFlightCheckpoint(t *testing.T) {
	for _, retention := range []string{"RETAIN_ON_CANCELLATION", "DELETE_ON_CANCELLATION"} {
		t.Run(retention, func(t *testing.T) {
			dir := t.TempDir()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			entered := make(chan struct{})
			var once sync.Once
			hooks := weir.TestHooks{Upload: func(_, _ int, id int64) error {
				if id == 3 {
					once.Do(func() { close(entered) })
					<-ctx.Done()
					return ctx.Err()
				}
				return nil
			}}
			env, _, logs := failureEnv(t, dir, 1_000_000, weir.CheckpointOptions{Retention: retention}, hooks)
			go func() {
				<-entered
				cancel()
			}()
			res, err := env.ExecuteResult(ctx, "counter")
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("err = %v, want context.Canceled\n%s", err, logs)
			}
			store, _ := storage.Open(context.Background(), filepath.Join(dir, "chk"))
			defer store.Close()
			left := checkpointsLeft(t, store)
			if retention == "DELETE_ON_CANCELLATION" {
				if len(left) != 0 {
					t.Fatalf("checkpoints left after cancel with %s: %v", retention, left)
				}
				return
			}
			if len(left) != 1 || left[0].ID != 2 || !left[0].Complete || res.Latest == nil || res.Latest.ID != 2 {
				t.Fatalf("left %v (latest %v), want only the completed checkpoint 2", left, res.Latest)
			}
		})
	}
}

// After a failure the restarted job continues the checkpoint ids: the
// aborted checkpoint's files are deleted in the background, and reusing
// its id could delete the new checkpoint's files.
func TestRestartDoesNotReuseCheckpointIDs(t *testing.T) {
	dir := t.TempDir()
	var (
		mu        sync.Mutex
		completed []int64
		failed    atomic.Bool
	)
	opts := weir.Options{Parallelism: 2, Logger: quietLogger(t),
		Checkpoint: weir.CheckpointOptions{Interval: 10 * time.Millisecond, Dir: filepath.Join(dir, "chk")},
		Restart:    weir.RestartOptions{Type: "fixed-delay", FixedDelayAttempts: 3, FixedDelay: time.Millisecond}}
	env := weir.NewEnvironment(opts)
	weir.SetTestHooks(env, weir.TestHooks{
		Upload: func(_, _ int, id int64) error {
			if id == 3 && failed.CompareAndSwap(false, true) {
				return errors.New("injected upload failure")
			}
			return nil
		},
		Completed: func(id int64, _ *metadata.Checkpoint) {
			mu.Lock()
			completed = append(completed, id)
			mu.Unlock()
		},
	})
	var never atomic.Bool
	never.Store(true)
	counterJob(env, 60_000, 97, sink.Files(filepath.Join(dir, "out"), func(s string) string { return s }), -1, &never)
	res, err := env.ExecuteResult(context.Background(), "counter")
	if err != nil {
		t.Fatal(err)
	}
	if res.Restarts != 1 {
		t.Fatalf("%d restarts, want 1", res.Restarts)
	}
	for i, id := range completed {
		if id == 3 || (i > 0 && id <= completed[i-1]) {
			t.Fatalf("completed checkpoint ids %v: 3 failed, and ids must increase", completed)
		}
	}
	if len(completed) < 3 {
		t.Fatalf("completed %v: want checkpoints after the restart", completed)
	}
	checkCounterOutput(t, filepath.Join(dir, "out"), 60_000, 97)
}
