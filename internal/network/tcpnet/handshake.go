package tcpnet

import (
	"bufio"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// hello is the first frame each side of a connection sends.
type hello struct {
	version uint16
	nonce   [nonceLen]byte
	proof   [proofLen]byte // the acceptor's; zero in the dialer's hello
	addr    string         // the sender's advertised address
}

func writeHello(bw *bufio.Writer, h *hello) error {
	var buf [headerLen + helloFixedLen]byte
	b := appendHeader(buf[:0], frameHello, helloFixedLen+len(h.addr))
	b = binary.BigEndian.AppendUint32(b, magic)
	b = binary.BigEndian.AppendUint16(b, h.version)
	b = append(b, h.nonce[:]...)
	b = append(b, h.proof[:]...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(h.addr)))
	bw.Write(b)
	bw.WriteString(h.addr)
	return bw.Flush()
}

// errNotWeir is a first frame that is not a hello.
var errNotWeir = errors.New("the peer is not a weir data-plane node (its first frame is not a hello)")

func readHello(br *bufio.Reader) (hello, error) {
	var h hello
	var buf [headerLen + helloFixedLen]byte
	if _, err := io.ReadFull(br, buf[:headerLen]); err != nil {
		return h, err
	}
	n := int(binary.BigEndian.Uint32(buf[:])) - 1
	if frameType(buf[4]) != frameHello || n < helloFixedLen || n > helloFixedLen+maxAddrLen {
		return h, errNotWeir
	}
	b := buf[headerLen:]
	if _, err := io.ReadFull(br, b); err != nil {
		return h, err
	}
	if binary.BigEndian.Uint32(b) != magic {
		return h, errNotWeir
	}
	h.version = binary.BigEndian.Uint16(b[4:])
	copy(h.nonce[:], b[6:])
	copy(h.proof[:], b[6+nonceLen:])
	addrLen := int(binary.BigEndian.Uint16(b[6+nonceLen+proofLen:]))
	if addrLen != n-helloFixedLen {
		return h, fmt.Errorf("%w: hello of %d bytes with an address of %d", ErrProtocol, n, addrLen)
	}
	addr := make([]byte, addrLen)
	if _, err := io.ReadFull(br, addr); err != nil {
		return h, err
	}
	h.addr = string(addr)
	return h, nil
}

func writeProof(bw *bufio.Writer, p *[proofLen]byte) error {
	var buf [headerLen + proofLen]byte
	b := appendHeader(buf[:0], frameProof, proofLen)
	bw.Write(append(b, p[:]...))
	return bw.Flush()
}

func readProof(br *bufio.Reader) ([proofLen]byte, error) {
	var p [proofLen]byte
	var buf [headerLen]byte
	if _, err := io.ReadFull(br, buf[:]); err != nil {
		return p, err
	}
	if frameType(buf[4]) != frameProof || binary.BigEndian.Uint32(buf[:]) != 1+proofLen {
		return p, fmt.Errorf("%w: expected a proof frame, got %v", ErrProtocol, frameType(buf[4]))
	}
	_, err := io.ReadFull(br, p[:])
	return p, err
}

// Roles in the proofs, so that a proof cannot be reflected.
const (
	roleDialer   = "weir tcpnet dialer"
	roleAcceptor = "weir tcpnet acceptor"
)

// proof shows that a side knows token: HMAC-SHA256 keyed by it over the role
// and both nonces.
func proof(token, role string, dialerNonce, acceptorNonce *[nonceLen]byte) [proofLen]byte {
	mac := hmac.New(sha256.New, []byte(token))
	mac.Write([]byte(role))
	mac.Write(dialerNonce[:])
	mac.Write(acceptorNonce[:])
	var p [proofLen]byte
	mac.Sum(p[:0])
	return p
}

func newNonce() [nonceLen]byte {
	var n [nonceLen]byte
	rand.Read(n[:]) // never fails (crypto/rand)
	return n
}

// handshakeDial runs the dialer's side of the handshake on c.
func (n *Node) handshakeDial(c *conn) error {
	mine := hello{version: protocolVersion, nonce: newNonce(), addr: n.addr}
	if err := writeHello(c.bw, &mine); err != nil {
		return err
	}
	theirs, err := readHello(c.br)
	if err != nil {
		return err
	}
	if theirs.version != protocolVersion {
		return fmt.Errorf("%w: %s speaks protocol version %d, this node %d", ErrVersion, c.peer, theirs.version, protocolVersion)
	}
	want := proof(n.cfg.Token, roleAcceptor, &mine.nonce, &theirs.nonce)
	// Send our proof in any case: a peer with another token logs why it
	// refuses us.
	p := proof(n.cfg.Token, roleDialer, &mine.nonce, &theirs.nonce)
	if err := writeProof(c.bw, &p); err != nil {
		return err
	}
	if !hmac.Equal(want[:], theirs.proof[:]) {
		return fmt.Errorf("%w: %s holds another Config.Token than this node", ErrTokenMismatch, c.peer)
	}
	return nil
}

// handshakeAccept runs the acceptor's side of the handshake on c and
// returns the dialer's advertised address.
func (n *Node) handshakeAccept(c *conn) (string, error) {
	theirs, err := readHello(c.br)
	if err != nil {
		return "", err
	}
	mine := hello{version: protocolVersion, nonce: newNonce(), addr: n.addr}
	mine.proof = proof(n.cfg.Token, roleAcceptor, &theirs.nonce, &mine.nonce)
	if err := writeHello(c.bw, &mine); err != nil {
		return "", err
	}
	if theirs.version != protocolVersion {
		return "", fmt.Errorf("%w: %s speaks protocol version %d, this node %d", ErrVersion, theirs.addr, theirs.version, protocolVersion)
	}
	got, err := readProof(c.br)
	if err != nil {
		return "", err
	}
	want := proof(n.cfg.Token, roleDialer, &theirs.nonce, &mine.nonce)
	if !hmac.Equal(want[:], got[:]) {
		return "", fmt.Errorf("%w: refused %s", ErrTokenMismatch, theirs.addr)
	}
	return theirs.addr, nil
}
