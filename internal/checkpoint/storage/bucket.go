package storage

import (
	"context"
	"errors"
	"io"
)

// Sentinel errors. Errors returned by this package wrap one of these when
// the condition applies; test with errors.Is.
var (
	// ErrNotFound: the object, checkpoint or directory does not exist.
	ErrNotFound = errors.New("storage: not found")
	// ErrCorrupt: an object exists but fails verification (magic, length,
	// size or checksum).
	ErrCorrupt = errors.New("storage: corrupt")
	// ErrUnsupportedVersion: a _metadata file has a format version this
	// build does not know.
	ErrUnsupportedVersion = errors.New("storage: unsupported metadata version")
	// ErrInvalidName: a job name, file name, checkpoint id or path is not
	// acceptable.
	ErrInvalidName = errors.New("storage: invalid name")
)

// Bucket is the blob-store seam this package needs. NewBlobBucket adapts a
// *blob.Bucket; blobtest wraps any Bucket to inject faults.
//
// Contract:
//   - All methods may be called concurrently from several goroutines.
//   - Keys are slash-separated and relative to the bucket root.
//   - NewReader, Attributes and Delete return an error wrapping ErrNotFound
//     when the key does not exist.
//   - An object written by NewWriter becomes visible to readers only after
//     ObjectWriter.Finish returns nil, and then completely; after Abort, or a
//     failed Finish, it is absent (implementations that cannot promise this,
//     such as blobtest's crash mode, exist to test that callers cope).
//   - List returns the objects whose key starts with prefix, sorted by key.
//     With a non-empty delimiter, keys containing the delimiter after the
//     prefix are collapsed into one entry with IsDir set and a Key ending in
//     the delimiter.
type Bucket interface {
	NewWriter(ctx context.Context, key string) (ObjectWriter, error)
	NewReader(ctx context.Context, key string) (io.ReadCloser, error)
	Attributes(ctx context.Context, key string) (ObjectInfo, error)
	Delete(ctx context.Context, key string) error
	List(ctx context.Context, prefix, delimiter string) ([]ObjectInfo, error)
	Close() error
}

// ObjectWriter writes one object. It is used by one goroutine. Exactly one
// of Finish or Abort should be called; calling Abort after Finish, or twice,
// is a no-op. The caller keeps ownership of buffers passed to Write.
type ObjectWriter interface {
	// Write appends p. Errors may be deferred until Finish.
	Write(p []byte) (int, error)
	// Finish makes the object durable and visible. A nil error means the
	// whole object is stored.
	Finish() error
	// Abort discards the object; nothing becomes visible.
	Abort() error
}

// ObjectInfo describes one listed object or collapsed directory.
type ObjectInfo struct {
	Key   string
	Size  int64
	IsDir bool
}

// dirRemover is implemented by buckets over a local directory, where
// deleting every object leaves an empty directory behind. RemoveEmptyDir
// removes the directory for prefix if it is empty and ignores all failures.
type dirRemover interface {
	RemoveEmptyDir(prefix string)
}
