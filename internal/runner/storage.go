package runner

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

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

// Job lock defaults (storage.LockOptions): the root package documents and
// fills them in without importing the storage package.
const (
	DefaultLeaseDuration = storage.DefaultLeaseDuration
	DefaultRenewInterval = storage.DefaultRenewInterval
)

// ErrJobLocked and ErrJobLockLost are storage's (see storage.LockJob).
var (
	ErrJobLocked   = storage.ErrJobLocked
	ErrJobLockLost = storage.ErrLockLost
)

// StorageOptions say where a run keeps its checkpoints and what it starts
// from.
type StorageOptions struct {
	// Dir is the checkpoint storage (a path or a blob URL).
	Dir string
	// RestorePath is the snapshot to start from: a chk-<n> directory, a
	// savepoint directory, either's _metadata file, or RestoreLatest;
	// empty: a fresh start.
	RestorePath string
	// ClaimMode is ClaimModeClaim or ClaimModeNoClaim (the default) for an
	// explicit RestorePath; RestoreLatest always claims (the job resumes
	// its own checkpoints).
	ClaimMode string
	// Force, LeaseDuration and RenewInterval configure the job lock
	// (storage.LockOptions); OnLost is called if the run loses it.
	Force                        bool
	LeaseDuration, RenewInterval time.Duration
	OnLost                       func(error)
}

// OpenedStorage is what OpenStorage opened for one run.
type OpenedStorage struct {
	release func()
	lock    *storage.JobLock
}

// Close releases the job lock and closes what OpenStorage opened; call it
// once the run ended.
func (o *OpenedStorage) Close() { o.release() }

// LockErr returns nil while the run holds its job lock (or needs none),
// and why it lost it after.
func (o *OpenedStorage) LockErr() error {
	if o.lock == nil {
		return nil
	}
	return o.lock.Err()
}

// OpenStorage opens the checkpoint storage of the run cfg describes, when
// it checkpoints (cfg.Enabled: it takes the job lock, one run per job
// directory, before anything in it is read or changed, and sets
// cfg.Storage and cfg.JobDir) or restores (it reads and verifies the
// checkpoint into cfg.From, FromStorage and FromJob). cfg.Hooks.Storage,
// if set, replaces the storage o.Dir names.
func OpenStorage(ctx context.Context, cfg *Config, o StorageOptions) (*OpenedStorage, error) {
	opened := &OpenedStorage{release: func() {}}
	if !cfg.Enabled && o.RestorePath == "" {
		return opened, nil
	}
	jobDir, err := storage.SanitizeJob(cfg.JobName)
	if err != nil {
		return nil, fmt.Errorf("job name %q: %w", cfg.JobName, err)
	}
	store := cfg.Hooks.Storage
	var closers []func()
	fail := func(err error) (*OpenedStorage, error) {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
		return nil, err
	}
	if store == nil {
		if store, err = storage.OpenWith(ctx, o.Dir, storage.Options{Logger: cfg.Logger}); err != nil {
			return nil, fmt.Errorf("checkpoint storage %q: %w", o.Dir, err)
		}
		s := store
		closers = append(closers, func() { s.Close() })
	}
	if cfg.Enabled {
		// Held across restarts, released at the end. A run that loses it
		// is cancelled (OnLost); its storage refuses writes.
		lock, err := store.LockJob(ctx, jobDir, storage.LockOptions{
			Force: o.Force, LeaseDuration: o.LeaseDuration, RenewInterval: o.RenewInterval,
			Dir: o.Dir, Logger: cfg.Logger, OnLost: o.OnLost,
		})
		if err != nil {
			return fail(err)
		}
		opened.lock = lock
		closers = append(closers, func() {
			if err := lock.Release(context.WithoutCancel(ctx)); err != nil {
				cfg.Logger.Warn("could not release the lock of the checkpoint directory", "dir", lock.Dir(), "err", err)
			}
		})
		store = lock.Storage()
		cfg.Storage, cfg.JobDir = store, jobDir
	}
	if o.RestorePath != "" {
		closeFrom, err := resolveRestore(ctx, cfg, o, store, jobDir)
		if err != nil {
			return fail(err)
		}
		closers = append(closers, closeFrom)
	}
	opened.release = func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	return opened, nil
}

// resolveRestore reads the checkpoint o.RestorePath names into cfg.From,
// after verifying every data file it references (VerifyFiles: present, of
// the recorded size and checksum): RestoreLatest falls back past damaged
// checkpoints with a warning, a named checkpoint must be intact.
func resolveRestore(ctx context.Context, cfg *Config, o StorageOptions, store *storage.Storage, jobDir string) (func(), error) {
	var (
		meta      *metadata.Checkpoint
		from      = store
		fromJob   = jobDir
		fromPath  string
		closeFrom = func() {}
	)
	if o.RestorePath == RestoreLatest {
		_, err := store.LatestVerified(ctx, jobDir, cfg.Logger, func(payload []byte) ([]storage.FileHandle, error) {
			m, err := metadata.Decode(payload)
			if err != nil {
				return nil, err
			}
			meta = m // the last call is for the checkpoint returned
			return m.Files(), nil
		})
		var none *storage.NoCheckpointError
		switch {
		case errors.As(err, &none) && len(none.Skipped) > 0:
			return nil, fmt.Errorf("%w: job %q has no checkpoint under %s that can be restored: %s", ErrNoCheckpoint, cfg.JobName, o.Dir, joinErrors(none.Skipped))
		case errors.Is(err, storage.ErrNotFound):
			return nil, fmt.Errorf("%w: job %q has no complete checkpoint under %s", ErrNoCheckpoint, cfg.JobName, o.Dir)
		case errors.Is(err, metadata.ErrInvalid):
			return nil, fmt.Errorf("%w: %w", ErrNoCheckpoint, err)
		case err != nil:
			return nil, fmt.Errorf("find the latest checkpoint of job %q under %s: %w", cfg.JobName, o.Dir, err)
		}
		cfg.Claim, cfg.FromRestoreLatest = true, true
		fromPath = fmt.Sprintf("%s/chk-%d", jobDir, meta.ID)
	} else {
		s, snap, err := storage.ResolveSnapshot(ctx, o.RestorePath)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrNoCheckpoint, err)
		}
		what := "checkpoint"
		if snap.Savepoint {
			what = "savepoint"
		}
		if meta, err = metadata.Decode(snap.Payload); err != nil {
			s.Close()
			return nil, fmt.Errorf("%w from %s %s: %w", ErrNoCheckpoint, what, o.RestorePath, err)
		}
		if meta.Savepoint != snap.Savepoint {
			s.Close()
			return nil, fmt.Errorf("%w: %s: the directory is laid out as a %s but its _metadata describes a %s; restore the directory it was taken in", ErrNoCheckpoint, o.RestorePath, what, kindName(meta.Savepoint))
		}
		if err := s.VerifyFiles(ctx, snap.Dir, meta.Files()); err != nil {
			s.Close()
			return nil, fmt.Errorf("%w: %s %s: %w", ErrNoCheckpoint, what, o.RestorePath, err)
		}
		fromJob, fromPath = snap.Dir, snap.Path
		if !snap.Savepoint && snap.Dir == jobDir && sameStorage(s, store, o.Dir) {
			s.Close() // one of this job's own checkpoints
		} else {
			from = s
			closeFrom = func() { s.Close() }
		}
		switch strings.ToUpper(o.ClaimMode) {
		case ClaimModeClaim:
			cfg.Claim = true
		case "", ClaimModeNoClaim:
		default:
			closeFrom()
			return nil, fmt.Errorf("restore mode %q: must be %s or %s (execution.state-recovery.claim-mode)", o.ClaimMode, ClaimModeClaim, ClaimModeNoClaim)
		}
		if cfg.Claim && !cfg.Enabled {
			closeFrom()
			return nil, fmt.Errorf("restore mode %s needs checkpointing (execution.checkpointing.interval): the claimed snapshot is deleted once checkpoints subsume it", ClaimModeClaim)
		}
	}
	cfg.From, cfg.FromStorage, cfg.FromJob, cfg.FromPath, cfg.FromLocation = meta, from, fromJob, fromPath, o.RestorePath
	if o.RestorePath == RestoreLatest {
		cfg.FromLocation = fmt.Sprintf("%s (latest)", fromPath)
	}
	return closeFrom, nil
}

// Restore modes (execution.state-recovery.claim-mode), Flink's names.
const (
	// ClaimModeClaim: the job owns the restored snapshot; it is deleted
	// once newer checkpoints subsume it.
	ClaimModeClaim = "CLAIM"
	// ClaimModeNoClaim: the snapshot stays the user's; nothing of it is
	// deleted or shared, the first checkpoint is a full one.
	ClaimModeNoClaim = "NO_CLAIM"
)

func kindName(savepoint bool) string {
	if savepoint {
		return "savepoint"
	}
	return "checkpoint"
}

// sameStorage reports whether s, opened for a restore path, is the storage
// the job checkpoints to (store, opened at dir): the same root however
// either is written, a relative or absolute path or a file:// URL. A store
// without a location (a test's, made by OpenBucket) stands for dir.
func sameStorage(s, store *storage.Storage, dir string) bool {
	if s.Same(store) {
		return true
	}
	return store.Location() == "" && s.Location() != "" && s.Location() == storage.LocationOf(dir)
}

// joinErrors joins errs into one line.
func joinErrors(errs []error) string {
	msgs := make([]string, len(errs))
	for i, err := range errs {
		msgs[i] = err.Error()
	}
	return strings.Join(msgs, "; ")
}
