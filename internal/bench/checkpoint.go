package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/sink"
)

// Checkpoint modes compared by RunCheckpoint.
const (
	// ModeFullHashMap: the hashmap backend, full checkpoints.
	ModeFullHashMap = "full-hashmap"
	// ModeFullPebble: the pebble backend, full (canonical) checkpoints.
	ModeFullPebble = "full-pebble"
	// ModeIncremental: the pebble backend, incremental checkpoints.
	ModeIncremental = "incremental"
	// ModeChangelog: the pebble backend with incremental materializations,
	// wrapped by the changelog (ChangelogOptions.Enabled).
	ModeChangelog = "changelog"
)

// CheckpointModes are the valid modes, in the order a default run uses.
var CheckpointModes = []string{ModeFullHashMap, ModeFullPebble, ModeIncremental, ModeChangelog}

// DefaultMaterializeInterval is the changelog mode's materialization
// interval when CheckpointConfig.MaterializeInterval is 0: the library's
// default (10 minutes) would never materialize within a short run; 10 s
// materializes about three times in the default 30 s update phase.
const DefaultMaterializeInterval = 10 * time.Second

// CheckpointValueSize is the size of the value kept per key.
const CheckpointValueSize = 1024

// CheckpointConfig configures RunCheckpoint.
type CheckpointConfig struct {
	// Modes to run, one after the other (CheckpointModes).
	Modes []string
	// StateBytes is the size of the keyed state: StateBytes /
	// CheckpointValueSize keys of CheckpointValueSize bytes each.
	StateBytes int64
	// UpdateRate is the number of records per second, in total, of the
	// update phase; 0: as fast as possible.
	UpdateRate float64
	// Interval between checkpoints.
	Interval time.Duration
	// Duration of the update phase.
	Duration time.Duration
	// Parallelism of every operator.
	Parallelism int
	// MaterializeInterval is the changelog mode's
	// ChangelogOptions.MaterializeInterval; 0: DefaultMaterializeInterval.
	MaterializeInterval time.Duration
	// Logger receives the jobs' logs; nil: slog.Default().
	Logger *slog.Logger
}

// Keys is the number of keys of the state.
func (c CheckpointConfig) Keys() int64 { return c.StateBytes / CheckpointValueSize }

// Validate reports every invalid field at once.
func (c CheckpointConfig) Validate() error {
	var errs []error
	if len(c.Modes) == 0 {
		errs = append(errs, fmt.Errorf("no mode: valid modes are %s", strings.Join(CheckpointModes, ", ")))
	}
	for _, m := range c.Modes {
		if !slices.Contains(CheckpointModes, m) {
			errs = append(errs, fmt.Errorf("unknown mode %q: valid modes are %s", m, strings.Join(CheckpointModes, ", ")))
		}
	}
	if c.Keys() < 1 {
		errs = append(errs, fmt.Errorf("state of %d bytes holds no %d-byte value", c.StateBytes, CheckpointValueSize))
	}
	if c.UpdateRate < 0 || math.IsNaN(c.UpdateRate) || math.IsInf(c.UpdateRate, 0) {
		errs = append(errs, fmt.Errorf("update rate %v must be a number >= 0", c.UpdateRate))
	}
	if c.Interval <= 0 {
		errs = append(errs, fmt.Errorf("checkpoint interval %v must be positive", c.Interval))
	}
	if c.Duration <= 0 {
		errs = append(errs, fmt.Errorf("duration %v must be positive", c.Duration))
	}
	if c.Parallelism < 1 {
		errs = append(errs, fmt.Errorf("parallelism %d must be at least 1", c.Parallelism))
	}
	if c.MaterializeInterval < 0 {
		errs = append(errs, fmt.Errorf("materialize interval %v must not be negative (0: %v)", c.MaterializeInterval, DefaultMaterializeInterval))
	}
	return errors.Join(errs...)
}

// CheckpointModeResult is the outcome of one mode. Its JSON form is one
// element of `weir bench checkpoint --json`'s "modes".
type CheckpointModeResult struct {
	Mode string `json:"mode"`
	// P50Ms, P99Ms and MaxMs are percentiles (nearest rank) of the duration
	// of the checkpoints triggered after the load phase (after the keyed
	// operator processed the last load record), trigger to durable
	// _metadata.
	P50Ms float64 `json:"p50Ms"`
	P99Ms float64 `json:"p99Ms"`
	MaxMs float64 `json:"maxMs"`
	// CheckpointedBytes (uploaded) and FullBytes (referenced) are averages
	// over the same checkpoints.
	CheckpointedBytes int64 `json:"checkpointedBytes"`
	FullBytes         int64 `json:"fullBytes"`
	// RecordsPerSecond is the rate of the update phase: the update records
	// the keyed operator processed (load-phase records are not counted),
	// divided by the time from the start of the update phase to the last
	// update record processed. The update phase starts when the source
	// finished loading with a limited UpdateRate, when the operator
	// finished processing the load with UpdateRate 0 (see
	// loadProgress.rate).
	RecordsPerSecond float64 `json:"recordsPerSecond"`
	// RestoreMs is the wall time of a second run that restores the last
	// checkpoint and processes no record: deploying the job, restoring
	// every subtask's state, and ending the job.
	RestoreMs float64 `json:"restoreMs"`
	// Checkpoints is the number of checkpoints measured.
	Checkpoints int `json:"-"`

	// Changelog mode only (CompletedCheckpoint.Changelog of the last
	// measured checkpoint, summed over subtasks):
	// MaterializedBytes and NonMaterializedBytes are the full sizes of its
	// materialized part (the last materialization's files) and of its
	// non-materialized part (the log segments after it).
	MaterializedBytes    int64 `json:"materializedBytes,omitempty"`
	NonMaterializedBytes int64 `json:"nonMaterializedBytes,omitempty"`
	// Materializations is the number of materializations completed by then
	// (all subtasks, load phase included); UpdateMaterializations those
	// completed after the last checkpoint that completed in the load phase
	// (about those of the update phase).
	Materializations       int64 `json:"materializations,omitempty"`
	UpdateMaterializations int64 `json:"updateMaterializations,omitempty"`
	// LastMaterializationMs is the duration of the latest materialization.
	LastMaterializationMs float64 `json:"lastMaterializationMs,omitempty"`
	// LogUploadedBytes, LogUploads and LogUploadMeanMs are the bytes, the
	// number of segment files and the mean upload latency of the log by
	// then.
	LogUploadedBytes int64   `json:"logUploadedBytes,omitempty"`
	LogUploads       int64   `json:"logUploads,omitempty"`
	LogUploadMeanMs  float64 `json:"logUploadMeanMs,omitempty"`
}

// CheckpointResult is the outcome of RunCheckpoint; its JSON form is what
// `weir bench checkpoint --json` prints.
type CheckpointResult struct {
	Modes []CheckpointModeResult `json:"modes"`
}

// RunCheckpoint runs the checkpoint benchmark once per mode, one after the
// other. Per mode, a keyed job first loads the state (every key once, as
// fast as possible), then updates random keys at UpdateRate for Duration
// with a checkpoint every Interval into a fresh temporary directory, and
// ends; only the checkpoints triggered after the load phase are measured.
// A second run then restores the last checkpoint and processes nothing.
func RunCheckpoint(ctx context.Context, cfg CheckpointConfig) (CheckpointResult, error) {
	if err := cfg.Validate(); err != nil {
		return CheckpointResult{}, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	var res CheckpointResult
	for _, mode := range cfg.Modes {
		r, err := runCheckpointMode(ctx, cfg, mode)
		if err != nil {
			return CheckpointResult{}, fmt.Errorf("mode %s: %w", mode, err)
		}
		res.Modes = append(res.Modes, r)
	}
	return res, nil
}

// completed is a completed checkpoint as the benchmark saw it.
type completed struct {
	triggered time.Time
	weir.CompletedCheckpoint
}

func runCheckpointMode(ctx context.Context, cfg CheckpointConfig, mode string) (CheckpointModeResult, error) {
	dir, err := os.MkdirTemp("", "weir-bench-checkpoint-")
	if err != nil {
		return CheckpointModeResult{}, err
	}
	defer os.RemoveAll(dir)

	opts := weir.Options{Parallelism: cfg.Parallelism, Logger: cfg.Logger, StateBackend: weir.BackendPebble,
		StateDir: filepath.Join(dir, "state"),
		Checkpoint: weir.CheckpointOptions{Interval: cfg.Interval, Dir: filepath.Join(dir, "checkpoints"),
			NumRetained: 1, Incremental: mode == ModeIncremental || mode == ModeChangelog}}
	switch mode {
	case ModeFullHashMap:
		opts.StateBackend = weir.BackendHashMap
	case ModeChangelog:
		opts.Changelog = weir.ChangelogOptions{Enabled: true, MaterializeInterval: cfg.MaterializeInterval}
		if opts.Changelog.MaterializeInterval == 0 {
			opts.Changelog.MaterializeInterval = DefaultMaterializeInterval
		}
	}
	name := "bench-checkpoint-" + mode

	var (
		mu   sync.Mutex
		cps  []completed
		prog = &loadProgress{}
	)
	opts.OnCheckpointComplete = func(c weir.CompletedCheckpoint) {
		mu.Lock()
		cps = append(cps, completed{triggered: time.Now().Add(-c.Duration), CompletedCheckpoint: c})
		mu.Unlock()
	}
	env := weir.NewEnvironment(opts)
	buildCheckpointJob(env, &keySource{keys: cfg.Keys(), rate: cfg.UpdateRate, duration: cfg.Duration, prog: prog}, prog)
	if err := env.Execute(ctx, name); err != nil {
		return CheckpointModeResult{}, err
	}

	loadEnd := prog.loadEnd()
	mu.Lock()
	var (
		measured []completed
		before   weir.ChangelogMetrics // of the last checkpoint completed before the load's end
	)
	for _, c := range cps {
		if !c.triggered.Before(loadEnd) {
			measured = append(measured, c)
		} else if c.triggered.Add(c.Duration).Before(loadEnd) {
			before = c.Changelog
		}
	}
	mu.Unlock()
	if len(measured) == 0 {
		return CheckpointModeResult{}, fmt.Errorf("no checkpoint was triggered after the load phase (%d before): lengthen the duration or shorten the interval", len(cps))
	}
	r := CheckpointModeResult{Mode: mode, Checkpoints: len(measured), RecordsPerSecond: prog.rate(cfg.UpdateRate > 0)}
	durs := make([]time.Duration, len(measured))
	var cpBytes, fullBytes int64
	for i, c := range measured {
		durs[i] = c.Duration
		cpBytes += c.CheckpointedBytes
		fullBytes += c.FullBytes
	}
	slices.Sort(durs)
	r.P50Ms, r.P99Ms, r.MaxMs = ms(percentile(durs, 0.50)), ms(percentile(durs, 0.99)), ms(durs[len(durs)-1])
	r.CheckpointedBytes = cpBytes / int64(len(measured))
	r.FullBytes = fullBytes / int64(len(measured))
	if mode == ModeChangelog {
		cl := measured[len(measured)-1].Changelog
		r.MaterializedBytes, r.NonMaterializedBytes = cl.LastFullSizeMaterialized, cl.LastFullSizeNonMaterialized
		r.Materializations = cl.CompletedMaterializations
		r.UpdateMaterializations = cl.CompletedMaterializations - before.CompletedMaterializations
		r.LastMaterializationMs = ms(cl.LastMaterializationDuration)
		r.LogUploadedBytes, r.LogUploads, r.LogUploadMeanMs = cl.UploadedBytes, cl.Uploads, ms(cl.UploadLatencyMean)
	}

	// Restore: the same job (same operator UIDs and name) from the latest
	// checkpoint, with a source that emits nothing and checkpointing off.
	ropts := opts
	ropts.StateDir = filepath.Join(dir, "restore-state")
	ropts.OnCheckpointComplete = nil
	ropts.Checkpoint.Interval = 0
	ropts.Checkpoint.RestorePath = weir.RestoreLatest
	renv := weir.NewEnvironment(ropts)
	buildCheckpointJob(renv, &keySource{keys: cfg.Keys(), restore: true, prog: &loadProgress{}}, &loadProgress{})
	t0 := time.Now()
	if err := renv.Execute(ctx, name); err != nil {
		return CheckpointModeResult{}, fmt.Errorf("restore: %w", err)
	}
	r.RestoreMs = ms(time.Since(t0))
	return r, nil
}

// percentile returns the nearest-rank q-quantile of sorted.
func percentile(sorted []time.Duration, q float64) time.Duration {
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// updateFlag marks the records of the update phase; the key is the record
// without it.
const updateFlag int64 = 1 << 62

// buildCheckpointJob declares the keyed job: src -> KeyBy(key) ->
// KeyedProcess (a ValueState[[]byte] per key, overwritten by every record)
// -> discard. The operator reports its update-phase processing to prog.
func buildCheckpointJob(env *weir.Environment, src *keySource, prog *loadProgress) {
	keys := weir.FromSource(env, src).Name("Keys").UID("bench-checkpoint-source")
	upd := weir.KeyedProcess(weir.KeyBy(keys, func(k int64) int64 { return k &^ updateFlag }),
		func() weir.KeyedProcessFunction[int64, int64, int64] { return &updateValue{prog: prog} }).
		Name("Update").UID("bench-checkpoint-update")
	weir.SinkTo(upd, sink.Discard[int64]()).UID("bench-checkpoint-sink")
}

// updateValue overwrites the key's value with CheckpointValueSize fresh
// pseudo-random (incompressible) bytes derived from the key and a counter.
// It counts the update-phase records it processes and when it processed
// the last, and reports them to prog when it closes.
type updateValue struct {
	value *weir.ValueState[[]byte]
	n     uint64

	prog     *loadProgress
	updates  int64
	last     time.Time
	loading  bool      // the latest record was a load record
	loadDone time.Time // when the first update record after the latest load record came
}

func (u *updateValue) Open(ctx *weir.KeyedContext[int64, int64]) error {
	var err error
	u.value, err = weir.GetValueState(ctx, weir.ValueStateDescriptor[[]byte]{Name: "value"})
	return err
}

func (u *updateValue) ProcessElement(_ *weir.KeyedContext[int64, int64], k int64) error {
	u.n++
	if k&updateFlag != 0 {
		k &^= updateFlag
		u.last = time.Now()
		u.updates++
		if u.loading {
			u.loading, u.loadDone = false, u.last
		}
	} else {
		u.loading = true
	}
	u.value.Update(valueOf(k, u.n))
	return nil
}

// Close reports the update phase's processing.
func (u *updateValue) Close() error {
	if u.loading {
		u.loadDone = time.Now()
	}
	if u.prog != nil {
		u.prog.processed(u.updates, u.last, u.loadDone)
	}
	return nil
}

// valueOf returns CheckpointValueSize bytes of a splitmix64 sequence seeded
// by key and counter.
func valueOf(key int64, n uint64) []byte {
	b := make([]byte, CheckpointValueSize)
	s := uint64(key)*0x9e3779b97f4a7c15 ^ n*0xbf58476d1ce4e5b9
	for i := 0; i+8 <= len(b); i += 8 {
		s += 0x9e3779b97f4a7c15
		z := s
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		binary.LittleEndian.PutUint64(b[i:], z^(z>>31))
	}
	return b
}

// loadProgress is shared by the source readers and the keyed operator's
// subtasks of one run: when the first and the last reader finished their
// load phase, when the operator finished processing the load records, and
// the update records the operator processed and when it processed the
// last.
//
// The operator ends its load phase well after the source: the records in
// the network buffers between them (4,096 keys per 32 KiB buffer) take
// seconds to process while the state backend is busy with the load's
// flushes and compactions.
type loadProgress struct {
	mu         sync.Mutex
	start, end time.Time // when the first and the last reader finished loading
	opEnd      time.Time // when the operator finished processing the load records, all subtasks
	updates    int64     // update records processed, all subtasks
	last       time.Time // last update record processed, any subtask
	readers    int       // readers that finished loading
}

func (p *loadProgress) loaded(at time.Time) {
	p.mu.Lock()
	p.readers++
	if at.After(p.end) {
		p.end = at
	}
	if p.start.IsZero() || at.Before(p.start) {
		p.start = at
	}
	p.mu.Unlock()
}

func (p *loadProgress) processed(records int64, last, loadDone time.Time) {
	p.mu.Lock()
	p.updates += records
	if loadDone.After(p.opEnd) {
		p.opEnd = loadDone
	}
	if last.After(p.last) {
		p.last = last
	}
	p.mu.Unlock()
}

// loadEnd is when the load phase ended: when the operator had processed
// every load record, or the last reader finished emitting them if later.
func (p *loadProgress) loadEnd() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.opEnd.After(p.end) {
		return p.opEnd
	}
	return p.end
}

// rate is the update phase's records/s as the keyed operator processed
// them: all subtasks' update records over the time from the start of the
// update phase to the last update record processed. With a limited rate
// the update phase starts when the first reader finished loading (the
// records it emits from then on queue behind the load's last ones); as
// fast as possible (throughput), when the operator finished processing
// the load records (before, the source is held back by the load's
// backlog).
func (p *loadProgress) rate(limited bool) float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	start := p.start
	if !limited && p.opEnd.After(start) {
		start = p.opEnd
	}
	d := p.last.Sub(start)
	if p.updates == 0 || d <= 0 {
		return 0
	}
	return float64(p.updates) / d.Seconds()
}

// keySource emits, per subtask, each key of its contiguous share of
// 0..keys-1 once as fast as possible (the load phase), then keys chosen
// uniformly at random among all keys (deterministic seed per subtask) at
// rate/parallelism records per second for duration (the update phase), and
// ends; update-phase records carry updateFlag. With restore it emits
// nothing.
type keySource struct {
	keys     int64
	rate     float64
	duration time.Duration
	restore  bool
	prog     *loadProgress
}

func (s *keySource) CreateReader(ctx weir.SourceContext) (weir.SourceReader[int64], error) {
	p := int64(ctx.Parallelism)
	r := &keyReader{src: s, next: s.keys * int64(ctx.Subtask) / p, end: s.keys * int64(ctx.Subtask+1) / p,
		rate: s.rate / float64(p), rnd: rand.New(rand.NewPCG(uint64(ctx.Subtask)+1, 0x5eed))}
	return r, nil
}

type keyReader struct {
	src       *keySource
	next, end int64 // load phase: the keys still to load
	loaded    bool
	rate      float64 // per subtask
	start     time.Time
	emitted   int64
	rnd       *rand.Rand
}

func (r *keyReader) ReadBatch(out weir.Collector[int64]) (weir.ReadStatus, error) {
	if r.src.restore {
		return weir.EndOfInput, nil
	}
	if !r.loaded {
		stop := min(r.next+1024, r.end)
		for ; r.next < stop; r.next++ {
			out.Collect(r.next)
		}
		if r.next >= r.end {
			r.loaded = true
			r.start = time.Now()
			r.src.prog.loaded(r.start)
		}
		return weir.MoreAvailable, nil
	}
	elapsed := time.Since(r.start)
	if elapsed >= r.src.duration {
		return weir.EndOfInput, nil
	}
	batch := int64(1024)
	if r.rate > 0 {
		allowed := int64(elapsed.Seconds()*r.rate) + 1 - r.emitted
		if allowed <= 0 {
			return weir.NothingAvailable, nil
		}
		batch = min(batch, allowed)
	}
	for range batch {
		out.Collect(r.rnd.Int64N(r.src.keys) | updateFlag)
	}
	r.emitted += batch
	return weir.MoreAvailable, nil
}

func (r *keyReader) Close() error { return nil }

// SnapshotSplits implements weir.CheckpointedReader. The benchmark's
// restore run emits nothing whatever it restores, so the reader's position
// is not needed: it reports no splits.
func (r *keyReader) SnapshotSplits() ([][]byte, error) { return nil, nil }
