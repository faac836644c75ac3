package storage

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
)

// verifyParallelism is how many files VerifyFiles and CheckFiles work on at
// once: enough to overlap the latency of an object store, few enough not
// to swamp a local disk.
const verifyParallelism = 4

// DamagedFileError reports a data file of a checkpoint that is missing or
// does not match its FileHandle. It wraps ErrNotFound or ErrCorrupt.
type DamagedFileError struct {
	// Path is the file's FileHandle.Path, relative to the job directory.
	Path string
	// Name is how the message names the file: its local path or URL.
	Name string
	// Problem says what is wrong: "missing", "size 10, want 2048",
	// "checksum mismatch (CRC-32C 1a2b3c4d, want 5e6f7081)".
	Problem string
	// Err is ErrNotFound or ErrCorrupt.
	Err error
}

func (e *DamagedFileError) Error() string {
	return fmt.Sprintf("data file %s: %s", e.Name, e.Problem)
}

// Unwrap returns ErrNotFound or ErrCorrupt.
func (e *DamagedFileError) Unwrap() error { return e.Err }

// DamagedFilesError lists the damaged files of one verification, in path
// order; errors.As finds the first *DamagedFileError, errors.Is its
// sentinels.
type DamagedFilesError struct {
	Files []*DamagedFileError
}

// shownDamaged is how many damaged files a message names.
const shownDamaged = 3

func (e *DamagedFilesError) Error() string {
	var sb strings.Builder
	for i, f := range e.Files {
		if i == shownDamaged {
			fmt.Fprintf(&sb, "; and %d more damaged files", len(e.Files)-shownDamaged)
			break
		}
		if i > 0 {
			sb.WriteString("; ")
		}
		sb.WriteString(f.Error())
	}
	return sb.String()
}

// Unwrap returns every damaged file's error.
func (e *DamagedFilesError) Unwrap() []error {
	errs := make([]error, len(e.Files))
	for i, f := range e.Files {
		errs[i] = f
	}
	return errs
}

// VerifyFiles checks every data file of job in files against its handle:
// it exists, has the recorded size and, read in full, the recorded
// CRC-32C. Files are read a few at a time. It returns nil when all match;
// a *DamagedFilesError naming every file that is missing (ErrNotFound) or
// differs (ErrCorrupt), in path order; or, at once, any other error (I/O,
// cancellation), which says nothing about the files.
func (s *Storage) VerifyFiles(ctx context.Context, job string, files []FileHandle) error {
	return s.checkFiles(ctx, job, files, true)
}

// CheckFiles is VerifyFiles without reading the files: it checks that
// each exists and has the recorded size, one metadata request per file. A
// file damaged in place (same size, other content) passes; OpenFile
// reports it when it is read.
func (s *Storage) CheckFiles(ctx context.Context, job string, files []FileHandle) error {
	return s.checkFiles(ctx, job, files, false)
}

func (s *Storage) checkFiles(ctx context.Context, job string, files []FileHandle, read bool) error {
	jp, err := jobPrefix(job)
	if err != nil {
		return err
	}
	// A file several subtasks reference is checked once.
	files = slices.Clone(files)
	slices.SortFunc(files, func(a, b FileHandle) int {
		return cmp.Or(strings.Compare(a.Path, b.Path), cmp.Compare(a.Size, b.Size), cmp.Compare(a.CRC32C, b.CRC32C))
	})
	files = slices.Compact(files)
	for _, h := range files {
		if err := validRelPath(h.Path); err != nil {
			return err
		}
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu      sync.Mutex
		damaged []*DamagedFileError
		failed  error
		wg      sync.WaitGroup
		next    = make(chan FileHandle)
	)
	for range min(verifyParallelism, len(files)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for h := range next {
				d, err := s.checkFile(ctx, jp, h, read)
				mu.Lock()
				switch {
				case d != nil:
					damaged = append(damaged, d)
				case err != nil && failed == nil:
					failed = err
					cancel()
				}
				mu.Unlock()
			}
		}()
	}
feed:
	for _, h := range files {
		select {
		case next <- h:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if failed != nil {
		return failed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(damaged) == 0 {
		return nil
	}
	slices.SortFunc(damaged, func(a, b *DamagedFileError) int { return strings.Compare(a.Path, b.Path) })
	return &DamagedFilesError{Files: damaged}
}

// checkFile checks one file: d describes the damage, err is any other
// failure.
func (s *Storage) checkFile(ctx context.Context, jp string, h FileHandle, read bool) (d *DamagedFileError, err error) {
	key := jp + h.Path
	damage := func(sentinel error, format string, args ...any) *DamagedFileError {
		return &DamagedFileError{Path: h.Path, Name: s.display(key), Problem: fmt.Sprintf(format, args...), Err: sentinel}
	}
	info, err := s.b.Attributes(ctx, key)
	switch {
	case errors.Is(err, ErrNotFound):
		return damage(ErrNotFound, "missing"), nil
	case err != nil:
		return nil, fmt.Errorf("check %s: %w", s.display(key), err)
	case info.Size != h.Size:
		return damage(ErrCorrupt, "size %d, want %d", info.Size, h.Size), nil
	case !read:
		return nil, nil
	}
	r, err := s.b.NewReader(ctx, key)
	if errors.Is(err, ErrNotFound) {
		return damage(ErrNotFound, "missing"), nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", s.display(key), err)
	}
	defer r.Close()
	crc := crc32.New(castagnoli)
	n, err := io.Copy(crc, r)
	switch {
	case err != nil:
		return nil, fmt.Errorf("read %s: %w", s.display(key), err)
	case n != h.Size:
		return damage(ErrCorrupt, "size %d, want %d", n, h.Size), nil
	case crc.Sum32() != h.CRC32C:
		return damage(ErrCorrupt, "checksum mismatch (CRC-32C %08x, want %08x)", crc.Sum32(), h.CRC32C), nil
	}
	return nil, nil
}

// LatestVerified is Latest that also verifies (VerifyFiles) the data files
// of each candidate: files lists those its _metadata payload references
// (the payload is opaque to this package). A checkpoint with a damaged
// file is skipped like one with an invalid _metadata, with a warning on
// logger naming the checkpoint and the file. An error from files, and any
// error but damage, is returned, not skipped. Without an intact checkpoint
// the error wraps ErrNotFound and says what was skipped.
func (s *Storage) LatestVerified(ctx context.Context, job string, logger *slog.Logger, files func(payload []byte) ([]FileHandle, error)) (Checkpoint, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return s.latest(ctx, job, logger, func(c Checkpoint) error {
		fs, err := files(c.Payload)
		if err != nil {
			return fmt.Errorf("checkpoint %d: %w", c.ID, err)
		}
		err = s.VerifyFiles(ctx, job, fs)
		var d *DamagedFilesError
		if errors.As(err, &d) {
			logger.Warn("skipping damaged checkpoint", "checkpoint", c.ID, "file", d.Files[0].Name, "reason", err.Error())
			return errSkip{err}
		}
		if err != nil {
			return fmt.Errorf("verify checkpoint %d: %w", c.ID, err)
		}
		return nil
	})
}

// errSkip, returned by a latest check, skips the checkpoint (the check has
// logged why).
type errSkip struct{ err error }

func (e errSkip) Error() string { return e.err.Error() }
func (e errSkip) Unwrap() error { return e.err }
