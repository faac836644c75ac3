package state

import (
	"errors"
	"reflect"

	"github.com/cockroachdb/pebble/v2"
	"github.com/weirstream/weir/codec"
)

// pebbleMap is a map state in a PebbleBackend: one Pebble key per entry, the
// (key, namespace) prefix followed by the encoded map key, so a map is the
// key range [prefix, successor(prefix)).
type pebbleMap[K comparable, V any] struct {
	b  *PebbleBackend
	st *pebbleState
	kc codec.Codec[K]
	vc codec.Codec[V]
	ns []byte

	// bounds holds the lower and upper bound of the iterator of Range,
	// IsEmpty or Clear, which Pebble needs until the iterator closes; it is
	// reused unless an iteration is already in progress (fn of Range reading
	// the same map).
	bounds    []byte
	iterating int
}

var _ Map[int, int] = (*pebbleMap[int, int])(nil)

func newPebbleMap[K comparable, V any](b *PebbleBackend, d MapDescriptor[K, V]) (Map[K, V], error) {
	st, err := b.register(d.Name, kindMap, reflect.TypeFor[K](), reflect.TypeFor[V](), d.TTL)
	if err != nil {
		return nil, err
	}
	return &pebbleMap[K, V]{b: b, st: st, kc: d.KeyCodec, vc: d.ValueCodec}, nil
}

func (s *pebbleMap[K, V]) SetNamespace(ns []byte) { s.ns = ns }

// entryKey builds the Pebble key of map key k in the backend's scratch
// buffer.
func (s *pebbleMap[K, V]) entryKey(k K) []byte {
	b := s.b
	b.keyBuf = s.kc.Append(b.appendPrefix(b.keyBuf[:0], s.st.id, s.ns), k)
	return b.keyBuf
}

func (s *pebbleMap[K, V]) Get(k K) (V, bool, error) {
	return pebbleGetEntry(s.b, s.st, s.vc, s.entryKey(k), true)
}

func (s *pebbleMap[K, V]) Put(k K, v V) error {
	return pebblePutEntry(s.b, s.st, s.vc, s.entryKey(k), v)
}

func (s *pebbleMap[K, V]) Remove(k K) error {
	if err := s.b.db.Delete(s.entryKey(k), pebble.NoSync); err != nil {
		return s.st.wrap("remove", err)
	}
	return nil
}

func (s *pebbleMap[K, V]) Contains(k K) (bool, error) {
	_, ok, err := pebbleGetEntry[V](s.b, s.st, nil, s.entryKey(k), false)
	return ok, err
}

// iter opens an iterator over the current map's entries. done must be
// called when the iteration ends.
func (s *pebbleMap[K, V]) iter(op string) (it *pebble.Iterator, prefixLen int, done func() error, err error) {
	var buf []byte
	if s.iterating == 0 {
		buf = s.bounds[:0]
	}
	buf = s.b.appendPrefix(buf, s.st.id, s.ns)
	n := len(buf)
	buf = pebblePrefixSuccessor(buf, buf[:n])
	if s.iterating == 0 {
		s.bounds = buf
	}
	it, err = s.b.db.NewIter(&pebble.IterOptions{LowerBound: buf[:n:n], UpperBound: buf[n:]})
	if err != nil {
		return nil, 0, nil, s.st.wrap(op, err)
	}
	s.iterating++
	return it, n, func() error {
		s.iterating--
		if err := it.Close(); err != nil {
			return s.st.wrap(op, err)
		}
		return nil
	}, nil
}

// Range visits the entries in key order. With TTL it skips expired entries
// (visiting them this once with ReturnExpiredIfNotCleanedUp) and deletes
// them, and with OnReadAndWrite restamps the entries it visits.
func (s *pebbleMap[K, V]) Range(fn func(k K, v V) bool) (err error) {
	it, plen, done, err := s.iter("range")
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, done()) }()
	b, st := s.b, s.st
	ttl := st.ttl.Enabled()
	var now int64
	if ttl {
		now = b.now()
	}
	for valid := it.First(); valid; valid = it.Next() {
		ikey := it.Key()
		raw, err := it.ValueAndErr()
		if err != nil {
			return s.st.wrap("range", err)
		}
		k, err := pebbleDecodeExact(st, s.kc, ikey[plen:])
		if err != nil {
			return err
		}
		if ttl {
			if len(raw) < pebbleTSLen {
				return st.corrupt("entry of %d bytes has no TTL timestamp", len(raw))
			}
			ts := pebbleReadTS(raw)
			raw = raw[pebbleTSLen:]
			switch {
			case st.ttl.Expired(ts, now):
				// The iterator reads a snapshot, so writing under it is
				// safe; ikey stays valid until Next.
				if err := b.db.Delete(ikey, pebble.NoSync); err != nil {
					return st.wrap("delete expired", err)
				}
				if st.ttl.Visibility != ReturnExpiredIfNotCleanedUp {
					continue
				}
			case st.ttl.UpdateType == OnReadAndWrite && ts != now:
				b.valBuf = append(pebbleAppendTS(b.valBuf[:0], now), raw...)
				if err := b.db.Set(ikey, b.valBuf, pebble.NoSync); err != nil {
					return st.wrap("refresh ttl", err)
				}
			}
		}
		v, err := pebbleDecodeExact(st, s.vc, raw)
		if err != nil {
			return err
		}
		if !fn(k, v) {
			break
		}
	}
	if err := it.Error(); err != nil {
		return st.wrap("range", err)
	}
	return nil
}

// IsEmpty reports whether the map has an entry. With TTL it deletes the
// expired entries it passes; an expired entry counts only with
// ReturnExpiredIfNotCleanedUp.
func (s *pebbleMap[K, V]) IsEmpty() (empty bool, err error) {
	it, _, done, err := s.iter("is empty")
	if err != nil {
		return false, err
	}
	defer func() { err = errors.Join(err, done()) }()
	st := s.st
	for valid := it.First(); valid; valid = it.Next() {
		if !st.ttl.Enabled() {
			return false, nil
		}
		raw, err := it.ValueAndErr()
		if err != nil {
			return false, st.wrap("is empty", err)
		}
		if len(raw) < pebbleTSLen {
			return false, st.corrupt("entry of %d bytes has no TTL timestamp", len(raw))
		}
		if !st.ttl.Expired(pebbleReadTS(raw), s.b.now()) || st.ttl.Visibility == ReturnExpiredIfNotCleanedUp {
			// With ReturnExpiredIfNotCleanedUp an expired entry counts
			// until it is removed, as in the heap backend: IsEmpty does
			// not remove it, since it does not return it.
			return false, nil
		}
		if err := s.b.db.Delete(it.Key(), pebble.NoSync); err != nil {
			return false, st.wrap("delete expired", err)
		}
	}
	if err := it.Error(); err != nil {
		return false, st.wrap("is empty", err)
	}
	return true, nil
}

// Clear deletes the map's entries one by one, in one batch. A DeleteRange
// over the prefix would write a single tombstone without reading, but range
// tombstones pile up in the memtable (windowed maps are cleared once per key
// and window) and every read has to consider them until they are compacted
// away; point deletes cost in proportion to the map, which Range already
// does, and keep reads of other keys unaffected. (Flink's RocksDB map state
// clears the same way.)
func (s *pebbleMap[K, V]) Clear() (err error) {
	it, _, done, err := s.iter("clear")
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, done()) }()
	var batch *pebble.Batch
	for valid := it.First(); valid; valid = it.Next() {
		if batch == nil {
			if batch, err = s.b.db.NewBatch(); err != nil {
				return s.st.wrap("clear", err)
			}
		}
		if err := batch.Delete(it.Key(), nil); err != nil {
			_ = batch.Close()
			return s.st.wrap("clear", err)
		}
	}
	if err := it.Error(); err != nil {
		if batch != nil {
			_ = batch.Close()
		}
		return s.st.wrap("clear", err)
	}
	if batch == nil {
		return nil
	}
	if err := batch.Commit(pebble.NoSync); err != nil {
		_ = batch.Close()
		return s.st.wrap("clear", err)
	}
	if err := batch.Close(); err != nil {
		return s.st.wrap("clear", err)
	}
	return nil
}
