package state

// cleanupCursor is where CleanupExpired resumes: a state, a key group of
// the backend's range (as an index from its start), and the keys of that
// state's map for that key group that are still to be examined.
//
// Go maps cannot be iterated from a saved position, so on entering a
// (state, key group) the cursor copies the map's keys (string headers; the
// bytes are shared) and then examines them one lookup at a time across
// calls. Keys removed in the meantime are skipped by the lookup; keys added
// in the meantime are examined on the next pass.
type cleanupCursor struct {
	state int
	kg    int
	keys  []string
	pos   int
}

// CleanupExpired removes expired entries of states with TTL, except those
// with DisableBackgroundCleanup.
//
// budget counts entries examined: each (key, namespace) entry of a state
// counts one, whatever its kind; a list's or map's expired elements are
// all removed when its entry is examined. The cursor visits states in
// registration order and, within a state, key groups in order, wrapping
// around. A call stops when it has examined budget entries or has gone
// once around all (state, key group) pairs, so it examines no entry twice.
// Besides the at most budget lookups, entering a (state, key group) costs
// one pass over that map to copy its keys (once per cleanup pass), and
// passing a state without background cleanup costs a step per key group.
//
// removed counts values, list elements and map entries removed.
func (b *HeapBackend) CleanupExpired(budget int) (removed int, err error) {
	if len(b.states) == 0 || budget <= 0 {
		return 0, nil
	}
	c := &b.cleanup
	// Enter each (state, key group) at most once: if the call starts in
	// the middle of one, it must not enter that one again.
	enter := len(b.states) * b.numKeyGroups()
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
		removed += b.states[c.state].cleanupKey(c.kg, k, now)
	}
	return removed, nil
}

// advanceCleanup moves the cursor to the next (state, key group) and loads
// its keys, or none if the state has no background cleanup.
func (b *HeapBackend) advanceCleanup() {
	c := &b.cleanup
	c.kg++
	if c.kg >= b.numKeyGroups() {
		c.kg = 0
		c.state = (c.state + 1) % len(b.states)
	}
	if c.state >= len(b.states) {
		c.state = 0
	}
	clear(c.keys[c.pos:])
	c.keys, c.pos = c.keys[:0], 0
	st := b.states[c.state]
	if ttl := st.ttlConfig(); ttl.Enabled() && !ttl.DisableBackgroundCleanup {
		c.keys = st.appendKeys(c.kg, c.keys)
	}
}
