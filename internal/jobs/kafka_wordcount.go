package jobs

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/connector/kafka"
)

// KafkaWordCount counts words read from a Kafka topic and writes every
// running count to another topic: the streaming word count of Flink's
// Kafka examples.
type KafkaWordCount struct {
	kafkaFlags
	input, output string
	groupID       string
	starting      string
	bounded       bool
}

var _ Job = (*KafkaWordCount)(nil)

// NewKafkaWordCount returns the kafka-wordcount job with default settings.
func NewKafkaWordCount() Job {
	return &KafkaWordCount{kafkaFlags: kafkaFlags{delivery: "at-least-once", txnPrefix: "weir-kafka-wordcount"},
		groupID: "weir-kafka-wordcount", starting: "earliest"}
}

// Name implements Job.
func (w *KafkaWordCount) Name() string { return "kafka-wordcount" }

// Description implements Job.
func (w *KafkaWordCount) Description() string {
	return "Count the words of a Kafka topic's records and write every running count to another topic"
}

// LongDescription implements LongDescriber.
func (w *KafkaWordCount) LongDescription() string {
	return `Reads the records of --input-topic (their values are lines of text), splits
them into words, keeps a running count per word in keyed state and writes
"word count" to --output-topic (the word as the record key) on every update,
with --delivery none, at-least-once or exactly-once (Kafka transactions
committed when checkpoints complete: read the output with read_committed).
The source's offsets are kept in checkpoints; with --group-id they are also
committed to the consumer group when checkpoints complete, for monitoring.
--bounded stops at the end offsets seen at start. Without a Kafka
installation, 'weir dev kafka' starts a development broker.`
}

// RegisterFlags implements Job.
func (w *KafkaWordCount) RegisterFlags(fs *pflag.FlagSet) {
	fs.StringSliceVar(&w.brokers, "brokers", nil, "Kafka seed brokers, `host:port[,...]` (required)")
	fs.StringVar(&w.input, "input-topic", "", "`topic` to read lines from (required)")
	fs.StringVar(&w.output, "output-topic", "", "`topic` to write the counts to (required)")
	fs.StringVar(&w.groupID, "group-id", w.groupID, "consumer `group` the read offsets are committed to on checkpoints (empty: none)")
	fs.StringVar(&w.starting, "starting-offsets", w.starting, "where to start without a checkpoint: earliest, latest or committed")
	fs.BoolVar(&w.bounded, "bounded", false, "stop at the end offsets seen at start")
	w.kafkaFlags.register(fs)
}

// Validate implements Job.
func (w *KafkaWordCount) Validate() error {
	errs := []error{w.kafkaFlags.validate("--brokers")}
	if w.input == "" {
		errs = append(errs, errors.New("--input-topic: a topic to read is required"))
	}
	if w.output == "" {
		errs = append(errs, errors.New("--output-topic: a topic to write is required"))
	}
	if _, err := startingOffsets(w.starting); err != nil {
		errs = append(errs, err)
	}
	if w.starting == "committed" && w.groupID == "" {
		errs = append(errs, errors.New("--starting-offsets committed needs a --group-id"))
	}
	return errors.Join(errs...)
}

// Build implements Job.
func (w *KafkaWordCount) Build(env *weir.Environment, _ io.Writer) error {
	start, _ := startingOffsets(w.starting)
	src := kafka.NewSource(kafka.SourceOptions{Client: kafka.Client{Brokers: w.brokers}, Topics: []string{w.input},
		GroupID: w.groupID, StartingOffsets: start, Bounded: w.bounded},
		func(r *kafka.Record) (string, error) { return string(r.Value), nil })
	lines := weir.FromSource[string](env, src).UID("kafka-wordcount-source")
	words := weir.FlatMap(lines, func(line string, out weir.Collector[string]) {
		for _, word := range strings.Fields(line) {
			out.Collect(word)
		}
	}).Name("Tokenize").UID("kafka-wordcount-tokenize")
	counts := weir.KeyedProcess(weir.KeyBy(words, func(word string) string { return word }),
		func() weir.KeyedProcessFunction[string, string, string] { return &runningWordCount{} }).
		Name("Count").UID("kafka-wordcount-count")
	snk, err := w.sink(w.output, func(s string) (*kafka.Record, error) {
		word, _, _ := strings.Cut(s, " ")
		return &kafka.Record{Key: []byte(word), Value: []byte(s)}, nil
	})
	if err != nil {
		return err
	}
	weir.SinkTo(counts, snk).UID("kafka-wordcount-sink")
	return nil
}

// runningWordCount emits "word count" on every word.
type runningWordCount struct {
	count *weir.ValueState[int64]
}

func (c *runningWordCount) Open(ctx *weir.KeyedContext[string, string]) error {
	var err error
	c.count, err = weir.GetValueState(ctx, weir.ValueStateDescriptor[int64]{Name: "count"})
	return err
}

func (c *runningWordCount) ProcessElement(ctx *weir.KeyedContext[string, string], _ string) error {
	n, _ := c.count.Value()
	n++
	c.count.Update(n)
	ctx.Emit(ctx.CurrentKey() + " " + strconv.FormatInt(n, 10))
	return nil
}

// kafkaFlags are the sink flags the Kafka jobs share.
type kafkaFlags struct {
	brokers   []string
	delivery  string
	txnPrefix string
}

func (k *kafkaFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&k.delivery, "delivery", k.delivery, "delivery guarantee of the Kafka sink: none, at-least-once or exactly-once")
	fs.StringVar(&k.txnPrefix, "transactional-id-prefix", k.txnPrefix, "prefix of the sink's transactional ids (exactly-once; unique per job writing to the cluster)")
}

func (k *kafkaFlags) validate(brokersFlag string) error {
	var errs []error
	if len(k.brokers) == 0 {
		errs = append(errs, fmt.Errorf("%s: Kafka seed brokers (host:port) are required", brokersFlag))
	}
	if _, err := kafka.ParseDeliveryGuarantee(k.delivery); err != nil {
		errs = append(errs, fmt.Errorf("--delivery: %w", err))
	}
	return errors.Join(errs...)
}

func (k *kafkaFlags) sink(topic string, serialize func(string) (*kafka.Record, error)) (weir.Sink[string], error) {
	d, err := kafka.ParseDeliveryGuarantee(k.delivery)
	if err != nil {
		return nil, err
	}
	return kafka.NewSink(kafka.SinkOptions{Client: kafka.Client{Brokers: k.brokers}, Topic: topic, Delivery: d,
		TransactionalIDPrefix: k.txnPrefix}, serialize), nil
}

func startingOffsets(s string) (kafka.OffsetsInitializer, error) {
	switch s {
	case "earliest":
		return kafka.Earliest(), nil
	case "latest":
		return kafka.Latest(), nil
	case "committed":
		return kafka.Committed(kafka.Earliest()), nil
	}
	return kafka.OffsetsInitializer{}, fmt.Errorf("--starting-offsets %q: want earliest, latest or committed", s)
}
