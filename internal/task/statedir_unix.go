//go:build unix

package task

import (
	"os"
	"syscall"
)

type flockLock struct{ f *os.File }

func (l flockLock) release() {
	_ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	_ = l.f.Close()
}

// lockFile takes an exclusive, non-blocking flock on path, creating it.
func lockFile(path string) (stateDirLock, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, err
	}
	return flockLock{f: f}, nil
}
