package task

import (
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// Local state directories.
//
// Each run of a job works in its own directory under Options.StateDir and
// deletes it at the end. A process killed with SIGKILL cannot: its directory
// (Pebble databases, possibly gigabytes) would stay forever. So a run holds
// an exclusive lock on <dir>/.lock while it lives (the kernel drops it when
// the process dies, however it dies), and every run, when it starts (Job.Run,
// whatever its backend, also when it keeps no local state itself), deletes
// the directories under StateDir whose lock it can take: nobody is using
// them. Directories without a lock file are left alone, and a missing
// StateDir is not created.
//
// A run writes its pid into the lock file once it holds the lock. An empty
// lock file younger than claimGrace belongs to a run claiming its directory
// this instant (created, not locked yet): the sweep leaves it alone rather
// than delete the directory under that run, or hold the lock at the moment
// the run takes it.

const (
	stateLockName = ".lock"
	claimGrace    = time.Minute
)

// stateDirLock is a held lock; release unlocks it.
type stateDirLock interface{ release() }

// claimStateDir creates dir with its lock file and locks it. created lists
// the directories above dir that did not exist before, innermost first, for
// releaseStateDir to remove again.
func claimStateDir(dir string) (l stateDirLock, created []string, err error) {
	for p := filepath.Dir(dir); ; p = filepath.Dir(p) {
		if _, err := os.Stat(p); err == nil || p == filepath.Dir(p) {
			break
		}
		created = append(created, p)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, err
	}
	lockPath := filepath.Join(dir, stateLockName)
	if l, err = lockFile(lockPath); err != nil {
		return nil, created, err
	}
	// Mark the lock file as taken (see claimGrace); the flock does not
	// depend on which descriptor writes.
	if err := os.WriteFile(lockPath, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		l.release()
		return nil, created, err
	}
	return l, created, nil
}

// releaseStateDir unlocks and deletes dir, then the directories claim
// created above it if they are empty (another run may use them), so that a
// job that never needed local state leaves nothing behind.
func releaseStateDir(l stateDirLock, dir string, created []string) error {
	l.release()
	err := os.RemoveAll(dir)
	for _, p := range created {
		if os.Remove(p) != nil {
			break
		}
	}
	return err
}

// removeStaleStateDirs deletes the directories under root whose lock no
// running job holds, except keep.
func removeStaleStateDirs(root, keep string, logger *slog.Logger) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return
	}
	for _, e := range entries {
		dir := filepath.Join(root, e.Name())
		if !e.IsDir() || dir == keep {
			continue
		}
		lockPath := filepath.Join(dir, stateLockName)
		fi, err := os.Stat(lockPath)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err == nil && fi.Size() == 0 && time.Since(fi.ModTime()) < claimGrace {
			continue // being claimed now
		}
		l, err := lockFile(lockPath)
		if err != nil {
			continue // held by a live run, or not ours to judge
		}
		err = os.RemoveAll(dir)
		l.release()
		if err != nil {
			logger.Warn("could not delete the state directory of a dead run", "dir", dir, "err", err)
			continue
		}
		logger.Info("deleted the state directory of a run that did not end cleanly", "dir", dir)
	}
}
