package storage

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weirstream/weir/internal/clock"
)

// The job lock.
//
// One job directory (<root>/<job>/) belongs to one running job at a time:
// a second run would delete the first one's checkpoint in progress when it
// starts (incomplete chk-<n> are taken for leftovers of a dead run) and
// sweep shared files it has not referenced yet. LockJob takes the
// directory before anything in it is read or changed; the holder keeps it
// until Release.
//
// On a local directory the lock is an flock(2) on <job>/_lock, which the
// kernel drops when the holder's process ends, however it ends: a run
// started right after a kill -9 gets it at once. The holder writes its
// identity (pid, host, start time) into the file so that a refused run can
// name it.
//
// On object stores (every other scheme, mem:// included) the lock is a
// lease: objects <job>/_lease-<generation> holding the owner and an expiry
// time. The highest generation is the lease. A run takes it by creating the
// next generation with a conditional write (create only if absent), which
// exactly one contender wins; it does so only when the current lease
// expired or was released, or at once with Force. The holder renews in the
// background the same way, creating generation g+1 and deleting g, so a
// renewal fails (and the holder learns it lost the lease) if anyone took
// generation g+1 first. Generations only grow: Release writes a released
// record as the next generation rather than deleting the lease, so one
// small object stays behind after a clean end.
//
// A holder that lost its lock (its lease expired before it could renew,
// or another run took it over with Force) stops writing: the Storage that
// JobLock.Storage returns refuses every write and delete with ErrLockLost,
// and LockOptions.OnLost is called so that the job can be cancelled.
//
// What a lease cannot promise: the expiry is a wall-clock time, so it
// relies on the hosts' clocks agreeing to well within the lease duration;
// and a write the holder started just before its lease ran out can land
// just after another run took over. Buckets that cannot create an object
// only if it is absent (not the case of memblob, fileblob, s3blob, gcsblob
// or azureblob) fall back to check-then-write, where two contenders racing
// for an expired lease can both win until the next renewal, at most
// RenewInterval later, shows one of them that it lost.

// Names of the lock objects in a job directory. Listings of checkpoints,
// jobs and shared files never show them.
const (
	LockFileName = "_lock"
	leasePfx     = "_lease-"
)

// Defaults of LockOptions.
const (
	DefaultLeaseDuration = 30 * time.Second
	DefaultRenewInterval = 10 * time.Second
)

var (
	// ErrJobLocked: another run holds the job directory. The error is a
	// *JobLockedError naming the holder.
	ErrJobLocked = errors.New("storage: job directory in use")
	// ErrLockLost: the job lock was taken over by another run or its lease
	// expired before it could be renewed.
	ErrLockLost = errors.New("storage: job lock lost")
)

// Holder identifies the run that holds a job lock.
type Holder struct {
	// Owner is a random id of the holding lock, unique per LockJob call.
	Owner string    `json:"owner"`
	PID   int       `json:"pid"`
	Host  string    `json:"host"`
	Since time.Time `json:"since"`
	// Expires is the end of the lease unless it is renewed (leases only).
	Expires time.Time `json:"expires,omitzero"`
	// Released marks a lease given up by Release.
	Released bool `json:"released,omitempty"`
}

func (h Holder) String() string {
	return fmt.Sprintf("pid %d on host %s since %s", h.PID, h.Host, h.Since.UTC().Format(time.RFC3339))
}

// JobLockedError is the error of LockJob when another run holds the job
// directory. errors.Is(err, ErrJobLocked) reports it.
type JobLockedError struct {
	// Dir is the job directory (a local path, or the storage URL and the
	// job).
	Dir string
	// Holder is the run that holds it; zero if it could not be read.
	Holder Holder
	// Lease reports a lease rather than a local lock.
	Lease bool
}

func (e *JobLockedError) Error() string {
	who := "another process (its identity could not be read)"
	if e.Holder.PID != 0 || e.Holder.Host != "" {
		who = e.Holder.String()
	}
	s := fmt.Sprintf("checkpoint directory %s is in use by %s", e.Dir, who)
	if e.Lease && !e.Holder.Expires.IsZero() {
		s += fmt.Sprintf(" (its lease runs until %s unless renewed)", e.Holder.Expires.UTC().Format(time.RFC3339))
	}
	return s + "; stop that job, or pass --force if it is dead"
}

// Is makes errors.Is(err, ErrJobLocked) true.
func (e *JobLockedError) Is(target error) bool { return target == ErrJobLocked }

// LockOptions configure LockJob.
type LockOptions struct {
	// Force takes the lock over at once, also from a live holder. The
	// holder notices within its RenewInterval and stops writing, but until
	// then both runs write into the directory: use it only when the holder
	// is known to be dead.
	Force bool
	// LeaseDuration is how long a lease lasts without renewal. Default
	// DefaultLeaseDuration. Object stores only.
	LeaseDuration time.Duration
	// RenewInterval is how often the holder renews its lease, and checks
	// that its local lock file was not taken over with Force. Default
	// DefaultRenewInterval; it must be shorter than LeaseDuration.
	RenewInterval time.Duration
	// Dir names the storage location in errors, e.g. the configured
	// checkpoint directory; local directories are named by their absolute
	// path whatever it says.
	Dir string
	// Clock drives renewals and expiry; default the system clock.
	Clock clock.Clock
	// Logger receives takeovers and renewal problems; default none.
	Logger *slog.Logger
	// OnLost, if set, is called once, from the renewal goroutine or a
	// refused write, when the lock is lost; the error wraps ErrLockLost.
	OnLost func(error)
}

func (o *LockOptions) defaults() error {
	if o.LeaseDuration == 0 {
		o.LeaseDuration = DefaultLeaseDuration
	}
	if o.RenewInterval == 0 {
		o.RenewInterval = DefaultRenewInterval
	}
	if o.LeaseDuration < 0 || o.RenewInterval < 0 || o.RenewInterval >= o.LeaseDuration {
		return fmt.Errorf("job lock: renew interval %v must be positive and shorter than the lease duration %v", o.RenewInterval, o.LeaseDuration)
	}
	if o.Clock == nil {
		o.Clock = clock.Real()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// lockBackend is a held lock of one kind.
type lockBackend interface {
	// renew keeps the lock: it returns the new end of the lease (zero for
	// locks that do not expire), an error wrapping ErrLockLost if the lock
	// is gone, or another error for a failure worth retrying.
	renew(ctx context.Context, now time.Time) (time.Time, error)
	// release gives the lock up; with lost, only frees local resources.
	release(ctx context.Context, lost bool) error
}

// JobLock is a held job lock. Release it when the job ends.
type JobLock struct {
	opts     LockOptions
	dir      string
	me       Holder
	b        lockBackend
	fenced   *Storage
	deadline atomic.Int64 // UnixNano by opts.Clock after which the lease is gone; 0: none

	mu      sync.Mutex
	lostErr error

	ctx     context.Context // of renewals; cancelled by Release
	cancel  context.CancelFunc
	done    chan struct{}
	release sync.Once
	relErr  error
}

// LockJob takes the lock of job's directory for this process, or fails
// with a *JobLockedError (errors.Is ErrJobLocked) naming the holder. The
// lock is kept, and renewed in the background, until Release. Use the
// Storage the lock returns for everything the job writes, so that writes
// stop if the lock is lost.
func (s *Storage) LockJob(ctx context.Context, job string, o LockOptions) (*JobLock, error) {
	j, err := SanitizeJob(job)
	if err != nil {
		return nil, err
	}
	if err := o.defaults(); err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	l := &JobLock{opts: o, done: make(chan struct{}),
		me: Holder{Owner: randomOwner(), PID: os.Getpid(), Host: host, Since: o.Clock.Now().UTC()}}
	if fb, ok := s.b.(*fileBucket); ok {
		l.dir = filepath.Join(fb.root, j)
		b, err := lockLocal(l.dir, l.me, o.Force, o.Logger)
		switch {
		case err == nil:
			l.b = b
		case !errors.Is(err, errNoFlock):
			return nil, err
		}
	}
	if l.b == nil {
		l.dir = j
		if o.Dir != "" {
			l.dir = strings.TrimSuffix(o.Dir, "/") + "/" + j
			if strings.HasSuffix(o.Dir, "//") { // mem://
				l.dir = o.Dir + j
			}
		}
		le := &lease{b: s.b, prefix: j + "/", dir: l.dir, me: l.me, opts: &l.opts}
		expires, err := le.acquire(ctx)
		if err != nil {
			return nil, err
		}
		l.deadline.Store(expires.UnixNano())
		l.b = le
	}
	l.fenced = &Storage{b: &fencedBucket{b: s.b, l: l}, loc: s.loc, shown: s.shown} // the same storage, as Same and messages see it
	l.ctx, l.cancel = context.WithCancel(context.WithoutCancel(ctx))
	go l.loop()
	return l, nil
}

func randomOwner() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Storage returns the storage the lock was taken on, restricted to this
// holder: once the lock is lost, every write and delete fails with an
// error wrapping ErrLockLost. Closing it does not close the underlying
// storage.
func (l *JobLock) Storage() *Storage { return l.fenced }

// Holder returns this lock's identity as other runs see it.
func (l *JobLock) Holder() Holder { return l.me }

// Dir returns the job directory the lock guards, as errors name it.
func (l *JobLock) Dir() string { return l.dir }

// Err returns nil while the lock is held, and why it was lost after
// (wrapping ErrLockLost).
func (l *JobLock) Err() error {
	if err := l.lost(); err != nil {
		return err
	}
	if d := l.deadline.Load(); d != 0 && !l.opts.Clock.Now().Before(time.Unix(0, d)) {
		return l.markLost(fmt.Errorf("%w: the lease on %s ran out at %s before it was renewed",
			ErrLockLost, l.dir, time.Unix(0, d).UTC().Format(time.RFC3339Nano)))
	}
	return nil
}

func (l *JobLock) lost() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lostErr
}

// markLost records err as the reason the lock was lost, the first time,
// and returns the recorded reason.
func (l *JobLock) markLost(err error) error {
	l.mu.Lock()
	first := l.lostErr == nil
	if first {
		l.lostErr = err
	}
	err = l.lostErr
	l.mu.Unlock()
	if first {
		l.opts.Logger.Error("lost the lock of the job's checkpoint directory; the job stops writing to it", "dir", l.dir, "err", err)
		if l.opts.OnLost != nil {
			l.opts.OnLost(err)
		}
	}
	return err
}

// loop renews the lock every RenewInterval until Release, retrying sooner
// after a failure, until it is lost.
func (l *JobLock) loop() {
	defer close(l.done)
	c := l.opts.Clock
	t := c.NewTimer(l.opts.RenewInterval)
	defer t.Stop()
	for {
		select {
		case <-l.ctx.Done():
			return
		case <-t.C():
		}
		if l.Err() != nil {
			return
		}
		expires, err := l.b.renew(l.ctx, c.Now())
		switch {
		case l.ctx.Err() != nil:
			return
		case err == nil:
			if !expires.IsZero() {
				l.deadline.Store(expires.UnixNano())
			}
			t.Reset(l.opts.RenewInterval)
		case errors.Is(err, ErrLockLost):
			l.markLost(err)
			return
		default:
			l.opts.Logger.Warn("could not renew the lock of the job's checkpoint directory; retrying", "dir", l.dir, "err", err)
			if l.Err() != nil {
				return
			}
			t.Reset(max(l.opts.RenewInterval/4, time.Millisecond))
		}
	}
}

// Release stops renewing and gives the lock up (unless it was lost, in
// which case it belongs to another run now). Only the first call acts.
func (l *JobLock) Release(ctx context.Context) error {
	l.release.Do(func() {
		l.cancel()
		<-l.done
		l.relErr = l.b.release(ctx, l.lost() != nil)
	})
	return l.relErr
}

// readAllLimited reads a small object.
func readAllLimited(r io.Reader) ([]byte, error) {
	return io.ReadAll(io.LimitReader(r, 64<<10))
}

// fencedBucket passes every operation to b while l is held and refuses
// writes and deletes once it is lost. It does not own b.
type fencedBucket struct {
	b Bucket
	l *JobLock
}

var (
	_ Bucket     = (*fencedBucket)(nil)
	_ dirRemover = (*fencedBucket)(nil)
)

func (f *fencedBucket) NewWriter(ctx context.Context, key string) (ObjectWriter, error) {
	if err := f.l.Err(); err != nil {
		return nil, fmt.Errorf("write %s: %w", key, err)
	}
	w, err := f.b.NewWriter(ctx, key)
	if err != nil {
		return nil, err
	}
	return &fencedWriter{ObjectWriter: w, key: key, l: f.l}, nil
}

func (f *fencedBucket) NewReader(ctx context.Context, key string) (io.ReadCloser, error) {
	return f.b.NewReader(ctx, key)
}

func (f *fencedBucket) Attributes(ctx context.Context, key string) (ObjectInfo, error) {
	return f.b.Attributes(ctx, key)
}

func (f *fencedBucket) Delete(ctx context.Context, key string) error {
	if err := f.l.Err(); err != nil {
		return fmt.Errorf("delete %s: %w", key, err)
	}
	return f.b.Delete(ctx, key)
}

func (f *fencedBucket) List(ctx context.Context, prefix, delimiter string) ([]ObjectInfo, error) {
	return f.b.List(ctx, prefix, delimiter)
}

func (f *fencedBucket) Close() error { return nil }

func (f *fencedBucket) RemoveEmptyDir(prefix string) {
	if r, ok := f.b.(dirRemover); ok && f.l.Err() == nil {
		r.RemoveEmptyDir(prefix)
	}
}

// fencedWriter refuses to publish its object once the lock is lost.
type fencedWriter struct {
	ObjectWriter
	key string
	l   *JobLock
}

func (w *fencedWriter) Finish() error {
	if err := w.l.Err(); err != nil {
		_ = w.ObjectWriter.Abort()
		return fmt.Errorf("write %s: %w", w.key, err)
	}
	return w.ObjectWriter.Finish()
}
