package state

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/weirstream/weir/codec"
)

// pebbleRestoreBatch is the size at which Restore commits its Pebble batch
// and starts another.
const pebbleRestoreBatch = 16 << 20

func pebbleSnapKind(k stateKind) stateKind {
	switch k {
	case kindValue:
		return kindValue
	case kindList:
		return kindList
	case kindMap:
		return kindMap
	}
	panic(fmt.Sprintf("state: unknown pebble kind %d", k))
}

func snapPebbleKind(k stateKind) stateKind {
	switch k {
	case kindValue:
		return kindValue
	case kindList:
		return kindList
	case kindMap:
		return kindMap
	}
	panic(fmt.Sprintf("state: unknown snapshot kind %d", k))
}

// adoptRestored completes the registration of a restored state st with a
// descriptor's kind, types and TTL.
func (b *PebbleBackend) adoptRestored(st *pebbleState, kind stateKind, typ, typ2 reflect.Type, ttl TTLConfig) (*pebbleState, error) {
	rs := snapState{name: st.name, kind: pebbleSnapKind(st.kind), ttl: st.restoredTTL}
	if err := rs.compatible(pebbleSnapKind(kind), ttl.Enabled()); err != nil {
		return nil, err
	}
	if kind == kindList && !st.nativeList {
		if err := b.convertRestoredList(st); err != nil {
			return nil, err
		}
	}
	st.restored, st.nativeList = false, false
	st.typ, st.typ2, st.ttl = typ, typ2, ttl
	if ttl.Enabled() && !ttl.DisableBackgroundCleanup {
		b.bgTTL++
	}
	return st, nil
}

// pebbleSnap is a Snapshot of a PebbleBackend: a Pebble snapshot and a copy
// of the registry as it was, so that registrations after TakeSnapshot do
// not race with WriteStream.
type pebbleSnap struct {
	snap       *pebble.Snapshot
	start, end int
	sts        []snapState // sorted by name
	ids        []uint16    // by index in sts
	// elemLen splits a list's stored value into elements (nil for other
	// kinds, and for lists restored but not registered yet).
	elemLen []func(src []byte) (int, error)
	// restoredList marks lists restored and not registered yet, which
	// are stored as their stream payload (see pebbleSnapSink).
	restoredList []bool
	released     atomic.Bool
	once         sync.Once
}

var _ Snapshot = (*pebbleSnap)(nil)

func takePebbleSnapshot(b *PebbleBackend) (*pebbleSnap, error) {
	if b.closed {
		return nil, errors.New("state: snapshot of a closed pebble backend")
	}
	for _, st := range b.byID[1:] {
		if st.restored && st.nativeList {
			// Its elements' boundaries are known only to its codec.
			return nil, fmt.Errorf("state: list state %q, restored from a native snapshot, must be registered before a canonical snapshot", st.name)
		}
	}
	snap, err := b.db.NewSnapshot()
	if err != nil {
		return nil, fmt.Errorf("state: snapshot: %w", err)
	}
	reg := slices.Clone(b.byID[1:])
	slices.SortFunc(reg, func(x, y *pebbleState) int { return strings.Compare(x.name, y.name) })
	s := &pebbleSnap{
		snap:    snap,
		start:   b.opts.KeyGroupStart,
		end:     b.opts.KeyGroupEnd,
		sts:     make([]snapState, len(reg)),
		ids:     make([]uint16, len(reg)),
		elemLen: make([]func([]byte) (int, error), len(reg)),

		restoredList: make([]bool, len(reg)),
	}
	for i, st := range reg {
		ttl := st.ttl.Enabled()
		if st.restored {
			ttl = st.restoredTTL
		}
		s.sts[i] = snapState{name: st.name, kind: pebbleSnapKind(st.kind), ttl: ttl}
		s.ids[i] = st.id
		s.elemLen[i] = st.elemLen
		s.restoredList[i] = st.restored && st.kind == kindList
	}
	return s, nil
}

// WriteStream implements Snapshot. It reads the Pebble snapshot with one
// iterator, bounded in turn to each (key group, state id).
func (s *pebbleSnap) WriteStream(w io.Writer) (KeyGroupOffsets, error) {
	if s.released.Load() {
		return KeyGroupOffsets{}, errors.New("state: WriteStream of a released snapshot")
	}
	it, err := s.snap.NewIter(nil)
	if err != nil {
		return KeyGroupOffsets{}, fmt.Errorf("state: snapshot iterator: %w", err)
	}
	src := &pebbleSnapSource{s: s, it: it}
	offs, err := writeSnapshot(w, src)
	if cerr := it.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("state: snapshot iterator: %w", cerr)
	}
	return offs, err
}

// Release implements Snapshot: it closes the Pebble snapshot.
func (s *pebbleSnap) Release() {
	s.once.Do(func() {
		s.released.Store(true)
		_ = s.snap.Close() // never fails
	})
}

// pebbleSnapSource reads a pebbleSnap for writeSnapshot.
type pebbleSnapSource struct {
	s      *pebbleSnap
	it     *pebble.Iterator
	bounds []byte
	rec    snapRecord
}

func (p *pebbleSnapSource) keyGroups() (int, int) { return p.s.start, p.s.end }
func (p *pebbleSnapSource) states() []snapState   { return p.s.sts }

func pebbleSnapCorrupt(name, format string, args ...any) error {
	return fmt.Errorf("state %q: %w: "+format, append([]any{name, codec.ErrCorrupt}, args...)...)
}

// splitPebbleKey splits a Pebble key after its key group and state id into
// the key, the namespace and the rest (a map entry's encoded map key).
func splitPebbleKey(k []byte) (key, ns, rest []byte, ok bool) {
	d := snapDecoder{b: k}
	key = d.bytes()
	ns = d.bytes()
	return key, ns, d.b, d.err == nil
}

func (p *pebbleSnapSource) records(kg, i int, fn func(rec *snapRecord)) error {
	s, it := p.s, p.it
	st := s.sts[i]
	id := s.ids[i]
	b := binary.BigEndian.AppendUint16(p.bounds[:0], uint16(kg))
	b = binary.BigEndian.AppendUint16(b, id)
	var upper []byte
	if next := uint32(kg)<<16 | uint32(id); next != 1<<32-1 {
		upper = binary.BigEndian.AppendUint32(b, next+1)[4:]
	}
	p.bounds = b
	it.SetBounds(b[:4], upper) // SetBounds copies the bounds
	rec := &p.rec
	pending := false // rec holds a map entry not passed to fn yet
	flush := func() {
		if pending {
			fn(rec)
			pending = false
		}
	}
	for valid := it.First(); valid; valid = it.Next() {
		key, ns, rest, ok := splitPebbleKey(it.Key()[4:])
		if !ok || st.kind != kindMap && len(rest) > 0 {
			return pebbleSnapCorrupt(st.name, "malformed key %x", it.Key())
		}
		raw, err := it.ValueAndErr()
		if err != nil {
			return fmt.Errorf("state %q: %w", st.name, err)
		}
		switch st.kind {
		case kindValue, kindMap:
			var ts int64
			if st.ttl {
				if len(raw) < pebbleTSLen {
					return pebbleSnapCorrupt(st.name, "entry of %d bytes has no TTL timestamp", len(raw))
				}
				ts, raw = pebbleReadTS(raw), raw[pebbleTSLen:]
			}
			if st.kind == kindValue {
				rec.key, rec.ns = key, ns
				rec.items = append(rec.items[:0], snapItem{value: raw, ts: ts})
				fn(rec)
				continue
			}
			if !pending || !bytes.Equal(rec.key, key) || !bytes.Equal(rec.ns, ns) {
				flush()
				rec.key, rec.ns, rec.items = bytes.Clone(key), bytes.Clone(ns), rec.items[:0]
				pending = true
			}
			rec.items = append(rec.items, snapItem{userKey: bytes.Clone(rest), value: bytes.Clone(raw), ts: ts})
		case kindList:
			if err := p.listRecord(i, key, ns, raw); err != nil {
				return err
			}
			fn(rec)
		}
	}
	flush()
	if err := it.Error(); err != nil {
		return fmt.Errorf("state %q: %w", st.name, err)
	}
	return nil
}

// listRecord fills p.rec with a list's elements, split from its stored
// value raw.
func (p *pebbleSnapSource) listRecord(i int, key, ns, raw []byte) error {
	st := p.s.sts[i]
	rec := &p.rec
	rec.key, rec.ns, rec.items = key, ns, rec.items[:0]
	if p.s.restoredList[i] {
		return snapDecodeListPayload(st, raw, func(elem []byte, ts int64) {
			rec.items = append(rec.items, snapItem{value: elem, ts: ts})
		})
	}
	elemLen := p.s.elemLen[i]
	for off := 0; off < len(raw); {
		var ts int64
		if st.ttl {
			if len(raw)-off < pebbleTSLen {
				return pebbleSnapCorrupt(st.name, "list element of %d bytes has no TTL timestamp", len(raw)-off)
			}
			ts = pebbleReadTS(raw[off:])
			off += pebbleTSLen
		}
		n, err := elemLen(raw[off:])
		if err != nil {
			return fmt.Errorf("state %q: decode: %w", st.name, err)
		}
		if n <= 0 || n > len(raw)-off {
			return pebbleSnapCorrupt(st.name, "list element decoded from %d bytes", n)
		}
		rec.items = append(rec.items, snapItem{value: raw[off : off+n], ts: ts})
		off += n
	}
	return nil
}

// pebbleSnapSink restores a stream into a PebbleBackend: it assigns ids to
// the stream's states (or finds those of an earlier Restore) and writes
// the entries in their stored form, in batches.
type pebbleSnapSink struct {
	b        *PebbleBackend
	sts      []snapState
	ids      []uint16
	batch    *pebble.Batch
	key, val []byte
}

func newPebbleSnapSink(b *PebbleBackend) (*pebbleSnapSink, error) {
	if b.closed {
		return nil, errors.New("state: restore into a closed pebble backend")
	}
	for _, st := range b.byID[1:] {
		if !st.restored {
			return nil, fmt.Errorf("state: restore into a pebble backend with registered state %q: restore before registering", st.name)
		}
	}
	return &pebbleSnapSink{b: b}, nil
}

func (p *pebbleSnapSink) states(sts []snapState) error {
	b := p.b
	p.sts = sts
	p.ids = make([]uint16, len(sts))
	for i, rs := range sts {
		if st, ok := b.states[rs.name]; ok {
			old := snapState{name: st.name, kind: pebbleSnapKind(st.kind), ttl: st.restoredTTL}
			if err := old.compatible(rs.kind, rs.ttl); err != nil {
				return err
			}
			p.ids[i] = st.id
			continue
		}
		if len(b.byID) > pebbleMaxStates {
			return fmt.Errorf("state %q: more than %d states in one backend", rs.name, pebbleMaxStates)
		}
		st := &pebbleState{name: rs.name, id: uint16(len(b.byID)), kind: snapPebbleKind(rs.kind), restored: true, restoredTTL: rs.ttl}
		b.states[rs.name] = st
		b.byID = append(b.byID, st)
		p.ids[i] = st.id
	}
	var err error
	p.batch, err = b.db.NewBatch()
	return err
}

func (p *pebbleSnapSink) record(kg, i int, rec *snapRecord) error {
	st := p.sts[i]
	k := binary.BigEndian.AppendUint16(p.key[:0], uint16(kg))
	k = binary.BigEndian.AppendUint16(k, p.ids[i])
	k = snapSortKey(k, rec.key, rec.ns)
	p.key = k
	switch st.kind {
	case kindValue:
		it := rec.items[0]
		if err := p.batch.Set(k, p.stored(p.val[:0], st.ttl, it), nil); err != nil {
			return fmt.Errorf("state %q: restore: %w", st.name, err)
		}
	case kindList:
		// Without the codec the elements' boundaries would be lost in
		// the stored form (a concatenation), so a restored list keeps
		// its stream payload until registration converts it; unless a
		// native snapshot restored it in the stored form already
		// (RestoreFromNative), which needs no codec either.
		if p.b.byID[p.ids[i]].nativeList {
			v := p.val[:0]
			for _, it := range rec.items {
				if st.ttl {
					v = pebbleAppendTS(v, it.ts)
				}
				v = append(v, it.value...)
			}
			p.val = v
			if err := p.batch.Set(k, v, nil); err != nil {
				return fmt.Errorf("state %q: restore: %w", st.name, err)
			}
			break
		}
		v := binary.AppendUvarint(p.val[:0], uint64(len(rec.items)))
		for _, it := range rec.items {
			v = snapAppendBytes(v, it.value)
			if st.ttl {
				v = binary.LittleEndian.AppendUint64(v, uint64(it.ts))
			}
		}
		p.val = v
		if err := p.batch.Set(k, v, nil); err != nil {
			return fmt.Errorf("state %q: restore: %w", st.name, err)
		}
	case kindMap:
		n := len(k)
		for _, it := range rec.items {
			p.key = append(p.key[:n], it.userKey...)
			if err := p.batch.Set(p.key, p.stored(p.val[:0], st.ttl, it), nil); err != nil {
				return fmt.Errorf("state %q: restore: %w", st.name, err)
			}
		}
	}
	if p.batch.Len() >= pebbleRestoreBatch {
		return p.commit()
	}
	return nil
}

// stored appends the stored form of an item: its timestamp if the state
// has TTL, then its bytes. The result becomes p.val, reused by the next
// record.
func (p *pebbleSnapSink) stored(dst []byte, ttl bool, it snapItem) []byte {
	if ttl {
		dst = pebbleAppendTS(dst, it.ts)
	}
	dst = append(dst, it.value...)
	p.val = dst
	return dst
}

func (p *pebbleSnapSink) commit() error {
	if err := p.finish(); err != nil {
		return err
	}
	var err error
	p.batch, err = p.b.db.NewBatch()
	return err
}

func (p *pebbleSnapSink) finish() error {
	if p.batch == nil {
		return nil
	}
	err := p.batch.Commit(pebble.NoSync)
	if cerr := p.batch.Close(); err == nil {
		err = cerr
	}
	p.batch = nil
	if err != nil {
		return fmt.Errorf("state: restore: %w", err)
	}
	return nil
}

func (p *pebbleSnapSink) abort() {
	if p.batch != nil {
		_ = p.batch.Close()
		p.batch = nil
	}
}

// snapDecodeListPayload calls fn with each element of a list stored as its
// stream payload: uvarint n, n × (element bytes [ts]).
func snapDecodeListPayload(st snapState, raw []byte, fn func(elem []byte, ts int64)) error {
	d := snapDecoder{b: raw}
	n := d.uvarint()
	for j := uint64(0); j < n && d.err == nil; j++ {
		elem := d.bytes()
		var ts int64
		if st.ttl {
			ts = d.int64()
		}
		if d.err == nil {
			fn(elem, ts)
		}
	}
	if d.err != nil || len(d.b) != 0 {
		return pebbleSnapCorrupt(st.name, "restored list payload of %d bytes", len(raw))
	}
	return nil
}

// convertRestoredList rewrites the entries of a restored list state, stored
// as their stream payload, in the stored form of lists (the concatenation
// of the elements, each preceded by its timestamp with TTL), as the state
// is registered. It costs one pass over the state's entries.
func (b *PebbleBackend) convertRestoredList(st *pebbleState) (err error) {
	rs := snapState{name: st.name, kind: kindList, ttl: st.restoredTTL}
	it, err := b.db.NewIter(nil)
	if err != nil {
		return fmt.Errorf("state %q: convert restored list: %w", st.name, err)
	}
	batch, err := b.db.NewBatch()
	if err != nil {
		_ = it.Close()
		return fmt.Errorf("state %q: convert restored list: %w", st.name, err)
	}
	defer func() {
		err = errors.Join(err, it.Close())
		if batch != nil {
			err = errors.Join(err, batch.Close())
		}
		if err != nil {
			err = fmt.Errorf("state %q: convert restored list: %w", st.name, err)
		}
	}()
	var lower, upper [4]byte
	var val []byte
	for kg := b.opts.KeyGroupStart; kg <= b.opts.KeyGroupEnd; kg++ {
		binary.BigEndian.PutUint16(lower[:], uint16(kg))
		binary.BigEndian.PutUint16(lower[2:], st.id)
		var ub []byte // nil: no upper bound, past the largest possible prefix
		if l := binary.BigEndian.Uint32(lower[:]); l != 1<<32-1 {
			ub = binary.BigEndian.AppendUint32(upper[:0], l+1)
		}
		it.SetBounds(lower[:], ub)
		for valid := it.First(); valid; valid = it.Next() {
			raw, err := it.ValueAndErr()
			if err != nil {
				return err
			}
			val = val[:0]
			if err := snapDecodeListPayload(rs, raw, func(elem []byte, ts int64) {
				if rs.ttl {
					val = pebbleAppendTS(val, ts)
				}
				val = append(val, elem...)
			}); err != nil {
				return err
			}
			if err := batch.Set(it.Key(), val, nil); err != nil {
				return err
			}
			if batch.Len() >= pebbleRestoreBatch {
				if err := batch.Commit(pebble.NoSync); err != nil {
					return err
				}
				if err := batch.Close(); err != nil {
					batch = nil
					return err
				}
				if batch, err = b.db.NewBatch(); err != nil {
					return err
				}
			}
		}
		if err := it.Error(); err != nil {
			return err
		}
	}
	err = batch.Commit(pebble.NoSync)
	return err
}
