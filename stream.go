package weir

import (
	"encoding/binary"
	"fmt"
	"reflect"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/graph"
	"github.com/weirstream/weir/internal/network"
	"github.com/weirstream/weir/internal/task"
)

// Collector receives records: user functions emit through it.
type Collector[T any] interface {
	Collect(v T)
}

// DataStream is a stream of records of type T declared in an Environment.
// The setters configure the operator that produces the stream and return the
// stream, so they can be chained: weir.Map(s, f).Name("parse").UID("parse-v1").
type DataStream[T any] struct {
	env *Environment
	ups []upstream[T] // one producer; several after Union
}

// upstream is a producer of a stream and how records leave it for the next
// operator.
type upstream[T any] struct {
	node   *graph.Node
	output int // which output of node
	out    *outputImpl[T]
	part   network.Partitioner
	key    *keySelector[T] // set for Hash
}

func (s *DataStream[T]) single(what string) *upstream[T] {
	if len(s.ups) != 1 {
		s.env.errorf("%s on a union of %d streams: set it on each input instead", what, len(s.ups))
		return nil
	}
	return &s.ups[0]
}

// Name sets the operator's name, shown in logs, errors and plans.
func (s *DataStream[T]) Name(name string) *DataStream[T] {
	if u := s.single("Name"); u != nil {
		u.node.Name = name
	}
	return s
}

// UID sets the operator's stable id, under which its state is found again
// when the job's code changes. Unique per job.
func (s *DataStream[T]) UID(uid string) *DataStream[T] {
	if u := s.single("UID"); u != nil {
		u.node.UID = uid
	}
	return s
}

// SetParallelism sets the operator's number of subtasks.
func (s *DataStream[T]) SetParallelism(p int) *DataStream[T] {
	if u := s.single("SetParallelism"); u != nil {
		if p < 1 {
			s.env.errorf("operator %q: parallelism %d must be at least 1", u.node.Name, p)
		}
		u.node.Parallelism = p
	}
	return s
}

// SetMaxParallelism sets the operator's number of key groups, the upper
// bound of its parallelism after rescaling.
func (s *DataStream[T]) SetMaxParallelism(p int) *DataStream[T] {
	if u := s.single("SetMaxParallelism"); u != nil {
		u.node.MaxParallelism = p
	}
	return s
}

// DisableChaining runs the operator in a task of its own.
func (s *DataStream[T]) DisableChaining() *DataStream[T] {
	if u := s.single("DisableChaining"); u != nil {
		u.node.NoChain = true
	}
	return s
}

// WithCodec sets the codec that serializes the stream's records where they
// cross a network edge. Basic types have one built in (codec.For); other
// types need one as soon as they leave a chain.
func (s *DataStream[T]) WithCodec(c codec.Codec[T]) *DataStream[T] {
	for _, u := range s.ups {
		u.out.codec = c
	}
	return s
}

func (s *DataStream[T]) withPartitioner(p network.Partitioner) *DataStream[T] {
	out := &DataStream[T]{env: s.env, ups: append([]upstream[T](nil), s.ups...)}
	for i := range out.ups {
		out.ups[i].part, out.ups[i].key = p, nil
	}
	return out
}

// Rebalance sends the records round robin to every subtask of the next
// operator.
func (s *DataStream[T]) Rebalance() *DataStream[T] { return s.withPartitioner(network.Rebalance) }

// Rescale sends the records round robin to a local subset of the next
// operator's subtasks.
func (s *DataStream[T]) Rescale() *DataStream[T] { return s.withPartitioner(network.Rescale) }

// Broadcast sends every record to every subtask of the next operator.
func (s *DataStream[T]) Broadcast() *DataStream[T] { return s.withPartitioner(network.Broadcast) }

// Forward sends subtask i's records to subtask i of the next operator, which
// must have the same parallelism.
func (s *DataStream[T]) Forward() *DataStream[T] { return s.withPartitioner(network.Forward) }

// Union merges streams of the same type into one; the next operator reads
// all of them.
func Union[T any](s *DataStream[T], others ...*DataStream[T]) *DataStream[T] {
	out := &DataStream[T]{env: s.env, ups: append([]upstream[T](nil), s.ups...)}
	for _, o := range others {
		if o.env != s.env {
			s.env.errorf("Union: streams belong to different environments")
			continue
		}
		out.ups = append(out.ups, o.ups...)
	}
	return out
}

// connect adds a node fed by every producer of in, with main output type
// OUT.
func connect[IN, OUT any](in *DataStream[IN], n *graph.Node, impl *nodeImpl[OUT]) *DataStream[OUT] {
	env := in.env
	n.Impl = impl
	env.graph.AddNode(n)
	for _, u := range in.ups {
		var edgeImpl any
		if u.key != nil {
			edgeImpl = u.key
		}
		e := env.graph.Connect(u.node, n, u.part, edgeImpl)
		e.Output = u.output
	}
	return &DataStream[OUT]{env: env, ups: []upstream[OUT]{{node: n, out: impl.main}}}
}

// passThrough makes out, the stream of an operator that passes in's records
// on, use in's codec unless it gets its own.
func passThrough[T any](in, out *DataStream[T]) *DataStream[T] {
	if len(in.ups) > 0 {
		out.ups[0].out.like = in.ups[0].out
	}
	return out
}

// nodeImpl is the runtime side of a node with main output type OUT.
type nodeImpl[OUT any] struct {
	main  *outputImpl[OUT]
	sides []sideOutput // outputs 1, 2, ...
	build func(ctx *task.OpContext, outs []any) (task.Built, error)
	// assigns is set for operators that assign event timestamps.
	assigns bool
}

// sideOutput is an output other than the main one.
type sideOutput interface {
	task.OutputImpl
	codecChecker
}

var _ task.NodeImpl = (*nodeImpl[int])(nil)

func newOutputImpl[T any]() *outputImpl[T] {
	c, _ := codec.For[T]()
	return &outputImpl[T]{codec: c}
}

// newNodeImpl returns the implementation of a node whose build function
// takes its main output.
func newNodeImpl[OUT any](build func(ctx *task.OpContext, out network.Output[OUT]) (task.Built, error)) *nodeImpl[OUT] {
	return &nodeImpl[OUT]{main: newOutputImpl[OUT](), build: func(ctx *task.OpContext, outs []any) (task.Built, error) {
		var o network.Output[OUT]
		if len(outs) > 0 && outs[0] != nil {
			o = outs[0].(network.Output[OUT])
		}
		return build(ctx, o)
	}}
}

func (n *nodeImpl[OUT]) Build(ctx *task.OpContext, outs []any) (task.Built, error) {
	return n.build(ctx, outs)
}

func (n *nodeImpl[OUT]) NumOutputs() int { return 1 + len(n.sides) }

func (n *nodeImpl[OUT]) assignsTimestamps() bool { return n.assigns }

func (n *nodeImpl[OUT]) Output(i int) task.OutputImpl {
	if i == 0 {
		return n.main
	}
	return n.sides[i-1]
}

func (n *nodeImpl[OUT]) output(i int) codecChecker {
	if i == 0 {
		return n.main
	}
	return n.sides[i-1]
}

// outputImpl is the typed plumbing of one output with record type T.
type outputImpl[T any] struct {
	codec codec.Codec[T]
	// like is the output this one passes records of (Filter, timestamp
	// assigners, late data): without a codec of its own, it uses like's.
	like *outputImpl[T]
}

func (o *outputImpl[T]) codecOf() codec.Codec[T] {
	for ; o != nil; o = o.like {
		if o.codec != nil {
			return o.codec
		}
	}
	return nil
}

type codecChecker interface {
	hasCodec() bool
	typeName() string
}

func (o *outputImpl[T]) hasCodec() bool   { return o.codecOf() != nil }
func (o *outputImpl[T]) typeName() string { return reflect.TypeFor[T]().String() }

func (o *outputImpl[T]) Fanout(outs []any) any {
	f := &fanout[T]{outs: make([]network.Output[T], len(outs))}
	for i, out := range outs {
		f.outs[i] = out.(network.Output[T])
	}
	return f
}

func (o *outputImpl[T]) NetworkOutput(e task.EdgeInfo, rp *network.ResultPartition, index, producers int) (any, error) {
	c := o.codecOf()
	var enc network.Encoder[T] = c
	if e.Timestamped {
		enc = tsCodec[T]{c: c, tr: e.Tracker}
	}
	w := network.NewRecordWriter[T](rp, enc)
	var channel func(T) int
	if ks, ok := e.Impl.(*keySelector[T]); ok {
		channel = ks.channels(e.Consumers, e.ConsumerMaxParallelism)
	}
	return network.NewPartitionedOutput[T](e.Partitioner, w, index, producers, channel)
}

func (o *outputImpl[T]) NewReader(in any, timestamped bool, tr *task.Tracker) (network.BufferReader, error) {
	c := o.codecOf()
	var dec network.Decoder[T] = c
	if timestamped {
		dec = tsCodec[T]{c: c, tr: tr}
	}
	return network.NewRecordReader[T](dec, in.(network.Output[T])), nil
}

func (o *outputImpl[T]) NewKeyFilteredReader(in any, e task.EdgeInfo, index int) (network.BufferReader, error) {
	ks, ok := e.Impl.(*keySelector[T])
	if !ok {
		return nil, fmt.Errorf("a %v edge has no key selector to filter by", e.Partitioner)
	}
	channel := ks.channels(e.Consumers, e.ConsumerMaxParallelism)
	return o.NewReader(keepOutput[T]{out: in.(network.Output[T]), keep: func(v T) bool { return channel(v) == index }}, e.Timestamped, e.Tracker)
}

// keepOutput passes on the records keep accepts.
type keepOutput[T any] struct {
	out  network.Output[T]
	keep func(T) bool
}

func (k keepOutput[T]) Collect(v T) {
	if k.keep(v) {
		k.out.Collect(v)
	}
}

// tsCodec frames a record with its event timestamp: 8 bytes little endian,
// taken from the producing task's tracker and put into the consuming task's
// tracker just before the record is passed on.
type tsCodec[T any] struct {
	c  codec.Codec[T]
	tr *task.Tracker
}

func (t tsCodec[T]) Append(dst []byte, v T) []byte {
	return t.c.Append(binary.LittleEndian.AppendUint64(dst, uint64(t.tr.Timestamp)), v)
}

func (t tsCodec[T]) Decode(src []byte) (T, int, error) {
	if len(src) < 8 {
		var zero T
		return zero, 0, fmt.Errorf("record timestamp: %w", codec.ErrCorrupt)
	}
	v, n, err := t.c.Decode(src[8:])
	t.tr.Timestamp = int64(binary.LittleEndian.Uint64(src))
	return v, n + 8, err
}

// fanout passes each record to several outputs (a stream read by several
// operators).
type fanout[T any] struct{ outs []network.Output[T] }

func (f *fanout[T]) Collect(v T) {
	for _, o := range f.outs {
		o.Collect(v)
	}
}

func typeNameOf[T any]() string { return reflect.TypeFor[T]().String() }
