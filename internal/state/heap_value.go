package state

// valueEntry is a value state's entry. A state without TTL stores
// valueEntry[T], one with TTL valueEntry[stamped[T]], so that states
// without TTL spend no memory on timestamps (the size of a map slot decides
// how much of the state fits in the CPU caches).
type valueEntry[E any] struct {
	kp *byte // the bytes of the entry's map key (see keyOf)
	v  E
}

// stamped is a value with the Unix millisecond timestamp it was last
// refreshed at.
type stamped[T any] struct {
	v  T
	ts int64
}

// valueStore is a value state's storage, shared by its handles. E is T
// without TTL and stamped[T] with TTL.
type valueStore[E any] struct {
	b      *HeapBackend
	name   string
	desc   string
	ttl    TTLConfig
	tables []table[valueEntry[E]] // by key group - start
	// encode appends the encoding of a stored value and returns its
	// timestamp, for snapshots.
	encode func(dst []byte, e E) ([]byte, int64)
	// decode decodes a restored value and its timestamp (see adopt).
	decode func(src []byte, ts int64) (E, error)
	// expired reports whether e expired at now; nil without TTL.
	expired func(e E, now int64) bool
}

// heapValue is a handle on a value state without TTL.
type heapValue[T any] struct {
	s *valueStore[T]
	nsKey
}

// heapTTLValue is a handle on a value state with TTL.
type heapTTLValue[T any] struct {
	s *valueStore[stamped[T]]
	nsKey
}

var (
	_ Value[int] = (*heapValue[int])(nil)
	_ Value[int] = (*heapTTLValue[int])(nil)
)

func newHeapValue[T any](b *HeapBackend, d ValueDescriptor[T]) (Value[T], error) {
	desc := "value state of " + typeName[T]()
	if d.TTL.Enabled() {
		ttl := d.TTL
		s, err := register(b, d.Name, d.TTL, desc, func() *valueStore[stamped[T]] {
			return &valueStore[stamped[T]]{
				b: b, name: d.Name, desc: desc, ttl: ttl,
				tables: make([]table[valueEntry[stamped[T]]], b.numTables()),
				encode: func(dst []byte, e stamped[T]) ([]byte, int64) { return d.Codec.Append(dst, e.v), e.ts },
				decode: func(src []byte, ts int64) (stamped[T], error) {
					v, err := snapDecodeExact(d.Codec, src)
					return stamped[T]{v, ts}, err
				},
				expired: func(e stamped[T], now int64) bool { return ttl.Expired(e.ts, now) },
			}
		})
		if err != nil {
			return nil, err
		}
		return &heapTTLValue[T]{s: s, nsKey: nsKey{b: b}}, nil
	}
	s, err := register(b, d.Name, d.TTL, desc, func() *valueStore[T] {
		return &valueStore[T]{
			b: b, name: d.Name, desc: desc,
			tables: make([]table[valueEntry[T]], b.numTables()),
			encode: func(dst []byte, v T) ([]byte, int64) { return d.Codec.Append(dst, v), 0 },
			decode: func(src []byte, _ int64) (T, error) { return snapDecodeExact(d.Codec, src) },
		}
	})
	if err != nil {
		return nil, err
	}
	return &heapValue[T]{s: s, nsKey: nsKey{b: b}}, nil
}

func (s *valueStore[E]) describe() string     { return s.desc }
func (s *valueStore[E]) ttlConfig() TTLConfig { return s.ttl }

func (s *valueStore[E]) appendKeys(i int, dst []string) []string {
	return appendTableKeys(&s.tables[i], dst)
}

// put sets the entry at map key k of table i to v.
func (s *valueStore[E]) put(i int, k []byte, v E) {
	m := s.tables[i].writable(s.b)
	if e, ok := m[string(k)]; ok {
		m[keyOf(e.kp, len(k))] = valueEntry[E]{e.kp, v}
		return
	}
	mk := string(k)
	m[mk] = valueEntry[E]{refOf(mk), v}
}

// clear removes the entry at map key k of table i.
func (s *valueStore[E]) clear(i int, k []byte) {
	t := &s.tables[i]
	if e, ok := t.m[string(k)]; ok {
		delete(t.writable(s.b), keyOf(e.kp, len(k)))
	}
}

func (s *valueStore[E]) cleanupKey(i int, k string, now int64) int {
	t := &s.tables[i]
	e, ok := t.m[k]
	if !ok || !s.expired(e.v, now) {
		return 0
	}
	delete(t.writable(s.b), k)
	return 1
}

// Get returns the value, and false if there is none.
func (h *heapValue[T]) Get() (T, bool, error) {
	i, k := h.loc()
	e, ok := h.s.tables[i].m[string(k)]
	return e.v, ok, nil
}

// Update sets the value.
func (h *heapValue[T]) Update(v T) error {
	i, k := h.loc()
	h.s.put(i, k, v)
	return nil
}

// Clear removes the value.
func (h *heapValue[T]) Clear() error {
	h.s.clear(h.loc())
	return nil
}

// Get returns the value, and false if there is none or it expired (but see
// ReturnExpiredIfNotCleanedUp). An expired value is removed.
func (h *heapTTLValue[T]) Get() (T, bool, error) {
	s := h.s
	b := s.b
	i, k := h.loc()
	t := &s.tables[i]
	e, ok := t.m[string(k)]
	if !ok {
		var zero T
		return zero, false, nil
	}
	now := b.now()
	if s.ttl.Expired(e.v.ts, now) {
		delete(t.writable(b), keyOf(e.kp, len(k)))
		if s.ttl.Visibility == ReturnExpiredIfNotCleanedUp {
			return e.v.v, true, nil
		}
		var zero T
		return zero, false, nil
	}
	if s.ttl.UpdateType == OnReadAndWrite && e.v.ts != now {
		t.writable(b)[keyOf(e.kp, len(k))] = valueEntry[stamped[T]]{e.kp, stamped[T]{e.v.v, now}}
	}
	return e.v.v, true, nil
}

// Update sets the value and its timestamp.
func (h *heapTTLValue[T]) Update(v T) error {
	i, k := h.loc()
	h.s.put(i, k, stamped[T]{v, h.s.b.now()})
	return nil
}

// Clear removes the value.
func (h *heapTTLValue[T]) Clear() error {
	h.s.clear(h.loc())
	return nil
}
