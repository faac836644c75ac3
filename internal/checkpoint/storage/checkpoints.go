package storage

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// CheckpointEntry is one chk-<n> directory found by ListCheckpoints.
type CheckpointEntry struct {
	ID int64
	// Complete reports that chk-<n>/_metadata exists. Its content is not
	// verified here; ReadMetadata (or Latest) does that.
	Complete bool
}

// Checkpoint is a checkpoint whose _metadata verified.
type Checkpoint struct {
	Job     string // sanitized job directory name
	ID      int64
	Payload []byte
}

// ListCheckpoints returns the chk-<n> directories of job in increasing id
// order, each flagged Complete or not. Entries that are not chk-<n> (shared,
// taskowned, strays) are ignored. A job without checkpoints yields an empty
// list, not an error.
func (s *Storage) ListCheckpoints(ctx context.Context, job string) ([]CheckpointEntry, error) {
	jp, err := jobPrefix(job)
	if err != nil {
		return nil, err
	}
	dirs, err := s.b.List(ctx, jp, "/")
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", jp, err)
	}
	var out []CheckpointEntry
	for _, d := range dirs {
		if !d.IsDir {
			continue
		}
		id, ok := parseCheckpointDir(strings.TrimSuffix(strings.TrimPrefix(d.Key, jp), "/"))
		if !ok {
			continue
		}
		e := CheckpointEntry{ID: id}
		_, err := s.b.Attributes(ctx, d.Key+MetadataName)
		switch {
		case err == nil:
			e.Complete = true
		case !errors.Is(err, ErrNotFound):
			return nil, fmt.Errorf("list %s: %w", d.Key, err)
		}
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b CheckpointEntry) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// Latest returns the newest checkpoint of job whose _metadata verifies.
// Newer checkpoints whose _metadata is missing, corrupt or of an unknown
// version are skipped with a warning on logger (nil: no logging; the
// warning names the id and the reason, the logger should name the job).
// Any other error (I/O, cancellation) is returned rather
// than skipped: falling back past a checkpoint that may be valid could
// restore state older than what sinks have already committed. Without any
// valid checkpoint the error, a *NoCheckpointError, wraps ErrNotFound.
func (s *Storage) Latest(ctx context.Context, job string, logger *slog.Logger) (Checkpoint, error) {
	return s.latest(ctx, job, logger, nil)
}

// latest is Latest with one more check of each candidate whose _metadata
// verified: check may skip it (errSkip, logged by check) or fail the search
// (any other error); nil: no check.
func (s *Storage) latest(ctx context.Context, job string, logger *slog.Logger, check func(Checkpoint) error) (Checkpoint, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	entries, err := s.ListCheckpoints(ctx, job)
	if err != nil {
		return Checkpoint{}, err
	}
	j, _ := SanitizeJob(job) // validated by ListCheckpoints
	var skipped []error
	for i := len(entries) - 1; i >= 0; i-- {
		id := entries[i].ID
		payload, err := s.ReadMetadata(ctx, job, id)
		if err == nil {
			c := Checkpoint{Job: j, ID: id, Payload: payload}
			if check == nil {
				return c, nil
			}
			err = check(c)
			var skip errSkip
			if errors.As(err, &skip) {
				skipped = append(skipped, fmt.Errorf("checkpoint %d: %w", id, skip.err))
				continue
			}
			if err != nil {
				return Checkpoint{}, fmt.Errorf("latest checkpoint of %s: %w", j, err)
			}
			return c, nil
		}
		if !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnsupportedVersion) {
			return Checkpoint{}, fmt.Errorf("latest checkpoint of %s: checkpoint %d: %w", j, id, err)
		}
		logger.Warn("skipping invalid checkpoint", "checkpoint", id, "reason", err.Error())
		skipped = append(skipped, fmt.Errorf("checkpoint %d: %w", id, err))
	}
	return Checkpoint{}, &NoCheckpointError{Job: j, Skipped: skipped}
}

// NoCheckpointError is the error of Latest and LatestVerified when the job
// has no valid checkpoint. It wraps ErrNotFound.
type NoCheckpointError struct {
	Job string
	// Skipped says why each complete checkpoint was skipped, newest first.
	Skipped []error
}

func (e *NoCheckpointError) Error() string {
	msg := fmt.Sprintf("latest checkpoint of %s: %v: no valid checkpoint", e.Job, ErrNotFound)
	if len(e.Skipped) > 0 {
		msg += fmt.Sprintf(" (%s)", errors.Join(e.Skipped...))
	}
	return strings.ReplaceAll(msg, "\n", "; ")
}

// Unwrap returns ErrNotFound.
func (e *NoCheckpointError) Unwrap() error { return ErrNotFound }

// Resolve reads the checkpoint at rel, "<job>/chk-<n>" relative to the
// storage root. A missing or invalid checkpoint is an error (wrapping
// ErrNotFound, ErrCorrupt or ErrUnsupportedVersion); there is no fallback.
func (s *Storage) Resolve(ctx context.Context, rel string) (Checkpoint, error) {
	rel = strings.Trim(rel, "/")
	job, chk, ok := strings.Cut(rel, "/")
	id, okID := parseCheckpointDir(chk)
	if sj, err := SanitizeJob(job); !ok || !okID || err != nil || sj != job {
		return Checkpoint{}, fmt.Errorf("checkpoint path %q: %w: want <job>/chk-<n>", rel, ErrInvalidName)
	}
	payload, err := s.readMetadataKey(ctx, rel+"/"+MetadataName)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("checkpoint %s: %w", rel, err)
	}
	return Checkpoint{Job: job, ID: id, Payload: payload}, nil
}

// ResolvePath opens the storage that holds the explicitly named checkpoint
// directory loc (".../<root>/<job>/chk-<n>", a path or URL as for Open) and
// reads it. Nothing is created. A bad checkpoint is an error, never a
// fallback. On success the caller owns the returned Storage (rooted at
// <root>) and must Close it.
func ResolvePath(ctx context.Context, loc string) (*Storage, Checkpoint, error) {
	rootLoc, rel, err := splitCheckpointLoc(loc)
	if err != nil {
		return nil, Checkpoint{}, err
	}
	s, err := open(ctx, rootLoc, false, Options{})
	if err != nil {
		return nil, Checkpoint{}, fmt.Errorf("checkpoint %s: %w", loc, err)
	}
	c, err := s.Resolve(ctx, rel)
	if err != nil {
		_ = s.Close()
		return nil, Checkpoint{}, fmt.Errorf("checkpoint %s: %w", loc, err)
	}
	return s, c, nil
}

// splitCheckpointLoc splits ".../root/job/chk-n" into the root location
// and "job/chk-n".
func splitCheckpointLoc(loc string) (root, rel string, err error) {
	bad := fmt.Errorf("checkpoint path %q: %w: want <dir>/<job>/chk-<n>", loc, ErrInvalidName)
	if strings.Contains(loc, "://") {
		u, perr := url.Parse(loc)
		if perr != nil {
			return "", "", fmt.Errorf("checkpoint path %q: %w", loc, perr)
		}
		p := strings.TrimRight(u.Path, "/")
		chk, job := path.Base(p), path.Base(path.Dir(p))
		if p == "" || job == "/" || job == "." {
			return "", "", bad
		}
		u.Path, u.RawPath = path.Dir(path.Dir(p)), ""
		return u.String(), job + "/" + chk, nil
	}
	p := filepath.Clean(loc)
	chk, job := filepath.Base(p), filepath.Base(filepath.Dir(p))
	if job == string(filepath.Separator) || job == "." {
		return "", "", bad
	}
	return filepath.Dir(filepath.Dir(p)), job + "/" + chk, nil
}

// DeleteCheckpoint removes everything under <job>/chk-<id>/, _metadata
// first so that a partly deleted checkpoint is never seen as complete.
// Deleting an absent checkpoint is not an error. Shared files are not
// touched; the caller deletes those it no longer references with
// DeleteFile.
func (s *Storage) DeleteCheckpoint(ctx context.Context, job string, id int64) error {
	p, err := checkpointPrefix(job, id)
	if err != nil {
		return err
	}
	if err := s.b.Delete(ctx, p+MetadataName); err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("delete checkpoint %s: %w", p, err)
	}
	objs, err := s.b.List(ctx, p, "")
	if err != nil {
		return fmt.Errorf("delete checkpoint %s: list: %w", p, err)
	}
	var errs []error
	for _, o := range objs {
		if err := s.b.Delete(ctx, o.Key); err != nil && !errors.Is(err, ErrNotFound) {
			errs = append(errs, fmt.Errorf("delete %s: %w", o.Key, err))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("delete checkpoint %s: %w", p, errors.Join(errs...))
	}
	if r, ok := s.b.(dirRemover); ok {
		r.RemoveEmptyDir(p)
	}
	return nil
}

// DeleteFile removes the data file at rel, a path relative to the job
// directory as in FileHandle.Path. _metadata cannot be deleted this way.
// Deleting an absent file is not an error.
func (s *Storage) DeleteFile(ctx context.Context, job, rel string) error {
	jp, err := jobPrefix(job)
	if err != nil {
		return err
	}
	if err := validRelPath(rel); err != nil {
		return err
	}
	if err := s.b.Delete(ctx, jp+rel); err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("delete %s: %w", jp+rel, err)
	}
	return nil
}
