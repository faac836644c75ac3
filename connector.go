package weir

import (
	"log/slog"
	"time"

	"github.com/weirstream/weir/internal/operator"
	"github.com/weirstream/weir/internal/task"
)

// Source produces the records of a stream. The source itself is a
// description; each parallel subtask opens its own reader.
type Source[T any] interface {
	// CreateReader opens the reader of one subtask. The source decides how
	// its input is split among ctx.Parallelism readers.
	CreateReader(ctx SourceContext) (SourceReader[T], error)
}

// SourceContext tells a source reader where it runs.
type SourceContext struct {
	// Subtask is the reader's index, 0 <= Subtask < Parallelism.
	Subtask, Parallelism int
	// Operator is the source operator's name.
	Operator string
	Logger   *slog.Logger
	// RestoredSplits are the states of the splits this subtask resumes
	// after a restore, as CheckpointedReader.SnapshotSplits returned them
	// (possibly from other subtasks, when the parallelism changed); nil on a
	// fresh start, when the source decides the subtask's splits itself.
	RestoredSplits [][]byte
	// Metrics is the source operator's metric group for the reader's own
	// metrics (offsets, lag); nil when the job exports no metrics, which
	// MetricGroup's methods accept.
	Metrics *MetricGroup
	// CheckpointInterval is the job's periodic checkpoint interval, 0 when
	// it takes no periodic checkpoints.
	CheckpointInterval time.Duration

	state *operator.State
}

func (c SourceContext) operatorState() *operator.State { return c.state }

// ReadStatus is what a source reader reports after a batch.
type ReadStatus int

// Read statuses. (Each has the value of the task's status of the same name,
// so that the source operator converts without a lookup.)
const (
	// MoreAvailable: call ReadBatch again.
	MoreAvailable = ReadStatus(task.MoreAvailable)
	// NothingAvailable: nothing to read now; the task waits for the reader's
	// Ready channel if it implements ReadyNotifier, else retries after a
	// millisecond, and meanwhile sends partially filled buffers on.
	NothingAvailable = ReadStatus(task.NothingAvailable)
	// EndOfInput: the reader is exhausted.
	EndOfInput = ReadStatus(task.EndOfInput)
)

// SourceReader reads the records of one subtask. Its methods are called from
// the subtask's goroutine only.
type SourceReader[T any] interface {
	// ReadBatch emits a batch of records (a few hundred to a few thousand
	// keep per-batch costs low while the task stays responsive) and says
	// whether more may follow. It must not block for long.
	ReadBatch(out Collector[T]) (ReadStatus, error)
	// Close releases the reader's resources.
	Close() error
}

// CheckpointedReader is implemented by readers whose position can be
// checkpointed. A source is divided into splits (a range of numbers, a
// byte range of a file, a partition of a topic); a reader works through the
// splits it was given, and its position is the state of each split it has
// not finished. On restore, split states are redistributed among the new
// subtasks, each kept whole, and passed in SourceContext.RestoredSplits.
type CheckpointedReader interface {
	// SnapshotSplits returns the state of every unfinished split, taken
	// between two ReadBatch calls: resuming from it emits exactly the
	// records not emitted yet.
	SnapshotSplits() ([][]byte, error)
}

// CheckpointListener is implemented by source readers (and sink writers)
// that act when a checkpoint completes: the Kafka source commits its
// offsets to the consumer group then. NotifyCheckpointComplete runs on the
// subtask's goroutine, between two ReadBatch (or Write) calls, for every
// checkpoint the subtask took part in that completed. As with Flink's
// notifyCheckpointComplete, do not rely on a notification for every
// checkpoint: act on everything up to id. For a
// writer of a TwoPhaseCommitSink it runs after the sink committed the
// transactions of checkpoint id. An error fails the subtask.
type CheckpointListener interface {
	NotifyCheckpointComplete(id int64) error
}

// ReadyNotifier is implemented by readers that can say when data arrives
// after they returned NothingAvailable.
type ReadyNotifier interface {
	Ready() <-chan struct{}
}

// Sink consumes the records of a stream; each parallel subtask opens its own
// writer.
type Sink[T any] interface {
	CreateWriter(ctx SinkContext) (SinkWriter[T], error)
}

// SinkContext tells a sink writer where it runs.
type SinkContext struct {
	Subtask, Parallelism int
	Operator             string
	Logger               *slog.Logger
	// RunID is unique per deployment of the job (it changes on every
	// restart): a sink can tell its own files from those an earlier run
	// left behind.
	RunID string
	// Metrics is the sink operator's metric group for the writer's own
	// metrics (records sent, send errors); nil when the job exports no
	// metrics, which MetricGroup's methods accept.
	Metrics *MetricGroup
	// CheckpointInterval is the job's periodic checkpoint interval, 0 when
	// it takes no periodic checkpoints (a transactional sink checks its
	// transaction timeout against it).
	CheckpointInterval time.Duration

	state *operator.State
}

func (c SinkContext) operatorState() *operator.State { return c.state }

// SinkWriter writes the records of one subtask. Its methods are called from
// the subtask's goroutine only.
type SinkWriter[T any] interface {
	// Write writes one record; an error fails the job.
	Write(v T) error
	// Flush makes every written record visible; it is called at the end of
	// a bounded input.
	Flush() error
	// Close releases the writer's resources; it is called once, also after
	// a failure.
	Close() error
}

// TwoPhaseCommitSink is a sink whose output becomes visible only once a
// checkpoint covering it completes: exactly-once output (Flink's
// TwoPhaseCommittingSink). Its writers implement PreCommitter.
//
// The protocol, per writer: records go into an open transaction; at each
// checkpoint barrier (the synchronous phase) PreCommit ends it durably but
// invisibly and returns a transaction handle, which weir stores in the
// checkpoint; when that checkpoint completes, weir calls Commit with it.
// After a restore, weir calls Commit again for every transaction the
// restored checkpoint holds (the crash may have come before or after the
// commit), before the first write. Transactions that no completed
// checkpoint holds are never committed: the writer discards what an
// earlier run left open when it is created (SinkContext.RunID tells runs
// apart). Without checkpointing, the writer pre-commits and commits at the
// end of the input.
type TwoPhaseCommitSink[T any] interface {
	Sink[T]
	// Commit publishes a pre-committed transaction. It must be idempotent:
	// it may be called again for a transaction already committed, possibly
	// from another subtask after a change of parallelism. ctx is that of
	// the subtask calling it.
	Commit(ctx SinkContext, txn []byte) error
}

// PreCommitter is implemented by the writers of a TwoPhaseCommitSink.
type PreCommitter interface {
	// PreCommit ends the open transaction for checkpoint id: what was
	// written is made durable but not visible. It returns the transaction
	// handle Commit needs, or nil if nothing was written.
	PreCommit(id int64) ([]byte, error)
}

// PreCommitSyncer may be implemented by a PreCommitter whose PreCommit
// leaves the transaction's bytes to be made durable later, so that the
// synchronous phase stays short. SyncPreCommitted runs at most once per
// transaction, before the transaction is committed: normally in the
// asynchronous phase of its checkpoint, off the task goroutine, but with
// overlapping checkpoints possibly in a later checkpoint's asynchronous
// phase or on the task goroutine at a completion, and concurrently with
// the syncs of other transactions. A checkpoint completes only if every
// transaction it lists synced; a failed sync is not retried and fails the
// task (the restore replays the transaction's records). It must touch
// only the pre-committed transaction txn, never the writer's open one.
type PreCommitSyncer interface {
	SyncPreCommitted(txn []byte) error
}
