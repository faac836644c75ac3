package state

import (
	"io"
	"sync"

	"github.com/cockroachdb/pebble/v2"
)

// pebbleConcatMergerName is stored in the database's OPTIONS file; a database
// written with one merger cannot be opened with another, so the name is
// versioned.
const pebbleConcatMergerName = "weir.concat.v1"

// pebbleConcatMerger merges list values: the result of merging operands is their
// concatenation from oldest to newest. List elements are self-delimiting, so
// List.Add is a blind Merge of the new element's encoding, and a Set (Update)
// followed by Merges reads back as the set list followed by the added
// elements. Concatenation is associative, which Pebble requires: it may merge
// any contiguous run of operands (during compaction without the base value)
// and merge the result again later.
var pebbleConcatMerger = &pebble.Merger{
	Name: pebbleConcatMergerName,
	Merge: func(key, value []byte) (pebble.ValueMerger, error) {
		m := pebbleMergerPool.Get().(*pebbleConcatValueMerger)
		m.pooled = false
		m.add(value)
		return m, nil
	},
}

// pebbleMergerPool recycles mergers (and their buffers): Finish hands the
// merger to Pebble as the result's Closer, and Close returns it here.
// Flushes and compactions of list state merge every list key, so this saves
// a few allocations per list write.
var pebbleMergerPool = sync.Pool{New: func() any {
	m := &pebbleConcatValueMerger{}
	m.ends = m.endsBuf[:0]
	return m
}}

// pebbleMergerMaxPooled is the largest buffer a pooled merger keeps.
const pebbleMergerMaxPooled = 64 << 10

// pebbleConcatValueMerger collects the operands of one merge. Pebble hands
// them over either all newer (MergeNewer) or all older (MergeOlder) than the
// ones before; both are appended to buf in arrival order, and Finish
// reverses the order of the operands (not their bytes) when they arrived
// newest first. That keeps a merge of n operands linear in their total size,
// where prepending each older operand would be quadratic.
type pebbleConcatValueMerger struct {
	buf     []byte
	out     []byte // Finish's result when the operands are reversed
	ends    []int  // ends[i] is the end offset in buf of the i-th operand received
	endsBuf [4]int
	older   bool // operands arrived newest first
	pooled  bool // in the pool: a second Close must not put it there again
}

var (
	_ pebble.ValueMerger = (*pebbleConcatValueMerger)(nil)
	_ io.Closer          = (*pebbleConcatValueMerger)(nil)
)

func (m *pebbleConcatValueMerger) add(v []byte) {
	// The caller keeps ownership of v, so it is copied.
	m.buf = append(m.buf, v...)
	m.ends = append(m.ends, len(m.buf))
}

// MergeNewer implements pebble.ValueMerger.
func (m *pebbleConcatValueMerger) MergeNewer(value []byte) error {
	m.add(value)
	return nil
}

// MergeOlder implements pebble.ValueMerger.
func (m *pebbleConcatValueMerger) MergeOlder(value []byte) error {
	m.older = true
	m.add(value)
	return nil
}

// Finish implements pebble.ValueMerger. The result stays valid until Pebble
// closes the returned Closer, the merger itself.
func (m *pebbleConcatValueMerger) Finish(includesBase bool) ([]byte, io.Closer, error) {
	if !m.older || len(m.ends) < 2 {
		return m.buf, m, nil
	}
	out := m.out[:0]
	for i := len(m.ends) - 1; i >= 0; i-- {
		start := 0
		if i > 0 {
			start = m.ends[i-1]
		}
		out = append(out, m.buf[start:m.ends[i]]...)
	}
	m.out = out
	return out, m, nil
}

// Close returns the merger to the pool once Pebble is done with its result.
func (m *pebbleConcatValueMerger) Close() error {
	if m.pooled {
		return nil
	}
	if cap(m.buf) > pebbleMergerMaxPooled || cap(m.out) > pebbleMergerMaxPooled || cap(m.ends) > len(m.endsBuf)*64 {
		return nil // let the GC have big buffers
	}
	m.buf, m.out, m.ends, m.older, m.pooled = m.buf[:0], m.out[:0], m.ends[:0], false, true
	pebbleMergerPool.Put(m)
	return nil
}
