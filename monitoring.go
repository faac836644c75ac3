package weir

import (
	"context"
	"errors"
	"strings"

	"github.com/weirstream/weir/internal/graph"
	"github.com/weirstream/weir/internal/monitor"
)

// ErrCanceled is wrapped by Execute's error when the job was canceled
// through the REST API (PATCH /jobs/{jobid}?mode=cancel, `weir cancel`).
var ErrCanceled = errors.New("the job was canceled")

// newMonitor returns the live view of a run of the job: what the REST
// API, the Prometheus endpoint and the dashboard show.
func (e *Environment) newMonitor(name string, jg *graph.JobGraph, cancel context.CancelCauseFunc) *monitor.Job {
	m := monitor.NewJob(monitor.NewJobID(), name, monitor.Vertices(name, jg), e.clock().Now, e.opts.REST.HistorySize)
	for k, v := range e.opts.configKeys {
		m.Config[k] = v
	}
	co := e.opts.Checkpoint
	mode := "exactly_once"
	if co.Mode == CheckpointingAtLeastOnce {
		mode = "at_least_once"
	}
	unaligned, _ := co.unaligned()
	m.Checkpoint = monitor.CheckpointConfig{Enabled: co.Interval > 0, Mode: mode, Interval: co.Interval,
		Timeout: co.Timeout, MinPause: co.MinPause, MaxConcurrent: co.MaxConcurrent, TolerableFailures: co.TolerableFailures,
		NumRetained: co.NumRetained, Retention: co.Retention, Unaligned: unaligned, AlignedTimeout: co.AlignedCheckpointTimeout,
		StateBackend: e.opts.StateBackend, Incremental: co.Incremental, Changelog: e.opts.Changelog.Enabled,
		ChangelogMaterialization: e.opts.Changelog.MaterializeInterval, Storage: storageKind(co.Dir),
		CheckpointsAfterTasksDone: true}
	m.SetControls(monitor.Controls{
		Cancel:            func() { cancel(ErrCanceled) },
		TriggerCheckpoint: e.TriggerCheckpoint,
		TriggerSavepoint: func(ctx context.Context, req monitor.SavepointRequest) (monitor.SavepointResult, error) {
			r, err := e.savepoint(ctx, SavepointOptions{Dir: req.Target, Format: req.Format, Drain: req.Drain}, req.Stop)
			return monitor.SavepointResult{ID: r.ID, Path: r.Path}, err
		},
	})
	return m
}

// storageKind names the checkpoint storage as Flink's REST API does.
func storageKind(dir string) string {
	switch {
	case strings.HasPrefix(dir, "mem://"):
		return "JobManagerCheckpointStorage"
	default:
		return "FileSystemCheckpointStorage"
	}
}
