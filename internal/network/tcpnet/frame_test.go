package tcpnet

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/network"
)

// TestEventCodec: every field of an event and its checkpoint options
// survives the wire.
func TestEventCodec(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	for range 1000 {
		ev := randomEvent(rng, rng.IntN(2) == 0)
		ev.Kind = network.EventKind(1 + rng.IntN(int(network.EventAnnouncement)))
		id := ChannelID{Attempt: rng.Uint64(), Edge: rng.Uint32(), From: rng.Uint32(), To: rng.Uint32()}
		backlog := rng.IntN(1 << 20)
		b, err := appendEventHeader(nil, id, &ev, backlog)
		if err != nil {
			t.Fatal(err)
		}
		if n := int(binary.BigEndian.Uint32(b)) - 1; n != eventFixedLen+len(ev.Checkpoint.Target) || frameType(b[4]) != frameEvent {
			t.Fatalf("frame length %d type %v", n, frameType(b[4]))
		}
		body := b[headerLen:]
		gotID := parseChannel(body)
		got, gotBacklog, targetLen, err := parseEventFixed(body[channelLen:])
		if err != nil {
			t.Fatal(err)
		}
		if targetLen != len(ev.Checkpoint.Target) {
			t.Fatalf("target length %d, want %d", targetLen, len(ev.Checkpoint.Target))
		}
		got.Checkpoint.Target = ev.Checkpoint.Target
		if got != ev || gotID != id || gotBacklog != backlog {
			t.Fatalf("decoded %+v %v backlog %d, want %+v %v backlog %d", got, gotID, gotBacklog, ev, id, backlog)
		}
	}
	long := network.Event{Kind: network.EventBarrier, Checkpoint: checkpoint.Options{Target: strings.Repeat("x", maxTargetLen+1)}}
	if _, err := appendEventHeader(nil, ChannelID{}, &long, 0); err == nil {
		t.Error("a target beyond 64 KiB was encoded")
	}
	bad := make([]byte, eventFixedLen-channelLen)
	bad[4] = 99
	if _, _, _, err := parseEventFixed(bad); err == nil {
		t.Error("an unknown event kind was decoded")
	}
}

// fakeSender accepts one connection as a weir node would and lets the test
// write raw frames to the receiver that dialed it.
type fakeSender struct {
	ln  net.Listener
	n   *Node // for the handshake only
	c   *conn
	got chan *conn
}

func newFakeSender(t *testing.T) *fakeSender {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeSender{ln: ln, got: make(chan *conn, 1)}
	f.n = &Node{addr: ln.Addr().String()}
	f.n.cfg.EnsureDefaults()
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			close(f.got)
			return
		}
		c := newConn(f.n, nc, "", false)
		if _, err := f.n.handshakeAccept(c); err != nil {
			nc.Close()
			close(f.got)
			return
		}
		f.got <- c
	}()
	t.Cleanup(func() {
		ln.Close()
		if f.c != nil {
			f.c.nc.Close()
		}
	})
	return f
}

// accept waits for the receiver's connection and its open frame, and
// returns the credit it granted.
func (f *fakeSender) accept(t *testing.T) int {
	t.Helper()
	c, ok := <-f.got
	if !ok {
		t.Fatal("the fake sender's handshake failed")
	}
	f.c = c
	var h [headerLen + controlLen]byte
	c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(c.br, h[:]); err != nil {
		t.Fatalf("read the open frame: %v", err)
	}
	if frameType(h[4]) != frameOpen {
		t.Fatalf("first frame %v, want open", frameType(h[4]))
	}
	return int(binary.BigEndian.Uint32(h[headerLen+channelLen:]))
}

func (f *fakeSender) send(t *testing.T, frames ...[]byte) {
	t.Helper()
	for _, fr := range frames {
		if _, err := f.c.nc.Write(fr); err != nil {
			t.Fatalf("fake sender: %v", err)
		}
	}
}

func dataFrame(id ChannelID, payload []byte) []byte {
	return append(appendDataHeader(nil, id, network.KindData, 0, len(payload)), payload...)
}

// TestProtocolViolations: a peer that breaks the protocol loses its
// connection, and the receiver's owner learns it through OnPeerLost with
// ErrProtocol; nothing panics or hangs.
func TestProtocolViolations(t *testing.T) {
	id := ChannelID{Attempt: 1}
	for _, tc := range []struct {
		name   string
		frames func(credit int) [][]byte
		want   string
	}{
		{"data beyond credit", func(credit int) [][]byte {
			var fs [][]byte
			for range credit + 1 {
				fs = append(fs, dataFrame(id, []byte("x")))
			}
			return fs
		}, "exhausted"},
		{"data beyond the segment", func(int) [][]byte {
			return [][]byte{dataFrame(id, make([]byte, 65))}
		}, "exceeds the receiver's segment size 64"},
		{"unknown frame type", func(int) [][]byte {
			return [][]byte{appendHeader(nil, 99, 0)}
		}, "unexpected type 99 frame"},
		{"short control frame", func(int) [][]byte {
			return [][]byte{appendHeader(nil, frameBacklog, 3), {1, 2, 3}}
		}, "backlog frame of 3 bytes"},
		{"bad event", func(int) [][]byte {
			ev := network.Event{Kind: network.EventWatermark}
			b, _ := appendEventHeader(nil, id, &ev, 0)
			b[headerLen+channelLen+4] = 0 // kind 0
			return [][]byte{b}
		}, "unknown event kind 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lost := make(chan error, 1)
			b := newNode(t, Config{OnPeerLost: func(_ string, err error) { lost <- err }})
			f := newFakeSender(t)
			g := network.NewInputGate(1, 2, 0)
			if err := b.ConnectReceiver(context.Background(), f.ln.Addr().String(), id, g, 0, network.NewPool(2, 64)); err != nil {
				t.Fatal(err)
			}
			credit := f.accept(t)
			if credit != 2 {
				t.Errorf("open with credit %d, want 2", credit)
			}
			f.send(t, tc.frames(credit)...)
			select {
			case err := <-lost:
				if !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("lost with %v, want ErrProtocol saying %q", err, tc.want)
				}
				t.Logf("lost: %v", err)
			case <-time.After(10 * time.Second):
				t.Fatal("the protocol violation was not detected")
			}
		})
	}
}

// TestSilentPeer: a peer that stops sending without closing its
// connection (a crashed host) is lost after HeartbeatTimeout, while an
// idle but live connection stays up on heartbeats.
func TestSilentPeer(t *testing.T) {
	lost := make(chan error, 1)
	cfg := Config{HeartbeatInterval: 10 * time.Millisecond, HeartbeatTimeout: time.Second,
		OnPeerLost: func(_ string, err error) { lost <- err }}
	b := newNode(t, cfg)

	// A live peer: both sides idle, heartbeats keep the connection.
	a := newNode(t, Config{HeartbeatInterval: 10 * time.Millisecond, HeartbeatTimeout: time.Second})
	if err := exchangeOne(t, a, b, 1); err != nil {
		t.Fatal(err)
	}
	b.mu.Lock()
	var c *conn
	for k := range b.conns {
		c = k
	}
	b.mu.Unlock()
	from := c.recvd.Load()
	waitFor(t, "heartbeats", func() bool { return c.recvd.Load() >= from+10*headerLen })

	// A silent one.
	f := newFakeSender(t)
	if err := b.ConnectReceiver(context.Background(), f.ln.Addr().String(), ChannelID{Attempt: 2}, network.NewInputGate(1, 1, 0), 0, network.NewPool(1, 64)); err != nil {
		t.Fatal(err)
	}
	f.accept(t)
	select {
	case err := <-lost:
		if !errors.Is(err, ErrPeerLost) || !strings.Contains(err.Error(), "not even a heartbeat") {
			t.Errorf("lost with %v", err)
		}
		t.Logf("lost: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the silent peer was not detected")
	}
	checkNoLoss(t, a)
}

// TestStuckWriter: a receiver that stops reading does not block its
// sender's writer forever: after WriteTimeout without progress the
// connection fails.
func TestStuckWriter(t *testing.T) {
	lost := make(chan error, 1)
	a := newNode(t, Config{WriteTimeout: 200 * time.Millisecond, OnPeerLost: func(_ string, err error) { lost <- err }})
	id := ChannelID{Attempt: 1}
	sub := network.NewPipelinedSubpartition()
	if err := a.ConnectSender("fake", id, sub); err != nil {
		t.Fatal(err)
	}
	// A receiver that opens the channel with plenty of credit and then
	// reads nothing.
	fake := &Node{addr: "fake"}
	fake.cfg.EnsureDefaults()
	nc, err := net.Dial("tcp", a.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	c := newConn(fake, nc, a.Addr(), true)
	if err := fake.handshakeDial(c); err != nil {
		t.Fatal(err)
	}
	if _, err := nc.Write(appendControl(nil, frameOpen, id, 10000)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		pool := network.NewPool(8, 64<<10)
		for ctx.Err() == nil {
			b, err := pool.Request(ctx)
			if err != nil {
				return
			}
			b.Data = b.Data[:cap(b.Data)]
			sub.Send(b)
		}
	}()
	select {
	case err := <-lost:
		if !strings.Contains(err.Error(), "write made no progress") {
			t.Errorf("lost with %v", err)
		}
		t.Logf("lost: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("the stuck writer was not detected")
	}
	cancel()
	<-done
}
