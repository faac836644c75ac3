package bench

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/weirstream/weir"
)

// SavepointFormats are the savepoint formats RunSavepoint compares.
var SavepointFormats = []string{weir.SavepointCanonical, weir.SavepointNative}

// SavepointConfig configures RunSavepoint.
type SavepointConfig struct {
	// StateBytes is the size of the keyed state (pebble backend):
	// StateBytes / CheckpointValueSize keys.
	StateBytes int64
	// Rounds of one savepoint per format, the formats alternating which
	// goes first.
	Rounds int
	// UpdateRate is the records per second, in total, while the
	// savepoints are taken (0: none).
	UpdateRate float64
	// Parallelism of every operator.
	Parallelism int
	// Dir holds the job's files; empty: a temporary directory, removed
	// afterwards.
	Dir string
	// Logger receives the jobs' logs; nil: slog.Default().
	Logger *slog.Logger
}

// SavepointResult is what RunSavepoint measured.
type SavepointResult struct {
	StateBytes int64                   `json:"stateBytes"`
	Keys       int64                   `json:"keys"`
	LoadMs     float64                 `json:"loadMs"`
	Formats    []SavepointFormatResult `json:"formats"`
}

// SavepointFormatResult is one format's figures: the savepoint's duration
// (trigger to durable _metadata, as TriggerSavepoint returned it) over the
// rounds, its size and file count, and the wall time of a run restoring
// the last one and processing no record.
type SavepointFormatResult struct {
	Format     string    `json:"format"`
	Rounds     int       `json:"rounds"`
	MedianMs   float64   `json:"medianMs"`
	MinMs      float64   `json:"minMs"`
	MaxMs      float64   `json:"maxMs"`
	DurationMs []float64 `json:"durationsMs"`
	Bytes      int64     `json:"bytes"`
	Files      int       `json:"files"`
	RestoreMs  float64   `json:"restoreMs"`
}

// RunSavepoint loads StateBytes of keyed state into the pebble backend,
// takes Rounds savepoints of each format while the job runs, then restores
// the last savepoint of each format in a job that processes nothing.
func RunSavepoint(ctx context.Context, cfg SavepointConfig) (SavepointResult, error) {
	if cfg.Rounds < 1 || cfg.Parallelism < 1 || cfg.StateBytes < CheckpointValueSize {
		return SavepointResult{}, fmt.Errorf("savepoint benchmark: rounds %d and parallelism %d must be at least 1, state %d bytes at least %d",
			cfg.Rounds, cfg.Parallelism, cfg.StateBytes, CheckpointValueSize)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	dir := cfg.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "weir-bench-savepoint-")
		if err != nil {
			return SavepointResult{}, err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	keys := cfg.StateBytes / CheckpointValueSize
	res := SavepointResult{StateBytes: keys * CheckpointValueSize, Keys: keys}
	opts := weir.Options{Parallelism: cfg.Parallelism, Logger: cfg.Logger, StateBackend: weir.BackendPebble,
		StateDir: filepath.Join(dir, "state"),
		// Savepoints need checkpointing; no periodic one runs meanwhile.
		Checkpoint: weir.CheckpointOptions{Interval: time.Hour, Dir: filepath.Join(dir, "checkpoints"),
			SavepointDir: filepath.Join(dir, "savepoints"), Timeout: time.Hour}}
	const name = "bench-savepoint"
	prog := &loadProgress{}
	env := weir.NewEnvironment(opts)
	buildCheckpointJob(env, &keySource{keys: keys, rate: cfg.UpdateRate, duration: 24 * time.Hour, prog: prog}, prog)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- env.Execute(runCtx, name) }()
	stopJob := func() error {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
		return nil
	}

	// The load: every reader emitted its keys, and a checkpoint taken
	// after that passed the backlog (its barrier follows the last load
	// record), so the savepoints measure the snapshot, not the backlog.
	for {
		prog.mu.Lock()
		n := prog.readers
		prog.mu.Unlock()
		if n == cfg.Parallelism {
			break
		}
		select {
		case err := <-done:
			return res, fmt.Errorf("the job ended while loading: %v", err)
		case <-ctx.Done():
			return res, errors.Join(ctx.Err(), stopJob())
		case <-time.After(20 * time.Millisecond):
		}
	}
	if _, err := env.TriggerCheckpoint(ctx); err != nil {
		return res, errors.Join(fmt.Errorf("checkpoint after the load: %w", err), stopJob())
	}
	res.LoadMs = ms(time.Since(start))

	byFormat := map[string]*SavepointFormatResult{}
	last := map[string]string{}
	for round := range cfg.Rounds {
		order := slices.Clone(SavepointFormats)
		if round%2 == 1 {
			slices.Reverse(order)
		}
		for _, f := range order {
			t0 := time.Now()
			path, err := env.TriggerSavepoint(ctx, weir.SavepointOptions{Format: f})
			if err != nil {
				return res, errors.Join(fmt.Errorf("%s savepoint: %w", f, err), stopJob())
			}
			d := time.Since(t0)
			r := byFormat[f]
			if r == nil {
				r = &SavepointFormatResult{Format: f}
				byFormat[f] = r
			}
			r.Rounds++
			r.DurationMs = append(r.DurationMs, ms(d))
			if prev := last[f]; prev != "" {
				_ = os.RemoveAll(prev) // keep one per format on disk
			}
			last[f] = path
		}
	}
	if err := stopJob(); err != nil {
		return res, err
	}
	for _, f := range SavepointFormats {
		r := byFormat[f]
		sorted := slices.Clone(r.DurationMs)
		slices.Sort(sorted)
		r.MinMs, r.MaxMs, r.MedianMs = sorted[0], sorted[len(sorted)-1], sorted[len(sorted)/2]
		if len(sorted)%2 == 0 {
			r.MedianMs = (sorted[len(sorted)/2-1] + sorted[len(sorted)/2]) / 2
		}
		var err error
		if r.Bytes, r.Files, err = dirSize(last[f]); err != nil {
			return res, err
		}
		// Restore it in a job that processes nothing.
		ropts := opts
		ropts.StateDir = filepath.Join(dir, "restore-"+f)
		ropts.Checkpoint.Interval = 0
		ropts.Checkpoint.RestorePath = last[f]
		renv := weir.NewEnvironment(ropts)
		buildCheckpointJob(renv, &keySource{keys: keys, restore: true, prog: &loadProgress{}}, &loadProgress{})
		t0 := time.Now()
		if err := renv.Execute(ctx, name); err != nil {
			return res, fmt.Errorf("restore the %s savepoint: %w", f, err)
		}
		r.RestoreMs = ms(time.Since(t0))
		_ = os.RemoveAll(ropts.StateDir)
		res.Formats = append(res.Formats, *r)
	}
	return res, nil
}

// dirSize returns the bytes and the number of files under dir.
func dirSize(dir string) (int64, int, error) {
	var n int64
	files := 0
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		n += fi.Size()
		files++
		return nil
	})
	return n, files, err
}
