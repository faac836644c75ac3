package storage_test

import (
	"context"
	"strings"
	"testing"

	"github.com/weirstream/weir/internal/checkpoint/storage"
)

// Lock files and lease objects appear in no listing: not as jobs, not as
// checkpoints, not as shared files.
func TestLockInvisibleToListings(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			loc, bucket := b.open(t)
			s := storage.OpenBucket(bucket)
			t.Cleanup(func() { s.Close() })
			ctx := context.Background()
			l, err := s.LockJob(ctx, "counter", storage.LockOptions{Dir: loc})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { l.Release(context.Background()) })
			if jobs, err := s.ListJobs(ctx); err != nil || len(jobs) != 0 {
				t.Fatalf("jobs %v, %v: a locked job without checkpoints is no job", jobs, err)
			}
			st := l.Storage()
			if err := st.WriteMetadata(ctx, "counter", 1, []byte("m")); err != nil {
				t.Fatal(err)
			}
			w, err := st.CreateSharedFile(ctx, "counter", "f")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := w.Finish(); err != nil {
				t.Fatal(err)
			}
			jobs, err := s.ListJobs(ctx)
			if err != nil || len(jobs) != 1 || jobs[0] != "counter" {
				t.Fatalf("jobs %v, %v", jobs, err)
			}
			cps, err := s.ListCheckpoints(ctx, "counter")
			if err != nil || len(cps) != 1 || cps[0].ID != 1 {
				t.Fatalf("checkpoints %v, %v", cps, err)
			}
			shared, err := s.ListShared(ctx, "counter")
			if err != nil || len(shared) != 1 || shared[0].Key != "shared/f" {
				t.Fatalf("shared %v, %v", shared, err)
			}
			all, err := bucket.List(ctx, "counter/", "/")
			if err != nil {
				t.Fatal(err)
			}
			var lockObjs []string
			for _, o := range all {
				if strings.HasPrefix(o.Key, "counter/_l") {
					lockObjs = append(lockObjs, o.Key)
				}
			}
			if len(lockObjs) != 1 {
				t.Fatalf("job directory %v: want one lock object", all)
			}
		})
	}
}
