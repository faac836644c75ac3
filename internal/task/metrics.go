package task

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weirstream/weir/internal/clock"
	"github.com/weirstream/weir/internal/network"
)

// TaskMetrics are one subtask's backpressure and checkpoint metrics, under
// Apache Flink's names (the JSON keys). It is a plain snapshot: Job.Metrics
// makes a new one on every call.
//
// The three time rates split the subtask's wall time, as measured by the
// job's clock, over about the last 5 to 6 seconds (a sliding window of
// cumulative counters sampled every second; Flink uses a 60 s meter), up
// to the moment of the call. They add up to 1000. A subtask that ended
// keeps the rates of the window before its end. All three are 0 until the
// job runs.
type TaskMetrics struct {
	// Vertex is the job vertex (graph.Vertex.ID), Subtask the subtask's
	// index in it, Name the vertex name with Flink's "(2/4)" suffix.
	Vertex  int    `json:"vertex"`
	Subtask int    `json:"subtask"`
	Name    string `json:"name"`

	// BusyTimeMsPerSecond is the time, in milliseconds per second, the
	// subtask was neither idle nor backpressured: processing records,
	// timers, checkpoints and other mail.
	BusyTimeMsPerSecond float64 `json:"busyTimeMsPerSecond"`
	// IdleTimeMsPerSecond is the time, in milliseconds per second, it
	// waited for input: an empty input gate, or a source that had nothing
	// available (and, after the end of its input, the wait for the final
	// checkpoint).
	IdleTimeMsPerSecond float64 `json:"idleTimeMsPerSecond"`
	// BackPressuredTimeMsPerSecond is the time, in milliseconds per
	// second, it waited for a free output buffer: before taking more input
	// or, in the middle of a record, to emit it.
	BackPressuredTimeMsPerSecond float64 `json:"backPressuredTimeMsPerSecond"`

	// InPoolUsage is the share (0 to 1) of the input gate's buffers in
	// use: data buffers received and not yet consumed, over the gate's
	// credit (exclusive buffers of every channel plus floating buffers).
	// 0 for sources.
	InPoolUsage float64 `json:"inPoolUsage"`
	// OutPoolUsage is the share (0 to 1) of an output pool's buffers in
	// use (being filled, queued or not yet consumed downstream), the
	// largest over the subtask's outputs. 0 for sinks.
	OutPoolUsage float64 `json:"outPoolUsage"`
	// InputQueueLength is the number of buffers (data and events)
	// received by the input gate and not yet taken by the subtask.
	InputQueueLength int `json:"inputQueueLength"`
	// OutputQueueLength is the number of buffers queued in the subtask's
	// subpartitions because their consumers had no credit for them,
	// summed over its outputs.
	OutputQueueLength int `json:"outputQueueLength"`

	// CheckpointStartDelayNanos is, for the last checkpoint the subtask
	// snapshotted, the time in nanoseconds (measured to the millisecond)
	// from the checkpoint's trigger to the first barrier reaching the
	// subtask. 0 before the first.
	CheckpointStartDelayNanos int64 `json:"checkpointStartDelayNanos"`
	// CheckpointAlignmentTime is, for the same checkpoint, the time in
	// nanoseconds (measured to the millisecond) from its first barrier to
	// its last arriving, while the inputs that had delivered theirs were
	// blocked; 0 with one input.
	CheckpointAlignmentTime int64 `json:"checkpointAlignmentTime"`

	// DebloatedBufferSize is the size in bytes at which the senders of
	// the subtask's input gate cut their data buffers: the size buffer
	// debloating last announced, or the segment size when debloating is
	// off or has announced nothing yet (and for sources).
	DebloatedBufferSize int `json:"debloatedBufferSize"`
}

// Metrics returns the metrics of every subtask, in the order of Tasks. It
// may be called at any time from any goroutine, also after Run returned.
func (j *Job) Metrics() []TaskMetrics {
	out := make([]TaskMetrics, len(j.tasks))
	for i, t := range j.tasks {
		out[i] = t.metrics()
	}
	return out
}

func (t *task) metrics() TaskMetrics {
	m := TaskMetrics{Vertex: t.vertex, Subtask: t.index, Name: t.name,
		CheckpointStartDelayNanos: t.perf.cpStartDelay.Load(), CheckpointAlignmentTime: t.perf.cpAlignment.Load(),
		DebloatedBufferSize: int(t.debloat.size.Load())}
	m.BusyTimeMsPerSecond, m.IdleTimeMsPerSecond, m.BackPressuredTimeMsPerSecond = t.perf.rates()
	m.InputQueueLength, m.InPoolUsage = t.inputUsage()
	m.OutputQueueLength, m.OutPoolUsage = t.outputUsage()
	return m
}

const (
	// metricsSampleInterval is the least clock time between two samples
	// of a subtask's time accounting.
	metricsSampleInterval = time.Second
	// metricsWindowSamples samples are kept: the rates span the last 5 to
	// 6 sample intervals.
	metricsWindowSamples = 6
	// metricsPollInterval is how often, in real time, the sampler looks
	// whether a sample is due. It does not use the job's clock, so that it
	// never holds a timer of a test's manual clock.
	metricsPollInterval = 100 * time.Millisecond
	// registrySamplePolls polls make a second: the meters of
	// Options.Metrics are sampled once in so many.
	registrySamplePolls = int(time.Second / metricsPollInterval)
)

// sampleMetrics samples every subtask's time accounting now and then
// whenever a sample is due, and the meters of Options.Metrics about once a
// second, until the returned stop is called; stop returns once the
// sampler's goroutine has.
func (j *Job) sampleMetrics() (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	polls := 0
	sample := func() {
		for _, t := range j.tasks {
			t.perf.sample()
		}
		if j.opts.Metrics != nil && polls%registrySamplePolls == 0 {
			j.opts.Metrics.Sample()
		}
		polls++
	}
	sample()
	go func() {
		defer close(done)
		tick := time.NewTicker(metricsPollInterval)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				sample()
			case <-quit:
				return
			}
		}
	}()
	return func() { close(quit); <-done }
}

// What the task goroutine is doing, as far as the time accounting is
// concerned.
const (
	stateBusy int32 = iota
	stateIdle
	stateBackPressured
)

// taskMetrics is one subtask's time accounting and checkpoint figures.
//
// The task goroutine, the only writer, opens a period when it starts to
// wait (enter) and closes it when the wait ends (exit), adding its length
// to a cumulative counter. Readers on other goroutines see the counters
// and the open period consistently through a sequence counter (a seqlock
// of atomics: the writer makes it odd while it reads the clock and
// updates, the reader reads the clock between its two loads of seq, so a
// reading is exact, never off by the time between a clock reading and an
// update). Busy time is what remains. Times are nanoseconds of the job's
// clock since base.
type taskMetrics struct {
	clock clock.Clock // nil: no accounting (tasks that tests build by hand)
	base  time.Time

	// Written by the task goroutine only, under seq.
	seq                 atomic.Uint64
	idle, backPressured atomic.Int64 // closed periods, cumulative
	state               atomic.Int32 // the open period's kind; stateBusy: none
	since               atomic.Int64 // when the open period started
	done                atomic.Bool  // the task ended, at ended
	ended               atomic.Int64
	suspendedIdle       func() // reopens an idle period suspended by mail

	mu     sync.Mutex // guards window, written by the sampler
	window timeWindow

	// Of the last checkpoint the subtask snapshotted, in nanoseconds.
	cpStartDelay, cpAlignment atomic.Int64
	// cpSize and cpPersisted are the bytes the subtask's last
	// acknowledged snapshot uploaded and the in-flight data among them.
	cpSize, cpPersisted atomic.Int64
}

var _ network.BackpressureObserver = (*taskMetrics)(nil)

// start makes m account time with c from now on.
func (m *taskMetrics) start(c clock.Clock) {
	m.clock, m.base = c, c.Now()
	m.suspendedIdle = func() { m.enter(stateIdle) }
}

func (m *taskMetrics) now() int64 { return int64(m.clock.Now().Sub(m.base)) }

// enter opens a period of state s (idle or backpressured) unless one is
// open.
func (m *taskMetrics) enter(s int32) {
	if m.clock == nil || m.state.Load() != stateBusy {
		return
	}
	m.seq.Add(1)
	m.since.Store(m.now())
	m.state.Store(s)
	m.seq.Add(1)
}

// exit closes the open period, if any.
func (m *taskMetrics) exit() {
	s := m.state.Load()
	if s == stateBusy {
		return
	}
	m.seq.Add(1)
	d := max(m.now()-m.since.Load(), 0)
	if s == stateIdle {
		m.idle.Add(d)
	} else {
		m.backPressured.Add(d)
	}
	m.state.Store(stateBusy)
	m.seq.Add(1)
}

// finish closes the open period and freezes the accounting: the task
// ended. It is called on the task goroutine after run returned.
func (m *taskMetrics) finish() {
	if m.clock == nil {
		return
	}
	m.exit()
	m.seq.Add(1)
	m.ended.Store(m.now())
	m.done.Store(true)
	m.seq.Add(1)
}

// BackpressureStarted implements network.BackpressureObserver: a writer
// waits for a buffer in the middle of a record.
func (m *taskMetrics) BackpressureStarted() { m.enter(stateBackPressured) }

// BackpressureEnded implements network.BackpressureObserver.
func (m *taskMetrics) BackpressureEnded() { m.exit() }

// awaitPool is Pool.WaitAvailableOr, accounted as backpressure if it
// blocks.
func (m *taskMetrics) awaitPool(ctx context.Context, p *network.Pool, interrupt <-chan struct{}) (bool, error) {
	if p.Available() {
		return false, nil
	}
	m.enter(stateBackPressured)
	defer m.exit()
	return p.WaitAvailableOr(ctx, interrupt)
}

// idleWhile runs wait, a wait for mail, as idle time; mail served
// meanwhile is busy (suspend).
func (m *taskMetrics) idleWhile(wait func() error) error {
	m.enter(stateIdle)
	defer m.exit()
	return wait()
}

// suspend closes an open idle period while the task serves mail, and
// returns what reopens it; with none open it returns a no-op.
func (m *taskMetrics) suspend() (resume func()) {
	if m.state.Load() != stateIdle {
		return func() {}
	}
	m.exit()
	return m.suspendedIdle
}

// checkpointed records the start delay and alignment of the checkpoint
// the subtask just snapshotted.
func (m *taskMetrics) checkpointed(startDelay, alignment time.Duration) {
	m.cpStartDelay.Store(int64(startDelay))
	m.cpAlignment.Store(int64(alignment))
}

// timeSample is a reading of the cumulative counters: at is the time of
// the reading, idle and backPressured the idle and backpressured time until then
// (nanoseconds since base).
type timeSample struct{ at, idle, backPressured int64 }

// read returns the counters now, the open period included, or at the
// task's end if it ended (done).
func (m *taskMetrics) read() (s timeSample, done bool) {
	for {
		seq := m.seq.Load()
		if seq&1 != 0 {
			runtime.Gosched()
			continue
		}
		idle, backPressured := m.idle.Load(), m.backPressured.Load()
		state, since := m.state.Load(), m.since.Load()
		done, at := m.done.Load(), m.ended.Load()
		if !done {
			// Between the loads of seq: a writer that reads the clock
			// meanwhile makes the reader retry.
			at = m.now()
		}
		if m.seq.Load() != seq {
			continue
		}
		switch open := max(at-since, 0); state {
		case stateIdle:
			idle += open
		case stateBackPressured:
			backPressured += open
		}
		return timeSample{at: at, idle: idle, backPressured: backPressured}, done
	}
}

// sample adds a reading to the window if none is there yet or the newest
// is at least metricsSampleInterval old. An ended task is not sampled: its
// window stays the one before its end.
func (m *taskMetrics) sample() {
	if m.clock == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	s, done := m.read()
	if newest, ok := m.window.newest(); done || ok && s.at-newest.at < int64(metricsSampleInterval) {
		return
	}
	m.window.add(s)
}

// rates returns the busy, idle and backpressured time in milliseconds per
// second from the oldest sample in the window to now.
func (m *taskMetrics) rates() (busy, idle, backPressured float64) {
	if m.clock == nil {
		return 0, 0, 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	from, ok := m.window.oldest()
	if !ok {
		return 0, 0, 0
	}
	to, _ := m.read()
	return msPerSecond(from, to)
}

// msPerSecond turns the counters' growth from one reading to a later one
// into milliseconds per second; busy is the rest of each second, so the
// three add up to 1000. With no time between them all are 0.
func msPerSecond(from, to timeSample) (busy, idle, backPressured float64) {
	dt := float64(to.at - from.at)
	if dt <= 0 {
		return 0, 0, 0
	}
	idle = min(max(float64(to.idle-from.idle)*1000/dt, 0), 1000)
	backPressured = min(max(float64(to.backPressured-from.backPressured)*1000/dt, 0), 1000-idle)
	return 1000 - idle - backPressured, idle, backPressured
}

// timeWindow is a ring of the last metricsWindowSamples samples.
type timeWindow struct {
	buf  [metricsWindowSamples]timeSample
	n    int // samples held
	next int // where the next one goes
}

func (w *timeWindow) add(s timeSample) {
	w.buf[w.next] = s
	w.next = (w.next + 1) % len(w.buf)
	w.n = min(w.n+1, len(w.buf))
}

func (w *timeWindow) oldest() (timeSample, bool) {
	if w.n == 0 {
		return timeSample{}, false
	}
	return w.buf[(w.next-w.n+len(w.buf))%len(w.buf)], true
}

func (w *timeWindow) newest() (timeSample, bool) {
	if w.n == 0 {
		return timeSample{}, false
	}
	return w.buf[(w.next-1+len(w.buf))%len(w.buf)], true
}

// startMetrics starts t's time accounting with the job's clock and has its
// writers report backpressure to it.
func (t *task) startMetrics(c clock.Clock) {
	t.perf.start(c)
	for _, rp := range t.partitions {
		rp.SetBackpressureObserver(&t.perf)
	}
}
