package storage

import (
	"context"
	"testing"
)

func TestListShared(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, name := range []string{"b.sst", "a.sst"} {
		w, err := s.CreateSharedFile(ctx, "job", name)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(name))
		if _, err := w.Finish(); err != nil {
			t.Fatal(err)
		}
	}
	w, _ := s.CreateFile(ctx, "job", 1, "private")
	w.Finish()
	got, err := s.ListShared(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Key != "shared/a.sst" || got[1].Key != "shared/b.sst" || got[0].Size != 5 {
		t.Fatalf("ListShared = %+v", got)
	}
	if none, err := s.ListShared(ctx, "other"); err != nil || len(none) != 0 {
		t.Fatalf("ListShared of a job without files = %v, %v", none, err)
	}
}
