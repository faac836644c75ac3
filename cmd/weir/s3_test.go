package main

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/checkpoint/storage/s3test"
)

// The weir binary links the S3 driver: an s3:// checkpoint directory opens
// through the same storage code (no request is sent until it is used).
func TestS3SchemeIsLinked(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	s, err := storage.Open(context.Background(), "s3://weir-checkpoints/jobs?region=eu-west-1")
	if err != nil {
		t.Fatalf("open s3:// storage: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// The weir binary with its checkpoints on s3:// (an S3 server in this test
// process): the counter job (pebble, incremental) is killed with SIGKILL
// once a checkpoint completed, and a run started with --from latest after
// the killed run's lease ran out resumes it; the committed output counts
// every key exactly once (scripts/check-counter-output.sh).
func TestS3KillRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds weir and runs it twice for a few seconds")
	}
	const records, keys = 300_000, 1000
	dir := t.TempDir()
	bin := filepath.Join(dir, "weir")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	url := s3test.Start(t) // sets the AWS credentials the runs inherit
	out := filepath.Join(dir, "out")
	args := []string{"run", "counter", "--records", strconv.Itoa(records), "--keys", strconv.Itoa(keys), "--rate", "100000",
		"--output", out, "--log-level", "warn", "--incremental",
		"--set", "execution.checkpointing.interval=200ms",
		"--set", "execution.checkpointing.dir=" + url,
		"--set", "state.backend.type=pebble",
		"--set", "state.backend.local-dir=" + filepath.Join(dir, "state"),
		// A killed run's lease on the directory runs out soon.
		"--set", "execution.checkpointing.lock.lease-duration=2s",
		"--set", "execution.checkpointing.lock.renew-interval=500ms"}
	ctx := context.Background()
	store, err := storage.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()

	var log1 bytes.Buffer
	run1 := exec.Command(bin, args...)
	run1.Stdout, run1.Stderr = &log1, &log1
	if err := run1.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- run1.Wait() }()
	waitFor(t, 60*time.Second, "a complete checkpoint on S3", exited, func() bool {
		cps, err := store.ListCheckpoints(ctx, "counter")
		return err == nil && len(cps) > 0 && cps[len(cps)-1].Complete
	})
	if err := run1.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := <-exited; err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("first run: %v, want it killed\n%s", err, log1.String())
	}
	waitFor(t, 30*time.Second, "the killed run's lease to run out", nil, func() bool {
		_, held, err := store.JobLockHolder(ctx, "counter")
		return err == nil && !held
	})

	run2 := exec.Command(bin, append(args, "--from", "latest")...)
	if log2, err := run2.CombinedOutput(); err != nil {
		t.Fatalf("resumed run: %v\n%s", err, log2)
	}
	check := exec.Command("bash", filepath.Join("..", "..", "scripts", "check-counter-output.sh"), out, strconv.Itoa(records), strconv.Itoa(keys))
	res, err := check.CombinedOutput()
	if err != nil || !strings.Contains(string(res), "OK: ") {
		t.Fatalf("committed output: %v\n%s", err, res)
	}
	t.Logf("%s", res)
}

// waitFor polls cond every 20ms until it holds and fails the test naming
// what never happened after timeout, or at once if exited (a process the
// condition depends on) delivers.
func waitFor(t *testing.T, timeout time.Duration, what string, exited <-chan error, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		select {
		case err := <-exited:
			t.Fatalf("the process ended (%v) before %s", err, what)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
	}
}
