package state

import (
	"errors"
	"reflect"

	"github.com/cockroachdb/pebble/v2"
	"github.com/weirstream/weir/codec"
)

// pebbleList is a list state in a PebbleBackend: one Pebble value per key
// and namespace holding the concatenated element encodings (each preceded by
// its timestamp with TTL). Add and AddAll are blind merges (see
// pebbleConcatMerger), so appending never reads.
type pebbleList[T any] struct {
	b  *PebbleBackend
	st *pebbleState
	c  codec.Codec[T]
	ns []byte
}

var _ List[int] = (*pebbleList[int])(nil)

func newPebbleList[T any](b *PebbleBackend, d ListDescriptor[T]) (List[T], error) {
	st, err := b.register(d.Name, kindList, reflect.TypeFor[T](), nil, d.TTL)
	if err != nil {
		return nil, err
	}
	if st.elemLen == nil {
		c := d.Codec
		st.elemLen = func(src []byte) (int, error) {
			_, n, err := c.Decode(src)
			return n, err
		}
	}
	return &pebbleList[T]{b: b, st: st, c: d.Codec}, nil
}

func (s *pebbleList[T]) SetNamespace(ns []byte) { s.ns = ns }

// Get returns a fresh slice on every call. With TTL it drops expired
// elements from the stored list (returning them this once with
// ReturnExpiredIfNotCleanedUp) and, with OnReadAndWrite, restamps the live
// ones.
func (s *pebbleList[T]) Get() ([]T, error) {
	b, st := s.b, s.st
	key := b.stateKey(st.id, s.ns)
	raw, closer, err := b.db.Get(key)
	if err != nil {
		if errors.Is(err, pebble.ErrNotFound) {
			return nil, nil
		}
		return nil, st.wrap("get", err)
	}
	if !st.ttl.Enabled() {
		out, err := s.decodeAll(raw)
		if err = pebbleCloseGet(st, closer, err); err != nil {
			return nil, err
		}
		return out, nil
	}
	now := b.now()
	refresh := st.ttl.UpdateType == OnReadAndWrite
	returnExpired := st.ttl.Visibility == ReturnExpiredIfNotCleanedUp
	rewrite := false
	keep := b.valBuf[:0] // the stored list after this read
	var out []T
	for off := 0; off < len(raw); {
		if len(raw)-off < pebbleTSLen {
			err = st.corrupt("list element of %d bytes has no TTL timestamp", len(raw)-off)
			break
		}
		ts := pebbleReadTS(raw[off:])
		v, n, derr := s.c.Decode(raw[off+pebbleTSLen:])
		if derr != nil {
			err = st.wrap("decode", derr)
			break
		}
		if n <= 0 {
			err = st.corrupt("list element decoded from %d bytes", n)
			break
		}
		end := off + pebbleTSLen + n
		switch {
		case st.ttl.Expired(ts, now):
			rewrite = true
			if returnExpired {
				out = append(out, v)
			}
		case refresh && ts != now:
			rewrite = true
			keep = append(pebbleAppendTS(keep, now), raw[off+pebbleTSLen:end]...)
			out = append(out, v)
		default:
			keep = append(keep, raw[off:end]...)
			out = append(out, v)
		}
		off = end
	}
	b.valBuf = keep
	if err = pebbleCloseGet(st, closer, err); err != nil {
		return nil, err
	}
	if rewrite {
		if err := s.store(key, keep, "rewrite expired"); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (s *pebbleList[T]) decodeAll(raw []byte) ([]T, error) {
	var out []T
	for off := 0; off < len(raw); {
		v, n, err := s.c.Decode(raw[off:])
		if err != nil {
			return nil, s.st.wrap("decode", err)
		}
		if n <= 0 {
			return nil, s.st.corrupt("list element decoded from %d bytes", n)
		}
		out = append(out, v)
		off += n
	}
	return out, nil
}

func (s *pebbleList[T]) Add(v T) error {
	b := s.b
	b.valBuf = s.appendElem(b.valBuf[:0], v, s.stamp())
	if err := b.db.Merge(b.stateKey(s.st.id, s.ns), b.valBuf, pebble.NoSync); err != nil {
		return s.st.wrap("add", err)
	}
	return nil
}

func (s *pebbleList[T]) AddAll(vs []T) error {
	if len(vs) == 0 {
		return nil
	}
	b := s.b
	b.valBuf = s.appendElems(b.valBuf[:0], vs)
	if err := b.db.Merge(b.stateKey(s.st.id, s.ns), b.valBuf, pebble.NoSync); err != nil {
		return s.st.wrap("add", err)
	}
	return nil
}

func (s *pebbleList[T]) Update(vs []T) error {
	b := s.b
	b.valBuf = s.appendElems(b.valBuf[:0], vs)
	return s.store(b.stateKey(s.st.id, s.ns), b.valBuf, "update")
}

func (s *pebbleList[T]) Clear() error {
	return s.store(s.b.stateKey(s.st.id, s.ns), nil, "clear")
}

// store replaces the list at key with val, deleting it if val is empty.
func (s *pebbleList[T]) store(key, val []byte, op string) error {
	var err error
	if len(val) == 0 {
		err = s.b.db.Delete(key, pebble.NoSync)
	} else {
		err = s.b.db.Set(key, val, pebble.NoSync)
	}
	if err != nil {
		return s.st.wrap(op, err)
	}
	return nil
}

// stamp returns the timestamp for elements written now (unused without
// TTL).
func (s *pebbleList[T]) stamp() int64 {
	if !s.st.ttl.Enabled() {
		return 0
	}
	return s.b.now()
}

// appendElem appends the stored form of one element: its timestamp ts with
// TTL, then its encoding.
func (s *pebbleList[T]) appendElem(dst []byte, v T, ts int64) []byte {
	if s.st.ttl.Enabled() {
		dst = pebbleAppendTS(dst, ts)
	}
	return s.c.Append(dst, v)
}

func (s *pebbleList[T]) appendElems(dst []byte, vs []T) []byte {
	ts := s.stamp()
	for _, v := range vs {
		dst = s.appendElem(dst, v, ts)
	}
	return dst
}
