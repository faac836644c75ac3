package stateread

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/weirstream/weir/codec"
)

// Datum is one key, namespace, value, list element, map key or map value:
// decoded with its codec when the snapshot names the codec and the codec
// registry has it, else its raw bytes.
//
// JSON: a decoded datum is {"value": <the value as JSON>}, or
// {"text": "<the value as fmt %+v>"} for values without a JSON form (NaN);
// a raw one is {"hex": "<bytes>"} with "utf8" when the bytes, or the bytes
// after a uvarint length prefix that covers the rest of them (the encoding
// of codec.String), are printable text, "codec" naming the codec when the
// snapshot does, and "error" saying why it was not decoded. A value or
// element of a state with TTL has "ttlTimestamp" (Unix ms) too.
type Datum struct {
	// Decoded is set when Value holds the decoded value.
	Decoded bool
	Value   any
	// Raw is the encoding; Codec the codec's name if known; Err why
	// decoding failed or was not tried.
	Raw   []byte
	Codec string
	Err   string
	// TTL is the TTL timestamp (Unix ms) of a value or element of a state
	// with TTL, else 0.
	TTL int64
}

// decoder of one codec name, looked up once per state.
type valueDecoder struct {
	name string        // "" when the snapshot does not say
	d    codec.Decoder // nil when the registry does not have it
}

func newValueDecoder(name string) valueDecoder {
	vd := valueDecoder{name: name}
	if name != "" {
		vd.d, _ = codec.Lookup(name)
	}
	return vd
}

// decode decodes b, which must be exactly one encoding. b is copied.
func (vd valueDecoder) decode(b []byte) Datum {
	if vd.d == nil {
		d := Datum{Raw: bytes.Clone(b), Codec: vd.name}
		if vd.name != "" {
			d.Err = "codec not registered"
		}
		return d
	}
	v, n, err := vd.d.DecodeAny(b)
	switch {
	case err != nil:
		return Datum{Raw: bytes.Clone(b), Codec: vd.name, Err: err.Error()}
	case n != len(b):
		return Datum{Raw: bytes.Clone(b), Codec: vd.name, Err: fmt.Sprintf("the codec decoded %d of %d bytes", n, len(b))}
	}
	return Datum{Decoded: true, Value: v, Codec: vd.name}
}

// printable returns b as text if it is valid UTF-8 of printable characters
// (spaces included), or the same for the bytes after a uvarint length
// prefix that covers exactly the rest.
func printable(b []byte) (string, bool) {
	ok := func(b []byte) bool {
		if len(b) == 0 || !utf8.Valid(b) {
			return false
		}
		for _, r := range string(b) {
			if !unicode.IsPrint(r) && r != ' ' {
				return false
			}
		}
		return true
	}
	if ok(b) {
		return string(b), true
	}
	if l, n := binary.Uvarint(b); n > 0 && l == uint64(len(b)-n) && ok(b[n:]) {
		return string(b[n:]), true
	}
	return "", false
}

// MarshalJSON writes the shape documented on Datum.
func (d Datum) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	field := func(name string, v any) {
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(name)
		b.Write(k)
		b.WriteByte(':')
		enc, err := json.Marshal(v)
		if err != nil {
			enc, _ = json.Marshal(fmt.Sprint(v))
		}
		b.Write(enc)
	}
	if d.Decoded {
		if enc, err := json.Marshal(d.Value); err == nil {
			b.WriteString(`"value":`)
			b.Write(enc)
		} else {
			field("text", fmt.Sprintf("%+v", d.Value))
		}
	} else {
		field("hex", hex.EncodeToString(d.Raw))
		if s, ok := printable(d.Raw); ok {
			field("utf8", s)
		}
		if d.Codec != "" {
			field("codec", d.Codec)
		}
		if d.Err != "" {
			field("error", d.Err)
		}
	}
	if d.TTL != 0 {
		field("ttlTimestamp", d.TTL)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// String is the datum's text form: the decoded value (strings quoted,
// bytes in hex, times in RFC 3339, pairs as (a, b), structs as %+v), or
// 0x<hex> followed by the text the bytes hold and, when the codec is
// named, <codec: why not decoded>.
func (d Datum) String() string {
	if d.Decoded {
		return formatValue(d.Value)
	}
	var b strings.Builder
	if len(d.Raw) == 0 {
		b.WriteString("0x (empty)")
	} else {
		b.WriteString("0x")
		b.WriteString(hex.EncodeToString(d.Raw))
	}
	if s, ok := printable(d.Raw); ok {
		b.WriteString(" ")
		b.WriteString(strconv.Quote(s))
	}
	if d.Codec != "" {
		fmt.Fprintf(&b, " <%s: %s>", d.Codec, d.Err)
	}
	return b.String()
}

var pairType = reflect.TypeFor[codec.Pair[any, any]]()

func formatValue(v any) string {
	switch v := v.(type) {
	case nil:
		return "<nil>"
	case string:
		return strconv.Quote(v)
	case []byte:
		return "0x" + hex.EncodeToString(v)
	case time.Time:
		return v.UTC().Format(time.RFC3339Nano)
	case time.Duration:
		return v.String()
	case codec.Pair[any, any]:
		return "(" + formatValue(v.First) + ", " + formatValue(v.Second) + ")"
	case []any:
		parts := make([]string, len(v))
		for i, e := range v {
			parts[i] = formatValue(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case fmt.Stringer:
		return fmt.Sprint(v) // fmt recovers from a String method that panics
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Slice, reflect.Array:
		if rv.Kind() == reflect.Slice && rv.IsNil() {
			return "[]"
		}
		parts := make([]string, rv.Len())
		for i := range parts {
			parts[i] = formatValue(rv.Index(i).Interface())
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case reflect.Struct:
		// A typed pair (a registered PairOf codec) prints like the
		// resolved ones.
		if rv.NumField() == 2 && strings.HasPrefix(rv.Type().String(), "codec.Pair[") && rv.Type().PkgPath() == pairType.PkgPath() {
			return "(" + formatValue(rv.Field(0).Interface()) + ", " + formatValue(rv.Field(1).Interface()) + ")"
		}
	}
	return fmt.Sprintf("%+v", v)
}
