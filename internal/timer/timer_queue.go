package timer

import (
	"bytes"
	"encoding/binary"
)

// entry is a stored timer and its places in its queue.
type entry struct {
	t       Timer
	hash    uint64 // hash of the identity, the key of queue.byHash
	next    *entry // next entry with the same hash
	index   int    // position in queue.heap
	kgIndex int    // position in queue.byKeyGroup[t.KeyGroup]
}

// slot is a heap element. The timestamp and the first 8 bytes of the key
// are kept beside the pointer so that sifting compares contiguous memory
// and follows the pointer only when both tie: many timers share a
// timestamp (every key's window ends at once).
type slot struct {
	ts     int64
	prefix uint64
	e      *entry
}

// keyPrefix is the first 8 bytes of key as a big-endian number, zero
// padded: a smaller prefix means a smaller key, equal prefixes decide
// nothing.
func keyPrefix(key []byte) uint64 {
	if len(key) >= 8 {
		return binary.BigEndian.Uint64(key)
	}
	var b [8]byte
	copy(b[:], key)
	return binary.BigEndian.Uint64(b[:])
}

// arity is the fan-out of the heap. A 4-ary heap has half the depth of a
// binary one, and the children of a node share a cache line.
const arity = 4

// queue is the timers of one time domain: a 4-ary min-heap in Compare order
// whose entries know their position, a hash index on the identity with
// chained collisions, and a list per key group whose entries also know their
// position. Every entry is in all three, so each can be removed in O(log n).
type queue struct {
	heap       []slot
	byHash     map[uint64]*entry
	byKeyGroup [][]*entry // indexed by key group, grown on demand
}

func newQueue() queue {
	return queue{byHash: make(map[uint64]*entry)}
}

// keyGroup returns the entries of key group kg.
func (q *queue) keyGroup(kg int) []*entry {
	if kg < len(q.byKeyGroup) {
		return q.byKeyGroup[kg]
	}
	return nil
}

// find returns the entry with t's identity and hash h, or nil.
func (q *queue) find(h uint64, t Timer) *entry {
	for e := q.byHash[h]; e != nil; e = e.next {
		if e.t.Timestamp == t.Timestamp && bytes.Equal(e.t.Key, t.Key) && bytes.Equal(e.t.Namespace, t.Namespace) {
			return e
		}
	}
	return nil
}

func (q *queue) push(e *entry) {
	e.next = q.byHash[e.hash]
	q.byHash[e.hash] = e
	g := e.t.KeyGroup
	if g >= len(q.byKeyGroup) {
		q.byKeyGroup = append(q.byKeyGroup, make([][]*entry, g+1-len(q.byKeyGroup))...)
	}
	e.kgIndex = len(q.byKeyGroup[g])
	q.byKeyGroup[g] = append(q.byKeyGroup[g], e)
	e.index = len(q.heap)
	q.heap = append(q.heap, slot{e.t.Timestamp, keyPrefix(e.t.Key), e})
	q.up(e.index)
}

func (q *queue) remove(e *entry) {
	if head := q.byHash[e.hash]; head == e {
		if e.next == nil {
			delete(q.byHash, e.hash)
		} else {
			q.byHash[e.hash] = e.next
		}
	} else {
		for p := head; ; p = p.next {
			if p.next == e {
				p.next = e.next
				break
			}
		}
	}
	e.next = nil

	kg := q.byKeyGroup[e.t.KeyGroup]
	last := len(kg) - 1
	kg[e.kgIndex] = kg[last]
	kg[e.kgIndex].kgIndex = e.kgIndex
	kg[last] = nil
	if last == 0 {
		q.byKeyGroup[e.t.KeyGroup] = nil // release an emptied group's array
	} else {
		q.byKeyGroup[e.t.KeyGroup] = kg[:last]
	}

	i := e.index
	last = len(q.heap) - 1
	if i != last {
		q.heap[i] = q.heap[last]
		q.heap[i].e.index = i
	}
	q.heap[last] = slot{}
	q.heap = q.heap[:last]
	if i != last {
		q.down(i)
		q.up(i)
	}
	e.index, e.kgIndex = -1, -1
}

// fireUntil removes and fires due timers in order until the earliest one is
// after limit or fire fails.
func (q *queue) fireUntil(limit int64, fire func(Timer) error) error {
	for len(q.heap) > 0 && q.heap[0].ts <= limit {
		e := q.heap[0].e
		q.remove(e)
		if err := fire(e.t); err != nil {
			return err
		}
	}
	return nil
}

func less(a, b slot) bool {
	if a.ts != b.ts {
		return a.ts < b.ts
	}
	if a.prefix != b.prefix {
		return a.prefix < b.prefix
	}
	return Compare(a.e.t, b.e.t) < 0
}

// up moves the slot at i towards the root, shifting parents down into the
// hole rather than swapping.
func (q *queue) up(i int) {
	s := q.heap[i]
	for i > 0 {
		p := (i - 1) / arity
		if !less(s, q.heap[p]) {
			break
		}
		q.heap[i] = q.heap[p]
		q.heap[i].e.index = i
		i = p
	}
	q.heap[i] = s
	s.e.index = i
}

// down moves the slot at i towards the leaves.
func (q *queue) down(i int) {
	n := len(q.heap)
	s := q.heap[i]
	for {
		c := arity*i + 1
		if c >= n {
			break
		}
		m := c
		for j := c + 1; j < c+arity && j < n; j++ {
			if less(q.heap[j], q.heap[m]) {
				m = j
			}
		}
		if !less(q.heap[m], s) {
			break
		}
		q.heap[i] = q.heap[m]
		q.heap[i].e.index = i
		i = m
	}
	q.heap[i] = s
	s.e.index = i
}
