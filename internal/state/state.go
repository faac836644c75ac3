// Package state holds keyed state for the operators of a keyed stream: the
// typed state kinds (Value, List, Map, Reducing, Aggregating), their
// descriptors with optional time-to-live, and the backends that store them.
//
// A Backend belongs to one operator subtask and is used only from that
// subtask's goroutine. It stores state for the key groups the subtask owns
// (an inclusive range). Before every access the operator sets the current
// key (its encoded bytes) and key group; every state then reads and writes
// the entry of that key, in that state's current namespace (a window, or the
// empty namespace for plain keyed state).
//
// Two backends implement the interface:
//
//   - HeapBackend keeps typed values in Go maps, one map per state and key
//     group. Snapshots freeze a key group's maps and copy a map on its
//     first write after a snapshot, so the synchronous part of a snapshot
//     only copies map references.
//   - PebbleBackend keeps encoded values in one Pebble database per subtask
//     under a local directory, with keys laid out
//     key group (2 bytes, big endian) | state id (2 bytes, big endian) |
//     uvarint(len(key)) | key | uvarint(len(namespace)) | namespace
//     [| map user key], so that a key-group range is one contiguous key
//     range.
//
// TakeSnapshot and Restore (snapshot.go) write and read a backend's keyed
// state as a backend-independent stream ordered by key group, which a
// backend of either kind, owning any sub-range of the key groups, can
// restore; restored states are adopted when the operators register them.
//
// State methods return an error only for failures of the storage itself (an
// I/O error, corrupt bytes); the heap backend never fails.
//
// Values are immutable once stored: a value passed to Update (or an
// element to Add, Put) and a value returned by Get must not be modified
// afterwards, because the heap backend keeps them by reference and shares
// them with snapshots. An AggregateFunction over a reference type must
// return a new accumulator from Add and Merge rather than change the one it
// got.
//
// Registering a name again returns a new handle on the same stored state,
// with its own namespace; the kind, the types and the TTL configuration must
// match, or the registration fails with ErrIncompatibleState.
//
// Time to live follows Flink's StateTtlConfig: an entry's timestamp is set
// when it is created or written (and also when read, with OnReadAndWrite;
// Range, Contains and IsEmpty count as reads); an expired entry is never
// returned (with ReturnExpiredIfNotCleanedUp it is returned once, by the
// read that then removes it), is removed when accessed, and is removed in
// the background by Backend.CleanupExpired, which examines a bounded number
// of (key, namespace) entries per call; a list's or map's expired elements
// all go when its entry is examined. TTL uses processing time from the
// backend's clock, in whole milliseconds.
package state

import (
	"errors"
	"fmt"
	"time"

	"github.com/weirstream/weir/codec"
)

// ErrIncompatibleState is returned when a state name is registered again with
// a different kind or type.
var ErrIncompatibleState = errors.New("state: incompatible registration")

// Backend stores the keyed state of one operator subtask. It is not safe for
// concurrent use.
type Backend interface {
	// SetCurrentKey selects the key that state accesses apply to. key is the
	// key codec's encoding; the backend may keep the slice until the next
	// call, so the caller must not modify it meanwhile. keyGroup must be in
	// the backend's range.
	SetCurrentKey(key []byte, keyGroup int)
	// CurrentKey returns the key set by SetCurrentKey.
	CurrentKey() []byte
	// CurrentKeyGroup returns the key group set by SetCurrentKey.
	CurrentKeyGroup() int
	// KeyGroupRange returns the inclusive range of key groups stored here.
	KeyGroupRange() (start, end int)
	// CleanupExpired removes expired entries of states with TTL, examining
	// at most budget entries from where the previous call stopped (wrapping
	// around), and returns how many it removed.
	CleanupExpired(budget int) (removed int, err error)
	// Close releases the backend's resources; a Pebble backend deletes its
	// working directory.
	Close() error
}

// Options configures a backend.
type Options struct {
	// KeyGroupStart and KeyGroupEnd are the inclusive range of key groups
	// the subtask owns.
	KeyGroupStart, KeyGroupEnd int
	// MaxParallelism is the job's number of key groups.
	MaxParallelism int
	// Clock gives the processing time used by TTL; default time.Now.
	Clock func() time.Time
	// Dir is the Pebble backend's working directory for this subtask. It is
	// created if missing and deleted by Close.
	Dir string
}

func (o *Options) now() int64 {
	if o.Clock == nil {
		return time.Now().UnixMilli()
	}
	return o.Clock().UnixMilli()
}

// TTLUpdateType says which accesses refresh an entry's timestamp.
type TTLUpdateType uint8

const (
	// OnCreateAndWrite refreshes the timestamp when the entry is written.
	OnCreateAndWrite TTLUpdateType = iota
	// OnReadAndWrite also refreshes it when the entry is read.
	OnReadAndWrite
)

// TTLVisibility says whether expired entries not yet removed may be read.
type TTLVisibility uint8

const (
	// NeverReturnExpired hides expired entries.
	NeverReturnExpired TTLVisibility = iota
	// ReturnExpiredIfNotCleanedUp returns an expired entry until it is
	// removed.
	ReturnExpiredIfNotCleanedUp
)

// TTLConfig is a state's time to live. The zero value disables TTL.
type TTLConfig struct {
	// TTL is how long an entry lives after its timestamp was last refreshed;
	// 0 disables TTL.
	TTL time.Duration
	// UpdateType says which accesses refresh the timestamp. Default
	// OnCreateAndWrite.
	UpdateType TTLUpdateType
	// Visibility says whether expired entries may be returned. Default
	// NeverReturnExpired.
	Visibility TTLVisibility
	// DisableBackgroundCleanup keeps Backend.CleanupExpired from removing
	// this state's entries; they are then removed only when accessed.
	DisableBackgroundCleanup bool
}

// Enabled reports whether TTL is on.
func (c TTLConfig) Enabled() bool { return c.TTL > 0 }

// Expired reports whether an entry stamped at ts (Unix milliseconds) has
// expired at now.
func (c TTLConfig) Expired(ts, now int64) bool {
	return c.Enabled() && now-ts >= c.TTL.Milliseconds()
}

// ValueDescriptor declares a value state: one value per key and namespace.
type ValueDescriptor[T any] struct {
	// Name identifies the state within its operator.
	Name string
	// Codec serializes values (Pebble, snapshots); nil means codec.For[T].
	Codec codec.Codec[T]
	TTL   TTLConfig
}

// ListDescriptor declares a list state: a list of elements per key and
// namespace. With TTL every element expires on its own.
type ListDescriptor[T any] struct {
	Name  string
	Codec codec.Codec[T]
	TTL   TTLConfig
}

// MapDescriptor declares a map state: a map per key and namespace. With TTL
// every entry expires on its own.
type MapDescriptor[K comparable, V any] struct {
	Name       string
	KeyCodec   codec.Codec[K]
	ValueCodec codec.Codec[V]
	TTL        TTLConfig
}

// Namespaced is implemented by every state: the namespace selects which of a
// key's entries the state reads and writes (a window's encoding, or empty).
type Namespaced interface {
	// SetNamespace selects the namespace; nil and empty are the same, the
	// default. The state may keep the slice until the next call.
	SetNamespace(ns []byte)
}

// Value is a single value per key and namespace.
type Value[T any] interface {
	Namespaced
	// Get returns the value, and false if there is none (or it expired).
	Get() (v T, ok bool, err error)
	// Update sets the value.
	Update(v T) error
	// Clear removes the value.
	Clear() error
}

// List is a list of elements per key and namespace.
type List[T any] interface {
	Namespaced
	// Get returns the elements in insertion order, nil if none. The caller
	// must not modify the slice; it is valid until the next write.
	Get() ([]T, error)
	// Add appends one element.
	Add(v T) error
	// AddAll appends elements.
	AddAll(vs []T) error
	// Update replaces the list; an empty vs clears it.
	Update(vs []T) error
	// Clear removes the list.
	Clear() error
}

// Map is a map per key and namespace.
type Map[K comparable, V any] interface {
	Namespaced
	Get(k K) (v V, ok bool, err error)
	Put(k K, v V) error
	Remove(k K) error
	Contains(k K) (bool, error)
	// Range calls fn for every entry, in an unspecified order, until fn
	// returns false. fn must not modify the map.
	Range(fn func(k K, v V) bool) error
	IsEmpty() (bool, error)
	Clear() error
}

// Reducing keeps one value per key and namespace that every Add folds the
// new element into with a reduce function.
type Reducing[T any] interface {
	Namespaced
	Get() (v T, ok bool, err error)
	Add(v T) error
	Clear() error
}

// Aggregating keeps an accumulator per key and namespace that every Add
// folds the new element into; Get returns the aggregate's result.
type Aggregating[IN, OUT any] interface {
	Namespaced
	Get() (v OUT, ok bool, err error)
	Add(v IN) error
	Clear() error
}

// AggregateFunction is an incremental aggregation: elements are added to an
// accumulator, accumulators can be merged, and a result is taken from one.
// It must not keep references to accumulators it returned.
type AggregateFunction[IN, ACC, OUT any] interface {
	CreateAccumulator() ACC
	Add(v IN, acc ACC) ACC
	GetResult(acc ACC) OUT
	Merge(a, b ACC) ACC
}

// NewValue registers (or finds again, by name) a value state in b.
func NewValue[T any](b Backend, d ValueDescriptor[T]) (Value[T], error) {
	if err := checkTTL(d.Name, d.TTL); err != nil {
		return nil, err
	}
	if err := resolveCodec(&d.Codec, d.Name, "value"); err != nil {
		return nil, err
	}
	switch b := b.(type) {
	case *HeapBackend:
		return newHeapValue(b, d)
	case *PebbleBackend:
		return newPebbleValue(b, d)
	case *ChangelogBackend:
		return newChangelogValue(b, d)
	}
	return nil, fmt.Errorf("state: unknown backend %T", b)
}

// NewList registers (or finds again, by name) a list state in b.
func NewList[T any](b Backend, d ListDescriptor[T]) (List[T], error) {
	if err := checkTTL(d.Name, d.TTL); err != nil {
		return nil, err
	}
	if err := resolveCodec(&d.Codec, d.Name, "list element"); err != nil {
		return nil, err
	}
	switch b := b.(type) {
	case *HeapBackend:
		return newHeapList(b, d)
	case *PebbleBackend:
		return newPebbleList(b, d)
	case *ChangelogBackend:
		return newChangelogList(b, d)
	}
	return nil, fmt.Errorf("state: unknown backend %T", b)
}

// NewMap registers (or finds again, by name) a map state in b.
func NewMap[K comparable, V any](b Backend, d MapDescriptor[K, V]) (Map[K, V], error) {
	if err := checkTTL(d.Name, d.TTL); err != nil {
		return nil, err
	}
	if err := resolveCodec(&d.KeyCodec, d.Name, "map key"); err != nil {
		return nil, err
	}
	if err := resolveCodec(&d.ValueCodec, d.Name, "map value"); err != nil {
		return nil, err
	}
	switch b := b.(type) {
	case *HeapBackend:
		return newHeapMap(b, d)
	case *PebbleBackend:
		return newPebbleMap(b, d)
	case *ChangelogBackend:
		return newChangelogMap(b, d)
	}
	return nil, fmt.Errorf("state: unknown backend %T", b)
}

// NewReducing registers a reducing state: a value state holding the fold of
// every added element with reduce.
func NewReducing[T any](b Backend, d ValueDescriptor[T], reduce func(a, b T) T) (Reducing[T], error) {
	v, err := NewValue(b, d)
	if err != nil {
		return nil, err
	}
	return &reducing[T]{Value: v, reduce: reduce}, nil
}

type reducing[T any] struct {
	Value[T]
	reduce func(a, b T) T
}

func (r *reducing[T]) Add(v T) error {
	cur, ok, err := r.Value.Get()
	if err != nil {
		return err
	}
	if ok {
		v = r.reduce(cur, v)
	}
	return r.Value.Update(v)
}

// NewAggregating registers an aggregating state: a value state holding the
// accumulator of agg, described by d.
func NewAggregating[IN, ACC, OUT any](b Backend, d ValueDescriptor[ACC], agg AggregateFunction[IN, ACC, OUT]) (Aggregating[IN, OUT], error) {
	v, err := NewValue(b, d)
	if err != nil {
		return nil, err
	}
	return &aggregating[IN, ACC, OUT]{acc: v, agg: agg}, nil
}

type aggregating[IN, ACC, OUT any] struct {
	acc Value[ACC]
	agg AggregateFunction[IN, ACC, OUT]
}

func (a *aggregating[IN, ACC, OUT]) SetNamespace(ns []byte) { a.acc.SetNamespace(ns) }
func (a *aggregating[IN, ACC, OUT]) Clear() error           { return a.acc.Clear() }

func (a *aggregating[IN, ACC, OUT]) Get() (OUT, bool, error) {
	acc, ok, err := a.acc.Get()
	if !ok || err != nil {
		var zero OUT
		return zero, false, err
	}
	return a.agg.GetResult(acc), true, nil
}

func (a *aggregating[IN, ACC, OUT]) Add(v IN) error {
	acc, ok, err := a.acc.Get()
	if err != nil {
		return err
	}
	if !ok {
		acc = a.agg.CreateAccumulator()
	}
	return a.acc.Update(a.agg.Add(v, acc))
}

func checkTTL(name string, ttl TTLConfig) error {
	if ttl.TTL < 0 || (ttl.TTL > 0 && ttl.TTL < time.Millisecond) {
		return fmt.Errorf("state %q: TTL %v must be 0 (off) or at least 1ms", name, ttl.TTL)
	}
	return nil
}

func resolveCodec[T any](c *codec.Codec[T], name, what string) error {
	if name == "" {
		return errors.New("state: a state descriptor needs a name")
	}
	if *c != nil {
		return nil
	}
	d, ok := codec.For[T]()
	if !ok {
		return fmt.Errorf("state %q: %s type %s has no built-in codec: set one in the descriptor", name, what, typeName[T]())
	}
	*c = d
	return nil
}
