package codec

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
)

// Codec names and the registry.
//
// A snapshot records, for every keyed state, the name of each codec that
// wrote it (see [NameOf]), so that a tool reading the snapshot offline
// (`weir savepoint read`) can decode the bytes back into values. It finds
// the codec by that name in the registry: the built-in codecs are
// registered already, and a job registers its own codecs with one line in
// an init function:
//
//	func init() { codec.Register(pointCodec{}) }
//
// A name is the codec's CodecName method's result if it has one
// ([Named]), else its Go type as reflect prints it ("main.pointCodec",
// "*shop.orderCodec"; type arguments are spelled with their import path:
// "codec.funcCodec[example.com/geo.Point]"). The built-in codecs
// are named after their Go type: "int64", "int32", "int", "uint64",
// "uint32", "float64", "float32", "bool", "string", "bytes", "duration",
// "time"; the combinators compose their parts' names: "pair(A,B)" for
// PairOf, "slice(E)" for SliceOf. Lookup resolves such a composite name
// from its parts, so registering a codec also makes pairs and slices of
// it readable.
//
// Go type names carry the package name, not its import path, and a Func
// codec's type depends only on its value type: two Func codecs of the same
// type have the same name. Give such codecs a name of their own with
// [WithName] (and use the named codec in the state descriptor), or
// implement Named.

// Named is implemented by codecs that choose their own name (see NameOf).
// A name must be stable across versions of the program that reads and
// writes the same bytes, and unique among the codecs a job uses.
type Named interface {
	CodecName() string
}

// NameOf returns the name of codec c: c.CodecName() if c implements
// [Named], else its Go type (reflect.Type.String), or "" for nil.
func NameOf(c any) string {
	if c == nil {
		return ""
	}
	if n, ok := c.(Named); ok {
		if name := n.CodecName(); name != "" {
			return name
		}
	}
	return reflect.TypeOf(c).String()
}

// WithName returns c under the name name: a codec that encodes and
// decodes exactly as c does and whose [NameOf] is name. Use it for codecs
// whose Go type does not identify their encoding, such as those made with
// [Func].
func WithName[T any](name string, c Codec[T]) Codec[T] {
	if c == nil {
		panic("codec: WithName with nil codec")
	}
	if name == "" {
		panic("codec: WithName with an empty name")
	}
	return namedCodec[T]{Codec: c, name: name}
}

type namedCodec[T any] struct {
	Codec[T]
	name string
}

func (c namedCodec[T]) CodecName() string { return c.name }

// Decoder is a codec in the registry, without its Go type parameter: it
// decodes values as any.
type Decoder interface {
	// Name is the codec's name (NameOf).
	Name() string
	// Type is the Go type of the values it decodes ("int64",
	// "main.point"; "codec.Pair[any,any]" and "[]interface {}" for
	// composites resolved from their parts).
	Type() string
	// DecodeAny decodes one value from the start of src, as the codec's
	// Decode does.
	DecodeAny(src []byte) (v any, n int, err error)
}

type typedDecoder[T any] struct {
	name string
	c    Codec[T]
}

func (d typedDecoder[T]) Name() string { return d.name }
func (d typedDecoder[T]) Type() string { return reflect.TypeFor[T]().String() }
func (d typedDecoder[T]) DecodeAny(src []byte) (any, int, error) {
	return d.c.Decode(src)
}

var registry = struct {
	sync.RWMutex
	m map[string]Decoder
}{m: map[string]Decoder{}}

func init() {
	Register(Int64())
	Register(Int32())
	Register(Int())
	Register(Uint64())
	Register(Uint32())
	Register(Float64())
	Register(Float32())
	Register(Bool())
	Register(String())
	Register(Bytes())
	Register(Duration())
	Register(Time())
}

// Register adds c to the registry under [NameOf](c), replacing a codec
// registered under that name before, and returns the name. Register is
// safe for concurrent use; call it from an init function of the job's
// program, so that every reader of its snapshots built into that program
// finds the codec.
func Register[T any](c Codec[T]) string {
	if c == nil {
		panic("codec: Register with nil codec")
	}
	name := NameOf(c)
	registry.Lock()
	registry.m[name] = typedDecoder[T]{name: name, c: c}
	registry.Unlock()
	return name
}

// Lookup returns the registered codec named name. A name of the form
// "pair(A,B)" or "slice(E)" that was not registered as such is resolved
// from its parts, when they are: its values then decode as
// Pair[any, any] and []any.
func Lookup(name string) (Decoder, bool) {
	registry.RLock()
	d, ok := registry.m[name]
	registry.RUnlock()
	if ok {
		return d, true
	}
	if args, ok := compositeArgs(name, "pair(", 2); ok {
		a, okA := Lookup(args[0])
		b, okB := Lookup(args[1])
		if okA && okB {
			return pairDecoder{name: name, a: a, b: b}, true
		}
		return nil, false
	}
	if args, ok := compositeArgs(name, "slice(", 1); ok {
		if e, ok := Lookup(args[0]); ok {
			return sliceDecoder{name: name, elem: e}, true
		}
	}
	return nil, false
}

// Registered returns the names of the registered codecs, sorted.
func Registered() []string {
	registry.RLock()
	defer registry.RUnlock()
	names := make([]string, 0, len(registry.m))
	for n := range registry.m {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// compositeArgs splits "<prefix>a,b)" into its n comma-separated arguments,
// commas inside (), [] or {} not counting.
func compositeArgs(name, prefix string, n int) ([]string, bool) {
	if !strings.HasPrefix(name, prefix) || !strings.HasSuffix(name, ")") {
		return nil, false
	}
	inner := name[len(prefix) : len(name)-1]
	var args []string
	depth, start := 0, 0
	for i, r := range inner {
		switch r {
		case '(', '[', '{':
			depth++
		case ')', ']', '}':
			depth--
			if depth < 0 {
				return nil, false
			}
		case ',':
			if depth == 0 {
				args = append(args, inner[start:i])
				start = i + 1
			}
		}
	}
	if depth != 0 {
		return nil, false
	}
	args = append(args, inner[start:])
	if len(args) != n || slices.Contains(args, "") {
		return nil, false
	}
	return args, true
}

type pairDecoder struct {
	name string
	a, b Decoder
}

func (d pairDecoder) Name() string { return d.name }
func (d pairDecoder) Type() string { return reflect.TypeFor[Pair[any, any]]().String() }
func (d pairDecoder) DecodeAny(src []byte) (any, int, error) {
	a, n, err := d.a.DecodeAny(src)
	if err != nil {
		return nil, 0, err
	}
	b, m, err := d.b.DecodeAny(src[n:])
	if err != nil {
		return nil, 0, err
	}
	return Pair[any, any]{a, b}, n + m, nil
}

type sliceDecoder struct {
	name string
	elem Decoder
}

func (d sliceDecoder) Name() string { return d.name }
func (d sliceDecoder) Type() string { return reflect.TypeFor[[]any]().String() }
func (d sliceDecoder) DecodeAny(src []byte) (any, int, error) {
	cnt, n, err := length("slice count", src)
	if err != nil || cnt == 0 {
		return []any(nil), n, err
	}
	s := make([]any, cnt)
	for i := range s {
		v, m, err := d.elem.DecodeAny(src[n:])
		if err != nil {
			return nil, 0, err
		}
		if m <= 0 {
			return nil, 0, corrupt("slice element decoded from %d bytes", m)
		}
		s[i] = v
		n += m
	}
	return s, n, nil
}

// Names of the built-in codecs and combinators.
func (int64Codec) CodecName() string    { return "int64" }
func (int32Codec) CodecName() string    { return "int32" }
func (intCodec) CodecName() string      { return "int" }
func (uint64Codec) CodecName() string   { return "uint64" }
func (uint32Codec) CodecName() string   { return "uint32" }
func (float64Codec) CodecName() string  { return "float64" }
func (float32Codec) CodecName() string  { return "float32" }
func (boolCodec) CodecName() string     { return "bool" }
func (stringCodec) CodecName() string   { return "string" }
func (bytesCodec) CodecName() string    { return "bytes" }
func (durationCodec) CodecName() string { return "duration" }
func (timeCodec) CodecName() string     { return "time" }

func (c pairCodec[A, B]) CodecName() string {
	return fmt.Sprintf("pair(%s,%s)", NameOf(c.a), NameOf(c.b))
}

func (c sliceCodec[T]) CodecName() string { return fmt.Sprintf("slice(%s)", NameOf(c.elem)) }
