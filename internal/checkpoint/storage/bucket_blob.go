package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
)

// NewBlobBucket adapts a *blob.Bucket (any gocloud driver) to Bucket. The
// returned Bucket owns b: its Close closes b. Objects are written with
// content type application/octet-stream. Use this for buckets opened with a
// custom client; Open is the usual entry point.
func NewBlobBucket(b *blob.Bucket) Bucket {
	return &blobBucket{b: b}
}

var (
	_ Bucket     = (*blobBucket)(nil)
	_ Bucket     = (*fileBucket)(nil)
	_ dirRemover = (*fileBucket)(nil)
)

type blobBucket struct {
	b *blob.Bucket
}

func translate(err error) error {
	if err == nil {
		return nil
	}
	if gcerrors.Code(err) == gcerrors.NotFound {
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	return err
}

func (b *blobBucket) NewWriter(ctx context.Context, key string) (ObjectWriter, error) {
	return b.newWriter(ctx, key, nil)
}

func (b *blobBucket) newWriter(ctx context.Context, key string, fileOut **os.File) (*blobWriter, error) {
	ctx, cancel := context.WithCancel(ctx)
	opts := &blob.WriterOptions{ContentType: "application/octet-stream"}
	if fileOut != nil {
		opts.BeforeWrite = func(as func(any) bool) error {
			as(fileOut) // fileblob exposes its temp *os.File; false elsewhere.
			return nil
		}
	}
	w, err := b.b.NewWriter(ctx, key, opts)
	if err != nil {
		cancel()
		return nil, translate(err)
	}
	return &blobWriter{w: w, cancel: cancel}, nil
}

func (b *blobBucket) NewReader(ctx context.Context, key string) (io.ReadCloser, error) {
	r, err := b.b.NewReader(ctx, key, nil)
	if err != nil {
		return nil, translate(err)
	}
	return r, nil
}

func (b *blobBucket) Attributes(ctx context.Context, key string) (ObjectInfo, error) {
	a, err := b.b.Attributes(ctx, key)
	if err != nil {
		return ObjectInfo{}, translate(err)
	}
	return ObjectInfo{Key: key, Size: a.Size}, nil
}

func (b *blobBucket) Delete(ctx context.Context, key string) error {
	return translate(b.b.Delete(ctx, key))
}

// listAttempts bounds the restarts of a listing that lost an entry.
const listAttempts = 10

// List lists prefix. A local listing fails when an entry disappears while
// the directory is walked (fileblob stats every entry), which a concurrent
// deletion causes: the listing then starts over, a few times at most.
func (b *blobBucket) List(ctx context.Context, prefix, delimiter string) ([]ObjectInfo, error) {
	for attempt := 1; ; attempt++ {
		out, err := b.list(ctx, prefix, delimiter)
		if err == nil || !errors.Is(err, ErrNotFound) || attempt == listAttempts {
			return out, err
		}
	}
}

func (b *blobBucket) list(ctx context.Context, prefix, delimiter string) ([]ObjectInfo, error) {
	it := b.b.List(&blob.ListOptions{Prefix: prefix, Delimiter: delimiter})
	var out []ObjectInfo
	for {
		o, err := it.Next(ctx)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, translate(err)
		}
		out = append(out, ObjectInfo{Key: o.Key, Size: o.Size, IsDir: o.IsDir})
	}
}

func (b *blobBucket) Close() error { return b.b.Close() }

var _ ObjectWriter = (*blobWriter)(nil)

// blobWriter turns blob.Writer's Close-or-cancel protocol into Finish/Abort.
type blobWriter struct {
	w      *blob.Writer
	cancel context.CancelFunc
	done   bool
	// Set by fileBucket only.
	file     *os.File
	path     string // final local path
	syncDirs []string
	onSync   func(kind, path string) // test hook, may be nil
}

func (w *blobWriter) Write(p []byte) (int, error) {
	if w.done {
		return 0, errors.New("storage: write after Finish or Abort")
	}
	return w.w.Write(p)
}

func (w *blobWriter) Finish() error {
	if w.done {
		return errors.New("storage: Finish after Finish or Abort")
	}
	w.done = true
	defer w.cancel()
	if w.file != nil {
		// Data must be on disk before the rename publishes it.
		if w.onSync != nil {
			w.onSync("file", w.path)
		}
		if err := w.file.Sync(); err != nil {
			w.cancel()
			_ = w.w.Close()
			return fmt.Errorf("fsync temp file: %w", err)
		}
	}
	if err := w.w.Close(); err != nil {
		return translate(err)
	}
	for _, d := range w.syncDirs {
		if w.onSync != nil {
			w.onSync("dir", d)
		}
		if err := syncDir(d); err != nil {
			return err
		}
	}
	return nil
}

func (w *blobWriter) Abort() error {
	if w.done {
		return nil
	}
	w.done = true
	w.cancel()      // a canceled context makes every driver discard the write
	_ = w.w.Close() // reports context.Canceled; the object is not created
	return nil
}

// fileBucket is a fileblob bucket rooted at a known local directory, which
// lets it add the fsyncs fileblob omits.
type fileBucket struct {
	blobBucket
	root   string                  // absolute, cleaned
	onSync func(kind, path string) // test hook: called before each fsync
}

func (b *fileBucket) NewWriter(ctx context.Context, key string) (ObjectWriter, error) {
	// Directories the write will create must be synced into their parents.
	target := filepath.Join(b.root, filepath.FromSlash(key))
	parent := filepath.Dir(target)
	dirs := []string{parent}
	for d := parent; d != b.root && strings.HasPrefix(d, b.root); d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil {
			break
		}
		dirs = append(dirs, filepath.Dir(d))
	}
	var f *os.File
	w, err := b.newWriter(ctx, key, &f) // BeforeWrite runs inside NewWriter
	if err != nil {
		return nil, err
	}
	if f == nil {
		_ = w.Abort()
		return nil, fmt.Errorf("write %s: fileblob did not expose its temp file", key)
	}
	w.file, w.path, w.syncDirs, w.onSync = f, target, dirs, b.onSync
	return w, nil
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("fsync dir %s: %w", dir, err)
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("fsync dir %s: %w", dir, err)
	}
	return nil
}

func (b *fileBucket) RemoveEmptyDir(prefix string) {
	d := filepath.Join(b.root, filepath.FromSlash(strings.TrimSuffix(prefix, "/")))
	if d == b.root || !strings.HasPrefix(d, b.root+string(filepath.Separator)) {
		return
	}
	if os.Remove(d) == nil { // fails unless empty
		_ = syncDir(filepath.Dir(d))
	}
}
