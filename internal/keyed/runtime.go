package keyed

import (
	"errors"
	"fmt"
	"time"

	"github.com/weirstream/weir/internal/checkpoint/upload"
	"github.com/weirstream/weir/internal/keygroup"
	"github.com/weirstream/weir/internal/state"
	"github.com/weirstream/weir/internal/task"
	"github.com/weirstream/weir/internal/timer"
)

// Names of the state backends (Config.Backend).
const (
	BackendHashMap = "hashmap"
	BackendPebble  = "pebble"
)

// Config is what a keyed runtime needs from the job's options. The
// runtimes of one run share its Metrics.
type Config struct {
	// Backend is BackendHashMap (also for "") or BackendPebble.
	Backend string
	// Changelog configures the changelog state backend.
	Changelog ChangelogConfig
	// Metrics collects the changelog figures of the run; nil: not
	// collected.
	Metrics *Metrics
	// MaterializeHook, if set, runs at the end of a changelog
	// materialization's upload; an error fails that materialization
	// (tests).
	MaterializeHook func(uid string, subtask int, id int64) error
}

// ChangelogConfig configures the changelog state backend; the fields are
// weir.ChangelogOptions', with its defaults already applied.
type ChangelogConfig struct {
	Enabled bool
	// MaterializeInterval between periodic materializations; zero or
	// negative: none.
	MaterializeInterval time.Duration
	// MaxMaterializationFailures in a row that a subtask tolerates;
	// negative: none.
	MaxMaterializationFailures int
	// The log writer's settings (changelog.Config); zero takes the
	// writer's default.
	PersistDelay               time.Duration
	PersistSizeThreshold       int64
	PreemptivePersistThreshold int64
	UploadTimeout              time.Duration
	MaxAttempts                int
	MaxInFlight                int64
}

// Background TTL cleanup: how often keyed operators with TTL state run a
// bounded cleanup step, and how many entries one step removes at most.
const (
	stateCleanupInterval = 100 * time.Millisecond
	stateCleanupBudget   = 1000
)

// Runtime is the keyed runtime of one operator subtask (see the package
// comment).
type Runtime struct {
	op       *task.OpContext
	cfg      Config
	backend  state.Backend
	timers   *timer.Service
	keyBuf   []byte
	hasKey   bool
	ttl      bool
	ptWakeup map[int64]bool // processing times with a scheduled task callback
	onTimer  func(t timer.Timer, eventTime bool) error
	uploads  *upload.Tracker // incremental checkpoints
	cl       *changelogRuntime
	schema   schema // the states' codecs, for snapshots (schema.go)
}

// New returns the runtime of the operator subtask op. onTimer runs every
// timer that fires, with its key current.
func New(op *task.OpContext, cfg Config, onTimer func(t timer.Timer, eventTime bool) error) *Runtime {
	return &Runtime{op: op, cfg: cfg, timers: timer.NewService(), ptWakeup: map[int64]bool{},
		onTimer: onTimer, uploads: upload.NewTracker()}
}

// Open opens the state backend and restores the subtask's share of the
// checkpoint the job starts from, if any.
func (rt *Runtime) Open() error {
	so := state.Options{KeyGroupStart: rt.op.KeyGroupStart, KeyGroupEnd: rt.op.KeyGroupEnd,
		MaxParallelism: rt.op.MaxParallelism, Clock: rt.op.Now, Dir: rt.op.StateDir}
	r := rt.op.Restored
	// The changelog wraps the backend when it is on, or to replay the
	// records of a changelog checkpoint restored with it off.
	var clock *state.ReplayClock
	if (rt.cfg.Changelog.Enabled && rt.op.Storage != nil) || (r != nil && len(r.Changelogs) > 0) {
		clock = state.NewReplayClock(rt.op.Now)
		so.Clock = clock.Now
	}
	if rt.cfg.Backend == BackendPebble {
		if err := rt.op.ClaimStateDir(); err != nil {
			return err
		}
	}
	if r != nil && len(r.Native) > 0 {
		pb, err := rt.openNative(so, r)
		if err != nil {
			return fmt.Errorf("restore native keyed state: %w", err)
		}
		rt.backend = pb
		if err := rt.restore(r); err != nil {
			return fmt.Errorf("restore keyed state: %w", err)
		}
		return rt.wrapChangelog(clock)
	}
	switch rt.cfg.Backend {
	case "", BackendHashMap:
		rt.backend = state.NewHeapBackend(so)
	case BackendPebble:
		b, err := state.NewPebbleBackend(so)
		if err != nil {
			return fmt.Errorf("open pebble state backend: %w", err)
		}
		rt.backend = b
	default:
		return fmt.Errorf("unknown state backend %q", rt.cfg.Backend)
	}
	if r != nil {
		if err := rt.restore(r); err != nil {
			return fmt.Errorf("restore keyed state: %w", err)
		}
	}
	return rt.wrapChangelog(clock)
}

func (rt *Runtime) wrapChangelog(clock *state.ReplayClock) error {
	if clock == nil {
		return nil
	}
	if err := rt.openChangelog(rt.backend, clock, rt.op.Restored != nil); err != nil {
		return fmt.Errorf("restore keyed state: %w", err)
	}
	return nil
}

// Close stops the changelog, if any, and closes the backend.
func (rt *Runtime) Close() error {
	err := rt.cl.close()
	if rt.backend == nil {
		return err
	}
	return errors.Join(err, rt.backend.Close())
}

// Backend is the state backend (after Open), for operators of this module
// that keep their own state in it (windows).
func (rt *Runtime) Backend() state.Backend { return rt.backend }

// KeyBuf returns the buffer to encode the next current key into, empty:
// pass the encoding to SetKey.
func (rt *Runtime) KeyBuf() []byte { return rt.keyBuf[:0] }

// SetKey makes key (encoded) the current key; key must be KeyBuf's array,
// which stays untouched until the next SetKey.
func (rt *Runtime) SetKey(key []byte) {
	rt.keyBuf = key
	rt.backend.SetCurrentKey(key, keygroup.Of(key, rt.op.MaxParallelism))
	rt.hasKey = true
}

// check fails the subtask if a state access returned an error.
func (rt *Runtime) check(name string, err error) {
	if err != nil {
		rt.op.Fail(fmt.Errorf("state %q: %w", name, err))
	}
}

func (rt *Runtime) checkKey(name string) {
	if !rt.hasKey {
		rt.op.Fail(fmt.Errorf("state %q used outside ProcessElement and OnTimer: there is no current key", name))
	}
}

// stateRegistered notes a new state; with TTL it starts background cleanup.
func (rt *Runtime) stateRegistered(ttl state.TTLConfig) {
	if !ttl.Enabled() || ttl.DisableBackgroundCleanup || rt.ttl {
		return
	}
	rt.ttl = true
	var step func() error
	step = func() error {
		if _, err := rt.backend.CleanupExpired(stateCleanupBudget); err != nil {
			return fmt.Errorf("state TTL cleanup: %w", err)
		}
		rt.op.Schedule(rt.op.Now().Add(stateCleanupInterval), step)
		return nil
	}
	rt.op.Schedule(rt.op.Now().Add(stateCleanupInterval), step)
}
