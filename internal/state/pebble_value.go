package state

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"reflect"

	"github.com/cockroachdb/pebble/v2"
	"github.com/weirstream/weir/codec"
)

// pebbleValue is a value state in a PebbleBackend. Handles registered under
// the same name share the registration (state id) and differ only in their
// namespace.
type pebbleValue[T any] struct {
	b  *PebbleBackend
	st *pebbleState
	c  codec.Codec[T]
	ns []byte
}

var _ Value[int] = (*pebbleValue[int])(nil)

func newPebbleValue[T any](b *PebbleBackend, d ValueDescriptor[T]) (Value[T], error) {
	st, err := b.register(d.Name, kindValue, reflect.TypeFor[T](), nil, d.TTL)
	if err != nil {
		return nil, err
	}
	return &pebbleValue[T]{b: b, st: st, c: d.Codec}, nil
}

func (s *pebbleValue[T]) SetNamespace(ns []byte) { s.ns = ns }

func (s *pebbleValue[T]) Get() (T, bool, error) {
	return pebbleGetEntry(s.b, s.st, s.c, s.b.stateKey(s.st.id, s.ns), true)
}

func (s *pebbleValue[T]) Update(v T) error {
	return pebblePutEntry(s.b, s.st, s.c, s.b.stateKey(s.st.id, s.ns), v)
}

func (s *pebbleValue[T]) Clear() error {
	if err := s.b.db.Delete(s.b.stateKey(s.st.id, s.ns), pebble.NoSync); err != nil {
		return s.st.wrap("clear", err)
	}
	return nil
}

// The entry helpers below serve value states and map entries, which store
// one encoded value per Pebble key, preceded by its timestamp with TTL.

// pebbleTSLen is the length of an entry's or list element's TTL timestamp.
const pebbleTSLen = 8

func pebbleAppendTS(dst []byte, ts int64) []byte {
	return binary.LittleEndian.AppendUint64(dst, uint64(ts))
}

func pebbleReadTS(src []byte) int64 { return int64(binary.LittleEndian.Uint64(src)) }

// pebbleGetEntry reads the entry at key, applying TTL: an expired entry is deleted
// and returned only with ReturnExpiredIfNotCleanedUp; with OnReadAndWrite a
// live entry's timestamp is refreshed. decode false skips decoding (and
// returns the zero value), for Contains. key may be the backend's scratch
// buffer.
func pebbleGetEntry[T any](b *PebbleBackend, st *pebbleState, c codec.Codec[T], key []byte, decode bool) (v T, ok bool, err error) {
	raw, closer, err := b.db.Get(key)
	if err != nil {
		if errors.Is(err, pebble.ErrNotFound) {
			return v, false, nil
		}
		return v, false, st.wrap("get", err)
	}
	// raw is valid until closer is closed; decoding copies what it keeps.
	if !st.ttl.Enabled() {
		if decode {
			v, err = pebbleDecodeExact(st, c, raw)
		}
		if err = pebbleCloseGet(st, closer, err); err != nil {
			return pebbleZero[T](), false, err
		}
		return v, true, nil
	}
	if len(raw) < pebbleTSLen {
		_ = closer.Close()
		return v, false, st.corrupt("entry of %d bytes has no TTL timestamp", len(raw))
	}
	ts, now := pebbleReadTS(raw), b.now()
	if st.ttl.Expired(ts, now) {
		if st.ttl.Visibility == ReturnExpiredIfNotCleanedUp {
			if decode {
				v, err = pebbleDecodeExact(st, c, raw[pebbleTSLen:])
			}
			ok = true
		}
		if err = pebbleCloseGet(st, closer, err); err != nil {
			return pebbleZero[T](), false, err
		}
		if err := b.db.Delete(key, pebble.NoSync); err != nil {
			return pebbleZero[T](), false, st.wrap("delete expired", err)
		}
		return v, ok, nil
	}
	if decode {
		v, err = pebbleDecodeExact(st, c, raw[pebbleTSLen:])
	}
	refresh := err == nil && st.ttl.UpdateType == OnReadAndWrite && ts != now
	if refresh {
		b.valBuf = append(pebbleAppendTS(b.valBuf[:0], now), raw[pebbleTSLen:]...)
	}
	if err = pebbleCloseGet(st, closer, err); err != nil {
		return pebbleZero[T](), false, err
	}
	if refresh {
		if err := b.db.Set(key, b.valBuf, pebble.NoSync); err != nil {
			return pebbleZero[T](), false, st.wrap("refresh ttl", err)
		}
	}
	return v, true, nil
}

// pebblePutEntry writes v at key, stamped with the current time with TTL.
func pebblePutEntry[T any](b *PebbleBackend, st *pebbleState, c codec.Codec[T], key []byte, v T) error {
	val := b.valBuf[:0]
	if st.ttl.Enabled() {
		val = pebbleAppendTS(val, b.now())
	}
	val = c.Append(val, v)
	b.valBuf = val
	if err := b.db.Set(key, val, pebble.NoSync); err != nil {
		return st.wrap("put", err)
	}
	return nil
}

// pebbleCloseGet closes the closer of a Pebble Get and returns err, or the close
// error if err is nil.
func pebbleCloseGet(st *pebbleState, closer io.Closer, err error) error {
	if cerr := closer.Close(); cerr != nil && err == nil {
		return st.wrap("get", cerr)
	}
	return err
}

// pebbleDecodeExact decodes one value that must fill src.
func pebbleDecodeExact[T any](st *pebbleState, c codec.Codec[T], src []byte) (T, error) {
	v, n, err := c.Decode(src)
	if err != nil {
		return v, st.wrap("decode", err)
	}
	if n != len(src) {
		return pebbleZero[T](), st.corrupt("%d bytes after the encoded value", len(src)-n)
	}
	return v, nil
}

func pebbleZero[T any]() (z T) { return z }

// wrap adds the state and the operation to a storage or codec error.
func (st *pebbleState) wrap(op string, err error) error {
	return fmt.Errorf("state %q: %s: %w", st.name, op, err)
}

// corrupt returns an error wrapping codec.ErrCorrupt for stored bytes that
// do not have the state's format.
func (st *pebbleState) corrupt(format string, args ...any) error {
	return fmt.Errorf("state %q: %w: "+format, append([]any{st.name, codec.ErrCorrupt}, args...)...)
}
