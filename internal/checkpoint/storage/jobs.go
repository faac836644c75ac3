package storage

import (
	"context"
	"fmt"
	"strings"
)

// OpenExisting opens checkpoint storage at loc like Open, for readers: a
// local directory (plain path or file:// URL) is neither created nor probed
// for writing, so read-only directories can be opened. A missing local
// directory is an error wrapping ErrNotFound.
func OpenExisting(ctx context.Context, loc string) (*Storage, error) {
	return open(ctx, loc, false, Options{})
}

// ListJobs returns the job directories under the storage root that hold at
// least one chk-<n> directory, sorted. Other top-level entries (files,
// directories with only shared or taskowned state, names SanitizeJob would
// change) are ignored. The names are directory names, as SanitizeJob
// returns them, and can be passed back to ListCheckpoints.
func (s *Storage) ListJobs(ctx context.Context) ([]string, error) {
	tops, err := s.b.List(ctx, "", "/")
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	var jobs []string
	for _, t := range tops {
		if !t.IsDir {
			continue
		}
		name := strings.TrimSuffix(t.Key, "/")
		if sj, err := SanitizeJob(name); err != nil || sj != name {
			continue
		}
		entries, err := s.b.List(ctx, t.Key, "/")
		if err != nil {
			return nil, fmt.Errorf("list jobs: %s: %w", t.Key, err)
		}
		for _, e := range entries {
			if _, ok := parseCheckpointDir(strings.TrimSuffix(strings.TrimPrefix(e.Key, t.Key), "/")); e.IsDir && ok {
				jobs = append(jobs, name)
				break
			}
		}
	}
	return jobs, nil
}
