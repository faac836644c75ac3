package keyed

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/weirstream/weir/internal/changelog"
	"github.com/weirstream/weir/internal/checkpoint/metadata"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/metrics"
)

// ChangelogFigures are the changelog backend's figures, summed over a run's
// subtasks, named after Flink's metrics. weir.ChangelogMetrics is the same
// struct, converted from this one: keep the two in step.
type ChangelogFigures struct {
	// Materializations: numberOfStartedMaterialization,
	// numberOfCompletedMaterialization, numberOfFailedMaterialization, and
	// lastDurationOfMaterialization (the latest one of any subtask).
	StartedMaterializations, CompletedMaterializations, FailedMaterializations int64
	LastMaterializationDuration                                                time.Duration
	// Sizes of the latest checkpoint's parts, summed over subtasks:
	// lastFullSizeOfMaterializedState / lastIncSizeOfMaterializedState and
	// lastFullSizeOfNonMaterializedState / lastIncSizeOfNonMaterializedState.
	LastFullSizeMaterialized, LastIncSizeMaterialized       int64
	LastFullSizeNonMaterialized, LastIncSizeNonMaterialized int64
	// Log uploads (DSTL): numberOfUploadRequests, numberOfUploadFailures,
	// the bytes uploaded, and the mean and largest upload latency.
	Uploads, UploadFailures, UploadedBytes int64
	UploadLatencyMean, UploadLatencyMax    time.Duration
}

// Metrics collects the ChangelogFigures of one run: the keyed runtimes of
// its subtasks add to it from their goroutines, the runner's completion
// hook (CheckpointCompleted) and status reports read it. Its counters are
// safe for concurrent use.
type Metrics struct {
	started, completed, failed, lastDuration         atomic.Int64
	uploads, uploadFailures, uploadBytes, latencySum atomic.Int64
	latencyMax                                       atomic.Int64
	// sizes are those of the latest completed checkpoint.
	sizes atomic.Pointer[checkpointSizes]

	mu   sync.Mutex
	prev map[string]bool // the files of the previous completed checkpoint
}

// checkpointSizes are a checkpoint's materialized and non-materialized
// parts, full and new since the previous completed checkpoint.
type checkpointSizes struct {
	fullMat, incMat, fullNonMat, incNonMat int64
}

// CheckpointCompleted measures the changelog parts of a completed
// checkpoint against the files of the previous one.
func (m *Metrics) CheckpointCompleted(cp *metadata.Checkpoint) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var s checkpointSizes
	seen := map[string]bool{}
	for _, op := range cp.Operators {
		for _, st := range op.Subtasks {
			if st.Changelog == nil {
				continue
			}
			var segs []storage.FileHandle
			for _, g := range st.Changelog.AllSegments() {
				segs = append(segs, g.File)
			}
			mat := st.SnapshotFiles()
			for _, part := range []struct {
				files     []storage.FileHandle
				full, inc *int64
			}{{mat, &s.fullMat, &s.incMat}, {segs, &s.fullNonMat, &s.incNonMat}} {
				for _, h := range part.files {
					*part.full += h.Size
					if !m.prev[h.Path] {
						*part.inc += h.Size
					}
					seen[h.Path] = true
				}
			}
		}
	}
	m.prev = seen
	m.sizes.Store(&s)
}

// Figures returns the figures so far; a nil Metrics has none.
func (m *Metrics) Figures() ChangelogFigures {
	if m == nil {
		return ChangelogFigures{}
	}
	out := ChangelogFigures{
		StartedMaterializations: m.started.Load(), CompletedMaterializations: m.completed.Load(),
		FailedMaterializations: m.failed.Load(), LastMaterializationDuration: time.Duration(m.lastDuration.Load()),
		Uploads: m.uploads.Load(), UploadFailures: m.uploadFailures.Load(), UploadedBytes: m.uploadBytes.Load(),
		UploadLatencyMax: time.Duration(m.latencyMax.Load()),
	}
	if z := m.sizes.Load(); z != nil {
		out.LastFullSizeMaterialized, out.LastIncSizeMaterialized = z.fullMat, z.incMat
		out.LastFullSizeNonMaterialized, out.LastIncSizeNonMaterialized = z.fullNonMat, z.incNonMat
	}
	if out.Uploads > 0 {
		out.UploadLatencyMean = time.Duration(m.latencySum.Load() / out.Uploads)
	}
	return out
}

// addWriter adds the difference between two readings of a log writer's
// stats.
func (m *Metrics) addWriter(prev, cur changelog.Stats) {
	m.uploads.Add(cur.Uploads - prev.Uploads)
	m.uploadFailures.Add(cur.FailedAttempts - prev.FailedAttempts)
	m.uploadBytes.Add(cur.BytesUploaded - prev.BytesUploaded)
	m.latencySum.Add(int64(cur.LatencyTotal - prev.LatencyTotal))
	for {
		old := m.latencyMax.Load()
		if int64(cur.LatencyMax) <= old || m.latencyMax.CompareAndSwap(old, int64(cur.LatencyMax)) {
			break
		}
	}
}

// Register registers m's figures in g as gauges under the names Flink's
// changelog backend registers them (a nil m reads as none). They are sums
// over the run's subtasks, so g belongs in the job's task-manager scope
// (metrics.ScopeTaskManagerJob), where Flink keeps its ChangelogStorage
// metrics; Flink keeps the materialization figures per operator.
//
// Flink's histograms ChangelogStorage.uploadSizes, uploadLatenciesNanos,
// attemptsPerUpload, totalAttemptsPerUpload and uploadBatchSizes, and the
// gauge uploadQueueSize, have no counterpart: the log writers keep totals,
// not each upload. What they keep is registered under weir's own names:
// ChangelogStorage.uploadedBytes, uploadLatencyMeanNanos and
// uploadLatencyMaxNanos.
func (m *Metrics) Register(g *metrics.Group) {
	figure := func(f func(ChangelogFigures) float64) func() float64 {
		return func() float64 { return f(m.Figures()) }
	}
	for _, x := range []struct {
		name string
		f    func(ChangelogFigures) float64
	}{
		{"ChangelogStorage.numberOfUploadRequests", func(c ChangelogFigures) float64 { return float64(c.Uploads) }},
		{"ChangelogStorage.numberOfUploadFailures", func(c ChangelogFigures) float64 { return float64(c.UploadFailures) }},
		{"ChangelogStorage.uploadedBytes", func(c ChangelogFigures) float64 { return float64(c.UploadedBytes) }},
		{"ChangelogStorage.uploadLatencyMeanNanos", func(c ChangelogFigures) float64 { return float64(c.UploadLatencyMean) }},
		{"ChangelogStorage.uploadLatencyMaxNanos", func(c ChangelogFigures) float64 { return float64(c.UploadLatencyMax) }},
		{"ChangelogMaterialization.startedMaterialization", func(c ChangelogFigures) float64 { return float64(c.StartedMaterializations) }},
		{"ChangelogMaterialization.completedMaterialization", func(c ChangelogFigures) float64 { return float64(c.CompletedMaterializations) }},
		{"ChangelogMaterialization.failedMaterialization", func(c ChangelogFigures) float64 { return float64(c.FailedMaterializations) }},
		{"ChangelogMaterialization.lastDurationOfMaterialization", func(c ChangelogFigures) float64 {
			if c.CompletedMaterializations == 0 {
				return -1 // Flink's value before the first
			}
			return float64(c.LastMaterializationDuration.Milliseconds())
		}},
		{"ChangelogStateBackend.lastFullSizeOfMaterialization", func(c ChangelogFigures) float64 { return float64(c.LastFullSizeMaterialized) }},
		{"ChangelogStateBackend.lastIncSizeOfMaterialization", func(c ChangelogFigures) float64 { return float64(c.LastIncSizeMaterialized) }},
		{"ChangelogStateBackend.lastFullSizeOfNonMaterialization", func(c ChangelogFigures) float64 { return float64(c.LastFullSizeNonMaterialized) }},
		{"ChangelogStateBackend.lastIncSizeOfNonMaterialization", func(c ChangelogFigures) float64 { return float64(c.LastIncSizeNonMaterialized) }},
	} {
		g.Gauge(x.name, figure(x.f))
	}
}
