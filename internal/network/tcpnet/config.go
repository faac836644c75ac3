package tcpnet

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Defaults of Config.
const (
	// DefaultDialTimeout bounds a dial and its handshake.
	DefaultDialTimeout = 10 * time.Second
	// DefaultHandshakeTimeout bounds the handshake of an accepted
	// connection.
	DefaultHandshakeTimeout = 10 * time.Second
	// DefaultWriteTimeout is how long a write may make no progress before
	// the connection is taken for dead.
	DefaultWriteTimeout = 30 * time.Second
	// DefaultBufferSize is the size of a connection's read and write
	// buffers.
	DefaultBufferSize = 64 << 10
	// DefaultHeartbeatInterval is how long a connection's writer waits
	// idle before it sends a heartbeat (Flink's heartbeat.interval).
	DefaultHeartbeatInterval = 10 * time.Second
	// DefaultHeartbeatTimeout is how long a connection may receive nothing
	// before it is taken for dead (Flink's heartbeat.timeout).
	DefaultHeartbeatTimeout = 50 * time.Second
)

// Config configures a Node. The zero value is valid: plain TCP, no token.
type Config struct {
	// AdvertiseAddr is the address peers dial to reach this node and the
	// name the node gives itself in handshakes: the peer name a sender on
	// another node passes to ConnectSender, which must match it exactly.
	// A bare host ("10.0.0.5") takes the listener's port. Default: the
	// listener's address, which only suits a listen address with a host
	// ("127.0.0.1:0", not ":0").
	AdvertiseAddr string
	// ServerTLS, if set, makes the node accept TLS connections only; for
	// mutual TLS set its ClientAuth to tls.RequireAndVerifyClientCert and
	// its ClientCAs. ClientTLS, if set, makes the node dial with TLS, with
	// its Certificates presented to peers that ask for one; ServerName, if
	// empty, is the host of the peer's address. Both or neither must be
	// set: every node both dials and accepts. Default: none (plain TCP).
	ServerTLS, ClientTLS *tls.Config
	// Token is the cluster's shared secret: when set, only peers with the
	// same token are accepted, and dialing a peer with another one fails
	// with ErrTokenMismatch. It never crosses the wire (see the package
	// doc). Default: empty, which matches only peers without a token.
	Token string
	// Logger receives connection events. Default: discard.
	Logger *slog.Logger
	// OnPeerLost, if set, is called once for every connection that
	// breaks, with the peer's name and why, after the connection's
	// channels failed, so that the owner can fail the job attempt. It
	// runs on the connection's goroutine: it must not block for long and
	// must not call Close. It is not called for connections closed by
	// Close. Default: none.
	OnPeerLost func(peer string, err error)
	// DialTimeout bounds a dial and its handshake. Default:
	// DefaultDialTimeout.
	DialTimeout time.Duration
	// HandshakeTimeout bounds the handshake of an accepted connection.
	// Default: DefaultHandshakeTimeout.
	HandshakeTimeout time.Duration
	// WriteTimeout is how long a write to a connection may make no
	// progress before the connection fails. Default: DefaultWriteTimeout.
	WriteTimeout time.Duration
	// BufferSize is the size of every connection's read and write
	// buffers, in bytes. Default: DefaultBufferSize.
	BufferSize int
	// HeartbeatInterval is how long a connection's writer waits idle
	// before it sends a heartbeat frame, and HeartbeatTimeout how long a
	// connection may receive nothing, not even a heartbeat, before it
	// fails: a peer that died without closing its connections (a crashed
	// host, a cut network) is detected within HeartbeatTimeout.
	// HeartbeatTimeout must exceed HeartbeatInterval. Defaults:
	// DefaultHeartbeatInterval, DefaultHeartbeatTimeout.
	HeartbeatInterval, HeartbeatTimeout time.Duration
}

// EnsureDefaults fills the fields left zero with their defaults.
func (c *Config) EnsureDefaults() {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = DefaultDialTimeout
	}
	if c.HandshakeTimeout == 0 {
		c.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	if c.BufferSize == 0 {
		c.BufferSize = DefaultBufferSize
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if c.HeartbeatTimeout == 0 {
		c.HeartbeatTimeout = DefaultHeartbeatTimeout
	}
}

// Validate reports every problem of c at once.
func (c *Config) Validate() error {
	var errs []error
	if (c.ServerTLS == nil) != (c.ClientTLS == nil) {
		errs = append(errs, errors.New("ServerTLS and ClientTLS must be set together: a node both accepts and dials"))
	}
	if c.ServerTLS != nil && len(c.ServerTLS.Certificates) == 0 && c.ServerTLS.GetCertificate == nil {
		errs = append(errs, errors.New("ServerTLS has no certificate (Certificates or GetCertificate)"))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"DialTimeout", c.DialTimeout}, {"HandshakeTimeout", c.HandshakeTimeout}, {"WriteTimeout", c.WriteTimeout},
		{"HeartbeatInterval", c.HeartbeatInterval}, {"HeartbeatTimeout", c.HeartbeatTimeout}} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("%s %v must not be negative (0: the default)", d.name, d.v))
		}
	}
	if c.HeartbeatInterval > 0 && c.HeartbeatTimeout > 0 && c.HeartbeatTimeout <= c.HeartbeatInterval {
		errs = append(errs, fmt.Errorf("HeartbeatTimeout %v must exceed HeartbeatInterval %v", c.HeartbeatTimeout, c.HeartbeatInterval))
	}
	if c.BufferSize < 0 || (c.BufferSize > 0 && c.BufferSize < minBufferSize) {
		errs = append(errs, fmt.Errorf("BufferSize %d must be at least %d bytes (0: the default %d)", c.BufferSize, minBufferSize, DefaultBufferSize))
	}
	if len(c.AdvertiseAddr) > maxAddrLen {
		errs = append(errs, fmt.Errorf("AdvertiseAddr of %d bytes is longer than %d", len(c.AdvertiseAddr), maxAddrLen))
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("tcpnet config: %w", errors.Join(errs...))
}

const (
	minBufferSize = 4 << 10
	maxAddrLen    = 512
)
