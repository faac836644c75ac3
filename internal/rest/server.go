package rest

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/weirstream/weir/internal/monitor"
)

// DefaultPort is Flink's REST port.
const DefaultPort = "8081"

// shutdownGrace is how long Close lets requests in flight finish.
const shutdownGrace = 2 * time.Second

// maxBodyBytes bounds request bodies.
const maxBodyBytes = 1 << 20

// Config configures a Server.
type Config struct {
	// BindAddress is the address to listen on. Default 127.0.0.1. Any
	// address that is not a loopback address requires AuthToken.
	BindAddress string
	// Port is a port ("8081"), "0" for any free port, or a range
	// ("50100-50200") of which the first free port is taken. Default
	// DefaultPort.
	Port string
	// FallbackToFreePort listens on any free port, with a warning, when
	// Port (every port of the range) is taken, instead of failing. Set it
	// when Port is a default rather than the user's choice.
	FallbackToFreePort bool
	// AuthToken, if set, is the bearer token that every request to the
	// API and /metrics must carry (Authorization: Bearer <token>). The
	// dashboard's static files load without it.
	AuthToken string
	// CertFile and KeyFile, both set, are PEM files: the server speaks
	// TLS. Default: plain HTTP.
	CertFile, KeyFile string
	// Logger receives the server's warnings. Default slog.Default().
	Logger *slog.Logger
	// Metrics, if set, serves GET /metrics (the Prometheus endpoint).
	// Default: /metrics answers 404.
	Metrics http.Handler
	// Dashboard, if set, serves the GET requests for paths outside the
	// API (the web dashboard's files), without the token. Default: they
	// answer 404.
	Dashboard http.Handler
	// Doctor, if set, serves GET /jobs/{jobid}/doctor[?last=N]: it gets
	// the job and the number of latest checkpoints to examine (0: as many
	// as the history keeps); its result is encoded as JSON. Default: 404.
	Doctor func(j *monitor.Job, last int) any
	// Version is weir's version, shown as flink-version and weir-version
	// by /config and /overview.
	Version string
	// RefreshInterval is how often the dashboard should poll. Default 3 s.
	RefreshInterval time.Duration

	now func() time.Time // test knob; default time.Now. Jobs' times use their own clock (monitor.Job.Now).
	// savepoints finds what takes a job's savepoints, nil if nothing does
	// (test knob; default jobSavepointer).
	savepoints func(*monitor.Job) savepointer
}

// Server serves the REST API. Its methods are safe for concurrent use.
type Server struct {
	cfg    Config
	url    string
	auth   tokenCheck
	logger *slog.Logger
	http   *http.Server
	mux    *http.ServeMux

	mu     sync.Mutex
	jobs   []*monitor.Job
	closed bool // no more background work may start

	triggers *triggers
	// ctx is cancelled by Close: it ends the checkpoints and savepoints
	// the API triggered; wg tracks their goroutines.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	serveDone chan struct{}
	closeOnce sync.Once
	closeErr  error
}

// validate reports every problem of c (after defaults).
func (c *Config) validate() error {
	var errs []error
	if _, _, err := ParsePorts(c.Port); err != nil {
		errs = append(errs, err)
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		errs = append(errs, errors.New("TLS needs both a certificate and a key file"))
	}
	if !IsLoopback(c.BindAddress) && c.AuthToken == "" {
		errs = append(errs, fmt.Errorf("bind address %s is not a loopback address: %w so that only clients with "+
			"it can control the job (rest.auth.token), or bind to 127.0.0.1", c.BindAddress, ErrTokenRequired))
	}
	return errors.Join(errs...)
}

// Start checks cfg, listens and serves in the background. Its errors name
// the address and the cause ("listen on 127.0.0.1:8081: port 8081 is in
// use: ..."). Close the Server when done.
func Start(cfg Config) (*Server, error) {
	if cfg.BindAddress == "" {
		cfg.BindAddress = "127.0.0.1"
	}
	if cfg.Port == "" {
		cfg.Port = DefaultPort
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.RefreshInterval <= 0 {
		cfg.RefreshInterval = 3 * time.Second
	}
	if cfg.now == nil {
		cfg.now = time.Now
	}
	if cfg.savepoints == nil {
		cfg.savepoints = jobSavepointer
	}
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("rest: %w", err)
	}
	var tlsConfig *tls.Config
	if cfg.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(cfg.CertFile, cfg.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("rest: TLS certificate %s and key %s: %w", cfg.CertFile, cfg.KeyFile, err)
		}
		tlsConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	ln, err := listen(cfg.BindAddress, cfg.Port, cfg.FallbackToFreePort, cfg.Logger)
	if err != nil {
		return nil, fmt.Errorf("rest: %w", err)
	}
	scheme := "http"
	if tlsConfig != nil {
		ln = tls.NewListener(ln, tlsConfig)
		scheme = "https"
	}
	s := &Server{cfg: cfg, auth: newTokenCheck(cfg.AuthToken), logger: cfg.Logger, mux: http.NewServeMux(),
		triggers: newTriggers(), serveDone: make(chan struct{})}
	s.url = scheme + "://" + net.JoinHostPort(urlHost(cfg.BindAddress), portOf(ln.Addr()))
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.routes()
	s.http = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute,
		ErrorLog: slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelDebug)}
	go func() {
		defer close(s.serveDone)
		if err := s.http.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.logger.Error("REST server stopped", "err", err)
		}
	}()
	return s, nil
}

// urlHost is the host clients use to reach a server bound to host: the
// machine's name for an unspecified address (0.0.0.0, ::).
func urlHost(host string) string {
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		if name, err := os.Hostname(); err == nil && name != "" {
			return name
		}
		return "127.0.0.1"
	}
	return host
}

func portOf(a net.Addr) string {
	_, port, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return port
}

// pid is this process's id, part of the task manager id subtasks show.
var pid = os.Getpid()

// endpoint is the server's host:port.
func (s *Server) endpoint() string {
	_, hostPort, _ := strings.Cut(s.url, "://")
	return hostPort
}

// URL is the server's base URL, such as "http://127.0.0.1:8081" (https
// with TLS), without a trailing slash.
func (s *Server) URL() string { return s.url }

// AddJob shows j. A job added again under the same ID replaces the
// first. Jobs stay listed after they ended.
func (s *Server) AddJob(j *monitor.Job) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, o := range s.jobs {
		if o.ID == j.ID {
			s.jobs[i] = j
			return
		}
	}
	s.jobs = append(s.jobs, j)
}

// jobList returns the jobs, in the order they were added.
func (s *Server) jobList() []*monitor.Job {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.jobs)
}

// Close stops the server: it stops listening, lets the requests in
// flight finish for a short grace period and then cuts them off, cancels
// the checkpoints and savepoints triggered through the API that are still
// running and waits for them (the job's TriggerCheckpoint and
// TriggerSavepoint controls must return once their context is
// cancelled). It returns once everything the server
// started has ended; calling it again returns the first result.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
		err := s.http.Shutdown(ctx)
		cancel()
		if err != nil {
			err = errors.Join(err, s.http.Close())
		}
		<-s.serveDone
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		s.cancel()
		s.wg.Wait()
		if err != nil {
			s.closeErr = fmt.Errorf("rest: close: %w", err)
		}
	})
	return s.closeErr
}

// apiError is an error answer.
type apiError struct {
	status int
	msg    string
}

func (e *apiError) Error() string { return e.msg }

func errorf(status int, format string, args ...any) error {
	return &apiError{status: status, msg: fmt.Sprintf(format, args...)}
}

// withStatus answers body with a status other than 200.
type withStatus struct {
	status int
	body   any
}

// handler is an API handler: it returns the body to encode as JSON (a
// withStatus for a status other than 200) or an error (an *apiError for
// a status other than 500).
type handler func(r *http.Request) (any, error)

// route serves path with a handler per method; other methods answer 405.
func (s *Server) route(path string, methods map[string]handler) {
	allowed := make([]string, 0, len(methods))
	for m := range methods {
		allowed = append(allowed, m)
	}
	sort.Strings(allowed)
	s.mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
		h, ok := methods[r.Method]
		if !ok {
			w.Header().Set("Allow", strings.Join(allowed, ", "))
			writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("Method %s not allowed for %s; allowed: %s",
				r.Method, r.URL.Path, strings.Join(allowed, ", ")))
			return
		}
		body, err := h(r)
		if err != nil {
			var ae *apiError
			if errors.As(err, &ae) {
				writeError(w, ae.status, ae.msg)
				return
			}
			s.logger.Warn("REST request failed", "method", r.Method, "path", r.URL.Path, "err", err)
			writeError(w, http.StatusInternalServerError, "Internal server error: "+err.Error())
			return
		}
		status := http.StatusOK
		if ws, ok := body.(withStatus); ok {
			status, body = ws.status, ws.body
		}
		writeJSON(w, status, body)
	})
}

// contentType is the type of every answer of the API.
const contentType = "application/json; charset=UTF-8"

func writeJSON(w http.ResponseWriter, status int, body any) {
	b, err := json.Marshal(body)
	if err != nil {
		status = http.StatusInternalServerError
		b, _ = json.Marshal(ErrorResponse{Errors: []string{"Internal server error: encode the answer: " + err.Error()}})
	}
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, ErrorResponse{Errors: []string{msg}})
}

// ServeHTTP serves a request: API paths (after an optional /v1 prefix)
// with the token check, other GET requests by the dashboard.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// Without a token the server listens on loopback only; a request
	// naming another host reached it through DNS rebinding (a web page
	// whose name now resolves to 127.0.0.1) and may not control the job.
	if s.cfg.AuthToken == "" && !loopbackHost(r.Host) {
		writeError(w, http.StatusMisdirectedRequest, fmt.Sprintf("Host %q is not a loopback address: without "+
			"rest.auth.token the server answers only requests to localhost, 127.0.0.1 or [::1]", r.Host))
		return
	}
	if rest, ok := strings.CutPrefix(r.URL.Path, "/v1/"); ok {
		r2 := r.Clone(r.Context())
		r2.URL.Path, r2.URL.RawPath = "/"+rest, ""
		r = r2
	}
	// Classify the cleaned path: /x/../jobs is the API's (the mux
	// redirects it), not the dashboard's.
	if isAPIPath(path.Clean("/" + r.URL.Path)) {
		if why := s.auth.check(r); why != "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="weir"`)
			writeError(w, http.StatusUnauthorized, why)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxBodyBytes)
		s.mux.ServeHTTP(w, r)
		return
	}
	if s.cfg.Dashboard != nil && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		s.cfg.Dashboard.ServeHTTP(w, r)
		return
	}
	writeError(w, http.StatusNotFound, "Not found: "+r.URL.Path)
}

// loopbackHost reports whether a Host header names this machine's
// loopback interface (with or without a port).
func loopbackHost(hostport string) bool {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		hostport = h
	}
	return IsLoopback(hostport)
}

// routes registers the API.
func (s *Server) routes() {
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "Not found: "+r.URL.Path)
	})
	get := func(h handler) map[string]handler { return map[string]handler{http.MethodGet: h} }
	s.route("/config", get(s.dashboardConfig))
	s.route("/overview", get(s.overview))
	s.mux.HandleFunc("/metrics", s.prometheus)
	s.route("/jobs", get(s.jobIDs))
	s.route("/jobs/overview", get(s.jobsOverview))
	s.route("/jobs/{jobid}", map[string]handler{http.MethodGet: s.jobDetails, http.MethodPatch: s.cancelJob})
	s.route("/jobs/{jobid}/status", get(s.jobStatus))
	s.route("/jobs/{jobid}/config", get(s.jobConfig))
	s.route("/jobs/{jobid}/exceptions", get(s.jobExceptions))
	s.route("/jobs/{jobid}/doctor", get(s.doctor))
	s.route("/jobs/{jobid}/savepoints", map[string]handler{http.MethodPost: s.triggerSavepoint})
	s.route("/jobs/{jobid}/savepoints/{triggerid}", get(s.savepointTriggerStatus))
	s.route("/jobs/{jobid}/stop", map[string]handler{http.MethodPost: s.stopWithSavepoint})
	s.route("/jobs/{jobid}/checkpoints", map[string]handler{http.MethodGet: s.checkpoints,
		http.MethodPost: s.triggerCheckpoint})
	s.route("/jobs/{jobid}/checkpoints/config", get(s.checkpointConfig))
	s.route("/jobs/{jobid}/checkpoints/{triggerid}", get(s.checkpointTriggerStatus))
	s.route("/jobs/{jobid}/checkpoints/details/{checkpointid}", get(s.checkpointDetails))
	s.route("/jobs/{jobid}/checkpoints/details/{checkpointid}/subtasks/{vertexid}", get(s.checkpointSubtasks))
	s.route("/jobs/{jobid}/metrics", get(s.jobMetrics))
	s.route("/jobs/{jobid}/vertices/{vertexid}", get(s.vertexDetails))
	s.route("/jobs/{jobid}/vertices/{vertexid}/backpressure", get(s.backpressure))
	s.route("/jobs/{jobid}/vertices/{vertexid}/metrics", get(s.vertexMetrics))
	s.route("/jobs/{jobid}/vertices/{vertexid}/subtasks/metrics", get(s.subtasksMetrics))
	s.route("/jobs/{jobid}/vertices/{vertexid}/subtasks/{subtaskindex}/metrics", get(s.subtaskMetrics))
}
