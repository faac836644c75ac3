package cluster_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/cluster"
	"github.com/weirstream/weir/internal/jobs"
)

// testCA is a certificate authority for a test, writing PEM files.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	file string
}

func newTestCA(t *testing.T, dir, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	file := filepath.Join(dir, name+"-ca.pem")
	writePEM(t, file, "CERTIFICATE", der)
	return &testCA{cert: cert, key: key, file: file}
}

// issue writes a certificate and key signed by ca and returns the
// process's Security.
func (ca *testCA) issue(t *testing.T, dir, name string) cluster.Security {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	sec := cluster.Security{CertFile: filepath.Join(dir, name+".pem"), KeyFile: filepath.Join(dir, name+"-key.pem"), CAFile: ca.file}
	writePEM(t, sec.CertFile, "CERTIFICATE", der)
	writePEM(t, sec.KeyFile, "EC PRIVATE KEY", kb)
	return sec
}

func writePEM(t *testing.T, file, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// Mutual TLS: task managers with certificates of the cluster's CA run the
// job over TLS on the RPC and the data plane; a task manager whose
// certificate another CA signed is refused.
func TestClusterMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, dir, "cluster")
	other := newTestCA(t, dir, "other")
	c := newTestCluster(t, counterSpec(dir, 20_000, 2), ca.issue(t, dir, "jobmanager"))
	c.tcp = true
	// The stranger's registration fails (the TLS handshake refuses its
	// certificate); it keeps retrying and never registers.
	_, _, stranger := c.startTaskManager(1, func(cfg *cluster.TaskManagerConfig) {
		cfg.Security = other.issue(t, dir, "stranger")
	})
	waitFor(t, 20*time.Second, "the stranger's registration attempts", func() bool { return stranger.Attempts() >= 2 })
	if n, _ := c.jm.TaskManagers(); n != 0 {
		t.Fatalf("%d task managers registered with a certificate of another CA", n)
	}
	for i := range 2 {
		c.startTM(1, func(cfg *cluster.TaskManagerConfig) { cfg.Security = ca.issue(t, dir, "tm"+strconv.Itoa(i)) })
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := c.runJob(ctx); err != nil {
		t.Fatal(err)
	}
	if err := jobs.VerifyCounterOutput(committed(t, filepath.Join(dir, "out")), 20_000, 97); err != nil {
		t.Fatal(err)
	}
	if n, _ := c.jm.TaskManagers(); n != 2 {
		t.Fatalf("%d task managers registered, want the two with the cluster's certificates", n)
	}
	if stranger.Registrations() != 0 {
		t.Fatal("the task manager with another CA's certificate registered")
	}
}
