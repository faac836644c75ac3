package window

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/keyed"
	"github.com/weirstream/weir/internal/network"
	"github.com/weirstream/weir/internal/state"
	"github.com/weirstream/weir/internal/task"
	"github.com/weirstream/weir/internal/timer"
)

// Spec is what a windowed stream declares.
type Spec[K, IN any] struct {
	// Key extracts a record's key; KeyCodec encodes it (as the keyed
	// stream's partitioning does).
	Key      func(IN) K
	KeyCodec codec.Codec[K]
	Assigner Assigner
	// Lateness is the allowed lateness in milliseconds.
	Lateness int64
}

// Operator runs the windows of one operator subtask. The API's operator
// wraps it: it forwards records to Process and checkpoint calls to
// Runtime.
type Operator[K, IN any] struct {
	spec        Spec[K, IN]
	op          *task.OpContext
	tr          *task.Tracker
	rt          *keyed.Runtime
	late        network.Output[IN] // nil: late records are dropped
	newContents func(rt *keyed.Runtime) (Contents[K, IN], error)
	contents    Contents[K, IN]
	sessions    state.Value[[]Window] // per key, for merging windows
	key         K
	windows     []Window
	nsBuf       []byte
	srcNS       [][]byte
}

// New returns the window operator of subtask op: its keyed runtime uses
// cfg, newContents makes the window contents once the backend is open,
// and late (nil: none) receives the records that arrive too late.
func New[K, IN any](op *task.OpContext, cfg keyed.Config, spec Spec[K, IN], late network.Output[IN],
	newContents func(rt *keyed.Runtime) (Contents[K, IN], error)) *Operator[K, IN] {
	o := &Operator[K, IN]{spec: spec, op: op, tr: op.Tracker, late: late, newContents: newContents}
	o.rt = keyed.New(op, cfg, o.onTimer)
	return o
}

// Runtime is the operator's keyed runtime (checkpoints, watermarks).
func (o *Operator[K, IN]) Runtime() *keyed.Runtime { return o.rt }

// Open opens the keyed runtime and the window state.
func (o *Operator[K, IN]) Open() error {
	if err := o.rt.Open(); err != nil {
		return err
	}
	var err error
	o.contents, err = o.newContents(o.rt)
	if err != nil {
		return err
	}
	if o.spec.Assigner.Kind == Session {
		o.sessions, err = state.NewValue(o.rt.Backend(), state.ValueDescriptor[[]Window]{
			Name: "session-windows", Codec: codec.SliceOf(windowCodec)})
	}
	return err
}

// Close closes the keyed runtime.
func (o *Operator[K, IN]) Close() error { return o.rt.Close() }

func (o *Operator[K, IN]) eventTime() bool { return o.spec.Assigner.EventTime }

func (o *Operator[K, IN]) cleanupTime(w Window) int64 {
	if !o.eventTime() {
		return w.MaxTimestamp()
	}
	if t := w.MaxTimestamp() + o.spec.Lateness; t >= w.MaxTimestamp() {
		return t
	}
	return math.MaxInt64
}

func (o *Operator[K, IN]) isLate(w Window) bool {
	return o.eventTime() && o.cleanupTime(w) <= o.op.CurrentWatermark()
}

// Process puts one record into its windows, firing those that are late but
// within the allowed lateness at once.
func (o *Operator[K, IN]) Process(v IN) error {
	k := o.spec.Key(v)
	o.rt.SetKey(o.spec.KeyCodec.Append(o.rt.KeyBuf(), k))
	o.key = k
	var ts int64
	if o.eventTime() {
		var ok bool
		ts, ok = o.tr.Timestamp, o.tr.Timestamp != task.NoTimestamp
		if !ok {
			return errors.New("event-time window got a record without a timestamp: assign them with AssignTimestampsAndWatermarks, or with FromSourceWithWatermarks and a strategy with a timestamp function (or a reader that emits with SplitOutput.CollectWithTimestamp)")
		}
	} else {
		ts = o.op.Now().UnixMilli()
	}
	o.windows = o.spec.Assigner.assign(o.windows[:0], ts)
	if o.spec.Assigner.Kind == Session {
		merged, err := o.mergeSession(o.windows[0])
		if err != nil {
			return err
		}
		if merged == nil {
			return o.dropLate(v)
		}
		o.windows = append(o.windows[:0], *merged)
	}
	added := false
	for _, w := range o.windows {
		if o.isLate(w) {
			continue
		}
		added = true
		ns := w.AppendNamespace(o.nsBuf[:0])
		o.nsBuf = ns
		if err := o.contents.Add(ns, v); err != nil {
			return err
		}
		if o.eventTime() && w.MaxTimestamp() <= o.op.CurrentWatermark() {
			// Late but within the allowed lateness: fire again at once.
			saved := o.tr.Timestamp
			if err := o.fire(w, ns); err != nil {
				return err
			}
			o.tr.Timestamp = saved
		} else {
			o.registerTimer(w.MaxTimestamp(), ns)
		}
		if c := o.cleanupTime(w); c != w.MaxTimestamp() && c != math.MaxInt64 {
			o.registerTimer(c, ns)
		}
	}
	if !added {
		return o.dropLate(v)
	}
	return nil
}

func (o *Operator[K, IN]) dropLate(v IN) error {
	if o.late != nil {
		o.late.Collect(v)
	}
	return nil
}

func (o *Operator[K, IN]) registerTimer(ts int64, ns []byte) {
	if o.eventTime() {
		o.rt.RegisterEventTime(ts, ns)
	} else {
		o.rt.RegisterProcessingTime(ts, ns)
	}
}

func (o *Operator[K, IN]) deleteTimer(ts int64, ns []byte) {
	if o.eventTime() {
		o.rt.DeleteEventTime(ts, ns)
	} else {
		o.rt.DeleteProcessingTime(ts, ns)
	}
}

// mergeSession adds the new session window to the key's sessions, merging
// every session it touches, and returns the window the record belongs to,
// or nil if that window is already late.
func (o *Operator[K, IN]) mergeSession(nw Window) (*Window, error) {
	o.sessions.SetNamespace(nil)
	cur, _, err := o.sessions.Get()
	if err != nil {
		return nil, err
	}
	merged := nw
	var absorbed []Window
	keep := make([]Window, 0, len(cur)+1)
	for _, w := range cur {
		if w.intersects(nw) {
			merged = merged.cover(w)
			absorbed = append(absorbed, w)
		} else {
			keep = append(keep, w)
		}
	}
	if o.isLate(merged) {
		return nil, nil
	}
	if len(absorbed) == 1 && absorbed[0] == merged {
		return &merged, nil // falls into an existing session
	}
	target := merged.AppendNamespace(nil)
	o.srcNS = o.srcNS[:0]
	for _, w := range absorbed {
		ns := w.AppendNamespace(nil)
		o.srcNS = append(o.srcNS, ns)
		o.deleteTimer(w.MaxTimestamp(), ns)
		if c := o.cleanupTime(w); c != w.MaxTimestamp() && c != math.MaxInt64 {
			o.deleteTimer(c, ns)
		}
	}
	if len(o.srcNS) > 0 {
		if err := o.contents.MergeInto(target, o.srcNS); err != nil {
			return nil, err
		}
	}
	keep = append(keep, merged)
	slices.SortFunc(keep, func(a, b Window) int { return int(a.Start - b.Start) })
	if err := o.sessions.Update(keep); err != nil {
		return nil, err
	}
	return &merged, nil
}

func (o *Operator[K, IN]) onTimer(t timer.Timer, _ bool) error {
	k, _, err := o.spec.KeyCodec.Decode(t.Key)
	if err != nil {
		return fmt.Errorf("decode timer key: %w", err)
	}
	o.key = k
	w := FromNamespace(t.Namespace)
	// A session that merged away had its timers deleted: a timer that fires
	// belongs to a live window.
	if t.Timestamp == w.MaxTimestamp() {
		if err := o.fire(w, t.Namespace); err != nil {
			return err
		}
	}
	if t.Timestamp == o.cleanupTime(w) {
		return o.cleanup(w, t.Namespace)
	}
	return nil
}

func (o *Operator[K, IN]) fire(w Window, ns []byte) error {
	o.tr.Timestamp = w.MaxTimestamp()
	return o.contents.Fire(o.key, ns, w)
}

func (o *Operator[K, IN]) cleanup(w Window, ns []byte) error {
	if err := o.contents.Clear(ns); err != nil {
		return err
	}
	if o.spec.Assigner.Kind != Session {
		return nil
	}
	o.sessions.SetNamespace(nil)
	cur, _, err := o.sessions.Get()
	if err != nil {
		return err
	}
	keep := slices.DeleteFunc(slices.Clone(cur), func(s Window) bool { return s == w })
	if len(keep) == 0 {
		return o.sessions.Clear()
	}
	return o.sessions.Update(keep)
}
