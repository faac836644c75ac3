package main

import (
	"context"
	"testing"

	"github.com/weirstream/weir/internal/checkpoint/storage"
)

// The weir binary links the S3 driver: an s3:// checkpoint directory opens
// through the same storage code (no request is sent until it is used).
func TestS3SchemeIsLinked(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	s, err := storage.Open(context.Background(), "s3://weir-checkpoints/jobs?region=eu-west-1")
	if err != nil {
		t.Fatalf("open s3:// storage: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}
