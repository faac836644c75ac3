package tcpnet

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/network"
)

// exchangeOne connects one channel from a to b and moves one buffer over
// it; it returns ConnectReceiver's error.
func exchangeOne(t *testing.T, a, b testNode, attempt uint64) error {
	t.Helper()
	id := ChannelID{Attempt: attempt}
	g := network.NewInputGate(1, 1, 0)
	sub := network.NewPipelinedSubpartition()
	if err := a.ConnectSender(b.Addr(), id, sub); err != nil {
		t.Fatal(err)
	}
	if err := b.ConnectReceiver(context.Background(), a.Addr(), id, g, 0, network.NewPool(1, 64)); err != nil {
		return err
	}
	sub.Send(fill(t, network.NewPool(1, 64), network.KindData, []byte("hello")))
	_, buf := pollBuffer(t, g)
	if string(buf.Data) != "hello" {
		t.Errorf("received %q", buf.Data)
	}
	g.Release(0, buf)
	return nil
}

// accepted is the number of connections n accepted and serves.
func accepted(n *Node) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	k := 0
	for c := range n.conns {
		if !c.dialed {
			k++
		}
	}
	return k
}

func TestToken(t *testing.T) {
	for _, tc := range []struct {
		name         string
		sender, recv string
		ok           bool
	}{
		{"same", "s3cret", "s3cret", true},
		{"none", "", "", true},
		{"different", "s3cret", "other", false},
		{"missing on the dialer", "s3cret", "", false},
		{"missing on the acceptor", "", "s3cret", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newNode(t, Config{Token: tc.sender})
			b := newNode(t, Config{Token: tc.recv})
			err := exchangeOne(t, a, b, 1)
			switch {
			case tc.ok && err != nil:
				t.Fatalf("exchange: %v", err)
			case !tc.ok && !errors.Is(err, ErrTokenMismatch):
				t.Fatalf("exchange: %v, want ErrTokenMismatch", err)
			case !tc.ok:
				if !strings.Contains(err.Error(), "cluster token does not match") || !strings.Contains(err.Error(), a.Addr()) {
					t.Errorf("error %q does not say the cluster token of %s does not match", err, a.Addr())
				}
				t.Logf("refused: %v", err)
				// The acceptor refused it too: it serves no connection.
				quiesce(t, a.Node, b.Node)
				if n := accepted(a.Node); n != 0 {
					t.Errorf("the acceptor serves %d connections", n)
				}
			}
			checkNoLoss(t, a, b)
		})
	}
}

// TestNotAPeer: something that is not a weir node connecting or being
// dialed is refused with an error, without harm.
func TestNotAPeer(t *testing.T) {
	a := newNode(t, Config{})
	nc, err := net.Dial("tcp", a.Addr())
	if err != nil {
		t.Fatal(err)
	}
	nc.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
	buf := make([]byte, 1)
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := nc.Read(buf); err == nil {
		t.Error("the node answered an HTTP request")
	}
	nc.Close()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		c.Write([]byte("HTTP/1.1 400 Bad Request\r\n\r\n"))
		c.Close()
	}()
	err = a.ConnectReceiver(context.Background(), ln.Addr().String(), ChannelID{}, network.NewInputGate(1, 1, 0), 0, network.NewPool(1, 64))
	if err == nil || !strings.Contains(err.Error(), "not a weir data-plane node") {
		t.Errorf("dialing a web server: %v", err)
	}
	checkNoLoss(t, a)
}

// certs is a test PKI: a CA and certificates it signed.
type certs struct {
	ca     *x509.Certificate
	caKey  *ecdsa.PrivateKey
	pool   *x509.CertPool
	serial int64
}

func newCA(t testing.TB, name string) *certs {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	p := x509.NewCertPool()
	p.AddCert(ca)
	return &certs{ca: ca, caKey: key, pool: p, serial: 1}
}

// issue returns a certificate for a node on 127.0.0.1, good as server and
// client.
func (c *certs) issue(t testing.TB, name string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	c.serial++
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(c.serial), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.ca, &key.PublicKey, c.caKey)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// mtls returns a node config with mutual TLS: cert presented both ways,
// peers verified against ca.
func mtls(ca *certs, cert tls.Certificate) Config {
	return Config{
		ServerTLS: &tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequireAndVerifyClientCert,
			ClientCAs: ca.pool, MinVersion: tls.VersionTLS13},
		ClientTLS: &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: ca.pool, MinVersion: tls.VersionTLS13},
	}
}

func TestTLS(t *testing.T) {
	ca := newCA(t, "weir test CA")
	a := newNode(t, mtls(ca, ca.issue(t, "a")))
	b := newNode(t, mtls(ca, ca.issue(t, "b")))
	if err := exchangeOne(t, a, b, 1); err != nil {
		t.Fatalf("mutual TLS: %v", err)
	}
	if err := exchangeOne(t, b, a, 1); err != nil {
		t.Fatalf("mutual TLS, the other way: %v", err)
	}

	t.Run("client certificate of another CA", func(t *testing.T) {
		other := newCA(t, "rogue CA")
		cert := other.issue(t, "rogue")
		cfg := mtls(ca, cert)
		// Present it even though the server asks for certificates of
		// its CA, so that the server's verification refuses it.
		cfg.ClientTLS.Certificates = nil
		cfg.ClientTLS.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil }
		rogue := newNode(t, cfg)
		err := exchangeOne(t, a, rogue, 2)
		if err == nil {
			t.Fatal("a client with a certificate of another CA was accepted")
		}
		t.Logf("refused: %v", err)
	})
	t.Run("no client certificate", func(t *testing.T) {
		cfg := mtls(ca, ca.issue(t, "anonymous"))
		cfg.ClientTLS.Certificates = nil
		anon := newNode(t, cfg)
		err := exchangeOne(t, a, anon, 3)
		if err == nil {
			t.Fatal("a client without a certificate was accepted")
		}
		t.Logf("refused: %v", err)
	})
	t.Run("plain TCP client", func(t *testing.T) {
		plain := newNode(t, Config{})
		if err := exchangeOne(t, a, plain, 4); err == nil {
			t.Fatal("a plain TCP client was accepted by a TLS node")
		}
	})
	quiesce(t, a.Node, b.Node)
	if n := accepted(a.Node); n != 1 {
		t.Errorf("a serves %d accepted connections, want only b's", n)
	}
	checkNoLoss(t, a, b)
}

func TestConfigValidate(t *testing.T) {
	cfg := Config{ServerTLS: &tls.Config{}, DialTimeout: -1, BufferSize: 10}
	err := cfg.Validate()
	if err == nil {
		t.Fatal("invalid config accepted")
	}
	for _, want := range []string{"ServerTLS and ClientTLS must be set together", "ServerTLS has no certificate",
		"DialTimeout -1ns must not be negative", "BufferSize 10 must be at least"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if _, err := Listen(context.Background(), "127.0.0.1:0", cfg); err == nil {
		t.Error("Listen accepted an invalid config")
	}
	var ok Config
	ok.EnsureDefaults()
	if err := ok.Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
}

// TestAdvertiseAddr: a node names itself by its advertised address, and a
// bare host takes the listener's port; peers name it so.
func TestAdvertiseAddr(t *testing.T) {
	a := newNode(t, Config{AdvertiseAddr: "127.0.0.1"})
	_, port, _ := net.SplitHostPort(a.ln.Addr().String())
	if want := "127.0.0.1:" + port; a.Addr() != want {
		t.Fatalf("Addr %q, want %q", a.Addr(), want)
	}
	b := newNode(t, Config{AdvertiseAddr: "localhost"})
	if !strings.HasPrefix(b.Addr(), "localhost:") {
		t.Fatalf("Addr %q", b.Addr())
	}
	// a's sender names its receiver by b's advertised name.
	if err := exchangeOne(t, a, b, 1); err != nil {
		t.Fatal(err)
	}
	checkNoLoss(t, a, b)
}
