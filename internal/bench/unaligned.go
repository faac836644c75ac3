package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/weirstream/weir"
)

// Modes compared by RunUnaligned.
const (
	// ModeAligned: aligned exactly-once checkpoints (the default).
	ModeAligned = "aligned"
	// ModeUnaligned: unaligned checkpoints
	// (execution.checkpointing.unaligned.enabled).
	ModeUnaligned = "unaligned"
	// ModeAlignedDebloat: aligned checkpoints with buffer debloating
	// (taskmanager.network.memory.buffer-debloat.enabled), target
	// UnalignedConfig.DebloatTarget; the checkpoints start once the
	// debloated buffer sizes settled.
	ModeAlignedDebloat = "aligned-debloat"
	// ModeUnaligned1ms: unaligned checkpoints that start aligned and
	// switch after 1 ms (execution.checkpointing.aligned-checkpoint-timeout).
	ModeUnaligned1ms = "unaligned-1ms"
)

// UnalignedModes are the valid modes of RunUnaligned, in the order a
// default run uses. A new mode (Flink's benchmark also has aligned
// checkpoints with buffer debloating, and unaligned ones after an aligned
// timeout of 1 ms) is one more name here and its option setting in
// setUnalignedMode.
var UnalignedModes = []string{ModeAligned, ModeAlignedDebloat, ModeUnaligned, ModeUnaligned1ms}

// setUnalignedMode sets the options that make mode.
func setUnalignedMode(o *weir.Options, mode string, debloatTarget time.Duration) error {
	switch mode {
	case ModeAligned:
		o.Checkpoint.Unaligned = false
	case ModeUnaligned:
		o.Checkpoint.Unaligned = true
	case ModeAlignedDebloat:
		o.Checkpoint.Unaligned = false
		o.BufferDebloat = weir.BufferDebloatOptions{Enabled: true, Target: debloatTarget}
	case ModeUnaligned1ms:
		o.Checkpoint.Unaligned = true
		o.Checkpoint.AlignedCheckpointTimeout = time.Millisecond
	default:
		return unknownUnalignedMode(mode)
	}
	return nil
}

func unknownUnalignedMode(mode string) error {
	return fmt.Errorf("unknown mode %q: valid modes are %s", mode, strings.Join(UnalignedModes, ", "))
}

// Defaults of UnalignedConfig, those of Flink's CheckpointingTimeBenchmark
// where it has one (parallelism aside: see DefaultUnalignedParallelism).
const (
	// DefaultUnalignedParallelism is 1, not Flink's 4: every sink subtask
	// spins, so each takes a core, and the benchmark machine has 2. With
	// as many spinning subtasks as cores, every other goroutine (barriers,
	// uploads, the coordinator) waits for the Go scheduler's 10 ms time
	// slice, and the benchmark measures that instead of the checkpoint;
	// one spinning sink leaves a core for the rest of the job, as Flink's 4
	// slots on a larger machine do.
	DefaultUnalignedParallelism = 1
	// DefaultUnalignedCheckpoints is the number of checkpoints per mode.
	DefaultUnalignedCheckpoints = 10
	// DefaultUnalignedSpin is the sink's busy wait per record (Flink's
	// SlowDiscardSink: 200 µs).
	DefaultUnalignedSpin = 200 * time.Microsecond
	// DefaultDebloatTarget is Flink's default debloating target
	// (taskmanager.network.memory.buffer-debloat.target).
	DefaultDebloatTarget = time.Second
	// DefaultUnalignedRecordSize is the records' payload (Flink's
	// RecordSource default and UNALIGNED_RECORD_SIZE: 1 KiB).
	DefaultUnalignedRecordSize = 1024
	// DefaultBackpressureTimeout bounds the wait for the sources to be
	// backpressured (Flink's benchmark waits 30 s).
	DefaultBackpressureTimeout = 30 * time.Second
	// DefaultUnalignedCheckpointTimeout bounds each checkpoint.
	DefaultUnalignedCheckpointTimeout = 5 * time.Minute
)

// noPeriodicCheckpoints is the checkpoint interval of the benchmark's
// jobs: checkpointing must be on for TriggerCheckpoint, but the benchmark
// triggers every checkpoint itself (Flink's benchmark sets
// Long.MAX_VALUE).
const noPeriodicCheckpoints = 365 * 24 * time.Hour

// statusInterval is how often the benchmark's jobs report their metrics.
const statusInterval = 100 * time.Millisecond

// UnalignedConfig configures RunUnaligned.
type UnalignedConfig struct {
	// Modes to run, one after the other (UnalignedModes).
	Modes []string
	// Parallelism of every operator.
	Parallelism int
	// Checkpoints triggered per mode.
	Checkpoints int
	// Spin is the sink's busy wait per record.
	Spin time.Duration
	// DebloatTarget is the buffer debloating target of the aligned-debloat
	// mode; 0: DefaultDebloatTarget.
	DebloatTarget time.Duration
	// RecordSize is the size of each record's payload in bytes.
	RecordSize int
	// BufferSize is the network buffer size (Options.BufferSize); 0: the
	// runtime's default (32 KiB).
	BufferSize int
	// BackpressureTimeout bounds each wait for the sources to be
	// backpressured; 0: DefaultBackpressureTimeout.
	BackpressureTimeout time.Duration
	// CheckpointTimeout bounds each checkpoint
	// (CheckpointOptions.Timeout); 0: DefaultUnalignedCheckpointTimeout.
	CheckpointTimeout time.Duration
	// Logger receives the jobs' logs; nil: slog.Default().
	Logger *slog.Logger
}

// Validate reports every invalid field at once.
func (c UnalignedConfig) Validate() error {
	var errs []error
	if len(c.Modes) == 0 {
		errs = append(errs, fmt.Errorf("no mode: valid modes are %s", strings.Join(UnalignedModes, ", ")))
	}
	for _, m := range c.Modes {
		if !slices.Contains(UnalignedModes, m) {
			errs = append(errs, unknownUnalignedMode(m))
		}
	}
	if c.Parallelism < 1 {
		errs = append(errs, fmt.Errorf("parallelism %d must be at least 1", c.Parallelism))
	}
	if c.Checkpoints < 1 {
		errs = append(errs, fmt.Errorf("checkpoints %d must be at least 1", c.Checkpoints))
	}
	if c.DebloatTarget == 0 {
		c.DebloatTarget = DefaultDebloatTarget
	}
	if c.Spin <= 0 {
		errs = append(errs, fmt.Errorf("spin %v must be positive: the sink must be slower than the source", c.Spin))
	}
	if c.RecordSize < 0 {
		errs = append(errs, fmt.Errorf("record size %d must not be negative", c.RecordSize))
	}
	if c.BufferSize != 0 && c.BufferSize < 256 {
		errs = append(errs, fmt.Errorf("buffer size %d must be at least 256 bytes", c.BufferSize))
	}
	if c.BackpressureTimeout < 0 {
		errs = append(errs, fmt.Errorf("backpressure timeout %v must not be negative (0: %v)", c.BackpressureTimeout, DefaultBackpressureTimeout))
	}
	if c.CheckpointTimeout < 0 {
		errs = append(errs, fmt.Errorf("checkpoint timeout %v must not be negative (0: %v)", c.CheckpointTimeout, DefaultUnalignedCheckpointTimeout))
	}
	return errors.Join(errs...)
}

// UnalignedModeResult is the outcome of one mode. Its JSON form is one
// element of `weir bench unaligned --json`'s "modes".
type UnalignedModeResult struct {
	Mode string `json:"mode"`
	// P50Ms and P99Ms are percentiles (nearest rank) of the checkpoints'
	// duration, trigger to durable _metadata (CompletedCheckpoint.Duration).
	P50Ms float64 `json:"p50Ms"`
	P99Ms float64 `json:"p99Ms"`
	// PersistedBytes is the median of the in-flight data the checkpoints
	// persisted (CompletedCheckpoint.PersistedBytes).
	PersistedBytes int64 `json:"persistedBytes"`
	// Checkpoints is the number of checkpoints measured, and
	// UnalignedCheckpoints those at least one subtask took unaligned.
	Checkpoints          int `json:"checkpoints"`
	UnalignedCheckpoints int `json:"unalignedCheckpoints"`

	// MaxMs is the longest checkpoint.
	MaxMs float64 `json:"maxMs"`
	// StartDelayMs, AlignmentMs, SyncMs and AsyncMs are the medians over
	// the checkpoints of each checkpoint's largest start delay (trigger to
	// the first barrier at a subtask), alignment, synchronous and
	// asynchronous phase among its subtasks: where the time goes.
	StartDelayMs float64 `json:"startDelayMs"`
	AlignmentMs  float64 `json:"alignmentMs"`
	SyncMs       float64 `json:"syncMs"`
	AsyncMs      float64 `json:"asyncMs"`
	// CheckpointedBytes is the median of the bytes each checkpoint
	// uploaded, persisted in-flight data included.
	CheckpointedBytes int64 `json:"checkpointedBytes"`
	// BackpressureWaitMs is the time from the job's start until every
	// source subtask was backpressured.
	BackpressureWaitMs float64 `json:"backpressureWaitMs"`
}

// UnalignedResult is the outcome of RunUnaligned; its JSON form is what
// `weir bench unaligned --json` prints.
type UnalignedResult struct {
	Modes []UnalignedModeResult `json:"modes"`
	// AlignedToUnalignedP50 is the aligned mode's p50 over the unaligned
	// mode's, when both ran (0 otherwise).
	AlignedToUnalignedP50 float64 `json:"alignedToUnalignedP50,omitempty"`
}

// Mode returns the result of mode, if it ran.
func (r UnalignedResult) Mode(mode string) (UnalignedModeResult, bool) {
	for _, m := range r.Modes {
		if m.Mode == mode {
			return m, true
		}
	}
	return UnalignedModeResult{}, false
}

// RunUnaligned runs the unaligned checkpoint benchmark once per mode, one
// after the other, modelled on Flink's CheckpointingTimeBenchmark
// (checkpointSingleInput): an unbounded source emitting records of
// RecordSize bytes as fast as it can -> rebalance -> map -> rebalance ->
// a sink that busy-waits Spin per record, every operator at Parallelism.
// Periodic checkpoints are off; once every source subtask is
// backpressured, the benchmark triggers Checkpoints checkpoints one at a
// time, each after the sources are backpressured again, then cancels the
// job. Checkpoints go to a temporary directory (hashmap backend), removed
// afterwards.
func RunUnaligned(ctx context.Context, cfg UnalignedConfig) (UnalignedResult, error) {
	if err := cfg.Validate(); err != nil {
		return UnalignedResult{}, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.BackpressureTimeout == 0 {
		cfg.BackpressureTimeout = DefaultBackpressureTimeout
	}
	if cfg.CheckpointTimeout == 0 {
		cfg.CheckpointTimeout = DefaultUnalignedCheckpointTimeout
	}
	var res UnalignedResult
	for _, mode := range cfg.Modes {
		r, err := runUnalignedMode(ctx, cfg, mode)
		if err != nil {
			return UnalignedResult{}, fmt.Errorf("mode %s: %w", mode, err)
		}
		res.Modes = append(res.Modes, r)
	}
	a, okA := res.Mode(ModeAligned)
	u, okU := res.Mode(ModeUnaligned)
	if okA && okU && u.P50Ms > 0 {
		res.AlignedToUnalignedP50 = a.P50Ms / u.P50Ms
	}
	return res, nil
}

// unalignedSourceName names the source operator; its subtasks' metrics
// are those of the tasks named "<name> (i/p)".
const unalignedSourceName = "Records"

func runUnalignedMode(ctx context.Context, cfg UnalignedConfig, mode string) (UnalignedModeResult, error) {
	dir, err := os.MkdirTemp("", "weir-bench-unaligned-")
	if err != nil {
		return UnalignedModeResult{}, err
	}
	defer os.RemoveAll(dir)

	opts := weir.Options{Parallelism: cfg.Parallelism, Logger: cfg.Logger, BufferSize: cfg.BufferSize,
		StateBackend: weir.BackendHashMap, StateDir: filepath.Join(dir, "state"),
		Checkpoint: weir.CheckpointOptions{Interval: noPeriodicCheckpoints, Dir: "mem://bench-unaligned", // in memory, like Flink's benchmark job (no fsync)
			NumRetained: 1, Timeout: cfg.CheckpointTimeout},
		// A failure ends the run with its error rather than a restart.
		Restart:        weir.RestartOptions{Type: "none"},
		StatusInterval: statusInterval}
	if err := setUnalignedMode(&opts, mode, cfg.DebloatTarget); err != nil {
		return UnalignedModeResult{}, err
	}

	var (
		mu  sync.Mutex
		cps = map[int64]weir.CompletedCheckpoint{}
	)
	opts.OnCheckpointComplete = func(c weir.CompletedCheckpoint) {
		mu.Lock()
		cps[c.ID] = c
		mu.Unlock()
	}
	// The latest status only: OnStatus runs on the job's coordinator
	// goroutine and must not block; it is the only sender.
	status := make(chan []weir.TaskMetrics, 1)
	opts.OnStatus = func(s weir.JobStatus) {
		select {
		case <-status:
		default:
		}
		status <- s.Tasks
	}

	env := weir.NewEnvironment(opts)
	buildUnalignedJob(env, cfg)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var jobErr error
	ended := make(chan struct{})
	start := time.Now()
	go func() {
		jobErr = env.Execute(runCtx, "bench-unaligned-"+mode)
		close(ended)
	}()
	// stop cancels the job and returns its error, if it failed.
	stop := func() error {
		cancel()
		<-ended
		if jobErr != nil && !errors.Is(jobErr, context.Canceled) {
			return fmt.Errorf("the job failed: %w", jobErr)
		}
		return nil
	}

	waitBackpressure := func(what string) error {
		deadline := time.NewTimer(cfg.BackpressureTimeout)
		defer deadline.Stop()
		var last []weir.TaskMetrics
		for {
			select {
			case tasks := <-status:
				last = tasks
				if sourcesBackpressured(tasks) {
					return nil
				}
			case <-ended:
				if jobErr != nil && !errors.Is(jobErr, context.Canceled) {
					return fmt.Errorf("the job failed %s: %w", what, jobErr)
				}
				return fmt.Errorf("the job ended %s", what)
			case <-ctx.Done():
				return ctx.Err()
			case <-deadline.C:
				return fmt.Errorf("the sources were not backpressured within %v %s (%s): is the sink slow enough (spin %v)?",
					cfg.BackpressureTimeout, what, describeSources(last), cfg.Spin)
			}
		}
	}

	if err := waitBackpressure("after the start"); err != nil {
		return UnalignedModeResult{}, errors.Join(err, stop())
	}
	if mode == ModeAlignedDebloat {
		if err := waitDebloated(ctx, status, ended, cfg); err != nil {
			return UnalignedModeResult{}, errors.Join(err, stop())
		}
	}
	r := UnalignedModeResult{Mode: mode, BackpressureWaitMs: ms(time.Since(start))}
	var ids []int64
	for i := range cfg.Checkpoints {
		if i > 0 {
			// A fresh report taken after the last checkpoint completed.
			select {
			case <-status:
			default:
			}
			if err := waitBackpressure(fmt.Sprintf("after checkpoint %d", i)); err != nil {
				return UnalignedModeResult{}, errors.Join(err, stop())
			}
		}
		id, err := env.TriggerCheckpoint(runCtx)
		if err != nil {
			if ctx.Err() != nil {
				err = ctx.Err()
			}
			return UnalignedModeResult{}, errors.Join(fmt.Errorf("checkpoint %d of %d: %w", i+1, cfg.Checkpoints, err), stop())
		}
		ids = append(ids, id)
	}
	if err := stop(); err != nil {
		return UnalignedModeResult{}, err
	}

	mu.Lock()
	measured := make([]weir.CompletedCheckpoint, 0, len(ids))
	for _, id := range ids {
		if c, ok := cps[id]; ok {
			measured = append(measured, c)
		}
	}
	mu.Unlock()
	if len(measured) != len(ids) {
		return UnalignedModeResult{}, fmt.Errorf("%d checkpoints completed, %d reported", len(ids), len(measured))
	}
	r.Checkpoints = len(measured)
	var durs, starts, aligns, syncs, asyncs []time.Duration
	var persisted, checkpointed []int64
	for _, c := range measured {
		if c.Unaligned {
			r.UnalignedCheckpoints++
		}
		durs = append(durs, c.Duration)
		starts = append(starts, c.MaxStartDelay)
		aligns = append(aligns, c.MaxAlignment)
		syncs = append(syncs, c.MaxSync)
		asyncs = append(asyncs, c.MaxAsync)
		persisted = append(persisted, c.PersistedBytes)
		checkpointed = append(checkpointed, c.CheckpointedBytes)
	}
	for _, s := range [][]time.Duration{durs, starts, aligns, syncs, asyncs} {
		slices.Sort(s)
	}
	r.P50Ms, r.P99Ms, r.MaxMs = ms(percentile(durs, 0.50)), ms(percentile(durs, 0.99)), ms(durs[len(durs)-1])
	r.StartDelayMs, r.AlignmentMs = ms(percentile(starts, 0.5)), ms(percentile(aligns, 0.5))
	r.SyncMs, r.AsyncMs = ms(percentile(syncs, 0.5)), ms(percentile(asyncs, 0.5))
	r.PersistedBytes, r.CheckpointedBytes = medianInt(persisted), medianInt(checkpointed)
	return r, nil
}

// backpressuredPoolUsage is the output pool usage from which a source
// subtask counts as backpressured: every buffer of its pool is in use.
const backpressuredPoolUsage = 0.99

// sourcesBackpressured reports whether every source subtask of tasks is
// backpressured: it waited for output buffers more than half of the last
// seconds, or its output pool is full now.
func sourcesBackpressured(tasks []weir.TaskMetrics) bool {
	n := 0
	for _, t := range tasks {
		if !isUnalignedSource(t) {
			continue
		}
		n++
		if t.BackPressuredTimeMsPerSecond <= 500 && t.OutPoolUsage < backpressuredPoolUsage {
			return false
		}
	}
	return n > 0
}

func isUnalignedSource(t weir.TaskMetrics) bool {
	return strings.HasPrefix(t.Name, unalignedSourceName+" (")
}

// describeSources renders the source subtasks' backpressure figures for an
// error.
func describeSources(tasks []weir.TaskMetrics) string {
	var parts []string
	for _, t := range tasks {
		if isUnalignedSource(t) {
			parts = append(parts, fmt.Sprintf("%s: backpressured %.0f ms/s, out pool usage %.2f",
				t.Name, t.BackPressuredTimeMsPerSecond, t.OutPoolUsage))
		}
	}
	if len(parts) == 0 {
		return "no metrics of the source subtasks yet"
	}
	return strings.Join(parts, "; ")
}

// medianInt returns the nearest-rank median of v (0 if empty); it sorts v.
func medianInt(v []int64) int64 {
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	return v[(len(v)+1)/2-1]
}

// buildUnalignedJob declares the benchmark job: records -> rebalance ->
// map (identity) -> rebalance -> spinning sink.
func buildUnalignedJob(env *weir.Environment, cfg UnalignedConfig) {
	src := weir.FromSource(env, &payloadSource{size: cfg.RecordSize}).Name(unalignedSourceName).
		UID("bench-unaligned-source").Rebalance()
	m := weir.Map(src, func(b []byte) []byte { return b }).Name("Map").UID("bench-unaligned-map").Rebalance()
	weir.SinkTo(m, &spinSink{spin: cfg.Spin}).UID("bench-unaligned-sink")
}

// payloadSource emits, per subtask, records of size bytes for ever, as
// fast as the network takes them. Each record is a copy-free reference to
// the same payload: the network edge behind the source encodes it at once.
//
// A reader emits sourceBatch records per ReadBatch, like Flink's
// RecordSource emits one per pollNext: a checkpoint trigger reaches a
// source task between two batches only, and under backpressure a batch
// takes as long as the sinks need to make room for it (256 records of
// 1 KiB: about 50 ms with the defaults, which was most of an unaligned
// checkpoint's time).
type payloadSource struct{ size int }

// sourceBatch is the number of records per ReadBatch.
const sourceBatch = 1

func (s *payloadSource) CreateReader(weir.SourceContext) (weir.SourceReader[[]byte], error) {
	return &payloadReader{payload: make([]byte, s.size)}, nil
}

type payloadReader struct{ payload []byte }

func (r *payloadReader) ReadBatch(out weir.Collector[[]byte]) (weir.ReadStatus, error) {
	for range sourceBatch {
		out.Collect(r.payload)
	}
	return weir.MoreAvailable, nil
}

func (r *payloadReader) Close() error { return nil }

// SnapshotSplits implements weir.CheckpointedReader: the records carry no
// position, and the benchmark never restores.
func (r *payloadReader) SnapshotSplits() ([][]byte, error) { return nil, nil }

// spinSink busy-waits spin per record, like Flink's SlowDiscardSink:
// time.Sleep has about a millisecond of granularity here.
type spinSink struct{ spin time.Duration }

func (s *spinSink) Name() string { return "SlowDiscard" }

func (s *spinSink) CreateWriter(weir.SinkContext) (weir.SinkWriter[[]byte], error) {
	return &spinWriter{spin: s.spin}, nil
}

type spinWriter struct{ spin time.Duration }

func (w *spinWriter) Write([]byte) error {
	for start := time.Now(); time.Since(start) < w.spin; {
	}
	return nil
}

func (w *spinWriter) Flush() error { return nil }
func (w *spinWriter) Close() error { return nil }

// waitDebloated waits until debloating had time to converge (its samples
// times its period, 4 s with Flink's defaults) and every subtask with
// inputs reported the same buffer size twice in a row. Where the data in
// flight takes less than the target anyway the size stays at the segment
// size: debloating then changes nothing.
func waitDebloated(ctx context.Context, status <-chan []weir.TaskMetrics, ended <-chan struct{}, cfg UnalignedConfig) error {
	converge := time.After(20 * 200 * time.Millisecond)
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	converged := false
	last := map[string]int{}
	for {
		select {
		case <-converge:
			converged = true
		case tasks := <-status:
			stable, n := true, 0
			for _, t := range tasks {
				if isUnalignedSource(t) {
					continue
				}
				n++
				if last[t.Name] != t.DebloatedBufferSize {
					stable = false
				}
				last[t.Name] = t.DebloatedBufferSize
			}
			if converged && stable && n > 0 {
				return nil
			}
		case <-ended:
			return errors.New("the job ended while buffer debloating converged")
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return fmt.Errorf("the debloated buffer sizes did not settle within 30 s: %v", last)
		}
	}
}
