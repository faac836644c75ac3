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
	localID   string // the job id of a local discovery file (a run without checkpoints)
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
		Doctor: doctor.Handle})
	if err != nil {
		return nil, portError("rest.port", o.Port, err)
	}
	srv.AddJob(m)
	rs := &restServer{srv: srv, log: log}
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
	// A run with checkpoints holds the job's lock and writes
	// <dir>/<job>/_rest through it; a run without writes a file of its own
	// in the user's runtime directory (rest.LocalDiscoveryDir), so that it
	// neither touches a directory another run may hold nor leaves
	// directories behind.
	d := rest.Discovery{URL: srv.URL(), JobID: m.ID, JobName: m.Name, PID: os.Getpid(), StartTime: m.Now().UnixMilli()}
	if store != nil {
		if err := rest.WriteDiscovery(ctx, store, jobDir, d); err != nil {
			log.Warn("could not write the REST discovery file; find the job with --url", "err", err)
		} else {
			rs.store, rs.jobDir = store, jobDir
		}
	} else if path, err := rest.WriteLocalDiscovery(d); err != nil {
		log.Warn("could not write the REST discovery file; find the job with --url", "err", err)
	} else {
		rs.localID = m.ID
		log.Debug("REST discovery file written", "path", path)
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
		if err := rest.RemoveDiscovery(context.Background(), rs.store, rs.jobDir); err != nil {
			rs.log.Warn("could not remove the REST discovery file", "err", err)
		}
	}
	if rs.localID != "" {
		if err := rest.RemoveLocalDiscovery(rs.localID); err != nil {
			rs.log.Warn("could not remove the REST discovery file", "err", err)
		}
	}
	if rs.prom != nil {
		rs.prom.Close()
	}
	rs.srv.Close()
}
