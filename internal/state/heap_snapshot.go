package state

import (
	"slices"
	"sync"

	"github.com/weirstream/weir/codec"
)

// heapSnapshot is a frozen, read-only view of a HeapBackend's state at the
// moment of snapshot, for a checkpoint to serialize in the background.
//
// The view shares maps and slices with the live state, which copies them
// before changing them (see HeapBackend), so it can be read from any
// goroutine, concurrently with the task writing to the backend, until
// release. Reading it after release is a bug: the live state may then
// write in place to maps the view still refers to.
type heapSnapshot struct {
	b       *HeapBackend
	version uint64
	// start and end are the backend's key-group range.
	start, end int
	states     []frozenState
	once       sync.Once
}

// frozenState is one state of a heapSnapshot.
type frozenState interface {
	// name is the state's registered name.
	name() string
	// kind is "value", "list" or "map".
	kind() stateKind
	ttlConfig() TTLConfig
	// entries returns the number of (key, namespace) entries in key group
	// kg.
	entries(kg int) int
	// rangeKeyGroup calls fn for every value in key group kg, in no
	// particular order except that a list's elements come in order, until
	// fn returns false, and reports whether fn never did. The frozenEntry
	// and the slices in it are reused by the next call.
	rangeKeyGroup(kg int, fn func(e *frozenEntry) bool) bool
}

// frozenEntry is one value of a frozen state: a value state's value, one
// element of a list, or one entry of a map, encoded with the state's
// codecs.
type frozenEntry struct {
	key, ns []byte
	// index is a list element's position in its list.
	index int
	// userKey is a map entry's key.
	userKey []byte
	value   []byte
	// ts is the TTL timestamp (Unix milliseconds), 0 without TTL.
	ts int64
}

// setKey fills e.key and e.ns from a map key of a default-namespace table
// (namespaced false) or of a namespaced one.
func (e *frozenEntry) setKey(mk string, namespaced bool) {
	k, ns := mk, ""
	if namespaced {
		k, ns = splitMapKey(mk)
	}
	e.key = append(e.key[:0], k...)
	e.ns = append(e.ns[:0], ns...)
}

// snapshot freezes the backend's current state in O(states × key groups)
// and returns the view; the caller must release it.
func (b *HeapBackend) snapshot() *heapSnapshot {
	v := b.epoch
	b.epoch++
	b.snapMu.Lock()
	b.live = append(b.live, v)
	b.maxLive.Store(v) // v is the newest version, so the largest
	b.snapMu.Unlock()
	s := &heapSnapshot{b: b, version: v, start: b.start, end: b.end, states: make([]frozenState, len(b.states))}
	for i, st := range b.states {
		s.states[i] = st.freeze()
	}
	return s
}

// release ends the snapshot: from now on the live state no longer copies
// maps for it. It may be called from any goroutine, more than once.
func (s *heapSnapshot) release() {
	s.once.Do(func() {
		b := s.b
		b.snapMu.Lock()
		defer b.snapMu.Unlock()
		if i := slices.Index(b.live, s.version); i >= 0 {
			b.live = slices.Delete(b.live, i, i+1)
		}
		var m uint64
		for _, v := range b.live {
			m = max(m, v)
		}
		b.maxLive.Store(m)
	})
}

func frozenMaps[E any](tables []table[E]) []map[string]E {
	ms := make([]map[string]E, len(tables))
	for i := range tables {
		ms[i] = tables[i].m
	}
	return ms
}

// frozenBase is what every frozen state has.
type frozenBase[E any] struct {
	n     string
	ttl   TTLConfig
	start int
	maps  []map[string]E // by table index
}

func (f *frozenBase[E]) name() string         { return f.n }
func (f *frozenBase[E]) ttlConfig() TTLConfig { return f.ttl }

func (f *frozenBase[E]) entries(kg int) int {
	i := kg - f.start
	return len(f.maps[i]) + len(f.maps[len(f.maps)/2+i])
}

// rangeMaps calls fn for every entry of key group kg, with the map key set
// in fe, until fn returns false, and reports whether fn never did.
func (f *frozenBase[E]) rangeMaps(kg int, fe *frozenEntry, fn func(e E) bool) bool {
	i := kg - f.start
	for j, m := range []map[string]E{f.maps[i], f.maps[len(f.maps)/2+i]} {
		for mk, e := range m {
			fe.setKey(mk, j == 1)
			if !fn(e) {
				return false
			}
		}
	}
	return true
}

type frozenValue[E any] struct {
	frozenBase[valueEntry[E]]
	encode func(dst []byte, e E) ([]byte, int64)
}

func (s *valueStore[E]) freeze() frozenState {
	return &frozenValue[E]{frozenBase[valueEntry[E]]{s.name, s.ttl, s.b.start, frozenMaps(s.tables)}, s.encode}
}

func (f *frozenValue[E]) kind() stateKind { return kindValue }

func (f *frozenValue[E]) rangeKeyGroup(kg int, fn func(e *frozenEntry) bool) bool {
	var fe frozenEntry
	return f.rangeMaps(kg, &fe, func(e valueEntry[E]) bool {
		fe.value, fe.ts = f.encode(fe.value[:0], e.v)
		return fn(&fe)
	})
}

type frozenList[T any] struct {
	frozenBase[listEntry[T]]
	codec codec.Codec[T]
}

func (s *listStore[T]) freeze() frozenState {
	return &frozenList[T]{frozenBase[listEntry[T]]{s.name, s.ttl, s.b.start, frozenMaps(s.tables)}, s.codec}
}

func (f *frozenList[T]) kind() stateKind { return kindList }

func (f *frozenList[T]) rangeKeyGroup(kg int, fn func(e *frozenEntry) bool) bool {
	var fe frozenEntry
	return f.rangeMaps(kg, &fe, func(e listEntry[T]) bool {
		for i, v := range e.vals {
			fe.index = i
			fe.value = f.codec.Append(fe.value[:0], v)
			fe.ts = 0
			if e.ts != nil {
				fe.ts = e.ts[i]
			}
			if !fn(&fe) {
				return false
			}
		}
		return true
	})
}

type frozenMap[K comparable, V any] struct {
	frozenBase[mapEntry[K, V]]
	keyCodec   codec.Codec[K]
	valueCodec codec.Codec[V]
}

func (s *mapStore[K, V]) freeze() frozenState {
	return &frozenMap[K, V]{frozenBase[mapEntry[K, V]]{s.name, s.ttl, s.b.start, frozenMaps(s.tables)}, s.keyCodec, s.valueCodec}
}

func (f *frozenMap[K, V]) kind() stateKind { return kindMap }

func (f *frozenMap[K, V]) rangeKeyGroup(kg int, fn func(e *frozenEntry) bool) bool {
	var fe frozenEntry
	return f.rangeMaps(kg, &fe, func(e mapEntry[K, V]) bool {
		for k, u := range e.m {
			fe.userKey = f.keyCodec.Append(fe.userKey[:0], k)
			fe.value = f.valueCodec.Append(fe.value[:0], u.v)
			fe.ts = u.ts
			if !fn(&fe) {
				return false
			}
		}
		return true
	})
}
