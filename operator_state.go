package weir

import (
	"fmt"
	"slices"
	"strings"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/checkpoint/metadata"
	"github.com/weirstream/weir/internal/state"
)

// Operator state.
//
// Operator (non-keyed) state belongs to one parallel subtask of an operator
// rather than to a key: a source keeps its read positions in it, a sink its
// pending transactions. It is a list of elements; when the operator is
// restored at another parallelism, list state is split evenly among the new
// subtasks, and union list state gives every new subtask all elements.
//
// Process functions (through their *Context or *KeyedContext), source
// readers (SourceContext) and sink writers (SinkContext) can hold it.

// OperatorStateContext is a context that has operator state.
type OperatorStateContext interface {
	operatorState() *operatorState
}

// operatorState is an operator subtask's store and how to fail it.
type operatorState struct {
	store *state.OperatorStore
	fail  func(error)
}

func newOperatorState(fail func(error)) *operatorState {
	return &operatorState{store: state.NewOperatorStore(), fail: fail}
}

// snapshot copies every list, sorted by name.
func (os *operatorState) snapshot() []metadata.List {
	ls := os.store.Lists()
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

// OperatorListState is a list of elements held by one operator subtask.
type OperatorListState[T any] struct {
	l     *state.OperatorList
	codec codec.Codec[T]
	fail  func(error)
}

// GetListOperatorState returns the operator list state d describes, split
// among subtasks on redistribution. d.TTL must be zero.
func GetListOperatorState[T any](ctx OperatorStateContext, d ListStateDescriptor[T]) (*OperatorListState[T], error) {
	return getOperatorList(ctx, d, state.SplitDistribute)
}

// GetUnionListOperatorState returns the operator list state d describes,
// given whole to every subtask on redistribution.
func GetUnionListOperatorState[T any](ctx OperatorStateContext, d ListStateDescriptor[T]) (*OperatorListState[T], error) {
	return getOperatorList(ctx, d, state.UnionDistribute)
}

func getOperatorList[T any](ctx OperatorStateContext, d ListStateDescriptor[T], dist state.Distribution) (*OperatorListState[T], error) {
	if d.TTL.Enabled() {
		return nil, fmt.Errorf("operator state %q: operator state has no TTL", d.Name)
	}
	c := d.Codec
	if c == nil {
		var ok bool
		if c, ok = codec.For[T](); !ok {
			return nil, fmt.Errorf("operator state %q: element type %s has no built-in codec: set one in the descriptor", d.Name, typeNameOf[T]())
		}
	}
	os := ctx.operatorState()
	l, err := os.store.List(d.Name, dist)
	if err != nil {
		return nil, err
	}
	return &OperatorListState[T]{l: l, codec: c, fail: os.fail}, nil
}

// Get returns the elements.
func (s *OperatorListState[T]) Get() []T {
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
func (s *OperatorListState[T]) Add(v T) { s.l.Elements = append(s.l.Elements, s.codec.Append(nil, v)) }

// Update replaces the elements with vs.
func (s *OperatorListState[T]) Update(vs []T) {
	s.l.Elements = s.l.Elements[:0]
	for _, v := range vs {
		s.Add(v)
	}
}

// Clear removes every element.
func (s *OperatorListState[T]) Clear() { s.l.Elements = nil }
