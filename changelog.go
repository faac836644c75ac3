package weir

import (
	"fmt"
	"time"

	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/internal/keyed"
)

// ChangelogOptions configure the changelog state backend (Flink's FLIP-158,
// state.changelog.*): every keyed-state change is written both to the state
// backend and, as an operation, to a durable short-term log on the
// checkpoint storage that uploads continuously; the backend is materialized
// (snapshotted) periodically in the background, and a checkpoint is the last
// materialization plus the log after it, so that it only uploads the log's
// short tail. See docs/changelog.md.
type ChangelogOptions struct {
	// Enabled turns the changelog on (state.changelog.enabled, default
	// false). It needs checkpointing; without it there is nothing to log to.
	Enabled bool
	// MaterializeInterval is how often the backend is materialized
	// (state.changelog.periodic-materialize.interval). Default 10 minutes;
	// negative disables periodic materialization.
	MaterializeInterval time.Duration
	// MaxMaterializationFailures is how many consecutive failed
	// materializations a subtask tolerates before it fails
	// (state.changelog.materialization.max-failures-allowed). Default 3;
	// negative tolerates none (the first failure fails the subtask).
	MaxMaterializationFailures int
	// PersistDelay, PersistSizeThreshold, PreemptivePersistThreshold,
	// UploadTimeout, MaxAttempts and MaxInFlight tune the log's uploads
	// (state.changelog.dstl.dfs.*: batch.persist-delay 10ms,
	// batch.persist-size-threshold 10mb, preemptive-persist-threshold 5mb,
	// upload.timeout 1s, upload.max-attempts 3, upload.max-in-flight 100mb);
	// zero takes the default.
	PersistDelay               time.Duration
	PersistSizeThreshold       int64
	PreemptivePersistThreshold int64
	UploadTimeout              time.Duration
	MaxAttempts                int
	MaxInFlight                int64
}

// Defaults of ChangelogOptions.
const (
	DefaultMaterializeInterval        = 10 * time.Minute
	DefaultMaxMaterializationFailures = 3
)

func (c *ChangelogOptions) ensureDefaults() {
	if c.MaterializeInterval == 0 {
		c.MaterializeInterval = DefaultMaterializeInterval
	}
	if c.MaxMaterializationFailures == 0 {
		c.MaxMaterializationFailures = DefaultMaxMaterializationFailures
	}
}

func (c *ChangelogOptions) validate() []error {
	var errs []error
	for _, v := range []struct {
		name string
		n    int64
	}{{"persist size threshold", c.PersistSizeThreshold}, {"preemptive persist threshold", c.PreemptivePersistThreshold},
		{"upload max in flight", c.MaxInFlight}, {"upload max attempts", int64(c.MaxAttempts)},
		{"persist delay", int64(c.PersistDelay)}, {"upload timeout", int64(c.UploadTimeout)}} {
		if v.n < 0 {
			errs = append(errs, fmt.Errorf("changelog %s %d must not be negative (0 takes the default)", v.name, v.n))
		}
	}
	return errs
}

// keyed is the keyed runtime's form of the options (defaults applied).
func (c ChangelogOptions) keyed() keyed.ChangelogConfig {
	return keyed.ChangelogConfig{Enabled: c.Enabled, MaterializeInterval: c.MaterializeInterval,
		MaxMaterializationFailures: c.MaxMaterializationFailures, PersistDelay: c.PersistDelay,
		PersistSizeThreshold: c.PersistSizeThreshold, PreemptivePersistThreshold: c.PreemptivePersistThreshold,
		UploadTimeout: c.UploadTimeout, MaxAttempts: c.MaxAttempts, MaxInFlight: c.MaxInFlight}
}

func changelogFromConfig(c *config.Config) ChangelogOptions {
	o := ChangelogOptions{
		Enabled:                    c.Bool("state.changelog.enabled"),
		MaterializeInterval:        c.Duration("state.changelog.periodic-materialize.interval"),
		MaxMaterializationFailures: int(c.Int("state.changelog.materialization.max-failures-allowed")),
		PersistDelay:               c.Duration("state.changelog.dstl.dfs.batch.persist-delay"),
		PersistSizeThreshold:       c.MemorySize("state.changelog.dstl.dfs.batch.persist-size-threshold"),
		PreemptivePersistThreshold: c.MemorySize("state.changelog.dstl.dfs.preemptive-persist-threshold"),
		UploadTimeout:              c.Duration("state.changelog.dstl.dfs.upload.timeout"),
		MaxAttempts:                int(c.Int("state.changelog.dstl.dfs.upload.max-attempts")),
		MaxInFlight:                c.MemorySize("state.changelog.dstl.dfs.upload.max-in-flight"),
	}
	if o.MaterializeInterval == 0 { // the key's 0 disables; the field's 0 is the default
		o.MaterializeInterval = -1
	}
	if o.MaxMaterializationFailures == 0 {
		o.MaxMaterializationFailures = -1
	}
	return o
}

// ChangelogMetrics are the changelog backend's figures, summed over the
// job's subtasks since the job (re)started, named after Flink's metrics.
type ChangelogMetrics struct {
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
