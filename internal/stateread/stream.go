package stateread

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
)

// A reader of the canonical keyed-state stream (format version 1, as
// documented at the top of internal/state/snapshot.go). The state package
// reads the stream only into a backend, which needs every state's Go types
// to hand values out; this reader hands out the encoded bytes.

// errCorrupt is wrapped by the errors of a stream that does not parse.
var errCorrupt = errors.New("corrupt keyed state stream")

const (
	streamMagic   = "WEIRKST\x00"
	streamVersion = 1
	maxStates     = 1<<16 - 1
	maxNameLen    = 1 << 16
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// streamState is an entry of a stream's state table.
type streamState struct {
	name string
	kind string // "value", "list" or "map"
	ttl  bool
}

// item is a value of an entry: a value state's value, a list element or a
// map pair (mapKey set). ts is the TTL timestamp (Unix ms) of states with
// TTL.
type item struct {
	mapKey, value []byte
	ts            int64
}

// entry is one (key, namespace) of a state in a key group.
type entry struct {
	keyGroup int
	key, ns  []byte
	items    []item
}

func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errCorrupt}, args...)...)
}

// crcReader checksums and counts what it reads.
type crcReader struct {
	r   *bufio.Reader
	crc uint32
	n   int64
}

func (r *crcReader) full(p []byte, what string) error {
	if _, err := io.ReadFull(r.r, p); err != nil {
		return r.readErr(what, err)
	}
	r.crc = crc32.Update(r.crc, crcTable, p)
	r.n += int64(len(p))
	return nil
}

func (r *crcReader) readErr(what string, err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return corrupt("truncated at byte %d reading %s", r.n, what)
	}
	return fmt.Errorf("read %s: %w", what, err)
}

func (r *crcReader) uvarint(what string) (uint64, error) {
	var x uint64
	for i := 0; i < binary.MaxVarintLen64; i++ {
		c, err := r.r.ReadByte()
		if err != nil {
			return 0, r.readErr(what, err)
		}
		r.crc = crc32.Update(r.crc, crcTable, []byte{c})
		r.n++
		if c < 0x80 {
			if i == binary.MaxVarintLen64-1 && c > 1 {
				break
			}
			return x | uint64(c)<<(7*i), nil
		}
		x |= uint64(c&0x7f) << (7 * i)
	}
	return 0, corrupt("uvarint overflows 64 bits reading %s at byte %d", what, r.n)
}

// readStream parses a stream: it calls states with the state table, then
// visit with every entry, in key-group order; the entry and its slices
// are valid only during the call. It checks the trailing checksum, after
// the last visit.
func readStream(rd io.Reader, states func([]streamState) error, visit func(st int, e *entry) error) error {
	r := &crcReader{r: bufio.NewReaderSize(rd, 64<<10)}
	var hdr [12]byte
	if err := r.full(hdr[:], "header"); err != nil {
		return err
	}
	if string(hdr[:8]) != streamMagic {
		return corrupt("bad magic %q", hdr[:8])
	}
	if v := binary.BigEndian.Uint32(hdr[8:]); v != streamVersion {
		return corrupt("format version %d, this build reads version %d", v, streamVersion)
	}
	start, err := r.uvarint("start key group")
	if err != nil {
		return err
	}
	end, err := r.uvarint("end key group")
	if err != nil {
		return err
	}
	if end < start || end > 1<<31 {
		return corrupt("key-group range [%d, %d]", start, end)
	}
	n, err := r.uvarint("state count")
	if err != nil {
		return err
	}
	if n > maxStates {
		return corrupt("%d states", n)
	}
	sts := make([]streamState, n)
	for i := range sts {
		l, err := r.uvarint("state name length")
		if err != nil {
			return err
		}
		if l > maxNameLen {
			return corrupt("state name of %d bytes", l)
		}
		b := make([]byte, l+2)
		if err := r.full(b, "state table"); err != nil {
			return err
		}
		st := streamState{name: string(b[:l])}
		switch b[l] {
		case 1:
			st.kind = "value"
		case 2:
			st.kind = "list"
		case 3:
			st.kind = "map"
		default:
			return corrupt("state %q has kind %d", st.name, b[l])
		}
		if b[l+1] > 1 {
			return corrupt("state %q has TTL flag %d", st.name, b[l+1])
		}
		st.ttl = b[l+1] == 1
		if i > 0 && sts[i-1].name >= st.name {
			return corrupt("state table not sorted by name at %q", st.name)
		}
		sts[i] = st
	}
	if err := states(sts); err != nil {
		return err
	}
	var (
		body []byte
		e    entry
	)
	for kg := start; kg <= end; kg++ {
		got, err := r.uvarint("key group")
		if err != nil {
			return err
		}
		if got != kg {
			return corrupt("section of key group %d where %d was expected", got, kg)
		}
		count, err := r.uvarint("entry count")
		if err != nil {
			return err
		}
		length, err := r.uvarint("section length")
		if err != nil {
			return err
		}
		if length > 1<<40 {
			return corrupt("key group %d: section of %d bytes", kg, length)
		}
		// Read the section in pieces, so that a corrupt length fails as a
		// truncation rather than a huge allocation.
		body = body[:0]
		for rem := length; rem > 0; {
			chunk := min(rem, 1<<20)
			off := len(body)
			body = slices.Grow(body, int(chunk))[:off+int(chunk)]
			if err := r.full(body[off:], "section"); err != nil {
				return fmt.Errorf("key group %d: %w", kg, err)
			}
			rem -= chunk
		}
		if err := decodeSection(body, int(kg), count, sts, &e, visit); err != nil {
			return fmt.Errorf("key group %d: %w", kg, err)
		}
	}
	sum := r.crc
	var tr [4]byte
	if _, err := io.ReadFull(r.r, tr[:]); err != nil {
		return r.readErr("trailer", err)
	}
	if got := binary.BigEndian.Uint32(tr[:]); got != sum {
		return corrupt("checksum %08x, computed %08x", got, sum)
	}
	if _, err := r.r.ReadByte(); err != io.EOF {
		if err != nil {
			return fmt.Errorf("read trailer: %w", err)
		}
		return corrupt("bytes after the trailer")
	}
	return nil
}

// decodeSection decodes the count entries that fill body.
func decodeSection(body []byte, kg int, count uint64, sts []streamState, e *entry, visit func(int, *entry) error) error {
	d := decoder{b: body}
	for range count {
		i := d.uvarint()
		if d.err == nil && i >= uint64(len(sts)) {
			return corrupt("state index %d of %d states", i, len(sts))
		}
		e.keyGroup = kg
		e.key = d.bytes()
		e.ns = d.bytes()
		if d.err != nil {
			return d.err
		}
		st := sts[i]
		n := uint64(1)
		if st.kind != "value" {
			n = d.uvarint()
			if d.err == nil && (n == 0 || n > uint64(len(d.b))) {
				return corrupt("%s entry of state %q with %d items", st.kind, st.name, n)
			}
		}
		e.items = e.items[:0]
		for j := uint64(0); j < n && d.err == nil; j++ {
			var it item
			if st.kind == "map" {
				it.mapKey = d.bytes()
			}
			it.value = d.bytes()
			if st.ttl {
				it.ts = d.int64()
			}
			e.items = append(e.items, it)
		}
		if d.err != nil {
			return d.err
		}
		if err := visit(int(i), e); err != nil {
			return err
		}
	}
	if len(d.b) != 0 {
		return corrupt("%d bytes after %d entries", len(d.b), count)
	}
	return nil
}

// decoder decodes the fields of a section, keeping the first error.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	x, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = corrupt("bad uvarint in section")
		return 0
	}
	d.b = d.b[n:]
	return x
}

func (d *decoder) bytes() []byte {
	l := d.uvarint()
	if d.err != nil {
		return nil
	}
	if l > uint64(len(d.b)) {
		d.err = corrupt("length %d exceeds the %d bytes left in the section", l, len(d.b))
		return nil
	}
	out := d.b[:l:l]
	d.b = d.b[l:]
	return out
}

func (d *decoder) int64() int64 {
	if d.err != nil {
		return 0
	}
	if len(d.b) < 8 {
		d.err = corrupt("truncated TTL timestamp")
		return 0
	}
	v := int64(binary.LittleEndian.Uint64(d.b))
	d.b = d.b[8:]
	return v
}
