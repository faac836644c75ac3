package state

// Snapshots of keyed state: a backend-independent, key-group-ordered
// stream (Flink's canonical savepoint format in spirit) that both backends
// write from a point-in-time view and restore from, also into a backend
// owning only part of the stream's key groups (rescaling).
//
// # Stream format (version 1)
//
// All integers are unsigned varints (uvarint) unless stated otherwise;
// "bytes" is a uvarint length followed by that many bytes.
//
//	header:
//	  magic     8 bytes "WEIRKST\x00"
//	  version   uint32, big endian (1)
//	  start     uvarint: first key group written
//	  end       uvarint: last key group written (inclusive)
//	  nstates   uvarint
//	  nstates × state:
//	    name    bytes
//	    kind    1 byte: 1 value, 2 list, 3 map
//	    ttl     1 byte: 1 if entries carry TTL timestamps, else 0
//	end-start+1 × section, in increasing key-group order:
//	  keygroup  uvarint (start, start+1, ..., end: every key group has a
//	            section, an empty one has count and length 0)
//	  count     uvarint: number of entries
//	  length    uvarint: number of bytes of the entries that follow
//	  count × entry:
//	    state   uvarint: index in the state table
//	    key     bytes: the key codec's encoding of the key
//	    ns      bytes: the namespace (empty for plain keyed state)
//	    payload, by the state's kind:
//	      value: value bytes [ts]
//	      list:  uvarint n (≥ 1), n × (element bytes [ts]), in list order
//	      map:   uvarint n (≥ 1), n × (map key bytes, value bytes [ts])
//	trailer:
//	  crc       uint32, big endian: CRC-32C (Castagnoli) of every byte
//	            before it
//
// where value, element and map key bytes are the encodings of the state's
// codecs, and ts (present only for states with the ttl flag) is the entry's
// or element's TTL timestamp, Unix milliseconds, int64 little endian.
//
// The state table is sorted by name. Within a section, entries are sorted
// by state index, then by uvarint(len(key)) | key | uvarint(len(ns)) | ns
// as bytes; a map's pairs are sorted by their encoded map key. (This is the
// order of the Pebble backend's keys, with states in name order instead of
// id order, so Pebble writes without sorting.) The output is therefore a
// function of the logical state alone: the heap and the Pebble backend
// holding the same state write identical bytes.
//
// Expired entries that were not cleaned up yet are written as they are,
// with their timestamps, and restored as such: they expire on access or
// cleanup after the restore exactly as they would have before (Flink also
// keeps the original timestamps). Skipping them at write time would make
// the output depend on the clock reading of the writer.
//
// # Restoring a key-group range
//
// Restore stream-filters: it reads the whole stream (the CRC covers all of
// it) and decodes only the sections of key groups in the target backend's
// range, skipping the others by their length. WriteStream returns the offset
// of every section (KeyGroupOffsets), so a checkpoint store that wants to
// fetch only a byte range can; the reader here does not use them.
//
// # Lazy adoption
//
// The stream carries no Go types. Restore stores the encoded entries under
// the state names, and a state adopts them when it is registered with its
// descriptor (NewValue, NewList, NewMap...): the heap backend keeps them
// pending per state name and decodes them with the descriptor's codecs at
// registration; the Pebble backend writes them as they are under a state id
// it assigns to the name at restore, which registration then finds. A
// registration whose kind or TTL-ness differs from the restored state's
// fails with ErrIncompatibleState.

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
)

// ErrCorruptSnapshot is wrapped by the errors Restore returns for a stream
// that is truncated, malformed, or fails its checksum.
var ErrCorruptSnapshot = errors.New("state: corrupt snapshot")

const (
	snapMagic   = "WEIRKST\x00"
	snapVersion = 1
	// snapMaxName bounds a state name read from a stream, so that a corrupt
	// length cannot make the reader allocate without bound.
	snapMaxName = 1 << 16
)

var snapCRCTable = crc32.MakeTable(crc32.Castagnoli)

// Snapshot is a consistent point-in-time view of a backend's keyed state,
// taken synchronously (heap: copy-on-write freeze, O(states × key groups);
// Pebble: a Pebble snapshot, O(1), plus a copy of the state registry) and
// written asynchronously, possibly from another goroutine while the task
// keeps using the backend.
//
// WriteStream may be called from any one goroutine at a time, any number of
// times, until Release; writes to the backend after TakeSnapshot never show
// in its output. Release must be called exactly once when the snapshot is
// no longer needed (further calls do nothing), after WriteStream has returned
// and before the backend is closed: the heap backend copies maps on write
// while a snapshot is live, and a Pebble snapshot pins its database (Close
// with an unreleased snapshot reports an error).
//
// (The method is not called WriteTo: that name promises io.WriterTo's
// signature, which go vet checks.)
type Snapshot interface {
	// WriteStream writes the state of every key group in the backend's range
	// in the canonical format (see the package's snapshot.go) to w, and
	// returns where each key group's section starts. It returns an error
	// of w, or of the storage, or after Release.
	WriteStream(w io.Writer) (KeyGroupOffsets, error)
	// Release frees the frozen view or the Pebble snapshot.
	Release()
}

// KeyGroupOffsets locates the sections of a snapshot stream.
type KeyGroupOffsets struct {
	// Start is the first key group of the stream.
	Start int
	// Offsets[i] is the byte offset from the start of the stream of the
	// section of key group Start+i; its last element, one past the
	// sections, is the offset of the trailer.
	Offsets []int64
}

// Section returns the byte range [from, to) of key group kg's section, and
// false if kg is not in the stream.
func (o KeyGroupOffsets) Section(kg int) (from, to int64, ok bool) {
	i := kg - o.Start
	if i < 0 || i+1 >= len(o.Offsets) {
		return 0, 0, false
	}
	return o.Offsets[i], o.Offsets[i+1], true
}

// TakeSnapshot freezes b's keyed state. It must be called on the task's
// goroutine, like every other use of b; the returned Snapshot may then be
// written from any goroutine.
func TakeSnapshot(b Backend) (Snapshot, error) {
	switch b := b.(type) {
	case *HeapBackend:
		return takeHeapSnapshot(b)
	case *PebbleBackend:
		return takePebbleSnapshot(b)
	case *ChangelogBackend:
		return TakeSnapshot(b.inner)
	}
	return nil, fmt.Errorf("state: unknown backend %T", b)
}

// Restore reads a snapshot stream from r and stores the entries of the key
// groups in b's range in b, which must not have any state registered yet
// (restore first, then let the operators register their states). It may be
// called several times, with streams of disjoint key-group ranges (scaling
// in: one subtask takes over the key groups of several old ones).
//
// Entries are stored as the stream is read and the checksum is checked at
// the end, so after an error b holds an unspecified part of the stream and
// must be discarded (closed). Errors about the stream wrap
// ErrCorruptSnapshot; a state that two streams give different kinds or
// TTL-ness fails with ErrIncompatibleState.
func Restore(b Backend, r io.Reader) error {
	if cb, ok := b.(*ChangelogBackend); ok {
		b = cb.inner
	}
	var sink snapSink
	switch b := b.(type) {
	case *HeapBackend:
		s, err := newHeapSnapSink(b)
		if err != nil {
			return err
		}
		sink = s
	case *PebbleBackend:
		s, err := newPebbleSnapSink(b)
		if err != nil {
			return err
		}
		sink = s
	default:
		return fmt.Errorf("state: unknown backend %T", b)
	}
	start, end := b.KeyGroupRange()
	if err := readSnapshot(r, start, end, sink); err != nil {
		sink.abort()
		return err
	}
	return sink.finish()
}

// snapState is an entry of the state table.
type snapState struct {
	name string
	kind stateKind
	ttl  bool
}

// compatible checks that a restored state st may be registered, or
// restored again, as kind with or without TTL.
func (st snapState) compatible(kind stateKind, ttl bool) error {
	if st.kind != kind {
		return fmt.Errorf("%w: restored state %q is a %s state, not a %s state", ErrIncompatibleState, st.name, st.kind, kind)
	}
	if st.ttl != ttl {
		return fmt.Errorf("%w: restored state %q has TTL %v, the registration %v", ErrIncompatibleState, st.name, onOff(st.ttl), onOff(ttl))
	}
	return nil
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// snapItem is one value of an entry: the value of a value state, a list
// element, or a map pair (userKey is the encoded map key). ts is the TTL
// timestamp, 0 for states without TTL.
type snapItem struct {
	userKey, value []byte
	ts             int64
}

// snapRecord is one entry of a section: a (key, namespace) of a state and
// its items (one for a value state).
type snapRecord struct {
	key, ns []byte
	items   []snapItem
}

// snapSortKey appends the bytes that order records within a state and key
// group: uvarint(len(key)) | key | uvarint(len(ns)) | ns.
func snapSortKey(dst, key, ns []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(key)))
	dst = append(dst, key...)
	dst = binary.AppendUvarint(dst, uint64(len(ns)))
	return append(dst, ns...)
}

// snapSource is a frozen view that writeSnapshot serializes.
type snapSource interface {
	// keyGroups returns the inclusive key-group range to write.
	keyGroups() (start, end int)
	// states returns the state table, sorted by name.
	states() []snapState
	// records calls fn with every record of state i (its index in states)
	// in key group kg, in the stream's order. The record and its slices are
	// valid only during the call.
	records(kg, i int, fn func(rec *snapRecord)) error
}

// writeSnapshot writes src to w in the stream format.
func writeSnapshot(w io.Writer, src snapSource) (KeyGroupOffsets, error) {
	cw := &snapWriter{w: bufio.NewWriterSize(w, 64<<10), crc: crc32.New(snapCRCTable)}
	start, end := src.keyGroups()
	sts := src.states()
	buf := append([]byte(nil), snapMagic...)
	buf = binary.BigEndian.AppendUint32(buf, snapVersion)
	buf = binary.AppendUvarint(buf, uint64(start))
	buf = binary.AppendUvarint(buf, uint64(end))
	buf = binary.AppendUvarint(buf, uint64(len(sts)))
	for _, st := range sts {
		buf = snapAppendBytes(buf, []byte(st.name))
		ttl := byte(0)
		if st.ttl {
			ttl = 1
		}
		buf = append(buf, byte(st.kind), ttl)
	}
	cw.write(buf)
	offs := KeyGroupOffsets{Start: start, Offsets: make([]int64, 0, end-start+2)}
	var body, hdr []byte
	for kg := start; kg <= end && cw.err == nil; kg++ {
		body = body[:0]
		n := 0
		for i, st := range sts {
			err := src.records(kg, i, func(rec *snapRecord) {
				body = snapAppendRecord(body, i, st, rec)
				n++
			})
			if err != nil {
				return KeyGroupOffsets{}, fmt.Errorf("state: snapshot key group %d: %w", kg, err)
			}
		}
		offs.Offsets = append(offs.Offsets, cw.n)
		hdr = binary.AppendUvarint(hdr[:0], uint64(kg))
		hdr = binary.AppendUvarint(hdr, uint64(n))
		hdr = binary.AppendUvarint(hdr, uint64(len(body)))
		cw.write(hdr)
		cw.write(body)
	}
	offs.Offsets = append(offs.Offsets, cw.n)
	sum := cw.crc.Sum32()
	cw.write(binary.BigEndian.AppendUint32(hdr[:0], sum))
	if cw.err == nil {
		cw.err = cw.w.Flush()
	}
	if cw.err != nil {
		return KeyGroupOffsets{}, fmt.Errorf("state: write snapshot: %w", cw.err)
	}
	return offs, nil
}

// snapAppendRecord appends the encoding of rec, an entry of state i.
func snapAppendRecord(dst []byte, i int, st snapState, rec *snapRecord) []byte {
	dst = binary.AppendUvarint(dst, uint64(i))
	dst = snapAppendBytes(dst, rec.key)
	dst = snapAppendBytes(dst, rec.ns)
	if st.kind != kindValue {
		dst = binary.AppendUvarint(dst, uint64(len(rec.items)))
	}
	for _, it := range rec.items {
		if st.kind == kindMap {
			dst = snapAppendBytes(dst, it.userKey)
		}
		dst = snapAppendBytes(dst, it.value)
		if st.ttl {
			dst = binary.LittleEndian.AppendUint64(dst, uint64(it.ts))
		}
	}
	return dst
}

func snapAppendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

// snapWriter counts and checksums what it writes, and keeps the first
// error.
type snapWriter struct {
	w   *bufio.Writer
	crc hash.Hash32
	n   int64
	err error
}

func (w *snapWriter) write(p []byte) {
	if w.err != nil {
		return
	}
	_, w.err = w.w.Write(p)
	w.crc.Write(p)
	w.n += int64(len(p))
}

// snapSink receives a stream being restored.
type snapSink interface {
	// states receives the stream's state table, before any record; it
	// checks it against what the sink already holds.
	states(sts []snapState) error
	// record receives an entry of state i (its index in the table) in key
	// group kg, which is in the backend's range. The byte slices of rec
	// belong to the sink (they are not reused); rec and rec.items are
	// reused after the call.
	record(kg, i int, rec *snapRecord) error
	// finish completes the restore of a stream that passed every check.
	finish() error
	// abort drops what it can after an error.
	abort()
}

// snapReader reads a stream and checksums what it reads.
type snapReader struct {
	r   *bufio.Reader
	crc hash.Hash32
	n   int64
}

func snapCorrupt(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrCorruptSnapshot}, args...)...)
}

// readErr translates a read error: a stream that ends early is corrupt.
func (r *snapReader) readErr(what string, err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return snapCorrupt("truncated at byte %d reading %s", r.n, what)
	}
	return fmt.Errorf("state: read snapshot: %s: %w", what, err)
}

func (r *snapReader) full(p []byte, what string) error {
	if _, err := io.ReadFull(r.r, p); err != nil {
		return r.readErr(what, err)
	}
	r.crc.Write(p)
	r.n += int64(len(p))
	return nil
}

func (r *snapReader) uvarint(what string) (uint64, error) {
	var x uint64
	for i := 0; i < binary.MaxVarintLen64; i++ {
		c, err := r.r.ReadByte()
		if err != nil {
			return 0, r.readErr(what, err)
		}
		r.crc.Write([]byte{c})
		r.n++
		if c < 0x80 {
			if i == binary.MaxVarintLen64-1 && c > 1 {
				break
			}
			return x | uint64(c)<<(7*i), nil
		}
		x |= uint64(c&0x7f) << (7 * i)
	}
	return 0, snapCorrupt("uvarint overflows 64 bits reading %s at byte %d", what, r.n)
}

// body reads n bytes into a new buffer that grows as the bytes arrive, so
// a corrupt length fails as a truncation instead of a huge allocation; with
// keep false it discards them.
func (r *snapReader) body(n uint64, keep bool, what string) ([]byte, error) {
	var dst io.Writer = io.Discard
	var buf bytes.Buffer
	if keep {
		dst = &buf
	}
	got, err := io.CopyN(io.MultiWriter(dst, r.crc), r.r, int64(min(n, 1<<62)))
	r.n += got
	if err != nil {
		return nil, r.readErr(what, err)
	}
	return buf.Bytes(), nil
}

// readSnapshot reads a stream from r and gives sink the entries of the key
// groups in [start, end].
func readSnapshot(rd io.Reader, start, end int, sink snapSink) error {
	r := &snapReader{r: bufio.NewReaderSize(rd, 64<<10), crc: crc32.New(snapCRCTable)}
	var hdr [12]byte
	if err := r.full(hdr[:], "header"); err != nil {
		return err
	}
	if string(hdr[:8]) != snapMagic {
		return snapCorrupt("bad magic %q", hdr[:8])
	}
	if v := binary.BigEndian.Uint32(hdr[8:]); v != snapVersion {
		return snapCorrupt("unknown version %d", v)
	}
	sStart, err := r.uvarint("start key group")
	if err != nil {
		return err
	}
	sEnd, err := r.uvarint("end key group")
	if err != nil {
		return err
	}
	if sEnd < sStart || sEnd > 1<<31 {
		return snapCorrupt("key-group range [%d, %d]", sStart, sEnd)
	}
	nstates, err := r.uvarint("state count")
	if err != nil {
		return err
	}
	if nstates > pebbleMaxStates {
		return snapCorrupt("%d states", nstates)
	}
	sts := make([]snapState, nstates)
	for i := range sts {
		l, err := r.uvarint("state name length")
		if err != nil {
			return err
		}
		if l > snapMaxName {
			return snapCorrupt("state name of %d bytes", l)
		}
		name := make([]byte, l+2)
		if err := r.full(name, "state"); err != nil {
			return err
		}
		st := snapState{name: string(name[:l]), kind: stateKind(name[l])}
		if st.kind < kindValue || st.kind > kindMap || name[l+1] > 1 {
			return snapCorrupt("state %q: kind %d, ttl flag %d", st.name, name[l], name[l+1])
		}
		st.ttl = name[l+1] == 1
		if i > 0 && sts[i-1].name >= st.name {
			return snapCorrupt("state table not sorted by name at %q", st.name)
		}
		sts[i] = st
	}
	if err := sink.states(sts); err != nil {
		return err
	}
	var rec snapRecord
	for kg := sStart; kg <= sEnd; kg++ {
		got, err := r.uvarint("key group")
		if err != nil {
			return err
		}
		if got != kg {
			return snapCorrupt("section of key group %d where %d was expected", got, kg)
		}
		count, err := r.uvarint("entry count")
		if err != nil {
			return err
		}
		length, err := r.uvarint("section length")
		if err != nil {
			return err
		}
		keep := kg >= uint64(start) && kg <= uint64(end)
		body, err := r.body(length, keep, "section")
		if err != nil || !keep {
			if err != nil {
				return fmt.Errorf("key group %d: %w", kg, err)
			}
			continue
		}
		if err := snapDecodeSection(body, count, sts, func(i int) error { return sink.record(int(kg), i, &rec) }, &rec); err != nil {
			return fmt.Errorf("key group %d: %w", kg, err)
		}
	}
	sum := r.crc.Sum32()
	var tr [4]byte
	if _, err := io.ReadFull(r.r, tr[:]); err != nil {
		return r.readErr("trailer", err)
	}
	if got := binary.BigEndian.Uint32(tr[:]); got != sum {
		return snapCorrupt("checksum %08x, computed %08x", got, sum)
	}
	if _, err := r.r.ReadByte(); err != io.EOF {
		if err != nil {
			return fmt.Errorf("state: read snapshot: %w", err)
		}
		return snapCorrupt("bytes after the trailer")
	}
	return nil
}

// snapDecodeSection decodes count entries that must fill body, calling emit
// with each one's state index after filling rec.
func snapDecodeSection(body []byte, count uint64, sts []snapState, emit func(i int) error, rec *snapRecord) error {
	d := snapDecoder{b: body}
	for n := uint64(0); n < count; n++ {
		i := d.uvarint()
		if d.err == nil && i >= uint64(len(sts)) {
			return snapCorrupt("state index %d of %d states", i, len(sts))
		}
		rec.key = d.bytes()
		rec.ns = d.bytes()
		if d.err != nil {
			return d.err
		}
		st := sts[i]
		items := uint64(1)
		if st.kind != kindValue {
			items = d.uvarint()
			if d.err == nil && (items == 0 || items > uint64(len(d.b))) {
				return snapCorrupt("%s entry of state %q with %d items", st.kind, st.name, items)
			}
		}
		rec.items = rec.items[:0]
		for j := uint64(0); j < items && d.err == nil; j++ {
			var it snapItem
			if st.kind == kindMap {
				it.userKey = d.bytes()
			}
			it.value = d.bytes()
			if st.ttl {
				it.ts = d.int64()
			}
			rec.items = append(rec.items, it)
		}
		if d.err != nil {
			return d.err
		}
		if err := emit(int(i)); err != nil {
			return err
		}
	}
	if len(d.b) != 0 {
		return snapCorrupt("%d bytes after %d entries", len(d.b), count)
	}
	return nil
}

// snapDecoder decodes the fields of a section body, keeping the first
// error.
type snapDecoder struct {
	b   []byte
	err error
}

func (d *snapDecoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	x, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = snapCorrupt("bad uvarint in section")
		return 0
	}
	d.b = d.b[n:]
	return x
}

func (d *snapDecoder) bytes() []byte {
	l := d.uvarint()
	if d.err != nil {
		return nil
	}
	if l > uint64(len(d.b)) {
		d.err = snapCorrupt("length %d exceeds %d remaining bytes of the section", l, len(d.b))
		return nil
	}
	out := d.b[:l:l]
	d.b = d.b[l:]
	return out
}

func (d *snapDecoder) int64() int64 {
	if d.err != nil {
		return 0
	}
	if len(d.b) < 8 {
		d.err = snapCorrupt("truncated timestamp")
		return 0
	}
	v := int64(binary.LittleEndian.Uint64(d.b))
	d.b = d.b[8:]
	return v
}
