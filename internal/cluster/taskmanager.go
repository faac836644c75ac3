package cluster

import (
	"context"
	"crypto/hmac"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weirstream/weir/internal/task"
)

// TaskManagerConfig configures a task manager.
type TaskManagerConfig struct {
	// JobManager is the job manager's RPC address, host:port
	// (jobmanager.rpc.address, jobmanager.rpc.port). Leader, if set,
	// replaces it: it returns the current leader's address (high
	// availability), and is asked again after every lost session.
	JobManager string
	Leader     func(ctx context.Context) (string, error)
	// Slots is taskmanager.numberOfTaskSlots (default 1).
	Slots int
	// DataAddress is host:port the data plane listens on
	// (taskmanager.host, taskmanager.data.port; port 0 picks one).
	DataAddress string
	// Name names the task manager in the job manager's logs; default
	// host:pid.
	Name     string
	Security Security
	// HeartbeatInterval and HeartbeatTimeout: heartbeat.interval and
	// heartbeat.timeout (10s, 50s): a job manager silent for the timeout
	// is given up and the task manager registers again.
	HeartbeatInterval, HeartbeatTimeout time.Duration
	// RetryInterval is the pause between registration attempts; default
	// 1s (cluster.registration.initial-timeout is 100ms in Flink, growing;
	// weir retries at a fixed pace).
	RetryInterval time.Duration
	Logger        *slog.Logger
	// Build builds the job of spec from the binary's registry and calls
	// its Environment's Execute with ctx (which carries the part to run,
	// WithPart), returning Execute's error.
	Build func(ctx context.Context, spec JobSpec) error
	// Config are configuration items (key=value) of this process that
	// apply after the job manager's (JobSpec.Config): its local
	// directories, say.
	Config []string
	// Binary overrides BinaryHash (tests of a mismatched binary).
	Binary string
	// NewDataPlane, if set, replaces the TCP data plane (tests).
	NewDataPlane func(ctx context.Context, cfg TaskManagerConfig, onLost func(peer string, err error)) (DataPlane, error)
}

// ErrRefused is returned by TaskManager.Run when the job manager refused
// the registration for a reason that retrying does not change (token,
// binary, slots).
var ErrRefused = errors.New("registration refused by the job manager")

// TaskManager runs the subtasks a job manager deploys to it.
type TaskManager struct {
	cfg  TaskManagerConfig
	log  *slog.Logger
	data DataPlane

	mu    sync.Mutex
	parts map[uint64]*part
	id    string
	// unreleased are attempts whose part here finished and whose data
	// channels stay until the job manager releases them.
	unreleased []uint64

	registrations atomic.Int64
	attempts      atomic.Int64
}

// NewTaskManager opens the data plane; Run registers and serves.
func NewTaskManager(ctx context.Context, cfg TaskManagerConfig) (*TaskManager, error) {
	if cfg.Slots == 0 {
		cfg.Slots = 1
	}
	if cfg.Slots < 1 {
		return nil, fmt.Errorf("taskmanager.numberOfTaskSlots %d: must be at least 1", cfg.Slots)
	}
	if cfg.HeartbeatInterval <= 0 {
		cfg.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if cfg.HeartbeatTimeout <= 0 {
		cfg.HeartbeatTimeout = DefaultHeartbeatTimeout
	}
	if cfg.RetryInterval <= 0 {
		cfg.RetryInterval = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Name == "" {
		host, _ := os.Hostname()
		cfg.Name = fmt.Sprintf("%s:%d", host, os.Getpid())
	}
	if cfg.Binary == "" {
		cfg.Binary = BinaryHash()
	}
	if cfg.Build == nil {
		return nil, errors.New("task manager: no job builder")
	}
	if cfg.JobManager == "" && cfg.Leader == nil {
		return nil, errors.New("task manager: set jobmanager.rpc.address (and jobmanager.rpc.port) or high availability")
	}
	if err := cfg.Security.checkExposure("the task manager's data plane", cfg.DataAddress); err != nil {
		return nil, err
	}
	tm := &TaskManager{cfg: cfg, log: cfg.Logger, parts: map[uint64]*part{}}
	newDP := cfg.NewDataPlane
	if newDP == nil {
		newDP = newTCPDataPlane
	}
	dp, err := newDP(ctx, cfg, tm.peerLost)
	if err != nil {
		return nil, err
	}
	tm.data = dp
	return tm, nil
}

// DataAddr is the data plane's address.
func (tm *TaskManager) DataAddr() string { return tm.data.Addr() }

// Attempts counts the registration attempts so far.
func (tm *TaskManager) Attempts() int64 { return tm.attempts.Load() }

// Registrations counts the successful registrations so far.
func (tm *TaskManager) Registrations() int64 { return tm.registrations.Load() }

// Run registers with the job manager and runs what it deploys until ctx
// ends; a lost job manager cancels every part and registers again. It
// returns ErrRefused (wrapped, with the reason) if the job manager refuses
// the task manager for good.
func (tm *TaskManager) Run(ctx context.Context) error {
	defer tm.data.Close()
	defer tm.cancelAll(errors.New("the task manager is shutting down"))
	for {
		err := tm.session(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, ErrRefused) {
			return err
		}
		tm.cancelAll(fmt.Errorf("lost the job manager: %w", err))
		tm.log.Warn("no session with the job manager; retrying", "err", err, "in", tm.cfg.RetryInterval)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(tm.cfg.RetryInterval):
		}
	}
}

// registrationError is the error of a registration the job manager
// answered with err: ErrRefused for a refusal, with the job manager's
// reason.
func (tm *TaskManager) registrationError(addr string, err error) error {
	if s, ok := status.FromError(err); ok {
		switch s.Code() {
		case codes.PermissionDenied, codes.FailedPrecondition, codes.InvalidArgument, codes.Unauthenticated:
			return fmt.Errorf("%w: %s", ErrRefused, s.Message())
		}
	}
	return fmt.Errorf("register with the job manager at %s: %w", addr, err)
}

func (tm *TaskManager) session(ctx context.Context) error {
	tm.attempts.Add(1)
	addr := tm.cfg.JobManager
	if tm.cfg.Leader != nil {
		var err error
		if addr, err = tm.cfg.Leader(ctx); err != nil {
			return fmt.Errorf("find the leading job manager: %w", err)
		}
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cc, st, err := openSession(sctx, addr, tm.cfg.Security)
	if err != nil {
		return err
	}
	defer cc.Close()
	// The handshake (JobManager.session): both ends prove they hold the
	// cluster token without sending it.
	nonce := newNonce()
	if err := st.SendMsg(&toJM{Hello: &helloMsg{Nonce: nonce}}); err != nil {
		return fmt.Errorf("register with the job manager at %s: %w", addr, err)
	}
	var ch toTM
	if err := st.RecvMsg(&ch); err != nil {
		return tm.registrationError(addr, err)
	}
	if ch.Challenge == nil || len(ch.Challenge.Nonce) != nonceSize {
		return fmt.Errorf("the job manager at %s answered the hello with something else", addr)
	}
	if !hmac.Equal(ch.Challenge.Proof, proofOf(tm.cfg.Security.Token, roleJobManager, nonce, ch.Challenge.Nonce)) {
		return fmt.Errorf("%w: the job manager at %s does not hold this task manager's cluster token: set the same security.cluster.token on every process", ErrRefused, addr)
	}
	if err := st.SendMsg(&toJM{Register: &registerMsg{Name: tm.cfg.Name, Slots: tm.cfg.Slots, DataAddr: tm.data.Addr(),
		Binary: tm.cfg.Binary, Proof: proofOf(tm.cfg.Security.Token, roleTaskManager, ch.Challenge.Nonce, nonce)}}); err != nil {
		return fmt.Errorf("register with the job manager at %s: %w", addr, err)
	}
	var first toTM
	if err := st.RecvMsg(&first); err != nil {
		return tm.registrationError(addr, err)
	}
	if first.Registered == nil {
		return fmt.Errorf("the job manager at %s answered the registration with something else", addr)
	}
	tm.mu.Lock()
	tm.id = first.Registered.ID
	tm.mu.Unlock()
	tm.registrations.Add(1)
	tm.log.Info("registered with the job manager", "jobmanager", addr, "id", first.Registered.ID, "slots", tm.cfg.Slots, "data", tm.data.Addr())

	out := make(chan toJM, 4096)
	send := func(m toJM) {
		select {
		case out <- m:
		case <-sctx.Done():
		}
	}
	sendErr := make(chan error, 1)
	go func() {
		for {
			select {
			case m := <-out:
				if err := st.SendMsg(&m); err != nil {
					sendErr <- err
					return
				}
			case <-sctx.Done():
				return
			}
		}
	}()
	var lastSeen atomic.Int64
	lastSeen.Store(time.Now().UnixNano())
	recvErr := make(chan error, 1)
	go func() {
		for {
			var m toTM
			if err := st.RecvMsg(&m); err != nil {
				recvErr <- err
				return
			}
			lastSeen.Store(time.Now().UnixNano())
			tm.handle(sctx, m, send)
		}
	}()
	hb := time.NewTicker(tm.cfg.HeartbeatInterval)
	defer hb.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-recvErr:
			return fmt.Errorf("the job manager at %s closed the session: %w", addr, err)
		case err := <-sendErr:
			return fmt.Errorf("send to the job manager at %s: %w", addr, err)
		case <-hb.C:
			if since := time.Since(time.Unix(0, lastSeen.Load())); since > tm.cfg.HeartbeatTimeout {
				return fmt.Errorf("no heartbeat from the job manager at %s for %s (heartbeat.timeout)", addr, since.Round(time.Millisecond))
			}
			select {
			case out <- toJM{Heartbeat: true}:
			default: // the queue is full: the session is stuck
			}
		}
	}
}

// handle runs on the session's receiving goroutine.
func (tm *TaskManager) handle(ctx context.Context, m toTM, send func(toJM)) {
	switch {
	case m.Deploy != nil:
		tm.deploy(ctx, m.Deploy, send)
	case m.Cancel != nil:
		if p := tm.part(m.Cancel.Attempt); p != nil {
			p.cancel(&canceledError{reason: m.Cancel.Reason})
		}
	case m.Trigger != nil:
		if p := tm.part(m.Trigger.Attempt); p != nil {
			p.trigger(m.Trigger)
		}
	case m.Notify != nil:
		if p := tm.part(m.Notify.Attempt); p != nil {
			p.notify(m.Notify)
		}
	case m.Release != nil:
		tm.release(m.Release.Attempt)
	}
}

func (tm *TaskManager) part(attempt uint64) *part {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	return tm.parts[attempt]
}

// deploy starts the part of an attempt placed here.
func (tm *TaskManager) deploy(ctx context.Context, m *deployMsg, send func(toJM)) {
	pctx, cancel := context.WithCancelCause(ctx)
	p := &part{tm: tm, msg: m, send: send, cancel: cancel, done: make(chan struct{})}
	tm.mu.Lock()
	tm.parts[m.Attempt] = p
	// Attempts that finished here and were never released (their job
	// manager is gone) end now.
	old := tm.unreleased
	tm.unreleased = nil
	tm.mu.Unlock()
	for _, a := range old {
		tm.data.CloseAttempt(a)
	}
	tm.log.Info("deploying part of the job", "job", m.Spec.Job, "attempt", m.Attempt)
	go func() {
		defer close(p.done)
		var finished bool
		defer func() {
			tm.mu.Lock()
			delete(tm.parts, m.Attempt)
			if finished {
				// Consumers elsewhere may still be receiving what the
				// part sent: its channels stay until the job manager
				// releases the attempt.
				tm.unreleased = append(tm.unreleased, m.Attempt)
			}
			tm.mu.Unlock()
			if !finished {
				tm.data.CloseAttempt(m.Attempt)
			}
		}()
		spec := m.Spec
		spec.Config = append(slices.Clone(spec.Config), tm.cfg.Config...)
		err := tm.cfg.Build(WithPart(pctx, p), spec)
		finished = err == nil
		if !p.deployedSent.Load() {
			msg := "the job did not deploy"
			if err != nil {
				msg = err.Error()
			}
			var nr *notRestartableError
			send(toJM{Deployed: &deployedMsg{Attempt: m.Attempt, Err: msg, NotRestartable: errors.As(err, &nr)}})
		}
		ended := &partEndedMsg{Attempt: m.Attempt}
		if err != nil {
			ended.Err = err.Error()
			var nr *notRestartableError
			switch {
			case errors.Is(err, task.ErrRestoreData):
				ended.Class = classRestoreData
			case errors.As(err, &nr), errors.Is(err, task.ErrStateMismatch):
				ended.Class = classNotRestartable
			}
			var ce *canceledError
			ended.Canceled = errors.As(context.Cause(pctx), &ce)
		}
		if err != nil && !ended.Canceled {
			tm.log.Warn("part of the job failed", "attempt", m.Attempt, "err", err)
		}
		send(toJM{Ended: ended})
	}()
}

// cancelAll cancels every part and waits for them to end.
func (tm *TaskManager) cancelAll(cause error) {
	parts := tm.partsWhere(nil)
	for _, p := range parts {
		p.cancel(cause)
	}
	for _, p := range parts {
		<-p.done
	}
}

// peerLost fails every part: a data connection to another task manager
// broke, so the attempt cannot go on.
func (tm *TaskManager) peerLost(peer string, err error) {
	cause := fmt.Errorf("the data connection to task manager %s broke: %w", peer, err)
	// Only the parts that exchange data with the peer: a connection may
	// outlive the attempts that used it.
	for _, p := range tm.partsWhere(func(p *part) bool { return slices.Contains(p.msg.Slots, peer) }) {
		p.cancel(cause)
	}
}

// partsWhere returns the running parts that keep reports true (all with
// nil keep).
func (tm *TaskManager) partsWhere(keep func(*part) bool) []*part {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	var parts []*part
	for _, p := range tm.parts {
		if keep == nil || keep(p) {
			parts = append(parts, p)
		}
	}
	return parts
}

// release closes the data channels of an attempt whose every part ended.
func (tm *TaskManager) release(attempt uint64) {
	tm.mu.Lock()
	i := slices.Index(tm.unreleased, attempt)
	if i >= 0 {
		tm.unreleased = slices.Delete(tm.unreleased, i, i+1)
	}
	tm.mu.Unlock()
	if i >= 0 {
		tm.data.CloseAttempt(attempt)
	}
}

// FailRunning fails the parts running here with cause, as a failing task
// would: the job manager restarts the attempt (tests of recovery).
func (tm *TaskManager) FailRunning(cause error) {
	for _, p := range tm.partsWhere(nil) {
		p.cancel(cause)
	}
}

// Failure classes of partEndedMsg.Class.
const (
	classRestoreData    = "restore-data"
	classNotRestartable = "not-restartable"
)

// canceledError is a part's cancel cause when the job manager canceled it.
type canceledError struct{ reason string }

func (e *canceledError) Error() string { return "canceled by the job manager: " + e.reason }

// NotRestartable marks err, a part's failure, as one that would repeat on
// every attempt (the job's flags or configuration are invalid in the task
// manager): the job manager fails the job instead of restarting it.
func NotRestartable(err error) error {
	if err == nil {
		return nil
	}
	return &notRestartableError{err}
}

// notRestartableError marks a part's failure that would repeat on every
// attempt.
type notRestartableError struct{ err error }

func (e *notRestartableError) Error() string { return e.err.Error() }
func (e *notRestartableError) Unwrap() error { return e.err }
