package codec_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/codec"
)

// check round-trips vals through c one at a time and concatenated, and checks
// the codec contract on each encoding: n is the encoding length, re-encoding
// is byte-exact, Append leaves existing bytes of dst alone, decoded values do
// not alias the input, and every strict prefix is corrupt.
func check[T any](t *testing.T, c codec.Codec[T], eq func(a, b T) bool, vals ...T) {
	t.Helper()
	var all []byte
	for _, v := range vals {
		enc := c.Append(nil, v)
		if len(enc) == 0 {
			t.Fatalf("Append(%v) produced no bytes", v)
		}
		all = c.Append(all, v)

		// Append into a dst with content and spare capacity.
		dst := make([]byte, 5, 5+len(enc)+16)
		for i := range dst[:cap(dst)] {
			dst[:cap(dst)][i] = 0xEE
		}
		out := c.Append(dst, v)
		if !bytes.Equal(dst, []byte{0xEE, 0xEE, 0xEE, 0xEE, 0xEE}) || !bytes.Equal(out[:5], dst) {
			t.Fatalf("Append(%v) modified dst[:len(dst)]: %x", v, out[:5])
		}
		if !bytes.Equal(out[5:], enc) {
			t.Fatalf("Append(%v) into non-empty dst = %x, want %x", v, out[5:], enc)
		}

		src := bytes.Clone(enc)
		got, n, err := c.Decode(src)
		if err != nil {
			t.Fatalf("Decode(%x) (from %v): %v", enc, v, err)
		}
		if n != len(enc) {
			t.Fatalf("Decode(%x) consumed %d bytes, want %d", enc, n, len(enc))
		}
		if !eq(got, v) {
			t.Fatalf("Decode(Append(%v)) = %v", v, got)
		}
		if re := c.Append(nil, got); !bytes.Equal(re, enc) {
			t.Fatalf("re-encoding %v = %x, want %x", got, re, enc)
		}
		for i := range src {
			src[i] ^= 0xFF
		}
		if !eq(got, v) {
			t.Fatalf("decoded value %v aliases its input", v)
		}

		for i := range len(enc) {
			got, n, err := c.Decode(enc[:i:i])
			if !errors.Is(err, codec.ErrCorrupt) {
				t.Fatalf("Decode(%x) (prefix %d of %x) = %v, %d, %v; want ErrCorrupt", enc[:i], i, enc, got, n, err)
			}
			if n != 0 {
				t.Fatalf("Decode(%x) failed but consumed %d bytes", enc[:i], n)
			}
		}
	}

	src := all
	for i, v := range vals {
		got, n, err := c.Decode(src)
		if err != nil {
			t.Fatalf("concatenated: value %d: %v", i, err)
		}
		if want := len(c.Append(nil, v)); n != want {
			t.Fatalf("concatenated: value %d consumed %d bytes, want %d", i, n, want)
		}
		if !eq(got, v) {
			t.Fatalf("concatenated: value %d = %v, want %v", i, got, v)
		}
		src = src[n:]
	}
	if len(src) != 0 {
		t.Fatalf("concatenated: %d bytes left over", len(src))
	}
}

func equal[T comparable](a, b T) bool { return a == b }

func TestIntegers(t *testing.T) {
	check(t, codec.Int64(), equal, 0, 1, -1, 42, math.MinInt64, math.MaxInt64)
	check(t, codec.Int32(), equal, 0, 1, -1, math.MinInt32, math.MaxInt32)
	check(t, codec.Int(), equal, 0, 1, -1, math.MinInt, math.MaxInt)
	check(t, codec.Uint64(), equal, 0, 1, 1<<63, math.MaxUint64)
	check(t, codec.Uint32(), equal, 0, 1, 1<<31, math.MaxUint32)
	check(t, codec.Duration(), equal, 0, time.Nanosecond, -time.Hour, math.MinInt64, math.MaxInt64)
}

func TestFixedWidthLayout(t *testing.T) {
	tests := []struct {
		got, want []byte
	}{
		{codec.Int64().Append(nil, -2), []byte{0xFE, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}},
		{codec.Int().Append(nil, 0x0102), []byte{0x02, 0x01, 0, 0, 0, 0, 0, 0}},
		{codec.Int32().Append(nil, -2), []byte{0xFE, 0xFF, 0xFF, 0xFF}},
		{codec.Uint64().Append(nil, 0x0102030405060708), []byte{8, 7, 6, 5, 4, 3, 2, 1}},
		{codec.Uint32().Append(nil, 0x01020304), []byte{4, 3, 2, 1}},
		{codec.Float64().Append(nil, 1), []byte{0, 0, 0, 0, 0, 0, 0xF0, 0x3F}},
		{codec.Float32().Append(nil, 1), []byte{0, 0, 0x80, 0x3F}},
		{codec.Bool().Append(nil, false), []byte{0}},
		{codec.Bool().Append(nil, true), []byte{1}},
		{codec.Duration().Append(nil, time.Second), binary.LittleEndian.AppendUint64(nil, 1e9)},
		{codec.Time().Append(nil, time.Unix(1, 2)), binary.LittleEndian.AppendUint64(nil, 1e9+2)},
		{codec.String().Append(nil, "hi"), []byte{2, 'h', 'i'}},
		{codec.Bytes().Append(nil, make([]byte, 200))[:2], []byte{0xC8, 0x01}},
		{codec.SliceOf(codec.Bool()).Append(nil, []bool{true, false}), []byte{2, 1, 0}},
		{codec.PairOf(codec.Bool(), codec.String()).Append(nil, codec.Pair[bool, string]{true, "x"}), []byte{1, 1, 'x'}},
	}
	for i, tt := range tests {
		if !bytes.Equal(tt.got, tt.want) {
			t.Errorf("%d: got %x, want %x", i, tt.got, tt.want)
		}
	}
}

func TestFloats(t *testing.T) {
	bits64 := func(a, b float64) bool { return math.Float64bits(a) == math.Float64bits(b) }
	bits32 := func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) }
	check(t, codec.Float64(), bits64,
		0, math.Copysign(0, -1), 1.5, -math.MaxFloat64, math.SmallestNonzeroFloat64,
		math.Inf(1), math.Inf(-1), math.NaN(),
		math.Float64frombits(0x7FF0_0000_0000_0001), // signaling NaN
		math.Float64frombits(0xFFF8_DEAD_BEEF_0001), // negative NaN with payload
	)
	check(t, codec.Float32(), bits32,
		0, float32(math.Copysign(0, -1)), 1.5, math.MaxFloat32, math.SmallestNonzeroFloat32,
		float32(math.Inf(1)), float32(math.NaN()),
		math.Float32frombits(0x7F80_0001), // signaling NaN
		math.Float32frombits(0xFFC0_BEEF), // negative NaN with payload
	)
}

func TestBool(t *testing.T) {
	check(t, codec.Bool(), equal, false, true)
	for _, b := range []byte{2, 0x80, 0xFF} {
		if v, n, err := codec.Bool().Decode([]byte{b}); !errors.Is(err, codec.ErrCorrupt) {
			t.Errorf("Decode(%#x) = %v, %d, %v; want ErrCorrupt", b, v, n, err)
		}
	}
}

func TestString(t *testing.T) {
	check(t, codec.String(), equal,
		"", "a", "hello, world", "\xff\xfe\x00invalid\xc3", strings.Repeat("x", 127),
		strings.Repeat("y", 128), strings.Repeat("z", 70000))
}

func TestBytes(t *testing.T) {
	check(t, codec.Bytes(), bytes.Equal,
		[]byte{1}, []byte{0, 0xFF}, []byte("\xff\xfe"), bytes.Repeat([]byte{7}, 300))

	// A nil and an empty slice have the same encoding, which decodes to nil.
	for _, v := range [][]byte{nil, {}} {
		enc := codec.Bytes().Append(nil, v)
		if !bytes.Equal(enc, []byte{0}) {
			t.Fatalf("Append(%#v) = %x, want 00", v, enc)
		}
		got, n, err := codec.Bytes().Decode(enc)
		if err != nil || n != 1 || got != nil {
			t.Fatalf("Decode(00) = %#v, %d, %v; want nil, 1, nil", got, n, err)
		}
	}
}

func TestTime(t *testing.T) {
	eq := func(a, b time.Time) bool { return a.Equal(b) && a.Location() == time.UTC }
	loc := time.FixedZone("X", -7*3600)
	check(t, codec.Time(), eq,
		time.Unix(0, 0), time.Now(), time.Date(2024, 2, 29, 23, 59, 59, 999999999, loc),
		time.Unix(0, math.MinInt64), time.Unix(0, math.MaxInt64))

	// The monotonic reading and the location are dropped.
	now := time.Now()
	got, _, err := codec.Time().Decode(codec.Time().Append(nil, now))
	if err != nil || got != now.Round(0).UTC() {
		t.Fatalf("Decode(Append(now)) = %v, %v; want %v", got, err, now.Round(0).UTC())
	}
}

func TestPairAndSlice(t *testing.T) {
	type P = codec.Pair[string, []int64]
	pc := codec.PairOf(codec.String(), codec.SliceOf(codec.Int64()))
	peq := func(a, b P) bool { return a.First == b.First && slices.Equal(a.Second, b.Second) }
	check(t, pc, peq,
		P{}, P{"a", []int64{1}}, P{"", []int64{math.MinInt64, 0, math.MaxInt64}})

	sc := codec.SliceOf(codec.PairOf(codec.Bool(), codec.Bytes()))
	check(t, sc, func(a, b []codec.Pair[bool, []byte]) bool {
		return slices.EqualFunc(a, b, func(x, y codec.Pair[bool, []byte]) bool {
			return x.First == y.First && bytes.Equal(x.Second, y.Second)
		})
	},
		[]codec.Pair[bool, []byte]{{true, []byte("abc")}},
		[]codec.Pair[bool, []byte]{{false, nil}, {true, []byte{0}}, {false, []byte("xyz")}},
	)

	nested := codec.SliceOf(codec.SliceOf(codec.String()))
	check(t, nested, func(a, b [][]string) bool { return slices.EqualFunc(a, b, slices.Equal) },
		[][]string{{"a", ""}, {"\xff"}}, [][]string{nil, {"b"}})

	// A nil and an empty slice have the same encoding, which decodes to nil.
	for _, v := range [][]int64{nil, {}} {
		got, n, err := codec.SliceOf(codec.Int64()).Decode(codec.SliceOf(codec.Int64()).Append(nil, v))
		if err != nil || n != 1 || got != nil {
			t.Fatalf("Decode(Append(%#v)) = %#v, %d, %v; want nil, 1, nil", v, got, n, err)
		}
	}
}

type point struct{ X, Y int32 }

var pointCodec = codec.Func(
	func(dst []byte, p point) []byte {
		return codec.Int32().Append(codec.Int32().Append(dst, p.X), p.Y)
	},
	func(src []byte) (point, int, error) {
		x, n, err := codec.Int32().Decode(src)
		if err != nil {
			return point{}, 0, err
		}
		y, m, err := codec.Int32().Decode(src[n:])
		if err != nil {
			return point{}, 0, err
		}
		return point{x, y}, n + m, nil
	},
)

func TestFunc(t *testing.T) {
	check(t, pointCodec, equal, point{}, point{1, -1}, point{math.MinInt32, math.MaxInt32})
	check(t, codec.SliceOf(pointCodec), slices.Equal, []point{{1, 2}, {3, 4}})
}

func TestFuncBadCount(t *testing.T) {
	bad := codec.Func(
		func(dst []byte, v int) []byte { return append(dst, 0) },
		func(src []byte) (int, int, error) { return 0, len(src) + 1, nil },
	)
	defer func() {
		if recover() == nil {
			t.Fatal("Decode with over-long count did not panic")
		}
	}()
	bad.Decode([]byte{0})
}

func uvarint(x uint64) []byte { return binary.AppendUvarint(nil, x) }

func TestCorruptLengths(t *testing.T) {
	inputs := map[string][]byte{
		"empty":            {},
		"truncated varint": {0x80},
		"over-long zero":   {0x80, 0x00},
		"over-long one":    {0x81, 0x00, 'a'},
		"overflow 10 byte": {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x02},
		"overflow 11 byte": append(bytes.Repeat([]byte{0x80}, 10), 0x01),
		"huge":             append(uvarint(math.MaxUint64), "abc"...),
		"1<<62":            append(uvarint(1<<62), "abc"...),
		"one too many":     append(uvarint(4), "abc"...),
	}
	for name, in := range inputs {
		if v, n, err := codec.String().Decode(in); !errors.Is(err, codec.ErrCorrupt) || n != 0 {
			t.Errorf("String %s: Decode(%x) = %q, %d, %v; want ErrCorrupt", name, in, v, n, err)
		}
		if v, n, err := codec.Bytes().Decode(in); !errors.Is(err, codec.ErrCorrupt) || n != 0 {
			t.Errorf("Bytes %s: Decode(%x) = %q, %d, %v; want ErrCorrupt", name, in, v, n, err)
		}
		if v, n, err := codec.SliceOf(codec.Bool()).Decode(in); !errors.Is(err, codec.ErrCorrupt) || n != 0 {
			t.Errorf("SliceOf %s: Decode(%x) = %v, %d, %v; want ErrCorrupt", name, in, v, n, err)
		}
	}
}

func TestFor(t *testing.T) {
	forOK[int64](t, -5)
	forOK[int32](t, -5)
	forOK[int](t, -5)
	forOK[uint64](t, 5)
	forOK[uint32](t, 5)
	forOK[float64](t, 2.5)
	forOK[float32](t, 2.5)
	forOK[bool](t, true)
	forOK[string](t, "s")
	forOK[[]byte](t, []byte("b"))
	forOK[time.Duration](t, time.Minute)
	forOK[time.Time](t, time.Unix(1, 1).UTC())

	type myInt int64
	forNotOK[point](t)
	forNotOK[myInt](t)
	forNotOK[*int64](t)
	forNotOK[[]int64](t)
	forNotOK[any](t)
	forNotOK[error](t)
}

func forOK[T any](t *testing.T, v T) {
	t.Helper()
	c, ok := codec.For[T]()
	if !ok || c == nil {
		t.Fatalf("For[%T]() = %v, %v; want a codec", v, c, ok)
	}
	got, n, err := c.Decode(c.Append(nil, v))
	if err != nil || n == 0 || fmt.Sprint(got) != fmt.Sprint(v) {
		t.Fatalf("For[%T]: round trip of %v = %v, %d, %v", v, v, got, n, err)
	}
	if codec.MustFor[T]() == nil {
		t.Fatalf("MustFor[%T]() = nil", v)
	}
}

func forNotOK[T any](t *testing.T) {
	t.Helper()
	if c, ok := codec.For[T](); ok || c != nil {
		t.Fatalf("For[%T]() = %v, %v; want nil, false", *new(T), c, ok)
	}
	defer func() {
		t.Helper()
		msg, _ := recover().(string)
		if want := fmt.Sprintf("%T", new(T))[1:]; !strings.Contains(msg, want) {
			t.Fatalf("MustFor panic message %q does not name %s", msg, want)
		}
	}()
	codec.MustFor[T]()
}

func TestIntRange(t *testing.T) {
	enc := codec.Int64().Append(nil, math.MaxInt32+1)
	v, n, err := codec.Int().Decode(enc)
	if strconv.IntSize == 32 {
		if !errors.Is(err, codec.ErrCorrupt) || n != 0 {
			t.Fatalf("Decode(MaxInt32+1) on 32-bit = %d, %d, %v; want ErrCorrupt", v, n, err)
		}
		return
	}
	if err != nil || n != 8 || int64(v) != math.MaxInt32+1 {
		t.Fatalf("Decode(MaxInt32+1) = %d, %d, %v", v, n, err)
	}
}

func TestNilCodecPanics(t *testing.T) {
	for name, f := range map[string]func(){
		"PairOf":  func() { codec.PairOf[int64, bool](nil, codec.Bool()) },
		"SliceOf": func() { codec.SliceOf[int64](nil) },
		"Func":    func() { codec.Func[int](nil, nil) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s with nil did not panic", name)
				}
			}()
			f()
		}()
	}
}

// checkFuzz checks that decoding data either fails with ErrCorrupt or
// succeeds and re-encodes to exactly the bytes it consumed.
func checkFuzz[T any](t *testing.T, c codec.Codec[T], data []byte) {
	v, n, err := c.Decode(data)
	if err != nil {
		if !errors.Is(err, codec.ErrCorrupt) || n != 0 {
			t.Fatalf("Decode(%x) = %d, %v; want 0, ErrCorrupt", data, n, err)
		}
		return
	}
	if n < 1 || n > len(data) {
		t.Fatalf("Decode(%x) consumed %d bytes", data, n)
	}
	if enc := c.Append(nil, v); !bytes.Equal(enc, data[:n]) {
		t.Fatalf("Decode(%x) = %v, re-encoded as %x", data[:n], v, enc)
	}
}

func FuzzString(f *testing.F) {
	c := codec.String()
	for _, s := range []string{"", "a", "\xff", strings.Repeat("q", 200)} {
		f.Add(c.Append(nil, s))
	}
	f.Add([]byte{0x80, 0x00})
	f.Add([]byte{0x05, 'a'})
	f.Fuzz(func(t *testing.T, data []byte) { checkFuzz(t, c, data) })
}

func FuzzPair(f *testing.F) {
	type elem = codec.Pair[bool, float64]
	c := codec.PairOf(codec.String(), codec.SliceOf(codec.PairOf(codec.Bool(), codec.Float64())))
	f.Add(c.Append(nil, codec.Pair[string, []elem]{}))
	f.Add(c.Append(nil, codec.Pair[string, []elem]{"k", []elem{{true, 1}, {false, math.NaN()}}}))
	f.Add([]byte{0x01, 'k', 0x02, 0x02})
	f.Fuzz(func(t *testing.T, data []byte) { checkFuzz(t, c, data) })
}

func Example() {
	type kv = codec.Pair[string, int64]
	c := codec.PairOf(codec.String(), codec.Int64())

	var buf []byte
	buf = c.Append(buf, kv{"a", 1})
	buf = c.Append(buf, kv{"bc", -1})

	for len(buf) > 0 {
		v, n, err := c.Decode(buf)
		if err != nil {
			panic(err)
		}
		fmt.Println(v.First, v.Second, n)
		buf = buf[n:]
	}
	// Output:
	// a 1 10
	// bc -1 11
}

const bufSize = 32 << 10

// Package-level codecs are called through the interface, as in a graph.
var (
	benchInt64  = codec.Int64()
	benchString = codec.String()
)

// BenchmarkInt64AppendDecode appends each record into a reused 32 KiB buffer
// (starting over when it is full) and decodes it back from there; one op is
// one record.
func BenchmarkInt64AppendDecode(b *testing.B) {
	c := benchInt64
	buf := make([]byte, 0, bufSize)
	var i int64
	b.ReportAllocs()
	for b.Loop() {
		if cap(buf)-len(buf) < 8 {
			buf = buf[:0]
		}
		off := len(buf)
		buf = c.Append(buf, i)
		v, n, err := c.Decode(buf[off:])
		if err != nil || n != 8 || v != i {
			b.Fatalf("Decode = %d, %d, %v; want %d, 8, nil", v, n, err, i)
		}
		i++
	}
}

// BenchmarkStringAppendDecode is like BenchmarkInt64AppendDecode for strings
// of 8 to 23 bytes; decoding allocates the returned string.
func BenchmarkStringAppendDecode(b *testing.B) {
	c := benchString
	var keys []string
	for i := range 16 {
		keys = append(keys, fmt.Sprintf("key-%0*d", i+4, i))
	}
	buf := make([]byte, 0, bufSize)
	var i int
	b.ReportAllocs()
	for b.Loop() {
		k := keys[i%len(keys)]
		if cap(buf)-len(buf) < binary.MaxVarintLen64+len(k) {
			buf = buf[:0]
		}
		off := len(buf)
		buf = c.Append(buf, k)
		v, n, err := c.Decode(buf[off:])
		if err != nil || n != len(buf)-off || len(v) != len(k) {
			b.Fatalf("Decode = %q, %d, %v; want %q", v, n, err, k)
		}
		i++
	}
}
