package task

import (
	"sync/atomic"
	"time"

	"github.com/weirstream/weir/internal/network"
)

// debloat is a consumer task's buffer debloating (network.Debloater): on
// every tick, once a period passed, it measures the throughput of the
// task's input gate and announces the buffer size its senders cut at.
type debloat struct {
	d *network.Debloater // nil: off, or no input gate
	// size is the last announced size, or the segment size:
	// TaskMetrics.DebloatedBufferSize.
	size atomic.Int64
}

// debloatDefaults fills the zero fields of c with Flink's defaults; a
// negative threshold means 0.
func debloatDefaults(c *network.DebloatConfig) {
	if c.Target <= 0 {
		c.Target = network.DefaultDebloatTarget
	}
	if c.Period <= 0 {
		c.Period = network.DefaultDebloatPeriod
	}
	if c.Samples <= 0 {
		c.Samples = network.DefaultDebloatSamples
	}
	if c.ThresholdPercentages == 0 {
		c.ThresholdPercentages = network.DefaultDebloatThreshold
	} else if c.ThresholdPercentages < 0 {
		c.ThresholdPercentages = 0
	}
	if c.MinSize <= 0 {
		c.MinSize = network.DefaultMinBufferSize
	}
}

// initDebloat sets t's debloating up: with cfg (nil: off) for its input
// gate, whose senders use buffers of segment bytes.
func (t *task) initDebloat(cfg *network.DebloatConfig, segment int) {
	t.debloat.size.Store(int64(segment))
	if cfg == nil || t.gate == nil {
		return
	}
	c := *cfg
	debloatDefaults(&c)
	c.MaxSize = segment
	c.MinSize = min(c.MinSize, segment)
	_, c.Buffers = t.gate.BufferUsage()
	c.Buffers = max(c.Buffers, 1)
	t.debloat.d = network.NewDebloater(c)
}

// debloatTick feeds the debloater the gate's consumed bytes and the task's
// idle time at now, and announces the size it asks for. It runs on the task
// goroutine, from tick.
func (t *task) debloatTick(now time.Time) {
	d := t.debloat.d
	if d == nil || !d.Due(now) { // ticks come per input buffer: read the idle time per period only
		return
	}
	if size, ok := d.Sample(now, t.gate.ConsumedBytes(), t.perf.idleTime()); ok {
		t.gate.AnnounceBufferSize(size)
		t.debloat.size.Store(int64(size))
	}
}

// idleTime is the time the task waited for input so far, the open period
// included (0 without accounting).
func (m *taskMetrics) idleTime() time.Duration {
	if m.clock == nil {
		return 0
	}
	s, _ := m.read()
	return time.Duration(s.idle)
}
