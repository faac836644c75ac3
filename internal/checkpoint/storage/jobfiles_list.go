package storage

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Listings for tools that work on a storage root while no job runs in it
// (weir checkpoints inspect and delete).

// JobsWithFile returns the top-level directories under the root that hold
// the job file name (a name starting with '_', as for WriteJobFile),
// sorted. Unlike ListJobs it finds job directories without any checkpoint:
// a run that restored from a snapshot writes its restore record before its
// first checkpoint. Directories whose name SanitizeJob would change are
// ignored.
func (s *Storage) JobsWithFile(ctx context.Context, name string) ([]string, error) {
	if _, err := jobFileKey("x", name); err != nil {
		return nil, err
	}
	tops, err := s.b.List(ctx, "", "/")
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	var jobs []string
	for _, t := range tops {
		if !t.IsDir {
			continue
		}
		job := strings.TrimSuffix(t.Key, "/")
		if sj, err := SanitizeJob(job); err != nil || sj != job {
			continue
		}
		switch _, err := s.b.Attributes(ctx, t.Key+name); {
		case err == nil:
			jobs = append(jobs, job)
		case !errors.Is(err, ErrNotFound):
			return nil, fmt.Errorf("list jobs: %s: %w", s.display(t.Key+name), err)
		}
	}
	return jobs, nil // List sorts by key
}

// ListCheckpointFiles returns every object under <job>/chk-<id>/, with Key
// relative to the job directory ("chk-<id>/<name>", as FileHandle.Path)
// and size: what DeleteCheckpoint deletes, _metadata and temporary files
// of interrupted writes included. An absent checkpoint yields an empty
// list.
func (s *Storage) ListCheckpointFiles(ctx context.Context, job string, id int64) ([]ObjectInfo, error) {
	p, err := checkpointPrefix(job, id)
	if err != nil {
		return nil, err
	}
	jp, _ := jobPrefix(job)
	return s.listUnder(ctx, p, jp)
}

// ListSavepointFiles returns every object under the savepoint directory
// dir, with Key relative to dir (as the savepoint's FileHandle.Path) and
// size: what DeleteSavepoint deletes, _metadata included.
func (s *Storage) ListSavepointFiles(ctx context.Context, dir string) ([]ObjectInfo, error) {
	jp, err := jobPrefix(dir)
	if err != nil {
		return nil, err
	}
	return s.listUnder(ctx, jp, jp)
}

// listUnder lists every object under prefix, keys made relative to rel.
func (s *Storage) listUnder(ctx context.Context, prefix, rel string) ([]ObjectInfo, error) {
	objs, err := s.b.List(ctx, prefix, "")
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", s.display(prefix), err)
	}
	out := make([]ObjectInfo, 0, len(objs))
	for _, o := range objs {
		if o.IsDir {
			continue
		}
		out = append(out, ObjectInfo{Key: strings.TrimPrefix(o.Key, rel), Size: o.Size})
	}
	return out, nil
}

// JobLockHolder reports whether a run holds the lock of job's directory
// (see LockJob), and who, without taking the lock or changing anything. On
// a local directory it tests the flock of <job>/_lock; on an object store
// it reads the newest lease, which is held unless it was released or
// expired by the local clock. An unreadable lease counts as held, with a
// zero Holder. The answer may be stale by the time it returns: to keep a
// run from starting meanwhile, take the lock with LockJob instead.
func (s *Storage) JobLockHolder(ctx context.Context, job string) (Holder, bool, error) {
	j, err := SanitizeJob(job)
	if err != nil {
		return Holder{}, false, err
	}
	if fb, ok := s.b.(*fileBucket); ok {
		h, held, err := probeLocal(fb.root, j)
		if !errors.Is(err, errNoFlock) {
			return h, held, err
		}
	}
	le := &lease{b: s.b, prefix: j + "/", dir: s.display(j)}
	for range leaseAttempts {
		gens, err := le.generations(ctx)
		if err != nil || len(gens) == 0 {
			return Holder{}, false, err
		}
		h, err := le.read(ctx, gens[len(gens)-1])
		switch {
		case errors.Is(err, errBadLease):
			return Holder{}, true, nil
		case errors.Is(err, ErrNotFound): // renewed or released this instant
			continue
		case err != nil:
			return Holder{}, false, fmt.Errorf("read the lease of %s: %w", le.dir, err)
		}
		return h, !h.Released && time.Now().Before(h.Expires), nil
	}
	return Holder{}, true, nil // it keeps changing: someone holds it
}
