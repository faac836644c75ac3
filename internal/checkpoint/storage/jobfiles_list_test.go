package storage_test

import (
	"context"
	"os"
	"slices"
	"testing"

	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/checkpoint/storage/blobtest"
)

// JobsWithFile finds job directories by a job file, with or without
// checkpoints; ListCheckpointFiles and ListSavepointFiles list what a
// delete removes.
func TestJobsWithFileAndDirListings(t *testing.T) {
	forEach(t, func(t *testing.T, _ string, s *storage.Storage, _ *blobtest.Bucket) {
		ctx := context.Background()
		if jobs, err := s.JobsWithFile(ctx, "_restored"); err != nil || len(jobs) != 0 {
			t.Fatalf("empty storage: %v, %v", jobs, err)
		}
		for _, job := range []string{"beta", "alpha"} { // alpha: no checkpoint at all
			if err := s.WriteJobFile(ctx, job, "_restored", []byte("{}")); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.WriteJobFile(ctx, "gamma", "_rest", []byte("{}")); err != nil {
			t.Fatal(err)
		}
		if err := s.WriteMetadata(ctx, "beta", 3, []byte("m")); err != nil {
			t.Fatal(err)
		}
		writeFile(t, s, "beta", 3, "op-0.kst", []byte("12345"))
		writeFile(t, s, "beta", 4, "op-0.kst", []byte("other"))
		if err := s.WriteSavepointMetadata(ctx, "savepoint-abc-1", []byte("sp")); err != nil {
			t.Fatal(err)
		}
		w, err := s.CreateSavepointFile(ctx, "savepoint-abc-1", "op-0.kst")
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte("123"))
		if _, err := w.Finish(); err != nil {
			t.Fatal(err)
		}

		jobs, err := s.JobsWithFile(ctx, "_restored")
		if err != nil || !slices.Equal(jobs, []string{"alpha", "beta"}) {
			t.Fatalf("JobsWithFile = %v, %v; want alpha, beta", jobs, err)
		}
		for _, bad := range []string{"restored", "_a/b", "_metadata"} {
			if _, err := s.JobsWithFile(ctx, bad); err == nil {
				t.Errorf("JobsWithFile(%q): no error", bad)
			}
		}

		files, err := s.ListCheckpointFiles(ctx, "beta", 3)
		if err != nil {
			t.Fatal(err)
		}
		if len(files) != 2 || files[0].Key != "chk-3/_metadata" || files[1].Key != "chk-3/op-0.kst" || files[1].Size != 5 {
			t.Fatalf("ListCheckpointFiles = %+v", files)
		}
		if files, err := s.ListCheckpointFiles(ctx, "beta", 9); err != nil || len(files) != 0 {
			t.Fatalf("absent checkpoint: %+v, %v", files, err)
		}
		files, err = s.ListSavepointFiles(ctx, "savepoint-abc-1")
		if err != nil {
			t.Fatal(err)
		}
		if len(files) != 2 || files[0].Key != "_metadata" || files[1].Key != "op-0.kst" || files[1].Size != 3 {
			t.Fatalf("ListSavepointFiles = %+v", files)
		}
	})
}

// JobLockHolder sees a held lock (flock or lease) without taking it, and
// sees none once it is released.
func TestJobLockHolder(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			loc, bucket := b.open(t)
			s := storage.OpenBucket(bucket)
			t.Cleanup(func() { s.Close() })
			ctx := context.Background()
			if _, held, err := s.JobLockHolder(ctx, "counter"); err != nil || held {
				t.Fatalf("no lock yet: held %v, %v", held, err)
			}
			l, err := s.LockJob(ctx, "counter", storage.LockOptions{Dir: loc})
			if err != nil {
				t.Fatal(err)
			}
			for range 2 { // probing leaves the lock as it was
				h, held, err := s.JobLockHolder(ctx, "counter")
				if err != nil || !held || h.PID != os.Getpid() || h.Owner != l.Holder().Owner {
					t.Fatalf("held lock: holder %+v, held %v, %v", h, held, err)
				}
			}
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if _, held, err := s.JobLockHolder(ctx, "counter"); err != nil || held {
				t.Fatalf("released lock: held %v, %v", held, err)
			}
			l2, err := s.LockJob(ctx, "counter", storage.LockOptions{Dir: loc})
			if err != nil {
				t.Fatalf("lock after the probes: %v", err)
			}
			l2.Release(ctx)
		})
	}
}
