package watermark

import "fmt"

// Combiner combines the watermarks of several inputs, such as the input
// channels of a task or the splits of a source subtask, into one: the
// minimum over the active inputs.
//
// Each input is active, idle, or ended. Its watermark only increases: a
// lower one than it has is ignored. The combined watermark only increases
// too, and every method returns it with advanced set when the call
// increased it, which is when the caller forwards it.
//
//   - An idle input is ignored. When every input that has not ended is idle,
//     the combined watermark stays where it is and the output is idle
//     (AllIdle); the caller forwards the idle status. (Flink's
//     StatusWatermarkValve instead flushes the largest input watermark when
//     the last active channel goes idle; the Combiner does as Flink's
//     WatermarkOutputMultiplexer for splits, so that an input resuming from
//     idleness does not find its records late.)
//   - An input that turns active again rejoins the minimum only once its
//     watermark has caught up with the combined one; until then it cannot
//     hold back the others (Flink's watermark alignment in
//     StatusWatermarkValve). Its records below the combined watermark are
//     late, whatever the Combiner does.
//   - An ended input is ignored from then on. When every input has ended the
//     combined watermark is MaxWatermark.
//
// Each call costs O(inputs). A Combiner is used by one goroutine. Methods
// panic if input is not in [0, inputs).
type Combiner struct {
	inputs   []combinerInput
	combined int64
}

type combinerInput struct {
	wm    int64
	idle  bool
	ended bool
}

// NewCombiner returns a Combiner of inputs active inputs, none with a
// watermark yet. It panics if inputs < 1.
func NewCombiner(inputs int) *Combiner {
	if inputs < 1 {
		panic(fmt.Sprintf("watermark: combiner of %d inputs", inputs))
	}
	c := &Combiner{inputs: make([]combinerInput, inputs), combined: NoWatermark}
	for i := range c.inputs {
		c.inputs[i].wm = NoWatermark
	}
	return c
}

// Update records watermark wm of input. It does not change whether the
// input is idle: a watermark of an idle input is kept and counts once the
// input is active again. Updates of an ended input are ignored.
func (c *Combiner) Update(input int, wm int64) (combined int64, advanced bool) {
	in := &c.inputs[input]
	if in.ended || wm <= in.wm {
		return c.combined, false
	}
	in.wm = wm
	return c.advance()
}

// SetIdle marks input idle or active. Marking an ended input is ignored.
func (c *Combiner) SetIdle(input int, idle bool) (combined int64, advanced bool) {
	in := &c.inputs[input]
	if in.ended || in.idle == idle {
		return c.combined, false
	}
	in.idle = idle
	return c.advance()
}

// End marks input finished. Ending an input twice is harmless.
func (c *Combiner) End(input int) (combined int64, advanced bool) {
	in := &c.inputs[input]
	if in.ended {
		return c.combined, false
	}
	in.ended, in.idle = true, false
	return c.advance()
}

// Watermark returns the combined watermark: NoWatermark before the first
// advance, MaxWatermark once every input has ended.
func (c *Combiner) Watermark() int64 { return c.combined }

// AllIdle reports whether the output is idle: at least one input has not
// ended and every such input is idle.
func (c *Combiner) AllIdle() bool {
	open := false
	for _, in := range c.inputs {
		if !in.ended {
			if !in.idle {
				return false
			}
			open = true
		}
	}
	return open
}

// advance recomputes the combined watermark: the minimum over active inputs
// that have caught up with it, or MaxWatermark when all inputs have ended.
func (c *Combiner) advance() (int64, bool) {
	m, aligned, open := MaxWatermark, false, false
	for _, in := range c.inputs {
		if in.ended {
			continue
		}
		open = true
		if in.idle || in.wm < c.combined {
			continue
		}
		m, aligned = min(m, in.wm), true
	}
	if (aligned || !open) && m > c.combined {
		c.combined = m
		return m, true
	}
	return c.combined, false
}
