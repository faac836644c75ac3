package state

import (
	"encoding/binary"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"unsafe"
)

// HeapBackend keeps typed state in Go maps (Flink's "hashmap" backend).
//
// # Layout
//
// Every registered state has two Go maps ("tables") per key group of the
// backend's range: one for entries in the default (empty) namespace, keyed
// by the key's bytes, and one for entries in other namespaces, keyed by
//
//	uvarint(len(key)) | key | namespace
//
// which is unambiguous: the length prefix says where the key ends, and the
// namespace is the rest. Table i < n (n the number of key groups) belongs
// to key group start+i and the default namespace, table n+i to the same key
// group and the other namespaces. Keeping the default namespace apart lets
// plain keyed state look entries up with the caller's key bytes as they
// are: building the lookup key in a scratch buffer just before hashing it
// costs a store-forwarding stall that, in the value-get benchmark, halves
// throughput (lookups can no longer overlap their cache misses).
//
// Values are stored typed, never serialized on access:
//
//   - a value state stores one valueEntry: the value, and with TTL its
//     timestamp (a state without TTL stores none: the size of a map slot
//     decides how much state fits in the CPU caches),
//   - a list state one listEntry: the elements and, with TTL, a parallel
//     slice of per-element timestamps,
//   - a map state one mapEntry holding an inner Go map from the user key to
//     the value and its timestamp.
//
// Lookups convert the key (or the handle's scratch buffer) with
// m[string(buf)], which does not allocate. Each entry also refers to its
// own map key (see keyOf), so that rewriting or deleting an existing entry
// reuses the map's key string instead of converting again: only inserting a
// new (key, namespace) allocates.
//
// # Snapshots: copy-on-write per state and key group
//
// snapshot freezes the backend in O(states × key groups): it records the
// current maps of every state and key group in a heapSnapshot and starts a
// new epoch. Every map (and every inner map of a map state) remembers the
// epoch in which it was created or last copied. The first write in a later
// epoch to a map that a live (unreleased) snapshot may still see copies the
// map first, so later writes never change what the snapshot sees; once all
// snapshots that could see a map are released, it is written in place
// again. Inner maps of map states are copied the same way, on their first
// write. The element slices of list states are shared between the live map
// and snapshots: an append writes only past the end that a snapshot sees,
// and every other change to a list (Update, removal of expired elements,
// refreshing timestamps of a slice a snapshot may see) builds new slices.
// A snapshot can therefore be read on another goroutine while the task
// keeps writing; see heapSnapshot.
//
// # Values are stored by reference
//
// Values are kept as they are passed in, not copied: a value of a type that
// holds references (a slice, map or pointer) is shared with the caller and
// with snapshots. Callers must not modify a value after passing it to a
// state nor a value a state returned (an AggregateFunction whose
// accumulator is a pointer must return a new accumulator rather than modify
// the one it is given), or the change shows in state and in checkpoints.
// The Pebble backend, which stores encodings, does not share values.
//
// # Registration
//
// Registering a name again with the same kind and types returns a new handle
// on the same stored state; handles have their own namespace. Registering
// it with another kind, other types or another TTL configuration fails with
// an error wrapping ErrIncompatibleState. The codec of the first
// registration is kept. A state restored by Restore waits, encoded, in
// pending until its first registration decodes it with the descriptor's
// codecs (see snapshot_heap.go).
//
// A HeapBackend is not safe for concurrent use, except for the snapshots it
// hands out. Its state methods never return an error.
type HeapBackend struct {
	opts       Options
	start, end int

	key    []byte
	kg     int
	kgi    int    // kg - start
	keyVer uint64 // bumped by every SetCurrentKey; handles rebuild their lookup key when it changes
	nkg    int    // number of key groups

	states []heapState
	byName map[string]heapState
	// pending holds the states restored (Restore) and not registered yet,
	// by name; registration adopts and removes them.
	pending map[string]*heapPending

	// epoch counts snapshots: snapshot n freezes epoch n and starts epoch
	// n+1. A map created or copied in epoch e may be seen by every snapshot
	// of version >= e (see shared).
	epoch uint64
	// snapMu guards live, the versions of unreleased snapshots, which
	// release may change from any goroutine. maxLive is the largest of them
	// (0 if none): the only value the task reads on writes.
	snapMu  sync.Mutex
	live    []uint64
	maxLive atomic.Uint64

	cleanup   cleanupCursor
	bgCleanup int // number of states with TTL and background cleanup
}

var _ Backend = (*HeapBackend)(nil)

// NewHeapBackend returns an empty heap backend for the key groups
// opts.KeyGroupStart to opts.KeyGroupEnd. It panics if that range is empty,
// negative, or (when opts.MaxParallelism is set) not below
// opts.MaxParallelism. opts.Dir is not used.
func NewHeapBackend(opts Options) *HeapBackend {
	s, e := opts.KeyGroupStart, opts.KeyGroupEnd
	if s < 0 || e < s || (opts.MaxParallelism > 0 && e >= opts.MaxParallelism) {
		panic(fmt.Sprintf("state: invalid key-group range [%d, %d] for max parallelism %d", s, e, opts.MaxParallelism))
	}
	b := &HeapBackend{
		opts:   opts,
		start:  s,
		end:    e,
		kg:     s,
		keyVer: 1,
		byName: make(map[string]heapState),
		epoch:  1,
		nkg:    e - s + 1,
	}
	b.cleanup.table = -1
	return b
}

// SetCurrentKey selects the key that state accesses apply to. It panics if
// keyGroup is outside the backend's range, a bug in the caller.
func (b *HeapBackend) SetCurrentKey(key []byte, keyGroup int) {
	if keyGroup < b.start || keyGroup > b.end {
		b.keyGroupOutOfRange(keyGroup)
	}
	b.key = key
	b.kg = keyGroup
	b.kgi = keyGroup - b.start
	b.keyVer++
}

func (b *HeapBackend) keyGroupOutOfRange(kg int) {
	panic(fmt.Sprintf("state: SetCurrentKey with key group %d outside the backend's range [%d, %d]", kg, b.start, b.end))
}

// CurrentKey returns the key set by SetCurrentKey.
func (b *HeapBackend) CurrentKey() []byte { return b.key }

// CurrentKeyGroup returns the key group set by SetCurrentKey.
func (b *HeapBackend) CurrentKeyGroup() int { return b.kg }

// KeyGroupRange returns the inclusive range of key groups stored here.
func (b *HeapBackend) KeyGroupRange() (start, end int) { return b.start, b.end }

// Close drops the backend's state. Snapshots already taken stay readable.
func (b *HeapBackend) Close() error {
	b.states = nil
	b.byName = nil
	b.pending = nil
	b.cleanup = cleanupCursor{table: -1}
	b.bgCleanup = 0
	return nil
}

func (b *HeapBackend) now() int64 { return b.opts.now() }

// numTables is the number of tables of each state: two per key group.
func (b *HeapBackend) numTables() int { return 2 * b.nkg }

// shared reports whether a map or slice created or copied in epoch ver may
// be seen by a live snapshot, so that it must not be modified in place.
func (b *HeapBackend) shared(ver uint64) bool { return ver <= b.maxLive.Load() }

// heapState is a registered state's storage, whatever its kind.
type heapState interface {
	// describe names the kind and types, for errors.
	describe() string
	ttlConfig() TTLConfig
	// freeze returns a view of the state's current maps for a snapshot.
	freeze() frozenState
	// appendKeys appends the map keys of table i.
	appendKeys(i int, dst []string) []string
	// cleanupKey removes the expired parts of the entry at map key k of
	// table i, if it still exists, and returns how many values, list
	// elements or map entries it removed.
	cleanupKey(i int, k string, now int64) int
	// stateKind is the state's kind in snapshot streams.
	kind() stateKind
	// adopt decodes restored entries into the state, which is being
	// registered and holds nothing yet.
	adopt(p *heapPending) error
}

// register returns the state registered as name, or registers the one
// create returns; describe is what describe would return for it.
func register[S heapState](b *HeapBackend, name string, ttl TTLConfig, describe string, create func() S) (S, error) {
	var zero S
	if old, ok := b.byName[name]; ok {
		s, ok := old.(S)
		switch {
		case old.describe() != describe || !ok && old.ttlConfig() == ttl:
			return zero, fmt.Errorf("%w: state %q is a %s, not a %s", ErrIncompatibleState, name, old.describe(), describe)
		case old.ttlConfig() != ttl || !ok:
			return zero, fmt.Errorf("%w: state %q was registered with TTL %+v, now with %+v", ErrIncompatibleState, name, old.ttlConfig(), ttl)
		}
		return s, nil
	}
	if b.byName == nil {
		return zero, fmt.Errorf("state %q: backend is closed", name)
	}
	s := create()
	if err := b.adoptPending(name, s, ttl); err != nil {
		return zero, err
	}
	b.byName[name] = s
	b.states = append(b.states, s)
	if backgroundCleanup(s) {
		b.bgCleanup++
	}
	return s, nil
}

// table is a map of one state and key group, with the epoch in which the
// map was created or last copied.
type table[E any] struct {
	m   map[string]E
	ver uint64
}

// writable returns the map to write to: t's map, first created, or copied
// if a live snapshot may see it.
func (t *table[E]) writable(b *HeapBackend) map[string]E {
	if t.ver == b.epoch {
		return t.m
	}
	return t.own(b)
}

func (t *table[E]) own(b *HeapBackend) map[string]E {
	switch {
	case t.m == nil:
		t.m = make(map[string]E)
	case b.shared(t.ver):
		t.m = maps.Clone(t.m)
	}
	t.ver = b.epoch
	return t.m
}

func appendTableKeys[E any](t *table[E], dst []string) []string {
	for k := range t.m {
		dst = append(dst, k)
	}
	return dst
}

// nsKey is a handle's namespace and its lookup key for the backend's
// current key.
type nsKey struct {
	b   *HeapBackend
	ns  []byte
	buf []byte // uvarint(len(key)) | key | ns, if ns is not empty
	ver uint64 // b.keyVer that buf was built for; 0 after SetNamespace
}

// SetNamespace selects the namespace; nil and empty are the same.
func (k *nsKey) SetNamespace(ns []byte) {
	k.ns = append(k.ns[:0], ns...)
	k.ver = 0
}

// loc returns the index of the table holding the current key and
// namespace, and their map key: the backend's current key itself for the
// default namespace, else a buffer reused by the next call.
func (k *nsKey) loc() (int, []byte) {
	b := k.b
	if len(k.ns) == 0 {
		return b.kgi, b.key
	}
	if k.ver != b.keyVer {
		key := b.key
		buf := binary.AppendUvarint(k.buf[:0], uint64(len(key)))
		buf = append(buf, key...)
		k.buf = append(buf, k.ns...)
		k.ver = b.keyVer
	}
	return b.nkg + b.kgi, k.buf
}

// Entries refer to their own map key by the pointer to its bytes, half the
// size of a string, to rewrite or delete themselves without converting the
// lookup key to a string again (which would allocate). The key's length is
// that of the lookup key that found the entry, since the two are equal.
// Map keys are never empty (they start with the key's length), and their
// bytes are immutable, which unsafe.String requires.

// refOf returns the reference to map key mk.
func refOf(mk string) *byte { return unsafe.StringData(mk) }

// keyOf returns the map key of n bytes that p refers to: the map's own key
// string, not a copy.
func keyOf(p *byte, n int) string { return unsafe.String(p, n) }

// splitMapKey splits a map key into the entry's key and namespace.
func splitMapKey(mk string) (key, ns string) {
	n, w := uvarintString(mk)
	return mk[w : w+int(n)], mk[w+int(n):]
}

func uvarintString(s string) (uint64, int) {
	var x uint64
	var shift uint
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x80 {
			return x | uint64(c)<<shift, i + 1
		}
		x |= uint64(c&0x7f) << shift
		shift += 7
	}
	panic("state: corrupt heap map key")
}
