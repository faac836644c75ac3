package runner

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/weirstream/weir/internal/checkpoint/metadata"
	"github.com/weirstream/weir/internal/checkpoint/storage"
)

// RestoreLatest as a restore path resumes from the newest complete
// checkpoint of the job.
const RestoreLatest = "latest"

// ErrNoCheckpoint is wrapped by OpenStorage's error when the restore path
// cannot be restored: RestoreLatest and the job has no complete checkpoint,
// or a named checkpoint that is missing, truncated, corrupt, or does not fit
// the job (weir.ErrNoCheckpoint is this error).
var ErrNoCheckpoint = errors.New("cannot restore")

// StorageOptions say where a run keeps its checkpoints and what it starts
// from.
type StorageOptions struct {
	// Dir is the checkpoint storage (a path or a blob URL).
	Dir string
	// RestorePath is the checkpoint to start from: a chk-<n> directory or
	// RestoreLatest; empty: a fresh start.
	RestorePath string
}

// OpenStorage opens the checkpoint storage of the run cfg describes, when
// it checkpoints (cfg.Enabled: it sets cfg.Storage and cfg.JobDir) or
// restores (it reads the checkpoint into cfg.From, FromStorage and
// FromJob). cfg.Hooks.Storage, if set, replaces the storage o.Dir names.
// The returned function closes what it opened; call it once the run ended.
func OpenStorage(ctx context.Context, cfg *Config, o StorageOptions) (func(), error) {
	release := func() {}
	if !cfg.Enabled && o.RestorePath == "" {
		return release, nil
	}
	jobDir, err := storage.SanitizeJob(cfg.JobName)
	if err != nil {
		return nil, fmt.Errorf("job name %q: %w", cfg.JobName, err)
	}
	store := cfg.Hooks.Storage
	if store == nil {
		if store, err = storage.Open(ctx, o.Dir); err != nil {
			return nil, fmt.Errorf("checkpoint storage %q: %w", o.Dir, err)
		}
		release = func() { store.Close() }
	}
	if cfg.Enabled {
		cfg.Storage, cfg.JobDir = store, jobDir
	}
	if o.RestorePath != "" {
		closeFrom, err := resolveRestore(ctx, cfg, o, store, jobDir)
		if err != nil {
			release()
			return nil, err
		}
		closeStore := release
		release = func() {
			closeFrom()
			closeStore()
		}
	}
	return release, nil
}

// resolveRestore reads the checkpoint o.RestorePath names into cfg.From.
func resolveRestore(ctx context.Context, cfg *Config, o StorageOptions, store *storage.Storage, jobDir string) (func(), error) {
	var (
		payload   []byte
		from      = store
		fromJob   = jobDir
		closeFrom = func() {}
	)
	if o.RestorePath == RestoreLatest {
		cp, err := store.Latest(ctx, jobDir, cfg.Logger)
		if errors.Is(err, storage.ErrNotFound) {
			return nil, fmt.Errorf("%w: job %q has no complete checkpoint under %s", ErrNoCheckpoint, cfg.JobName, o.Dir)
		}
		if err != nil {
			return nil, fmt.Errorf("find the latest checkpoint of job %q under %s: %w", cfg.JobName, o.Dir, err)
		}
		payload = cp.Payload
	} else {
		s, cp, err := storage.ResolvePath(ctx, o.RestorePath)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrNoCheckpoint, err)
		}
		payload, fromJob = cp.Payload, cp.Job
		if cp.Job == jobDir && sameDir(filepath.Dir(filepath.Dir(filepath.Clean(o.RestorePath))), o.Dir) {
			s.Close() // one of this job's own checkpoints
		} else {
			from = s
			closeFrom = func() { s.Close() }
		}
	}
	meta, err := metadata.Decode(payload)
	if err != nil {
		closeFrom()
		return nil, fmt.Errorf("%w from checkpoint %s: %w", ErrNoCheckpoint, o.RestorePath, err)
	}
	cfg.From, cfg.FromStorage, cfg.FromJob = meta, from, fromJob
	return closeFrom, nil
}

func sameDir(a, b string) bool {
	a, errA := filepath.Abs(a)
	b, errB := filepath.Abs(b)
	return errA == nil && errB == nil && a == b
}
