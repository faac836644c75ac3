// Package window is the window operator of keyed streams (Flink's
// WindowOperator with the default triggers): assigners that place a record
// in tumbling, sliding or session windows by event or processing time, the
// merging of session windows, the contents of a key's windows in keyed
// state (reduced, aggregated, or every element), and the timers that fire
// and clean up windows.
//
// Semantics: an event-time window fires when the watermark passes its max
// timestamp, and again for every late record within the allowed lateness;
// a processing-time window fires when processing time does. A window's
// contents are dropped at max timestamp + allowed lateness; records for a
// window already dropped are late and go to the late-data output.
//
// State layout (part of the checkpoint format): a window's contents live
// in keyed state "window-contents" in the window's namespace (Namespace:
// start and end, 8 bytes big endian each); session windows also keep each
// key's live sessions in value state "session-windows" (codec
// codec.SliceOf of the same 16-byte encoding). Timers carry the window's
// namespace.
//
// The public API (weir.Window, weir.Reduce, ...) declares windows; an
// Operator runs them for one subtask, on its task goroutine.
package window

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/weirstream/weir/codec"
)

// Window is the half-open interval [Start, End) of Unix milliseconds
// (weir.TimeWindow converts from it).
type Window struct {
	Start, End int64
}

// MaxTimestamp is the last millisecond in the window, the timestamp of its
// results.
func (w Window) MaxTimestamp() int64 { return w.End - 1 }

// intersects reports whether w and o overlap or touch (Flink's rule for
// merging session windows).
func (w Window) intersects(o Window) bool { return w.Start <= o.End && w.End >= o.Start }

func (w Window) cover(o Window) Window {
	return Window{Start: min(w.Start, o.Start), End: max(w.End, o.End)}
}

// AppendNamespace appends w's encoding as the state namespace of its
// contents to dst.
func (w Window) AppendNamespace(dst []byte) []byte {
	dst = binary.BigEndian.AppendUint64(dst, uint64(w.Start))
	return binary.BigEndian.AppendUint64(dst, uint64(w.End))
}

// FromNamespace decodes a namespace AppendNamespace wrote.
func FromNamespace(ns []byte) Window {
	return Window{Start: int64(binary.BigEndian.Uint64(ns)), End: int64(binary.BigEndian.Uint64(ns[8:]))}
}

var windowCodec = codec.Func(
	func(dst []byte, w Window) []byte { return w.AppendNamespace(dst) },
	func(src []byte) (Window, int, error) {
		if len(src) < 16 {
			return Window{}, 0, codec.ErrCorrupt
		}
		return FromNamespace(src), 16, nil
	})

// Kind is the kind of windows an Assigner makes.
type Kind uint8

// Kinds of windows.
const (
	Tumbling Kind = iota + 1
	Sliding
	Session
)

// Assigner decides which windows a record belongs to. Durations are in
// milliseconds.
type Assigner struct {
	Kind Kind
	// Size and Slide of tumbling (Slide = Size) and sliding windows, and
	// their Offset from the epoch.
	Size, Slide, Offset int64
	// Gap of session windows.
	Gap int64
	// EventTime assigns by the record's timestamp, else by processing
	// time.
	EventTime bool
}

// Validate reports a bad assigner.
func (a Assigner) Validate() error {
	switch a.Kind {
	case Tumbling, Sliding:
		if a.Size <= 0 || a.Slide <= 0 {
			return fmt.Errorf("window size %dms and slide %dms must be at least 1ms", a.Size, a.Slide)
		}
		if a.Offset < 0 || a.Offset >= a.Slide {
			return fmt.Errorf("window offset %dms must be in [0, slide %dms)", a.Offset, a.Slide)
		}
	case Session:
		if a.Gap <= 0 {
			return fmt.Errorf("session gap %dms must be at least 1ms", a.Gap)
		}
	default:
		return errors.New("window assigner not set: use a Tumbling, Sliding or Session constructor")
	}
	return nil
}

// windowStart is Flink's TimeWindow.getWindowStartWithOffset.
func windowStart(ts, offset, size int64) int64 {
	r := (ts - offset + size) % size
	if r < 0 {
		r += size
	}
	return ts - r
}

// assign appends the windows containing ts to dst.
func (a Assigner) assign(dst []Window, ts int64) []Window {
	switch a.Kind {
	case Session:
		return append(dst, Window{Start: ts, End: ts + a.Gap})
	default:
		last := windowStart(ts, a.Offset, a.Slide)
		for start := last; start > ts-a.Size; start -= a.Slide {
			dst = append(dst, Window{Start: start, End: start + a.Size})
		}
		return dst
	}
}
