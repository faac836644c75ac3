package state

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// CleanupExpired implements Backend. It scans the whole database in key
// order from a cursor kept between calls, wrapping around at the end,
// examines up to budget Pebble keys, and removes the expired entries of
// states whose TTL has background cleanup: value and map entries are
// deleted, lists are rewritten without their expired elements (or deleted
// when none is left). removed counts value and map entries and list
// elements. Keys of states without such TTL, and of states not registered
// (yet), count against the budget but are left alone.
func (b *PebbleBackend) CleanupExpired(budget int) (removed int, err error) {
	if budget <= 0 || b.bgTTL == 0 {
		return 0, nil
	}
	it, err := b.db.NewIter(nil)
	if err != nil {
		return 0, fmt.Errorf("state: cleanup expired: %w", err)
	}
	now := b.now()
	start := b.cursor // empty: the start of the database
	var valid bool
	if len(start) == 0 {
		valid = it.First()
	} else {
		valid = it.SeekGE(start)
	}
	wrapped := false
	for examined := 0; examined < budget; {
		if !valid {
			if it.Error() != nil || wrapped || len(start) == 0 {
				break
			}
			wrapped = true
			valid = it.First()
			continue
		}
		key := it.Key()
		if wrapped && bytes.Compare(key, start) >= 0 {
			break // back where this call started
		}
		examined++
		n, cerr := b.cleanupEntry(it, key, now)
		removed += n
		if cerr != nil {
			err = cerr
			break
		}
		valid = it.Next()
	}
	if valid {
		b.cursor = append(b.cursor[:0], it.Key()...)
	} else {
		b.cursor = b.cursor[:0]
	}
	if ierr := it.Error(); ierr != nil {
		err = errors.Join(err, fmt.Errorf("state: cleanup expired: %w", ierr))
	}
	if cerr := it.Close(); cerr != nil {
		err = errors.Join(err, fmt.Errorf("state: cleanup expired: %w", cerr))
	}
	return removed, err
}

// cleanupEntry removes what has expired at the iterator's position, key.
func (b *PebbleBackend) cleanupEntry(it *pebble.Iterator, key []byte, now int64) (int, error) {
	if len(key) < 4 {
		return 0, nil
	}
	id := binary.BigEndian.Uint16(key[2:4])
	if int(id) >= len(b.byID) || b.byID[id] == nil {
		return 0, nil
	}
	st := b.byID[id]
	if !st.ttl.Enabled() || st.ttl.DisableBackgroundCleanup {
		return 0, nil
	}
	raw, err := it.ValueAndErr()
	if err != nil {
		return 0, st.wrap("cleanup expired", err)
	}
	if st.kind != kindList {
		if len(raw) < pebbleTSLen {
			return 0, st.corrupt("entry of %d bytes has no TTL timestamp", len(raw))
		}
		if !st.ttl.Expired(pebbleReadTS(raw), now) {
			return 0, nil
		}
		if err := b.db.Delete(key, pebble.NoSync); err != nil {
			return 0, st.wrap("cleanup expired", err)
		}
		return 1, nil
	}
	expired := 0
	keep := b.valBuf[:0]
	for off := 0; off < len(raw); {
		if len(raw)-off < pebbleTSLen {
			return 0, st.corrupt("list element of %d bytes has no TTL timestamp", len(raw)-off)
		}
		n, err := st.elemLen(raw[off+pebbleTSLen:])
		if err != nil {
			return 0, st.wrap("cleanup expired: decode", err)
		}
		if n <= 0 {
			return 0, st.corrupt("list element decoded from %d bytes", n)
		}
		end := off + pebbleTSLen + n
		if st.ttl.Expired(pebbleReadTS(raw[off:]), now) {
			expired++
		} else {
			keep = append(keep, raw[off:end]...)
		}
		off = end
	}
	b.valBuf = keep
	if expired == 0 {
		return 0, nil
	}
	if len(keep) == 0 {
		err = b.db.Delete(key, pebble.NoSync)
	} else {
		err = b.db.Set(key, keep, pebble.NoSync)
	}
	if err != nil {
		return 0, st.wrap("cleanup expired", err)
	}
	return expired, nil
}
