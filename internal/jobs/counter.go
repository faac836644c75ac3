package jobs

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/connector/kafka"
	"github.com/weirstream/weir/sink"
)

// Counter is weir's exactly-once probe: a parallel source emits the numbers
// 0..records-1, a keyed operator keeps a running count per key (i mod
// keys) in a ValueState, and every record produces the line "key,count",
// written by sink.Files. Whatever the parallelism, backend, failures and
// restarts, a correct run commits for every key k exactly the lines
// k,1 .. k,n_k, where n_k is the number of i < records with i mod keys = k.
type Counter struct {
	records, keys int64
	rate          float64
	sinkDelay     time.Duration
	output        string
	// Through Kafka: numbers read from inputTopic (bounded: the records
	// present at start) instead of generated, lines written to
	// outputTopic instead of files.
	kafkaFlags
	inputTopic, outputTopic string
}

var _ Job = (*Counter)(nil)

// NewCounter returns the counter job with default settings.
func NewCounter() Job {
	return &Counter{records: 1_000_000, keys: 1000, kafkaFlags: kafkaFlags{delivery: "exactly-once", txnPrefix: "weir-counter"}}
}

// Name implements Job.
func (c *Counter) Name() string { return "counter" }

// Description implements Job.
func (c *Counter) Description() string {
	return "Count records per key in keyed state and write every running count (the exactly-once probe)"
}

// LongDescription implements LongDescriber.
func (c *Counter) LongDescription() string {
	return `A parallel source emits i = 0..records-1 with key i mod keys (throttled to
--rate records per second in total when above 0); a keyed operator keeps a
running count per key in a ValueState; each record makes a line "key,count"
written by the exactly-once file sink into part files under --output
(part-<subtask>-<run>-<n>; names starting with '.' are not committed yet).
In a correct run every key k appears with the counts 1..n_k exactly once,
n_k being the number of i with i mod keys = k, also across failures,
restarts and kill -9 with --from latest when checkpointing is on.

--sink-delay D makes the sink slow: each sink subtask spends D on every
record before writing it (the last millisecond of each wait is spun, so
that small delays such as 20us cost what they say and burn a core while
they do). The sink then backpressures the count operator and the source,
and the network buffers between them fill up, which is what unaligned
checkpoints are for. The output is the same as without the delay.

Through Kafka (the same probe end to end): --input-topic reads the numbers
(decimal record values) from a topic, bounded by the offsets at start,
instead of generating them, and --output-topic writes the lines to a topic
(the key as the record key) instead of --output, with --delivery
exactly-once by default (transactions committed when checkpoints complete;
read the topic with read_committed). Both need --kafka-brokers; --records
and --rate apply to generated numbers only.`
}

// RegisterFlags implements Job.
func (c *Counter) RegisterFlags(fs *pflag.FlagSet) {
	fs.Int64Var(&c.records, "records", c.records, "number of records to emit")
	fs.Int64Var(&c.keys, "keys", c.keys, "number of distinct keys")
	fs.Float64Var(&c.rate, "rate", 0, "records per second in total (0: as fast as possible)")
	fs.DurationVar(&c.sinkDelay, "sink-delay", 0, "`duration` the sink spends on every record, per sink subtask, e.g. 20us or 2ms (0: no delay)")
	fs.StringVar(&c.output, "output", "", "`directory` to write the part files to (this or --output-topic is required)")
	fs.StringSliceVar(&c.brokers, "kafka-brokers", nil, "Kafka seed brokers, `host:port[,...]`, for --input-topic and --output-topic")
	fs.StringVar(&c.inputTopic, "input-topic", "", "read the numbers from this Kafka `topic` (decimal values; the records present at start) instead of generating them")
	fs.StringVar(&c.outputTopic, "output-topic", "", "write the lines \"key,count\" to this Kafka `topic` instead of --output")
	c.kafkaFlags.register(fs)
}

// Validate implements Job.
func (c *Counter) Validate() error {
	var errs []error
	if c.records < 0 {
		errs = append(errs, fmt.Errorf("--records %d: must not be negative", c.records))
	}
	if c.keys < 1 {
		errs = append(errs, fmt.Errorf("--keys %d: must be at least 1", c.keys))
	}
	if c.rate < 0 {
		errs = append(errs, fmt.Errorf("--rate %v: must not be negative", c.rate))
	}
	if c.sinkDelay < 0 {
		errs = append(errs, fmt.Errorf("--sink-delay %v: must not be negative (0 for no delay, or a duration such as 20us or 2ms)", c.sinkDelay))
	}
	switch {
	case c.output == "" && c.outputTopic == "":
		errs = append(errs, errors.New("--output: a directory for the part files is required (or --output-topic with --kafka-brokers)"))
	case c.output != "" && c.outputTopic != "":
		errs = append(errs, errors.New("--output and --output-topic: choose one"))
	}
	if c.inputTopic != "" || c.outputTopic != "" {
		if err := c.kafkaFlags.validate("--kafka-brokers"); err != nil {
			errs = append(errs, err)
		}
	} else if len(c.brokers) > 0 {
		errs = append(errs, errors.New("--kafka-brokers: set --input-topic or --output-topic too"))
	}
	return errors.Join(errs...)
}

// Build implements Job.
func (c *Counter) Build(env *weir.Environment, _ io.Writer) error {
	keys := c.keys
	var nums *weir.DataStream[int64]
	if c.inputTopic != "" {
		nums = weir.FromSource[int64](env, kafka.NewSource(kafka.SourceOptions{Client: kafka.Client{Brokers: c.brokers},
			Topics: []string{c.inputTopic}, Bounded: true}, func(r *kafka.Record) (int64, error) {
			return strconv.ParseInt(string(r.Value), 10, 64)
		}))
	} else {
		nums = weir.FromSource(env, numbers{count: c.records, rate: c.rate})
	}
	nums.UID("counter-source")
	counts := weir.KeyedProcess(weir.KeyBy(nums, func(i int64) int64 { return i % keys }),
		func() weir.KeyedProcessFunction[int64, int64, string] { return &countPerKey{} }).
		Name("Count").UID("counter-count")
	format := func(s string) string { return s }
	if d := c.sinkDelay; d > 0 {
		// The delay is spent in the sink writer's path (sink.Files calls
		// format once per record as it writes it), so the job's graph and
		// its exactly-once output stay what they are without it.
		format = func(s string) string {
			spend(d)
			return s
		}
	}
	if c.outputTopic != "" {
		snk, err := c.sink(c.outputTopic, func(s string) (*kafka.Record, error) {
			k, _, _ := strings.Cut(s, ",")
			return &kafka.Record{Key: []byte(k), Value: []byte(format(s))}, nil
		})
		if err != nil {
			return err
		}
		weir.SinkTo(counts, snk).UID("counter-sink")
		return nil
	}
	weir.SinkTo[string](counts, sink.Files(c.output, format)).UID("counter-sink")
	return nil
}

// spinWindow is the part of a wait that spend spins rather than sleeps:
// time.Sleep wakes up late by up to the timer granularity, which is about a
// millisecond on some machines (a 20us sleep then takes 1ms), so a sleep
// alone cannot make a small delay cost what it says.
const spinWindow = time.Millisecond

// spend returns once d has passed since it was called: it sleeps all but
// the last spinWindow of d and busy-waits the rest.
func spend(d time.Duration) {
	deadline := time.Now().Add(d)
	if d > spinWindow {
		sleep(d - spinWindow)
	}
	for time.Now().Before(deadline) {
	}
}

// sleep is time.Sleep; tests replace it to see how spend waits.
var sleep = time.Sleep

// VerifyCounterOutput checks the counter's committed output, its lines in
// any order, for the exactly-once property: every key k in 0..keys-1 has
// the counts 1..n_k exactly once, n_k being the number of i < records with
// i mod keys = k, and there is no other line. The error names the first
// problem found.
func VerifyCounterOutput(lines []string, records, keys int64) error {
	seen := map[int64]map[int64]bool{}
	for _, l := range lines {
		k, c, ok := strings.Cut(l, ",")
		key, err1 := strconv.ParseInt(k, 10, 64)
		count, err2 := strconv.ParseInt(c, 10, 64)
		if !ok || err1 != nil || err2 != nil {
			return fmt.Errorf("malformed line %q", l)
		}
		if seen[key] == nil {
			seen[key] = map[int64]bool{}
		}
		if seen[key][count] {
			return fmt.Errorf("key %d count %d appears twice", key, count)
		}
		seen[key][count] = true
	}
	for k := range keys {
		n := records / keys
		if k < records%keys {
			n++
		}
		if int64(len(seen[k])) != n {
			return fmt.Errorf("key %d has %d counts, want %d", k, len(seen[k]), n)
		}
		for c := int64(1); c <= n; c++ {
			if !seen[k][c] {
				return fmt.Errorf("key %d misses count %d", k, c)
			}
		}
	}
	if int64(len(lines)) != records {
		return fmt.Errorf("%d lines for %d records", len(lines), records)
	}
	return nil
}

// countPerKey keeps a running count per key.
type countPerKey struct {
	count *weir.ValueState[int64]
}

func (c *countPerKey) Open(ctx *weir.KeyedContext[int64, string]) error {
	var err error
	c.count, err = weir.GetValueState(ctx, weir.ValueStateDescriptor[int64]{Name: "count"})
	return err
}

func (c *countPerKey) ProcessElement(ctx *weir.KeyedContext[int64, string], _ int64) error {
	n, _ := c.count.Value()
	n++
	c.count.Update(n)
	ctx.Emit(strconv.FormatInt(ctx.CurrentKey(), 10) + "," + strconv.FormatInt(n, 10))
	return nil
}

// numbers emits 0..count-1, split into contiguous ranges per subtask, at
// most rate records per second in total when rate > 0. Its readers are
// checkpointed: a split's state is its next number and end, 16 bytes big
// endian.
type numbers struct {
	count int64
	rate  float64
}

func (n numbers) Name() string { return fmt.Sprintf("Numbers(%d)", n.count) }

func (n numbers) CreateReader(ctx weir.SourceContext) (weir.SourceReader[int64], error) {
	p := int64(ctx.Parallelism)
	r := &numbersReader{rate: n.rate / float64(p), start: time.Now()}
	if ctx.RestoredSplits == nil {
		r.splits = [][2]int64{{n.count * int64(ctx.Subtask) / p, n.count * int64(ctx.Subtask+1) / p}}
		return r, nil
	}
	for _, b := range ctx.RestoredSplits {
		if len(b) != 16 {
			return nil, fmt.Errorf("numbers: restore: split state of %d bytes, want 16", len(b))
		}
		r.splits = append(r.splits, [2]int64{int64(binary.BigEndian.Uint64(b)), int64(binary.BigEndian.Uint64(b[8:]))})
	}
	return r, nil
}

type numbersReader struct {
	splits  [][2]int64 // next, end
	emitted int64
	rate    float64 // per subtask
	start   time.Time
}

func (r *numbersReader) ReadBatch(out weir.Collector[int64]) (weir.ReadStatus, error) {
	for len(r.splits) > 0 && r.splits[0][0] >= r.splits[0][1] {
		r.splits = r.splits[1:]
	}
	if len(r.splits) == 0 {
		return weir.EndOfInput, nil
	}
	batch := int64(1024)
	if r.rate > 0 {
		allowed := int64(time.Since(r.start).Seconds()*r.rate) + 1 - r.emitted
		if allowed <= 0 {
			return weir.NothingAvailable, nil
		}
		batch = min(batch, allowed)
	}
	sp := &r.splits[0]
	stop := min(sp[0]+batch, sp[1])
	for i := sp[0]; i < stop; i++ {
		out.Collect(i)
	}
	r.emitted += stop - sp[0]
	sp[0] = stop
	return weir.MoreAvailable, nil
}

// SnapshotSplits implements weir.CheckpointedReader.
func (r *numbersReader) SnapshotSplits() ([][]byte, error) {
	var out [][]byte
	for _, sp := range r.splits {
		if sp[0] < sp[1] {
			b := binary.BigEndian.AppendUint64(nil, uint64(sp[0]))
			out = append(out, binary.BigEndian.AppendUint64(b, uint64(sp[1])))
		}
	}
	return out, nil
}

func (r *numbersReader) Close() error { return nil }
