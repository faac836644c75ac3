//go:build unix

package storage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// errNoFlock: local locks are not available; LockJob uses a lease.
var errNoFlock = errors.New("storage: no local file locks on this platform")

// localAttempts bounds the retries of a local lock whose file is replaced
// while it is taken.
const localAttempts = 10

// localLock is an flock on <job dir>/_lock.
type localLock struct {
	f          *os.File
	path       string
	dir        string
	createdDir bool
}

// lockLocal creates dir if needed and takes an exclusive flock on its lock
// file, then writes me into it.
func lockLocal(dir string, me Holder, force bool, logger *slog.Logger) (*localLock, error) {
	_, err := os.Stat(dir)
	created := errors.Is(err, fs.ErrNotExist)
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	path := filepath.Join(dir, LockFileName)
	for range localAttempts {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			return nil, fmt.Errorf("lock %s: %w", dir, err)
		}
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if errors.Is(err, syscall.EWOULDBLOCK) {
			h := readLockFile(f)
			f.Close()
			if !force {
				return nil, &JobLockedError{Dir: dir, Holder: h}
			}
			// The holder keeps its lock on the old file; its next check
			// sees that the path names another file now, and it stops.
			logger.Warn("taking the lock of the job's checkpoint directory over from a live holder (--force)", "dir", dir, "holder", h.String())
			if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("lock %s: take over: %w", dir, err)
			}
			continue
		}
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		// A holder releasing (or a forced takeover) may have removed the
		// file between our open and our flock: then the lock is on a file
		// nobody else will ever open, and we must start over.
		if ok, _ := sameFile(f, path); !ok {
			f.Close()
			continue
		}
		l := &localLock{f: f, path: path, dir: dir, createdDir: created}
		if err := l.write(me); err != nil {
			l.release(context.Background(), false)
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		return l, nil
	}
	return nil, fmt.Errorf("lock %s: the lock file kept changing while it was taken", path)
}

func (l *localLock) write(me Holder) error {
	data, err := json.Marshal(me)
	if err != nil {
		return err
	}
	if err := l.f.Truncate(0); err != nil {
		return err
	}
	_, err = l.f.WriteAt(append(data, '\n'), 0)
	return err
}

// readLockFile returns the identity the holder wrote into f, zero if it
// cannot be read (the holder may be writing it this instant: a few tries).
func readLockFile(f *os.File) Holder {
	for i := range 5 {
		if i > 0 {
			time.Sleep(2 * time.Millisecond)
		}
		data, err := readAllLimited(io.NewSectionReader(f, 0, 64<<10))
		var h Holder
		if err == nil && json.Unmarshal(data, &h) == nil && h.PID != 0 {
			return h
		}
	}
	return Holder{}
}

// sameFile reports whether path still names the file f is open on.
func sameFile(f *os.File, path string) (bool, error) {
	fi, err := f.Stat()
	if err != nil {
		return false, err
	}
	pi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return os.SameFile(fi, pi), nil
}

// renew checks that the lock file is still ours: only a forced takeover
// replaces it.
func (l *localLock) renew(context.Context, time.Time) (time.Time, error) {
	ok, err := sameFile(l.f, l.path)
	if err != nil {
		return time.Time{}, err
	}
	if !ok {
		who := "another run (weir run --force?)"
		if f, err := os.Open(l.path); err == nil {
			if h := readLockFile(f); h.PID != 0 {
				who = h.String() + " (weir run --force)"
			}
			f.Close()
		}
		return time.Time{}, fmt.Errorf("%w: the lock of %s was taken over by %s", ErrLockLost, l.dir, who)
	}
	return time.Time{}, nil
}

// release deletes the lock file (unless it is another holder's now), then
// unlocks it, and removes the job directory if the lock created it and it
// stayed empty.
func (l *localLock) release(_ context.Context, lost bool) error {
	var err error
	if !lost {
		if ok, _ := sameFile(l.f, l.path); ok {
			if rerr := os.Remove(l.path); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
				err = fmt.Errorf("release %s: %w", l.path, rerr)
			}
		}
	}
	_ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	_ = l.f.Close()
	if l.createdDir && !lost {
		_ = os.Remove(l.dir) // only if empty
	}
	return err
}
