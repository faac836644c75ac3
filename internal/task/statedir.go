package task

import (
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
)

// Local state directories.
//
// Each run of a job works in its own directory under Options.StateDir and
// deletes it at the end. A process killed with SIGKILL cannot: its directory
// (Pebble databases, possibly gigabytes) would stay forever. So a run holds
// an exclusive lock on <dir>/.lock while it lives (the kernel drops it when
// the process dies, however it dies), and every run, when it starts, deletes
// the directories under StateDir whose lock it can take: nobody is using
// them. Directories without a lock file are left alone.

const stateLockName = ".lock"

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
	l, err = lockFile(filepath.Join(dir, stateLockName))
	return l, created, err
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
		if _, err := os.Stat(lockPath); errors.Is(err, fs.ErrNotExist) {
			continue
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
