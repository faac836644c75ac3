package state

import (
	"maps"

	"github.com/weirstream/weir/codec"
)

// mapEntry is a map state's entry: the inner map of user entries, never
// empty (removing the last user entry deletes the mapEntry), and the epoch
// in which the inner map was created or last copied (see HeapBackend).
type mapEntry[K comparable, V any] struct {
	kp  *byte // the bytes of the entry's map key (see keyOf)
	m   map[K]userEntry[V]
	ver uint64
}

// userEntry is one entry of a map state's inner map: the value and, with
// TTL, its timestamp.
type userEntry[V any] struct {
	v  V
	ts int64
}

// mapStore is a map state's storage, shared by its handles.
type mapStore[K comparable, V any] struct {
	b          *HeapBackend
	name       string
	keyCodec   codec.Codec[K]
	valueCodec codec.Codec[V]
	ttl        TTLConfig
	tables     []table[mapEntry[K, V]]
}

// heapMap is a handle on a map state.
type heapMap[K comparable, V any] struct {
	s *mapStore[K, V]
	nsKey
}

var _ Map[int, int] = (*heapMap[int, int])(nil)

func newHeapMap[K comparable, V any](b *HeapBackend, d MapDescriptor[K, V]) (Map[K, V], error) {
	s, err := register(b, d.Name, d.TTL, mapDescribe[K, V](), func() *mapStore[K, V] {
		return &mapStore[K, V]{
			b: b, name: d.Name, keyCodec: d.KeyCodec, valueCodec: d.ValueCodec, ttl: d.TTL,
			tables: make([]table[mapEntry[K, V]], b.numTables()),
		}
	})
	if err != nil {
		return nil, err
	}
	return &heapMap[K, V]{s: s, nsKey: nsKey{b: b}}, nil
}

func mapDescribe[K comparable, V any]() string {
	return "map state of " + typeName[K]() + " to " + typeName[V]()
}

func (s *mapStore[K, V]) describe() string     { return mapDescribe[K, V]() }
func (s *mapStore[K, V]) ttlConfig() TTLConfig { return s.ttl }

func (s *mapStore[K, V]) appendKeys(i int, dst []string) []string {
	return appendTableKeys(&s.tables[i], dst)
}

// inner returns the inner map of entry e at map key mk, to write to: first
// the table's map is made writable, then the inner map is copied if a live
// snapshot may see it.
func (s *mapStore[K, V]) inner(t *table[mapEntry[K, V]], mk string, e mapEntry[K, V]) map[K]userEntry[V] {
	b := s.b
	m := t.writable(b)
	if e.ver != b.epoch {
		if b.shared(e.ver) {
			e.m = maps.Clone(e.m)
		}
		e.ver = b.epoch
		m[mk] = e
	}
	return e.m
}

// Get returns the value of k.
func (h *heapMap[K, V]) Get(k K) (V, bool, error) {
	s := h.s
	i, key := h.loc()
	t := &s.tables[i]
	e, ok := t.m[string(key)]
	if !ok {
		var zero V
		return zero, false, nil
	}
	u, ok := e.m[k]
	if !ok {
		var zero V
		return zero, false, nil
	}
	if s.ttl.Enabled() {
		return s.getTTL(t, keyOf(e.kp, len(key)), e, k, u)
	}
	return u.v, true, nil
}

func (s *mapStore[K, V]) getTTL(t *table[mapEntry[K, V]], mk string, e mapEntry[K, V], k K, u userEntry[V]) (V, bool, error) {
	now := s.b.now()
	if s.ttl.Expired(u.ts, now) {
		s.remove(t, mk, e, k)
		if s.ttl.Visibility == ReturnExpiredIfNotCleanedUp {
			return u.v, true, nil
		}
		var zero V
		return zero, false, nil
	}
	if s.ttl.UpdateType == OnReadAndWrite && u.ts != now {
		s.inner(t, mk, e)[k] = userEntry[V]{u.v, now}
	}
	return u.v, true, nil
}

// remove deletes k from the inner map of entry e at map key mk, and e if
// that empties it.
func (s *mapStore[K, V]) remove(t *table[mapEntry[K, V]], mk string, e mapEntry[K, V], k K) {
	m := s.inner(t, mk, e)
	delete(m, k)
	if len(m) == 0 {
		delete(t.m, mk)
	}
}

// Put sets k to v.
func (h *heapMap[K, V]) Put(k K, v V) error {
	s := h.s
	b := s.b
	i, key := h.loc()
	t := &s.tables[i]
	m := t.writable(b)
	var ts int64
	if s.ttl.Enabled() {
		ts = b.now()
	}
	e, ok := m[string(key)]
	if !ok {
		mk := string(key)
		m[mk] = mapEntry[K, V]{kp: refOf(mk), m: map[K]userEntry[V]{k: {v, ts}}, ver: b.epoch}
		return nil
	}
	s.inner(t, keyOf(e.kp, len(key)), e)[k] = userEntry[V]{v, ts}
	return nil
}

// Remove deletes k.
func (h *heapMap[K, V]) Remove(k K) error {
	s := h.s
	i, key := h.loc()
	t := &s.tables[i]
	e, ok := t.m[string(key)]
	if !ok {
		return nil
	}
	if _, ok := e.m[k]; ok {
		s.remove(t, keyOf(e.kp, len(key)), e, k)
	}
	return nil
}

// Contains reports whether k is present; it is a Get, also for TTL.
func (h *heapMap[K, V]) Contains(k K) (bool, error) {
	_, ok, err := h.Get(k)
	return ok, err
}

// Range calls fn for every entry until fn returns false. With TTL, expired
// entries are skipped (or passed to fn, with ReturnExpiredIfNotCleanedUp)
// and all expired entries are removed after the iteration; with
// OnReadAndWrite the entries passed to fn are refreshed.
func (h *heapMap[K, V]) Range(fn func(k K, v V) bool) error {
	s := h.s
	b := s.b
	i, key := h.loc()
	t := &s.tables[i]
	e, ok := t.m[string(key)]
	if !ok {
		return nil
	}
	if !s.ttl.Enabled() {
		for k, u := range e.m {
			if !fn(k, u.v) {
				break
			}
		}
		return nil
	}
	now := b.now()
	mk := keyOf(e.kp, len(key))
	m := e.m
	refresh := s.ttl.UpdateType == OnReadAndWrite
	if refresh {
		m = s.inner(t, mk, e)
	}
	returnExpired := s.ttl.Visibility == ReturnExpiredIfNotCleanedUp
	expired := false
	for k, u := range m {
		if s.ttl.Expired(u.ts, now) {
			expired = true
			if !returnExpired {
				continue
			}
		} else if refresh {
			m[k] = userEntry[V]{u.v, now}
		}
		if !fn(k, u.v) {
			break
		}
	}
	if expired {
		s.purge(i, mk, now)
	}
	return nil
}

// IsEmpty reports whether the map has no entries. With TTL and
// NeverReturnExpired, a map whose entries all expired is empty (and is
// removed); with ReturnExpiredIfNotCleanedUp it is not empty until they are
// removed.
func (h *heapMap[K, V]) IsEmpty() (bool, error) {
	s := h.s
	i, key := h.loc()
	t := &s.tables[i]
	e, ok := t.m[string(key)]
	if !ok {
		return true, nil
	}
	if !s.ttl.Enabled() || s.ttl.Visibility == ReturnExpiredIfNotCleanedUp {
		return len(e.m) == 0, nil
	}
	now := s.b.now()
	for _, u := range e.m {
		if !s.ttl.Expired(u.ts, now) {
			return false, nil
		}
	}
	delete(t.writable(s.b), keyOf(e.kp, len(key)))
	return true, nil
}

// Clear removes the map.
func (h *heapMap[K, V]) Clear() error {
	s := h.s
	i, key := h.loc()
	t := &s.tables[i]
	if e, ok := t.m[string(key)]; ok {
		delete(t.writable(s.b), keyOf(e.kp, len(key)))
	}
	return nil
}

// purge removes the expired user entries of the entry at map key mk of
// table i, and the entry if none remain, and returns how many
// user entries it removed. It writes only if something expired.
func (s *mapStore[K, V]) purge(i int, mk string, now int64) int {
	t := &s.tables[i]
	e, ok := t.m[mk]
	if !ok {
		return 0
	}
	n := 0
	for _, u := range e.m {
		if s.ttl.Expired(u.ts, now) {
			n++
		}
	}
	switch {
	case n == 0:
	case n == len(e.m):
		delete(t.writable(s.b), mk)
	default:
		m := s.inner(t, mk, e)
		for k, u := range m {
			if s.ttl.Expired(u.ts, now) {
				delete(m, k)
			}
		}
	}
	return n
}

func (s *mapStore[K, V]) cleanupKey(i int, k string, now int64) int {
	return s.purge(i, k, now)
}
