// Package changelog is the durable short-term log (DSTL) of the changelog
// state backend, after Flink's FLIP-158: every state change of an operator
// subtask is appended as an opaque operation record to the subtask's log,
// and the log is persisted to checkpoint storage continuously, in the
// background, so that a checkpoint only has to make a small tail durable.
//
// # Writing
//
// A Writer numbers the records it is given (sequence numbers start at 1 and
// grow by one per record) and collects them into an open batch. The batch is
// cut and uploaded as one segment file when any of these happens:
//
//   - Config.PersistDelay has passed since its first record (Flink:
//     state.changelog.dstl.dfs.batch.persist-delay, default 10ms);
//   - it holds Config.PersistSizeThreshold bytes (Flink:
//     batch.persist-size-threshold, default 10 MiB);
//   - it holds Config.PreemptivePersistThreshold bytes (Flink:
//     preemptive-persist-threshold, default 5 MiB), the early upload that keeps
//     the tail a checkpoint must flush small;
//   - Persist asks for records it holds (a checkpoint).
//
// In Flink the preemptive threshold belongs to the per-subtask writer and the
// delay and size threshold to an upload scheduler shared by all subtasks of a
// TaskManager, which packs changes of several writers into one file. Here each
// Writer batches on its own, so both thresholds cut the same batch and the
// smaller one wins; they become different once writers share an uploader.
//
// Each upload attempt is bounded by Config.UploadTimeout (upload.timeout,
// default 1s) and a failed or timed-out attempt is retried at once, up to
// Config.MaxAttempts attempts in all (upload.max-attempts, default 3). After
// the last failed attempt the Writer has failed: Append and Persist return the
// upload error from then on. A timed-out attempt is abandoned, not awaited; if
// it completes later it writes the same bytes to the same name, so it is
// harmless.
//
// Bytes in flight (batches cut but not yet uploaded) are bounded by
// Config.MaxInFlight (upload.max-in-flight, default 100 MiB): while they
// exceed it, Append blocks until an upload completes (backpressure) rather
// than letting memory grow. The open batch is not counted; it is bounded by
// the thresholds.
//
// Segments are written with Storage.CreateSharedFile as
// shared/<prefix>-<n>.log, n counting the Writer's batches from 1. The prefix
// must be unique per Writer incarnation (for example operator, subtask and
// attempt), since a restarted Writer counts from 1 again and must not
// overwrite segments an existing checkpoint references. Deleting segments is
// not the Writer's business: Truncate only forgets them, and the checkpoint
// layer deletes files no retained checkpoint references.
//
// # Deleting
//
// A subtask's changelog files (its segments and its materializations'
// files) are its own until a snapshot references them; from the
// acknowledgement on only the job's shared-state registry deletes them.
// The subtask's Ledger records which were referenced, and deletes the
// others once no checkpoint will reference them (Retire) or when the
// subtask ends (Close).
//
// # Reading
//
// Persist returns Segments (a FileHandle plus the inclusive sequence range
// the file holds); they are plain data meant for the checkpoint metadata.
// Replay reads a list of segments back, checking that consecutive segments
// neither leave a gap nor overlap, and calls a function for every record in
// a requested range.
//
// # Segment file format
//
//	offset  field
//	0       magic "WEIRCLG\x00" (8 bytes)
//	8       records, each: uvarint(seq) uvarint(len) len bytes
//
// The sequence numbers in a file are consecutive; the first and last equal
// the Segment's From and To. The file carries no checksum of its own: the
// storage layer records size and CRC-32C in the FileHandle and verifies both
// on read, and Replay delivers no record of a file before the whole file has
// verified.
package changelog
