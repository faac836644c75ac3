// Package operator holds the operator (non-keyed) state of an operator
// subtask at run time: named lists of encoded elements, restored from the
// subtask's share of a checkpoint and copied into every snapshot. Sources
// keep their split positions in it, two-phase-commit sinks their pending
// transactions, and user functions their own lists (weir.OperatorListState).
//
// A list is split among the new subtasks when the operator is restored at
// another parallelism, or given whole to each of them (union); which one
// is fixed when the list is first asked for. Encodings are the typed
// layer's (ListState); the store only holds bytes. Everything here is
// used from the subtask's goroutine only.
package operator

import (
	"fmt"
	"slices"
	"strings"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/checkpoint/metadata"
	"github.com/weirstream/weir/internal/state"
	"github.com/weirstream/weir/internal/task"
)

// State is an operator subtask's operator state, and how to fail the
// subtask when an element cannot be decoded.
type State struct {
	store *state.OperatorStore
	fail  func(error)
}

// NewState returns the operator state of a subtask, holding the lists
// restored (nil: a fresh start).
func NewState(restored *task.RestoredState, fail func(error)) *State {
	s := &State{store: state.NewOperatorStore(), fail: fail}
	if restored != nil {
		for _, l := range restored.Lists {
			// A fresh store has no lists yet: List cannot fail here.
			ol, _ := s.List(l.Name, l.Union)
			ol.Elements = l.Elements
		}
	}
	return s
}

// List returns the list called name, creating it empty; union chooses how
// it is redistributed (see the package comment). Asking again with the
// other distribution is an error.
func (s *State) List(name string, union bool) (*state.OperatorList, error) {
	d := state.SplitDistribute
	if union {
		d = state.UnionDistribute
	}
	return s.store.List(name, d)
}

// Snapshot copies every list, sorted by name (the synchronous phase;
// elements are never changed in place, so copying the outer slices
// suffices).
func (s *State) Snapshot() []metadata.List {
	ls := s.store.Lists()
	if len(ls) == 0 {
		return nil
	}
	out := make([]metadata.List, 0, len(ls))
	for _, l := range ls {
		elems := slices.Clone(l.Elements)
		if elems == nil {
			elems = [][]byte{}
		}
		out = append(out, metadata.List{Name: l.Name, Union: l.Distribution == state.UnionDistribute, Elements: elems})
	}
	slices.SortFunc(out, func(a, b metadata.List) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// ListState is an operator list of elements of type T, encoded with a
// codec.
type ListState[T any] struct {
	l     *state.OperatorList
	codec codec.Codec[T]
	fail  func(error)
}

// NewListState returns the typed list called name of s.
func NewListState[T any](s *State, name string, c codec.Codec[T], union bool) (ListState[T], error) {
	l, err := s.List(name, union)
	if err != nil {
		return ListState[T]{}, err
	}
	return ListState[T]{l: l, codec: c, fail: s.fail}, nil
}

// Get decodes the elements; an element that does not decode fails the
// subtask.
func (s *ListState[T]) Get() []T {
	out := make([]T, 0, len(s.l.Elements))
	for _, e := range s.l.Elements {
		v, _, err := s.codec.Decode(e)
		if err != nil {
			s.fail(fmt.Errorf("operator state %q: %w", s.l.Name, err))
		}
		out = append(out, v)
	}
	return out
}

// Add appends v.
func (s *ListState[T]) Add(v T) { s.l.Elements = append(s.l.Elements, s.codec.Append(nil, v)) }

// Update replaces the elements with vs.
func (s *ListState[T]) Update(vs []T) {
	s.l.Elements = s.l.Elements[:0]
	for _, v := range vs {
		s.Add(v)
	}
}

// Clear removes every element.
func (s *ListState[T]) Clear() { s.l.Elements = nil }
