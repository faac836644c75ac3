package weir

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"time"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/graph"
	"github.com/weirstream/weir/internal/keygroup"
	"github.com/weirstream/weir/internal/network"
	"github.com/weirstream/weir/internal/state"
	"github.com/weirstream/weir/internal/task"
	"github.com/weirstream/weir/internal/timer"
)

// KeyedStream is a stream partitioned by key: every record with the same key
// goes to the same subtask of the next operator, chosen by key group
// (murmur3 of the key's encoding modulo max parallelism). Operators on a
// keyed stream (KeyedProcess, Window) get keyed state and timers.
type KeyedStream[K, T any] struct {
	s        *DataStream[T]
	key      func(T) K
	keyCodec codec.Codec[K]
}

// keySelector is what a hash edge needs: the key bytes of a record.
type keySelector[T any] struct {
	encode func(dst []byte, v T) []byte
}

// channels returns, for a hash edge to consumers subtasks with maxP key
// groups, the function that maps a record to its consumer subtask. Each
// producer subtask calls it once and owns the returned function.
func (k *keySelector[T]) channels(consumers, maxP int) func(T) int {
	var buf []byte
	return func(v T) int {
		buf = k.encode(buf[:0], v)
		return keygroup.OperatorIndex(keygroup.Of(buf, maxP), maxP, consumers)
	}
}

// KeyBy partitions the stream by the key that key extracts. K must have a
// built-in codec (codec.For); use KeyByCodec otherwise.
func KeyBy[T, K any](s *DataStream[T], key func(T) K) *KeyedStream[K, T] {
	kc, ok := codec.For[K]()
	if !ok {
		s.env.errorf("KeyBy: key type %s has no built-in codec: use KeyByCodec", reflect.TypeFor[K]())
	}
	return KeyByCodec(s, key, kc)
}

// KeyByCodec is KeyBy with an explicit codec for the key; the key's encoding
// decides its key group, so it must be deterministic.
func KeyByCodec[T, K any](s *DataStream[T], key func(T) K, kc codec.Codec[K]) *KeyedStream[K, T] {
	out := s.withPartitioner(network.Hash)
	ks := &keySelector[T]{encode: func(dst []byte, v T) []byte { return kc.Append(dst, key(v)) }}
	for i := range out.ups {
		out.ups[i].key = ks
	}
	return &KeyedStream[K, T]{s: out, key: key, keyCodec: kc}
}

// Stream returns the partitioned stream for operators that need no keyed
// state: they still see every record of a key on one subtask.
func (ks *KeyedStream[K, T]) Stream() *DataStream[T] { return ks.s }

// Timer says which timer fired.
type Timer struct {
	// Timestamp is the time the timer was registered for (Unix ms).
	Timestamp int64
	// EventTime is true for event-time timers, false for processing-time
	// ones.
	EventTime bool
}

// KeyedProcessFunction handles the records of a keyed stream with keyed
// state and timers. It may also implement KeyedOpener, TimerHandler and
// Closer.
type KeyedProcessFunction[K, IN, OUT any] interface {
	ProcessElement(ctx *KeyedContext[K, OUT], v IN) error
}

// KeyedProcessFunc adapts a function to KeyedProcessFunction.
type KeyedProcessFunc[K, IN, OUT any] func(ctx *KeyedContext[K, OUT], v IN) error

// ProcessElement calls f.
func (f KeyedProcessFunc[K, IN, OUT]) ProcessElement(ctx *KeyedContext[K, OUT], v IN) error {
	return f(ctx, v)
}

// KeyedOpener is implemented by keyed functions that prepare themselves, and
// obtain their state handles, before the first record.
type KeyedOpener[K, OUT any] interface {
	Open(ctx *KeyedContext[K, OUT]) error
}

// TimerHandler is implemented by keyed functions that register timers.
// OnTimer runs with the timer's key as the current key.
type TimerHandler[K, OUT any] interface {
	OnTimer(ctx *KeyedContext[K, OUT], t Timer) error
}

// KeyedProcess applies a keyed function to every record of ks. newFn is
// called once per subtask; the value's fields belong to that subtask.
func KeyedProcess[K, IN, OUT any](ks *KeyedStream[K, IN], newFn func() KeyedProcessFunction[K, IN, OUT]) *DataStream[OUT] {
	env := ks.s.env
	return connect(ks.s, &graph.Node{Name: "KeyedProcess"}, newNodeImpl(func(ctx *task.OpContext, out network.Output[OUT]) (task.Built, error) {
		fn := newFn()
		if fn == nil {
			return task.Built{}, errors.New("KeyedProcess: the function factory returned nil")
		}
		op := &keyedProcessOp[K, IN, OUT]{opBase: newOpBase(ctx), fn: fn, ks: ks}
		op.rt = newKeyedRuntime(ctx, env.opts)
		op.kctx = &KeyedContext[K, OUT]{rt: op.rt, out: out, ops: op.opState}
		op.rt.onTimer = op.onTimer
		return task.Built{Op: op, Input: network.Output[IN](op)}, nil
	}))
}

type keyedProcessOp[K, IN, OUT any] struct {
	opBase
	fn   KeyedProcessFunction[K, IN, OUT]
	ks   *KeyedStream[K, IN]
	rt   *keyedRuntime
	kctx *KeyedContext[K, OUT]
}

func (p *keyedProcessOp[K, IN, OUT]) Open() error {
	if err := p.rt.open(); err != nil {
		return err
	}
	if o, ok := p.fn.(KeyedOpener[K, OUT]); ok {
		return o.Open(p.kctx)
	}
	return nil
}

func (p *keyedProcessOp[K, IN, OUT]) Collect(v IN) {
	p.tr.Cur = p.id
	k := p.ks.key(v)
	p.rt.setKey(p.ks.keyCodec.Append(p.rt.keyBuf[:0], k))
	p.kctx.key = k
	if err := p.fn.ProcessElement(p.kctx, v); err != nil {
		p.ctx.Fail(err)
	}
	p.tr.Cur = p.parent
}

func (p *keyedProcessOp[K, IN, OUT]) onTimer(t timer.Timer, eventTime bool) error {
	h, ok := p.fn.(TimerHandler[K, OUT])
	if !ok {
		return nil
	}
	k, _, err := p.ks.keyCodec.Decode(t.Key)
	if err != nil {
		return fmt.Errorf("decode timer key: %w", err)
	}
	p.kctx.key = k
	return h.OnTimer(p.kctx, Timer{Timestamp: t.Timestamp, EventTime: eventTime})
}

// SnapshotState adds the keyed state and timers to the operator state.
func (p *keyedProcessOp[K, IN, OUT]) SnapshotState(id int64, opts checkpoint.Options) (task.OperatorSnapshot, error) {
	s, _ := p.opBase.SnapshotState(id, opts)
	return s, p.rt.snapshot(id, opts, &s)
}

// NotifyCheckpointComplete implements task.CheckpointListener.
func (p *keyedProcessOp[K, IN, OUT]) NotifyCheckpointComplete(id int64) error {
	return p.rt.NotifyCheckpointComplete(id)
}

// NotifyCheckpointAborted implements task.CheckpointListener.
func (p *keyedProcessOp[K, IN, OUT]) NotifyCheckpointAborted(id int64) error {
	return p.rt.NotifyCheckpointAborted(id)
}

func (p *keyedProcessOp[K, IN, OUT]) ProcessWatermark(wm int64) error {
	return p.rt.advanceWatermark(wm)
}

func (p *keyedProcessOp[K, IN, OUT]) Close() error {
	var err error
	if c, ok := p.fn.(Closer); ok {
		err = c.Close()
	}
	return errors.Join(err, p.rt.close())
}

// keyedRuntime is what every keyed operator subtask has: a state backend
// for its key groups, a timer service, and the current key.
type keyedRuntime struct {
	op       *task.OpContext
	opts     Options
	backend  state.Backend
	timers   *timer.Service
	keyBuf   []byte
	hasKey   bool
	ttl      bool
	ptWakeup map[int64]bool // processing times with a scheduled task callback
	onTimer  func(t timer.Timer, eventTime bool) error
	uploads  *uploadTracker // incremental checkpoints
	cl       *changelogRuntime
}

// stateCleanupInterval is how often keyed operators with TTL state run a
// bounded background cleanup step.
const (
	stateCleanupInterval = 100 * time.Millisecond
	stateCleanupBudget   = 1000
)

func newKeyedRuntime(op *task.OpContext, opts Options) *keyedRuntime {
	return &keyedRuntime{op: op, opts: opts, timers: timer.NewService(), ptWakeup: map[int64]bool{}, uploads: newUploadTracker()}
}

func (rt *keyedRuntime) open() error {
	so := state.Options{KeyGroupStart: rt.op.KeyGroupStart, KeyGroupEnd: rt.op.KeyGroupEnd,
		MaxParallelism: rt.op.MaxParallelism, Clock: rt.op.Now, Dir: rt.op.StateDir}
	r := rt.op.Restored
	// The changelog wraps the backend when it is on, or to replay the
	// records of a changelog checkpoint restored with it off.
	var clock *state.ReplayClock
	if (rt.opts.Changelog.Enabled && rt.op.Storage != nil) || (r != nil && len(r.Changelogs) > 0) {
		clock = state.NewReplayClock(rt.op.Now)
		so.Clock = clock.Now
	}
	if rt.opts.StateBackend == BackendPebble {
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
	switch rt.opts.StateBackend {
	case "", BackendHashMap:
		rt.backend = state.NewHeapBackend(so)
	case BackendPebble:
		b, err := state.NewPebbleBackend(so)
		if err != nil {
			return fmt.Errorf("open pebble state backend: %w", err)
		}
		rt.backend = b
	default:
		return fmt.Errorf("unknown state backend %q", rt.opts.StateBackend)
	}
	if r != nil {
		if err := rt.restore(r); err != nil {
			return fmt.Errorf("restore keyed state: %w", err)
		}
	}
	return rt.wrapChangelog(clock)
}

func (rt *keyedRuntime) wrapChangelog(clock *state.ReplayClock) error {
	if clock == nil {
		return nil
	}
	if err := rt.openChangelog(rt.backend, clock, rt.op.Restored != nil); err != nil {
		return fmt.Errorf("restore keyed state: %w", err)
	}
	return nil
}

// restore loads the restored keyed-state streams and timers of the
// subtask's key groups, and arms a wake-up for every restored
// processing-time timer.
func (rt *keyedRuntime) restore(r *task.RestoredState) error {
	for _, h := range r.Keyed {
		if err := rt.restoreFile(r, h, func(rd io.Reader) error { return state.Restore(rt.backend, rd) }); err != nil {
			return err
		}
	}
	for _, h := range r.Timers {
		err := rt.restoreFile(r, h, func(rd io.Reader) error {
			data, err := io.ReadAll(rd)
			if err != nil {
				return err
			}
			return rt.timers.RestoreSnapshot(data, rt.op.KeyGroupStart, rt.op.KeyGroupEnd, func(eventTime bool, t timer.Timer) {
				if !eventTime {
					rt.armProcessingTime(t.Timestamp)
				}
			})
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func (rt *keyedRuntime) restoreFile(r *task.RestoredState, h storage.FileHandle, read func(io.Reader) error) error {
	f, err := r.Open(h)
	if err != nil {
		return fmt.Errorf("%s: %w", h.Path, err)
	}
	defer f.Close()
	if err := read(f); err != nil {
		return fmt.Errorf("%s: %w", h.Path, err)
	}
	return nil
}

// snapshot is the keyed part of the synchronous phase: freeze the backend
// and encode the timers. The strategy follows opts.Format: the configured
// one (changelog, native incremental or canonical), or the canonical stream
// or native files when the trigger asks for them (a savepoint).
func (rt *keyedRuntime) snapshot(id int64, opts checkpoint.Options, s *task.OperatorSnapshot) error {
	// The trigger's newest completed checkpoint is complete whether or not
	// its notification arrived yet: reuse builds on it from now on, which
	// is what the shared-state registry counts on.
	rt.uploads.confirm(opts.LastCompleted)
	if rt.cl != nil && rt.cl.w != nil && opts.Format == checkpoint.FormatConfigured {
		return rt.cl.snapshot(id, s)
	}
	s.Timers = rt.timers.AppendSnapshot(nil, rt.op.KeyGroupStart, rt.op.KeyGroupEnd)
	inner := rt.backend
	if rt.cl != nil {
		inner = rt.cl.cb.Inner()
		if err := rt.cl.snapshotPending(s); err != nil {
			return err
		}
	}
	native := opts.Format == checkpoint.FormatNative || (opts.Format == checkpoint.FormatConfigured && rt.op.Incremental)
	if pb, ok := inner.(*state.PebbleBackend); ok && native {
		return rt.nativeSnapshot(pb, id, s)
	}
	ks, err := state.TakeSnapshot(inner)
	if err != nil {
		return err
	}
	s.Keyed = ks
	return nil
}

// NotifyCheckpointComplete makes the checkpoint's uploads reusable.
func (rt *keyedRuntime) NotifyCheckpointComplete(id int64) error {
	rt.uploads.confirm(id)
	if rt.cl != nil {
		rt.cl.notify(id, true)
	}
	return nil
}

// NotifyCheckpointAborted forgets the checkpoint's uploads.
func (rt *keyedRuntime) NotifyCheckpointAborted(id int64) error {
	rt.uploads.abort(id)
	if rt.cl != nil {
		rt.cl.notify(id, false)
	}
	return nil
}

func (rt *keyedRuntime) close() error {
	err := rt.cl.close()
	if rt.backend == nil {
		return err
	}
	return errors.Join(err, rt.backend.Close())
}

// setKey makes key (encoded) the current key; key must be rt.keyBuf's
// array, which stays untouched until the next setKey.
func (rt *keyedRuntime) setKey(key []byte) {
	rt.keyBuf = key
	rt.backend.SetCurrentKey(key, keygroup.Of(key, rt.op.MaxParallelism))
	rt.hasKey = true
}

// check fails the subtask if a state access returned an error.
func (rt *keyedRuntime) check(name string, err error) {
	if err != nil {
		rt.op.Fail(fmt.Errorf("state %q: %w", name, err))
	}
}

func (rt *keyedRuntime) checkKey(name string) {
	if !rt.hasKey {
		rt.op.Fail(fmt.Errorf("state %q used outside ProcessElement and OnTimer: there is no current key", name))
	}
}

// stateRegistered notes a new state; with TTL it starts background cleanup.
func (rt *keyedRuntime) stateRegistered(ttl state.TTLConfig) {
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

func (rt *keyedRuntime) timerFor(ts int64, ns []byte) timer.Timer {
	return timer.Timer{Timestamp: ts, Key: rt.keyBuf, KeyGroup: rt.backend.CurrentKeyGroup(), Namespace: ns}
}

func (rt *keyedRuntime) registerEventTime(t timer.Timer) {
	rt.timers.RegisterEventTime(t)
	rt.cl.logTimer(timerRegisterEvent, t)
}

func (rt *keyedRuntime) deleteEventTime(t timer.Timer) {
	rt.timers.DeleteEventTime(t)
	rt.cl.logTimer(timerDeleteEvent, t)
}

func (rt *keyedRuntime) deleteProcessingTime(t timer.Timer) {
	rt.timers.DeleteProcessingTime(t)
	rt.cl.logTimer(timerDeleteProc, t)
}

func (rt *keyedRuntime) registerProcessingTime(t timer.Timer) {
	rt.timers.RegisterProcessingTime(t)
	rt.cl.logTimer(timerRegisterProc, t)
	rt.armProcessingTime(t.Timestamp)
}

// armProcessingTime makes the task fire due processing-time timers at ts.
func (rt *keyedRuntime) armProcessingTime(ts int64) {
	if rt.ptWakeup[ts] {
		return
	}
	rt.ptWakeup[ts] = true
	rt.op.Schedule(time.UnixMilli(ts), func() error {
		delete(rt.ptWakeup, ts)
		return rt.timers.AdvanceProcessingTime(rt.op.Now().UnixMilli(), func(t timer.Timer) error { return rt.fire(t, false) })
	})
}

func (rt *keyedRuntime) advanceWatermark(wm int64) error {
	return rt.timers.AdvanceWatermark(wm, func(t timer.Timer) error { return rt.fire(t, true) })
}

// fire runs one timer with its key current. What an event-time timer emits
// carries the timer's time as its timestamp; what a processing-time timer
// emits carries none (as in Flink: wall-clock time is not event time).
func (rt *keyedRuntime) fire(t timer.Timer, eventTime bool) error {
	if eventTime {
		rt.cl.logTimer(timerDeleteEvent, t)
	} else {
		rt.cl.logTimer(timerDeleteProc, t)
	}
	rt.keyBuf = append(rt.keyBuf[:0], t.Key...)
	rt.backend.SetCurrentKey(rt.keyBuf, t.KeyGroup)
	rt.hasKey = true
	rt.op.Tracker.Timestamp = task.NoTimestamp
	if eventTime {
		rt.op.Tracker.Timestamp = t.Timestamp
	}
	return rt.onTimer(t, eventTime)
}

// KeyedContext is what a keyed function sees of its subtask and its current
// key. It is owned by the subtask's goroutine.
type KeyedContext[K, OUT any] struct {
	rt  *keyedRuntime
	out network.Output[OUT]
	key K
	ops *operatorState
}

func (c *KeyedContext[K, OUT]) operatorState() *operatorState { return c.ops }

// Emit sends v downstream, with the current record's (or timer's)
// timestamp.
func (c *KeyedContext[K, OUT]) Emit(v OUT) { c.out.Collect(v) }

// CurrentKey is the key of the record (or timer) being processed.
func (c *KeyedContext[K, OUT]) CurrentKey() K { return c.key }

// Timestamp is the event time of the record being processed (in OnTimer:
// the time of an event-time timer; none for a processing-time timer), and
// false if there is none.
func (c *KeyedContext[K, OUT]) Timestamp() (int64, bool) {
	ts := c.rt.op.Tracker.Timestamp
	return ts, ts != task.NoTimestamp
}

// CurrentWatermark is the operator's current event time (math.MinInt64
// before the first watermark).
func (c *KeyedContext[K, OUT]) CurrentWatermark() int64 { return c.rt.op.CurrentWatermark() }

// CurrentProcessingTime is the processing time in Unix milliseconds.
func (c *KeyedContext[K, OUT]) CurrentProcessingTime() int64 { return c.rt.op.Now().UnixMilli() }

// RegisterEventTimeTimer makes OnTimer run for the current key once the
// watermark reaches ts. Registering the same time twice keeps one timer.
func (c *KeyedContext[K, OUT]) RegisterEventTimeTimer(ts int64) {
	c.rt.registerEventTime(c.rt.timerFor(ts, nil))
}

// DeleteEventTimeTimer removes an event-time timer of the current key.
func (c *KeyedContext[K, OUT]) DeleteEventTimeTimer(ts int64) {
	c.rt.deleteEventTime(c.rt.timerFor(ts, nil))
}

// RegisterProcessingTimeTimer makes OnTimer run for the current key once
// processing time reaches ts (Unix ms).
func (c *KeyedContext[K, OUT]) RegisterProcessingTimeTimer(ts int64) {
	c.rt.registerProcessingTime(c.rt.timerFor(ts, nil))
}

// DeleteProcessingTimeTimer removes a processing-time timer of the current
// key.
func (c *KeyedContext[K, OUT]) DeleteProcessingTimeTimer(ts int64) {
	c.rt.deleteProcessingTime(c.rt.timerFor(ts, nil))
}

// Subtask is the index of this parallel instance.
func (c *KeyedContext[K, OUT]) Subtask() int { return c.rt.op.Subtask }

// Parallelism is the operator's number of subtasks.
func (c *KeyedContext[K, OUT]) Parallelism() int { return c.rt.op.Parallelism }

// Logger returns a logger that names the job, operator and subtask.
func (c *KeyedContext[K, OUT]) Logger() *slog.Logger { return c.rt.op.Logger }

func (c *KeyedContext[K, OUT]) keyed() *keyedRuntime { return c.rt }
