package storage

import (
	"context"
	"fmt"
	"strings"
)

// ListShared returns the files under <job>/shared/, each with its Key
// relative to the job directory ("shared/<name>", as FileHandle.Path) and
// its size. Temporary files of writes in progress are skipped.
func (s *Storage) ListShared(ctx context.Context, job string) ([]ObjectInfo, error) {
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
		if o.IsDir || strings.HasSuffix(o.Key, ".tmp") {
			continue
		}
		out = append(out, ObjectInfo{Key: strings.TrimPrefix(o.Key, jp), Size: o.Size})
	}
	return out, nil
}
