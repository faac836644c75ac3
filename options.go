package weir

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/internal/keygroup"
	"github.com/weirstream/weir/internal/network"
	"github.com/weirstream/weir/internal/rest"
	"github.com/weirstream/weir/internal/runner"
	"github.com/weirstream/weir/internal/task"
)

// Options configures an Environment. The zero value is valid: every field
// documents its default. Each field has a Flink-style configuration key,
// applied by OptionsFromConfig.
type Options struct {
	// Parallelism is the number of subtasks of operators that do not set
	// their own. Default 1 (parallelism.default).
	Parallelism int
	// MaxParallelism is the number of key groups of operators that do not set
	// their own. Default 0: derived from each operator's parallelism p as
	// min(max(roundUpPow2(p + p/2), 128), 32768) (pipeline.max-parallelism).
	MaxParallelism int
	// DisableChaining turns operator chaining off, so every operator runs in
	// its own task. Default false (pipeline.operator-chaining.enabled).
	DisableChaining bool
	// BufferSize is the size of a network buffer in bytes. Default 32 KiB
	// (taskmanager.memory.segment-size).
	BufferSize int
	// MinBufferSize is the smallest size buffer debloating gives a network
	// buffer, in bytes; at most BufferSize. Default 256
	// (taskmanager.memory.min-segment-size).
	MinBufferSize int
	// BufferDebloat sizes network buffers to the throughput of their
	// consumers; see BufferDebloatOptions. Default off.
	BufferDebloat BufferDebloatOptions
	// BuffersPerChannel is the exclusive credit of each input channel.
	// Default 2 (taskmanager.network.memory.buffers-per-channel).
	BuffersPerChannel int
	// FloatingBuffersPerGate is the credit an input gate lends to channels
	// with a backlog. Default 8; negative means none
	// (taskmanager.network.memory.floating-buffers-per-gate).
	FloatingBuffersPerGate int
	// OverdraftBuffers is how many buffers beyond its pool an output may
	// lend a task in the middle of a record or source batch, so that the
	// record (a large one, a flatMap fan-out) finishes and a barrier behind
	// it is not held up by backpressure. Default 5; negative means none
	// (taskmanager.network.memory.max-overdraft-buffers-per-gate).
	OverdraftBuffers int
	// BufferTimeout is how long a partially filled network buffer may wait
	// before it is sent; a task also sends them whenever it runs out of
	// input. Default 100ms; negative means only when full or idle
	// (execution.buffer-timeout.interval).
	BufferTimeout time.Duration
	// StateBackend stores keyed state: BackendHashMap (Go maps in memory) or
	// BackendPebble (a Pebble database per subtask on local disk). Default
	// hashmap (state.backend.type).
	StateBackend string
	// StateDir is the local working directory under which the Pebble backend
	// keeps one database per operator subtask, deleted when the job ends.
	// Default "weir-data/state" (state.backend.local-dir).
	StateDir string
	// AutoWatermarkInterval is how often watermark strategies emit
	// watermarks. Default 200ms (pipeline.auto-watermark-interval).
	AutoWatermarkInterval time.Duration
	// Logger receives the job's logs. Default slog.Default().
	Logger *slog.Logger

	// Changelog is the changelog state backend; see ChangelogOptions.
	Changelog ChangelogOptions

	// Checkpointing and recovery; see CheckpointOptions.
	Checkpoint CheckpointOptions
	// Restart is the restart strategy; see RestartOptions.
	Restart RestartOptions
	// JobLock is the lock that keeps a second run off the job's checkpoint
	// directory; see JobLockOptions.
	JobLock JobLockOptions

	// REST is the REST API, Prometheus endpoint and dashboard server of
	// the running job; see RESTOptions. Default off for a program that
	// builds Options itself; on in `weir run` (rest.enabled).
	REST RESTOptions

	// OnStatus, if set, is called every StatusInterval (default 5s) while
	// the job runs, with its progress and every subtask's metrics
	// (JobStatus.Tasks); `weir run` prints it as a status line on a
	// terminal. Setting it makes sources count their records, which costs
	// a little per record.
	OnStatus       func(JobStatus)
	StatusInterval time.Duration
	// OnCheckpointComplete, if set, is called for every completed
	// checkpoint, from the job's coordinator goroutine: return quickly.
	OnCheckpointComplete func(CompletedCheckpoint)

	// configKeys are the keys set explicitly in the configuration the
	// options came from (OptionsFromConfig), shown by the REST API.
	configKeys map[string]string
}

// RESTOptions configures the HTTP server a running job serves: Flink's
// REST API, the Prometheus endpoint /metrics and the web dashboard (see
// docs/rest.md). The server starts with the job and stops when it ends.
type RESTOptions struct {
	// Enabled starts the server (rest.enabled).
	Enabled bool
	// BindAddress is the address to listen on. Default 127.0.0.1
	// (rest.bind-address). Any other address requires AuthToken.
	BindAddress string
	// Port is a port, a range such as "50100-50200" (the first free port
	// is taken) or "0" for any free port. Default "8081" (rest.port,
	// rest.bind-port); when the default is taken, a free port is used and
	// the job warns.
	Port string
	// AuthToken, if set, is the bearer token every request must carry
	// (rest.auth.token).
	AuthToken string
	// CertFile and KeyFile, both set, serve the API over TLS
	// (rest.ssl.cert, rest.ssl.key).
	CertFile, KeyFile string
	// PrometheusPort, if set, also serves /metrics on this port or range
	// (metrics.reporter.prom.port).
	PrometheusPort string
	// HistorySize is how many recent checkpoints the API shows in detail.
	// Default 10 (web.checkpoints.history).
	HistorySize int
	// OnStart, if set, is called with the server's base URL once it
	// listens (before the job's tasks start).
	OnStart func(url string)

	portDefaulted bool // Port was not set: a taken default falls back to a free port
	sslIncomplete bool // rest.ssl.enabled without a certificate or key
}

// DefaultRESTPort is Flink's REST port.
const DefaultRESTPort = "8081"

func (r *RESTOptions) ensureDefaults() {
	// "[::1]" is how people write an IPv6 address next to a port.
	r.BindAddress = strings.TrimSuffix(strings.TrimPrefix(r.BindAddress, "["), "]")
	if r.BindAddress == "" {
		r.BindAddress = "127.0.0.1"
	}
	if r.Port == "" {
		r.Port, r.portDefaulted = DefaultRESTPort, true
	}
	if r.HistorySize == 0 {
		r.HistorySize = 10
	}
}

func (r *RESTOptions) validate() []error {
	if !r.Enabled {
		return nil
	}
	var errs []error
	if _, _, err := rest.ParsePorts(r.Port); err != nil {
		errs = append(errs, fmt.Errorf("rest.port/rest.bind-port: %w", err))
	}
	if r.PrometheusPort != "" {
		if _, _, err := rest.ParsePorts(r.PrometheusPort); err != nil {
			errs = append(errs, fmt.Errorf("metrics.reporter.prom.port: %w", err))
		}
	}
	if r.sslIncomplete || (r.CertFile == "") != (r.KeyFile == "") {
		errs = append(errs, errors.New("rest.ssl.enabled needs both rest.ssl.cert and rest.ssl.key (PEM files)"))
	}
	if !rest.IsLoopback(r.BindAddress) && r.AuthToken == "" {
		errs = append(errs, fmt.Errorf("rest.bind-address %q is not a loopback address: set rest.auth.token so that only "+
			"clients with the token can control the job (or bind to 127.0.0.1)", r.BindAddress))
	}
	if r.HistorySize < 1 {
		errs = append(errs, fmt.Errorf("web.checkpoints.history %d must be at least 1", r.HistorySize))
	}
	return errs
}

// EnsureDefaults fills zero fields with their defaults.
func (o *Options) EnsureDefaults() {
	if o.Parallelism == 0 {
		o.Parallelism = 1
	}
	if o.BufferSize == 0 {
		o.BufferSize = task.DefaultSegmentSize
	}
	if o.MinBufferSize == 0 {
		o.MinBufferSize = network.DefaultMinBufferSize
	}
	o.BufferDebloat.ensureDefaults()
	if o.BuffersPerChannel == 0 {
		o.BuffersPerChannel = task.DefaultBuffersPerChannel
	}
	if o.FloatingBuffersPerGate == 0 {
		o.FloatingBuffersPerGate = task.DefaultFloatingPerGate
	}
	if o.OverdraftBuffers == 0 {
		o.OverdraftBuffers = task.DefaultOverdraftBuffers
	}
	if o.BufferTimeout == 0 {
		o.BufferTimeout = task.DefaultBufferTimeout
	}
	if o.StateBackend == "" {
		o.StateBackend = BackendHashMap
	}
	if o.StateDir == "" {
		o.StateDir = filepath.Join("weir-data", "state")
	}
	if o.AutoWatermarkInterval == 0 {
		o.AutoWatermarkInterval = 200 * time.Millisecond
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	o.Checkpoint.ensureDefaults()
	o.Changelog.ensureDefaults()
	o.REST.ensureDefaults()
	if o.JobLock.RenewInterval == 0 {
		o.JobLock.RenewInterval = runner.DefaultRenewInterval
		if o.JobLock.LeaseDuration > 0 {
			o.JobLock.RenewInterval = min(runner.DefaultRenewInterval, o.JobLock.LeaseDuration/3)
		}
	}
	if o.JobLock.LeaseDuration == 0 {
		o.JobLock.LeaseDuration = runner.DefaultLeaseDuration
	}
}

// Validate reports every invalid field at once.
func (o *Options) Validate() error {
	var errs []error
	if o.Parallelism < 1 || o.Parallelism > keygroup.UpperBoundMaxParallelism {
		errs = append(errs, fmt.Errorf("parallelism %d must be between 1 and %d", o.Parallelism, keygroup.UpperBoundMaxParallelism))
	}
	if o.MaxParallelism != 0 {
		if err := keygroup.Validate(o.Parallelism, o.MaxParallelism); err != nil {
			errs = append(errs, err)
		}
	}
	if o.BufferSize < 256 {
		errs = append(errs, fmt.Errorf("buffer size %d must be at least 256 bytes", o.BufferSize))
	}
	if o.BuffersPerChannel < 1 {
		errs = append(errs, fmt.Errorf("buffers per channel %d must be at least 1", o.BuffersPerChannel))
	}
	if o.MinBufferSize < 1 || o.MinBufferSize > o.BufferSize {
		errs = append(errs, fmt.Errorf("minimum buffer size %d must be between 1 and the buffer size %d", o.MinBufferSize, o.BufferSize))
	}
	errs = append(errs, o.BufferDebloat.validate()...)
	if o.StateBackend != BackendHashMap && o.StateBackend != BackendPebble {
		errs = append(errs, fmt.Errorf("state backend %q must be %s or %s", o.StateBackend, BackendHashMap, BackendPebble))
	}
	if o.AutoWatermarkInterval < 0 {
		errs = append(errs, fmt.Errorf("auto watermark interval %v must not be negative", o.AutoWatermarkInterval))
	}
	if o.JobLock.LeaseDuration < 0 || o.JobLock.RenewInterval < 0 || o.JobLock.RenewInterval >= o.JobLock.LeaseDuration {
		errs = append(errs, fmt.Errorf("job lock renew interval %v must be positive and shorter than the lease duration %v",
			o.JobLock.RenewInterval, o.JobLock.LeaseDuration))
	}
	errs = append(errs, o.Checkpoint.validate()...)
	errs = append(errs, o.Changelog.validate()...)
	errs = append(errs, o.REST.validate()...)
	if err := o.Restart.config(o.Checkpoint.Interval > 0).Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// OptionsFromConfig returns the options the configuration keys of c set.
func OptionsFromConfig(c *config.Config) Options {
	o := Options{
		Parallelism:            int(c.Int("parallelism.default")),
		DisableChaining:        !c.Bool("pipeline.operator-chaining.enabled"),
		BufferSize:             int(c.MemorySize("taskmanager.memory.segment-size")),
		MinBufferSize:          int(c.MemorySize("taskmanager.memory.min-segment-size")),
		BuffersPerChannel:      int(c.Int("taskmanager.network.memory.buffers-per-channel")),
		FloatingBuffersPerGate: int(c.Int("taskmanager.network.memory.floating-buffers-per-gate")),
		OverdraftBuffers:       int(c.Int("taskmanager.network.memory.max-overdraft-buffers-per-gate")),
		BufferTimeout:          c.Duration("execution.buffer-timeout.interval"),
		StateBackend:           c.String("state.backend.type"),
		StateDir:               c.String("state.backend.local-dir"),
		AutoWatermarkInterval:  c.Duration("pipeline.auto-watermark-interval"),
	}
	o.Checkpoint = CheckpointOptions{
		Interval:                       c.Duration("execution.checkpointing.interval"),
		Dir:                            c.String("execution.checkpointing.dir"),
		Incremental:                    c.Bool("execution.checkpointing.incremental"),
		Mode:                           c.String("execution.checkpointing.mode"),
		Timeout:                        c.Duration("execution.checkpointing.timeout"),
		MinPause:                       c.Duration("execution.checkpointing.min-pause"),
		MaxConcurrent:                  int(c.Int("execution.checkpointing.max-concurrent-checkpoints")),
		TolerableFailures:              int(c.Int("execution.checkpointing.tolerable-failed-checkpoints")),
		NumRetained:                    int(c.Int("execution.checkpointing.num-retained")),
		Retention:                      c.String("execution.checkpointing.externalized-checkpoint-retention"),
		RestorePath:                    c.String("execution.state-recovery.path"),
		ClaimMode:                      c.String("execution.state-recovery.claim-mode"),
		AllowNonRestoredState:          c.Bool("execution.state-recovery.ignore-unclaimed-state"),
		SavepointDir:                   c.String("execution.checkpointing.savepoint-dir"),
		Unaligned:                      c.Bool("execution.checkpointing.unaligned.enabled"),
		AlignedCheckpointTimeout:       c.Duration("execution.checkpointing.aligned-checkpoint-timeout"),
		MaxSubtasksPerChannelStateFile: int(c.Int("execution.checkpointing.unaligned.max-subtasks-per-channel-state-file")),
		RecoverWithoutChannelState:     c.Int("execution.state-recovery.without-channel-state.checkpoint-id"),
		LocalBackup:                    c.Bool("execution.checkpointing.local-backup.enabled"),
		RecoverFromLocal:               c.Bool("execution.state-recovery.from-local"),
		LocalBackupDirs:                splitDirs(c.String("execution.checkpointing.local-backup.dirs")),
	}
	o.BufferDebloat = BufferDebloatOptions{
		Enabled:              c.Bool("taskmanager.network.memory.buffer-debloat.enabled"),
		Target:               c.Duration("taskmanager.network.memory.buffer-debloat.target"),
		Period:               c.Duration("taskmanager.network.memory.buffer-debloat.period"),
		Samples:              int(c.Int("taskmanager.network.memory.buffer-debloat.samples")),
		ThresholdPercentages: int(c.Int("taskmanager.network.memory.buffer-debloat.threshold-percentages")),
	}
	if o.BufferDebloat.ThresholdPercentages == 0 { // the key says 0; the Go field's zero means the default
		o.BufferDebloat.ThresholdPercentages = -1
	}
	o.JobLock = JobLockOptions{
		LeaseDuration: c.Duration("execution.checkpointing.lock.lease-duration"),
		RenewInterval: c.Duration("execution.checkpointing.lock.renew-interval"),
	}
	o.Changelog = changelogFromConfig(c)
	o.configKeys = c.Explicit()
	o.REST = RESTOptions{
		Enabled:        c.Bool("rest.enabled"),
		BindAddress:    c.String("rest.bind-address"),
		Port:           c.String("rest.bind-port"),
		AuthToken:      c.String("rest.auth.token"),
		PrometheusPort: c.String("metrics.reporter.prom.port"),
		HistorySize:    int(c.Int("web.checkpoints.history")),
	}
	if o.REST.Port == "" {
		o.REST.Port = strconv.FormatInt(c.Int("rest.port"), 10)
		o.REST.portDefaulted = !c.IsSet("rest.port")
	}
	if c.Bool("rest.ssl.enabled") {
		o.REST.CertFile, o.REST.KeyFile = c.String("rest.ssl.cert"), c.String("rest.ssl.key")
		if o.REST.CertFile == "" || o.REST.KeyFile == "" {
			o.REST.sslIncomplete = true
		}
	}
	o.Restart = RestartOptions{
		Type:                   c.String("restart-strategy.type"),
		FixedDelayAttempts:     int(c.Int("restart-strategy.fixed-delay.attempts")),
		FixedDelay:             c.Duration("restart-strategy.fixed-delay.delay"),
		MaxFailuresPerInterval: int(c.Int("restart-strategy.failure-rate.max-failures-per-interval")),
		FailureRateInterval:    c.Duration("restart-strategy.failure-rate.failure-rate-interval"),
		FailureRateDelay:       c.Duration("restart-strategy.failure-rate.delay"),
		InitialBackoff:         c.Duration("restart-strategy.exponential-delay.initial-backoff"),
		MaxBackoff:             c.Duration("restart-strategy.exponential-delay.max-backoff"),
		ResetBackoffThreshold:  c.Duration("restart-strategy.exponential-delay.reset-backoff-threshold"),
		BackoffMultiplier:      c.Float("restart-strategy.exponential-delay.backoff-multiplier"),
		JitterFactor:           c.Float("restart-strategy.exponential-delay.jitter-factor"),
	}
	if o.Restart.JitterFactor == 0 { // the key says no jitter; the Go field's zero means the default
		o.Restart.JitterFactor = -1
	}
	if mp := c.Int("pipeline.max-parallelism"); mp > 0 {
		o.MaxParallelism = int(mp)
	}
	if o.FloatingBuffersPerGate == 0 {
		o.FloatingBuffersPerGate = -1
	}
	if o.OverdraftBuffers == 0 {
		o.OverdraftBuffers = -1
	}
	if o.BufferTimeout == 0 { // Flink's 0: flush after every record; weir flushes per batch
		o.BufferTimeout = time.Nanosecond
	}
	return o
}

// BufferDebloatOptions configure buffer debloating (Apache Flink's
// FLIP-183, taskmanager.network.memory.buffer-debloat.*). Every subtask
// that reads from the network measures the throughput of its input, the
// bytes it consumes per second while it is not idle, and every Period has
// its senders cut their buffers at the size that makes the data its input
// can hold (its credit: exclusive buffers of every channel plus floating
// ones) take about Target to process, between MinBufferSize and
// BufferSize, instead of filling whole BufferSize buffers. Under
// backpressure a checkpoint barrier then queues behind about Target's worth
// of data per exchange instead of full buffers: aligned checkpoints stop
// depending on the buffer size. See docs/checkpointing.md.
type BufferDebloatOptions struct {
	// Enabled turns debloating on. Default false
	// (taskmanager.network.memory.buffer-debloat.enabled).
	Enabled bool
	// Target is how long a subtask should take to process the data its
	// input gate can hold. Default 1s
	// (taskmanager.network.memory.buffer-debloat.target).
	Target time.Duration
	// Period is how often the buffer size is recalculated. Default 200ms
	// (taskmanager.network.memory.buffer-debloat.period).
	Period time.Duration
	// Samples is the number of periods the size is averaged over (an
	// exponential moving average): more reacts more slowly. Default 20
	// (taskmanager.network.memory.buffer-debloat.samples).
	Samples int
	// ThresholdPercentages: a new size is announced to the senders only
	// if it differs from the last one by more than this percentage (or
	// reaches MinBufferSize or BufferSize), to avoid constant small
	// adjustments. Default 25; negative means 0, every change
	// (taskmanager.network.memory.buffer-debloat.threshold-percentages).
	ThresholdPercentages int
}

func (o *BufferDebloatOptions) ensureDefaults() {
	if o.Target == 0 {
		o.Target = network.DefaultDebloatTarget
	}
	if o.Period == 0 {
		o.Period = network.DefaultDebloatPeriod
	}
	if o.Samples == 0 {
		o.Samples = network.DefaultDebloatSamples
	}
	if o.ThresholdPercentages == 0 {
		o.ThresholdPercentages = network.DefaultDebloatThreshold
	}
}

func (o *BufferDebloatOptions) validate() []error {
	var errs []error
	if o.Target <= 0 || o.Period <= 0 {
		errs = append(errs, fmt.Errorf("buffer debloat target %v and period %v must be positive", o.Target, o.Period))
	}
	if o.Samples < 1 {
		errs = append(errs, fmt.Errorf("buffer debloat samples %d must be at least 1", o.Samples))
	}
	return errs
}

// debloat returns the task runtime's debloating configuration, nil when it
// is off.
func (o *Options) debloat() *network.DebloatConfig {
	d := o.BufferDebloat
	if !d.Enabled {
		return nil
	}
	return &network.DebloatConfig{Target: d.Target, Period: d.Period, Samples: d.Samples,
		ThresholdPercentages: d.ThresholdPercentages, MinSize: o.MinBufferSize}
}

// JobLockOptions configure the lock a job with checkpointing takes on its
// checkpoint directory (<Checkpoint.Dir>/<job>/) for the whole run, so that
// a second run of the job against the same directory is refused instead of
// deleting the first one's checkpoint in progress. On a local directory it
// is a file lock the operating system drops when the process dies, so a
// resume after kill -9 starts at once; on object stores (s3://, mem://, ...)
// it is a lease renewed in the background, which another run takes over
// only after it expired. See docs/checkpointing.md.
type JobLockOptions struct {
	// Force takes the lock over at once, even from a live holder, which
	// stops writing within its RenewInterval. Dangerous: until then both
	// runs write into the directory. Use it only when you know the holder
	// is dead (`weir run --force`).
	Force bool
	// LeaseDuration is how long a lease on an object store lasts unless
	// renewed: how long a run waits after its predecessor died without
	// releasing it. Default 30s (execution.checkpointing.lock.lease-duration).
	LeaseDuration time.Duration
	// RenewInterval is how often the holder renews its lease (and checks
	// that a local lock was not taken over with Force); shorter than
	// LeaseDuration. Default 10s, or a third of a LeaseDuration set below
	// 30s (execution.checkpointing.lock.renew-interval).
	RenewInterval time.Duration
}

// ErrJobLocked is wrapped by Execute's error when another run holds the
// job's checkpoint directory; the message names it (pid, host, since when).
// Nothing has started then.
var ErrJobLocked = runner.ErrJobLocked

// ErrJobLockLost is wrapped by Execute's error when the job stopped because
// it lost the lock of its checkpoint directory: another run took it over
// with Force, or its lease ran out before it could be renewed. The job
// wrote nothing to the directory after it noticed.
var ErrJobLockLost = runner.ErrJobLockLost

// splitDirs splits a list of directories at commas and at the OS path
// list separator (as Flink does), dropping empty entries and spaces
// around each; nil for none.
func splitDirs(s string) []string {
	var dirs []string
	for _, d := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == filepath.ListSeparator }) {
		if d = strings.TrimSpace(d); d != "" {
			dirs = append(dirs, d)
		}
	}
	return dirs
}
