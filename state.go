package weir

import (
	"iter"
	"time"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/keyed"
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
type ValueStateDescriptor[T any] struct {
	// Name identifies the state within its operator.
	Name string
	// Codec serializes values (Pebble, snapshots); nil means codec.For[T].
	Codec codec.Codec[T]
	TTL   StateTTLConfig
}

// ListStateDescriptor declares a list state: a list of elements per key.
// With TTL every element expires on its own.
type ListStateDescriptor[T any] struct {
	Name  string
	Codec codec.Codec[T]
	TTL   StateTTLConfig
}

// MapStateDescriptor declares a map state: a map per key. With TTL every
// entry expires on its own.
type MapStateDescriptor[K comparable, V any] struct {
	Name       string
	KeyCodec   codec.Codec[K]
	ValueCodec codec.Codec[V]
	TTL        StateTTLConfig
}

// StateTTLConfig is a state's time to live, as Flink's StateTtlConfig. The
// zero value disables TTL.
type StateTTLConfig struct {
	// TTL is how long an entry lives after its timestamp was last refreshed;
	// 0 disables TTL.
	TTL time.Duration
	// UpdateType says which accesses refresh the timestamp. Default
	// TTLOnCreateAndWrite.
	UpdateType TTLUpdateType
	// Visibility says whether expired entries may be returned. Default
	// TTLNeverReturnExpired.
	Visibility TTLVisibility
	// DisableBackgroundCleanup keeps expired entries of this state from
	// being removed in the background; they are then removed only when
	// accessed.
	DisableBackgroundCleanup bool
}

// Enabled reports whether TTL is on.
func (c StateTTLConfig) Enabled() bool { return c.TTL > 0 }

func (c StateTTLConfig) keyed() keyed.TTL {
	return keyed.TTL{TTL: c.TTL, UpdateType: uint8(c.UpdateType), Visibility: uint8(c.Visibility),
		DisableBackgroundCleanup: c.DisableBackgroundCleanup}
}

// TTLUpdateType says which accesses refresh an entry's timestamp.
type TTLUpdateType uint8

// TTL update types.
const (
	// TTLOnCreateAndWrite refreshes the timestamp when the entry is written.
	TTLOnCreateAndWrite TTLUpdateType = iota
	// TTLOnReadAndWrite also refreshes it when the entry is read.
	TTLOnReadAndWrite
)

// TTLVisibility says whether expired entries not yet removed may be read.
type TTLVisibility uint8

// TTL visibilities.
const (
	// TTLNeverReturnExpired hides expired entries.
	TTLNeverReturnExpired TTLVisibility = iota
	// TTLReturnExpiredIfNotCleanedUp returns an expired entry until it is
	// removed.
	TTLReturnExpiredIfNotCleanedUp
)

// AggregateFunction is an incremental aggregation (see GetAggregatingState
// and window aggregation): elements are added to an accumulator,
// accumulators can be merged, and a result is taken from one. It must not
// keep references to accumulators it returned.
type AggregateFunction[IN, ACC, OUT any] interface {
	CreateAccumulator() ACC
	Add(v IN, acc ACC) ACC
	GetResult(acc ACC) OUT
	Merge(a, b ACC) ACC
}

// StateContext is the context of a keyed operator; only keyed contexts
// implement it.
type StateContext interface {
	keyedRuntime() *keyed.Runtime
}

// Names of the state backends (state.backend.type).
const (
	BackendHashMap = keyed.BackendHashMap
	BackendPebble  = keyed.BackendPebble
)

// ValueState is one value per key.
type ValueState[T any] struct{ h keyed.Value[T] }

// GetValueState returns the value state d describes.
func GetValueState[T any](ctx StateContext, d ValueStateDescriptor[T]) (*ValueState[T], error) {
	h, err := keyed.NewValue(ctx.keyedRuntime(), d.Name, d.Codec, d.TTL.keyed())
	if err != nil {
		return nil, err
	}
	return &ValueState[T]{h: h}, nil
}

// Value returns the current key's value, and false if it has none.
func (s *ValueState[T]) Value() (T, bool) { return s.h.Get() }

// Update sets the current key's value.
func (s *ValueState[T]) Update(v T) { s.h.Update(v) }

// Clear removes the current key's value.
func (s *ValueState[T]) Clear() { s.h.Clear() }

// ListState is a list per key.
type ListState[T any] struct{ h keyed.List[T] }

// GetListState returns the list state d describes.
func GetListState[T any](ctx StateContext, d ListStateDescriptor[T]) (*ListState[T], error) {
	h, err := keyed.NewList(ctx.keyedRuntime(), d.Name, d.Codec, d.TTL.keyed())
	if err != nil {
		return nil, err
	}
	return &ListState[T]{h: h}, nil
}

// Get returns the current key's elements in insertion order; the slice must
// not be modified and is valid until the next write.
func (s *ListState[T]) Get() []T { return s.h.Get() }

// Add appends v.
func (s *ListState[T]) Add(v T) { s.h.Add(v) }

// AddAll appends vs.
func (s *ListState[T]) AddAll(vs []T) { s.h.AddAll(vs) }

// Update replaces the list with vs.
func (s *ListState[T]) Update(vs []T) { s.h.Update(vs) }

// Clear removes the current key's list.
func (s *ListState[T]) Clear() { s.h.Clear() }

// MapState is a map per key.
type MapState[K comparable, V any] struct{ h keyed.Map[K, V] }

// GetMapState returns the map state d describes.
func GetMapState[K comparable, V any](ctx StateContext, d MapStateDescriptor[K, V]) (*MapState[K, V], error) {
	h, err := keyed.NewMap(ctx.keyedRuntime(), d.Name, d.KeyCodec, d.ValueCodec, d.TTL.keyed())
	if err != nil {
		return nil, err
	}
	return &MapState[K, V]{h: h}, nil
}

// Get returns the value of k in the current key's map.
func (s *MapState[K, V]) Get(k K) (V, bool) { return s.h.Get(k) }

// Put sets k to v.
func (s *MapState[K, V]) Put(k K, v V) { s.h.Put(k, v) }

// Remove deletes k.
func (s *MapState[K, V]) Remove(k K) { s.h.Remove(k) }

// Contains reports whether k is in the map.
func (s *MapState[K, V]) Contains(k K) bool { return s.h.Contains(k) }

// All iterates over the current key's map in an unspecified order. The map
// must not be modified during the iteration.
func (s *MapState[K, V]) All() iter.Seq2[K, V] { return s.h.Range }

// IsEmpty reports whether the current key's map has no entries.
func (s *MapState[K, V]) IsEmpty() bool { return s.h.IsEmpty() }

// Clear removes the current key's map.
func (s *MapState[K, V]) Clear() { s.h.Clear() }

// ReducingState folds every added element into one value per key.
type ReducingState[T any] struct{ h keyed.Reducing[T] }

// GetReducingState returns a reducing state stored as the value state d
// describes, folding with reduce.
func GetReducingState[T any](ctx StateContext, d ValueStateDescriptor[T], reduce func(a, b T) T) (*ReducingState[T], error) {
	h, err := keyed.NewReducing(ctx.keyedRuntime(), d.Name, d.Codec, d.TTL.keyed(), reduce)
	if err != nil {
		return nil, err
	}
	return &ReducingState[T]{h: h}, nil
}

// Get returns the current key's folded value.
func (s *ReducingState[T]) Get() (T, bool) { return s.h.Get() }

// Add folds v in.
func (s *ReducingState[T]) Add(v T) { s.h.Add(v) }

// Clear removes the current key's value.
func (s *ReducingState[T]) Clear() { s.h.Clear() }

// AggregatingState keeps an aggregate's accumulator per key.
type AggregatingState[IN, OUT any] struct{ h keyed.Aggregating[IN, OUT] }

// GetAggregatingState returns an aggregating state whose accumulator is
// stored as the value state d describes.
func GetAggregatingState[IN, ACC, OUT any](ctx StateContext, d ValueStateDescriptor[ACC], agg AggregateFunction[IN, ACC, OUT]) (*AggregatingState[IN, OUT], error) {
	h, err := keyed.NewAggregating[IN, ACC, OUT](ctx.keyedRuntime(), d.Name, d.Codec, d.TTL.keyed(), agg)
	if err != nil {
		return nil, err
	}
	return &AggregatingState[IN, OUT]{h: h}, nil
}

// Get returns the aggregate's result for the current key.
func (s *AggregatingState[IN, OUT]) Get() (OUT, bool) { return s.h.Get() }

// Add adds v to the current key's accumulator.
func (s *AggregatingState[IN, OUT]) Add(v IN) { s.h.Add(v) }

// Clear removes the current key's accumulator.
func (s *AggregatingState[IN, OUT]) Clear() { s.h.Clear() }
