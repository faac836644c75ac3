package s3test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"
)

// seaweedStartTimeout bounds the wait for a SeaweedFS server to take its
// first bucket.
const seaweedStartTimeout = 60 * time.Second

// SeaweedFS starts a real S3-compatible server, SeaweedFS (`weed server
// -s3`: master, volume server, filer and S3 gateway in one process), on
// free ports of 127.0.0.1 with its data in a temporary directory, creates
// bucket DefaultBucket and returns the URL of the prefix "checkpoints" in
// it. The server is stopped when the test ends. The weed binary must be
// on PATH (go install github.com/seaweedfs/seaweedfs/weed@latest); without
// it the test is skipped. Credentials are set as for NewServer; SeaweedFS
// without an -s3.config accepts any.
func SeaweedFS(t testing.TB) string {
	t.Helper()
	weed, err := exec.LookPath("weed")
	if err != nil {
		t.Skip("SeaweedFS is not installed: no weed binary on PATH (go install github.com/seaweedfs/seaweedfs/weed@latest to run this test)")
	}
	SetCredentials(t)
	dir := t.TempDir()
	p := freePorts(t, 8)
	args := []string{"server",
		"-dir=" + dir, "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
		"-master.port=" + strconv.Itoa(p[0]), "-master.port.grpc=" + strconv.Itoa(p[1]),
		"-master.volumeSizeLimitMB=64", "-volume.max=0",
		"-volume.port=" + strconv.Itoa(p[2]), "-volume.port.grpc=" + strconv.Itoa(p[3]),
		"-filer.port=" + strconv.Itoa(p[4]), "-filer.port.grpc=" + strconv.Itoa(p[5]),
		"-s3", "-s3.port=" + strconv.Itoa(p[6]), "-s3.port.grpc=" + strconv.Itoa(p[7]),
	}
	var out lockedBuffer
	cmd := exec.Command(weed, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("s3test: start %s: %v", weed, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	endpoint := "http://127.0.0.1:" + strconv.Itoa(p[6])
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-exited:
			cancel()
		case <-ctx.Done():
		}
	}()
	err = waitFor(ctx, seaweedStartTimeout, func() error { return createBucket(ctx, endpoint, DefaultBucket) })
	if err != nil {
		t.Fatalf("s3test: SeaweedFS (%s %v) did not take bucket %s: %v\n%s", weed, args, DefaultBucket, err, out.String())
	}
	return BucketURL(endpoint, DefaultBucket, "checkpoints")
}

// createBucket creates bucket with an unsigned PUT, which a SeaweedFS
// without identities accepts; an existing bucket is fine.
func createBucket(ctx context.Context, endpoint, bucket string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, endpoint+"/"+bucket, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var body bytes.Buffer
	_, _ = body.ReadFrom(resp.Body)
	switch {
	case resp.StatusCode == http.StatusOK:
		return nil
	case resp.StatusCode == http.StatusConflict && bytes.Contains(body.Bytes(), []byte("BucketAlreadyOwnedByYou")):
		return nil
	}
	return fmt.Errorf("create bucket %s: %s: %s", bucket, resp.Status, bytes.TrimSpace(body.Bytes()))
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
