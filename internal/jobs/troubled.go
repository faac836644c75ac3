package jobs

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/spf13/pflag"

	"github.com/weirstream/weir"
)

// Troubled is a job that has one checkpoint problem on purpose, chosen
// with --induce, so that `weir doctor` (and people learning to read
// checkpoint statistics) can be shown each of them within seconds. Each
// problem comes with the configuration that makes it show (Defaults): a
// short checkpoint interval, enough retained checkpoints for the doctor
// to see a trend offline, and what the problem needs.
type Troubled struct {
	induce   string
	duration time.Duration
}

var _ Job = (*Troubled)(nil)

// TroubledProblems are the problems Troubled can induce, in the order
// `weir run troubled --help` lists them.
var TroubledProblems = []string{"backpressure", "skew", "slow-sync", "slow-async", "growth", "expire", "decline"}

// NewTroubled returns the troubled job; --induce must be set.
func NewTroubled() Job { return &Troubled{} }

// Name implements Job.
func (t *Troubled) Name() string { return "troubled" }

// Description implements Job.
func (t *Troubled) Description() string {
	return "Reproduce a checkpoint problem on purpose for weir doctor (--induce " + strings.Join(TroubledProblems, "|") + ")"
}

// LongDescription implements LongDescriber.
func (t *Troubled) LongDescription() string {
	return `A small job with one checkpoint problem, for 'weir doctor' to diagnose:

  backpressure  a fast source feeds a slow keyed operator ("Slow writer"):
                the network buffers between them stay full, and barriers
                queue behind them (start delay).
  skew          of two source subtasks, subtask 1 sends far more than
                subtask 0 to a slow keyed operator ("Count"): barriers of
                subtask 0 arrive at once, those of subtask 1 behind full
                buffers, and the operator aligns meanwhile (alignment).
  slow-sync     an operator ("Buffering") flushes a mini-batch for 300 ms
                on the task goroutine before every barrier (synchronous
                phase).
  slow-async    a keyed operator ("Large state") holds 48 MiB of state, all
                uploaded by every full checkpoint (asynchronous phase).
  growth        a keyed operator ("Sessions") keeps state for ever-new keys
                (state growth).
  expire        the slow-async job with a checkpoint timeout shorter than
                the upload (expired checkpoints).
  decline       a two-phase-commit sink ("Flaky sink") whose subtask 1
                fails to sync every second pre-committed transaction: the
                asynchronous phase declines the checkpoint, and the task
                fails and restarts (declined checkpoints).

Each problem sets the configuration it needs (checkpoint interval, retained
checkpoints, timeout, network buffers) unless --set or --config sets it.
The job runs until interrupted, or for --duration.

  weir run troubled --induce backpressure --duration 10s
  weir doctor weir-data/checkpoints/troubled`
}

// RegisterFlags implements Job.
func (t *Troubled) RegisterFlags(fs *pflag.FlagSet) {
	fs.StringVar(&t.induce, "induce", "", "the `problem` to induce: "+strings.Join(TroubledProblems, ", "))
	fs.DurationVar(&t.duration, "duration", 0, "stop the sources after this long (0: run until interrupted)")
}

// SetInduce sets the problem to induce, as --induce does.
func (t *Troubled) SetInduce(problem string) { t.induce = problem }

// Validate implements Job.
func (t *Troubled) Validate() error {
	var errs []error
	switch {
	case t.induce == "":
		errs = append(errs, fmt.Errorf("--induce: choose the problem: %s", strings.Join(TroubledProblems, ", ")))
	case !slices.Contains(TroubledProblems, t.induce):
		errs = append(errs, fmt.Errorf("--induce %q: must be one of %s", t.induce, strings.Join(TroubledProblems, ", ")))
	}
	if t.duration < 0 {
		errs = append(errs, fmt.Errorf("--duration %v: must not be negative", t.duration))
	}
	return errors.Join(errs...)
}

// Defaults implements Defaulter: the configuration the problem needs.
func (t *Troubled) Defaults() map[string]string {
	d := map[string]string{
		"execution.checkpointing.interval":     "500 ms",
		"execution.checkpointing.num-retained": "10",
	}
	switch t.induce {
	case "backpressure":
		// Small buffers keep the data in flight, and so the barriers'
		// wait behind it, in the hundreds of milliseconds.
		d["taskmanager.memory.segment-size"] = "4 kb"
	case "skew":
		// Smaller buffers, but more of them per channel: the first
		// barrier waits for a buffer or two at most, the last one for a
		// full channel.
		d["taskmanager.memory.segment-size"] = "2 kb"
		d["taskmanager.network.memory.buffers-per-channel"] = "8"
	case "slow-async":
		d["execution.checkpointing.interval"] = "200 ms"
	case "growth":
		d["execution.checkpointing.interval"] = "300 ms"
	case "expire":
		d["execution.checkpointing.interval"] = "200 ms"
		d["execution.checkpointing.timeout"] = "60 ms"
		d["execution.checkpointing.tolerable-failed-checkpoints"] = "5"
	case "decline":
		d["execution.checkpointing.interval"] = "300 ms"
		d["restart-strategy.type"] = "fixed-delay"
		d["restart-strategy.fixed-delay.attempts"] = "1000"
		d["restart-strategy.fixed-delay.delay"] = "300 ms"
	}
	return d
}

// Build implements Job.
func (t *Troubled) Build(env *weir.Environment, _ io.Writer) error {
	if env.Options().Checkpoint.Interval <= 0 {
		var sets []string
		for k, v := range t.Defaults() {
			sets = append(sets, "--set "+k+"="+strings.ReplaceAll(v, " ", ""))
		}
		slices.Sort(sets)
		return fmt.Errorf("--induce %s needs checkpointing and the configuration that shows the problem: %s",
			t.induce, strings.Join(sets, " "))
	}
	var until time.Time
	if t.duration > 0 {
		until = time.Now().Add(t.duration)
	}
	switch t.induce {
	case "backpressure":
		// Two source subtasks send as fast as they can to a keyed
		// operator that takes 100us per record.
		src := weir.FromSource(env, events{name: "Events", until: until}).SetParallelism(2).UID("troubled-events")
		slow := weir.KeyedProcess(weir.KeyBy(src, func(i int64) int64 { return i % 1024 }),
			func() weir.KeyedProcessFunction[int64, int64, int64] {
				return &countKey{pace: newPace(100 * time.Microsecond)}
			}).
			Name("Slow writer").UID("troubled-slow").SetParallelism(2)
		weir.SinkTo[int64](slow, discard[int64]{}).Name("Discard").UID("troubled-discard").SetParallelism(2)
	case "skew":
		// Subtask 1 of the source sends as fast as it can, subtask 0 one
		// record a second: the keyed operator's channels from subtask 1
		// stay full, those from subtask 0 empty.
		src := weir.FromSource(env, events{name: "Events", until: until, rates: []float64{1, 0}}).
			SetParallelism(2).UID("troubled-events")
		count := weir.KeyedProcess(weir.KeyBy(src, func(i int64) int64 { return i % 1024 }),
			func() weir.KeyedProcessFunction[int64, int64, int64] {
				return &countKey{pace: newPace(100 * time.Microsecond)}
			}).
			Name("Count").UID("troubled-count").SetParallelism(2)
		weir.SinkTo[int64](count, discard[int64]{}).Name("Discard").UID("troubled-discard").SetParallelism(2)
	case "slow-sync":
		src := weir.FromSource(env, events{name: "Events", until: until, rates: []float64{2000}}).UID("troubled-events")
		batched := weir.ProcessEach(src.Rebalance(), func() weir.ProcessFunction[int64, int64] {
			return &miniBatch{flushTime: 300 * time.Millisecond}
		}).Name("Buffering").UID("troubled-buffering")
		count := weir.KeyedProcess(weir.KeyBy(batched, func(i int64) int64 { return i % 1024 }),
			func() weir.KeyedProcessFunction[int64, int64, int64] { return &countKey{} }).
			Name("Count").UID("troubled-count")
		weir.SinkTo[int64](count, discard[int64]{}).Name("Discard").UID("troubled-discard")
	case "slow-async", "expire":
		// 6144 keys of 8 KiB: 48 MiB uploaded by every full checkpoint.
		src := weir.FromSource(env, events{name: "Keys", until: until, limit: largeKeys, rates: []float64{20}}).UID("troubled-keys")
		large := weir.KeyedProcess(weir.KeyBy(src, func(i int64) int64 { return i % largeKeys }),
			func() weir.KeyedProcessFunction[int64, int64, int64] { return &largeValue{size: 8 << 10} }).
			Name("Large state").UID("troubled-large")
		weir.SinkTo[int64](large, discard[int64]{}).Name("Discard").UID("troubled-discard")
	case "growth":
		// 10,000 new keys a second, each keeping 64 bytes for ever.
		src := weir.FromSource(env, events{name: "Session events", until: until, rates: []float64{10000}}).UID("troubled-sessions-src")
		sessions := weir.KeyedProcess(weir.KeyBy(src, func(i int64) int64 { return i }),
			func() weir.KeyedProcessFunction[int64, int64, int64] { return &largeValue{size: 64} }).
			Name("Sessions").UID("troubled-sessions")
		weir.SinkTo[int64](sessions, discard[int64]{}).Name("Discard").UID("troubled-discard")
	case "decline":
		src := weir.FromSource(env, events{name: "Events", until: until, rates: []float64{2000}}).UID("troubled-events")
		weir.SinkTo[int64](src.Rebalance(), flakySink{failSubtask: 1}).Name("Flaky sink").UID("troubled-flaky").SetParallelism(2)
	default:
		return fmt.Errorf("--induce %q: unknown problem", t.induce)
	}
	return nil
}

// largeKeys is the number of keys of the slow-async and expire problems.
const largeKeys = 6144

// events emits int64 numbers: subtask s of p emits s, s+p, s+2p, ... at
// rates[s] records per second (the last rate for subtasks beyond; none
// or 0: as fast as possible), the numbers below limit, if set, as fast as
// possible first (a load phase), until until if set. It is checkpointed:
// a subtask's split is its next number.
type events struct {
	name  string
	rates []float64
	limit int64
	until time.Time
}

func (e events) Name() string { return e.name }

func (e events) CreateReader(ctx weir.SourceContext) (weir.SourceReader[int64], error) {
	r := &eventsReader{e: e, next: int64(ctx.Subtask), step: int64(ctx.Parallelism)}
	if len(e.rates) > 0 {
		r.rate = e.rates[min(ctx.Subtask, len(e.rates)-1)]
	}
	for _, b := range ctx.RestoredSplits {
		if len(b) == 8 {
			r.next = int64(binary.BigEndian.Uint64(b))
		}
	}
	return r, nil
}

type eventsReader struct {
	e          events
	next, step int64
	rate       float64
	// paceStart is when the paced phase (after the load, if any) began,
	// paced what it emitted since.
	paceStart time.Time
	paced     int64
}

func (r *eventsReader) ReadBatch(out weir.Collector[int64]) (weir.ReadStatus, error) {
	if !r.e.until.IsZero() && time.Now().After(r.e.until) {
		return weir.EndOfInput, nil
	}
	batch := int64(256)
	if loading := r.e.limit > 0 && r.next < r.e.limit; !loading && r.rate > 0 {
		if r.paceStart.IsZero() {
			r.paceStart = time.Now()
		}
		allowed := int64(time.Since(r.paceStart).Seconds()*r.rate) + 1 - r.paced
		if allowed <= 0 {
			return weir.NothingAvailable, nil
		}
		batch = min(batch, allowed)
		r.paced += batch
	}
	for range batch {
		out.Collect(r.next)
		r.next += r.step
	}
	return weir.MoreAvailable, nil
}

// SnapshotSplits implements weir.CheckpointedReader.
func (r *eventsReader) SnapshotSplits() ([][]byte, error) {
	return [][]byte{binary.BigEndian.AppendUint64(nil, uint64(r.next))}, nil
}

func (r *eventsReader) Close() error { return nil }

// pace makes an operator cost about a fixed time per record without
// burning a core: it sleeps a millisecond every so many records.
type pace struct {
	every, n int
}

func newPace(perRecord time.Duration) *pace {
	return &pace{every: max(int(time.Millisecond/perRecord), 1)}
}

func (p *pace) record() {
	if p == nil {
		return
	}
	p.n++
	if p.n%p.every == 0 {
		time.Sleep(time.Millisecond)
	}
}

// countKey counts the records per key and emits the key, at the pace's
// cost per record.
type countKey struct {
	pace  *pace
	count *weir.ValueState[int64]
}

func (c *countKey) Open(ctx *weir.KeyedContext[int64, int64]) error {
	var err error
	c.count, err = weir.GetValueState(ctx, weir.ValueStateDescriptor[int64]{Name: "count"})
	return err
}

func (c *countKey) ProcessElement(ctx *weir.KeyedContext[int64, int64], v int64) error {
	c.pace.record()
	n, _ := c.count.Value()
	c.count.Update(n + 1)
	ctx.Emit(v)
	return nil
}

// largeValue keeps a value of size bytes per key, rewritten on every
// record of the key.
type largeValue struct {
	size  int
	value *weir.ValueState[[]byte]
}

func (l *largeValue) Open(ctx *weir.KeyedContext[int64, int64]) error {
	var err error
	l.value, err = weir.GetValueState(ctx, weir.ValueStateDescriptor[[]byte]{Name: "value"})
	return err
}

func (l *largeValue) ProcessElement(ctx *weir.KeyedContext[int64, int64], v int64) error {
	b := make([]byte, l.size)
	for i := range b {
		b[i] = byte(v + int64(i)) // not compressible to nothing
	}
	l.value.Update(b)
	ctx.Emit(v)
	return nil
}

// miniBatch buffers records and emits them before every barrier, taking
// flushTime to do so on the task goroutine: a slow synchronous phase.
type miniBatch struct {
	flushTime time.Duration
	buf       []int64
}

func (m *miniBatch) ProcessElement(_ *weir.Context[int64], v int64) error {
	m.buf = append(m.buf, v)
	return nil
}

// FlushBeforeBarrier implements weir.BarrierFlusher.
func (m *miniBatch) FlushBeforeBarrier(ctx *weir.Context[int64]) error {
	time.Sleep(m.flushTime) // an expensive flush, e.g. a synchronous write elsewhere
	for _, v := range m.buf {
		ctx.Emit(v)
	}
	m.buf = m.buf[:0]
	return nil
}

// EndOfInput implements weir.EndOfInputHandler.
func (m *miniBatch) EndOfInput(ctx *weir.Context[int64]) error {
	for _, v := range m.buf {
		ctx.Emit(v)
	}
	m.buf = nil
	return nil
}

// discard drops every record.
type discard[T any] struct{}

func (discard[T]) CreateWriter(weir.SinkContext) (weir.SinkWriter[T], error) {
	return discard[T]{}, nil
}
func (discard[T]) Write(T) error { return nil }
func (discard[T]) Flush() error  { return nil }
func (discard[T]) Close() error  { return nil }

// flakySink is a two-phase-commit sink that drops its records; the writer
// of subtask failSubtask fails to sync every second transaction it
// pre-committed, as a sink whose storage fails would.
type flakySink struct{ failSubtask int }

func (s flakySink) CreateWriter(ctx weir.SinkContext) (weir.SinkWriter[int64], error) {
	return &flakyWriter{fail: ctx.Subtask == s.failSubtask}, nil
}

func (flakySink) Commit(weir.SinkContext, []byte) error { return nil }

type flakyWriter struct {
	fail  bool
	syncs atomic.Int64
}

func (w *flakyWriter) Write(int64) error { return nil }
func (w *flakyWriter) Flush() error      { return nil }
func (w *flakyWriter) Close() error      { return nil }

// PreCommit implements weir.PreCommitter: the transaction is the
// checkpoint id.
func (w *flakyWriter) PreCommit(id int64) ([]byte, error) {
	return binary.BigEndian.AppendUint64(nil, uint64(id)), nil
}

// SyncPreCommitted implements weir.PreCommitSyncer; it runs in the
// asynchronous phase.
func (w *flakyWriter) SyncPreCommitted(txn []byte) error {
	if n := w.syncs.Add(1); w.fail && n%2 == 0 {
		return fmt.Errorf("sync of the transaction of checkpoint %d failed: injected storage error", binary.BigEndian.Uint64(txn))
	}
	return nil
}
