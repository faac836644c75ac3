package ha

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/weirstream/weir/internal/clock"
)

// Defaults of Config.
const (
	// DefaultClusterID is Flink's default high-availability.cluster-id.
	DefaultClusterID = "/default"
	// DefaultSessionTTL is the lease TTL of a candidate: after a crash, its
	// leadership ends at most this long after the last renewal.
	DefaultSessionTTL = 15 * time.Second
	// DefaultDialTimeout bounds the first contact with etcd in Open.
	DefaultDialTimeout = 5 * time.Second
)

// Config says how to reach etcd and which cluster to serve.
type Config struct {
	// Endpoints are the etcd client URLs, such as "http://etcd-0:2379" or
	// "https://etcd-0:2379" (a bare "host:port" is accepted too). List every
	// member so the client fails over. Required; no default.
	Endpoints []string

	// ClusterID separates the clusters that share one etcd: each has its own
	// election and jobs under /weir/<cluster-id>. One path segment of
	// letters, digits, '.', '_' and '-', at most 128 characters; a leading
	// "/" is ignored, so "/prod" and "prod" are the same cluster.
	// Default DefaultClusterID ("/default").
	ClusterID string

	// SessionTTL is the TTL of a candidate's etcd lease: a leader that
	// crashes or loses etcd keeps its leadership no longer than this after
	// its last confirmed renewal, and a standby takes over at most this long
	// (plus etcd's expiry check, up to 0.5 s) after the crash. Renewals are
	// sent every SessionTTL/3. A whole number of seconds, at least 1s (etcd
	// may raise it to its minimum lease TTL, 2 s with default etcd timing).
	// Default DefaultSessionTTL (15s).
	SessionTTL time.Duration

	// DialTimeout bounds Open's first round trip to etcd. Default
	// DefaultDialTimeout (5s).
	DialTimeout time.Duration

	// TLS, if set, is used to connect to the endpoints (client certificates,
	// CA). Nil: plain connections for http:// endpoints.
	TLS *tls.Config

	// Logger receives leadership changes and retried errors. Default: a
	// logger that discards everything.
	Logger *slog.Logger

	// clock times the lease renewals and the local end of a leadership.
	// Tests may set it; default clock.Real().
	clock clock.Clock
}

// EnsureDefaults fills the zero fields of c with their defaults.
func (c *Config) EnsureDefaults() {
	if c.ClusterID == "" {
		c.ClusterID = DefaultClusterID
	}
	if c.SessionTTL == 0 {
		c.SessionTTL = DefaultSessionTTL
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = DefaultDialTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.clock == nil {
		c.clock = clock.Real()
	}
}

var segmentPattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,128}$`)

// Validate reports every problem of c at once. Zero fields are valid: they
// take their defaults.
func (c *Config) Validate() error {
	var errs []error
	if len(c.Endpoints) == 0 {
		errs = append(errs, errors.New("ha: Endpoints: at least one etcd endpoint is required, such as http://127.0.0.1:2379 (high-availability.etcd.endpoints)"))
	}
	for i, ep := range c.Endpoints {
		if err := checkEndpoint(ep); err != nil {
			errs = append(errs, fmt.Errorf("ha: Endpoints[%d] %q: %v", i, ep, err))
		}
	}
	if c.ClusterID != "" {
		if err := checkSegment(strings.TrimPrefix(c.ClusterID, "/")); err != nil {
			errs = append(errs, fmt.Errorf("ha: ClusterID %q: %v (a leading '/' is ignored)", c.ClusterID, err))
		}
	}
	switch {
	case c.SessionTTL < 0:
		errs = append(errs, fmt.Errorf("ha: SessionTTL %v: must be positive (0 means the default %v)", c.SessionTTL, DefaultSessionTTL))
	case c.SessionTTL > 0 && c.SessionTTL < time.Second:
		errs = append(errs, fmt.Errorf("ha: SessionTTL %v: must be at least 1s (etcd lease TTLs are whole seconds)", c.SessionTTL))
	case c.SessionTTL%time.Second != 0:
		errs = append(errs, fmt.Errorf("ha: SessionTTL %v: must be a whole number of seconds (etcd lease TTLs are whole seconds)", c.SessionTTL))
	}
	if c.DialTimeout < 0 {
		errs = append(errs, fmt.Errorf("ha: DialTimeout %v: must be positive (0 means the default %v)", c.DialTimeout, DefaultDialTimeout))
	}
	return errors.Join(errs...)
}

func checkEndpoint(ep string) error {
	if strings.TrimSpace(ep) == "" {
		return errors.New("empty; want a URL such as http://127.0.0.1:2379")
	}
	if !strings.Contains(ep, "://") {
		if _, _, err := net.SplitHostPort(ep); err != nil {
			return fmt.Errorf("want a URL such as http://127.0.0.1:2379 or host:port: %v", err)
		}
		return nil
	}
	u, err := url.Parse(ep)
	if err != nil {
		return err
	}
	switch u.Scheme {
	case "http", "https":
		if u.Hostname() == "" {
			return errors.New("no host; want a URL such as http://127.0.0.1:2379")
		}
	case "unix", "unixs":
	default:
		return fmt.Errorf("scheme %q: want http, https, unix or unixs", u.Scheme)
	}
	return nil
}

// checkSegment checks a cluster or job id: one key path segment.
func checkSegment(s string) error {
	if s == "" {
		return errors.New("empty")
	}
	if !segmentPattern.MatchString(s) {
		return errors.New("must be 1 to 128 letters, digits, '.', '_' or '-'")
	}
	return nil
}
