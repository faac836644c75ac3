package state

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/weirstream/weir/codec"
)

// heapPending is a state restored into a HeapBackend and not registered
// yet: its entries as the stream had them, encoded, by key group. A
// registration with the state's descriptor decodes them into the new
// state's tables (adopt) and drops the heapPending.
//
// A heapPending is never modified once stored in HeapBackend.pending,
// except that a later Restore appends records to its key groups (past the
// lengths that a snapshot taken before may have captured), so snapshots
// share it.
type heapPending struct {
	st   snapState
	byKG [][]snapRecord // by key group - start, in stream order
}

// decodeErr wraps an error decoding a restored entry at registration.
func (p *heapPending) decodeErr(err error) error {
	return fmt.Errorf("state %q: decode restored entry: %w", p.st.name, err)
}

// heapLoc returns the table index and map key of (key, ns) in key group
// start+kgi, like nsKey.loc.
func heapLoc(b *HeapBackend, kgi int, key, ns []byte) (int, []byte) {
	if len(ns) == 0 {
		return kgi, key
	}
	buf := binary.AppendUvarint(make([]byte, 0, binary.MaxVarintLen64+len(key)+len(ns)), uint64(len(key)))
	buf = append(buf, key...)
	return b.nkg + kgi, append(buf, ns...)
}

// snapDecodeExact decodes one value that must fill src.
func snapDecodeExact[T any](c codec.Codec[T], src []byte) (T, error) {
	v, n, err := c.Decode(src)
	if err != nil {
		return v, err
	}
	if n != len(src) {
		var zero T
		return zero, fmt.Errorf("%w: %d bytes after the encoded value", codec.ErrCorrupt, len(src)-n)
	}
	return v, nil
}

// adoptPending decodes the restored entries of s's name, if any, into s,
// which is being registered with TTL ttl.
func (b *HeapBackend) adoptPending(name string, s heapState, ttl TTLConfig) error {
	p := b.pending[name]
	if p == nil {
		return nil
	}
	if err := p.st.compatible(s.kind(), ttl.Enabled()); err != nil {
		return err
	}
	if err := s.adopt(p); err != nil {
		return err
	}
	delete(b.pending, name)
	return nil
}

func (s *valueStore[E]) kind() stateKind { return kindValue }

func (s *valueStore[E]) adopt(p *heapPending) error {
	for kgi, recs := range p.byKG {
		for _, rec := range recs {
			it := rec.items[0]
			v, err := s.decode(it.value, it.ts)
			if err != nil {
				return p.decodeErr(err)
			}
			i, mk := heapLoc(s.b, kgi, rec.key, rec.ns)
			s.put(i, mk, v)
		}
	}
	return nil
}

func (s *listStore[T]) kind() stateKind { return kindList }

func (s *listStore[T]) adopt(p *heapPending) error {
	b := s.b
	for kgi, recs := range p.byKG {
		for _, rec := range recs {
			e := listEntry[T]{vals: make([]T, len(rec.items)), ver: b.epoch}
			if s.ttl.Enabled() {
				e.ts = make([]int64, len(rec.items))
			}
			for j, it := range rec.items {
				v, err := snapDecodeExact(s.codec, it.value)
				if err != nil {
					return p.decodeErr(err)
				}
				e.vals[j] = v
				if e.ts != nil {
					e.ts[j] = it.ts
				}
			}
			i, k := heapLoc(b, kgi, rec.key, rec.ns)
			mk := string(k)
			e.kp = refOf(mk)
			s.tables[i].writable(b)[mk] = e
		}
	}
	return nil
}

func (s *mapStore[K, V]) kind() stateKind { return kindMap }

func (s *mapStore[K, V]) adopt(p *heapPending) error {
	b := s.b
	for kgi, recs := range p.byKG {
		for _, rec := range recs {
			e := mapEntry[K, V]{m: make(map[K]userEntry[V], len(rec.items)), ver: b.epoch}
			for _, it := range rec.items {
				k, err := snapDecodeExact(s.keyCodec, it.userKey)
				if err != nil {
					return p.decodeErr(err)
				}
				v, err := snapDecodeExact(s.valueCodec, it.value)
				if err != nil {
					return p.decodeErr(err)
				}
				e.m[k] = userEntry[V]{v, it.ts}
			}
			i, k := heapLoc(b, kgi, rec.key, rec.ns)
			mk := string(k)
			e.kp = refOf(mk)
			s.tables[i].writable(b)[mk] = e
		}
	}
	return nil
}

// heapSnap is a Snapshot of a HeapBackend: its frozen view, plus the
// restored states not registered yet, which it writes as they were
// restored.
type heapSnap struct {
	s          *heapSnapshot
	start, end int
	sts        []snapState
	frozen     []frozenState // by index in sts; nil for a pending state
	pending    []*heapPending
	released   atomic.Bool
}

var _ Snapshot = (*heapSnap)(nil)

func takeHeapSnapshot(b *HeapBackend) (*heapSnap, error) {
	if b.byName == nil {
		return nil, errors.New("state: snapshot of a closed heap backend")
	}
	s := b.snapshot()
	type ent struct {
		st snapState
		f  frozenState
		p  *heapPending
	}
	ents := make([]ent, 0, len(s.states)+len(b.pending))
	for _, f := range s.states {
		ents = append(ents, ent{st: snapState{name: f.name(), kind: f.kind(), ttl: f.ttlConfig().Enabled()}, f: f})
	}
	for _, p := range b.pending {
		ents = append(ents, ent{st: p.st, p: &heapPending{st: p.st, byKG: slices.Clone(p.byKG)}})
	}
	slices.SortFunc(ents, func(x, y ent) int { return strings.Compare(x.st.name, y.st.name) })
	h := &heapSnap{s: s, start: s.start, end: s.end}
	for _, e := range ents {
		h.sts = append(h.sts, e.st)
		h.frozen = append(h.frozen, e.f)
		h.pending = append(h.pending, e.p)
	}
	return h, nil
}

// WriteStream implements Snapshot. Entries are collected and sorted one
// state and key group at a time.
func (h *heapSnap) WriteStream(w io.Writer) (KeyGroupOffsets, error) {
	if h.released.Load() {
		return KeyGroupOffsets{}, errors.New("state: WriteStream of a released snapshot")
	}
	return writeSnapshot(w, &heapSnapSource{h: h})
}

// Release implements Snapshot.
func (h *heapSnap) Release() {
	h.released.Store(true)
	h.s.release()
}

// heapSnapSource reads a heapSnap for writeSnapshot, with buffers reused
// from one state and key group to the next.
type heapSnapSource struct {
	h     *heapSnap
	arena []byte     // the records' bytes
	recs  []heapRec  // the records of the current state and key group
	items []snapItem // their items, each record's consecutive
}

// heapRec is a record being collected: its sort key (see snapSortKey), its
// key and namespace (inside the sort key), and its items
// heapSnapSource.items[lo:hi].
type heapRec struct {
	sk, key, ns []byte
	lo, hi      int
}

func (p *heapSnapSource) keyGroups() (int, int) { return p.h.start, p.h.end }
func (p *heapSnapSource) states() []snapState   { return p.h.sts }

// bytes copies b into the arena. Earlier slices of the arena stay valid
// when it grows: they keep the old array.
func (p *heapSnapSource) bytes(b []byte) []byte {
	n := len(p.arena)
	p.arena = append(p.arena, b...)
	return p.arena[n:len(p.arena):len(p.arena)]
}

func (p *heapSnapSource) records(kg, i int, fn func(rec *snapRecord)) error {
	h := p.h
	if pd := h.pending[i]; pd != nil {
		recs := pd.byKG[kg-h.start]
		for j := range recs {
			fn(&recs[j])
		}
		return nil
	}
	kind := h.sts[i].kind
	p.arena, p.recs, p.items = p.arena[:0], p.recs[:0], p.items[:0]
	h.frozen[i].rangeKeyGroup(kg, func(e *frozenEntry) bool {
		n := len(p.recs)
		if n == 0 || kind == kindValue || kind == kindList && e.index == 0 ||
			kind == kindMap && (!bytes.Equal(p.recs[n-1].key, e.key) || !bytes.Equal(p.recs[n-1].ns, e.ns)) {
			start := len(p.arena)
			p.arena = snapSortKey(p.arena, e.key, e.ns)
			sk := p.arena[start:len(p.arena):len(p.arena)]
			kl := len(sk) - len(e.ns) - uvarintLen(len(e.ns))
			r := heapRec{sk: sk, key: sk[kl-len(e.key) : kl], ns: sk[len(sk)-len(e.ns):], lo: len(p.items)}
			p.recs = append(p.recs, r)
			n++
		}
		it := snapItem{value: p.bytes(e.value), ts: e.ts}
		if kind == kindMap {
			it.userKey = p.bytes(e.userKey)
		}
		p.items = append(p.items, it)
		p.recs[n-1].hi = len(p.items)
		return true
	})
	if kind == kindMap {
		for _, r := range p.recs {
			slices.SortFunc(p.items[r.lo:r.hi], func(x, y snapItem) int { return bytes.Compare(x.userKey, y.userKey) })
		}
	}
	slices.SortFunc(p.recs, func(x, y heapRec) int { return bytes.Compare(x.sk, y.sk) })
	var rec snapRecord
	for _, r := range p.recs {
		rec.key, rec.ns, rec.items = r.key, r.ns, p.items[r.lo:r.hi]
		fn(&rec)
	}
	return nil
}

func uvarintLen(n int) int {
	l := 1
	for ; n >= 0x80; n >>= 7 {
		l++
	}
	return l
}

// heapSnapSink restores a stream into a HeapBackend: it collects the
// stream's records per state and, once the stream has passed its checks,
// adds them to the backend's pending states.
type heapSnapSink struct {
	b    *HeapBackend
	sts  []snapState
	recs []*heapPending // by stream state index
}

func newHeapSnapSink(b *HeapBackend) (*heapSnapSink, error) {
	if b.byName == nil {
		return nil, errors.New("state: restore into a closed heap backend")
	}
	if len(b.states) > 0 {
		return nil, fmt.Errorf("state: restore into a heap backend with %d registered states: restore before registering", len(b.states))
	}
	return &heapSnapSink{b: b}, nil
}

func (h *heapSnapSink) states(sts []snapState) error {
	h.sts = sts
	h.recs = make([]*heapPending, len(sts))
	for i, st := range sts {
		if p := h.b.pending[st.name]; p != nil {
			if err := p.st.compatible(st.kind, st.ttl); err != nil {
				return err
			}
		}
		h.recs[i] = &heapPending{st: st, byKG: make([][]snapRecord, h.b.nkg)}
	}
	return nil
}

func (h *heapSnapSink) record(kg, i int, rec *snapRecord) error {
	p := h.recs[i]
	kgi := kg - h.b.start
	p.byKG[kgi] = append(p.byKG[kgi], snapRecord{key: rec.key, ns: rec.ns, items: slices.Clone(rec.items)})
	return nil
}

func (h *heapSnapSink) finish() error {
	b := h.b
	if b.pending == nil {
		b.pending = make(map[string]*heapPending)
	}
	for _, p := range h.recs {
		old := b.pending[p.st.name]
		if old == nil {
			b.pending[p.st.name] = p
			continue
		}
		for kgi, recs := range p.byKG {
			old.byKG[kgi] = append(old.byKG[kgi], recs...)
		}
	}
	return nil
}

func (h *heapSnapSink) abort() {}
