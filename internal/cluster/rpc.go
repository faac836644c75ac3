package cluster

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// jsonCodec encodes the control plane's messages, plain Go structs, as
// JSON: gRPC without generated code.
type jsonCodec struct{}

func (jsonCodec) Marshal(v any) ([]byte, error)      { return json.Marshal(v) }
func (jsonCodec) Unmarshal(data []byte, v any) error { return json.Unmarshal(data, v) }
func (jsonCodec) Name() string                       { return "weir-json" }

// sessionStream is the one RPC: a task manager's registration stream.
var serviceDesc = grpc.ServiceDesc{
	ServiceName: "weir.cluster.JobManager",
	HandlerType: (*any)(nil),
	Streams: []grpc.StreamDesc{{
		StreamName:    "Session",
		Handler:       func(srv any, stream grpc.ServerStream) error { return srv.(*JobManager).session(stream) },
		ServerStreams: true,
		ClientStreams: true,
	}},
	Metadata: "weir/cluster",
}

const sessionMethod = "/weir.cluster.JobManager/Session"

// maxMessage bounds a control message: a deployment carries the restored
// checkpoint's _metadata, which grows with the state's file count.
const maxMessage = 256 << 20

// Security configures how the processes of a cluster trust each other:
// mutual TLS (security.ssl.internal.*) or a shared token
// (security.cluster.token).
type Security struct {
	// TLS: certificate and key of this process and the CA that signed
	// every process's certificate; all three or none.
	CertFile, KeyFile, CAFile string
	// Token is the shared secret every registration and data connection
	// proves to hold (an HMAC over both ends' nonces: the token never
	// crosses the wire, and each end learns the other holds it); with TLS
	// it is checked too when set.
	Token string
}

// Roles of the registration proofs: a proof of one role is never valid
// as the other's.
const (
	roleJobManager  = "weir cluster job manager"
	roleTaskManager = "weir cluster task manager"
)

// proofOf is role's proof of holding token for a session whose nonces
// are first (the verifier's) and second (the prover's): HMAC-SHA256.
func proofOf(token, role string, first, second []byte) []byte {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte(role))
	m.Write(first)
	m.Write(second)
	return m.Sum(nil)
}

// nonceSize is the length of a session's nonces.
const nonceSize = 16

func newNonce() []byte {
	b := make([]byte, nonceSize)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return b
}

// TLSEnabled reports whether TLS is configured.
func (s Security) TLSEnabled() bool { return s.CertFile != "" || s.KeyFile != "" || s.CAFile != "" }

// tlsConfigs loads the server and client TLS configurations: each side
// presents its certificate and requires one signed by the CA.
func (s Security) tlsConfigs() (server, client *tls.Config, err error) {
	if !s.TLSEnabled() {
		return nil, nil, nil
	}
	if s.CertFile == "" || s.KeyFile == "" || s.CAFile == "" {
		return nil, nil, errors.New("security.ssl.internal: set all of security.ssl.internal.cert-file, security.ssl.internal.key-file and security.ssl.internal.ca-file")
	}
	cert, err := tls.LoadX509KeyPair(s.CertFile, s.KeyFile)
	if err != nil {
		return nil, nil, fmt.Errorf("security.ssl.internal: load certificate %s and key %s: %w", s.CertFile, s.KeyFile, err)
	}
	caPEM, err := os.ReadFile(s.CAFile)
	if err != nil {
		return nil, nil, fmt.Errorf("security.ssl.internal: read CA certificate: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, nil, fmt.Errorf("security.ssl.internal: %s holds no PEM certificate", s.CAFile)
	}
	server = &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}
	// Processes address each other by IP and port: the certificate must
	// be signed by the CA; its names are not checked against the address.
	client = &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS12,
		InsecureSkipVerify: true, VerifyPeerCertificate: verifyChain(pool)}
	return server, client, nil
}

// verifyChain checks that the peer's certificate chains to the CA, without
// checking its names.
func verifyChain(pool *x509.CertPool) func([][]byte, [][]*x509.Certificate) error {
	return func(raw [][]byte, _ [][]*x509.Certificate) error {
		if len(raw) == 0 {
			return errors.New("the peer presented no certificate")
		}
		certs := make([]*x509.Certificate, len(raw))
		for i, r := range raw {
			c, err := x509.ParseCertificate(r)
			if err != nil {
				return err
			}
			certs[i] = c
		}
		inter := x509.NewCertPool()
		for _, c := range certs[1:] {
			inter.AddCert(c)
		}
		_, err := certs[0].Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
		if err != nil {
			return fmt.Errorf("the peer's certificate is not signed by the cluster's CA: %w", err)
		}
		return nil
	}
}

// checkExposure refuses to listen beyond loopback without TLS or a token.
func (s Security) checkExposure(what, addr string) error {
	if s.TLSEnabled() || s.Token != "" {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%s address %q: %w", what, addr, err)
	}
	if ip := net.ParseIP(host); host == "localhost" || ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("%s binds to %s, beyond loopback, without security: set security.cluster.token (a shared secret) or security.ssl.internal.enabled with certificates", what, addr)
}

func (s Security) serverCredentials() (grpc.ServerOption, error) {
	server, _, err := s.tlsConfigs()
	if err != nil || server == nil {
		return nil, err
	}
	return grpc.Creds(credentials.NewTLS(server)), nil
}

func (s Security) dialCredentials() (grpc.DialOption, error) {
	_, client, err := s.tlsConfigs()
	if err != nil {
		return nil, err
	}
	if client == nil {
		return grpc.WithTransportCredentials(insecure.NewCredentials()), nil
	}
	return grpc.WithTransportCredentials(credentials.NewTLS(client)), nil
}

var (
	binaryOnce sync.Once
	binaryHash string
)

// BinaryHash identifies the running executable (a SHA-256 of its file):
// the job manager refuses a task manager that runs another binary, whose
// job code may differ.
func BinaryHash() string {
	binaryOnce.Do(func() {
		path, err := os.Executable()
		if err != nil {
			binaryHash = "unknown"
			return
		}
		f, err := os.Open(path)
		if err != nil {
			binaryHash = "unknown"
			return
		}
		defer f.Close()
		h := sha256.New()
		if _, err := io.Copy(h, f); err != nil {
			binaryHash = "unknown"
			return
		}
		binaryHash = hex.EncodeToString(h.Sum(nil))[:16]
	})
	return binaryHash
}

// openSession opens a task manager's stream to the job manager at addr.
func openSession(ctx context.Context, addr string, sec Security) (*grpc.ClientConn, grpc.ClientStream, error) {
	creds, err := sec.dialCredentials()
	if err != nil {
		return nil, nil, err
	}
	cc, err := grpc.NewClient(addr, creds, grpc.WithDefaultCallOptions(grpc.ForceCodec(jsonCodec{}),
		grpc.MaxCallRecvMsgSize(maxMessage), grpc.MaxCallSendMsgSize(maxMessage)))
	if err != nil {
		return nil, nil, fmt.Errorf("job manager %s: %w", addr, err)
	}
	st, err := cc.NewStream(ctx, &serviceDesc.Streams[0], sessionMethod)
	if err != nil {
		cc.Close()
		return nil, nil, fmt.Errorf("job manager %s: %w", addr, err)
	}
	return cc, st, nil
}
