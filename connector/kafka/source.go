package kafka

import (
	"errors"
	"fmt"
	"regexp"
	"time"
	"unicode/utf16"

	"github.com/weirstream/weir"
)

// IsolationLevel says which records of transactions the source reads.
type IsolationLevel uint8

const (
	// ReadCommitted reads only records of committed transactions (and
	// every non-transactional record), up to the last stable offset: what
	// an exactly-once sink published. The default.
	ReadCommitted IsolationLevel = iota
	// ReadUncommitted reads every record, also of open and aborted
	// transactions, up to the high watermark.
	ReadUncommitted
)

// DefaultPartitionDiscoveryInterval is how often a source lists its topics'
// partitions unless SourceOptions say otherwise (Flink's default).
const DefaultPartitionDiscoveryInterval = 5 * time.Minute

// SourceOptions configure a Kafka source.
type SourceOptions struct {
	// Client reaches the brokers. The source's fetches wait at most 500ms
	// for data (fetch.max.wait.ms, as the Java consumer) unless Opts set
	// kgo.FetchMaxWait; isolation, control records and offsets are the
	// source's own.
	Client
	// Topics to read; exactly one of Topics and TopicPattern is set.
	Topics []string
	// TopicPattern is a regular expression (Go syntax, matched against the
	// whole name) over topic names: every matching topic is read, also
	// those created later (found by partition discovery).
	TopicPattern string
	// GroupID is the consumer group (group.id) offsets are committed to
	// when checkpoints complete, for monitoring: the checkpoint, not the
	// group, is what a restore resumes from. Required by Committed().
	// Default: none, nothing is committed.
	GroupID string
	// StartingOffsets say where a partition is first read. Default
	// Earliest().
	StartingOffsets OffsetsInitializer
	// Bounded makes the source stop at the end offsets its partitions have
	// when the job starts (Flink's setBounded(OffsetsInitializer.latest())):
	// each reader ends once it read them. Partition discovery is off then.
	Bounded bool
	// PartitionDiscoveryInterval is how often the topics' partitions are
	// listed to find new ones (partition.discovery.interval.ms). Default
	// DefaultPartitionDiscoveryInterval; negative turns discovery off.
	PartitionDiscoveryInterval time.Duration
	// CommitOffsetsOnCheckpoint commits the checkpointed offsets to
	// GroupID when a checkpoint completes (commit.offsets.on.checkpoint).
	// Default true when GroupID is set.
	CommitOffsetsOnCheckpoint *bool
	// IsolationLevel is the fetches' isolation level (isolation.level).
	// Default ReadCommitted, so that what an exactly-once sink wrote reads
	// back exactly once. (Flink's KafkaSource leaves Kafka's default,
	// read_uncommitted; set ReadUncommitted for that.)
	IsolationLevel IsolationLevel

	// pollTimeout bounds one poll of the background fetcher (tests).
	pollTimeout time.Duration
}

// Validate reports every problem of the options at once.
func (o SourceOptions) Validate() error {
	var errs []error
	if err := o.Client.validate(); err != nil {
		errs = append(errs, err)
	}
	switch {
	case len(o.Topics) == 0 && o.TopicPattern == "":
		errs = append(errs, errors.New("kafka source: no topics: set Topics (a list) or TopicPattern (a regexp)"))
	case len(o.Topics) > 0 && o.TopicPattern != "":
		errs = append(errs, errors.New("kafka source: both Topics and TopicPattern are set: set exactly one"))
	case o.TopicPattern != "":
		if _, err := regexp.Compile(o.TopicPattern); err != nil {
			errs = append(errs, fmt.Errorf("kafka source: TopicPattern %q is not a valid regexp (Go syntax): %w", o.TopicPattern, err))
		}
	}
	for _, t := range o.Topics {
		if t == "" {
			errs = append(errs, errors.New("kafka source: Topics has an empty topic name"))
		}
	}
	if err := o.StartingOffsets.validate(o.GroupID); err != nil {
		errs = append(errs, err)
	}
	if o.CommitOffsetsOnCheckpoint != nil && *o.CommitOffsetsOnCheckpoint && o.GroupID == "" {
		errs = append(errs, errors.New("kafka source: CommitOffsetsOnCheckpoint needs a consumer group to commit to: set GroupID"))
	}
	if o.IsolationLevel > ReadUncommitted {
		errs = append(errs, fmt.Errorf("kafka source: IsolationLevel %d: want ReadCommitted or ReadUncommitted", o.IsolationLevel))
	}
	return errors.Join(errs...)
}

// commits says whether offsets are committed on checkpoints.
func (o SourceOptions) commits() bool {
	if o.CommitOffsetsOnCheckpoint != nil {
		return *o.CommitOffsetsOnCheckpoint && o.GroupID != ""
	}
	return o.GroupID != ""
}

// discoveryInterval is the discovery period, 0 when off.
func (o SourceOptions) discoveryInterval() time.Duration {
	switch {
	case o.Bounded || o.PartitionDiscoveryInterval < 0:
		return 0
	case o.PartitionDiscoveryInterval == 0:
		return DefaultPartitionDiscoveryInterval
	}
	return o.PartitionDiscoveryInterval
}

// Source reads Kafka topics (Flink's KafkaSource). Each partition is a
// split: on a fresh start subtask i of p reads the partitions Flink's
// enumerator gives it (see owner), from StartingOffsets; a checkpoint
// keeps each partition's next offset, and a restore resumes every
// partition exactly there, whatever the new parallelism. Records go
// through the deserializer; an error of it fails the job, naming the
// record, which a restore reads again.
type Source[T any] struct {
	opts        SourceOptions
	deserialize func(*Record) (T, error)
}

var _ weir.Source[int] = (*Source[int])(nil)

// NewSource returns a source reading what opts say, turning each record
// into a T with deserialize (called from the subtask's goroutine; the
// *Record is reused for the next record, see Record). Bad
// options are reported by Validate and when the job starts.
func NewSource[T any](opts SourceOptions, deserialize func(*Record) (T, error)) *Source[T] {
	return &Source[T]{opts: opts, deserialize: deserialize}
}

// Name implements the source's name in the job graph.
func (s *Source[T]) Name() string { return "Kafka" }

// Validate reports every problem of the source's options.
func (s *Source[T]) Validate() error {
	err := s.opts.Validate()
	if s.deserialize == nil {
		err = errors.Join(err, errors.New("kafka source: no deserializer: pass a func(*kafka.Record) (T, error) to NewSource"))
	}
	return err
}

// CreateReader implements weir.Source.
func (s *Source[T]) CreateReader(ctx weir.SourceContext) (weir.SourceReader[T], error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	r, err := newReader(s, ctx, nil)
	if err != nil {
		// Not the *reader nil: a typed nil in the interface is not nil.
		return nil, err
	}
	return r, nil
}

// tp is a topic partition.
type tp struct {
	topic     string
	partition int32
}

func (t tp) String() string { return fmt.Sprintf("%s/%d", t.topic, t.partition) }

// javaStringHashCode is Java's String.hashCode: s[0]*31^(n-1) + ... +
// s[n-1] over the UTF-16 code units, in 32-bit two's complement.
func javaStringHashCode(s string) int32 {
	var h int32
	for _, u := range utf16.Encode([]rune(s)) {
		h = 31*h + int32(u)
	}
	return h
}

// owner is the subtask Flink's KafkaSourceEnumerator assigns partition p
// of topic to among parallelism readers: the topic's start index
// ((hashCode * 31) & 0x7FFFFFFF) % parallelism, plus the partition.
func owner(topic string, partition int32, parallelism int) int {
	start := int64((javaStringHashCode(topic)*31)&0x7FFFFFFF) % int64(parallelism)
	return int((start + int64(partition)) % int64(parallelism))
}
