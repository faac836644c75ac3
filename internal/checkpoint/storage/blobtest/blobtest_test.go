package blobtest_test

import (
	"context"
	"errors"
	"io"
	"slices"
	"testing"

	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/checkpoint/storage/blobtest"
)

func newBucket(t *testing.T) *blobtest.Bucket {
	inner, err := storage.OpenLocation(context.Background(), "mem://")
	if err != nil {
		t.Fatal(err)
	}
	b := blobtest.New(inner)
	t.Cleanup(func() { b.Close() })
	return b
}

func put(b storage.Bucket, key, data string) error {
	w, err := b.NewWriter(context.Background(), key)
	if err != nil {
		return err
	}
	if _, err := w.Write([]byte(data)); err != nil {
		w.Abort()
		return err
	}
	return w.Finish()
}

func get(b storage.Bucket, key string) (string, error) {
	r, err := b.NewReader(context.Background(), key)
	if err != nil {
		return "", err
	}
	defer r.Close()
	d, err := io.ReadAll(r)
	return string(d), err
}

func TestFailTimesAndGlob(t *testing.T) {
	b := newBucket(t)
	boom := errors.New("boom")
	b.Fail(blobtest.OpFinish, "a/*", boom, 2)
	for i, want := range []error{boom, boom, nil} {
		if err := put(b, "a/x", "v"); !errors.Is(err, want) {
			t.Fatalf("put %d: %v, want %v", i, err, want)
		}
	}
	if err := put(b, "b/x", "v"); err != nil {
		t.Fatalf("non-matching key: %v", err)
	}
	b.Fail(blobtest.OpDelete, "*/x", nil, 0) // forever
	for range 3 {
		if err := b.Delete(context.Background(), "a/x"); !errors.Is(err, blobtest.ErrInjected) {
			t.Fatalf("delete: %v", err)
		}
	}
	b.Clear()
	if err := b.Delete(context.Background(), "a/x"); err != nil {
		t.Fatal(err)
	}
}

func TestFailedFinishLeavesNothing(t *testing.T) {
	b := newBucket(t)
	b.Fail(blobtest.OpFinish, "k", nil, 1)
	if err := put(b, "k", "data"); err == nil {
		t.Fatal("want error")
	}
	if _, err := get(b, "k"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("get: %v", err)
	}
}

func TestCrashWrite(t *testing.T) {
	b := newBucket(t)
	b.CrashWrite("k*", 3, blobtest.LeavePartial, 1)
	if err := put(b, "k1", "abcdef"); !errors.Is(err, blobtest.ErrInjected) {
		t.Fatalf("put: %v", err)
	}
	if got, err := get(b, "k1"); err != nil || got != "abc" {
		t.Fatalf("partial: %q %v", got, err)
	}
	b.CrashWrite("k*", 3, blobtest.LeaveAbsent, 1)
	if err := put(b, "k2", "abcdef"); !errors.Is(err, blobtest.ErrInjected) {
		t.Fatalf("put: %v", err)
	}
	if _, err := get(b, "k2"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("absent: %v", err)
	}
	// A write that ends before the crash point is unaffected.
	b.CrashWrite("k*", 10, blobtest.LeaveAbsent, 1)
	if err := put(b, "k3", "abc"); err != nil {
		t.Fatal(err)
	}
}

func TestOpsLog(t *testing.T) {
	b := newBucket(t)
	put(b, "a", "1")
	get(b, "a")
	b.Delete(context.Background(), "a")
	b.List(context.Background(), "p/", "/")
	want := []string{"newwriter a", "finish a", "newreader a", "delete a", "list p/"}
	if got := b.Ops(); !slices.Equal(got, want) {
		t.Fatalf("Ops = %q, want %q", got, want)
	}
}
