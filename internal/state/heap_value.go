package state

import "github.com/weirstream/weir/codec"

// valueEntry is a value state's entry: the value and, with TTL, the Unix
// millisecond timestamp it was last refreshed at.
type valueEntry[T any] struct {
	key string // the entry's map key, reused when the entry is rewritten
	v   T
	ts  int64
}

// valueStore is a value state's storage, shared by its handles.
type valueStore[T any] struct {
	b      *HeapBackend
	name   string
	codec  codec.Codec[T]
	ttl    TTLConfig
	tables []table[valueEntry[T]] // by key group - start
}

// heapValue is a handle on a value state.
type heapValue[T any] struct {
	s *valueStore[T]
	nsKey
}

var _ Value[int] = (*heapValue[int])(nil)

func newHeapValue[T any](b *HeapBackend, d ValueDescriptor[T]) (Value[T], error) {
	s, err := register(b, d.Name, d.TTL, "value state of "+typeName[T](), func() *valueStore[T] {
		return &valueStore[T]{b: b, name: d.Name, codec: d.Codec, ttl: d.TTL, tables: make([]table[valueEntry[T]], b.numKeyGroups())}
	})
	if err != nil {
		return nil, err
	}
	return &heapValue[T]{s: s, nsKey: nsKey{b: b}}, nil
}

func (s *valueStore[T]) describe() string     { return "value state of " + typeName[T]() }
func (s *valueStore[T]) ttlConfig() TTLConfig { return s.ttl }

func (s *valueStore[T]) appendKeys(i int, dst []string) []string {
	return appendTableKeys(&s.tables[i], dst)
}

// Get returns the value, and false if there is none (or it expired).
func (h *heapValue[T]) Get() (T, bool, error) {
	s := h.s
	t := &s.tables[s.b.kgi]
	e, ok := t.m[string(h.key())]
	if !ok {
		var zero T
		return zero, false, nil
	}
	if s.ttl.Enabled() {
		return s.getTTL(t, e)
	}
	return e.v, true, nil
}

func (s *valueStore[T]) getTTL(t *table[valueEntry[T]], e valueEntry[T]) (T, bool, error) {
	now := s.b.now()
	if s.ttl.Expired(e.ts, now) {
		delete(t.writable(s.b), e.key)
		if s.ttl.Visibility == ReturnExpiredIfNotCleanedUp {
			return e.v, true, nil
		}
		var zero T
		return zero, false, nil
	}
	if s.ttl.UpdateType == OnReadAndWrite && e.ts != now {
		e.ts = now
		t.writable(s.b)[e.key] = e
	}
	return e.v, true, nil
}

// Update sets the value.
func (h *heapValue[T]) Update(v T) error {
	s := h.s
	m := s.tables[s.b.kgi].writable(s.b)
	k := h.key()
	var ts int64
	if s.ttl.Enabled() {
		ts = s.b.now()
	}
	if e, ok := m[string(k)]; ok {
		m[e.key] = valueEntry[T]{key: e.key, v: v, ts: ts}
		return nil
	}
	mk := string(k)
	m[mk] = valueEntry[T]{key: mk, v: v, ts: ts}
	return nil
}

// Clear removes the value.
func (h *heapValue[T]) Clear() error {
	s := h.s
	t := &s.tables[s.b.kgi]
	if e, ok := t.m[string(h.key())]; ok {
		delete(t.writable(s.b), e.key)
	}
	return nil
}

func (s *valueStore[T]) cleanupKey(i int, k string, now int64) int {
	t := &s.tables[i]
	e, ok := t.m[k]
	if !ok || !s.ttl.Expired(e.ts, now) {
		return 0
	}
	delete(t.writable(s.b), k)
	return 1
}
