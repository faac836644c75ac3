package ha

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// Leadership is this process's leadership of a cluster, won by Campaign.
// It ends for good when Lost is closed (see the package doc for when). Its
// methods are safe for concurrent use; the store operations (PutJob, ...)
// are fenced: they fail with ErrNotLeader once the leadership has ended.
type Leadership struct {
	e       *Etcd
	session *concurrency.Session
	lease   clientv3.LeaseID
	key     string // the leader key: election prefix + lease id
	rev     int64  // create revision of key: the fencing token
	address string

	lost     chan struct{}
	lostOnce sync.Once

	stop context.CancelFunc // ends the monitor
	done chan struct{}      // closed when the monitor has returned
}

// Lost returns a channel that is closed when the leadership has ended. It
// is never reopened: campaign again for a new leadership.
func (l *Leadership) Lost() <-chan struct{} { return l.lost }

// Epoch returns the leadership's epoch: the create revision of its leader
// key in etcd. Every later leader of the cluster has a higher epoch.
func (l *Leadership) Epoch() int64 { return l.rev }

// Address returns the RPC address published by Campaign.
func (l *Leadership) Address() string { return l.address }

// Resign ends the leadership now: Lost is closed, then the lease is revoked
// so that a standby takes over at once. If etcd cannot be reached before ctx
// ends, Resign returns the error and the leadership ends in etcd when the
// lease expires, within SessionTTL. Resigning again does nothing.
func (l *Leadership) Resign(ctx context.Context) error {
	l.markLost("resigned")
	l.stop()
	<-l.done
	l.session.Orphan()
	if _, err := l.e.client.Revoke(ctx, l.lease); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return fmt.Errorf("ha: resign leadership of cluster %s: revoke lease %x: %w (it ends when the lease expires, within %v)",
			l.e.cfg.ClusterID, l.lease, err, l.e.cfg.SessionTTL)
	}
	return nil
}

// markLost ends the leadership locally, once.
func (l *Leadership) markLost(reason string) {
	l.lostOnce.Do(func() {
		close(l.lost)
		if reason == "resigned" {
			l.e.log.Info("ha: leadership ended", "address", l.address, "epoch", l.rev, "reason", reason)
		} else {
			l.e.log.Warn("ha: leadership lost", "address", l.address, "epoch", l.rev, "reason", reason)
		}
	})
}

// renewal is the outcome of one lease renewal with a check of the leader
// key.
type renewal struct {
	sent time.Time     // when the renewal was sent
	ttl  time.Duration // the TTL etcd granted from then
	lost string        // why the leadership ended, if it did
	err  error         // etcd did not answer
}

// monitor renews the lease every ttl/3, checking the leader key each time,
// and watches the key (watchKey), until the leadership ends or ctx is done. confirmed
// is the sending time of the last renewal etcd confirmed, ttl the TTL it
// granted, and rev the revision from which to watch the key.
//
// The leadership ends locally ttl after the sending of the last confirmed
// renewal: etcd renewed the lease no earlier than that sending, so it
// cannot expire it before.
func (l *Leadership) monitor(ctx context.Context, confirmed time.Time, ttl time.Duration, rev int64) {
	defer close(l.done)
	clk := l.e.cfg.clock
	interval := ttl / 3

	expire := clk.NewTimer(confirmed.Add(ttl).Sub(clk.Now()))
	defer expire.Stop()
	renew := clk.NewTimer(interval)
	defer renew.Stop()

	results := make(chan renewal, 1)
	inflight := false
	defer func() {
		if inflight {
			<-results // the renewal ends by its timeout or ctx
		}
	}()

	// The watch runs in its own goroutine: clientv3's Watch blocks while
	// etcd is unreachable, and the monitor must not miss expire then.
	gone := make(chan string, 1)
	wctx, wcancel := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		l.watchKey(wctx, rev, gone)
	}()
	defer func() {
		wcancel()
		<-watched
	}()

	for {
		select {
		case <-ctx.Done():
			l.markLost("etcd connection closed without resigning: a standby leads once the lease expires")
			return
		case <-l.session.Done():
			l.markLost("lease keep-alive ended: lease expired, revoked, or not renewed within its TTL")
			return
		case <-expire.C():
			l.markLost(fmt.Sprintf("lease renewal not confirmed for %v (etcd unreachable?)", ttl))
			return
		case <-renew.C():
			inflight = true
			go func(sent time.Time) { results <- l.renew(ctx, sent, interval) }(clk.Now())
		case r := <-results:
			inflight = false
			if r.lost != "" {
				l.markLost(r.lost)
				return
			}
			if r.err != nil {
				l.e.log.Warn("ha: lease renewal failed; retrying", "epoch", l.rev, "err", r.err)
			} else {
				expire.Reset(r.sent.Add(r.ttl).Sub(clk.Now()))
			}
			renew.Reset(interval)
		case reason := <-gone:
			l.markLost(reason)
			return
		}
	}
}

// watchKey watches the leader key from revision rev+1 and reports on gone
// (once) when it is deleted or replaced, until ctx is done. After a failed
// watch (compaction) it reads the key and watches again from there.
func (l *Leadership) watchKey(ctx context.Context, rev int64, gone chan<- string) {
	for ctx.Err() == nil {
		wctx, cancel := context.WithCancel(ctx)
		for resp := range l.e.client.Watch(wctx, l.key, clientv3.WithRev(rev+1)) {
			if err := resp.Err(); err != nil {
				l.e.log.Debug("ha: leader key watch ended", "epoch", l.rev, "err", err)
				break
			}
			for _, ev := range resp.Events {
				if ev.Type == mvccpb.DELETE || ev.Kv.CreateRevision != l.rev {
					cancel()
					gone <- "leader key deleted or replaced in etcd"
					return
				}
			}
		}
		cancel()
		if ctx.Err() != nil {
			return
		}
		got, err := l.e.client.Get(ctx, l.key)
		if err != nil {
			l.e.sleep(ctx, retryDelay)
			continue
		}
		if len(got.Kvs) == 0 || got.Kvs[0].CreateRevision != l.rev {
			gone <- "leader key deleted or replaced in etcd"
			return
		}
		rev = got.Header.Revision
	}
}

// renew renews the lease and checks the leader key, both within timeout.
func (l *Leadership) renew(ctx context.Context, sent time.Time, timeout time.Duration) renewal {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	r := renewal{sent: sent}
	ka, err := l.e.client.KeepAliveOnce(ctx, l.lease)
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		r.lost = "lease expired or revoked in etcd"
		return r
	}
	if err != nil {
		r.err = fmt.Errorf("renew lease %x: %w", l.lease, err)
		return r
	}
	r.ttl = time.Duration(ka.TTL) * time.Second
	got, err := l.e.client.Get(ctx, l.key)
	if err != nil {
		r.err = fmt.Errorf("check leader key: %w", err)
		return r
	}
	if len(got.Kvs) == 0 || got.Kvs[0].CreateRevision != l.rev {
		r.lost = "leader key deleted or replaced in etcd"
		return r
	}
	return r
}
