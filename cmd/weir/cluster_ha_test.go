package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/ha/etcdtest"
	"github.com/weirstream/weir/internal/jobs"
)

// syncBuffer is a process's captured output, safe to read while it runs.
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

type proc struct {
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan error    // Wait's result
	gone chan struct{} // closed once the process was waited for
}

// startProc starts bin with args; the test's cleanup kills it.
func startProc(t *testing.T, bin string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(bin, args...), out: &syncBuffer{}, done: make(chan error, 1), gone: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.done <- p.cmd.Wait()
		close(p.gone)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.gone
	})
	return p
}

func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not happen within %s", what, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Two job managers of one cluster id elect a leader in etcd; the leader is
// killed with SIGKILL once a checkpoint completed; the standby takes over
// within the session TTL, the task managers register with it, and it
// resumes the job from the checkpoint the first leader recorded in etcd,
// without --from: the committed output is exactly once.
func TestClusterJobManagerFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two job managers, two task managers and etcd for about 15 seconds")
	}
	eps := etcdtest.Start(t)
	bin := buildWeir(t)
	dir := t.TempDir()
	const records, keys = 150_000, 97
	ha := []string{"--set", "high-availability.type=etcd", "--set", "high-availability.etcd.endpoints=" + strings.Join(eps, ","),
		"--set", "high-availability.etcd.session-ttl=2s", "--set", "high-availability.cluster-id=failover",
		"--set", "heartbeat.interval=200ms", "--set", "heartbeat.timeout=5s"}
	jm := func() *proc {
		return startProc(t, bin, append([]string{"run", "counter", "--records", "150000", "--keys", "97", "--rate", "15000",
			"--output", filepath.Join(dir, "out"), "-p", "4",
			"--set", "execution.target=cluster", "--set", "jobmanager.rpc.address=127.0.0.1", "--set", "jobmanager.rpc.port=0",
			"--set", "execution.checkpointing.interval=200ms", "--set", "execution.checkpointing.dir=" + filepath.Join(dir, "chk"),
			"--set", "restart-strategy.type=fixed-delay", "--set", "restart-strategy.fixed-delay.attempts=50",
			"--set", "restart-strategy.fixed-delay.delay=200ms", "--set", "rest.port=0"}, ha...)...)
	}
	first := jm()
	waitUntil(t, 20*time.Second, "the first job manager leading", func() bool { return strings.Contains(first.out.String(), "leading the cluster") })
	second := jm()
	for i := range 2 {
		startProc(t, bin, append([]string{"taskmanager", "--set", "taskmanager.numberOfTaskSlots=2", "--set", "taskmanager.host=127.0.0.1",
			"--set", "state.backend.local-dir=" + filepath.Join(dir, "tm", string(rune('a'+i)))}, ha...)...)
	}
	waitUntil(t, 30*time.Second, "a completed checkpoint", func() bool {
		m, _ := filepath.Glob(filepath.Join(dir, "chk", "counter", "chk-*", "_metadata"))
		return len(m) > 0
	})
	if strings.Contains(second.out.String(), "leading the cluster") {
		t.Fatalf("the standby leads while the leader lives:\n%s", second.out)
	}
	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-first.done
	select {
	case err := <-second.done:
		if err != nil {
			t.Fatalf("the second job manager: %v\n%s", err, second.out)
		}
	case <-time.After(90 * time.Second):
		t.Fatalf("the second job manager did not finish the job within 90s:\n%s", second.out)
	}
	log := second.out.String()
	// The kill may land after a checkpoint completed and before the
	// leader recorded it in etcd: the standby then resumes from storage's
	// newest complete checkpoint all the same.
	recorded := strings.Contains(log, "resuming the job from the latest checkpoint the last leader recorded")
	unrecorded := strings.Contains(log, "the last leader ran the job but recorded no checkpoint")
	if !strings.Contains(log, "leading the cluster") || !recorded && !unrecorded || !strings.Contains(log, "Restoring job counter from checkpoint") {
		t.Fatalf("the standby did not take over and resume from the last leader's checkpoint:\n%s", log)
	}
	if err := jobs.VerifyCounterOutput(committedLines(t, filepath.Join(dir, "out")), records, keys); err != nil {
		t.Fatalf("%v\nfirst job manager:\n%s\nsecond:\n%s", err, first.out, log)
	}
}

// committedLines reads the committed part files of dir.
func committedLines(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") || e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, strings.Split(strings.TrimRight(string(b), "\n"), "\n")...)
	}
	return lines
}
