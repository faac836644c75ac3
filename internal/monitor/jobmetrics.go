package monitor

import (
	"time"

	"github.com/weirstream/weir/internal/checkpoint/stats"
	"github.com/weirstream/weir/internal/metrics"
)

// RegisterJobMetrics registers j's job metrics in j.Metrics, under Flink's
// names, in a group of scope metrics.ScopeJob labelled with the job's id
// and name, and returns the group (the caller removes it from j.Metrics
// when it no longer wants the job shown). Every metric is a gauge read
// when asked, from j.Checkpoints and the job's state:
//
//   - lastCheckpointDuration (ms), lastCheckpointSize (bytes this
//     checkpoint uploaded), lastCheckpointFullSize (bytes it references),
//     lastCheckpointPersistedData (in-flight bytes it persisted),
//     lastCheckpointProcessedData (always 0 once a checkpoint completed:
//     weir does not count the bytes processed during alignment) and
//     lastCompletedCheckpointId, of the newest completed checkpoint (not a
//     savepoint); -1 before the first;
//   - lastCheckpointRestoreTimestamp: when the job last restored, Unix ms;
//     -1 if it never did;
//   - numberOfCompletedCheckpoints, numberOfFailedCheckpoints,
//     numberOfInProgressCheckpoints, totalNumberOfCheckpoints;
//   - uptime: ms since the job last switched to RUNNING while it runs, 0
//     while it is not running yet (or restarts), -1 once it ended;
//     downtime: ms since it started restarting while it restarts, 0
//     otherwise, -1 once it ended;
//   - numRestarts and fullRestarts (Flink's deprecated alias: every weir
//     restart is a full one).
func RegisterJobMetrics(j *Job) *metrics.Group {
	g := j.Metrics.Group(metrics.ScopeJob,
		metrics.Label{Name: metrics.LabelJobID, Value: j.ID},
		metrics.Label{Name: metrics.LabelJobName, Value: j.Name})
	latest := func(f func(c *stats.Checkpoint) int64) func() float64 {
		return func() float64 {
			c, _ := j.Checkpoints.LatestCompleted()
			if c == nil {
				return -1
			}
			return float64(f(c))
		}
	}
	g.Gauge("lastCheckpointDuration", latest(func(c *stats.Checkpoint) int64 { return c.EndToEnd().Milliseconds() }))
	g.Gauge("lastCheckpointSize", latest(func(c *stats.Checkpoint) int64 { return c.CheckpointedSize }))
	g.Gauge("lastCheckpointFullSize", latest(func(c *stats.Checkpoint) int64 { return c.StateSize }))
	g.Gauge("lastCheckpointProcessedData", latest(func(*stats.Checkpoint) int64 { return 0 }))
	g.Gauge("lastCheckpointPersistedData", latest(func(c *stats.Checkpoint) int64 { return c.PersistedData }))
	g.Gauge("lastCompletedCheckpointId", latest(func(c *stats.Checkpoint) int64 { return c.ID }))
	g.Gauge("lastCheckpointRestoreTimestamp", func() float64 {
		_, r := j.Checkpoints.LatestCompleted()
		if r == nil {
			return -1
		}
		return float64(r.Time.UnixMilli())
	})
	count := func(f func(c stats.Counts) int64) func() float64 {
		return func() float64 { return float64(f(j.Checkpoints.Counts())) }
	}
	g.Gauge("numberOfCompletedCheckpoints", count(func(c stats.Counts) int64 { return c.Completed }))
	g.Gauge("numberOfFailedCheckpoints", count(func(c stats.Counts) int64 { return c.Failed }))
	g.Gauge("numberOfInProgressCheckpoints", count(func(c stats.Counts) int64 { return c.InProgress }))
	g.Gauge("totalNumberOfCheckpoints", count(func(c stats.Counts) int64 { return c.Total }))
	g.Gauge("uptime", func() float64 { return j.sinceState(Running) })
	g.Gauge("downtime", func() float64 { return j.sinceState(Restarting) })
	restarts := func() float64 {
		j.mu.Lock()
		defer j.mu.Unlock()
		return float64(j.restarts)
	}
	g.Gauge("numRestarts", restarts)
	g.Gauge("fullRestarts", restarts)
	return g
}

// sinceState returns the milliseconds since the job entered s if it is in
// s now, -1 if it ended, else 0 (Flink's uptime and downtime gauges).
// Unlike Status it does not read the tasks' metrics.
func (j *Job) sinceState(s State) float64 {
	now := j.now()
	j.mu.Lock()
	defer j.mu.Unlock()
	switch {
	case j.state.Terminal():
		return -1
	case j.state == s:
		return float64(max(now.Sub(j.timestamps[s]), 0) / time.Millisecond)
	}
	return 0
}
