package storage

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"
	"gocloud.dev/blob/memblob"
)

// Storage is checkpoint storage under one root. It is safe for concurrent
// use. Close releases the underlying bucket.
type Storage struct {
	b Bucket
	// loc is the root's identity (Location), shown how messages name it;
	// both are set by Open and empty after OpenBucket.
	loc, shown string
}

// OpenBucket returns a Storage over b (for example a blobtest wrapper). The
// Storage owns b: Close closes it.
func OpenBucket(b Bucket) *Storage {
	return &Storage{b: b}
}

// Open opens checkpoint storage at loc:
//   - a plain path or a file:// URL: a local directory, created if missing
//     (fileblob, temp file next to the target, no .attrs sidecars);
//   - mem://: a fresh in-memory bucket (memblob), for tests;
//   - any other URL: blob.OpenBucket (the gocloud URL mux); a path in the
//     URL (s3://bucket/a/b) becomes the key prefix "a/b/". The scheme's
//     driver must be linked in, e.g. import _ "gocloud.dev/blob/s3blob".
//
// Operations on object stores (any URL but file:// and mem://) that fail
// with a transient error (IsTransient) are retried with the default
// RetryOptions; OpenWith sets them and the logger of the retry warnings.
func Open(ctx context.Context, loc string) (*Storage, error) {
	return open(ctx, loc, true, Options{})
}

// Options configure OpenWith. The zero value is Open's configuration.
type Options struct {
	// Logger receives a warning for every retried operation, naming the
	// object and the error. Default: none.
	Logger *slog.Logger
	// Retry configures the retries on object stores; local directories
	// and mem:// are never retried. Zero fields take their defaults.
	Retry RetryOptions
}

// OpenWith is Open with options. It reports invalid options, all at once,
// before it opens anything.
func OpenWith(ctx context.Context, loc string, o Options) (*Storage, error) {
	if err := o.Retry.Validate(); err != nil {
		return nil, fmt.Errorf("checkpoint storage %q: %w", loc, err)
	}
	return open(ctx, loc, true, o)
}

// OpenLocation opens the Bucket that Open would use for loc, for callers
// that wrap it (blobtest) before passing it to OpenBucket. Object stores
// come with retries (default RetryOptions, no logging).
func OpenLocation(ctx context.Context, loc string) (Bucket, error) {
	return openLoc(ctx, loc, true, Options{})
}

func open(ctx context.Context, loc string, create bool, o Options) (*Storage, error) {
	b, err := openLoc(ctx, loc, create, o)
	if err != nil {
		return nil, err
	}
	s := OpenBucket(b)
	s.loc, s.shown = locationOf(loc) // after openLoc: the directory exists
	return s, nil
}

func openLoc(ctx context.Context, loc string, create bool, o Options) (Bucket, error) {
	if !strings.Contains(loc, "://") {
		return openDir(loc, create)
	}
	u, err := url.Parse(loc)
	if err != nil {
		return nil, fmt.Errorf("checkpoint storage %q: %w", loc, err)
	}
	switch u.Scheme {
	case "file":
		if u.Host != "" && u.Host != "localhost" {
			return nil, fmt.Errorf("checkpoint storage %q: file URL with host %q is not supported", loc, u.Host)
		}
		return openDir(filepath.FromSlash(u.Path), create)
	case "mem":
		b := memblob.OpenBucket(nil)
		if p := strings.Trim(u.Path, "/"); p != "" {
			b = blob.PrefixedBucket(b, p+"/")
		}
		return NewBlobBucket(b), nil
	}
	if p := strings.Trim(u.Path, "/"); p != "" {
		q := u.Query()
		if q.Has("prefix") {
			return nil, fmt.Errorf("checkpoint storage %q: both a path and a prefix parameter", loc)
		}
		q.Set("prefix", p+"/")
		u.Path, u.RawPath, u.RawQuery = "", "", q.Encode()
	}
	b, err := blob.OpenBucket(ctx, u.String())
	if err != nil {
		return nil, fmt.Errorf("checkpoint storage %q: %w", loc, err)
	}
	o.Retry.EnsureDefaults()
	return newRetryBucket(NewBlobBucket(b), o.Retry, o.Logger), nil
}

func openDir(dir string, create bool) (Bucket, error) {
	if dir == "" {
		return nil, fmt.Errorf("checkpoint directory: %w: empty path", ErrInvalidName)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("checkpoint directory %s: %w", dir, err)
	}
	fi, err := os.Stat(abs)
	switch {
	case errors.Is(err, os.ErrNotExist) && create:
		if err := os.MkdirAll(abs, 0o777); err != nil {
			return nil, fmt.Errorf("create checkpoint directory %s: %w", abs, err)
		}
	case errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("checkpoint directory %s: %w: %w", abs, ErrNotFound, err)
	case err != nil:
		return nil, fmt.Errorf("checkpoint directory %s: %w", abs, err)
	case !fi.IsDir():
		return nil, fmt.Errorf("checkpoint directory %s: not a directory", abs)
	}
	if create {
		// Fail now, with the path, rather than at the first checkpoint.
		f, err := os.CreateTemp(abs, ".weir-probe-*")
		if err != nil {
			return nil, fmt.Errorf("checkpoint directory %s: not writable: %w", abs, err)
		}
		_ = f.Close()
		_ = os.Remove(f.Name())
	}
	b, err := fileblob.OpenBucket(abs, &fileblob.Options{
		NoTempDir: true, // rename within the same directory, same filesystem
		Metadata:  fileblob.MetadataDontWrite,
	})
	if err != nil {
		return nil, fmt.Errorf("checkpoint directory %s: %w", abs, err)
	}
	return &fileBucket{blobBucket: blobBucket{b: b}, root: abs}, nil
}

// Close closes the underlying bucket.
func (s *Storage) Close() error { return s.b.Close() }
