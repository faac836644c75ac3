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
	rev  int64         // the revision at which the key was checked
	lost string        // why the leadership ended, if it did
	err  error         // etcd did not answer
}

// monitor renews the lease every ttl/3, checking the leader key each time,
// and watches the key, until the leadership ends or ctx is done. confirmed
// is the sending time of the last renewal etcd confirmed, ttl the TTL it
// granted, and rev the revision from which to watch the key.
//
// The leadership ends locally ttl after the sending of the last confirmed
// renewal: etcd renewed the lease no earlier than that sending, so it
// cannot expire it before.
func (l *Leadership) monitor(ctx context.Context, confirmed time.Time, ttl time.Duration, rev int64) {
	defer l.e.wg.Done()
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

	var wch clientv3.WatchChan
	wcancel := func() {}
	watchFrom := func(rev int64) {
		wcancel()
		var wctx context.Context
		wctx, wcancel = context.WithCancel(ctx)
		wch = l.e.client.Watch(wctx, l.key, clientv3.WithRev(rev+1))
	}
	defer func() { wcancel() }()
	watchFrom(rev)

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
				if wch == nil {
					watchFrom(r.rev)
				}
			}
			renew.Reset(interval)
		case resp, ok := <-wch:
			if !ok || resp.Err() != nil {
				// Compacted or canceled: watch again after the next
				// renewal's key check; events missed meanwhile are
				// covered by that check.
				if ctx.Err() == nil {
					l.e.log.Debug("ha: leader key watch ended", "epoch", l.rev, "err", resp.Err())
				}
				wcancel()
				wch = nil
				continue
			}
			for _, ev := range resp.Events {
				switch {
				case ev.Type == mvccpb.DELETE:
					l.markLost("leader key deleted in etcd")
					return
				case ev.Kv.CreateRevision != l.rev:
					l.markLost("leader key replaced in etcd")
					return
				}
			}
		}
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
	r.rev = got.Header.Revision
	return r
}
