package network

import (
	"fmt"
	"math"
	"sync/atomic"
	"time"
)

// Buffer debloating (Apache Flink's FLIP-183): a consumer sizes the data
// buffers its senders fill to its own throughput, so that the data queued
// in front of it, whatever the backpressure, takes about a target time to
// process. A checkpoint barrier queued behind that data then reaches the
// consumer in about that time instead of the time it takes to drain full
// segments.
//
//	consumer task          receiver                transport             sender
//	Debloater.Sample --> InputGate.AnnounceBufferSize --> BufferSizeListener --> PipelinedSubpartition
//	                                                                                 |
//	                                          ResultPartition cuts buffers at it <---+ (BufferSizeTarget)
//
// The Debloater is a deterministic calculation with no goroutine or clock:
// the consumer feeds it the time and its counters every now and then and
// announces what it returns. The size travels like credit, the other way of
// the data: the gate tells each channel's transport, which tells the
// subpartition; the producer's ResultPartition reads it atomically whenever
// it appends a record and sends the buffer once it holds at least that
// many bytes. Records are never split for this.

// Defaults of buffer debloating, Flink's.
const (
	// DefaultDebloatTarget is taskmanager.network.memory.buffer-debloat.target.
	DefaultDebloatTarget = time.Second
	// DefaultDebloatPeriod is taskmanager.network.memory.buffer-debloat.period.
	DefaultDebloatPeriod = 200 * time.Millisecond
	// DefaultDebloatSamples is taskmanager.network.memory.buffer-debloat.samples.
	DefaultDebloatSamples = 20
	// DefaultDebloatThreshold is
	// taskmanager.network.memory.buffer-debloat.threshold-percentages.
	DefaultDebloatThreshold = 25
	// DefaultMinBufferSize is taskmanager.memory.min-segment-size.
	DefaultMinBufferSize = 256
)

// DebloatConfig configures a Debloater. Every field must be set.
type DebloatConfig struct {
	// Target is how long the consumer should take to process the data
	// that can be queued at its input gate.
	Target time.Duration
	// Period is the least time between two calculations.
	Period time.Duration
	// Samples is the number of periods the buffer size is averaged over:
	// an exponential moving average with alpha = 2/(Samples+1).
	Samples int
	// ThresholdPercentages: a new size is announced only if it differs
	// from the last announced one by more than this percentage of it (or
	// reaches MinSize or MaxSize). 0 announces every change.
	ThresholdPercentages int
	// MinSize and MaxSize bound the size, in bytes; MaxSize is the
	// segment size, the size of buffers without debloating.
	MinSize, MaxSize int
	// Buffers is the number of data buffers that can be queued at the
	// gate: its credit capacity (exclusive buffers of every channel plus
	// the floating ones).
	Buffers int
}

func (c DebloatConfig) validate() error {
	switch {
	case c.Target <= 0, c.Period <= 0:
		return fmt.Errorf("target %v and period %v must be positive", c.Target, c.Period)
	case c.Samples < 1:
		return fmt.Errorf("samples %d must be at least 1", c.Samples)
	case c.ThresholdPercentages < 0:
		return fmt.Errorf("threshold %d%% must not be negative", c.ThresholdPercentages)
	case c.MinSize < 1 || c.MaxSize < c.MinSize || c.MaxSize > math.MaxInt32:
		return fmt.Errorf("sizes %d to %d must be positive and in order", c.MinSize, c.MaxSize)
	case c.Buffers < 1:
		return fmt.Errorf("buffers %d must be at least 1", c.Buffers)
	}
	return nil
}

// Debloater calculates the buffer size a consumer announces to its senders
// (Flink's BufferDebloater, BufferSizeEMA and ThroughputCalculator in one).
// It is deterministic, with no goroutine or clock: the consumer calls
// Sample with the time and its counters. It is not safe for concurrent use.
//
// Every Period it measures the throughput of the gate since the previous
// calculation: bytes of data buffers consumed over the time the consumer
// was not idle (time waiting for input is not a measure of how fast it
// consumes, as Flink pauses its measurement then). The buffer size that
// would let the gate's Buffers hold Target's worth of that throughput,
// throughput*Target/Buffers, is averaged with an exponential moving
// average over Samples periods (a growth is limited to twice the current
// average per period, so that it is as fast as a shrink, as in Flink) and
// clamped to [MinSize, MaxSize]. It is announced if it differs from the
// last announced size by more than ThresholdPercentages, or if it reached
// a bound.
type Debloater struct {
	cfg   DebloatConfig
	alpha float64

	started  bool
	from     time.Time     // start of the period being measured
	consumed int64         // bytes consumed at from
	idle     time.Duration // idle time at from

	throughput float64 // bytes per second of the last measured period
	avg        float64 // the moving average of the size
	announced  int
}

// NewDebloater returns a debloater that starts at cfg.MaxSize, the size
// senders use before any announcement. It panics if cfg is invalid.
func NewDebloater(cfg DebloatConfig) *Debloater {
	if err := cfg.validate(); err != nil {
		panic("network: debloat config: " + err.Error())
	}
	return &Debloater{cfg: cfg, alpha: 2 / float64(cfg.Samples+1),
		avg: float64(cfg.MaxSize), announced: cfg.MaxSize}
}

// Sample takes the consumer's counters at now: consumed, the bytes of data
// buffers it consumed so far, and idle, the time it waited for input so
// far (both cumulative, from any start). Once a Period passed since the
// previous calculation (the first call only starts the measurement) it
// calculates the buffer size and returns it with announce set if it is to
// be announced. A period in which the consumer was idle throughout
// measures nothing and changes nothing.
func (d *Debloater) Sample(now time.Time, consumed int64, idle time.Duration) (size int, announce bool) {
	if !d.started {
		d.started, d.from, d.consumed, d.idle = true, now, consumed, idle
		return d.announced, false
	}
	elapsed := now.Sub(d.from)
	if elapsed < d.cfg.Period {
		return d.announced, false
	}
	active := min(max(elapsed-(idle-d.idle), 0), elapsed)
	bytes := max(consumed-d.consumed, 0)
	d.from, d.consumed, d.idle = now, consumed, idle
	if active <= 0 {
		return d.announced, false
	}
	d.throughput = float64(bytes) / active.Seconds()
	return d.recalculate()
}

// recalculate updates the average with the last throughput and decides
// whether to announce it.
func (d *Debloater) recalculate() (int, bool) {
	want := d.throughput * d.cfg.Target.Seconds() / float64(d.cfg.Buffers)
	want = min(want, 2*d.avg)
	d.avg += d.alpha * (want - d.avg)
	d.avg = min(max(d.avg, float64(d.cfg.MinSize)), float64(d.cfg.MaxSize))
	size := int(math.Round(d.avg))
	if d.skip(size) {
		return d.announced, false
	}
	d.announced = size
	return size, true
}

// skip reports whether size is too close to the announced size to be
// announced. A bound is always announced: otherwise the size could stay
// up to the threshold away from it.
func (d *Debloater) skip(size int) bool {
	switch {
	case size == d.announced:
		return true
	case size <= d.cfg.MinSize || size >= d.cfg.MaxSize:
		return false
	}
	diff := size - d.announced
	if diff < 0 {
		diff = -diff
	}
	return int64(diff)*100 <= int64(d.announced)*int64(d.cfg.ThresholdPercentages)
}

// Due reports whether Sample at now would calculate (or start): callers
// whose counters cost something to read ask first.
func (d *Debloater) Due(now time.Time) bool { return !d.started || now.Sub(d.from) >= d.cfg.Period }

// Size is the last announced size, cfg.MaxSize before the first.
func (d *Debloater) Size() int { return d.announced }

// Throughput is the throughput of the last period measured, in bytes per
// second (0 before the first).
func (d *Debloater) Throughput() float64 { return d.throughput }

// BufferSizeListener is told the size at which a sender is to cut the data
// buffers of a channel (buffer debloating). The transport of a channel
// implements it to carry the receiver's announcement to the sender, and the
// sender side (PipelinedSubpartition) to learn it. It is called on the
// consumer's goroutine, without the gate's lock held; it must not block.
type BufferSizeListener interface {
	// NotifyNewBufferSize announces that data buffers are to be sent
	// once they hold at least size bytes.
	NotifyNewBufferSize(size int)
}

// BufferSizeTarget is a Target whose consumer can announce a buffer size:
// the ResultPartition cuts the target's data buffers at it.
type BufferSizeTarget interface {
	Target
	// BufferSizeLimit is where the announced size is kept, in bytes (0:
	// none, buffers are sent when full). The ResultPartition loads it
	// whenever it appended a record to the target's buffer. The pointer
	// stays the same for the target's life.
	BufferSizeLimit() *atomic.Int32
}

var (
	_ BufferSizeListener = (*LocalConnection)(nil)
	_ BufferSizeListener = (*PipelinedSubpartition)(nil)
	_ BufferSizeTarget   = (*PipelinedSubpartition)(nil)
)

// AnnounceBufferSize tells the sender of every connected channel, through
// the channel's transport if it is a BufferSizeListener, to cut its data
// buffers at size bytes. It is called by the consumer. A channel connected
// later learns only the next announcement.
func (g *InputGate) AnnounceBufferSize(size int) {
	g.mu.Lock()
	ls := make([]BufferSizeListener, 0, len(g.chans))
	for i := range g.chans {
		if l, ok := g.chans[i].sender.(BufferSizeListener); ok && g.chans[i].connected {
			ls = append(ls, l)
		}
	}
	g.mu.Unlock()
	for _, l := range ls {
		l.NotifyNewBufferSize(size)
	}
}

// ConsumedBytes is the number of bytes of data buffers the consumer
// released so far: the throughput a Debloater measures. Only the consumer
// may call it.
func (g *InputGate) ConsumedBytes() int64 { return g.consumed }

// countConsumed counts data buffer b, which the consumer releases.
func (g *InputGate) countConsumed(b *Buffer) { g.consumed += int64(len(b.Data)) }

// NotifyNewBufferSize passes the receiver's announcement on to the
// subpartition.
func (c *LocalConnection) NotifyNewBufferSize(size int) {
	if l, ok := c.sub.(BufferSizeListener); ok {
		l.NotifyNewBufferSize(size)
	}
}

// NotifyNewBufferSize sets the size at which the producer cuts the
// subpartition's data buffers.
func (s *PipelinedSubpartition) NotifyNewBufferSize(size int) {
	s.bufferSize.Store(int32(min(max(size, 1), math.MaxInt32)))
}

// BufferSizeLimit returns where the announced size is kept.
func (s *PipelinedSubpartition) BufferSizeLimit() *atomic.Int32 { return &s.bufferSize }

// noBufferSizeLimit is the limit of targets that take no announcement.
var noBufferSizeLimit atomic.Int32

// bufferSizeLimits returns the announced sizes of targets, one per target.
func bufferSizeLimits(targets []Target) []*atomic.Int32 {
	ls := make([]*atomic.Int32, len(targets))
	for i, t := range targets {
		ls[i] = &noBufferSizeLimit
		if bt, ok := t.(BufferSizeTarget); ok {
			ls[i] = bt.BufferSizeLimit()
		}
	}
	return ls
}

// reachedLimit reports whether subpartition sub's buffer, holding n bytes,
// reached the size its consumer announced.
func (rp *ResultPartition) reachedLimit(sub, n int) bool {
	l := rp.limits[sub].Load()
	return l > 0 && n >= int(l)
}

// cut sends subpartition sub's current buffer, which reached the announced
// size.
func (rp *ResultPartition) cut(sub int) {
	b := rp.cur[sub]
	rp.cur[sub] = nil
	rp.send(sub, b)
}
