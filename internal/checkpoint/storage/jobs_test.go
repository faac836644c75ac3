package storage_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/checkpoint/storage/blobtest"
)

func TestListJobs(t *testing.T) {
	forEach(t, func(t *testing.T, _ string, s *storage.Storage, fb *blobtest.Bucket) {
		ctx := context.Background()
		if jobs, err := s.ListJobs(ctx); err != nil || len(jobs) != 0 {
			t.Fatalf("empty storage: ListJobs = %v, %v", jobs, err)
		}
		if err := s.WriteMetadata(ctx, "beta", 2, []byte("b")); err != nil {
			t.Fatal(err)
		}
		if err := s.WriteMetadata(ctx, "my job", 1, []byte("a")); err != nil { // directory my_job
			t.Fatal(err)
		}
		writeFile(t, s, "alpha", 7, "data", []byte("incomplete checkpoint")) // chk-7 without _metadata
		// Not jobs: only shared state, or no chk-<n> directory at all.
		w, err := s.CreateSharedFile(ctx, "sharedonly", "f")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Finish(); err != nil {
			t.Fatal(err)
		}
		jobs, err := s.ListJobs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{"alpha", "beta", "my_job"}; !slices.Equal(jobs, want) {
			t.Fatalf("ListJobs = %q, want %q", jobs, want)
		}
		for _, j := range jobs {
			if entries, err := s.ListCheckpoints(ctx, j); err != nil || len(entries) != 1 {
				t.Errorf("ListCheckpoints(%q) = %v, %v", j, entries, err)
			}
		}

		fb.Fail(blobtest.OpList, "*", nil, 1)
		if _, err := s.ListJobs(ctx); !errors.Is(err, blobtest.ErrInjected) {
			t.Fatalf("failing list: err = %v", err)
		}
	})
}

func TestOpenExistingCreatesNothing(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "absent")
	if _, err := storage.OpenExisting(ctx, dir); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("missing dir: err = %v", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("OpenExisting created %s", dir)
	}
	if os.Geteuid() != 0 {
		// A read-only directory can be listed, unlike with Open.
		ro := filepath.Join(t.TempDir(), "ro")
		s, err := storage.Open(ctx, ro)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.WriteMetadata(ctx, "job", 1, []byte("x")); err != nil {
			t.Fatal(err)
		}
		s.Close()
		if err := os.Chmod(ro, 0o555); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(ro, 0o755) })
		s, err = storage.OpenExisting(ctx, ro)
		if err != nil {
			t.Fatalf("read-only dir: %v", err)
		}
		defer s.Close()
		if jobs, err := s.ListJobs(ctx); err != nil || !slices.Equal(jobs, []string{"job"}) {
			t.Fatalf("read-only dir: ListJobs = %q, %v", jobs, err)
		}
	}
}
