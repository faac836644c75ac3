package keyed

import (
	"time"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/state"
)

// Keyed state handles. The public API (weir.ValueState...) wraps them by
// value, so an access costs what it did before the split: one call on the
// handle, one on the backend's state. A handle reads and writes the entry
// of the current key; a backend error, or an access without a current key,
// fails the subtask with an error naming the state.

// TTL is a state's time to live as the public API declares it
// (weir.StateTTLConfig); UpdateType and Visibility take the values of
// state.TTLUpdateType and state.TTLVisibility.
type TTL struct {
	TTL                      time.Duration
	UpdateType               uint8
	Visibility               uint8
	DisableBackgroundCleanup bool
}

func (t TTL) config() state.TTLConfig {
	return state.TTLConfig{TTL: t.TTL, UpdateType: state.TTLUpdateType(t.UpdateType),
		Visibility: state.TTLVisibility(t.Visibility), DisableBackgroundCleanup: t.DisableBackgroundCleanup}
}

// Value is one value per key.
type Value[T any] struct {
	s    state.Value[T]
	rt   *Runtime
	name string
}

// NewValue registers (or finds again, by name) a value state; a nil codec
// means codec.For[T].
func NewValue[T any](rt *Runtime, name string, c codec.Codec[T], ttl TTL) (Value[T], error) {
	d := state.ValueDescriptor[T]{Name: name, Codec: c, TTL: ttl.config()}
	s, err := state.NewValue(rt.backend, d)
	if err != nil {
		return Value[T]{}, err
	}
	DescribeValue(rt, name, c)
	rt.stateRegistered(d.TTL)
	return Value[T]{s: s, rt: rt, name: name}, nil
}

// Get returns the current key's value, and false if it has none.
func (s *Value[T]) Get() (T, bool) {
	s.rt.checkKey(s.name)
	v, ok, err := s.s.Get()
	s.rt.check(s.name, err)
	return v, ok
}

// Update sets the current key's value.
func (s *Value[T]) Update(v T) {
	s.rt.checkKey(s.name)
	s.rt.check(s.name, s.s.Update(v))
}

// Clear removes the current key's value.
func (s *Value[T]) Clear() {
	s.rt.checkKey(s.name)
	s.rt.check(s.name, s.s.Clear())
}

// List is a list per key.
type List[T any] struct {
	s    state.List[T]
	rt   *Runtime
	name string
}

// NewList registers (or finds again) a list state.
func NewList[T any](rt *Runtime, name string, c codec.Codec[T], ttl TTL) (List[T], error) {
	d := state.ListDescriptor[T]{Name: name, Codec: c, TTL: ttl.config()}
	s, err := state.NewList(rt.backend, d)
	if err != nil {
		return List[T]{}, err
	}
	DescribeList(rt, name, c)
	rt.stateRegistered(d.TTL)
	return List[T]{s: s, rt: rt, name: name}, nil
}

// Get returns the current key's elements in insertion order; the slice
// must not be modified and is valid until the next write.
func (s *List[T]) Get() []T {
	s.rt.checkKey(s.name)
	v, err := s.s.Get()
	s.rt.check(s.name, err)
	return v
}

// Add appends v.
func (s *List[T]) Add(v T) {
	s.rt.checkKey(s.name)
	s.rt.check(s.name, s.s.Add(v))
}

// AddAll appends vs.
func (s *List[T]) AddAll(vs []T) {
	s.rt.checkKey(s.name)
	s.rt.check(s.name, s.s.AddAll(vs))
}

// Update replaces the list with vs.
func (s *List[T]) Update(vs []T) {
	s.rt.checkKey(s.name)
	s.rt.check(s.name, s.s.Update(vs))
}

// Clear removes the current key's list.
func (s *List[T]) Clear() {
	s.rt.checkKey(s.name)
	s.rt.check(s.name, s.s.Clear())
}

// Map is a map per key.
type Map[K comparable, V any] struct {
	s    state.Map[K, V]
	rt   *Runtime
	name string
}

// NewMap registers (or finds again) a map state; nil codecs mean
// codec.For.
func NewMap[K comparable, V any](rt *Runtime, name string, kc codec.Codec[K], vc codec.Codec[V], ttl TTL) (Map[K, V], error) {
	d := state.MapDescriptor[K, V]{Name: name, KeyCodec: kc, ValueCodec: vc, TTL: ttl.config()}
	s, err := state.NewMap(rt.backend, d)
	if err != nil {
		return Map[K, V]{}, err
	}
	DescribeMap(rt, name, kc, vc)
	rt.stateRegistered(d.TTL)
	return Map[K, V]{s: s, rt: rt, name: name}, nil
}

// Get returns the value of k in the current key's map.
func (s *Map[K, V]) Get(k K) (V, bool) {
	s.rt.checkKey(s.name)
	v, ok, err := s.s.Get(k)
	s.rt.check(s.name, err)
	return v, ok
}

// Put sets k to v.
func (s *Map[K, V]) Put(k K, v V) {
	s.rt.checkKey(s.name)
	s.rt.check(s.name, s.s.Put(k, v))
}

// Remove deletes k.
func (s *Map[K, V]) Remove(k K) {
	s.rt.checkKey(s.name)
	s.rt.check(s.name, s.s.Remove(k))
}

// Contains reports whether k is in the map.
func (s *Map[K, V]) Contains(k K) bool {
	s.rt.checkKey(s.name)
	ok, err := s.s.Contains(k)
	s.rt.check(s.name, err)
	return ok
}

// Range calls yield for the current key's entries, in an unspecified
// order, until it returns false. The map must not be modified meanwhile.
func (s *Map[K, V]) Range(yield func(K, V) bool) {
	s.rt.checkKey(s.name)
	s.rt.check(s.name, s.s.Range(yield))
}

// IsEmpty reports whether the current key's map has no entries.
func (s *Map[K, V]) IsEmpty() bool {
	s.rt.checkKey(s.name)
	ok, err := s.s.IsEmpty()
	s.rt.check(s.name, err)
	return ok
}

// Clear removes the current key's map.
func (s *Map[K, V]) Clear() {
	s.rt.checkKey(s.name)
	s.rt.check(s.name, s.s.Clear())
}

// Reducing folds every added element into one value per key.
type Reducing[T any] struct {
	s    state.Reducing[T]
	rt   *Runtime
	name string
}

// NewReducing registers (or finds again) a reducing state stored as a value
// state, folding with reduce.
func NewReducing[T any](rt *Runtime, name string, c codec.Codec[T], ttl TTL, reduce func(a, b T) T) (Reducing[T], error) {
	d := state.ValueDescriptor[T]{Name: name, Codec: c, TTL: ttl.config()}
	s, err := state.NewReducing(rt.backend, d, reduce)
	if err != nil {
		return Reducing[T]{}, err
	}
	DescribeValue(rt, name, c)
	rt.stateRegistered(d.TTL)
	return Reducing[T]{s: s, rt: rt, name: name}, nil
}

// Get returns the current key's folded value.
func (s *Reducing[T]) Get() (T, bool) {
	s.rt.checkKey(s.name)
	v, ok, err := s.s.Get()
	s.rt.check(s.name, err)
	return v, ok
}

// Add folds v in.
func (s *Reducing[T]) Add(v T) {
	s.rt.checkKey(s.name)
	s.rt.check(s.name, s.s.Add(v))
}

// Clear removes the current key's value.
func (s *Reducing[T]) Clear() {
	s.rt.checkKey(s.name)
	s.rt.check(s.name, s.s.Clear())
}

// Aggregating keeps an aggregate's accumulator per key.
type Aggregating[IN, OUT any] struct {
	s    state.Aggregating[IN, OUT]
	rt   *Runtime
	name string
}

// NewAggregating registers (or finds again) an aggregating state whose
// accumulator is stored as a value state.
func NewAggregating[IN, ACC, OUT any](rt *Runtime, name string, c codec.Codec[ACC], ttl TTL, agg state.AggregateFunction[IN, ACC, OUT]) (Aggregating[IN, OUT], error) {
	d := state.ValueDescriptor[ACC]{Name: name, Codec: c, TTL: ttl.config()}
	s, err := state.NewAggregating(rt.backend, d, agg)
	if err != nil {
		return Aggregating[IN, OUT]{}, err
	}
	DescribeValue(rt, name, c)
	rt.stateRegistered(d.TTL)
	return Aggregating[IN, OUT]{s: s, rt: rt, name: name}, nil
}

// Get returns the aggregate's result for the current key.
func (s *Aggregating[IN, OUT]) Get() (OUT, bool) {
	s.rt.checkKey(s.name)
	v, ok, err := s.s.Get()
	s.rt.check(s.name, err)
	return v, ok
}

// Add adds v to the current key's accumulator.
func (s *Aggregating[IN, OUT]) Add(v IN) {
	s.rt.checkKey(s.name)
	s.rt.check(s.name, s.s.Add(v))
}

// Clear removes the current key's accumulator.
func (s *Aggregating[IN, OUT]) Clear() {
	s.rt.checkKey(s.name)
	s.rt.check(s.name, s.s.Clear())
}
