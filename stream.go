package weir

import (
	"reflect"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/graph"
	"github.com/weirstream/weir/internal/keygroup"
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
	node *graph.Node
	impl *nodeImpl[T]
	part network.Partitioner
	key  keyChannels[T] // set for Hash
}

// keyChannels returns, for a hash edge to consumers subtasks with maxP key
// groups, the function that maps a record to its consumer subtask. Each
// producer subtask calls it once and owns the returned function.
type keyChannels[T any] func(consumers, maxP int) func(T) int

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
		u.impl.codec = c
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

// KeyBy partitions the stream by the key that key extracts: every record with
// the same key goes to the same subtask of the next operator, chosen by key
// group (murmur3 of the key's encoding modulo max parallelism). K must have a
// built-in codec (codec.For); use KeyByCodec otherwise.
func KeyBy[T, K any](s *DataStream[T], key func(T) K) *DataStream[T] {
	kc, ok := codec.For[K]()
	if !ok {
		s.env.errorf("KeyBy: key type %s has no built-in codec: use KeyByCodec", reflect.TypeFor[K]())
		return s
	}
	return KeyByCodec(s, key, kc)
}

// KeyByCodec is KeyBy with an explicit codec for the key; the key's encoding
// decides its key group, so it must be deterministic.
func KeyByCodec[T, K any](s *DataStream[T], key func(T) K, kc codec.Codec[K]) *DataStream[T] {
	out := s.withPartitioner(network.Hash)
	channels := keyChannels[T](func(consumers, maxP int) func(T) int {
		var buf []byte
		return func(v T) int {
			buf = kc.Append(buf[:0], key(v))
			return keygroup.OperatorIndex(keygroup.Of(buf, maxP), maxP, consumers)
		}
	})
	for i := range out.ups {
		out.ups[i].key = channels
	}
	return out
}

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

// connect adds a node fed by every producer of in.
func connect[IN, OUT any](in *DataStream[IN], n *graph.Node, impl *nodeImpl[OUT]) *DataStream[OUT] {
	env := in.env
	n.Impl = impl
	env.graph.AddNode(n)
	for _, u := range in.ups {
		var edgeImpl any
		if u.key != nil {
			edgeImpl = u.key
		}
		env.graph.Connect(u.node, n, u.part, edgeImpl)
	}
	return &DataStream[OUT]{env: env, ups: []upstream[OUT]{{node: n, impl: impl}}}
}

// nodeImpl is the runtime side of a node with output type OUT.
type nodeImpl[OUT any] struct {
	codec codec.Codec[OUT]
	build func(ctx *task.OpContext, out network.Output[OUT]) (task.Built, error)
}

var _ task.NodeImpl = (*nodeImpl[int])(nil)

func newNodeImpl[OUT any](build func(ctx *task.OpContext, out network.Output[OUT]) (task.Built, error)) *nodeImpl[OUT] {
	c, _ := codec.For[OUT]()
	return &nodeImpl[OUT]{codec: c, build: build}
}

type codecChecker interface {
	hasCodec() bool
	typeName() string
}

func (n *nodeImpl[OUT]) hasCodec() bool   { return n.codec != nil }
func (n *nodeImpl[OUT]) typeName() string { return reflect.TypeFor[OUT]().String() }

func (n *nodeImpl[OUT]) Build(ctx *task.OpContext, out any) (task.Built, error) {
	var o network.Output[OUT]
	if out != nil {
		o = out.(network.Output[OUT])
	}
	return n.build(ctx, o)
}

func (n *nodeImpl[OUT]) Fanout(outs []any) any {
	f := &fanout[OUT]{outs: make([]network.Output[OUT], len(outs))}
	for i, o := range outs {
		f.outs[i] = o.(network.Output[OUT])
	}
	return f
}

func (n *nodeImpl[OUT]) NetworkOutput(e task.EdgeInfo, rp *network.ResultPartition, index, producers int) (any, error) {
	w := network.NewRecordWriter[OUT](rp, n.codec)
	var channel func(OUT) int
	if kc, ok := e.Impl.(keyChannels[OUT]); ok {
		channel = kc(e.Consumers, e.ConsumerMaxParallelism)
	}
	return network.NewPartitionedOutput[OUT](e.Partitioner, w, index, producers, channel)
}

func (n *nodeImpl[OUT]) NewReader(in any) (network.BufferReader, error) {
	return network.NewRecordReader[OUT](n.codec, in.(network.Output[OUT])), nil
}

// fanout passes each record to several outputs (a stream read by several
// operators).
type fanout[T any] struct{ outs []network.Output[T] }

func (f *fanout[T]) Collect(v T) {
	for _, o := range f.outs {
		o.Collect(v)
	}
}
