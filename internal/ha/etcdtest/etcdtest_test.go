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

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

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

	// An open watch stream must not hold Stop up (etcd's graceful
	// shutdown alone would wait 6 s for it).
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	wch := c.Watch(wctx, "k")
	if _, err := c.Put(ctx, "k", "w"); err != nil {
		t.Fatal(err)
	}
	<-wch
	stopping := time.Now()
	srv.Stop()
	if took := time.Since(stopping); took > 3*time.Second {
		t.Errorf("Stop with an open watch took %v, want under 3s", took)
	} else {
		t.Logf("Stop with an open watch took %v", took)
	}
	srv.Stop() // idempotent
	short, cancelShort := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancelShort()
	if _, err := c.Get(short, "k"); err == nil {
		t.Fatalf("get after Stop succeeded; want an error")
	}
}
