package etcdtest_test

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/weirstream/weir/internal/ha/etcdtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, etcdtest.IgnoreLeaks()...) }

func TestStartServesAndStops(t *testing.T) {
	start := time.Now()
	srv := etcdtest.StartServer(t)
	t.Logf("embedded etcd at %v ready after %v", srv.Endpoints(), time.Since(start))

	c, err := clientv3.New(clientv3.Config{Endpoints: srv.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Put(ctx, "k", "v"); err != nil {
		t.Fatalf("put: %v", err)
	}
	resp, err := c.Get(ctx, "k")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v" {
		t.Fatalf("get k = %v, %v; want v", resp, err)
	}

	srv.Stop()
	srv.Stop() // idempotent
	short, cancelShort := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancelShort()
	if _, err := c.Get(short, "k"); err == nil {
		t.Fatalf("get after Stop succeeded; want an error")
	}
}
