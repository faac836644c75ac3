// Package codec provides typed binary codecs for records that cross task
// boundaries.
//
// A [Codec] appends the encoding of a value to a byte slice and decodes one
// value back from the front of a byte slice. Codecs are chosen once, when a
// graph is built (explicitly, or with [For] or [MustFor]), and are then used
// per record without reflection. Codecs for fixed-size types never allocate;
// decoding a string, byte slice or slice allocates exactly the copy it
// returns.
//
// # Wire format
//
// Every encoding is self-delimiting, so encodings can be concatenated into
// one buffer and decoded in sequence without extra framing. Fixed-width
// integers are little-endian. A uvarint is the unsigned varint of
// [encoding/binary] ([binary.AppendUvarint]).
//
//	Codec       Go type          Encoding
//	Int64       int64            8 bytes, two's complement
//	Int         int              8 bytes, as Int64
//	Int32       int32            4 bytes, two's complement
//	Uint64      uint64           8 bytes
//	Uint32      uint32           4 bytes
//	Float64     float64          8 bytes, IEEE 754 bits (math.Float64bits)
//	Float32     float32          4 bytes, IEEE 754 bits (math.Float32bits)
//	Bool        bool             1 byte, 0 (false) or 1 (true)
//	String      string           uvarint byte length, then the bytes
//	Bytes       []byte           uvarint byte length, then the bytes
//	Duration    time.Duration    8 bytes, int64 nanoseconds
//	Time        time.Time        8 bytes, int64 t.UnixNano()
//	PairOf      Pair[A, B]       encoding of First, then encoding of Second
//	SliceOf     []T              uvarint element count, then each element
//	Func        any              whatever the user functions produce
//
// Floats keep their exact bit pattern, including the sign of zero and NaN
// payloads. Strings are opaque bytes: invalid UTF-8 round-trips unchanged.
//
// # Canonical encodings
//
// Decoders accept exactly the bytes the encoders produce and reject
// everything else with an error wrapping [ErrCorrupt]: truncated input,
// uvarints that are over-long (not minimally encoded) or overflow 64 bits,
// Bool bytes other than 0 and 1, lengths and counts larger than the
// remaining input, and, for Int on 32-bit platforms, values that do not fit
// in an int. Hence, for the built-in codecs and combinators built from them,
// if Decode(src) returns v and n, then Append(nil, v) equals src[:n].
//
// # Edge cases
//
// A zero-length string decodes to "". A nil or empty []byte encodes as
// length 0, which decodes to a nil []byte; likewise a nil or empty slice
// encodes as count 0, which decodes to a nil slice. Non-empty results are
// fresh copies that never alias the decoded input.
//
// Time keeps only the instant: the location and the monotonic clock reading
// are dropped, and decoded values are time.Unix(0, n) in UTC, so compare them
// with [time.Time.Equal]. As with [time.Time.UnixNano], instants before the
// year 1678 or after 2262 do not survive; in particular the zero Time does
// not decode as the zero Time.
//
// Every built-in encoding is at least one byte long. SliceOf relies on this
// to reject hostile counts before allocating: a count larger than the number
// of remaining bytes is corrupt. Element codecs made with [Func] must
// therefore also encode every value in at least one byte.
//
// # Names and the registry
//
// Every codec has a name ([NameOf]): the built-ins are "int64", "string"
// and so on, PairOf and SliceOf compose "pair(A,B)" and "slice(E)", a codec
// with a CodecName method ([Named], [WithName]) has that name, and any other
// codec its Go type. Snapshots record the name of the codecs that wrote
// each keyed state; `weir savepoint read` looks the names up in the
// registry ([Register], [Lookup]) to decode the state offline. The
// built-ins are registered; a job registers its own codecs in an init
// function of its program.
package codec
