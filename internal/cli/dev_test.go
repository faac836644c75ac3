package cli

import (
	"context"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirstream/weir/internal/jobs"
	"github.com/weirstream/weir/internal/kafkatest"
)

// lockedBuffer is a strings.Builder safe for a writer and a reader.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
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

// weir dev kafka serves the Kafka protocol until interrupted: a record
// produced to a seeded topic reads back; Ctrl-C ends it with exit 0.
func TestDevKafka(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errs lockedBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"dev", "kafka", "--port", "0", "--topic", "words:3"}, strings.NewReader(""), &out, &errs, jobs.Builtin())
	}()
	addr := regexp.MustCompile(`listening on (\S+)`)
	var seeds []string
	deadline := time.Now().Add(20 * time.Second)
	for seeds == nil {
		if m := addr.FindStringSubmatch(out.String()); m != nil {
			seeds = strings.Split(m[1], ",")
			break
		}
		select {
		case code := <-done:
			t.Fatalf("weir dev kafka exited with %d: %s%s", code, out.String(), errs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no address announced within 20s: %q", out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	kafkatest.Produce(t, seeds, &kgo.Record{Topic: "words", Partition: 2, Value: []byte("hello")})
	recs := kafkatest.ReadCommitted(t, seeds, "words")
	if len(recs) != 1 || string(recs[0].Value) != "hello" || recs[0].Partition != 2 {
		t.Fatalf("read back %v, want hello on partition 2 of the seeded 3-partition topic", recs)
	}
	cancel()
	select {
	case code := <-done:
		if code != ExitOK {
			t.Fatalf("exit %d after the interrupt, want 0; stderr: %s", code, errs.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("weir dev kafka did not stop within 10s of the interrupt")
	}
}

func TestDevKafkaBadFlags(t *testing.T) {
	r := runCLI(t, "dev", "kafka", "--port", "70000", "--brokers", "0", "--topic", "x:0")
	r.want(t, ExitUsage, "--port 70000", "--brokers 0", `--topic "x:0"`)
}
