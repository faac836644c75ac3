package storage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
)

// leaseAttempts bounds the rounds of one acquisition lost to concurrent
// renewals or contenders.
const leaseAttempts = 20

// errExists: a conditional create found the object present.
var errExists = errors.New("storage: object exists")

// lease is a held lease on an object store; see lock.go.
type lease struct {
	b      Bucket
	prefix string // "<job>/"
	dir    string // for messages
	me     Holder
	opts   *LockOptions
	gen    int64 // the generation this holder created last
}

func (le *lease) key(gen int64) string {
	return le.prefix + leasePfx + strconv.FormatInt(gen, 10)
}

// generations lists the lease generations present, ascending. Temporary
// files and anything else not named _lease-<n> are ignored.
func (le *lease) generations(ctx context.Context) ([]int64, error) {
	objs, err := le.b.List(ctx, le.prefix+leasePfx, "/")
	if err != nil {
		return nil, fmt.Errorf("list the lease of %s: %w", le.dir, err)
	}
	var gens []int64
	for _, o := range objs {
		rest := strings.TrimPrefix(o.Key, le.prefix+leasePfx)
		g, err := strconv.ParseInt(rest, 10, 64)
		if o.IsDir || err != nil || g < 1 || strconv.FormatInt(g, 10) != rest {
			continue
		}
		gens = append(gens, g)
	}
	slices.Sort(gens)
	return gens, nil
}

// errBadLease: a lease object that does not decode.
var errBadLease = errors.New("storage: unreadable lease")

func (le *lease) read(ctx context.Context, gen int64) (Holder, error) {
	r, err := le.b.NewReader(ctx, le.key(gen))
	if err != nil {
		return Holder{}, err
	}
	defer r.Close()
	data, err := readAllLimited(r)
	if err != nil {
		return Holder{}, err
	}
	var h Holder
	if err := json.Unmarshal(data, &h); err != nil || h.Owner == "" {
		return Holder{}, fmt.Errorf("%s: %w", le.key(gen), errBadLease)
	}
	return h, nil
}

func (le *lease) create(ctx context.Context, gen int64, h Holder) error {
	data, err := json.Marshal(h)
	if err != nil {
		return err
	}
	return createIfAbsent(ctx, le.b, le.key(gen), data)
}

// deleteBelow deletes the generations in gens lower than gen, ignoring
// failures: a stray lower generation is never the lease.
func (le *lease) deleteBelow(ctx context.Context, gens []int64, gen int64) {
	for _, g := range gens {
		if g < gen {
			_ = le.b.Delete(ctx, le.key(g))
		}
	}
}

// acquire takes the lease and returns its expiry.
func (le *lease) acquire(ctx context.Context) (time.Time, error) {
	for range leaseAttempts {
		gens, err := le.generations(ctx)
		if err != nil {
			return time.Time{}, err
		}
		next := int64(1)
		if len(gens) > 0 {
			top := gens[len(gens)-1]
			h, err := le.read(ctx, top)
			now := le.opts.Clock.Now()
			switch {
			case errors.Is(err, ErrNotFound):
				continue // renewed or released meanwhile: look again
			case errors.Is(err, errBadLease) && !le.opts.Force:
				return time.Time{}, &JobLockedError{Dir: le.dir, Lease: true}
			case errors.Is(err, errBadLease):
				le.opts.Logger.Warn("taking over an unreadable lease (--force)", "dir", le.dir)
			case err != nil:
				return time.Time{}, fmt.Errorf("read the lease of %s: %w", le.dir, err)
			case h.Released:
			case now.Before(h.Expires) && !le.opts.Force:
				return time.Time{}, &JobLockedError{Dir: le.dir, Holder: h, Lease: true}
			case now.Before(h.Expires):
				le.opts.Logger.Warn("taking the lease of the job's checkpoint directory over from a live holder (--force)",
					"dir", le.dir, "holder", h.String(), "expires", h.Expires)
			default:
				le.opts.Logger.Info("taking over the expired lease of the job's checkpoint directory",
					"dir", le.dir, "holder", h.String(), "expired", h.Expires)
			}
			next = top + 1
		}
		now := le.opts.Clock.Now()
		h := le.me
		h.Expires = now.Add(le.opts.LeaseDuration)
		switch err := le.create(ctx, next, h); {
		case errors.Is(err, errExists):
			continue // another contender or a renewal was first
		case err != nil:
			return time.Time{}, fmt.Errorf("take the lease of %s: %w", le.dir, err)
		}
		le.gen = next
		le.deleteBelow(ctx, gens, next)
		return h.Expires, nil
	}
	return time.Time{}, fmt.Errorf("take the lease of %s: gave up after %d attempts: other runs keep changing it", le.dir, leaseAttempts)
}

// renew creates the next generation; if someone else did, the lease is
// lost.
func (le *lease) renew(ctx context.Context, now time.Time) (time.Time, error) {
	next := le.gen + 1
	h := le.me
	h.Expires = now.Add(le.opts.LeaseDuration)
	err := le.create(ctx, next, h)
	if errors.Is(err, errExists) {
		// An earlier attempt that reported a failure may have been stored.
		got, rerr := le.read(ctx, next)
		switch {
		case rerr == nil && got.Owner == le.me.Owner:
			h, err = got, nil
		case rerr == nil:
			return time.Time{}, fmt.Errorf("%w: the lease on %s was taken over by %s", ErrLockLost, le.dir, got.String())
		case errors.Is(rerr, errBadLease), errors.Is(rerr, ErrNotFound):
			// Gone again: only the holder of a newer generation deletes
			// older ones.
			return time.Time{}, fmt.Errorf("%w: the lease on %s was taken over by another run", ErrLockLost, le.dir)
		default:
			return time.Time{}, fmt.Errorf("renew the lease of %s: %w", le.dir, rerr)
		}
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("renew the lease of %s: %w", le.dir, err)
	}
	le.gen = next
	gens, err := le.generations(ctx)
	if err != nil {
		return h.Expires, nil // renewed; the cleanup waits for the next time
	}
	if len(gens) > 0 && gens[len(gens)-1] > next {
		// Generation next was free only because a newer holder had
		// already replaced it: the lease is theirs.
		who := "another run"
		if got, err := le.read(ctx, gens[len(gens)-1]); err == nil {
			who = got.String()
		}
		return time.Time{}, fmt.Errorf("%w: the lease on %s was taken over by %s", ErrLockLost, le.dir, who)
	}
	le.deleteBelow(ctx, gens, next)
	return h.Expires, nil
}

// release records the lease as released in the next generation, so that
// the next run need not wait for it to expire, and deletes the current one.
func (le *lease) release(ctx context.Context, lost bool) error {
	if lost {
		return nil
	}
	h := le.me
	h.Released, h.Expires = true, le.opts.Clock.Now()
	for {
		err := le.create(ctx, le.gen+1, h)
		if errors.Is(err, errExists) {
			// Ours if a renewal cut short by Release got it stored;
			// otherwise the lease was taken over: nothing to release.
			if got, rerr := le.read(ctx, le.gen+1); rerr == nil && got.Owner == le.me.Owner && !got.Released {
				le.gen++
				continue
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("release the lease of %s: %w", le.dir, err)
		}
		_ = le.b.Delete(ctx, le.key(le.gen))
		return nil
	}
}

// conditionalCreator is implemented by buckets that can create an object
// only if it does not exist, atomically.
type conditionalCreator interface {
	createIfAbsent(ctx context.Context, key string, data []byte) error
}

// createIfAbsent writes data to key unless key exists (an error wrapping
// errExists then). Buckets without conditional writes get check-then-write,
// which two writers can both pass.
func createIfAbsent(ctx context.Context, b Bucket, key string, data []byte) error {
	if c, ok := b.(conditionalCreator); ok {
		return c.createIfAbsent(ctx, key, data)
	}
	switch _, err := b.Attributes(ctx, key); {
	case err == nil:
		return fmt.Errorf("%s: %w", key, errExists)
	case !errors.Is(err, ErrNotFound):
		return err
	}
	w, err := b.NewWriter(ctx, key)
	if err != nil {
		return err
	}
	if _, err := w.Write(data); err != nil {
		_ = w.Abort()
		return err
	}
	return w.Finish()
}

var _ conditionalCreator = (*blobBucket)(nil)

// createIfAbsent uses blob.WriterOptions.IfNotExist, which every gocloud
// driver weir links implements atomically (S3: If-None-Match: *; memblob
// under its lock; fileblob only within one process, but local directories
// use flock instead).
func (b *blobBucket) createIfAbsent(ctx context.Context, key string, data []byte) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := b.b.NewWriter(ctx, key, &blob.WriterOptions{ContentType: "application/json", IfNotExist: true})
	if err != nil {
		return translateExists(key, err)
	}
	if _, err := w.Write(data); err != nil {
		cancel()
		_ = w.Close()
		return translateExists(key, err)
	}
	return translateExists(key, w.Close())
}

func translateExists(key string, err error) error {
	// S3 answers 412 PreconditionFailed when the object exists, and 409
	// ConditionalRequestConflict when a concurrent conditional write to the
	// same key won.
	if err != nil && (gcerrors.Code(err) == gcerrors.FailedPrecondition || strings.Contains(err.Error(), "ConditionalRequestConflict")) {
		return fmt.Errorf("%s: %w: %w", key, errExists, err)
	}
	return translate(err)
}
