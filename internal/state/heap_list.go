package state

import (
	"slices"

	"github.com/weirstream/weir/codec"
)

// listEntry is a list state's entry: the elements in insertion order and,
// with TTL, each element's timestamp (ts[i] belongs to vals[i]; ts is nil
// without TTL). An entry is never empty: the last element's removal
// deletes it.
//
// Snapshots share the slices (see HeapBackend): only appends write into an
// existing backing array, past the length any earlier copy of the entry
// sees. Timestamps are refreshed in place only when the arrays are not
// shared; ver is the epoch in which the arrays were last built by
// something other than an append (appends that grow the arrays keep it, so
// it is conservative).
type listEntry[T any] struct {
	kp   *byte // the bytes of the entry's map key (see keyOf)
	vals []T
	ts   []int64
	ver  uint64
}

// listStore is a list state's storage, shared by its handles.
type listStore[T any] struct {
	b      *HeapBackend
	name   string
	codec  codec.Codec[T]
	ttl    TTLConfig
	tables []table[listEntry[T]]
}

// heapList is a handle on a list state.
type heapList[T any] struct {
	s *listStore[T]
	nsKey
}

var _ List[int] = (*heapList[int])(nil)

func newHeapList[T any](b *HeapBackend, d ListDescriptor[T]) (List[T], error) {
	s, err := register(b, d.Name, d.TTL, "list state of "+typeName[T](), func() *listStore[T] {
		return &listStore[T]{b: b, name: d.Name, codec: d.Codec, ttl: d.TTL, tables: make([]table[listEntry[T]], b.numTables())}
	})
	if err != nil {
		return nil, err
	}
	return &heapList[T]{s: s, nsKey: nsKey{b: b}}, nil
}

func (s *listStore[T]) describe() string     { return "list state of " + typeName[T]() }
func (s *listStore[T]) ttlConfig() TTLConfig { return s.ttl }

func (s *listStore[T]) appendKeys(i int, dst []string) []string {
	return appendTableKeys(&s.tables[i], dst)
}

// Get returns the elements in insertion order, nil if none. The slice is
// the stored one, capped so that appending to it cannot write into state.
func (h *heapList[T]) Get() ([]T, error) {
	s := h.s
	i, k := h.loc()
	t := &s.tables[i]
	e, ok := t.m[string(k)]
	if !ok {
		return nil, nil
	}
	if s.ttl.Enabled() {
		return s.getTTL(t, keyOf(e.kp, len(k)), e), nil
	}
	return e.vals[:len(e.vals):len(e.vals)], nil
}

// getTTL is Get with TTL, of entry e at map key mk.
func (s *listStore[T]) getTTL(t *table[listEntry[T]], mk string, e listEntry[T]) []T {
	b := s.b
	now := b.now()
	n := len(e.vals)
	live := s.countLive(e, now)
	refresh := s.ttl.UpdateType == OnReadAndWrite
	if live == n {
		if refresh {
			s.refresh(t, mk, e, now)
		}
		return e.vals[:n:n]
	}
	// Some elements expired: keep the others in new slices.
	var kept []T
	if live > 0 {
		ne := listEntry[T]{kp: e.kp, vals: make([]T, 0, live), ts: make([]int64, 0, live), ver: b.epoch}
		for i, ts := range e.ts {
			if !s.ttl.Expired(ts, now) {
				if refresh {
					ts = now
				}
				ne.vals = append(ne.vals, e.vals[i])
				ne.ts = append(ne.ts, ts)
			}
		}
		t.writable(b)[mk] = ne
		kept = ne.vals[:live:live]
	} else {
		delete(t.writable(b), mk)
	}
	if s.ttl.Visibility == ReturnExpiredIfNotCleanedUp {
		return e.vals[:n:n]
	}
	return kept
}

func (s *listStore[T]) countLive(e listEntry[T], now int64) int {
	live := 0
	for _, ts := range e.ts {
		if !s.ttl.Expired(ts, now) {
			live++
		}
	}
	return live
}

// refresh sets every element's timestamp to now: in place if no snapshot
// may see the timestamps, else in new slices.
func (s *listStore[T]) refresh(t *table[listEntry[T]], mk string, e listEntry[T], now int64) {
	b := s.b
	if !b.shared(e.ver) {
		for i := range e.ts {
			e.ts[i] = now
		}
		return
	}
	e.vals = slices.Clone(e.vals)
	e.ts = make([]int64, len(e.vals))
	for i := range e.ts {
		e.ts[i] = now
	}
	e.ver = b.epoch
	t.writable(b)[mk] = e
}

// Add appends one element.
func (h *heapList[T]) Add(v T) error {
	s := h.s
	mk, e, m := h.entry()
	e.vals = append(e.vals, v)
	if s.ttl.Enabled() {
		e.ts = append(e.ts, s.b.now())
	}
	m[mk] = e
	return nil
}

// AddAll appends elements.
func (h *heapList[T]) AddAll(vs []T) error {
	if len(vs) == 0 {
		return nil
	}
	s := h.s
	mk, e, m := h.entry()
	e.vals = append(e.vals, vs...)
	if s.ttl.Enabled() {
		now := s.b.now()
		for range vs {
			e.ts = append(e.ts, now)
		}
	}
	m[mk] = e
	return nil
}

// entry returns the map key and entry of the current key and namespace,
// or a new map key and empty entry, and the writable map to store it in.
func (h *heapList[T]) entry() (string, listEntry[T], map[string]listEntry[T]) {
	i, k := h.loc()
	m := h.s.tables[i].writable(h.s.b)
	if e, ok := m[string(k)]; ok {
		return keyOf(e.kp, len(k)), e, m
	}
	mk := string(k)
	return mk, listEntry[T]{kp: refOf(mk), ver: h.s.b.epoch}, m
}

// Update replaces the list with a copy of vs; an empty vs clears it.
func (h *heapList[T]) Update(vs []T) error {
	if len(vs) == 0 {
		return h.Clear()
	}
	s := h.s
	mk, old, m := h.entry()
	e := listEntry[T]{kp: old.kp, vals: slices.Clone(vs), ver: s.b.epoch}
	if s.ttl.Enabled() {
		now := s.b.now()
		e.ts = make([]int64, len(vs))
		for i := range e.ts {
			e.ts[i] = now
		}
	}
	m[mk] = e
	return nil
}

// Clear removes the list.
func (h *heapList[T]) Clear() error {
	s := h.s
	i, k := h.loc()
	t := &s.tables[i]
	if e, ok := t.m[string(k)]; ok {
		delete(t.writable(s.b), keyOf(e.kp, len(k)))
	}
	return nil
}

func (s *listStore[T]) cleanupKey(i int, k string, now int64) int {
	t := &s.tables[i]
	e, ok := t.m[k]
	if !ok {
		return 0
	}
	n := len(e.vals)
	live := s.countLive(e, now)
	if live == n {
		return 0
	}
	if live == 0 {
		delete(t.writable(s.b), k)
		return n
	}
	ne := listEntry[T]{kp: e.kp, vals: make([]T, 0, live), ts: make([]int64, 0, live), ver: s.b.epoch}
	for j, ts := range e.ts {
		if !s.ttl.Expired(ts, now) {
			ne.vals = append(ne.vals, e.vals[j])
			ne.ts = append(ne.ts, ts)
		}
	}
	t.writable(s.b)[k] = ne
	return n - live
}
