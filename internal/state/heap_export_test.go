package state

import "bytes"

// Test hooks for the heap backend's snapshots, which the checkpoint code
// will use from inside the package.

// HeapSnapshot is a frozen view of a HeapBackend.
type HeapSnapshot struct{ s *heapSnapshot }

// HeapSnapshotEntry is one value of a HeapSnapshot: a value state's value,
// a list element or a map entry, encoded with the state's codecs.
type HeapSnapshotEntry struct {
	State, Kind                    string
	KeyGroup                       int
	Key, Namespace, UserKey, Value []byte
	Index                          int // list element position
	TS                             int64
}

// SnapshotHeap freezes b's state.
func SnapshotHeap(b *HeapBackend) *HeapSnapshot { return &HeapSnapshot{b.snapshot()} }

// Release releases the snapshot; it may be called from any goroutine.
func (s *HeapSnapshot) Release() { s.s.release() }

// Entries returns the number of (key, namespace) entries of the state
// registered as name in key group kg.
func (s *HeapSnapshot) Entries(name string, kg int) int {
	for _, st := range s.s.states {
		if st.name() == name {
			return st.entries(kg)
		}
	}
	return 0
}

// Range calls fn for every value of every state and key group, with
// slices of its own.
func (s *HeapSnapshot) Range(fn func(e HeapSnapshotEntry)) {
	for _, st := range s.s.states {
		for kg := s.s.start; kg <= s.s.end; kg++ {
			st.rangeKeyGroup(kg, func(e *frozenEntry) bool {
				fn(HeapSnapshotEntry{
					State: st.name(), Kind: st.kind().String(), KeyGroup: kg,
					Key: bytes.Clone(e.key), Namespace: bytes.Clone(e.ns), UserKey: bytes.Clone(e.userKey),
					Value: bytes.Clone(e.value), Index: e.index, TS: e.ts,
				})
				return true
			})
		}
	}
}
