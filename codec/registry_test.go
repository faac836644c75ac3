package codec_test

import (
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/weirstream/weir/codec"
)

// vec is a user type with a codec of its own, registered by the test as
// a job would in its init.
type vec struct{ X, Y int32 }

type vecCodec struct{}

func (vecCodec) Append(dst []byte, p vec) []byte {
	return codec.Int32().Append(codec.Int32().Append(dst, p.X), p.Y)
}

func (vecCodec) Decode(src []byte) (vec, int, error) {
	pc := codec.PairOf(codec.Int32(), codec.Int32())
	v, n, err := pc.Decode(src)
	return vec{v.First, v.Second}, n, err
}

func TestNameOf(t *testing.T) {
	for _, tc := range []struct {
		c    any
		want string
	}{
		{codec.Int64(), "int64"},
		{codec.Int32(), "int32"},
		{codec.Int(), "int"},
		{codec.Uint64(), "uint64"},
		{codec.Uint32(), "uint32"},
		{codec.Float64(), "float64"},
		{codec.Float32(), "float32"},
		{codec.Bool(), "bool"},
		{codec.String(), "string"},
		{codec.Bytes(), "bytes"},
		{codec.Duration(), "duration"},
		{codec.Time(), "time"},
		{codec.MustFor[int64](), "int64"},
		{codec.PairOf(codec.String(), codec.Int64()), "pair(string,int64)"},
		{codec.SliceOf(codec.PairOf(codec.String(), codec.SliceOf(codec.Bool()))), "slice(pair(string,slice(bool)))"},
		{vecCodec{}, "codec_test.vecCodec"},
		{&vecCodec{}, "*codec_test.vecCodec"},
		{codec.SliceOf[vec](vecCodec{}), "slice(codec_test.vecCodec)"},
		{codec.WithName("geo.vec/v1", codec.Codec[vec](vecCodec{})), "geo.vec/v1"},
		{nil, ""},
	} {
		if got := codec.NameOf(tc.c); got != tc.want {
			t.Errorf("NameOf(%T) = %q, want %q", tc.c, got, tc.want)
		}
	}
	// A Func codec is named after its value type only.
	f := codec.Func(vecCodec{}.Append, vecCodec{}.Decode)
	if got, want := codec.NameOf(f), "codec.funcCodec[github.com/weirstream/weir/codec_test.vec]"; got != want {
		t.Errorf("NameOf(Func) = %q, want %q", got, want)
	}
}

func decodeAny(t *testing.T, name string, src []byte) any {
	t.Helper()
	d, ok := codec.Lookup(name)
	if !ok {
		t.Fatalf("Lookup(%q) found nothing", name)
	}
	if d.Name() != name {
		t.Errorf("Lookup(%q).Name() = %q", name, d.Name())
	}
	v, n, err := d.DecodeAny(src)
	if err != nil {
		t.Fatalf("%s: DecodeAny(%x): %v", name, src, err)
	}
	if n != len(src) {
		t.Fatalf("%s: DecodeAny(%x) consumed %d bytes of %d", name, src, n, len(src))
	}
	return v
}

func TestLookupBuiltins(t *testing.T) {
	ts := time.Unix(1767225600, 5).UTC()
	for _, tc := range []struct {
		name, typ string
		enc       []byte
		want      any
	}{
		{"int64", "int64", codec.Int64().Append(nil, -7), int64(-7)},
		{"int32", "int32", codec.Int32().Append(nil, 9), int32(9)},
		{"int", "int", codec.Int().Append(nil, 3), 3},
		{"uint64", "uint64", codec.Uint64().Append(nil, 1<<60), uint64(1 << 60)},
		{"uint32", "uint32", codec.Uint32().Append(nil, 17), uint32(17)},
		{"float64", "float64", codec.Float64().Append(nil, 2.5), 2.5},
		{"float32", "float32", codec.Float32().Append(nil, 0.5), float32(0.5)},
		{"bool", "bool", codec.Bool().Append(nil, true), true},
		{"string", "string", codec.String().Append(nil, "héllo"), "héllo"},
		{"bytes", "[]uint8", codec.Bytes().Append(nil, []byte{1, 2}), []byte{1, 2}},
		{"duration", "time.Duration", codec.Duration().Append(nil, time.Second), time.Second},
		{"time", "time.Time", codec.Time().Append(nil, ts), ts},
	} {
		d, ok := codec.Lookup(tc.name)
		if !ok {
			t.Fatalf("built-in %q is not registered", tc.name)
		}
		if d.Type() != tc.typ {
			t.Errorf("%s: Type() = %q, want %q", tc.name, d.Type(), tc.typ)
		}
		if got := decodeAny(t, tc.name, tc.enc); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: decoded %#v, want %#v", tc.name, got, tc.want)
		}
	}
	if !slices.Contains(codec.Registered(), "string") {
		t.Errorf("Registered() = %v lacks string", codec.Registered())
	}
}

func TestLookupComposites(t *testing.T) {
	pc := codec.PairOf(codec.String(), codec.SliceOf(codec.Int64()))
	enc := pc.Append(nil, codec.Pair[string, []int64]{"a", []int64{1, 2}})
	got := decodeAny(t, codec.NameOf(pc), enc)
	want := codec.Pair[any, any]{First: "a", Second: []any{int64(1), int64(2)}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("pair(string,slice(int64)) decoded %#v, want %#v", got, want)
	}
	if got := decodeAny(t, "slice(bool)", codec.SliceOf(codec.Bool()).Append(nil, nil)); got != nil && !reflect.DeepEqual(got, []any(nil)) {
		t.Errorf("empty slice decoded %#v", got)
	}

	// Corrupt input fails as the typed codec would.
	d, _ := codec.Lookup("pair(string,int64)")
	if _, _, err := d.DecodeAny([]byte{1, 'x', 0}); !errors.Is(err, codec.ErrCorrupt) {
		t.Errorf("truncated pair: err %v, want ErrCorrupt", err)
	}

	for _, bad := range []string{"pair(string)", "pair(string,int64,bool)", "pair(,int64)", "slice(nosuch)",
		"pair(string,nosuch)", "slice(pair(string,int64)", "nosuch", "slice()"} {
		if _, ok := codec.Lookup(bad); ok {
			t.Errorf("Lookup(%q) found a codec", bad)
		}
	}
}

func TestRegisterUserCodec(t *testing.T) {
	name := codec.NameOf(vecCodec{})
	if _, ok := codec.Lookup(name); ok {
		t.Fatalf("%s registered before Register", name)
	}
	if got := codec.Register[vec](vecCodec{}); got != name {
		t.Errorf("Register returned %q, want %q", got, name)
	}
	enc := vecCodec{}.Append(nil, vec{3, -4})
	if got := decodeAny(t, name, enc); got != (vec{3, -4}) {
		t.Errorf("decoded %#v", got)
	}
	// Composites of it resolve from its registration.
	sl := codec.SliceOf[vec](vecCodec{})
	got := decodeAny(t, codec.NameOf(sl), sl.Append(nil, []vec{{1, 2}, {5, 6}}))
	if want := []any{vec{1, 2}, vec{5, 6}}; !reflect.DeepEqual(got, want) {
		t.Errorf("slice of points decoded %#v, want %#v", got, want)
	}

	// A named codec is found under its name.
	nc := codec.WithName("geo.vec/v1", codec.Func(vecCodec{}.Append, vecCodec{}.Decode))
	codec.Register(nc)
	if got := decodeAny(t, "geo.vec/v1", nc.Append(nil, vec{7, 8})); got != (vec{7, 8}) {
		t.Errorf("named codec decoded %#v", got)
	}
	d, _ := codec.Lookup("geo.vec/v1")
	if d.Type() != "codec_test.vec" {
		t.Errorf("named codec Type() = %q", d.Type())
	}
}
