//go:build !unix

package storage

import (
	"context"
	"errors"
	"log/slog"
	"time"
)

// errNoFlock: local locks are not available; LockJob uses a lease on the
// local directory instead (fileblob's conditional create is atomic within
// one process only, so two processes racing for an expired lease can both
// win until the next renewal).
var errNoFlock = errors.New("storage: no local file locks on this platform")

type localLock struct{}

func lockLocal(string, Holder, bool, *slog.Logger) (*localLock, error) { return nil, errNoFlock }

func (*localLock) renew(context.Context, time.Time) (time.Time, error) { return time.Time{}, nil }
func (*localLock) release(context.Context, bool) error                 { return nil }
