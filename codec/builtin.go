package codec

import (
	"encoding/binary"
	"math"
	"strconv"
	"time"
)

var le = binary.LittleEndian

// Int64 returns the codec for int64: 8 bytes, little-endian.
func Int64() Codec[int64] { return int64Codec{} }

// Int32 returns the codec for int32: 4 bytes, little-endian.
func Int32() Codec[int32] { return int32Codec{} }

// Int returns the codec for int: 8 bytes, little-endian, on every platform.
// On 32-bit platforms, decoding a value that does not fit in an int is an
// error wrapping [ErrCorrupt].
func Int() Codec[int] { return intCodec{} }

// Uint64 returns the codec for uint64: 8 bytes, little-endian.
func Uint64() Codec[uint64] { return uint64Codec{} }

// Uint32 returns the codec for uint32: 4 bytes, little-endian.
func Uint32() Codec[uint32] { return uint32Codec{} }

// Float64 returns the codec for float64: the 8-byte little-endian IEEE 754
// bit pattern, preserved exactly (including NaN payloads).
func Float64() Codec[float64] { return float64Codec{} }

// Float32 returns the codec for float32: the 4-byte little-endian IEEE 754
// bit pattern, preserved exactly (including NaN payloads).
func Float32() Codec[float32] { return float32Codec{} }

// Bool returns the codec for bool: one byte, 0 or 1. Decoding any other
// byte is an error wrapping [ErrCorrupt].
func Bool() Codec[bool] { return boolCodec{} }

// String returns the codec for string: the uvarint byte length followed by
// the bytes, which need not be valid UTF-8.
func String() Codec[string] { return stringCodec{} }

// Bytes returns the codec for []byte: the uvarint length followed by the
// bytes. Decode returns a copy, or nil for length 0.
func Bytes() Codec[[]byte] { return bytesCodec{} }

// Duration returns the codec for time.Duration: int64 nanoseconds, 8 bytes,
// little-endian.
func Duration() Codec[time.Duration] { return durationCodec{} }

// Time returns the codec for time.Time: t.UnixNano() as 8 bytes,
// little-endian. Decode returns time.Unix(0, n) in UTC; location and
// monotonic clock reading are not preserved, and instants outside the range
// of UnixNano (years 1678 to 2262) are not either.
func Time() Codec[time.Time] { return timeCodec{} }

type (
	int64Codec    struct{}
	int32Codec    struct{}
	intCodec      struct{}
	uint64Codec   struct{}
	uint32Codec   struct{}
	float64Codec  struct{}
	float32Codec  struct{}
	boolCodec     struct{}
	stringCodec   struct{}
	bytesCodec    struct{}
	durationCodec struct{}
	timeCodec     struct{}
)

func (int64Codec) Append(dst []byte, v int64) []byte { return le.AppendUint64(dst, uint64(v)) }

func (int64Codec) Decode(src []byte) (int64, int, error) {
	if len(src) < 8 {
		return 0, 0, errShort8
	}
	return int64(le.Uint64(src)), 8, nil
}

func (int32Codec) Append(dst []byte, v int32) []byte { return le.AppendUint32(dst, uint32(v)) }

func (int32Codec) Decode(src []byte) (int32, int, error) {
	if len(src) < 4 {
		return 0, 0, errShort4
	}
	return int32(le.Uint32(src)), 4, nil
}

func (intCodec) Append(dst []byte, v int) []byte { return le.AppendUint64(dst, uint64(v)) }

func (intCodec) Decode(src []byte) (int, int, error) {
	if len(src) < 8 {
		return 0, 0, errShort8
	}
	x := int64(le.Uint64(src))
	if strconv.IntSize == 32 && int64(int(x)) != x {
		return 0, 0, errIntRange
	}
	return int(x), 8, nil
}

func (uint64Codec) Append(dst []byte, v uint64) []byte { return le.AppendUint64(dst, v) }

func (uint64Codec) Decode(src []byte) (uint64, int, error) {
	if len(src) < 8 {
		return 0, 0, errShort8
	}
	return le.Uint64(src), 8, nil
}

func (uint32Codec) Append(dst []byte, v uint32) []byte { return le.AppendUint32(dst, v) }

func (uint32Codec) Decode(src []byte) (uint32, int, error) {
	if len(src) < 4 {
		return 0, 0, errShort4
	}
	return le.Uint32(src), 4, nil
}

func (float64Codec) Append(dst []byte, v float64) []byte {
	return le.AppendUint64(dst, math.Float64bits(v))
}

func (float64Codec) Decode(src []byte) (float64, int, error) {
	if len(src) < 8 {
		return 0, 0, errShort8
	}
	return math.Float64frombits(le.Uint64(src)), 8, nil
}

func (float32Codec) Append(dst []byte, v float32) []byte {
	return le.AppendUint32(dst, math.Float32bits(v))
}

func (float32Codec) Decode(src []byte) (float32, int, error) {
	if len(src) < 4 {
		return 0, 0, errShort4
	}
	return math.Float32frombits(le.Uint32(src)), 4, nil
}

func (boolCodec) Append(dst []byte, v bool) []byte {
	if v {
		return append(dst, 1)
	}
	return append(dst, 0)
}

func (boolCodec) Decode(src []byte) (bool, int, error) {
	if len(src) < 1 {
		return false, 0, errShort1
	}
	switch src[0] {
	case 0:
		return false, 1, nil
	case 1:
		return true, 1, nil
	}
	return false, 0, errBool
}

func (stringCodec) Append(dst []byte, v string) []byte {
	return append(binary.AppendUvarint(dst, uint64(len(v))), v...)
}

func (stringCodec) Decode(src []byte) (string, int, error) {
	l, n, err := length("string length", src)
	if err != nil {
		return "", 0, err
	}
	return string(src[n : n+l]), n + l, nil
}

func (bytesCodec) Append(dst []byte, v []byte) []byte {
	return append(binary.AppendUvarint(dst, uint64(len(v))), v...)
}

func (bytesCodec) Decode(src []byte) ([]byte, int, error) {
	l, n, err := length("bytes length", src)
	if err != nil || l == 0 {
		return nil, n, err
	}
	b := make([]byte, l)
	copy(b, src[n:])
	return b, n + l, nil
}

func (durationCodec) Append(dst []byte, v time.Duration) []byte {
	return le.AppendUint64(dst, uint64(v))
}

func (durationCodec) Decode(src []byte) (time.Duration, int, error) {
	if len(src) < 8 {
		return 0, 0, errShort8
	}
	return time.Duration(le.Uint64(src)), 8, nil
}

func (timeCodec) Append(dst []byte, v time.Time) []byte {
	return le.AppendUint64(dst, uint64(v.UnixNano()))
}

func (timeCodec) Decode(src []byte) (time.Time, int, error) {
	if len(src) < 8 {
		return time.Time{}, 0, errShort8
	}
	return time.Unix(0, int64(le.Uint64(src))).UTC(), 8, nil
}
