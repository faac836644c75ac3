package jobs

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirstream/weir/internal/kafkatest"
)

// kafka-wordcount reads lines from a topic and writes every running count
// to another: with exactly-once delivery and --bounded, each word w has
// the lines "w 1" .. "w n_w" exactly once, keyed by the word.
func TestKafkaWordCount(t *testing.T) {
	t.Parallel()
	c := kafkatest.Start(t)
	seeds := c.ListenAddrs()
	kafkatest.CreateTopic(t, seeds, "lines", 3)
	kafkatest.CreateTopic(t, seeds, "words", 3)
	want := map[string]int{}
	var recs []*kgo.Record
	for i := range 2000 {
		line := GeneratedLine(int64(i))
		for _, w := range strings.Fields(line) {
			want[w]++
		}
		recs = append(recs, &kgo.Record{Topic: "lines", Partition: int32(i % 3), Value: []byte(line)})
	}
	kafkatest.Produce(t, seeds, recs...)
	dir := t.TempDir()
	env, _, err := Builtin().Prepare("kafka-wordcount",
		[]string{"--brokers", strings.Join(seeds, ","), "--input-topic", "lines", "--output-topic", "words", "--bounded", "--delivery", "exactly-once"},
		[]string{"parallelism.default=2", "execution.checkpointing.interval=50ms", "execution.checkpointing.dir=" + filepath.Join(dir, "chk"),
			"rest.port=0"}, slog.New(slog.NewTextHandler(io.Discard, nil)), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := env.Execute(ctx, "kafka-wordcount"); err != nil {
		t.Fatal(err)
	}
	seen := map[string]map[int]bool{}
	for _, r := range kafkatest.ReadCommitted(t, seeds, "words") {
		w, n, ok := strings.Cut(string(r.Value), " ")
		count, err := strconv.Atoi(n)
		if !ok || err != nil || string(r.Key) != w {
			t.Fatalf("record %q (key %q): want \"word count\" keyed by the word", r.Value, r.Key)
		}
		if seen[w] == nil {
			seen[w] = map[int]bool{}
		}
		if seen[w][count] {
			t.Fatalf("%q %d twice", w, count)
		}
		seen[w][count] = true
	}
	for w, n := range want {
		if len(seen[w]) != n || !seen[w][n] {
			t.Errorf("word %q: %d counts up to %v, want 1..%d", w, len(seen[w]), seen[w][n], n)
		}
	}
	if len(seen) != len(want) {
		t.Errorf("%d words counted, want %d", len(seen), len(want))
	}
	t.Logf("%d distinct words", len(want))
}

func TestKafkaWordCountBadFlags(t *testing.T) {
	_, _, err := Builtin().Prepare("kafka-wordcount", []string{"--delivery", "twice", "--starting-offsets", "middle"}, nil,
		slog.New(slog.NewTextHandler(io.Discard, nil)), io.Discard)
	for _, s := range []string{"--brokers", "--input-topic", "--output-topic", `"twice"`, `"middle"`} {
		if err == nil || !strings.Contains(err.Error(), s) {
			t.Errorf("error %v does not name %s", err, s)
		}
	}
}
