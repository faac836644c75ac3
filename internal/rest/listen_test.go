package rest

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"testing"
)

// portOfURL is the port of a server's URL.
func portOfURL(t *testing.T, s *Server) int {
	t.Helper()
	u, err := url.Parse(s.URL())
	if err != nil {
		t.Fatal(err)
	}
	p, err := strconv.Atoi(u.Port())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// takePort listens on a free port of 127.0.0.1 until the test ends.
func takePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().(*net.TCPAddr).Port
}

func TestPortZero(t *testing.T) {
	s := start(t, Config{Port: "0"})
	if p := portOfURL(t, s); p == 0 {
		t.Errorf("URL %s", s.URL())
	}
	if !strings.HasPrefix(s.URL(), "http://127.0.0.1:") {
		t.Errorf("URL %s", s.URL())
	}
}

func TestPortTaken(t *testing.T) {
	p := takePort(t)
	_, err := Start(Config{Port: strconv.Itoa(p)})
	want := fmt.Sprintf("listen on 127.0.0.1:%d: port %d is in use", p, p)
	if !errors.Is(err, ErrPortInUse) || !strings.Contains(err.Error(), want) {
		t.Errorf("Start on a taken port: %v, want %q", err, want)
	}

	var logs logBuffer
	s := start(t, Config{Port: strconv.Itoa(p), FallbackToFreePort: true,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if got := portOfURL(t, s); got == p || got == 0 {
		t.Errorf("fallback port %d (taken: %d)", got, p)
	}
	if out := logs.String(); !strings.Contains(out, "level=WARN") || !strings.Contains(out, "REST port taken") ||
		!strings.Contains(out, strconv.Itoa(p)) {
		t.Errorf("no warning naming the taken port:\n%s", out)
	}
}

func TestPortRange(t *testing.T) {
	p := takePort(t)
	s := start(t, Config{Port: fmt.Sprintf("%d-%d", p, p+50)})
	got := portOfURL(t, s)
	if got <= p || got > p+50 {
		t.Fatalf("port %d outside %d-%d, or the taken one", got, p+1, p+50)
	}
	// Every port before the one taken was in use (it is the first free).
	for q := p + 1; q < got; q++ {
		if ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(q))); err == nil {
			ln.Close()
			t.Errorf("port %d was free, yet %d was taken", q, got)
		}
	}

	_, err := Start(Config{Port: fmt.Sprintf("%d-%d", p, p)})
	if !errors.Is(err, ErrPortInUse) {
		t.Errorf("range of one taken port: %v", err)
	}
}

func TestBadConfig(t *testing.T) {
	_, err := Start(Config{Port: "80-70", BindAddress: "0.0.0.0", CertFile: "c.pem"})
	if err == nil {
		t.Fatal("no error")
	}
	// Every problem at once.
	for _, want := range []string{`port "80-70" is not a port`, "both a certificate and a key", "not a loopback address"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	for _, bad := range []string{"x", "-1", "65536", "0-10", "10-5", ""} {
		if _, _, err := ParsePorts(bad); err == nil {
			t.Errorf("ParsePorts(%q) accepted", bad)
		}
	}
	for in, want := range map[string][2]int{"0": {0, 0}, "8081": {8081, 8081}, " 50100 - 50200 ": {50100, 50200}} {
		if lo, hi, err := ParsePorts(in); err != nil || lo != want[0] || hi != want[1] {
			t.Errorf("ParsePorts(%q) = %d, %d, %v", in, lo, hi, err)
		}
	}
}

func TestCloseTwice(t *testing.T) {
	s, err := Start(Config{Port: "0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// The port is free again.
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(portOfURL(t, s))))
	if err != nil {
		t.Fatalf("port still held after Close: %v", err)
	}
	ln.Close()
}
