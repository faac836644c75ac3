//go:build unix

package storage

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/clock"
)

func localStorage(t *testing.T) (*Storage, string) {
	t.Helper()
	root := t.TempDir()
	s, err := Open(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, root
}

// A local directory is locked with flock on <job>/_lock, which names the
// holder; a second lock is refused until the first is released, and the
// release leaves nothing behind.
func TestLocalLock(t *testing.T) {
	s, root := localStorage(t)
	dir := filepath.Join(root, "counter")
	a, err := s.LockJob(context.Background(), "counter", LockOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.LockJob(context.Background(), "counter", LockOptions{})
	wantLocked(t, err, a.Holder(), dir)
	if err := a.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the job directory the lock created stays: %v", err)
	}
	b, err := s.LockJob(context.Background(), "counter", LockOptions{})
	if err != nil {
		t.Fatalf("after the release: %v", err)
	}
	defer b.Release(context.Background())
	if err := b.Storage().WriteMetadata(context.Background(), "counter", 1, []byte("m")); err != nil {
		t.Fatal(err)
	}
	if err := b.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || entries[0].Name() != "chk-1" {
		t.Fatalf("job directory after the release: %v", entries)
	}
}

// Force replaces the lock file; the old holder notices at its next check,
// is told through OnLost, stops writing, and its Release leaves the new
// holder's lock file alone.
func TestLocalLockForce(t *testing.T) {
	s, root := localStorage(t)
	clk := clock.NewManual(lockEpoch)
	lost := make(chan error, 1)
	a, err := s.LockJob(context.Background(), "counter", LockOptions{Clock: clk, OnLost: func(err error) { lost <- err }})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Release(context.Background())
	b, err := s.LockJob(context.Background(), "counter", LockOptions{Force: true})
	if err != nil {
		t.Fatalf("forced: %v", err)
	}
	defer b.Release(context.Background())
	tick(t, clk, 1, DefaultRenewInterval, a)
	select {
	case err := <-lost:
		if !errors.Is(err, ErrLockLost) || !strings.Contains(err.Error(), fmt.Sprintf("taken over by pid %d", os.Getpid())) {
			t.Fatalf("lost with %v", err)
		}
	default:
		t.Fatal("OnLost was not called")
	}
	if err := a.Storage().WriteMetadata(context.Background(), "counter", 1, []byte("m")); !errors.Is(err, ErrLockLost) {
		t.Fatalf("old holder's write: %v", err)
	}
	a.Release(context.Background())
	_, err = s.LockJob(context.Background(), "counter", LockOptions{})
	wantLocked(t, err, b.Holder(), filepath.Join(root, "counter"))
}

// TestHelperLockHolder is not a test: TestLocalLockDiesWithProcess runs the
// test binary with it to hold a lock in another process.
func TestHelperLockHolder(t *testing.T) {
	root := os.Getenv("WEIR_TEST_LOCK_ROOT")
	if root == "" {
		t.Skip("helper process only")
	}
	s, err := Open(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.LockJob(context.Background(), "counter", LockOptions{}); err != nil {
		t.Fatal(err)
	}
	fmt.Println("locked")
	time.Sleep(time.Hour) // until killed
}

// The local lock dies with its process: after a kill -9 of the holder, the
// next run gets it at once, without waiting for anything to expire.
func TestLocalLockDiesWithProcess(t *testing.T) {
	s, root := localStorage(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperLockHolder$")
	cmd.Env = append(os.Environ(), "WEIR_TEST_LOCK_ROOT="+root)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "locked\n" {
		t.Fatalf("helper said %q, %v", line, err)
	}
	_, err = s.LockJob(context.Background(), "counter", LockOptions{})
	var le *JobLockedError
	if !errors.As(err, &le) || le.Holder.PID != cmd.Process.Pid {
		t.Fatalf("while the helper holds it: %v, want it refused naming pid %d", err, cmd.Process.Pid)
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	cmd.Wait()
	l, err := s.LockJob(context.Background(), "counter", LockOptions{})
	if err != nil {
		t.Fatalf("right after the kill: %v", err)
	}
	l.Release(context.Background())
}
