package weir

import (
	"iter"

	"github.com/weirstream/weir/internal/state"
)

// Keyed state.
//
// A keyed function obtains state handles in Open (or lazily) with the Get*
// functions, passing its *KeyedContext and a descriptor; the handles then
// read and write the entry of the current key. State exists only on keyed
// streams: the Get* functions take a StateContext, which only keyed contexts
// are, so using keyed state elsewhere does not compile.
//
// Handles do not return errors: a failure of the state backend itself (a
// disk error in the Pebble backend) fails the subtask with an error naming
// the state, like a panic in user code would.

// ValueStateDescriptor declares a value state: its name (unique within the
// operator), codec (default codec.For[T]) and optional TTL.
type ValueStateDescriptor[T any] = state.ValueDescriptor[T]

// ListStateDescriptor declares a list state.
type ListStateDescriptor[T any] = state.ListDescriptor[T]

// MapStateDescriptor declares a map state.
type MapStateDescriptor[K comparable, V any] = state.MapDescriptor[K, V]

// StateTTLConfig is a state's time to live, as Flink's StateTtlConfig.
type StateTTLConfig = state.TTLConfig

// TTL update types and visibilities.
const (
	TTLOnCreateAndWrite            = state.OnCreateAndWrite
	TTLOnReadAndWrite              = state.OnReadAndWrite
	TTLNeverReturnExpired          = state.NeverReturnExpired
	TTLReturnExpiredIfNotCleanedUp = state.ReturnExpiredIfNotCleanedUp
)

// AggregateFunction is an incremental aggregation (see GetAggregatingState
// and window aggregation).
type AggregateFunction[IN, ACC, OUT any] = state.AggregateFunction[IN, ACC, OUT]

// StateContext is the context of a keyed operator; only keyed contexts
// implement it.
type StateContext interface {
	keyed() *keyedRuntime
}

// Names of the state backends (state.backend.type).
const (
	BackendHashMap = "hashmap"
	BackendPebble  = "pebble"
)

// ValueState is one value per key.
type ValueState[T any] struct {
	s    state.Value[T]
	rt   *keyedRuntime
	name string
}

// GetValueState returns the value state d describes.
func GetValueState[T any](ctx StateContext, d ValueStateDescriptor[T]) (*ValueState[T], error) {
	rt := ctx.keyed()
	s, err := state.NewValue(rt.backend, d)
	if err != nil {
		return nil, err
	}
	rt.stateRegistered(d.TTL)
	return &ValueState[T]{s: s, rt: rt, name: d.Name}, nil
}

// Value returns the current key's value, and false if it has none.
func (s *ValueState[T]) Value() (T, bool) {
	s.rt.checkKey(s.name)
	v, ok, err := s.s.Get()
	s.rt.check(s.name, err)
	return v, ok
}

// Update sets the current key's value.
func (s *ValueState[T]) Update(v T) {
	s.rt.checkKey(s.name)
	s.rt.check(s.name, s.s.Update(v))
}

// Clear removes the current key's value.
func (s *ValueState[T]) Clear() {
	s.rt.checkKey(s.name)
	s.rt.check(s.name, s.s.Clear())
}

// ListState is a list per key.
type ListState[T any] struct {
	s    state.List[T]
	rt   *keyedRuntime
	name string
}

// GetListState returns the list state d describes.
func GetListState[T any](ctx StateContext, d ListStateDescriptor[T]) (*ListState[T], error) {
	rt := ctx.keyed()
	s, err := state.NewList(rt.backend, d)
	if err != nil {
		return nil, err
	}
	rt.stateRegistered(d.TTL)
	return &ListState[T]{s: s, rt: rt, name: d.Name}, nil
}

// Get returns the current key's elements in insertion order; the slice must
// not be modified and is valid until the next write.
func (s *ListState[T]) Get() []T {
	s.rt.checkKey(s.name)
	v, err := s.s.Get()
	s.rt.check(s.name, err)
	return v
}

// Add appends v.
func (s *ListState[T]) Add(v T) {
	s.rt.checkKey(s.name)
	s.rt.check(s.name, s.s.Add(v))
}

// AddAll appends vs.
func (s *ListState[T]) AddAll(vs []T) {
	s.rt.checkKey(s.name)
	s.rt.check(s.name, s.s.AddAll(vs))
}

// Update replaces the list with vs.
func (s *ListState[T]) Update(vs []T) {
	s.rt.checkKey(s.name)
	s.rt.check(s.name, s.s.Update(vs))
}

// Clear removes the current key's list.
func (s *ListState[T]) Clear() {
	s.rt.checkKey(s.name)
	s.rt.check(s.name, s.s.Clear())
}

// MapState is a map per key.
type MapState[K comparable, V any] struct {
	s    state.Map[K, V]
	rt   *keyedRuntime
	name string
}

// GetMapState returns the map state d describes.
func GetMapState[K comparable, V any](ctx StateContext, d MapStateDescriptor[K, V]) (*MapState[K, V], error) {
	rt := ctx.keyed()
	s, err := state.NewMap(rt.backend, d)
	if err != nil {
		return nil, err
	}
	rt.stateRegistered(d.TTL)
	return &MapState[K, V]{s: s, rt: rt, name: d.Name}, nil
}

// Get returns the value of k in the current key's map.
func (s *MapState[K, V]) Get(k K) (V, bool) {
	s.rt.checkKey(s.name)
	v, ok, err := s.s.Get(k)
	s.rt.check(s.name, err)
	return v, ok
}

// Put sets k to v.
func (s *MapState[K, V]) Put(k K, v V) {
	s.rt.checkKey(s.name)
	s.rt.check(s.name, s.s.Put(k, v))
}

// Remove deletes k.
func (s *MapState[K, V]) Remove(k K) {
	s.rt.checkKey(s.name)
	s.rt.check(s.name, s.s.Remove(k))
}

// Contains reports whether k is in the map.
func (s *MapState[K, V]) Contains(k K) bool {
	s.rt.checkKey(s.name)
	ok, err := s.s.Contains(k)
	s.rt.check(s.name, err)
	return ok
}

// All iterates over the current key's map in an unspecified order. The map
// must not be modified during the iteration.
func (s *MapState[K, V]) All() iter.Seq2[K, V] {
	return func(yield func(K, V) bool) {
		s.rt.checkKey(s.name)
		s.rt.check(s.name, s.s.Range(yield))
	}
}

// IsEmpty reports whether the current key's map has no entries.
func (s *MapState[K, V]) IsEmpty() bool {
	s.rt.checkKey(s.name)
	ok, err := s.s.IsEmpty()
	s.rt.check(s.name, err)
	return ok
}

// Clear removes the current key's map.
func (s *MapState[K, V]) Clear() {
	s.rt.checkKey(s.name)
	s.rt.check(s.name, s.s.Clear())
}

// ReducingState folds every added element into one value per key.
type ReducingState[T any] struct {
	s    state.Reducing[T]
	rt   *keyedRuntime
	name string
}

// GetReducingState returns a reducing state stored as the value state d
// describes, folding with reduce.
func GetReducingState[T any](ctx StateContext, d ValueStateDescriptor[T], reduce func(a, b T) T) (*ReducingState[T], error) {
	rt := ctx.keyed()
	s, err := state.NewReducing(rt.backend, d, reduce)
	if err != nil {
		return nil, err
	}
	rt.stateRegistered(d.TTL)
	return &ReducingState[T]{s: s, rt: rt, name: d.Name}, nil
}

// Get returns the current key's folded value.
func (s *ReducingState[T]) Get() (T, bool) {
	s.rt.checkKey(s.name)
	v, ok, err := s.s.Get()
	s.rt.check(s.name, err)
	return v, ok
}

// Add folds v in.
func (s *ReducingState[T]) Add(v T) {
	s.rt.checkKey(s.name)
	s.rt.check(s.name, s.s.Add(v))
}

// Clear removes the current key's value.
func (s *ReducingState[T]) Clear() {
	s.rt.checkKey(s.name)
	s.rt.check(s.name, s.s.Clear())
}

// AggregatingState keeps an aggregate's accumulator per key.
type AggregatingState[IN, OUT any] struct {
	s    state.Aggregating[IN, OUT]
	rt   *keyedRuntime
	name string
}

// GetAggregatingState returns an aggregating state whose accumulator is
// stored as the value state d describes.
func GetAggregatingState[IN, ACC, OUT any](ctx StateContext, d ValueStateDescriptor[ACC], agg AggregateFunction[IN, ACC, OUT]) (*AggregatingState[IN, OUT], error) {
	rt := ctx.keyed()
	s, err := state.NewAggregating(rt.backend, d, agg)
	if err != nil {
		return nil, err
	}
	rt.stateRegistered(d.TTL)
	return &AggregatingState[IN, OUT]{s: s, rt: rt, name: d.Name}, nil
}

// Get returns the aggregate's result for the current key.
func (s *AggregatingState[IN, OUT]) Get() (OUT, bool) {
	s.rt.checkKey(s.name)
	v, ok, err := s.s.Get()
	s.rt.check(s.name, err)
	return v, ok
}

// Add adds v to the current key's accumulator.
func (s *AggregatingState[IN, OUT]) Add(v IN) {
	s.rt.checkKey(s.name)
	s.rt.check(s.name, s.s.Add(v))
}

// Clear removes the current key's accumulator.
func (s *AggregatingState[IN, OUT]) Clear() {
	s.rt.checkKey(s.name)
	s.rt.check(s.name, s.s.Clear())
}
