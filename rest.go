package weir

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/doctor"
	"github.com/weirstream/weir/internal/metrics/prom"
	"github.com/weirstream/weir/internal/monitor"
	"github.com/weirstream/weir/internal/rest"
	"github.com/weirstream/weir/internal/web"
)

// Version is weir's version: `weir --version` prints it and the REST API
// shows it.
const Version = "0.1.0-dev"

// restServer is the REST API, Prometheus and dashboard server of one run.
type restServer struct {
	srv, prom *rest.Server
	store     *storage.Storage // where the discovery file is, nil if none
	jobDir    string
	file      string // the discovery file's name in jobDir
	closeSt   func()
	log       *slog.Logger
}

// startREST starts the server of a run of the job when REST is enabled
// and writes the discovery file <checkpoint dir>/<job>/_rest. store is
// the run's checkpoint storage (nil without checkpointing: the directory
// is opened for the discovery file alone).
func (e *Environment) startREST(ctx context.Context, m *monitor.Job, store *storage.Storage, jobDir string) (*restServer, error) {
	o := e.opts.REST
	if !o.Enabled {
		return nil, nil
	}
	log := e.opts.Logger.With("job", m.Name)
	monitor.RegisterJobMetrics(m)
	metricsHandler := prom.Handler(m.Metrics)
	srv, err := rest.Start(rest.Config{BindAddress: o.BindAddress, Port: o.Port, FallbackToFreePort: o.portDefaulted,
		AuthToken: o.AuthToken, CertFile: o.CertFile, KeyFile: o.KeyFile, Logger: log, Version: Version,
		Metrics: metricsHandler, Dashboard: web.Handler(),
		Doctor: func(j *monitor.Job) any { return doctor.Handle(j, 0) }})
	if err != nil {
		return nil, portError("rest.port", o.Port, err)
	}
	srv.AddJob(m)
	rs := &restServer{srv: srv, log: log, closeSt: func() {}}
	if o.PrometheusPort != "" {
		rs.prom, err = rest.Start(rest.Config{BindAddress: o.BindAddress, Port: o.PrometheusPort, AuthToken: o.AuthToken,
			CertFile: o.CertFile, KeyFile: o.KeyFile, Logger: log, Version: Version, Metrics: metricsHandler})
		if err != nil {
			srv.Close()
			return nil, portError("metrics.reporter.prom.port", o.PrometheusPort, err)
		}
		log.Info("Prometheus endpoint listening", "url", rs.prom.URL()+"/metrics")
	}
	log.Info("REST API and dashboard listening", "url", srv.URL(), "jobid", m.ID)
	if o.OnStart != nil {
		o.OnStart(srv.URL())
	}
	// A run with checkpoints holds the job's lock and writes _rest through
	// the locked storage; a run without opens the directory for its own
	// _rest-<jobid> (runs of the same job may share it).
	locked := store != nil
	if !locked {
		dir := e.opts.Checkpoint.Dir
		if st, err := storage.Open(ctx, dir); err == nil {
			store, rs.closeSt = st, func() { st.Close() }
		} else {
			log.Warn("no REST discovery file: the checkpoint directory cannot be opened; find the job with --url", "dir", dir, "err", err)
		}
		jobDir, _ = storage.SanitizeJob(m.Name)
	}
	if store != nil {
		rs.file = rest.DiscoveryFile(locked, m.ID)
		d := rest.Discovery{URL: srv.URL(), JobID: m.ID, JobName: m.Name, PID: os.Getpid(), StartTime: m.Now().UnixMilli()}
		if err := rest.WriteDiscovery(ctx, store, jobDir, rs.file, d); err != nil {
			log.Warn("could not write the REST discovery file; find the job with --url", "err", err)
		} else {
			rs.store, rs.jobDir = store, jobDir
		}
	}
	return rs, nil
}

// ErrPortInUse is wrapped by Execute's error when the REST server's port
// (rest.port, rest.bind-port) or the Prometheus port
// (metrics.reporter.prom.port) is taken.
var ErrPortInUse = rest.ErrPortInUse

// portError names the key whose port could not be used and the remedy.
func portError(key, port string, err error) error {
	if errors.Is(err, rest.ErrPortInUse) {
		return fmt.Errorf("%s %s: %w; choose a free port, or 0 for any free port", key, port, err)
	}
	return fmt.Errorf("%s %s: %w", key, port, err)
}

// close removes the discovery file and stops the servers.
func (rs *restServer) close() {
	if rs == nil {
		return
	}
	if rs.store != nil {
		if err := rest.RemoveDiscovery(context.Background(), rs.store, rs.jobDir, rs.file); err != nil {
			rs.log.Warn("could not remove the REST discovery file", "err", err)
		}
	}
	rs.closeSt()
	if rs.prom != nil {
		rs.prom.Close()
	}
	rs.srv.Close()
}
