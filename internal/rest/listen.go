package rest

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"syscall"
)

// ErrPortInUse is wrapped by Start's error when the port, or every port
// of the range, is taken.
var ErrPortInUse = errors.New("port is in use")

// ErrTokenRequired is wrapped by Start's error when the server would
// listen on an address other machines reach without an AuthToken.
var ErrTokenRequired = errors.New("an auth token is required")

// ParsePorts parses a port ("8081"), "0" (any free port) or a range
// ("50100-50200"): the forms of rest.port, rest.bind-port and
// metrics.reporter.prom.port.
func ParsePorts(s string) (lo, hi int, err error) {
	a, b, isRange := strings.Cut(strings.TrimSpace(s), "-")
	lo, err = strconv.Atoi(strings.TrimSpace(a))
	hi = lo
	if err == nil && isRange {
		hi, err = strconv.Atoi(strings.TrimSpace(b))
	}
	if err != nil || lo < 0 || hi > 65535 || hi < lo || (isRange && lo == 0) {
		return 0, 0, fmt.Errorf("port %q is not a port (0 to 65535, 0 for any free port) or a range such as 50100-50200", s)
	}
	return lo, hi, nil
}

// IsLoopback reports whether host (a name or an IP address, IPv6 with or
// without brackets) is this machine's loopback interface: a server bound
// there only accepts connections from this machine.
func IsLoopback(host string) bool {
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// inUse reports whether err says the address is taken.
func inUse(err error) bool { return errors.Is(err, syscall.EADDRINUSE) }

// syscallMessage is the innermost cause of a listen error ("bind: address
// already in use") rather than the whole "listen tcp ...: bind: ...".
func syscallMessage(err error) string {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return op.Err.Error()
	}
	return err.Error()
}

// portInUseError is a listen error that errors.Is ErrPortInUse, without
// saying so twice in its message.
type portInUseError struct {
	msg   string
	cause error
}

func (e *portInUseError) Error() string        { return e.msg }
func (e *portInUseError) Is(target error) bool { return target == ErrPortInUse }
func (e *portInUseError) Unwrap() error        { return e.cause }

// listen listens on host and the first free port of ports. When they are
// all taken and fallback is set, it listens on any free port and warns.
func listen(host, ports string, fallback bool, logger *slog.Logger) (net.Listener, error) {
	lo, hi, err := ParsePorts(ports)
	if err != nil {
		return nil, err
	}
	var lastErr error
	for p := lo; p <= hi; p++ {
		addr := net.JoinHostPort(host, strconv.Itoa(p))
		ln, err := net.Listen("tcp", addr)
		if err == nil {
			return ln, nil
		}
		if !inUse(err) {
			return nil, fmt.Errorf("listen on %s: %s", addr, syscallMessage(err))
		}
		lastErr = err
	}
	desc := fmt.Sprintf("port %d is in use", lo)
	if hi > lo {
		desc = fmt.Sprintf("every port of %d-%d is in use", lo, hi)
	}
	if !fallback {
		return nil, &portInUseError{msg: fmt.Sprintf("listen on %s: %s: %s", net.JoinHostPort(host, ports), desc,
			syscallMessage(lastErr)), cause: lastErr}
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %s, and no free port either: %s", net.JoinHostPort(host, ports), desc,
			syscallMessage(err))
	}
	logger.Warn("REST port taken, listening on a free port instead", "wanted", ports, "reason", desc,
		"addr", ln.Addr().String())
	return ln, nil
}
