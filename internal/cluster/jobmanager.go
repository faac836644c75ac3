package cluster

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weirstream/weir/internal/graph"
	"github.com/weirstream/weir/internal/runner"
	"github.com/weirstream/weir/internal/task"
)

// Defaults of the job manager's settings, Flink's where the key is the same.
const (
	DefaultRPCPort           = 6123
	DefaultHeartbeatInterval = 10 * time.Second
	DefaultHeartbeatTimeout  = 50 * time.Second
	DefaultSlotTimeout       = 5 * time.Minute
)

// JobManagerConfig configures a job manager.
type JobManagerConfig struct {
	// Address is host:port the RPC server listens on
	// (jobmanager.rpc.address, jobmanager.rpc.port).
	Address string
	// Spec is the job every task manager builds.
	Spec JobSpec
	// MinSlots is how many slots must be registered before the first
	// deployment (jobmanager.scheduler.min-slots); the job's need (its
	// highest parallelism) when that is more.
	MinSlots int
	// HeartbeatInterval and HeartbeatTimeout: Flink's heartbeat.interval
	// and heartbeat.timeout (10s, 50s).
	HeartbeatInterval, HeartbeatTimeout time.Duration
	// SlotTimeout bounds the wait for slots of one deployment
	// (slot.request.timeout, 5 min).
	SlotTimeout time.Duration
	Security    Security
	Logger      *slog.Logger
}

// JobManager is the job manager's RPC endpoint and scheduler: task
// managers register with it, and Deploy places an attempt of the job in
// their slots.
type JobManager struct {
	cfg JobManagerConfig
	lis net.Listener
	srv *grpc.Server
	log *slog.Logger

	mu      sync.Mutex
	tms     map[string]*tmConn
	order   []string      // registration order
	changed chan struct{} // closed when a task manager comes or goes
	nextTM  int
	attempt uint64
	current *remoteDeployment
	closed  bool
	// restores are the ended attempts' restore figures, in order.
	restores []AttemptRestore
	// deployed counts the deployments so far.
	deployed int
}

// AttemptRestore is what the task managers of one attempt read to restore
// keyed state: bytes from checkpoint storage and from their local copies
// (local recovery).
type AttemptRestore struct{ Store, Local int64 }

// Restores returns the restore figures of the attempts that ended so far.
func (jm *JobManager) Restores() []AttemptRestore {
	jm.mu.Lock()
	defer jm.mu.Unlock()
	return slices.Clone(jm.restores)
}

// tmConn is one registered task manager.
type tmConn struct {
	id, name, dataAddr string
	slots              int
	out                chan toTM
	done               chan struct{} // closed when its session ended
	lastSeen           atomic.Int64  // unix nanos of the last message
}

// send queues m for the task manager; it is dropped if the session ended.
func (c *tmConn) send(m toTM) {
	select {
	case c.out <- m:
	case <-c.done:
	}
}

// NewJobManager listens on cfg.Address and serves task managers until
// Close.
func NewJobManager(cfg JobManagerConfig) (*JobManager, error) {
	if cfg.HeartbeatInterval <= 0 {
		cfg.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if cfg.HeartbeatTimeout <= 0 {
		cfg.HeartbeatTimeout = DefaultHeartbeatTimeout
	}
	if cfg.HeartbeatTimeout <= cfg.HeartbeatInterval {
		return nil, fmt.Errorf("heartbeat.timeout %s must be longer than heartbeat.interval %s", cfg.HeartbeatTimeout, cfg.HeartbeatInterval)
	}
	if cfg.SlotTimeout <= 0 {
		cfg.SlotTimeout = DefaultSlotTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Spec.Job == "" {
		return nil, errors.New("job manager: no job to run")
	}
	if err := cfg.Security.checkExposure("the job manager's RPC server", cfg.Address); err != nil {
		return nil, err
	}
	opts := []grpc.ServerOption{grpc.ForceServerCodec(jsonCodec{}), grpc.MaxRecvMsgSize(maxMessage), grpc.MaxSendMsgSize(maxMessage)}
	creds, err := cfg.Security.serverCredentials()
	if err != nil {
		return nil, err
	}
	if creds != nil {
		opts = append(opts, creds)
	}
	lis, err := net.Listen("tcp", cfg.Address)
	if err != nil {
		return nil, fmt.Errorf("job manager RPC address %s (jobmanager.rpc.address, jobmanager.rpc.port): %w", cfg.Address, err)
	}
	jm := &JobManager{cfg: cfg, lis: lis, srv: grpc.NewServer(opts...), log: cfg.Logger,
		tms: map[string]*tmConn{}, changed: make(chan struct{}), attempt: attemptBase()}
	jm.srv.RegisterService(&serviceDesc, jm)
	go func() { _ = jm.srv.Serve(lis) }()
	jm.log.Info("job manager listening", "address", lis.Addr().String(), "job", cfg.Spec.Job)
	return jm, nil
}

// attemptBase starts a job manager's attempt ids at a random multiple of
// 2^32: task managers outlive job managers (a failover), and their data
// planes refuse an attempt id they have already closed, so the ids of two
// job managers must not meet.
func attemptBase() uint64 {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return uint64(binary.BigEndian.Uint32(b[:])&0x7fffffff) << 32
}

// Addr is the address the RPC server listens on.
func (jm *JobManager) Addr() string { return jm.lis.Addr().String() }

// Close stops the RPC server; every task manager's session ends.
func (jm *JobManager) Close() error {
	jm.mu.Lock()
	jm.closed = true
	jm.mu.Unlock()
	jm.srv.Stop()
	return nil
}

// Attempts returns how many attempts of the job were deployed so far.
func (jm *JobManager) Attempts() uint64 {
	jm.mu.Lock()
	defer jm.mu.Unlock()
	return jm.attempt & (1<<32 - 1)
}

// TaskManagers returns the number of registered task managers and their
// slots.
func (jm *JobManager) TaskManagers() (tms, slots int) {
	jm.mu.Lock()
	defer jm.mu.Unlock()
	for _, c := range jm.tms {
		slots += c.slots
	}
	return len(jm.tms), slots
}

// session serves one task manager's stream.
func (jm *JobManager) session(stream grpc.ServerStream) error {
	// The handshake: hello (the task manager's nonce), challenge (ours
	// and our proof of the token), register (its proof).
	var hello toJM
	if err := stream.RecvMsg(&hello); err != nil {
		return err
	}
	if hello.Hello == nil || len(hello.Hello.Nonce) != nonceSize {
		return status.Error(codes.InvalidArgument, "a session must open with a hello carrying a nonce: is the peer a weir task manager of the same version?")
	}
	nonce := newNonce()
	if err := stream.SendMsg(&toTM{Challenge: &challengeMsg{Nonce: nonce,
		Proof: proofOf(jm.cfg.Security.Token, roleJobManager, hello.Hello.Nonce, nonce)}}); err != nil {
		return err
	}
	var first toJM
	if err := stream.RecvMsg(&first); err != nil {
		// A task manager that found our proof wrong hangs up here.
		jm.log.Debug("a task manager hung up before registering", "err", err)
		return err
	}
	reg := first.Register
	if reg == nil {
		return status.Error(codes.InvalidArgument, "the second message of a session must register the task manager")
	}
	if !hmac.Equal(reg.Proof, proofOf(jm.cfg.Security.Token, roleTaskManager, nonce, hello.Hello.Nonce)) {
		err := status.Error(codes.PermissionDenied, "the task manager does not hold the job manager's cluster token: set the same security.cluster.token on every process")
		jm.log.Warn("task manager refused", "name", reg.Name, "data", reg.DataAddr, "err", err)
		return err
	}
	if err := jm.admit(reg); err != nil {
		jm.log.Warn("task manager refused", "name", reg.Name, "data", reg.DataAddr, "err", err)
		return err
	}
	c := jm.register(reg)
	jm.log.Info("task manager registered", "id", c.id, "name", c.name, "slots", c.slots, "data", c.dataAddr)
	ctx := stream.Context()
	recvErr := make(chan error, 1)
	go func() {
		for {
			var m toJM
			if err := stream.RecvMsg(&m); err != nil {
				recvErr <- err
				return
			}
			c.lastSeen.Store(time.Now().UnixNano())
			jm.dispatch(c, m)
		}
	}()
	sendErr := make(chan error, 1)
	go func() {
		for {
			select {
			case m := <-c.out:
				if err := stream.SendMsg(&m); err != nil {
					sendErr <- err
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	hb := time.NewTicker(jm.cfg.HeartbeatInterval)
	defer hb.Stop()
	var cause error
	for cause == nil {
		select {
		case err := <-recvErr:
			cause = fmt.Errorf("its connection closed: %w", err)
		case err := <-sendErr:
			cause = fmt.Errorf("sending to it failed: %w", err)
		case <-ctx.Done():
			cause = fmt.Errorf("its connection closed: %w", context.Cause(ctx))
		case <-hb.C:
			if since := time.Since(time.Unix(0, c.lastSeen.Load())); since > jm.cfg.HeartbeatTimeout {
				cause = fmt.Errorf("no heartbeat for %s (heartbeat.timeout %s)", since.Round(time.Millisecond), jm.cfg.HeartbeatTimeout)
				break
			}
			select {
			case c.out <- toTM{Heartbeat: true}:
			default: // the queue is full: the task manager is not reading
			}
		}
	}
	jm.unregister(c, cause)
	return status.Error(codes.Unavailable, cause.Error())
}

// admit checks a registration (whose proof of the token was checked).
func (jm *JobManager) admit(reg *registerMsg) error {
	if reg.Binary != BinaryHash() {
		return status.Errorf(codes.FailedPrecondition, "the task manager runs another binary (%s) than the job manager (%s): every process of a cluster must run the same job binary", reg.Binary, BinaryHash())
	}
	if reg.Slots < 1 {
		return status.Errorf(codes.InvalidArgument, "taskmanager.numberOfTaskSlots %d: must be at least 1", reg.Slots)
	}
	if reg.DataAddr == "" {
		return status.Error(codes.InvalidArgument, "the task manager announced no data address")
	}
	if host, _, err := net.SplitHostPort(reg.DataAddr); err == nil && net.ParseIP(host) != nil && net.ParseIP(host).IsUnspecified() {
		return status.Errorf(codes.InvalidArgument, "the task manager announced data address %q, which other task managers cannot dial: set taskmanager.host to its reachable address", reg.DataAddr)
	}
	jm.mu.Lock()
	defer jm.mu.Unlock()
	for _, c := range jm.tms {
		if c.dataAddr == reg.DataAddr {
			return status.Errorf(codes.AlreadyExists, "a task manager with data address %s is registered already (%s); every task manager needs its own taskmanager.host:taskmanager.data.port", reg.DataAddr, c.id)
		}
	}
	return nil
}

func (jm *JobManager) register(reg *registerMsg) *tmConn {
	jm.mu.Lock()
	defer jm.mu.Unlock()
	jm.nextTM++
	c := &tmConn{id: fmt.Sprintf("tm-%d", jm.nextTM), name: reg.Name, dataAddr: reg.DataAddr, slots: reg.Slots,
		out: make(chan toTM, 4096), done: make(chan struct{})}
	c.lastSeen.Store(time.Now().UnixNano())
	// The answer goes first: a deployment may queue messages for the
	// task manager as soon as it is in tms.
	c.out <- toTM{Registered: &registeredMsg{ID: c.id}}
	jm.tms[c.id] = c
	jm.order = append(jm.order, c.id)
	close(jm.changed)
	jm.changed = make(chan struct{})
	return c
}

func (jm *JobManager) unregister(c *tmConn, cause error) {
	jm.mu.Lock()
	delete(jm.tms, c.id)
	for i, id := range jm.order {
		if id == c.id {
			jm.order = append(jm.order[:i], jm.order[i+1:]...)
			break
		}
	}
	close(jm.changed)
	jm.changed = make(chan struct{})
	d := jm.current
	closed := jm.closed
	jm.mu.Unlock()
	close(c.done)
	if !closed {
		jm.log.Warn("task manager lost", "id", c.id, "name", c.name, "cause", cause)
	}
	if d != nil {
		d.lost(c, fmt.Errorf("task manager %s (%s, %s) lost: %w", c.id, c.name, c.dataAddr, cause))
	}
}

// dispatch hands a task manager's message to the deployment it is for.
func (jm *JobManager) dispatch(c *tmConn, m toJM) {
	jm.mu.Lock()
	d := jm.current
	jm.mu.Unlock()
	if d == nil {
		return
	}
	d.receive(c, m)
}

// slotList returns the registered slots, spread over the task managers
// (the first slot of every task manager, then the second, ...), as
// Flink's cluster.evenly-spread-out-slots does, and a channel closed when
// registrations change.
func (jm *JobManager) slotList() ([]*tmConn, <-chan struct{}) {
	jm.mu.Lock()
	defer jm.mu.Unlock()
	var slots []*tmConn
	for round := 0; ; round++ {
		added := false
		for _, id := range jm.order {
			if c := jm.tms[id]; round < c.slots {
				slots = append(slots, c)
				added = true
			}
		}
		if !added {
			return slots, jm.changed
		}
	}
}

// Deploy places an attempt of jg in the registered slots, once there are
// enough of them, and returns when every task manager deployed its part.
func (jm *JobManager) Deploy(ctx context.Context, jg *graph.JobGraph, opts task.Options) (runner.Deployment, error) {
	to, err := shipOptions(opts)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", runner.ErrNotRestartable, err)
	}
	if to.RunID == "" {
		// One run id for every task manager's subtasks.
		to.RunID = newRunID()
	}
	need := slotsNeeded(jg)
	want := need
	jm.mu.Lock()
	if jm.deployed == 0 {
		// jobmanager.scheduler.min-slots holds back the first
		// deployment; a restart goes ahead on the slots there are.
		want = max(need, jm.cfg.MinSlots)
	}
	jm.mu.Unlock()
	deadline := time.NewTimer(jm.cfg.SlotTimeout)
	defer deadline.Stop()
	var slots []*tmConn
	logged := 0
	for {
		var changed <-chan struct{}
		slots, changed = jm.slotList()
		if len(slots) >= want {
			break
		}
		if logged != len(slots)+1 {
			logged = len(slots) + 1
			jm.log.Info("waiting for task managers to register slots", "have", len(slots), "need", want)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-deadline.C:
			return nil, fmt.Errorf("%d slots registered after %s, the job needs %d (slot.request.timeout): start more task managers or give them more taskmanager.numberOfTaskSlots", len(slots), jm.cfg.SlotTimeout, want)
		}
	}
	slots = slots[:need]
	jm.mu.Lock()
	if !jm.allRegisteredLocked(slots) {
		// A task manager left since the slots were listed.
		jm.mu.Unlock()
		return jm.Deploy(ctx, jg, opts)
	}
	jm.attempt++
	jm.deployed++
	attempt := jm.attempt
	d := newRemoteDeployment(jm, attempt, jg, slots)
	d.mirror = newMetricsMirror(opts.Metrics)
	jm.current = d
	jm.mu.Unlock()
	d.stopCtx = context.AfterFunc(ctx, func() { d.Cancel(context.Cause(ctx)) })

	addrs := make([]string, len(slots))
	for i, c := range slots {
		addrs[i] = c.dataAddr
	}
	hash := GraphHash(jg)
	for _, c := range d.tms {
		c.send(toTM{Deploy: &deployMsg{Attempt: attempt, Spec: jm.cfg.Spec, GraphHash: hash, Slots: addrs, Self: c.dataAddr, Task: to}})
	}
	jm.log.Info("deploying the job", "attempt", attempt, "slots", need, "taskmanagers", len(d.tms))
	if err := d.awaitDeployed(ctx); err != nil {
		d.Cancel(err)
		_ = d.Run()
		return nil, err
	}
	return d, nil
}

// allRegisteredLocked reports whether every slot's task manager is still
// registered.
func (jm *JobManager) allRegisteredLocked(slots []*tmConn) bool {
	for _, c := range slots {
		if jm.tms[c.id] != c {
			return false
		}
	}
	return true
}

// shipOptions turns the runner's per-attempt task options into what
// crosses the network.
func shipOptions(o task.Options) (taskOptions, error) {
	to := taskOptions{RunID: o.RunID, CheckpointJob: o.CheckpointJob, FinalCheckpoint: o.FinalCheckpoint,
		CheckpointInterval: o.CheckpointInterval,
		RestoreJob:         o.RestoreJob, RestoreOwned: o.RestoreOwned, AllowNonRestoredState: o.AllowNonRestoredState,
		SkipChannelState: o.SkipChannelState, CountRecords: o.CountRecords, JobID: o.JobID}
	if o.Checkpoints != nil {
		if to.Checkpoints = o.Checkpoints.Location(); to.Checkpoints == "" {
			return to, errors.New("cluster mode needs checkpoint storage every process reaches (a shared directory or s3://...): mem:// lives in one process")
		}
	}
	if o.Restore != nil {
		b, err := encodeCheckpoint(o.Restore)
		if err != nil {
			return to, err
		}
		to.Restore = b
		if to.RestoreStorage = o.RestoreStorage.Location(); to.RestoreStorage == "" {
			return to, errors.New("cluster mode restores only from storage every process reaches (a shared directory or s3://...)")
		}
	}
	return to, nil
}
