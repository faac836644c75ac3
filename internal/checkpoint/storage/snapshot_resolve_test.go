package storage_test

import (
	"context"
	"errors"
	"testing"

	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/checkpoint/storage/blobtest"
)

// Savepoints are written, read, resolved from their location (directory
// or _metadata, as a checkpoint's are) and deleted the same way on every
// backend; ResolveSnapshot reopens the storage from the location alone.
func TestSavepointsAndResolveSnapshot(t *testing.T) {
	forEach(t, func(t *testing.T, loc string, s *storage.Storage, _ *blobtest.Bucket) {
		ctx := context.Background()
		const sp = "savepoint-abc123-0123456789ab"
		w, err := s.CreateSavepointFile(ctx, sp, "op-0.kst")
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte("keyed state"))
		h, err := w.Finish()
		if err != nil || h.Path != "op-0.kst" {
			t.Fatalf("savepoint file: %+v, %v", h, err)
		}
		if err := s.WriteSavepointMetadata(ctx, sp, []byte("sp payload")); err != nil {
			t.Fatal(err)
		}
		if got, err := s.ReadSavepointMetadata(ctx, sp); err != nil || string(got) != "sp payload" {
			t.Fatalf("ReadSavepointMetadata = %q, %v", got, err)
		}
		if got, err := s.ReadFile(ctx, sp, h); err != nil || string(got) != "keyed state" {
			t.Fatalf("savepoint file read back: %q, %v", got, err)
		}
		writeFile(t, s, "job", 4, "op-0.kst", []byte("x"))
		if err := s.WriteMetadata(ctx, "job", 4, []byte("chk payload")); err != nil {
			t.Fatal(err)
		}

		if loc != "mem://" { // each mem:// open is a new, empty bucket
			for _, c := range []struct {
				rel, dir, payload string
				savepoint         bool
			}{
				{sp, sp, "sp payload", true},
				{sp + "/_metadata", sp, "sp payload", true},
				{"job/chk-4", "job", "chk payload", false},
				{"job/chk-4/_metadata", "job", "chk payload", false},
			} {
				rs, snap, err := storage.ResolveSnapshot(ctx, locJoin(loc, c.rel))
				if err != nil {
					t.Fatalf("ResolveSnapshot(%s): %v", c.rel, err)
				}
				if snap.Dir != c.dir || snap.Savepoint != c.savepoint || string(snap.Payload) != c.payload {
					t.Errorf("ResolveSnapshot(%s) = %+v", c.rel, snap)
				}
				if c.savepoint {
					if got, err := rs.ReadFile(ctx, snap.Dir, h); err != nil || string(got) != "keyed state" {
						t.Errorf("file through the resolved storage: %q, %v", got, err)
					}
				}
				rs.Close()
			}
			if _, _, err := storage.ResolveSnapshot(ctx, locJoin(loc, "savepoint-none")); !errors.Is(err, storage.ErrNotFound) {
				t.Errorf("ResolveSnapshot of an absent savepoint: %v", err)
			}
		}

		if err := s.DeleteSavepoint(ctx, sp); err != nil {
			t.Fatal(err)
		}
		if _, err := s.ReadSavepointMetadata(ctx, sp); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("after DeleteSavepoint: %v", err)
		}
		if files, err := s.ListSavepointFiles(ctx, sp); err != nil || len(files) != 0 {
			t.Fatalf("files left after DeleteSavepoint: %+v, %v", files, err)
		}
	})
}
