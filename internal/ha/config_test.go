package ha_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/ha"
)

func TestValidateReportsEveryProblem(t *testing.T) {
	cfg := ha.Config{
		Endpoints:   []string{"", "ftp://x:1", "http://:2379", "nocolon"},
		ClusterID:   "/a/b",
		SessionTTL:  1500 * time.Millisecond,
		DialTimeout: -time.Second,
	}
	err := cfg.Validate()
	if err == nil {
		t.Fatal("Validate accepted a bad config")
	}
	for _, want := range []string{
		`Endpoints[0] ""`,
		`Endpoints[1] "ftp://x:1": scheme "ftp"`,
		`Endpoints[2] "http://:2379": no host`,
		`Endpoints[3] "nocolon"`,
		`ClusterID "/a/b"`,
		`SessionTTL 1.5s: must be a whole number of seconds`,
		`DialTimeout -1s: must be positive`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Validate error lacks %q:\n%v", want, err)
		}
	}

	for _, c := range []struct {
		cfg  ha.Config
		want string
	}{
		{ha.Config{}, "at least one etcd endpoint is required"},
		{ha.Config{Endpoints: []string{"h:1"}, SessionTTL: 500 * time.Millisecond}, "at least 1s"},
		{ha.Config{Endpoints: []string{"h:1"}, SessionTTL: -time.Second}, "must be positive"},
		{ha.Config{Endpoints: []string{"h:1"}, ClusterID: "/"}, "empty"},
		{ha.Config{Endpoints: []string{"h:1"}, ClusterID: "has space"}, "letters, digits"},
	} {
		if err := c.cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Validate(%+v) = %v; want it to say %q", c.cfg, err, c.want)
		}
	}

	good := ha.Config{Endpoints: []string{"http://127.0.0.1:2379", "https://etcd-1:2379", "etcd-2:2379", "unix:///run/etcd.sock"}}
	if err := good.Validate(); err != nil {
		t.Errorf("Validate(good) = %v", err)
	}
	good.EnsureDefaults()
	if good.ClusterID != ha.DefaultClusterID || good.SessionTTL != ha.DefaultSessionTTL || good.DialTimeout != ha.DefaultDialTimeout || good.Logger == nil {
		t.Errorf("EnsureDefaults left %+v", good)
	}
	if err := good.Validate(); err != nil {
		t.Errorf("Validate after EnsureDefaults = %v", err)
	}
}

func TestOpenUnreachable(t *testing.T) {
	// A port that was just free: nothing listens there.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	endpoint := "http://" + ln.Addr().String()
	ln.Close()

	start := time.Now()
	e, err := ha.Open(context.Background(), ha.Config{Endpoints: []string{endpoint}, DialTimeout: 300 * time.Millisecond})
	took := time.Since(start)
	if err == nil {
		e.Close()
		t.Fatalf("Open of %s succeeded", endpoint)
	}
	t.Logf("Open failed after %v: %v", took, err)
	if !errors.Is(err, ha.ErrUnreachable) || !strings.Contains(err.Error(), endpoint) || !strings.Contains(err.Error(), "300ms") {
		t.Errorf("Open error %q: want ErrUnreachable naming %s and the 300ms timeout", err, endpoint)
	}
	if took > 5*time.Second {
		t.Errorf("Open took %v to fail with a 300ms DialTimeout", took)
	}

	if _, err := ha.Open(context.Background(), ha.Config{}); err == nil || !strings.Contains(err.Error(), "at least one etcd endpoint") {
		t.Errorf("Open without endpoints: %v", err)
	}
}
