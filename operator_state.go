package weir

import (
	"errors"
	"fmt"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/operator"
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

// ErrNoOperatorState is returned when operator state is asked of a
// context that a running job did not make (a SourceContext built by hand
// in a test, say).
var ErrNoOperatorState = errors.New("no operator state: the context was not made by a running job")

// OperatorStateContext is a context that has operator state.
type OperatorStateContext interface {
	operatorState() *operator.State
}

// OperatorListState is a list of elements held by one operator subtask.
type OperatorListState[T any] struct{ l operator.ListState[T] }

// GetListOperatorState returns the operator list state d describes, split
// among subtasks on redistribution. d.TTL must be zero.
func GetListOperatorState[T any](ctx OperatorStateContext, d ListStateDescriptor[T]) (*OperatorListState[T], error) {
	return getOperatorList(ctx, d, false)
}

// GetUnionListOperatorState returns the operator list state d describes,
// given whole to every subtask on redistribution.
func GetUnionListOperatorState[T any](ctx OperatorStateContext, d ListStateDescriptor[T]) (*OperatorListState[T], error) {
	return getOperatorList(ctx, d, true)
}

func getOperatorList[T any](ctx OperatorStateContext, d ListStateDescriptor[T], union bool) (*OperatorListState[T], error) {
	if d.TTL.Enabled() {
		return nil, fmt.Errorf("operator state %q: operator state has no TTL", d.Name)
	}
	if ctx.operatorState() == nil {
		return nil, fmt.Errorf("operator state %q: %w", d.Name, ErrNoOperatorState)
	}
	c, err := codecOrBuiltin(d.Codec, "operator state", d.Name, "element")
	if err != nil {
		return nil, err
	}
	l, err := operator.NewListState(ctx.operatorState(), d.Name, c, union)
	if err != nil {
		return nil, err
	}
	return &OperatorListState[T]{l: l}, nil
}

// codecOrBuiltin returns c, or the built-in codec of T when c is nil, or
// an error naming the state (kind and name) and the type (what) that has
// none.
func codecOrBuiltin[T any](c codec.Codec[T], kind, name, what string) (codec.Codec[T], error) {
	if c != nil {
		return c, nil
	}
	if c, ok := codec.For[T](); ok {
		return c, nil
	}
	return nil, fmt.Errorf("%s %q: %s type %s has no built-in codec: set one in the descriptor", kind, name, what, typeNameOf[T]())
}

// Get returns the elements.
func (s *OperatorListState[T]) Get() []T { return s.l.Get() }

// Add appends v.
func (s *OperatorListState[T]) Add(v T) { s.l.Add(v) }

// Update replaces the elements with vs.
func (s *OperatorListState[T]) Update(vs []T) { s.l.Update(vs) }

// Clear removes every element.
func (s *OperatorListState[T]) Clear() { s.l.Clear() }
