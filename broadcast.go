package weir

import (
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"maps"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/graph"
	"github.com/weirstream/weir/internal/network"
	"github.com/weirstream/weir/internal/task"
)

// The broadcast state pattern (Flink's BroadcastProcessFunction): a
// low-volume stream of rules or settings is broadcast to every subtask of
// an operator that also reads a regular stream. Every subtask keeps the
// broadcast records in broadcast state, a map that must evolve the same
// way on every subtask: it may change only in ProcessBroadcastElement, and
// ProcessElement sees it read-only. A checkpoint stores every subtask's
// copy; a restore gives subtask i the copy of old subtask i mod the old
// parallelism (the copies differ only by broadcast records still in
// flight, which an unaligned checkpoint persists per old subtask).

// BroadcastProcessFunction handles the records of a regular stream (IN)
// and of a broadcast stream (BC). It may also implement BroadcastOpener
// and Closer.
type BroadcastProcessFunction[IN, BC, OUT any] interface {
	// ProcessElement handles a record of the regular stream; broadcast
	// state is read-only here.
	ProcessElement(ctx *BroadcastContext[OUT], v IN) error
	// ProcessBroadcastElement handles a record of the broadcast stream,
	// on every subtask; it may change broadcast state.
	ProcessBroadcastElement(ctx *BroadcastContext[OUT], v BC) error
}

// BroadcastOpener is implemented by broadcast functions that obtain their
// broadcast state handles (GetBroadcastState) before the first record.
type BroadcastOpener[OUT any] interface {
	Open(ctx *BroadcastContext[OUT]) error
}

// BroadcastContext is what a broadcast function sees of its subtask.
type BroadcastContext[OUT any] struct {
	op       *task.OpContext
	out      network.Output[OUT]
	readOnly bool
	states   map[string]broadcastStore
	names    []string // of states, in registration order
}

// Emit sends v downstream.
func (c *BroadcastContext[OUT]) Emit(v OUT) { c.out.Collect(v) }

// Subtask is the index of this parallel instance.
func (c *BroadcastContext[OUT]) Subtask() int { return c.op.Subtask }

// Parallelism is the operator's number of subtasks.
func (c *BroadcastContext[OUT]) Parallelism() int { return c.op.Parallelism }

// CurrentWatermark is the operator's current event time.
func (c *BroadcastContext[OUT]) CurrentWatermark() int64 { return c.op.CurrentWatermark() }

// Logger returns a logger that names the job, operator and subtask.
func (c *BroadcastContext[OUT]) Logger() *slog.Logger { return c.op.Logger }

// broadcastStore is a broadcast state, untyped, as a snapshot encodes it.
type broadcastStore interface {
	encode() []byte
}

// broadcastStatePrefix names the union list that held subtask 0's copy of
// a broadcast state in checkpoints of earlier versions (restore reads it).
const broadcastStatePrefix = "broadcast-state/"

// broadcastCopiesPrefix names the union list that holds every subtask's
// copy of a broadcast state, each tagged with its subtask index.
const broadcastCopiesPrefix = "broadcast-state-copies/"

// BroadcastState is a map replicated on every subtask of a broadcast
// operator (see BroadcastProcessFunction).
type BroadcastState[K comparable, V any] struct {
	name     string
	m        map[K]V
	kc       codec.Codec[K]
	vc       codec.Codec[V]
	readOnly *bool
	fail     func(error)
}

// GetBroadcastState returns the broadcast state d describes (its name,
// key codec and value codec; nil codecs mean codec.For). The same name
// returns the same state.
func GetBroadcastState[K comparable, V any, OUT any](ctx *BroadcastContext[OUT], d MapStateDescriptor[K, V]) (*BroadcastState[K, V], error) {
	if s, ok := ctx.states[d.Name]; ok {
		bs, ok := s.(*BroadcastState[K, V])
		if !ok {
			return nil, fmt.Errorf("broadcast state %q is already registered with other types", d.Name)
		}
		return bs, nil
	}
	if d.Name == "" {
		return nil, errors.New("broadcast state: the descriptor has no name")
	}
	kc, err1 := codecOrBuiltin(d.KeyCodec, "broadcast state", d.Name, "key")
	vc, err2 := codecOrBuiltin(d.ValueCodec, "broadcast state", d.Name, "value")
	if err := errors.Join(err1, err2); err != nil {
		return nil, err
	}
	s := &BroadcastState[K, V]{name: d.Name, m: map[K]V{}, kc: kc, vc: vc, readOnly: &ctx.readOnly, fail: ctx.op.Fail}
	if r := ctx.op.Restored; r != nil {
		if err := s.restore(r, ctx.op.Subtask); err != nil {
			return nil, err
		}
	}
	ctx.states[d.Name] = s
	ctx.names = append(ctx.names, d.Name)
	return s, nil
}

// Get returns the value of k.
func (s *BroadcastState[K, V]) Get(k K) (V, bool) {
	v, ok := s.m[k]
	return v, ok
}

// Contains reports whether k is in the map.
func (s *BroadcastState[K, V]) Contains(k K) bool {
	_, ok := s.m[k]
	return ok
}

// Len is the number of entries.
func (s *BroadcastState[K, V]) Len() int { return len(s.m) }

// All iterates over the entries in an unspecified order; the map must not
// change during the iteration.
func (s *BroadcastState[K, V]) All() iter.Seq2[K, V] { return maps.All(s.m) }

func (s *BroadcastState[K, V]) writable(what string) bool {
	if *s.readOnly {
		s.fail(fmt.Errorf("broadcast state %q: %s in ProcessElement: broadcast state is read-only there, change it in ProcessBroadcastElement so every subtask keeps the same map", s.name, what))
		return false
	}
	return true
}

// Put sets k to v. Only ProcessBroadcastElement may change broadcast
// state; anywhere else Put fails the job.
func (s *BroadcastState[K, V]) Put(k K, v V) {
	if s.writable("Put") {
		s.m[k] = v
	}
}

// Remove deletes k (only in ProcessBroadcastElement).
func (s *BroadcastState[K, V]) Remove(k K) {
	if s.writable("Remove") {
		delete(s.m, k)
	}
}

// Clear removes every entry (only in ProcessBroadcastElement).
func (s *BroadcastState[K, V]) Clear() {
	if s.writable("Clear") {
		clear(s.m)
	}
}

// encode writes the entries as a count, then length-prefixed keys and
// values.
func (s *BroadcastState[K, V]) encode() []byte {
	b := binary.AppendUvarint(nil, uint64(len(s.m)))
	var tmp []byte
	for k, v := range s.m {
		tmp = s.kc.Append(tmp[:0], k)
		b = append(binary.AppendUvarint(b, uint64(len(tmp))), tmp...)
		tmp = s.vc.Append(tmp[:0], v)
		b = append(binary.AppendUvarint(b, uint64(len(tmp))), tmp...)
	}
	return b
}

func (s *BroadcastState[K, V]) decode(b []byte) error {
	bad := fmt.Errorf("restore broadcast state %q: %w", s.name, codec.ErrCorrupt)
	n, w := binary.Uvarint(b)
	if w <= 0 {
		return bad
	}
	b = b[w:]
	next := func() ([]byte, bool) {
		l, w := binary.Uvarint(b)
		if w <= 0 || uint64(len(b)-w) < l {
			return nil, false
		}
		e := b[w : w+int(l)]
		b = b[w+int(l):]
		return e, true
	}
	for range n {
		kb, ok1 := next()
		vb, ok2 := next()
		if !ok1 || !ok2 {
			return bad
		}
		k, _, err := s.kc.Decode(kb)
		if err != nil {
			return fmt.Errorf("restore broadcast state %q: key: %w", s.name, err)
		}
		v, _, err := s.vc.Decode(vb)
		if err != nil {
			return fmt.Errorf("restore broadcast state %q: value: %w", s.name, err)
		}
		s.m[k] = v
	}
	return nil
}

// BroadcastProcess applies a broadcast function to the records of s and
// of bc; every subtask sees every record of bc. newFn is called once per
// subtask.
func BroadcastProcess[IN, BC, OUT any](s *DataStream[IN], bc *DataStream[BC], newFn func() BroadcastProcessFunction[IN, BC, OUT]) *DataStream[OUT] {
	if s.env != bc.env {
		s.env.errorf("BroadcastProcess: the streams belong to different environments")
	}
	return connectTwo(s, bc.Broadcast(), &graph.Node{Name: "BroadcastProcess"}, newNodeImpl(func(ctx *task.OpContext, out network.Output[OUT]) (task.Built, error) {
		fn := newFn()
		if fn == nil {
			return task.Built{}, errors.New("BroadcastProcess: the function factory returned nil")
		}
		op := &broadcastOp[IN, BC, OUT]{opBase: newOpBase(ctx), fn: fn}
		op.bctx = &BroadcastContext[OUT]{op: ctx, out: out, states: map[string]broadcastStore{}}
		return task.Built{Op: op, Input: network.Output[IN](broadcastInput[IN, BC, OUT]{op}),
			Input2: network.Output[BC](broadcastSide[IN, BC, OUT]{op})}, nil
	}))
}

type broadcastOp[IN, BC, OUT any] struct {
	opBase
	fn   BroadcastProcessFunction[IN, BC, OUT]
	bctx *BroadcastContext[OUT]
}

func (p *broadcastOp[IN, BC, OUT]) Open() error {
	if o, ok := p.fn.(BroadcastOpener[OUT]); ok {
		return o.Open(p.bctx)
	}
	return nil
}

func (p *broadcastOp[IN, BC, OUT]) Close() error {
	if c, ok := p.fn.(Closer); ok {
		return c.Close()
	}
	return nil
}

// SnapshotState stores every subtask's copy of every broadcast state in a
// union list; a restore at any parallelism gives subtask i the copy of old
// subtask i mod the old parallelism (Flink's rule).
func (p *broadcastOp[IN, BC, OUT]) SnapshotState(id int64, opts checkpoint.Options) (task.OperatorSnapshot, error) {
	if err := p.bctx.storeStates(&p.opBase); err != nil {
		return task.OperatorSnapshot{}, err
	}
	return p.opBase.SnapshotState(id, opts)
}

// storeStates puts every subtask's copy of every broadcast state, tagged
// with the subtask's index, into the union list of b's operator state.
func (c *BroadcastContext[OUT]) storeStates(b *opBase) error {
	for _, name := range c.names {
		l, err := b.opState.List(broadcastCopiesPrefix+name, true)
		if err != nil {
			return err
		}
		l.Elements = [][]byte{append(binary.AppendUvarint(nil, uint64(c.op.Subtask)), c.states[name].encode()...)}
	}
	return nil
}

// restore loads the copy of old subtask subtask mod the old parallelism
// (Flink's rule), so that the in-flight broadcast data an unaligned
// checkpoint persisted at that old subtask, which this subtask replays,
// continues exactly that copy. Checkpoints of earlier versions hold
// subtask 0's copy only, under broadcastStatePrefix.
func (s *BroadcastState[K, V]) restore(r *task.RestoredState, subtask int) error {
	l, ok := r.List(broadcastCopiesPrefix + s.name)
	if !ok {
		if l, ok := r.List(broadcastStatePrefix + s.name); ok && len(l.Elements) > 0 {
			return s.decode(l.Elements[0])
		}
		return nil
	}
	copies := map[uint64][]byte{}
	var old uint64
	for _, e := range l.Elements {
		i, n := binary.Uvarint(e)
		if n <= 0 {
			return fmt.Errorf("broadcast state %q: a stored copy has no subtask index", s.name)
		}
		copies[i] = e[n:]
		old = max(old, i+1)
	}
	if len(copies) == 0 {
		return nil
	}
	c, ok := copies[uint64(subtask)%old]
	if !ok {
		c = copies[0]
	}
	return s.decode(c)
}

type broadcastInput[IN, BC, OUT any] struct{ p *broadcastOp[IN, BC, OUT] }

func (c broadcastInput[IN, BC, OUT]) Collect(v IN) {
	p := c.p
	p.tr.Cur = p.id
	p.bctx.readOnly = true
	if err := p.fn.ProcessElement(p.bctx, v); err != nil {
		p.ctx.Fail(err)
	}
	p.tr.Cur = p.parent
}

type broadcastSide[IN, BC, OUT any] struct{ p *broadcastOp[IN, BC, OUT] }

func (c broadcastSide[IN, BC, OUT]) Collect(v BC) {
	p := c.p
	p.tr.Cur = p.id
	p.bctx.readOnly = false
	if err := p.fn.ProcessBroadcastElement(p.bctx, v); err != nil {
		p.ctx.Fail(err)
	}
	p.tr.Cur = p.parent
}

// KeyedBroadcastProcessFunction handles a keyed stream (IN) with keyed
// state and timers, and a broadcast stream (BC) with broadcast state
// (Flink's KeyedBroadcastProcessFunction). It may also implement
// KeyedBroadcastOpener, TimerHandler and Closer.
type KeyedBroadcastProcessFunction[K, IN, BC, OUT any] interface {
	// ProcessElement handles a record of the keyed stream with its key
	// current; broadcast state is read-only here.
	ProcessElement(ctx *KeyedContext[K, OUT], v IN) error
	// ProcessBroadcastElement handles a record of the broadcast stream,
	// on every subtask, with no current key; it may change broadcast
	// state.
	ProcessBroadcastElement(ctx *BroadcastContext[OUT], v BC) error
}

// KeyedBroadcastOpener is implemented by keyed broadcast functions that
// obtain their keyed and broadcast state handles before the first record.
type KeyedBroadcastOpener[K, OUT any] interface {
	Open(ctx *KeyedContext[K, OUT], bctx *BroadcastContext[OUT]) error
}

// KeyedBroadcastProcess applies a keyed broadcast function to the records
// of ks and of bc; every subtask sees every record of bc. newFn is called
// once per subtask. Keyed state is checkpointed and rescaled by key group,
// broadcast state as in BroadcastProcess.
func KeyedBroadcastProcess[K, IN, BC, OUT any](ks *KeyedStream[K, IN], bc *DataStream[BC], newFn func() KeyedBroadcastProcessFunction[K, IN, BC, OUT]) *DataStream[OUT] {
	env := ks.s.env
	if env != bc.env {
		env.errorf("KeyedBroadcastProcess: the streams belong to different environments")
	}
	return connectTwo(ks.s, bc.Broadcast(), &graph.Node{Name: "KeyedBroadcastProcess"}, newNodeImpl(func(ctx *task.OpContext, out network.Output[OUT]) (task.Built, error) {
		fn := newFn()
		if fn == nil {
			return task.Built{}, errors.New("KeyedBroadcastProcess: the function factory returned nil")
		}
		op := &keyedBroadcastOp[K, IN, BC, OUT]{fn: fn, key: ks.key}
		op.keyedOp = newKeyedOp(ctx, env, fn, ks.keyCodec, out)
		op.bctx = &BroadcastContext[OUT]{op: ctx, out: out, states: map[string]broadcastStore{}}
		return task.Built{Op: op, Input: network.Output[IN](keyedBroadcastInput[K, IN, BC, OUT]{op}),
			Input2: network.Output[BC](keyedBroadcastSide[K, IN, BC, OUT]{op})}, nil
	}))
}

type keyedBroadcastOp[K, IN, BC, OUT any] struct {
	*keyedOp[K, OUT]
	fn   KeyedBroadcastProcessFunction[K, IN, BC, OUT]
	key  func(IN) K
	bctx *BroadcastContext[OUT]
}

func (p *keyedBroadcastOp[K, IN, BC, OUT]) Open() error {
	if err := p.keyedOp.Open(); err != nil {
		return err
	}
	if o, ok := p.fn.(KeyedBroadcastOpener[K, OUT]); ok {
		return o.Open(p.kctx, p.bctx)
	}
	return nil
}

// SnapshotState adds the broadcast states to the keyed operator's.
func (p *keyedBroadcastOp[K, IN, BC, OUT]) SnapshotState(id int64, opts checkpoint.Options) (task.OperatorSnapshot, error) {
	if err := p.bctx.storeStates(&p.opBase); err != nil {
		return task.OperatorSnapshot{}, err
	}
	return p.keyedOp.SnapshotState(id, opts)
}

type keyedBroadcastInput[K, IN, BC, OUT any] struct {
	p *keyedBroadcastOp[K, IN, BC, OUT]
}

func (c keyedBroadcastInput[K, IN, BC, OUT]) Collect(v IN) {
	p := c.p
	p.tr.Cur = p.id
	p.setKey(p.key(v))
	p.bctx.readOnly = true
	if err := p.fn.ProcessElement(p.kctx, v); err != nil {
		p.ctx.Fail(err)
	}
	p.tr.Cur = p.parent
}

type keyedBroadcastSide[K, IN, BC, OUT any] struct {
	p *keyedBroadcastOp[K, IN, BC, OUT]
}

func (c keyedBroadcastSide[K, IN, BC, OUT]) Collect(v BC) {
	p := c.p
	p.tr.Cur = p.id
	p.bctx.readOnly = false
	if err := p.fn.ProcessBroadcastElement(p.bctx, v); err != nil {
		p.ctx.Fail(err)
	}
	p.tr.Cur = p.parent
}
