package storage

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// ListShared returns the files under <job>/shared/, each with its Key
// relative to the job directory ("shared/<name>", as FileHandle.Path) and
// its size. Temporary files of writes in progress are skipped.
func (s *Storage) ListShared(ctx context.Context, job string) ([]ObjectInfo, error) {
	return s.listShared(ctx, job, false)
}

// ListSharedAll is ListShared with the temporary files of writes in
// progress: only for a sweep while no writer can be running, when they are
// leftovers of interrupted uploads.
func (s *Storage) ListSharedAll(ctx context.Context, job string) ([]ObjectInfo, error) {
	return s.listShared(ctx, job, true)
}

func (s *Storage) listShared(ctx context.Context, job string, temp bool) ([]ObjectInfo, error) {
	jp, err := jobPrefix(job)
	if err != nil {
		return nil, err
	}
	objs, err := s.b.List(ctx, jp+SharedDir+"/", "")
	if err != nil {
		return nil, fmt.Errorf("list %s%s: %w", jp, SharedDir, err)
	}
	out := make([]ObjectInfo, 0, len(objs))
	for _, o := range objs {
		if o.IsDir || (!temp && strings.HasSuffix(o.Key, tempSuffix)) {
			continue
		}
		out = append(out, ObjectInfo{Key: strings.TrimPrefix(o.Key, jp), Size: o.Size})
	}
	return out, nil
}

// DeleteShared deletes a file ListSharedAll returned, a temporary file of
// an interrupted upload included (DeleteFile refuses those names). A file
// already gone is not an error.
func (s *Storage) DeleteShared(ctx context.Context, job, rel string) error {
	jp, err := jobPrefix(job)
	if err != nil {
		return err
	}
	name, ok := strings.CutPrefix(rel, SharedDir+"/")
	if !ok || strings.Contains(name, "/") {
		return fmt.Errorf("delete %q: %w: not a file under %s/", rel, ErrInvalidName, SharedDir)
	}
	if err := validName(strings.TrimSuffix(name, tempSuffix)); err != nil {
		return fmt.Errorf("delete %q: %w", rel, err)
	}
	if err := s.b.Delete(ctx, jp+rel); err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("delete %s: %w", jp+rel, err)
	}
	return nil
}
