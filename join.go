package weir

import (
	"errors"
	"fmt"
	"time"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/graph"
	"github.com/weirstream/weir/internal/keyed"
	"github.com/weirstream/weir/internal/network"
	"github.com/weirstream/weir/internal/task"
	"github.com/weirstream/weir/internal/window"
)

// Joins of two keyed streams.
//
// Flink writes a window join as a.join(b).where(keyA).equalTo(keyB)
// .window(w).apply(f). Go methods cannot introduce the key's type, so in
// weir both sides are keyed first and the join takes the keyed streams:
//
//	weir.JoinApply(weir.Join(weir.KeyBy(a, keyA), weir.KeyBy(b, keyB)).
//		Window(weir.TumblingEventTimeWindows(10*time.Second)), f)

// JoinedStreams are two keyed streams to be joined in windows.
type JoinedStreams[K, IN1, IN2 any] struct {
	first  *KeyedStream[K, IN1]
	second *KeyedStream[K, IN2]
}

// Join pairs the records of two streams with equal keys that fall into the
// same window (see JoinedStreams.Window).
func Join[K, IN1, IN2 any](first *KeyedStream[K, IN1], second *KeyedStream[K, IN2]) *JoinedStreams[K, IN1, IN2] {
	if first.s.env != second.s.env {
		first.s.env.errorf("Join: the streams belong to different environments")
	}
	return &JoinedStreams[K, IN1, IN2]{first: first, second: second}
}

// WindowedJoin is a join with its windows; JoinApply or CoGroupApply gives
// the results.
type WindowedJoin[K, IN1, IN2 any] struct {
	j        *JoinedStreams[K, IN1, IN2]
	assigner WindowAssigner
	lateness int64
}

// Window sets the windows both inputs are cut into (tumbling, sliding or
// session, on event or processing time).
func (j *JoinedStreams[K, IN1, IN2]) Window(a WindowAssigner) *WindowedJoin[K, IN1, IN2] {
	if err := a.a.Validate(); err != nil {
		j.first.s.env.errorf("Join.Window: %v", err)
	}
	return &WindowedJoin[K, IN1, IN2]{j: j, assigner: a}
}

// AllowedLateness keeps event-time windows for d after their end, as
// WindowedStream.AllowedLateness: a late record fires its window again.
func (w *WindowedJoin[K, IN1, IN2]) AllowedLateness(d time.Duration) *WindowedJoin[K, IN1, IN2] {
	if d < 0 {
		w.j.first.s.env.errorf("AllowedLateness %v must not be negative", d)
	}
	w.lateness = d.Milliseconds()
	return w
}

// JoinApply calls fn for every pair of records, one of each input, with
// equal keys in the same window, when the window fires (an inner join: a
// window with records of one input only gives nothing). Results carry the
// window's max timestamp.
func JoinApply[K, IN1, IN2, OUT any](w *WindowedJoin[K, IN1, IN2], fn func(key K, window TimeWindow, a IN1, b IN2, out Collector[OUT])) *DataStream[OUT] {
	return coGroup(w, "Window(Join)", func(key K, win TimeWindow, as []IN1, bs []IN2, out Collector[OUT]) {
		for _, a := range as {
			for _, b := range bs {
				fn(key, win, a, b, out)
			}
		}
	})
}

// CoGroupApply calls fn once per key and window with all the window's
// records of each input (one of the slices may be empty): outer joins and
// anything else that needs whole groups.
func CoGroupApply[K, IN1, IN2, OUT any](w *WindowedJoin[K, IN1, IN2], fn func(key K, window TimeWindow, as []IN1, bs []IN2, out Collector[OUT])) *DataStream[OUT] {
	return coGroup(w, "Window(CoGroup)", fn)
}

// joinItem is a record of either input, as the window keeps it.
type joinItem[IN1, IN2 any] struct {
	second bool
	a      IN1
	b      IN2
}

func joinItemCodec[IN1, IN2 any](c1 codec.Codec[IN1], c2 codec.Codec[IN2]) codec.Codec[joinItem[IN1, IN2]] {
	return codec.Func(func(dst []byte, v joinItem[IN1, IN2]) []byte {
		if v.second {
			return c2.Append(append(dst, 1), v.b)
		}
		return c1.Append(append(dst, 0), v.a)
	}, func(src []byte) (joinItem[IN1, IN2], int, error) {
		var v joinItem[IN1, IN2]
		if len(src) == 0 || src[0] > 1 {
			return v, 0, fmt.Errorf("join record: %w", codec.ErrCorrupt)
		}
		var n int
		var err error
		if v.second = src[0] == 1; v.second {
			v.b, n, err = c2.Decode(src[1:])
		} else {
			v.a, n, err = c1.Decode(src[1:])
		}
		return v, n + 1, err
	})
}

// coGroup is one window operator reading both inputs: each record is
// tagged with its input and kept in the window's list; a firing window is
// split back into the two inputs' records.
func coGroup[K, IN1, IN2, OUT any](w *WindowedJoin[K, IN1, IN2], name string, fn func(K, TimeWindow, []IN1, []IN2, Collector[OUT])) *DataStream[OUT] {
	first, second := w.j.first, w.j.second
	env := first.s.env
	key1, key2 := first.key, second.key
	spec := window.Spec[K, joinItem[IN1, IN2]]{
		Key: func(v joinItem[IN1, IN2]) K {
			if v.second {
				return key2(v.b)
			}
			return key1(v.a)
		},
		KeyCodec: first.keyCodec, Assigner: w.assigner.a, Lateness: w.lateness,
	}
	c1, c2 := first.s.ups[0].out, second.s.ups[0].out
	impl := newNodeImpl(func(ctx *task.OpContext, out network.Output[OUT]) (task.Built, error) {
		op := &windowOp[K, joinItem[IN1, IN2]]{opBase: newOpBase(ctx)}
		op.w = window.New(ctx, env.keyedConfig, spec, nil, func(rt *keyed.Runtime) (window.Contents[K, joinItem[IN1, IN2]], error) {
			ic1, ic2 := c1.codecOf(), c2.codecOf()
			if ic1 == nil || ic2 == nil {
				return nil, errors.New(name + ": both inputs need codecs (WithCodec) to keep their records in window state")
			}
			return window.NewProcess(rt, joinItemCodec(ic1, ic2), func(k K, win window.Window, items []joinItem[IN1, IN2]) error {
				// Fresh slices per firing: fn may keep them.
				var as []IN1
				var bs []IN2
				for _, it := range items {
					if it.second {
						bs = append(bs, it.b)
					} else {
						as = append(as, it.a)
					}
				}
				fn(k, TimeWindow(win), as, bs, out)
				return nil
			})
		})
		return task.Built{Op: op,
			Input:  network.Output[IN1](joinInput1[K, IN1, IN2]{op}),
			Input2: network.Output[IN2](joinInput2[K, IN1, IN2]{op})}, nil
	})
	return connectTwo(first.s, second.s, &graph.Node{Name: name}, impl)
}

type joinInput1[K, IN1, IN2 any] struct {
	op *windowOp[K, joinItem[IN1, IN2]]
}

func (j joinInput1[K, IN1, IN2]) Collect(v IN1) { j.op.Collect(joinItem[IN1, IN2]{a: v}) }

type joinInput2[K, IN1, IN2 any] struct {
	op *windowOp[K, joinItem[IN1, IN2]]
}

func (j joinInput2[K, IN1, IN2]) Collect(v IN2) { j.op.Collect(joinItem[IN1, IN2]{second: true, b: v}) }

// IntervalJoin joins each record a of first with every record b of second
// with the same key whose timestamp lies in [a's + lower, a's + upper]
// (both bounds inclusive), as Flink's interval join; fn gets each pair,
// and its results carry the larger of the two timestamps. Both inputs need
// event timestamps. A record older than the watermark when it arrives is
// dropped, and each record is kept only until the watermark shows that no
// record it could still match can arrive: until a's + upper for the first
// input, b's - lower for the second.
func IntervalJoin[K, IN1, IN2, OUT any](first *KeyedStream[K, IN1], second *KeyedStream[K, IN2], lower, upper time.Duration, fn func(a IN1, b IN2, out Collector[OUT])) *DataStream[OUT] {
	env := first.s.env
	lo, up := lower.Milliseconds(), upper.Milliseconds()
	if lo > up {
		env.errorf("IntervalJoin: lower bound %v is greater than upper bound %v", lower, upper)
	}
	c1, c2 := first.s.ups[0].out, second.s.ups[0].out
	return keyedCoProcess(ConnectKeyed(first, second), "IntervalJoin", func() KeyedCoProcessFunction[K, IN1, IN2, OUT] {
		return &intervalJoin[K, IN1, IN2, OUT]{lower: lo, upper: up, fn: fn, c1: c1.codecOf(), c2: c2.codecOf()}
	})
}

// intervalJoin buffers each input's records per key in a list state of
// (timestamp, record) pairs. Matching scans the other input's list, as
// Flink's operator scans its map state; a list is one state entry, which
// the backends keep hot (the pebble backend's write cache appends to it in
// memory) where a map would cost an iterator per record.
type intervalJoin[K, IN1, IN2, OUT any] struct {
	lower, upper int64
	fn           func(IN1, IN2, Collector[OUT])
	c1           codec.Codec[IN1]
	c2           codec.Codec[IN2]
	left         *ListState[codec.Pair[int64, IN1]]
	right        *ListState[codec.Pair[int64, IN2]]
	out          tsCollector[OUT]
}

// tsCollector emits with a given timestamp.
type tsCollector[OUT any] struct {
	tr  *task.Tracker
	out network.Output[OUT]
	ts  int64
}

func (c *tsCollector[OUT]) Collect(v OUT) {
	saved := c.tr.Timestamp
	c.tr.Timestamp = c.ts
	c.out.Collect(v)
	c.tr.Timestamp = saved
}

func (j *intervalJoin[K, IN1, IN2, OUT]) Open(ctx *KeyedContext[K, OUT]) error {
	if j.c1 == nil || j.c2 == nil {
		return errors.New("IntervalJoin: both inputs need codecs (WithCodec) to keep their records in state")
	}
	var err1, err2 error
	j.left, err1 = GetListState(ctx, ListStateDescriptor[codec.Pair[int64, IN1]]{Name: "interval-join-left", Codec: codec.PairOf(codec.Int64(), j.c1)})
	j.right, err2 = GetListState(ctx, ListStateDescriptor[codec.Pair[int64, IN2]]{Name: "interval-join-right", Codec: codec.PairOf(codec.Int64(), j.c2)})
	j.out = tsCollector[OUT]{tr: ctx.op.Tracker, out: ctx.out}
	return errors.Join(err1, err2)
}

func eventTime[K, OUT any](ctx *KeyedContext[K, OUT]) (int64, error) {
	ts, ok := ctx.Timestamp()
	if !ok {
		return 0, errors.New("IntervalJoin got a record without a timestamp: assign them with AssignTimestampsAndWatermarks, or with FromSourceWithWatermarks and a strategy with a timestamp function (or a reader that emits with SplitOutput.CollectWithTimestamp)")
	}
	return ts, nil
}

func (j *intervalJoin[K, IN1, IN2, OUT]) ProcessElement1(ctx *KeyedContext[K, OUT], a IN1) error {
	ts, err := eventTime(ctx)
	if err != nil || ts < ctx.CurrentWatermark() {
		return err // a late record joins nothing
	}
	j.left.Add(codec.Pair[int64, IN1]{First: ts, Second: a})
	for _, b := range j.right.Get() {
		if b.First >= ts+j.lower && b.First <= ts+j.upper {
			j.out.ts = max(ts, b.First)
			j.fn(a, b.Second, &j.out)
		}
	}
	ctx.RegisterEventTimeTimer(ts + max(j.upper, 0))
	return nil
}

func (j *intervalJoin[K, IN1, IN2, OUT]) ProcessElement2(ctx *KeyedContext[K, OUT], b IN2) error {
	ts, err := eventTime(ctx)
	if err != nil || ts < ctx.CurrentWatermark() {
		return err
	}
	j.right.Add(codec.Pair[int64, IN2]{First: ts, Second: b})
	for _, a := range j.left.Get() {
		if ts >= a.First+j.lower && ts <= a.First+j.upper {
			j.out.ts = max(ts, a.First)
			j.fn(a.Second, b, &j.out)
		}
	}
	ctx.RegisterEventTimeTimer(ts + max(-j.lower, 0))
	return nil
}

// OnTimer drops the records of either input that no future record can
// match any more.
func (j *intervalJoin[K, IN1, IN2, OUT]) OnTimer(_ *KeyedContext[K, OUT], t Timer) error {
	dropStale(j.left, func(ts int64) bool { return ts+max(j.upper, 0) <= t.Timestamp })
	dropStale(j.right, func(ts int64) bool { return ts+max(-j.lower, 0) <= t.Timestamp })
	return nil
}

// dropStale removes the pairs whose timestamp is stale from l.
func dropStale[T any](l *ListState[codec.Pair[int64, T]], stale func(int64) bool) {
	all := l.Get()
	keep := all[:0:0]
	for _, p := range all {
		if !stale(p.First) {
			keep = append(keep, p)
		}
	}
	switch {
	case len(keep) == len(all):
	case len(keep) == 0:
		l.Clear()
	default:
		l.Update(keep)
	}
}
