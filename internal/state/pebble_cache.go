package state

import (
	"context"
	"io"

	"github.com/cockroachdb/pebble/v2"
)

// cachedDB is the Pebble database of a backend behind a write-back cache of
// point writes, the way Flink's RocksDB backend profits from RocksDB's
// write buffer and block cache but without a commit per write: a keyed
// operator updates the same few hot keys again and again (a window's
// count, a running aggregate), and each Pebble Set goes through the commit
// pipeline and each Get through a merging iterator over the memtables and
// files.
//
// Writes (Set, Delete) go into the dirty map and reach Pebble in one batch
// when it holds cachedDBLimit bytes, or before anything that reads Pebble
// other than a point Get: iterators, snapshots, checkpoints, batches and
// compactions (flush). Point reads look in the dirty map, then in the
// clean generation (entries Pebble agrees with: those of the last flush,
// and what point reads found in Pebble, absences included), then in
// Pebble. Hot keys therefore stay in memory across flushes; a key
// untouched for a whole generation falls out of it.
//
// Merges of a cached key are applied in the cache (the merger concatenates);
// of any other key, they go to Pebble directly. Batches change Pebble
// without going through the dirty map: NewBatch first flushes and then
// drops the clean generation, so a point read never sees an older value
// than Pebble holds. Like the
// backend, a cachedDB is used from one goroutine.
type cachedDB struct {
	db    *pebble.DB
	dirty map[string]*cachedEntry
	clean map[string]*cachedEntry
	// size is the memory dirty holds (key and value bytes plus
	// cachedEntryOverhead per entry); at limit (cachedDBLimit) it is
	// flushed. cleanSize is clean's.
	size, cleanSize, limit int
	// err is the first failed flush: every later access returns it (the
	// backend is broken, and the writes it held are lost).
	err error
}

// cachedEntry is a cached value, or a deletion.
type cachedEntry struct {
	val     []byte
	deleted bool
}

// cachedDBLimit is how much memory of writes the cache holds before it
// writes them to Pebble in one batch, and how much the clean generation
// holds: a keyed subtask's pebble backend uses up to twice this much Go
// memory beyond Pebble's own block cache and memtables, and a snapshot's
// synchronous phase writes at most this much into Pebble (Flink's RocksDB
// backend flushes its 64 MiB write buffer there). Nexmark q18 (2M events,
// tps 1M, parallelism 1, medians of 3 alternating runs) ran at 83k events
// per core-second with 4 MiB, 117k with 32 MiB and 130k with 64 MiB:
// fewer, larger batches write a hot key once per flush, and more of the
// keys read are still cached.
const cachedDBLimit = 32 << 20

func newCachedDB(db *pebble.DB) *cachedDB {
	return &cachedDB{db: db, dirty: make(map[string]*cachedEntry), clean: make(map[string]*cachedEntry), limit: cachedDBLimit}
}

// nopCloser is the closer of a value served from the cache.
type nopCloser struct{}

func (nopCloser) Close() error { return nil }

// Get returns key's value as pebble.DB.Get does: pebble.ErrNotFound if it
// has none; the value is valid until the closer is closed.
func (c *cachedDB) Get(key []byte) ([]byte, io.Closer, error) {
	if c.err != nil {
		return nil, nil, c.err
	}
	if e, ok := c.dirty[string(key)]; ok {
		return e.get()
	}
	if e, ok := c.clean[string(key)]; ok {
		return e.get()
	}
	val, closer, err := c.db.Get(key)
	switch {
	case err == pebble.ErrNotFound:
		c.remember(key, &cachedEntry{deleted: true})
	case err == nil && len(val) <= cachedReadMax:
		e := &cachedEntry{val: append(make([]byte, 0, len(val)), val...)}
		if err := closer.Close(); err != nil {
			return nil, nil, err
		}
		c.remember(key, e)
		return e.val, nopCloser{}, nil
	}
	return val, closer, err
}

// cachedEntryOverhead is what an entry costs beyond its key and value
// bytes (map slot, entry, string and slice headers), counted against the
// limit so that it bounds memory, not only payload.
const cachedEntryOverhead = 96

// cachedReadMax is the largest value a point read keeps in the cache.
const cachedReadMax = 4 << 10

// remember adds what a point read found in Pebble (or that it found
// nothing) to the clean generation, which Pebble agrees with. Reads grow
// the clean generation too; past the limit it starts over.
func (c *cachedDB) remember(key []byte, e *cachedEntry) {
	n := len(key) + len(e.val) + cachedEntryOverhead
	if c.cleanSize += n; c.cleanSize > c.limit {
		clear(c.clean)
		c.cleanSize = n
	}
	c.clean[string(key)] = e
}

func (e *cachedEntry) get() ([]byte, io.Closer, error) {
	if e.deleted {
		return nil, nil, pebble.ErrNotFound
	}
	return e.val, nopCloser{}, nil
}

// Set stores a copy of val under key.
func (c *cachedDB) Set(key, val []byte, _ *pebble.WriteOptions) error {
	return c.put(key, val, false)
}

// Delete deletes key.
func (c *cachedDB) Delete(key []byte, _ *pebble.WriteOptions) error {
	return c.put(key, nil, true)
}

// put makes key's dirty entry val (copied) or a deletion. An entry already
// dirty is updated in place, reusing its buffer: values served by Get are
// decoded before the next access, and no other entry shares the buffer.
// So updating a dirty key allocates nothing.
func (c *cachedDB) put(key, val []byte, deleted bool) error {
	if c.err != nil {
		return c.err
	}
	e, ok := c.dirty[string(key)]
	if ok {
		c.size -= len(e.val)
	} else {
		e = &cachedEntry{}
		c.dirty[string(key)] = e
		c.size += len(key) + cachedEntryOverhead
	}
	e.val, e.deleted = append(e.val[:0], val...), deleted
	c.size += len(e.val)
	if c.size >= c.limit {
		return c.flush()
	}
	return nil
}

// flush writes the dirty entries to Pebble in one batch; they become the
// clean generation.
func (c *cachedDB) flush() error {
	if c.err != nil || len(c.dirty) == 0 {
		return c.err
	}
	batch := c.db.NewBatch()
	for k, e := range c.dirty {
		var err error
		if e.deleted {
			err = batch.Delete([]byte(k), nil)
		} else {
			err = batch.Set([]byte(k), e.val, nil)
		}
		if err != nil {
			_ = batch.Close()
			return err
		}
	}
	if err := batch.Commit(pebble.NoSync); err != nil {
		_ = batch.Close()
		c.err = err
		return err
	}
	if err := batch.Close(); err != nil {
		c.err = err
		return err
	}
	old := c.clean
	c.clean, c.dirty, c.cleanSize, c.size = c.dirty, old, c.size, 0
	clear(c.dirty)
	return nil
}

// bypass flushes and forgets the clean generation, before a change that
// does not go through the cache.
func (c *cachedDB) bypass() error {
	err := c.flush()
	clear(c.clean)
	c.cleanSize = 0
	return err
}

// Merge appends val to key's value, as the backend's merger
// (pebbleConcatMerger) does: in the cache when it knows the value, else as
// a Pebble merge (the key is in neither generation, so neither can go
// stale).
func (c *cachedDB) Merge(key, val []byte, opts *pebble.WriteOptions) error {
	if c.err != nil {
		return c.err
	}
	if e, ok := c.dirty[string(key)]; ok {
		if e.deleted {
			e.val, e.deleted = e.val[:0], false
		}
		e.val = append(e.val, val...)
		c.size += len(val)
		if c.size >= c.limit {
			return c.flush()
		}
		return nil
	}
	e, ok := c.clean[string(key)]
	if !ok {
		return c.db.Merge(key, val, opts)
	}
	var old []byte
	if !e.deleted {
		old = e.val
	}
	merged := make([]byte, 0, len(old)+len(val))
	return c.put(key, append(append(merged, old...), val...), false)
}

// NewIter flushes and returns an iterator over the database.
func (c *cachedDB) NewIter(o *pebble.IterOptions) (*pebble.Iterator, error) {
	if err := c.flush(); err != nil {
		return nil, err
	}
	return c.db.NewIter(o)
}

// NewBatch flushes and returns a batch of the database: what it writes does
// not go through the cache, so the clean generation is dropped. Between
// NewBatch and the batch's commit the caller must not read or write
// through the cache (a point read would cache what the commit changes).
func (c *cachedDB) NewBatch() (*pebble.Batch, error) {
	if err := c.bypass(); err != nil {
		return nil, err
	}
	return c.db.NewBatch(), nil
}

// NewSnapshot flushes and returns a snapshot of the database.
func (c *cachedDB) NewSnapshot() (*pebble.Snapshot, error) {
	if err := c.flush(); err != nil {
		return nil, err
	}
	return c.db.NewSnapshot(), nil
}

// Flush flushes the cache and Pebble's memtables.
func (c *cachedDB) Flush() error {
	if err := c.flush(); err != nil {
		return err
	}
	return c.db.Flush()
}

// Checkpoint flushes the cache and writes a Pebble checkpoint into dir.
func (c *cachedDB) Checkpoint(dir string) error {
	if err := c.flush(); err != nil {
		return err
	}
	return c.db.Checkpoint(dir)
}

// Compact flushes the cache and compacts [start, end) (which changes no
// value, so the clean generation stays valid).
func (c *cachedDB) Compact(ctx context.Context, start, end []byte, parallelize bool) error {
	if err := c.flush(); err != nil {
		return err
	}
	return c.db.Compact(ctx, start, end, parallelize)
}

// Close drops the cache and closes the database.
func (c *cachedDB) Close() error {
	c.dirty, c.clean = nil, nil
	return c.db.Close()
}
