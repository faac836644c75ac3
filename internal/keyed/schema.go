package keyed

import (
	"reflect"
	"slices"
	"strings"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/checkpoint/metadata"
)

// The schema of the keyed state: for every state the operator registered,
// its kind and the names of the codecs that encode it (codec.NameOf), and
// the codec of the keys. Every snapshot carries it in its metadata
// (metadata.Subtask.Schema), so that the state can be decoded offline by
// looking the codecs up in the codec registry (`weir savepoint read`).
//
// The New* handles record their state when they register it; SetKeyCodec
// and the Describe* functions are for the operators that encode keys, or
// register states on the backend directly (windows).

// schema is what the runtime learnt; states are by name.
type schema struct {
	key    *metadata.CodecRef
	states map[string]metadata.StateSchema
}

// SetKeyCodec records the codec of the keyed stream's keys: the operator
// encodes every key it passes to SetKey with c.
func SetKeyCodec[K any](rt *Runtime, c codec.Codec[K]) {
	if c == nil {
		return
	}
	ref := codecRef[K](c)
	rt.schema.key = &ref
}

// DescribeValue records a value state registered on the backend directly
// (reducing and aggregating states are value states too); a nil codec
// means codec.For[T].
func DescribeValue[T any](rt *Runtime, name string, c codec.Codec[T]) {
	rt.schema.add(metadata.StateSchema{Name: name, Kind: "value", Value: codecRef(orBuiltin(c))})
}

// DescribeList records a list state registered on the backend directly.
func DescribeList[T any](rt *Runtime, name string, c codec.Codec[T]) {
	rt.schema.add(metadata.StateSchema{Name: name, Kind: "list", Value: codecRef(orBuiltin(c))})
}

// DescribeMap records a map state registered on the backend directly.
func DescribeMap[K, V any](rt *Runtime, name string, kc codec.Codec[K], vc codec.Codec[V]) {
	mk := codecRef(orBuiltin(kc))
	rt.schema.add(metadata.StateSchema{Name: name, Kind: "map", Value: codecRef(orBuiltin(vc)), MapKey: &mk})
}

// DescribeNamespace records the codec of the namespaces of state name,
// described before.
func DescribeNamespace[N any](rt *Runtime, name string, c codec.Codec[N]) {
	st, ok := rt.schema.states[name]
	if !ok || c == nil {
		return
	}
	ns := codecRef(c)
	st.Namespace = &ns
	rt.schema.states[name] = st
}

func (s *schema) add(st metadata.StateSchema) {
	if s.states == nil {
		s.states = map[string]metadata.StateSchema{}
	}
	if old, ok := s.states[st.Name]; ok && old.Namespace != nil && st.Namespace == nil {
		st.Namespace = old.Namespace
	}
	s.states[st.Name] = st
}

// snapshot returns the schema for a snapshot's metadata (nil if nothing
// was recorded): a copy, as the operator may register more states before
// the asynchronous phase writes it.
func (s *schema) snapshot() *metadata.Schema {
	if s.key == nil && len(s.states) == 0 {
		return nil
	}
	out := &metadata.Schema{}
	if s.key != nil {
		k := *s.key
		out.Key = &k
	}
	for _, st := range s.states {
		out.States = append(out.States, st)
	}
	slices.SortFunc(out.States, func(a, b metadata.StateSchema) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// orBuiltin returns c, or the built-in codec of T for nil (nil if there is
// none: the registration then failed already).
func orBuiltin[T any](c codec.Codec[T]) codec.Codec[T] {
	if c != nil {
		return c
	}
	d, _ := codec.For[T]()
	return d
}

func codecRef[T any](c codec.Codec[T]) metadata.CodecRef {
	return metadata.CodecRef{Codec: codec.NameOf(c), Type: reflect.TypeFor[T]().String()}
}
