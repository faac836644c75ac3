package state

// cleanupCursor is where CleanupExpired resumes: a state, one of its
// tables, and the keys of that table's map that are still to be examined.
//
// Go maps cannot be iterated from a saved position, so on entering a
// (state, key group) the cursor copies the map's keys (string headers; the
// bytes are shared) and then examines them one lookup at a time across
// calls. Keys removed in the meantime are skipped by the lookup; keys added
// in the meantime are examined on the next pass.
type cleanupCursor struct {
	state int
	table int
	keys  []string
	pos   int
}

// CleanupExpired removes expired entries of states with TTL, except those
// with DisableBackgroundCleanup.
//
// budget counts entries examined: each (key, namespace) entry of a state
// counts one, whatever its kind; a list's or map's expired elements are
// all removed when its entry is examined. The cursor visits the states
// with background cleanup in registration order and, within a state, its
// maps in key-group order (default namespace first), wrapping around. A
// call stops when it has examined budget entries or has gone once around,
// so it examines no entry twice. Besides the at most budget lookups,
// entering a map costs one pass over it to copy its keys (once per cleanup
// pass).
//
// removed counts values, list elements and map entries removed.
func (b *HeapBackend) CleanupExpired(budget int) (removed int, err error) {
	if b.bgCleanup == 0 || budget <= 0 {
		return 0, nil
	}
	c := &b.cleanup
	// Enter each map at most once: if the call starts in the middle of
	// one, it must not enter that one again.
	enter := b.bgCleanup * b.numTables()
	if c.pos < len(c.keys) {
		enter--
	}
	var now int64
	haveNow := false
	for budget > 0 {
		if c.pos == len(c.keys) {
			if enter == 0 {
				break
			}
			b.advanceCleanup()
			enter--
			continue
		}
		k := c.keys[c.pos]
		c.keys[c.pos] = "" // let the key go if it is removed meanwhile
		c.pos++
		budget--
		if !haveNow {
			now, haveNow = b.now(), true
		}
		removed += b.states[c.state].cleanupKey(c.table, k, now)
	}
	return removed, nil
}

// backgroundCleanup reports whether CleanupExpired cleans up st.
func backgroundCleanup(st heapState) bool {
	ttl := st.ttlConfig()
	return ttl.Enabled() && !ttl.DisableBackgroundCleanup
}

// advanceCleanup moves the cursor to the next map of a state with
// background cleanup (there is one) and loads its keys.
func (b *HeapBackend) advanceCleanup() {
	c := &b.cleanup
	c.table++
	if c.table >= b.numTables() || !backgroundCleanup(b.states[c.state]) {
		c.table = 0
		for {
			c.state = (c.state + 1) % len(b.states)
			if backgroundCleanup(b.states[c.state]) {
				break
			}
		}
	}
	clear(c.keys[c.pos:])
	c.keys, c.pos = c.keys[:0], 0
	c.keys = b.states[c.state].appendKeys(c.table, c.keys)
}
