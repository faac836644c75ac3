package storage

import (
	"errors"
	"testing"
)

func TestJobFiles(t *testing.T) {
	ctx := t.Context()
	for _, loc := range []string{"mem://", t.TempDir()} {
		s, err := Open(ctx, loc)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.ReadJobFile(ctx, "orders", "_rest"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("%s: missing file: %v", loc, err)
		}
		for _, data := range []string{"one", "two"} {
			if err := s.WriteJobFile(ctx, "orders", "_rest", []byte(data)); err != nil {
				t.Fatal(err)
			}
			if got, err := s.ReadJobFile(ctx, "orders", "_rest"); err != nil || string(got) != data {
				t.Fatalf("%s: read %q %v, want %q", loc, got, err, data)
			}
		}
		// A job file is not a checkpoint: listings ignore it.
		if cps, err := s.ListCheckpoints(ctx, "orders"); err != nil || len(cps) != 0 {
			t.Fatalf("%s: checkpoints %v %v", loc, cps, err)
		}
		for i := range 2 { // deleting twice is fine
			if err := s.DeleteJobFile(ctx, "orders", "_rest"); err != nil {
				t.Fatalf("%s: delete %d: %v", loc, i, err)
			}
		}
		if _, err := s.ReadJobFile(ctx, "orders", "_rest"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("%s: after delete: %v", loc, err)
		}
		for _, bad := range []string{"rest", "_", "_a/b", "_metadata", "chk-1"} {
			if err := s.WriteJobFile(ctx, "orders", bad, nil); !errors.Is(err, ErrInvalidName) {
				t.Fatalf("%s: name %q: %v", loc, bad, err)
			}
		}
		s.Close()
	}
}
