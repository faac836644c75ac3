package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/jobs"
)

// A second `weir run` of a job whose checkpoint directory a running job
// holds is refused with exit code 2 and the holder's identity; --force takes
// it over at once and the first run stops with exit code 1; once the first
// run ended, the job runs again.
func TestRunRefusedWhileTheJobRuns(t *testing.T) {
	dir := t.TempDir()
	chk := filepath.Join(dir, "chk")
	common := func(out string, records int, extra ...string) []string {
		return append([]string{"run", "counter", "--keys", "10", "--records", fmt.Sprint(records),
			"--output", filepath.Join(dir, out),
			"--set", "execution.checkpointing.interval=50ms",
			"--set", "execution.checkpointing.dir=" + chk,
			"--set", "state.backend.local-dir=" + filepath.Join(dir, "state"),
			"--log-level", "warn"}, extra...)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first := make(chan result, 1)
	go func() {
		first <- runWith(t, ctx, jobs.Builtin(), common("out1", 1_000_000, "--rate", "2000",
			"--set", "execution.checkpointing.lock.renew-interval=50ms")...)
	}()
	lockFile := filepath.Join(chk, "counter", "_lock")
	pid := fmt.Sprintf(`"pid":%d`, os.Getpid())
	deadline := time.Now().Add(time.Minute)
	for {
		if data, _ := os.ReadFile(lockFile); strings.Contains(string(data), pid) {
			break
		}
		select {
		case r := <-first:
			t.Fatalf("the first run ended: %d\n%s", r.code, r.stderr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the first run never took the lock")
		}
		time.Sleep(time.Millisecond)
	}

	r := runCLI(t, common("out2", 100)...)
	r.want(t, ExitUsage, fmt.Sprintf("error: checkpoint directory %s is in use by pid %d on host ", filepath.Join(chk, "counter"), os.Getpid()),
		"; stop that job, or pass --force if it is dead\n")
	if strings.Contains(r.stderr, "--help") {
		t.Errorf("a refused run is no usage problem, yet:\n%s", r.stderr)
	}

	runCLI(t, common("out3", 100, "--force")...).want(t, ExitOK)
	select {
	case r := <-first:
		r.want(t, ExitFailure, "job lock lost", "was taken over by")
	case <-time.After(time.Minute):
		t.Fatal("the first run did not stop after the forced takeover")
	}
	runCLI(t, common("out4", 100)...).want(t, ExitOK)
}
