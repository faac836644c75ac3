package ha

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
)

// Errors of the package. Check them with errors.Is.
var (
	// ErrUnreachable is returned by Open when etcd does not answer within
	// Config.DialTimeout.
	ErrUnreachable = errors.New("etcd unreachable")
	// ErrNoLeader is returned by Leader when no process leads the cluster.
	ErrNoLeader = errors.New("no leader")
	// ErrNotLeader is returned by the operations of a Leadership that has
	// ended, whether the process noticed it first (Lost closed) or etcd
	// refused the transaction.
	ErrNotLeader = errors.New("not the leader")
	// ErrCounterDecrease is returned by SetCheckpointCounter for a value
	// below the stored one: checkpoint ids are never reused.
	ErrCounterDecrease = errors.New("checkpoint counter cannot go down")
	// ErrJobTerminal is returned when a job already has a terminal status:
	// by PutJob, and by SetJobStatus with another status.
	ErrJobTerminal = errors.New("job already has a terminal status")
	// ErrClosed is returned by Campaign once Close was called.
	ErrClosed = errors.New("etcd connection closed")
	// ErrJobNotTerminal is returned by RemoveJob for a job without a
	// terminal status: a job's data is removed only after its end is stored.
	ErrJobNotTerminal = errors.New("job has no terminal status")
)

// retryDelay is the pause of the background loops after an etcd error.
const retryDelay = 500 * time.Millisecond

// Etcd is a connection to etcd for one cluster id. Its methods are safe for
// concurrent use.
type Etcd struct {
	cfg    Config
	log    *slog.Logger
	client *clientv3.Client
	keys   keyspace

	// ctx is canceled by Close; it ends every goroutine in wg.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	closed bool // set by Close; no goroutine joins wg after it

	closeOnce sync.Once
	closeErr  error
}

// Open validates cfg, connects to etcd and checks that it answers a read
// within cfg.DialTimeout; otherwise it fails with an error that wraps
// ErrUnreachable and names the endpoints.
func Open(ctx context.Context, cfg Config) (*Etcd, error) {
	cfg.Endpoints = append([]string(nil), cfg.Endpoints...)
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	endpoints := strings.Join(cfg.Endpoints, ",")
	client, err := clientv3.New(clientv3.Config{
		Endpoints:   cfg.Endpoints,
		DialTimeout: cfg.DialTimeout,
		TLS:         cfg.TLS,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("ha: connect to etcd at %s: %w", endpoints, err)
	}
	keys := newKeyspace(cfg.ClusterID)
	// clientv3.New does not wait for a connection. A linearizable read
	// shows that a quorum of the cluster answers.
	probe, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
	_, err = client.Get(probe, keys.election(), clientv3.WithPrefix(), clientv3.WithCountOnly())
	cancel()
	if err != nil {
		client.Close()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("ha: connect to etcd at %s: %w", endpoints, ctx.Err())
		}
		return nil, fmt.Errorf("ha: %w: no answer from %s within %v (DialTimeout): %v; check that etcd runs there and is reachable (high-availability.etcd.endpoints)",
			ErrUnreachable, endpoints, cfg.DialTimeout, err)
	}
	e := &Etcd{cfg: cfg, log: cfg.Logger.With("cluster", cfg.ClusterID), client: client, keys: keys}
	e.ctx, e.cancel = context.WithCancel(context.Background())
	return e, nil
}

// Close ends the WatchLeader channels and the leaderships of e (their Lost
// channels close), waits for e's goroutines and closes the connection. It
// does not resign: see the package doc. Later calls return the first
// result.
func (e *Etcd) Close() error {
	e.closeOnce.Do(func() {
		e.mu.Lock()
		e.closed = true
		e.mu.Unlock()
		e.cancel()
		e.wg.Wait()
		e.closeErr = e.client.Close()
	})
	return e.closeErr
}

// goTracked runs f in a goroutine that Close waits for, unless e is closed;
// it reports whether it started f.
func (e *Etcd) goTracked(f func()) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return false
	}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		f()
	}()
	return true
}

// Leader returns the RPC address of the cluster's current leader, or
// ErrNoLeader. It is the address of the oldest candidate: right after a
// leader's end that is its successor, which may not have returned from
// Campaign yet; a task manager that registers too early is refused and
// retries.
func (e *Etcd) Leader(ctx context.Context) (string, error) {
	addr, _, err := e.leader(ctx)
	return addr, err
}

// leader returns the leader's address and the revision it was read at.
func (e *Etcd) leader(ctx context.Context) (string, int64, error) {
	resp, err := e.client.Get(ctx, e.keys.election()+"/", clientv3.WithFirstCreate()...)
	if err != nil {
		return "", 0, fmt.Errorf("ha: read leader of cluster %s: %w", e.cfg.ClusterID, err)
	}
	if len(resp.Kvs) == 0 {
		return "", resp.Header.Revision, ErrNoLeader
	}
	return string(resp.Kvs[0].Value), resp.Header.Revision, nil
}

// WatchLeader returns a channel that receives the current leader's address
// and then every change of it; "" means that no process leads at the moment
// (between a leader's end and its successor's start). It does not repeat an
// address it just sent. If etcd is unreachable the channel waits and the
// watch resumes when etcd is back.
//
// The channel is closed when ctx is done or e is closed. The receiver should
// keep receiving until then; a value it has not received yet blocks newer
// ones.
func (e *Etcd) WatchLeader(ctx context.Context) <-chan string {
	ch := make(chan string)
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(e.ctx, cancel)
	started := e.goTracked(func() {
		defer close(ch)
		defer stop()
		defer cancel()
		e.watchLeader(ctx, ch)
	})
	if !started {
		stop()
		cancel()
		close(ch)
	}
	return ch
}

func (e *Etcd) watchLeader(ctx context.Context, ch chan<- string) {
	sent, last := false, ""
	for ctx.Err() == nil {
		addr, rev, err := e.leader(ctx)
		if err != nil && !errors.Is(err, ErrNoLeader) {
			if ctx.Err() == nil {
				e.log.Warn("ha: watch leader: retrying", "err", err)
				e.sleep(ctx, retryDelay)
			}
			continue
		}
		if !sent || addr != last {
			select {
			case ch <- addr:
				sent, last = true, addr
			case <-ctx.Done():
				return
			}
		}
		// Wait for any change under the election prefix, then read the
		// leader again. WithRequireLeader ends the watch when the etcd
		// member is cut off from its cluster's quorum, instead of staying
		// silent.
		wctx, wcancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		for resp := range e.client.Watch(wctx, e.keys.election()+"/", clientv3.WithPrefix(), clientv3.WithRev(rev+1)) {
			if err := resp.Err(); err != nil {
				e.log.Debug("ha: watch leader: watch ended, reading again", "err", err)
				break
			}
			if len(resp.Events) > 0 {
				break
			}
		}
		wcancel()
	}
}

// sleep waits d or until ctx is done.
func (e *Etcd) sleep(ctx context.Context, d time.Duration) {
	t := e.cfg.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
	case <-ctx.Done():
	}
}

// errCandidacyEnded says a campaign won after the candidate's lease or key
// was gone (etcd was unreachable past the TTL during the wait).
var errCandidacyEnded = errors.New("candidacy ended while campaigning")

// Campaign blocks until this process leads the cluster, then returns the
// Leadership; address is the RPC address that Leader and WatchLeader report
// to the task managers. It returns ctx's error if ctx ends first (the
// candidacy is then withdrawn; if etcd is unreachable at that moment,
// Campaign returns once etcd answers or e is closed). If the candidate's
// lease expires while it waits (etcd unreachable for longer than
// SessionTTL), it campaigns again with a new lease.
func (e *Etcd) Campaign(ctx context.Context, address string) (*Leadership, error) {
	if address == "" {
		return nil, errors.New("ha: campaign: empty address; want the job manager's RPC address (host:port)")
	}
	if e.ctx.Err() != nil {
		return nil, fmt.Errorf("ha: campaign: %w", ErrClosed)
	}
	for {
		l, err := e.campaignOnce(ctx, address)
		if !errors.Is(err, errCandidacyEnded) {
			return l, err
		}
		e.log.Warn("ha: candidacy ended before it won (lease expired); campaigning again", "address", address)
	}
}

func (e *Etcd) campaignOnce(ctx context.Context, address string) (*Leadership, error) {
	clk := e.cfg.clock
	ttl := int64(e.cfg.SessionTTL / time.Second)
	grant, err := e.client.Grant(ctx, ttl)
	if err != nil {
		return nil, fmt.Errorf("ha: campaign for cluster %s: grant lease: %w", e.cfg.ClusterID, err)
	}
	session, err := concurrency.NewSession(e.client, concurrency.WithLease(grant.ID), concurrency.WithContext(e.ctx))
	if err != nil {
		e.revoke(grant.ID)
		return nil, fmt.Errorf("ha: campaign for cluster %s: session: %w", e.cfg.ClusterID, err)
	}
	withdraw := func() {
		session.Orphan()
		e.revoke(grant.ID)
	}
	election := concurrency.NewElection(session, e.keys.election())
	e.log.Info("ha: campaigning", "address", address, "lease", fmt.Sprintf("%x", grant.ID))
	if err := election.Campaign(ctx, address); err != nil {
		withdraw()
		select {
		case <-session.Done():
			if ctx.Err() == nil && e.ctx.Err() == nil {
				return nil, errCandidacyEnded
			}
		default:
		}
		return nil, fmt.Errorf("ha: campaign for cluster %s: %w", e.cfg.ClusterID, err)
	}

	// Campaign can win after the lease expired during the wait, with the
	// key gone. Renew the lease (the monitor's clock starts at this
	// renewal's sending) and check that the key is still this candidate's.
	sent := clk.Now()
	ka, err := e.client.KeepAliveOnce(ctx, grant.ID)
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		withdraw()
		return nil, errCandidacyEnded
	}
	if err != nil {
		withdraw()
		return nil, fmt.Errorf("ha: campaign for cluster %s: renew lease after winning: %w", e.cfg.ClusterID, err)
	}
	key, rev := election.Key(), election.Rev()
	got, err := e.client.Get(ctx, key)
	if err != nil {
		withdraw()
		return nil, fmt.Errorf("ha: campaign for cluster %s: check leader key: %w", e.cfg.ClusterID, err)
	}
	if len(got.Kvs) == 0 || got.Kvs[0].CreateRevision != rev {
		withdraw()
		return nil, errCandidacyEnded
	}

	l := &Leadership{
		e:       e,
		session: session,
		lease:   grant.ID,
		key:     key,
		rev:     rev,
		address: address,
		lost:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	var mctx context.Context
	mctx, l.stop = context.WithCancel(e.ctx)
	if !e.goTracked(func() { l.monitor(mctx, sent, time.Duration(ka.TTL)*time.Second, got.Header.Revision) }) {
		l.stop()
		return nil, fmt.Errorf("ha: campaign: %w", ErrClosed)
	}
	e.log.Info("ha: leading", "address", address, "epoch", rev, "ttl", time.Duration(ka.TTL)*time.Second)
	return l, nil
}

// revoke revokes the lease of a failed campaign, waiting at most
// DialTimeout: if it fails, the lease expires on its own.
func (e *Etcd) revoke(id clientv3.LeaseID) {
	ctx, cancel := context.WithTimeout(context.Background(), e.cfg.DialTimeout)
	defer cancel()
	if _, err := e.client.Revoke(ctx, id); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		e.log.Debug("ha: revoke lease", "lease", fmt.Sprintf("%x", id), "err", err)
	}
}
