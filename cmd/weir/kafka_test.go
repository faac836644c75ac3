package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirstream/weir/internal/jobs"
	"github.com/weirstream/weir/internal/kafkatest"
)

// TestKafkaKillRestart runs the counter through Kafka in and out (a kfake
// cluster in this test process; the weir processes reach it over TCP):
// the input topic holds the numbers 0..n-1, the job is killed with
// SIGKILL at random moments three times and resumed with --from latest,
// then runs to the end of its bounded input; the output topic, read with
// read_committed, holds every key's counts exactly once. Random choices
// take a logged seed.
func TestKafkaKillRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills weir processes for about 15 seconds")
	}
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 18))
	bin := buildWeir(t)
	c := kafkatest.Start(t)
	seeds := c.ListenAddrs()
	const n, keys = 300_000, 97
	kafkatest.CreateTopic(t, seeds, "numbers", 4)
	kafkatest.CreateTopic(t, seeds, "counts", 3)
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: "numbers", Partition: int32(i % 4), Value: []byte(strconv.Itoa(i))}
	}
	kafkatest.Produce(t, seeds, recs...)

	dir := t.TempDir()
	args := []string{"run", "counter", "--kafka-brokers", strings.Join(seeds, ","), "--input-topic", "numbers",
		"--output-topic", "counts", "--records", strconv.Itoa(n), "--keys", strconv.Itoa(keys), "-p", "2",
		"--sink-delay", "20us", "--set", "taskmanager.memory.segment-size=1kb",
		"--set", "execution.checkpointing.interval=100ms", "--set", "execution.checkpointing.dir=" + filepath.Join(dir, "chk"),
		"--set", "state.backend.local-dir=" + filepath.Join(dir, "state"), "--set", "rest.port=0"}
	logs := filepath.Join(dir, "logs")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		t.Fatal(err)
	}
	start := func(i int, from bool) (*exec.Cmd, *os.File) {
		a := args
		if from {
			a = append(append([]string{}, args...), "--from", "latest")
		}
		f, err := os.Create(filepath.Join(logs, fmt.Sprintf("run-%d.log", i)))
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, a...)
		cmd.Stdout, cmd.Stderr = f, f
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd, f
	}
	dump := func(i int) string {
		b, _ := os.ReadFile(filepath.Join(logs, fmt.Sprintf("run-%d.log", i)))
		return string(b)
	}
	killed := 0
	for i := 0; ; i++ {
		cmd, f := start(i, i > 0)
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		if killed < 3 {
			// Kill 0 to 400 ms after the run's first checkpoint
			// completed: mid-run, with something to restore.
			deadline := time.Now().Add(time.Minute)
			for !strings.Contains(dump(i), "Completed checkpoint") {
				select {
				case err := <-exited:
					f.Close()
					t.Fatalf("run %d ended (%v) before its first checkpoint; raise n:\n%s", i, err, dump(i))
				default:
				}
				if time.Now().After(deadline) {
					_ = cmd.Process.Kill()
					t.Fatalf("run %d completed no checkpoint within a minute:\n%s", i, dump(i))
				}
				time.Sleep(5 * time.Millisecond)
			}
			wait := time.Duration(rng.IntN(400)) * time.Millisecond
			select {
			case err := <-exited:
				f.Close()
				t.Fatalf("run %d ended (%v) before its kill %v after its first checkpoint; raise n:\n%s", i, err, wait, dump(i))
			case <-time.After(wait):
			}
			_ = cmd.Process.Signal(syscall.SIGKILL)
			<-exited
			f.Close()
			killed++
			t.Logf("run %d: SIGKILL %v after its first checkpoint", i, wait)
			continue
		}
		select {
		case err := <-exited:
			f.Close()
			if err != nil {
				t.Fatalf("final run %d: %v\n%s", i, err, dump(i))
			}
		case <-time.After(3 * time.Minute):
			_ = cmd.Process.Kill()
			t.Fatalf("final run %d did not end within 3 minutes:\n%s", i, dump(i))
		}
		break
	}
	restored := 0
	for i := 1; i <= killed; i++ {
		if strings.Contains(dump(i), "Restoring job counter from checkpoint") {
			restored++
		}
	}
	if restored == 0 {
		t.Fatalf("no resumed run restored a checkpoint: the kills came before any completed; final run:\n%s", dump(killed))
	}
	t.Logf("%d of %d resumed runs restored a checkpoint", restored, killed)
	out := kafkatest.ReadCommitted(t, seeds, "counts")
	lines := make([]string, len(out))
	for i, r := range out {
		lines[i] = string(r.Value)
	}
	if err := jobs.VerifyCounterOutput(lines, n, keys); err != nil {
		t.Fatalf("committed output of %d lines: %v", len(lines), err)
	}
}
