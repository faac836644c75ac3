// Package storage is the checkpoint storage layer: it lays checkpoints out on
// a blob store (local directory, memory, or any gocloud.dev/blob URL such as
// s3://) and gives the checkpoint layer above durable, verifiable objects.
//
// # Layout
//
// Under a storage root, each job owns one directory named by SanitizeJob:
//
//	<root>/<job>/chk-<n>/_metadata     completion marker and checkpoint metadata
//	<root>/<job>/chk-<n>/<name>        data files owned by checkpoint n
//	<root>/<job>/shared/<name>         files referenced by several checkpoints
//	<root>/<job>/taskowned/            reserved for task-owned state
//	<root>/<job>/_lock                 local directories: the job lock (flock)
//	<root>/<job>/_lease-<g>            object stores: the job lock (lease)
//
// The job lock (LockJob, see lock.go) keeps one run per job directory; its
// objects are files next to the chk-<n> directories, which no listing
// shows.
//
// A checkpoint is complete exactly when chk-<n>/_metadata exists and decodes
// (see DecodeMetadata). Data files are written and Finished before the
// metadata; deletion removes the metadata first. A reader therefore never
// sees a checkpoint as complete while one of its files is missing.
//
// # _metadata format (version 1)
//
// All integers are big-endian:
//
//	offset  size  field
//	0       8     magic "WEIRCHK\x00"
//	8       4     format version (uint32, currently 1)
//	12      8     payload length L (uint64)
//	20      L     payload (opaque; serialized by the checkpoint layer)
//	20+L    4     CRC-32C (Castagnoli) of bytes [0, 20+L)
//
// The payload is never interpreted here. See docs/checkpoint-layout.md.
//
// # Data files
//
// CreateFile returns a FileWriter (Write, then Finish or Abort). Finish returns
// a FileHandle with the path relative to the job directory, the size and a
// CRC-32C; OpenFile verifies both while reading and reports ErrCorrupt.
//
// # Atomicity and durability
//
// Every object is written through Bucket.NewWriter, whose ObjectWriter makes
// the object visible only on a successful Finish. For local directories this
// package uses gocloud.dev/blob/fileblob with NoTempDir, which writes to a
// "<key>.<hex>.tmp" file next to the target and renames it on Close (verified
// in fileblob v0.47.0, writer.Close). fileblob does not fsync; the local
// adapter in this package adds the missing steps: fsync of the temp file
// (through WriterOptions.BeforeWrite, which exposes the *os.File) before the
// rename, then fsync of the parent directory (and of any directories the
// write created) after it. Object stores (S3, GCS, Azure) publish an object
// atomically on upload completion, so no extra step is needed there.
//
// # Retries
//
// Open wraps object-store buckets in a retrying Bucket (bucket_retry.go):
// operations that fail with a transient error (IsTransient: 5xx, SlowDown,
// dropped connections) are tried again with exponential backoff and
// jitter, a bounded number of times (RetryOptions), with a warning per
// retry; writes up to RetryOptions.MaxReplayBytes are held in memory and
// sent again whole. The waits end with the context the operation was
// started with. See docs/storage.md.
//
// # Errors
//
// Errors wrap the sentinels ErrNotFound, ErrCorrupt, ErrUnsupportedVersion and
// ErrInvalidName; check them with errors.Is.
//
// # Other schemes
//
// Open passes any URL it does not handle itself (file://, mem://, plain
// paths) to blob.OpenBucket, the gocloud URL mux. Supporting s3:// is a
// matter of linking the driver with a blank import of
// gocloud.dev/blob/s3blob (likewise gcsblob, azureblob) in the binary.
//
// # Concurrency
//
// A Storage may be used by many goroutines at once. A FileWriter or a reader
// returned by OpenFile belongs to one goroutine.
package storage
