package rest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/rest/resttest"
)

func TestNonLoopbackNeedsToken(t *testing.T) {
	for _, addr := range []string{"0.0.0.0", "::", "192.0.2.1", "example.com"} {
		_, err := Start(Config{BindAddress: addr, Port: "0"})
		if !errors.Is(err, ErrTokenRequired) || !strings.Contains(err.Error(), addr) ||
			!strings.Contains(err.Error(), "rest.auth.token") {
			t.Errorf("Start on %s without a token: %v", addr, err)
		}
	}
	// With a token the configuration is valid (the test binds loopback
	// addresses only, so it checks the validation alone).
	c := Config{BindAddress: "0.0.0.0", Port: "0", AuthToken: "t"}
	if err := c.validate(); err != nil {
		t.Errorf("non-loopback address with a token: %v", err)
	}
	for _, addr := range []string{"127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost", "LocalHost"} {
		if !IsLoopback(addr) {
			t.Errorf("%s is loopback", addr)
		}
	}
}

func TestToken(t *testing.T) {
	prom := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("weir_up 1\n")) })
	dash := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("<html>")) })
	s, _ := fixture(t, Config{AuthToken: "s3cr3t", Metrics: prom, Dashboard: dash})
	get := func(path, header string) answer {
		req, _ := http.NewRequest(http.MethodGet, s.URL()+path, nil)
		if header != "" {
			req.Header.Set("Authorization", header)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		_, _ = io.Copy(&b, resp.Body)
		return answer{status: resp.StatusCode, header: resp.Header, body: []byte(b.String())}
	}
	for _, path := range []string{"/jobs", "/overview", "/config", jobPrefix + "/checkpoints", "/metrics", "/nope/../jobs", "/v1/jobs"} {
		a := get(path, "")
		wantError(t, a, http.StatusUnauthorized, "Unauthorized", "Authorization: Bearer")
		if a.header.Get("WWW-Authenticate") == "" {
			t.Errorf("%s: no WWW-Authenticate header", path)
		}
		wantError(t, get(path, "Bearer s3cr3t-not"), http.StatusUnauthorized, "Unauthorized: wrong token")
		wantError(t, get(path, "Basic czNjcjN0"), http.StatusUnauthorized, "must be Bearer")
		if a := get(path, "Bearer s3cr3t"); a.status != http.StatusOK {
			t.Errorf("%s with the token: %d %s", path, a.status, a.body)
		}
	}
	if a := get("/jobs", "bearer s3cr3t"); a.status != http.StatusOK {
		t.Errorf("the scheme is case-insensitive: %d", a.status)
	}
	// The dashboard's files load without the token, so that the page can
	// ask for it.
	for _, path := range []string{"/", "/index.html", "/assets/app.js"} {
		if a := get(path, ""); a.status != http.StatusOK || string(a.body) != "<html>" {
			t.Errorf("%s without the token: %d %s", path, a.status, a.body)
		}
	}
	// A cancel without the token does nothing.
	req, _ := http.NewRequest(http.MethodPatch, s.URL()+jobPrefix+"?mode=cancel", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("cancel without the token: %d", resp.StatusCode)
	}
}

// selfSigned writes a self-signed certificate for 127.0.0.1 and its key
// to dir and returns their paths and a pool trusting the certificate.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "weir test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

func TestTLS(t *testing.T) {
	certFile, keyFile, pool := selfSigned(t, t.TempDir())
	s := start(t, Config{CertFile: certFile, KeyFile: keyFile, AuthToken: "tok"}, resttest.NewJob().Job)
	if !strings.HasPrefix(s.URL(), "https://127.0.0.1:") {
		t.Fatalf("URL %s", s.URL())
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	defer tr.CloseIdleConnections()
	trusting := &http.Client{Transport: tr}
	if a := call(t, trusting, http.MethodGet, s.URL(), "/jobs", "tok", ""); a.status != http.StatusOK {
		t.Errorf("over TLS: %d %s", a.status, a.body)
	}
	// The typed client works over TLS too.
	jobs, err := NewClient(s.URL(), "tok", trusting).Jobs(t.Context())
	if err != nil || len(jobs) != 1 {
		t.Errorf("client over TLS: %v %v", jobs, err)
	}
	// A client that does not trust the certificate fails the handshake;
	// plain HTTP is not served.
	plain := &http.Client{Transport: &http.Transport{}}
	if _, err := plain.Get(s.URL() + "/jobs"); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("untrusting client: %v", err)
	}
	if resp, err := plain.Get(strings.Replace(s.URL(), "https", "http", 1) + "/jobs"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Error("plain HTTP served")
		}
	}
	plain.CloseIdleConnections()

	_, err = Start(Config{Port: "0", CertFile: certFile, KeyFile: filepath.Join(t.TempDir(), "missing.pem")})
	if err == nil || !strings.Contains(err.Error(), "missing.pem") {
		t.Errorf("missing key: %v", err)
	}
	_, err = Start(Config{Port: "0", CertFile: certFile})
	if err == nil || !strings.Contains(err.Error(), "both a certificate and a key") {
		t.Errorf("certificate without key: %v", err)
	}
}

// Without a token, only requests naming a loopback host are answered: a
// page whose domain was rebound to 127.0.0.1 cannot cancel the job.
func TestDNSRebindingRefused(t *testing.T) {
	s, j := fixture(t, Config{})
	do := func(method, path, host string) int {
		req, _ := http.NewRequest(method, s.URL()+path, nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	port := strings.TrimPrefix(s.URL()[strings.LastIndex(s.URL(), ":"):], ":")
	for _, host := range []string{"evil.example", "evil.example:" + port, "10.0.0.1:" + port} {
		if st := do(http.MethodGet, "/jobs", host); st != http.StatusMisdirectedRequest {
			t.Errorf("Host %s: %d, want 421", host, st)
		}
		if st := do(http.MethodPatch, jobPrefix+"?mode=cancel", host); st != http.StatusMisdirectedRequest {
			t.Errorf("cancel with Host %s: %d, want 421", host, st)
		}
	}
	if j.Cancels() != 0 {
		t.Fatal("a rebound request canceled the job")
	}
	for _, host := range []string{"localhost:" + port, "127.0.0.1:" + port, "[::1]:" + port, "LOCALHOST"} {
		if st := do(http.MethodGet, "/jobs", host); st != http.StatusOK {
			t.Errorf("Host %s: %d, want 200", host, st)
		}
	}
	// With a token any host name may be used (a server behind a proxy).
	s2, _ := fixture(t, Config{AuthToken: "tok"})
	req, _ := http.NewRequest(http.MethodGet, s2.URL()+"/jobs", nil)
	req.Host = "weir.example.com"
	req.Header.Set("Authorization", "Bearer tok")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("with a token, Host weir.example.com: %d", resp.StatusCode)
	}
}
