package rest

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/weirstream/weir/internal/monitor"
)

// TestMain keeps the discovery files of runs without checkpoints in a
// directory of this test binary: jobs of other processes (or of
// concurrent tests of other packages) stay out of 'weir list'.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "weir-runtime-")
	if err != nil {
		panic(err)
	}
	os.Setenv(EnvRuntimeDir, dir)
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) { os.RemoveAll(dir) }))
}

// logBuffer collects a server's logs.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// start starts a server on 127.0.0.1, any free port unless cfg says
// otherwise, showing jobs; the test closes it.
func start(t *testing.T, cfg Config, jobs ...*monitor.Job) *Server {
	t.Helper()
	if cfg.Port == "" {
		cfg.Port = "0"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.Version == "" {
		cfg.Version = "0.1.0-test"
	}
	s, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	for _, j := range jobs {
		s.AddJob(j)
	}
	return s
}

// answer is a response, read.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// call sends a request to the server at base and reads the answer; it
// checks that every API answer is JSON.
func call(t *testing.T, hc *http.Client, method, base, path, token, body string) answer {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: b}
}

// do is call without a token or body, against s.
func do(t *testing.T, s *Server, method, path string) answer {
	t.Helper()
	return call(t, nil, method, s.URL(), path, "", "")
}

// getOK GETs path, which must answer 200 with JSON, decodes the body into
// a generic value and into typed (if not nil), and returns the generic
// one.
func getOK(t *testing.T, s *Server, path string, typed any) any {
	t.Helper()
	a := do(t, s, http.MethodGet, path)
	if a.status != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, a.status, a.body)
	}
	return decode(t, path, a, typed)
}

func decode(t *testing.T, path string, a answer, typed any) any {
	t.Helper()
	if ct := a.header.Get("Content-Type"); ct != contentType {
		t.Errorf("%s: Content-Type %q, want %q", path, ct, contentType)
	}
	var generic any
	if err := json.Unmarshal(a.body, &generic); err != nil {
		t.Fatalf("%s: %v\n%s", path, err, a.body)
	}
	if typed != nil {
		dec := json.NewDecoder(bytes.NewReader(a.body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(typed); err != nil {
			t.Fatalf("%s: decode into %T: %v\n%s", path, typed, err, a.body)
		}
	}
	return generic
}

// wantError checks an error answer: status, JSON errors body, and a
// message containing every fragment.
func wantError(t *testing.T, a answer, status int, fragments ...string) {
	t.Helper()
	if a.status != status {
		t.Errorf("status %d, want %d: %s", a.status, status, a.body)
	}
	if ct := a.header.Get("Content-Type"); ct != contentType {
		t.Errorf("Content-Type %q, want %q", ct, contentType)
	}
	var e ErrorResponse
	if err := json.Unmarshal(a.body, &e); err != nil || len(e.Errors) != 1 {
		t.Fatalf("not an errors body (%v): %s", err, a.body)
	}
	for _, f := range fragments {
		if !strings.Contains(e.Errors[0], f) {
			t.Errorf("error %q lacks %q", e.Errors[0], f)
		}
	}
}

// obj is v as a JSON object; at walks a path of keys and indexes.
func obj(t *testing.T, v any) map[string]any {
	t.Helper()
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("not an object: %v", v)
	}
	return m
}

func at(t *testing.T, v any, path ...any) any {
	t.Helper()
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				t.Fatalf("at %v: %v is not an object", path, v)
			}
			if v, ok = m[k]; !ok {
				t.Fatalf("at %v: no key %q in %v", path, k, keys(m))
			}
		case int:
			a, ok := v.([]any)
			if !ok || k >= len(a) {
				t.Fatalf("at %v: %v is not an array with index %d", path, v, k)
			}
			v = a[k]
		}
	}
	return v
}

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// fields checks that the object v has every field of spec ("name:kind
// ..."), each of its JSON kind: number, string, bool, object, array, null,
// or alternatives such as object|null.
func fields(t *testing.T, where string, v any, spec string) {
	t.Helper()
	m, ok := v.(map[string]any)
	if !ok {
		t.Errorf("%s: not an object: %v", where, v)
		return
	}
	for _, f := range strings.Fields(spec) {
		name, kinds, _ := strings.Cut(f, ":")
		val, ok := m[name]
		if !ok {
			t.Errorf("%s: no field %q (has %v)", where, name, keys(m))
			continue
		}
		if k := kindOf(val); !strings.Contains("|"+kinds+"|", "|"+k+"|") {
			t.Errorf("%s: field %q is a %s (%v), want %s", where, name, k, val, kinds)
		}
	}
}

// onlyFields checks that the object v has exactly the fields of spec.
func onlyFields(t *testing.T, where string, v any, spec string) {
	t.Helper()
	fields(t, where, v, spec)
	if m, ok := v.(map[string]any); ok && len(m) != len(strings.Fields(spec)) {
		t.Errorf("%s: fields %v, want only %s", where, keys(m), spec)
	}
}

func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case float64:
		return "number"
	case string:
		return "string"
	case bool:
		return "bool"
	case map[string]any:
		return "object"
	case []any:
		return "array"
	}
	return "unknown"
}

// num is v as a number.
func num(t *testing.T, v any) float64 {
	t.Helper()
	f, ok := v.(float64)
	if !ok {
		t.Fatalf("%v is not a number", v)
	}
	return f
}

// eventually polls cond until it holds or 10 s passed.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
