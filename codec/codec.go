package codec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"time"
)

// Codec encodes and decodes values of type T. Implementations must be
// stateless or otherwise safe for concurrent use by many goroutines.
type Codec[T any] interface {
	// Append appends the encoding of v to dst and returns the extended
	// slice. It must only append (never modify dst[:len(dst)]).
	Append(dst []byte, v T) []byte
	// Decode decodes one value from the start of src and returns it with
	// the number of bytes consumed. Encodings are self-delimiting. A
	// truncated or malformed src returns an error wrapping ErrCorrupt (use
	// errors.Is). The returned value never aliases src (strings and byte
	// slices are copied).
	Decode(src []byte) (v T, n int, err error)
}

// ErrCorrupt is wrapped by every error that a built-in codec returns for
// truncated or malformed input.
var ErrCorrupt = errors.New("codec: corrupt or truncated encoding")

// corrupt returns an error wrapping ErrCorrupt.
func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, args...)...)
}

// Static errors keep the decoders small and their error paths free of
// allocation.
var (
	errShort1         = corrupt("truncated 1-byte value")
	errShort4         = corrupt("truncated 4-byte value")
	errShort8         = corrupt("truncated 8-byte value")
	errBool           = corrupt("bool byte is not 0 or 1")
	errIntRange       = corrupt("value overflows %d-bit int", strconv.IntSize)
	errVarintShort    = corrupt("truncated uvarint")
	errVarintOverflow = corrupt("uvarint overflows 64 bits")
	errVarintLong     = corrupt("over-long uvarint")
)

// uvarint decodes a minimally encoded uvarint from the start of src.
func uvarint(src []byte) (uint64, int, error) {
	if len(src) > 0 && src[0] < 0x80 {
		return uint64(src[0]), 1, nil
	}
	x, n := binary.Uvarint(src)
	switch {
	case n == 0:
		return 0, 0, errVarintShort
	case n < 0:
		return 0, 0, errVarintOverflow
	case src[n-1] == 0:
		return 0, 0, errVarintLong
	}
	return x, n, nil
}

// length decodes a uvarint length or count from the start of src and checks
// that it does not exceed the bytes that follow it.
func length(what string, src []byte) (int, int, error) {
	l, n, err := uvarint(src)
	if err != nil {
		return 0, 0, err
	}
	if rem := len(src) - n; l > uint64(rem) {
		return 0, 0, corrupt("%s %d exceeds %d remaining bytes", what, l, rem)
	}
	return int(l), n, nil
}

// For returns the built-in codec for T when T is exactly one of int64,
// int32, int, uint64, uint32, float64, float32, bool, string, []byte,
// time.Duration or time.Time. Otherwise, including for types defined on
// top of those, it returns nil, false. For is meant to be called once, when
// a graph is built, not per record.
func For[T any]() (Codec[T], bool) {
	var c any
	switch any((*T)(nil)).(type) {
	case *int64:
		c = Int64()
	case *int32:
		c = Int32()
	case *int:
		c = Int()
	case *uint64:
		c = Uint64()
	case *uint32:
		c = Uint32()
	case *float64:
		c = Float64()
	case *float32:
		c = Float32()
	case *bool:
		c = Bool()
	case *string:
		c = String()
	case *[]byte:
		c = Bytes()
	case *time.Duration:
		c = Duration()
	case *time.Time:
		c = Time()
	default:
		return nil, false
	}
	return c.(Codec[T]), true
}

// MustFor is like [For] but panics if there is no built-in codec for T.
func MustFor[T any]() Codec[T] {
	c, ok := For[T]()
	if !ok {
		panic(fmt.Sprintf("codec: no built-in codec for type %v", reflect.TypeFor[T]()))
	}
	return c
}

// Pair is a value of two types, encoded by [PairOf].
type Pair[A, B any] struct {
	First  A
	Second B
}

// PairOf returns a codec for Pair[A, B] that encodes First with a, followed
// by Second with b.
func PairOf[A, B any](a Codec[A], b Codec[B]) Codec[Pair[A, B]] {
	if a == nil || b == nil {
		panic("codec: PairOf with nil codec")
	}
	return pairCodec[A, B]{a, b}
}

type pairCodec[A, B any] struct {
	a Codec[A]
	b Codec[B]
}

func (c pairCodec[A, B]) Append(dst []byte, v Pair[A, B]) []byte {
	return c.b.Append(c.a.Append(dst, v.First), v.Second)
}

func (c pairCodec[A, B]) Decode(src []byte) (Pair[A, B], int, error) {
	a, n, err := c.a.Decode(src)
	if err != nil {
		return Pair[A, B]{}, 0, err
	}
	b, m, err := c.b.Decode(src[n:])
	if err != nil {
		return Pair[A, B]{}, 0, err
	}
	return Pair[A, B]{a, b}, n + m, nil
}

// SliceOf returns a codec for []T that encodes the uvarint element count
// followed by each element encoded with elem. Because every element is
// assumed to take at least one byte, Decode rejects a count larger than the
// number of remaining bytes before allocating. A nil or empty slice decodes
// to nil.
func SliceOf[T any](elem Codec[T]) Codec[[]T] {
	if elem == nil {
		panic("codec: SliceOf with nil codec")
	}
	return sliceCodec[T]{elem}
}

type sliceCodec[T any] struct{ elem Codec[T] }

func (c sliceCodec[T]) Append(dst []byte, v []T) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(v)))
	for _, e := range v {
		dst = c.elem.Append(dst, e)
	}
	return dst
}

func (c sliceCodec[T]) Decode(src []byte) ([]T, int, error) {
	cnt, n, err := length("slice count", src)
	if err != nil || cnt == 0 {
		return nil, n, err
	}
	s := make([]T, cnt)
	for i := range s {
		v, m, err := c.elem.Decode(src[n:])
		if err != nil {
			return nil, 0, err
		}
		s[i] = v
		n += m
	}
	return s, n, nil
}

// Func returns a codec that calls appendFn and decodeFn. It adapts user
// types; the functions must satisfy the [Codec] contract, in particular
// decodeFn must report truncated or malformed input with an error wrapping
// [ErrCorrupt] and must not return values that alias its input. Decode
// panics if decodeFn succeeds but reports more bytes consumed than it was
// given.
func Func[T any](appendFn func([]byte, T) []byte, decodeFn func([]byte) (T, int, error)) Codec[T] {
	if appendFn == nil || decodeFn == nil {
		panic("codec: Func with nil function")
	}
	return funcCodec[T]{appendFn, decodeFn}
}

type funcCodec[T any] struct {
	appendFn func([]byte, T) []byte
	decodeFn func([]byte) (T, int, error)
}

func (c funcCodec[T]) Append(dst []byte, v T) []byte { return c.appendFn(dst, v) }

func (c funcCodec[T]) Decode(src []byte) (T, int, error) {
	v, n, err := c.decodeFn(src)
	if err == nil && (n < 0 || n > len(src)) {
		panic(fmt.Sprintf("codec: Func decoder consumed %d bytes of %d", n, len(src)))
	}
	return v, n, err
}
