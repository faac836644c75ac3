// Package watermark holds the event-time progress logic of sources and
// tasks: watermark generators and the combination of the watermarks of
// several inputs. Everything here is a pure state machine: events, periodic
// ticks and input updates in, watermarks out, with no goroutines or clock
// reads of its own (Idleness reads the processing time through a function it
// is given).
//
// A watermark w asserts that no more records with event timestamp <= w will
// follow. Watermarks are int64 milliseconds, like record timestamps.
// NoWatermark (math.MinInt64) is the watermark before any progress, and
// MaxWatermark (math.MaxInt64) the one at the end of input, after which
// every event-time timer may fire.
//
// The definitions follow Apache Flink: a Generator is Flink's
// WatermarkGenerator (onEvent, onPeriodicEmit), BoundedOutOfOrderness and
// Monotonous are its BoundedOutOfOrdernessWatermarks and
// AscendingTimestampsWatermarks, Idleness is WatermarksWithIdleness, and
// Combiner is the minimum over inputs of StatusWatermarkValve and
// WatermarkOutputMultiplexer.
package watermark

import (
	"fmt"
	"math"
	"time"
)

const (
	// NoWatermark is the watermark before any has been generated.
	NoWatermark int64 = math.MinInt64
	// MaxWatermark is the watermark at the end of input.
	MaxWatermark int64 = math.MaxInt64
)

// Generator makes the watermarks of one source output (a split, or a
// source subtask) from the timestamps of its records.
//
// The caller calls OnEvent for every record and OnPeriodicEmit at the
// auto-watermark interval, and forwards the result when it is larger than
// the last watermark it forwarded. A Generator is used by one goroutine.
type Generator interface {
	// OnEvent observes a record with event timestamp ts (ms).
	OnEvent(ts int64)
	// OnPeriodicEmit returns the current watermark, NoWatermark if there is
	// none yet.
	OnPeriodicEmit() int64
}

// BoundedOutOfOrderness returns a Generator for records that arrive at most
// maxDelay later than a record with a larger timestamp. Its watermark is
// maxTs - maxDelay - 1, in ms, where maxTs is the largest timestamp seen
// (Flink's formula, so a record exactly maxDelay late is not late), and
// NoWatermark before the first event. maxDelay is truncated to whole
// milliseconds; BoundedOutOfOrderness panics if it is negative.
func BoundedOutOfOrderness(maxDelay time.Duration) Generator {
	if maxDelay < 0 {
		panic(fmt.Sprintf("watermark: negative out-of-orderness bound %v", maxDelay))
	}
	d := maxDelay.Milliseconds()
	// Starting maxTs at NoWatermark + d + 1 makes the first watermark
	// NoWatermark and keeps maxTs - d - 1 from overflowing.
	return &boundedOutOfOrderness{delay: d, maxTs: NoWatermark + d + 1}
}

// Monotonous returns a Generator for records in timestamp order: its
// watermark is the largest timestamp seen minus one. It is
// BoundedOutOfOrderness(0).
func Monotonous() Generator { return BoundedOutOfOrderness(0) }

type boundedOutOfOrderness struct {
	delay int64 // ms
	maxTs int64
}

var _ Generator = (*boundedOutOfOrderness)(nil)

func (g *boundedOutOfOrderness) OnEvent(ts int64) { g.maxTs = max(g.maxTs, ts) }

func (g *boundedOutOfOrderness) OnPeriodicEmit() int64 { return g.maxTs - g.delay - 1 }
