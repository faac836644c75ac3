package task

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weirstream/weir/internal/checkpoint/barrier"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/clock"
	"github.com/weirstream/weir/internal/network"
	"github.com/weirstream/weir/internal/watermark"
)

// task is one subtask: a chain of operators fed by a source or an input gate.
type task struct {
	name          string
	vertex        int
	index         int
	ops           []Operator
	ctxs          []*OpContext
	tracker       *Tracker
	source        SourceDriver
	gate          *network.InputGate
	readers       []network.BufferReader // per gate channel
	partitions    []*network.ResultPartition
	bufferTimeout time.Duration
	clock         clock.Clock
	lastFlush     time.Time

	// Watermark routing along the chain: the chained consumers and the
	// network partitions each operator feeds.
	children  [][]int
	parts     [][]*network.ResultPartition
	assigner  []bool
	opWM      []int64 // last watermark each operator forwarded
	opIdle    []bool  // idle status each operator last forwarded
	inputWM   *watermark.Combiner
	inputIdle bool
	watermark int64 // last watermark received on the inputs

	timers scheduleHeap // processing-time callbacks
	seq    int64
	mail   *mailbox

	// Priority events (unaligned barriers) taken from the gate by urgent
	// mail, possibly while the task was blocked on backpressure, in the
	// order they arrived; runInput handles them before the gate's buffers.
	priority       []polled
	priorityPosted atomic.Bool // urgent mail to take them is queued
	// readStop is set when a priority event arrived or an output ran out
	// of buffers: the buffer being read stops after the current record
	// (partialBuffer), and the task serves mail and waits for its outputs
	// at that record boundary.
	readStop     atomic.Bool
	priorityMail Mail
	// onPriority, if set, sees every priority event as urgent mail takes
	// it (tests).
	onPriority func(ch int, ev network.Event)

	barriers *barrier.Handler // for tasks with inputs
	// alignTimers are the checkpoints with an aligned timeout whose timer
	// runs (scheduleAlignmentTimer).
	alignTimers map[int64]bool
	// Unaligned checkpoints: the channel state being collected, and what
	// it needs to know of the task's channels (unaligned.go).
	inflight    *channelState
	chanGroup   *channelStateGroup // writes the channel-state file
	chanMember  int                // this task's place in chanGroup
	inChans     []inChannel        // per gate channel
	outParts    []outPartition     // per partition
	parallelism int
	// replay is the in-flight data of a restored unaligned checkpoint,
	// replayed before the gate is read (unaligned_restore.go).
	replay       []recoveredChannel
	partial      partialBuffer
	openRestored func(storage.FileHandle) (io.ReadCloser, error)
	acks         chan<- Ack
	ctx          context.Context // the job's, set by run

	// Checkpointing.
	store    *storage.Storage // nil: snapshots are not persisted
	storeJob string
	// targets are the savepoints in progress (the job's).
	targets *targets
	// local keeps local copies of checkpoints (the job's; nil: none).
	local *localRecovery
	// asyncs cancels the uploads of aborted snapshots (the job's; nil in
	// some tests).
	asyncs *asyncCancels
	// suspended is the synchronous savepoint (stop-with-savepoint) the
	// task took its snapshot for and waits on, 0 for none; syncAborted the
	// newest aborted snapshot, so that a barrier that comes after its
	// savepoint was aborted does not suspend the task. stopped: the
	// synchronous savepoint completed and the task finishes. drained: a
	// drain ended the source's input; inputEnded: the source's input
	// ended (either way).
	// quiesced is a synchronous savepoint the task snapshotted for (with
	// or without drain): its timers do not fire until it is aborted.
	suspended, syncAborted, quiesced int64
	stopped, drained, inputEnded     bool
	runID                            string
	hooks                            FaultHooks
	async                            sync.WaitGroup // asynchronous phases in flight
	final                            bool           // wait for a final checkpoint after the end of input
	finalDone                        bool           // the final checkpoint completed
	onEnded                          func()         // called once when a source task's input ended

	counters              []RecordCounter
	recordsIn, recordsOut atomic.Int64 // published by publishCounts

	// Options.Metrics (metrics_registry.go): where the task is in the job
	// graph, its groups in the registry (nil without one), and the bytes
	// of data buffers it took from its gate.
	info    metricsInfo
	export  *taskExport
	bytesIn int64

	perf taskMetrics // Job.Metrics: time accounting, checkpoint figures (metrics.go)

	debloat debloat // buffer debloating of the input gate (debloat.go)
}

// publishCounts makes the operators' record counts visible to
// Job.RecordCounts and copies the task's counts into Options.Metrics.
func (t *task) publishCounts() {
	if e := t.export; e != nil {
		e.publish(t)
	}
	if len(t.counters) == 0 {
		return
	}
	var in, out int64
	for _, c := range t.counters {
		i, o := c.RecordCount()
		in += i
		out += o
	}
	t.recordsIn.Store(in)
	t.recordsOut.Store(out)
}

// polled is a buffer taken from the input gate and the channel it came on.
type polled struct {
	ch int
	b  *network.Buffer
}

func (t *task) init() {
	t.mail = newMailbox()
	t.priorityMail = t.takePriorityEvents
	if t.gate != nil {
		t.gate.SetPriorityListener(t.priorityArrived)
	}
	for _, rp := range t.partitions {
		rp.SetYielder(t)
		rp.SetExhaustedFlag(&t.readStop)
	}
	n := len(t.ops)
	t.opWM = make([]int64, n)
	for i := range t.opWM {
		t.opWM[i] = math.MinInt64
	}
	t.opIdle = make([]bool, n)
	t.assigner = make([]bool, n)
	for i, op := range t.ops {
		_, t.assigner[i] = op.(WatermarkAssigner)
		if c, ok := op.(RecordCounter); ok && t.ctxs[i].CountRecords {
			t.counters = append(t.counters, c)
		}
	}
	t.watermark = math.MinInt64
	for _, c := range t.ctxs {
		c.task = t
	}
}

// run executes the subtask to the end of its input, a failure or ctx's end.
func (t *task) run(ctx context.Context) (err error) {
	// The asynchronous phases run under a context of their own, canceled
	// as soon as the task fails: the job's is canceled only after the task
	// returned, and they may wait for other subtasks (a channel-state
	// file's group) that wait for this one.
	asyncCtx, cancelAsync := context.WithCancelCause(ctx)
	t.ctx = asyncCtx
	opened := 0
	defer func() {
		if r := recover(); r != nil {
			err = t.recovered(ctx, r)
		}
		t.publishCounts()
		if err != nil {
			cancelAsync(err)
		}
		// Asynchronous phases read the operators' frozen state: let them
		// end (on failure the canceled context stops their uploads) before
		// the operators close their backends. One waiting for channel
		// state the task will not collect any more declines.
		t.abortChannelState(0, DeclineAsync, "the task ended before every input delivered the barrier")
		t.async.Wait()
		cancelAsync(nil)
		if cerr := t.closeOps(opened); err == nil {
			err = cerr
		}
		if err == nil {
			err = t.swallowed(ctx)
		}
		if err != nil {
			for _, rp := range t.partitions {
				rp.Close()
			}
		}
	}()
	for i := len(t.ops) - 1; i >= 0; i-- {
		t.tracker.Cur = i
		opened++
		if err := t.ops[i].Open(); err != nil {
			return t.opError(i, fmt.Errorf("open: %w", err))
		}
	}
	t.lastFlush = t.clock.Now()
	if t.source != nil {
		if err := t.runSource(ctx); err != nil {
			return err
		}
		if !t.stopped {
			if !t.drained {
				// A finished source ends event time: every timer fires.
				if err := t.deliverWatermark(0, math.MaxInt64); err != nil {
					return err
				}
				if err := t.endInput(); err != nil {
					return err
				}
			}
			t.inputEnded = true
			if t.onEnded != nil {
				t.onEnded()
			}
		}
	} else if err := t.runInput(ctx); err != nil {
		return err
	}
	if err := t.perf.idleWhile(func() error { return t.awaitFinalCheckpoint(ctx) }); err != nil {
		return err
	}
	// No consumer may see a clean end of a task that must fail.
	if err := t.swallowed(ctx); err != nil {
		return err
	}
	for _, rp := range t.partitions {
		rp.BroadcastEvent(network.Event{Kind: network.EventEndOfPartition})
	}
	return nil
}

// endInput runs EndInput on every operator, head first, and tells the
// consumers that no more records follow.
func (t *task) endInput() error {
	for i, op := range t.ops {
		t.tracker.Cur = i
		t.tracker.Timestamp = NoTimestamp
		if err := op.EndInput(); err != nil {
			return t.opError(i, fmt.Errorf("end of input: %w", err))
		}
	}
	for _, rp := range t.partitions {
		rp.BroadcastEvent(network.Event{Kind: network.EventEndOfData})
	}
	return nil
}

// closeOps closes the first opened operators (counted from the tail, the
// order they were opened in), head first, and returns the first error.
func (t *task) closeOps(opened int) (first error) {
	for i := len(t.ops) - opened; i < len(t.ops); i++ {
		if err := t.closeOp(i); err != nil && first == nil {
			first = err
		}
	}
	return first
}

func (t *task) closeOp(i int) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if f, ok := r.(*opFailure); ok {
				err = t.opError(f.op, f.err)
				return
			}
			err = t.opError(i, &PanicError{Value: r, Stack: debug.Stack()})
		}
	}()
	if err := t.ops[i].Close(); err != nil {
		return t.opError(i, fmt.Errorf("close: %w", err))
	}
	return nil
}

func (t *task) recovered(ctx context.Context, r any) error {
	switch v := r.(type) {
	case *opFailure:
		return t.opError(v.op, v.err)
	case *network.CanceledError:
		return t.canceled(ctx)
	case *network.YieldError:
		return v.Err // the urgent mail's error, already attributed
	}
	return t.opError(t.tracker.Cur, &PanicError{Value: r, Stack: debug.Stack()})
}

// swallowed returns the failure a user function recovered from instead of
// letting it unwind to the task: an OpContext.Fail, or a writer that stopped
// waiting for a buffer (the job was canceled, or urgent mail failed). Both
// are recorded where they happen, so the task fails all the same once the
// user function returns. It is checked per input buffer or source batch and
// before the task ends.
func (t *task) swallowed(ctx context.Context) error {
	for _, c := range t.ctxs {
		if c.failure != nil {
			return t.opError(c.Index, c.failure)
		}
	}
	for _, rp := range t.partitions {
		if err := rp.Err(); err != nil {
			var ye *network.YieldError
			if errors.As(err, &ye) {
				return ye.Err
			}
			return t.canceled(ctx)
		}
	}
	return nil
}

func (t *task) canceled(ctx context.Context) error {
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return fmt.Errorf("%w: %w", ErrTaskCanceled, cause)
	}
	return fmt.Errorf("%w: %w", ErrTaskCanceled, ctx.Err())
}

func (t *task) opError(i int, err error) error {
	var oe *OperatorError
	if errors.As(err, &oe) {
		return err
	}
	c := t.ctxs[i]
	return &OperatorError{Operator: c.Name, UID: c.UID, Subtask: c.Subtask, Parallelism: c.Parallelism, Err: err}
}

func (t *task) flush(now time.Time) {
	for _, rp := range t.partitions {
		rp.Flush()
	}
	t.lastFlush = now
}

// tick runs what is due at the current processing time: scheduled
// callbacks, and the flush of partially filled buffers once the buffer
// timeout passed. It is called per input buffer or source batch, never per
// record.
func (t *task) tick() error {
	t.publishCounts()
	now := t.clock.Now()
	t.debloatTick(now)
	if t.quiesced == 0 {
		if err := t.runDue(now); err != nil {
			return err
		}
	}
	if t.bufferTimeout > 0 && now.Sub(t.lastFlush) >= t.bufferTimeout {
		t.flush(now)
	}
	return nil
}

// serveMail runs every mail posted so far, in order.
func (t *task) serveMail() error {
	defer t.perf.suspend()() // mail is busy time, also while waiting for the final checkpoint
	for _, m := range t.mail.take() {
		t.tracker.Cur = 0
		t.tracker.Timestamp = NoTimestamp
		if err := m(); err != nil {
			return t.opError(0, err)
		}
	}
	return nil
}

// Urgent returns the channel signalled when urgent mail is queued; with
// RunUrgent it makes the task a network.Yielder.
func (t *task) Urgent() <-chan struct{} { return t.mail.urgentNotify }

// RunUrgent runs the queued urgent mail. It is called by a writer blocked
// on backpressure, possibly in the middle of a record, so it leaves the
// record context (tracker) as it found it.
func (t *task) RunUrgent() error {
	cur, ts := t.tracker.Cur, t.tracker.Timestamp
	defer func() { t.tracker.Cur, t.tracker.Timestamp = cur, ts }()
	for _, m := range t.mail.takeUrgent() {
		t.tracker.Cur = 0
		t.tracker.Timestamp = NoTimestamp
		if err := m(); err != nil {
			return t.opError(0, err)
		}
	}
	return nil
}

var _ network.Yielder = (*task)(nil)

// priorityArrived is the gate's priority listener: it runs on the
// delivering producer's goroutine and posts urgent mail, which reaches the
// task even while it is blocked on backpressure.
func (t *task) priorityArrived() {
	t.readStop.Store(true)
	if t.priorityPosted.CompareAndSwap(false, true) {
		t.mail.postUrgent(t.priorityMail)
	}
}

// takePriorityEvents is urgent mail: it takes the priority events the gate
// received, ahead of the buffers they overtook, so the task has them even
// while a writer of its is blocked in the middle of a record. runInput
// handles them at the next record boundary, before any buffer; this is
// where an unaligned checkpoint will start (the overtaken input buffers are
// its channel state).
func (t *task) takePriorityEvents() error {
	t.priorityPosted.Store(false) // an event arriving from now on posts again
	for {
		ch, b, ok := t.gate.PollPriority()
		if !ok {
			return nil
		}
		t.priority = append(t.priority, polled{ch: ch, b: b})
		if t.onPriority != nil {
			t.onPriority(ch, b.Event)
		}
	}
}

// nextInput returns the next priority event taken by urgent mail, or else
// the gate's next buffer.
func (t *task) nextInput() (int, *network.Buffer, bool) {
	if len(t.priority) > 0 {
		p := t.priority[0]
		t.priority[0] = polled{}
		t.priority = t.priority[1:]
		return p.ch, p.b, true
	}
	return t.gate.Poll()
}

// awaitOutputs blocks while an output has no free buffer, so that the task
// does not start work it cannot hand on (backpressure), unless ctx ends.
// Mail is served meanwhile. It returns early when mail took a priority
// event: a barrier needs no output buffer, and an unaligned checkpoint must
// not wait for backpressure. It first fails the task if a user function
// swallowed a failure.
func (t *task) awaitOutputs(ctx context.Context) error {
	if err := t.swallowed(ctx); err != nil {
		return err
	}
	for _, rp := range t.partitions {
		for len(t.priority) == 0 {
			interrupted, err := t.perf.awaitPool(ctx, rp.Pool(), t.mail.notify)
			if err != nil {
				return t.canceled(ctx)
			}
			if !interrupted {
				break
			}
			if err := t.serveMail(); err != nil {
				return err
			}
		}
	}
	return t.serveMail()
}

// wait blocks until ready fires, the next scheduled callback is due, or ctx
// ends. With no ready channel it waits for backoff at most.
func (t *task) wait(ctx context.Context, ready <-chan struct{}, backoff time.Duration) error {
	d := backoff
	if len(t.timers) > 0 && t.quiesced == 0 {
		due := t.timers[0].at.Sub(t.clock.Now())
		if due <= 0 {
			return nil
		}
		if d <= 0 || due < d {
			d = due
		}
	}
	var tc <-chan time.Time
	if d > 0 {
		tm := t.clock.NewTimer(d)
		defer tm.Stop()
		tc = tm.C()
	}
	t.perf.enter(stateIdle)
	select {
	case <-ready:
	case <-tc:
	case <-t.mail.notify:
		t.perf.exit()
		return t.serveMail()
	case <-ctx.Done():
		return t.canceled(ctx)
	}
	t.perf.exit()
	return nil
}

const sourceIdleBackoff = time.Millisecond

func (t *task) runSource(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return t.canceled(ctx)
		default:
		}
		if err := t.awaitOutputs(ctx); err != nil {
			return err
		}
		if t.drained {
			return nil
		}
		if t.suspended != 0 {
			if stopped, err := t.suspend(ctx); err != nil || stopped {
				return err
			}
			continue
		}
		t.tracker.Cur = 0
		t.tracker.Timestamp = NoTimestamp
		st, err := t.source.Read()
		if err != nil {
			return t.opError(0, err)
		}
		if err := t.swallowed(ctx); err != nil {
			return err
		}
		if err := t.tick(); err != nil {
			return err
		}
		switch st {
		case EndOfInput:
			return nil
		case NothingAvailable:
			t.flush(t.clock.Now())
			if err := t.wait(ctx, t.source.Ready(), sourceIdleBackoff); err != nil {
				return err
			}
		}
	}
}

func (t *task) runInput(ctx context.Context) error {
	n := t.gate.NumChannels()
	t.inputWM = watermark.NewCombiner(n)
	if err := t.replayChannelState(ctx); err != nil {
		return err
	}
	live := n
	dataEnded := make([]bool, n)
	dataLive := n
	endData := func(ch int) error {
		if dataEnded[ch] {
			return nil
		}
		dataEnded[ch] = true
		dataLive--
		if err := t.handleEvent(ch, network.Event{Kind: network.EventEndOfData}); err != nil {
			return err
		}
		if dataLive == 0 {
			return t.endInput()
		}
		return nil
	}
	for live > 0 {
		// Buffered input can keep a task busy for a long time after a
		// cancellation: check once per buffer.
		if ctx.Err() != nil {
			return t.canceled(ctx)
		}
		if t.suspended != 0 {
			if stopped, err := t.suspend(ctx); err != nil || stopped {
				return err
			}
			continue
		}
		// Priority events from now on stop the reading of a buffer; those
		// that came before are taken by the mail awaitOutputs serves.
		t.readStop.Store(false)
		if err := t.awaitOutputs(ctx); err != nil {
			return err
		}
		if t.partial.b != nil && len(t.priority) == 0 {
			if err := t.readPartial(ctx); err != nil {
				return err
			}
			continue
		}
		ch, b, ok := t.nextInput()
		if !ok {
			t.flush(t.clock.Now()) // idle: hand on what we have
			if err := t.wait(ctx, t.gate.Notify(), 0); err != nil {
				return err
			}
			if err := t.tick(); err != nil {
				return err
			}
			continue
		}
		if b.Kind == network.KindEvent {
			switch b.Event.Kind {
			case network.EventBarrier, network.EventCancelBarrier:
				if err := t.handleBarrierEvent(ch, b.Event, b.Overtook); err != nil {
					return err
				}
				continue
			case network.EventAnnouncement:
				if o := b.Event.Checkpoint; o.Timeoutable() {
					t.scheduleAlignmentTimer(b.Event.ID, b.Event.Timestamp+o.AlignedTimeout.Milliseconds())
				}
				continue
			case network.EventEndOfData:
				if err := endData(ch); err != nil {
					return err
				}
				continue
			case network.EventEndOfPartition:
				live--
				if err := endData(ch); err != nil {
					return err
				}
				if err := t.handleBarrierEvent(ch, b.Event, 0); err != nil {
					return err
				}
				continue
			}
			if err := t.handleEvent(ch, b.Event); err != nil {
				return err
			}
			continue
		}
		t.persistRead(ch, b)
		t.bytesIn += int64(len(b.Data))
		t.partial = partialBuffer{ch: ch, b: b}
		if err := t.readPartial(ctx); err != nil {
			return err
		}
	}
	return nil
}

// partialBuffer is a data buffer the task is reading: it stops after a
// whole record when a priority event arrives (an unaligned barrier must
// not wait for the rest of a buffer of slow records) and goes on after
// handling it.
type partialBuffer struct {
	ch  int
	b   *network.Buffer
	off int // bytes read
}

// readPartial reads on in t.partial's buffer until it ends or a priority
// event arrives; at its end the buffer goes back to the gate.
func (t *task) readPartial(ctx context.Context) error {
	p := &t.partial
	t.tracker.Cur = 0
	off, err := t.readers[p.ch].ReadFrom(p.ch, p.b, p.off, &t.readStop)
	if err != nil {
		return t.opError(0, err)
	}
	if err := t.swallowed(ctx); err != nil {
		return err
	}
	if p.off = off; off < len(p.b.Data) {
		return nil
	}
	t.gate.Release(p.ch, p.b)
	*p = partialBuffer{}
	return t.tick()
}

func (t *task) handleEvent(ch int, ev network.Event) error {
	var wm int64
	var advanced bool
	switch ev.Kind {
	case network.EventEndOfData:
		wm, advanced = t.inputWM.End(ch)
	case network.EventWatermark:
		wm, advanced = t.inputWM.Update(ch, ev.Timestamp)
	case network.EventWatermarkStatus:
		wm, advanced = t.inputWM.SetIdle(ch, ev.Idle)
	default:
		return nil
	}
	if advanced {
		t.watermark = wm
		if t.export != nil {
			t.export.inputWM.Store(wm)
		}
		err := t.deliverWatermark(0, wm)
		t.tracker.Timestamp = NoTimestamp // timers set it while they fire
		if err != nil {
			return err
		}
	}
	// An assigner at the head generates its own watermarks and idleness:
	// upstream status stops there, as it does for chained assigners.
	if idle := t.inputWM.AllIdle(); idle != t.inputIdle && !t.assigner[0] {
		t.inputIdle = idle
		t.forwardIdle(0, idle)
	}
	return nil
}

// deliverWatermark hands wm to operator i and, unless i generates its own
// watermarks, on to everything downstream of it.
func (t *task) deliverWatermark(i int, wm int64) error {
	if t.export != nil {
		t.export.ops[i].inputWM.Store(wm)
	}
	if t.assigner[i] && wm != math.MaxInt64 {
		return nil
	}
	if h, ok := t.ops[i].(WatermarkHandler); ok {
		t.tracker.Cur = i
		if err := h.ProcessWatermark(wm); err != nil {
			return t.opError(i, err)
		}
	}
	return t.forwardWatermark(i, wm)
}

func (t *task) forwardWatermark(i int, wm int64) error {
	if wm <= t.opWM[i] {
		return nil
	}
	t.opWM[i] = wm
	if t.export != nil {
		t.export.ops[i].outputWM.Store(wm)
	}
	for _, c := range t.children[i] {
		if err := t.deliverWatermark(c, wm); err != nil {
			return err
		}
	}
	for _, rp := range t.parts[i] {
		rp.BroadcastEvent(network.Event{Kind: network.EventWatermark, Timestamp: wm})
	}
	return nil
}

func (t *task) emitWatermark(i int, wm int64) error {
	if t.opIdle[i] {
		t.forwardIdle(i, false)
	}
	return t.forwardWatermark(i, wm)
}

func (t *task) emitIdle(i int, idle bool) { t.forwardIdle(i, idle) }

func (t *task) forwardIdle(i int, idle bool) {
	if t.opIdle[i] == idle {
		return
	}
	t.opIdle[i] = idle
	for _, c := range t.children[i] {
		if !t.assigner[c] {
			t.forwardIdle(c, idle)
		}
	}
	for _, rp := range t.parts[i] {
		rp.BroadcastEvent(network.Event{Kind: network.EventWatermarkStatus, Idle: idle})
	}
}

// schedule registers a processing-time callback of operator op.
func (t *task) schedule(at time.Time, op int, fn func() error) {
	t.seq++
	heap.Push(&t.timers, scheduled{at: at, seq: t.seq, op: op, fn: fn})
}

func (t *task) runDue(now time.Time) error {
	for len(t.timers) > 0 && !t.timers[0].at.After(now) {
		s := heap.Pop(&t.timers).(scheduled)
		t.tracker.Cur = s.op
		t.tracker.Timestamp = NoTimestamp
		err := s.fn()
		t.tracker.Timestamp = NoTimestamp // records that follow carry their own
		if err != nil {
			return t.opError(s.op, err)
		}
	}
	return nil
}

type scheduled struct {
	at  time.Time
	seq int64
	op  int
	fn  func() error
}

type scheduleHeap []scheduled

func (h scheduleHeap) Len() int { return len(h) }
func (h scheduleHeap) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].seq < h[j].seq
}
func (h scheduleHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *scheduleHeap) Push(x any)   { *h = append(*h, x.(scheduled)) }
func (h *scheduleHeap) Pop() any {
	old := *h
	s := old[len(old)-1]
	*h = old[:len(old)-1]
	return s
}
