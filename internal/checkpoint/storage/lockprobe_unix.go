//go:build unix

package storage

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// probeLocal reports whether a run holds the flock of <root>/<job>/_lock,
// without creating the file or keeping the lock.
func probeLocal(root, job string) (Holder, bool, error) {
	path := filepath.Join(root, job, LockFileName)
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Holder{}, false, nil
	}
	if err != nil {
		return Holder{}, false, fmt.Errorf("check the lock %s: %w", path, err)
	}
	defer f.Close()
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return readLockFile(f), true, nil
	}
	if err != nil {
		return Holder{}, false, fmt.Errorf("check the lock %s: %w", path, err)
	}
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return Holder{}, false, nil
}
