package state

import (
	"fmt"
)

// Distribution says how an operator list state is divided among the
// subtasks of a restored or rescaled operator.
type Distribution uint8

const (
	// SplitDistribute concatenates every subtask's elements and gives each
	// new subtask an even, contiguous share (Flink's list state).
	SplitDistribute Distribution = iota
	// UnionDistribute gives every new subtask all elements of every old
	// subtask (Flink's union list state).
	UnionDistribute
)

// String names the distribution.
func (d Distribution) String() string {
	if d == UnionDistribute {
		return "union"
	}
	return "split"
}

// OperatorStore holds the operator (non-keyed) state of one operator
// subtask: named lists of encoded elements, each with its distribution.
// Sources keep their positions in it and sinks their pending transactions.
// It is used from the subtask's goroutine only.
type OperatorStore struct {
	lists map[string]*OperatorList
}

// NewOperatorStore returns an empty store.
func NewOperatorStore() *OperatorStore { return &OperatorStore{lists: map[string]*OperatorList{}} }

// OperatorList is one named operator list state: encoded elements.
type OperatorList struct {
	Name         string
	Distribution Distribution
	// Elements are the encoded elements; the typed layer above owns the
	// encoding.
	Elements [][]byte
}

// List returns the list called name, creating it empty. Asking again with
// another distribution is an error wrapping ErrIncompatibleState.
func (s *OperatorStore) List(name string, d Distribution) (*OperatorList, error) {
	if name == "" {
		return nil, fmt.Errorf("state: an operator state needs a name")
	}
	if l, ok := s.lists[name]; ok {
		if l.Distribution != d {
			return nil, fmt.Errorf("%w: operator state %q is %s list state, asked for %s", ErrIncompatibleState, name, l.Distribution, d)
		}
		return l, nil
	}
	l := &OperatorList{Name: name, Distribution: d}
	s.lists[name] = l
	return l, nil
}

// Lists returns every list in the store.
func (s *OperatorStore) Lists() []*OperatorList {
	out := make([]*OperatorList, 0, len(s.lists))
	for _, l := range s.lists {
		out = append(out, l)
	}
	return out
}

// Redistribute divides the elements that old subtasks held (old[i] is
// subtask i's list) among newParallelism subtasks according to d.
func Redistribute(d Distribution, old [][][]byte, newParallelism int) [][][]byte {
	var all [][]byte
	for _, l := range old {
		all = append(all, l...)
	}
	out := make([][][]byte, newParallelism)
	for i := range out {
		if d == UnionDistribute {
			out[i] = append([][]byte(nil), all...)
			continue
		}
		lo, hi := len(all)*i/newParallelism, len(all)*(i+1)/newParallelism
		out[i] = append([][]byte(nil), all[lo:hi]...)
	}
	return out
}
