package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The registration handshake proves the token without sending it, and a
// proof recorded from one session does not open another: an eavesdropper
// on a cluster without TLS can neither learn the token nor replay a
// registration.
func TestRegistrationProofIsNotReplayable(t *testing.T) {
	const token = "s3cret-cluster-token"
	jm, err := NewJobManager(JobManagerConfig{Address: "127.0.0.1:0", Spec: JobSpec{Job: "counter"}, Security: Security{Token: token},
		HeartbeatInterval: time.Second, HeartbeatTimeout: 5 * time.Second, SlotTimeout: time.Second,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer jm.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	// wire records every message of a session as it is encoded.
	var wire bytes.Buffer
	record := func(m any) {
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		wire.Write(b)
	}
	// session runs a handshake whose register message carries proof
	// (nil: the right one) and returns the job manager's answer.
	session := func(proof func(challenge *challengeMsg, nonce []byte) []byte) (*registeredMsg, []byte, error) {
		cc, st, err := openSession(ctx, jm.Addr(), Security{})
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		nonce := newNonce()
		hello := &toJM{Hello: &helloMsg{Nonce: nonce}}
		record(hello)
		if err := st.SendMsg(hello); err != nil {
			t.Fatal(err)
		}
		var ch toTM
		if err := st.RecvMsg(&ch); err != nil {
			t.Fatal(err)
		}
		record(&ch)
		if ch.Challenge == nil {
			t.Fatalf("the job manager answered a hello with %+v", ch)
		}
		if want := proofOf(token, roleJobManager, nonce, ch.Challenge.Nonce); !bytes.Equal(ch.Challenge.Proof, want) {
			t.Fatal("the job manager's proof does not verify with the shared token")
		}
		p := proof(ch.Challenge, nonce)
		reg := &toJM{Register: &registerMsg{Name: "probe", Slots: 1, DataAddr: "127.0.0.1:1", Binary: BinaryHash(), Proof: p}}
		record(reg)
		if err := st.SendMsg(reg); err != nil {
			t.Fatal(err)
		}
		var ans toTM
		err = st.RecvMsg(&ans)
		return ans.Registered, p, err
	}
	good, recorded, err := session(func(c *challengeMsg, nonce []byte) []byte {
		return proofOf(token, roleTaskManager, c.Nonce, nonce)
	})
	if err != nil || good == nil {
		t.Fatalf("a registration with the right proof: %+v, %v", good, err)
	}
	if strings.Contains(wire.String(), token) {
		t.Fatalf("the token crossed the wire: %s", wire.String())
	}
	for name, proof := range map[string]func(*challengeMsg, []byte) []byte{
		"replayed":      func(*challengeMsg, []byte) []byte { return recorded },
		"the JM's role": func(c *challengeMsg, nonce []byte) []byte { return proofOf(token, roleJobManager, c.Nonce, nonce) },
		"echoed":        func(c *challengeMsg, _ []byte) []byte { return c.Proof },
		"none":          func(*challengeMsg, []byte) []byte { return nil },
	} {
		reg, _, err := session(proof)
		if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "security.cluster.token") {
			t.Errorf("%s proof: registered %+v, error %v; want PermissionDenied naming security.cluster.token", name, reg, err)
		}
	}
}
