package state

// The changelog wrapper: a Backend that forwards every access to another
// backend and appends every change to a log, after Flink's changelog state
// backend (FLIP-158).
//
// # Records
//
// Every write through a ChangelogBackend's states (value update/clear, list
// add/add-all/update/clear, map put/remove/clear; reducing and aggregating
// states are value states underneath) is applied to the wrapped backend and
// appended to the log as one record. For a state with TTL, the record
// carries the timestamp the wrapped backend stamped the entry with (the
// wrapper pins the wrapped backend's clock for the call, see ReplayClock),
// and reads that refresh or remove entries (UpdateType OnReadAndWrite, or
// visibility ReturnExpiredIfNotCleanedUp) are logged too, so that a replay
// leaves every live entry with the timestamp it had. Removals of expired
// entries are not logged (by CleanupExpired, or by a read of a state whose
// reads are not logged): after a replay such an entry is back, still
// expired, invisible to reads, and goes on the next access or cleanup; only
// the snapshot bytes differ.
//
// A record is
//
//	op      1 byte: the operation (opValueUpdate...), | 0x80 if ts follows
//	name    bytes: the state's name
//	kg      uvarint: key group
//	key     bytes: the key's encoding
//	ns      bytes: the namespace
//	[ts]    int64 little endian, Unix ms, if op has 0x80
//	payload by op: encoded values with the descriptor's codecs
//
// where bytes is a uvarint length and that many bytes.
//
// Op codes 0x40-0x7f are not the state's (IsStateRecord tells them apart).
// The keyed runtime logs its timer changes in the same log, in order with
// the state changes, as timer records:
//
//	op      1 byte: TimerRegisterEvent, TimerRegisterProcessing,
//	        TimerDeleteEvent or TimerDeleteProcessing (0x40-0x43)
//	kg      uvarint: key group
//	key     bytes: the key's encoding
//	ns      bytes: the namespace (empty: none)
//	ts      int64 little endian: the timer's time, Unix ms
//
// This file is the one definition of both record kinds.
//
// # Replay
//
// Records carry no Go types, so they are applied when their state is
// registered with its descriptor: Restore-time records go to AddRestored,
// which keeps them, per state name, until NewValue / NewList / NewMap
// registers the name on the ChangelogBackend and applies them, in log
// order, through the wrapped backend's typed states, with the clock pinned
// to each record's timestamp. Records of a state not registered yet are
// Pending: a snapshot of the wrapped backend does not contain them, so
// whoever takes one must carry them along (the keyed runtime re-appends
// them to the log after a materialization, or writes them next to a
// checkpoint).

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/weirstream/weir/codec"
)

// ChangeLog receives a ChangelogBackend's records. Append must copy rec.
type ChangeLog interface {
	Append(rec []byte) (seq int64, err error)
}

// FramedLog is a ChangeLog that also takes many records at once: frames
// is a sequence of uvarint(len) and len bytes, copied. A ChangelogBackend
// whose log is a FramedLog collects records and hands them over in chunks
// (see Flush), which spares a lock per state write.
type FramedLog interface {
	ChangeLog
	AppendFramed(frames []byte) (last int64, err error)
}

// flushSize is how many bytes of records a ChangelogBackend collects before
// it hands them to a FramedLog.
const flushSize = 32 << 10

// Operation codes of state records.
const (
	opValueUpdate byte = 0x01 + iota
	opValueClear
	opValueRead
	opListAdd
	opListAddAll
	opListUpdate
	opListClear
	opListRead
	opMapPut
	opMapRemove
	opMapClear
	opMapGet
	opMapContains
	opMapRange
	opMapIsEmpty
	opLast = opMapIsEmpty

	opTS byte = 0x80 // the record carries a timestamp
	// FirstForeignOp is the first op code the state package does not use:
	// codes FirstForeignOp..0x7f are free for other records in the same log.
	FirstForeignOp byte = 0x40
)

// IsStateRecord reports whether rec is a state record (else another layer's,
// such as a timer change).
func IsStateRecord(rec []byte) bool {
	return len(rec) > 0 && rec[0]&^opTS >= 0x01 && rec[0]&^opTS <= opLast
}

// TimerOp is the operation of a timer record.
type TimerOp byte

// Timer record operations.
const (
	TimerRegisterEvent TimerOp = TimerOp(FirstForeignOp) + iota
	TimerRegisterProcessing
	TimerDeleteEvent
	TimerDeleteProcessing
)

// TimerRecord is a timer change in the log (see the file comment).
type TimerRecord struct {
	Op        TimerOp
	KeyGroup  int
	Key       []byte
	Namespace []byte // nil: none
	Timestamp int64
}

// AppendTimerRecord appends the encoding of r to dst.
func AppendTimerRecord(dst []byte, r TimerRecord) []byte {
	dst = append(dst, byte(r.Op))
	dst = binary.AppendUvarint(dst, uint64(r.KeyGroup))
	dst = binary.AppendUvarint(dst, uint64(len(r.Key)))
	dst = append(dst, r.Key...)
	dst = binary.AppendUvarint(dst, uint64(len(r.Namespace)))
	dst = append(dst, r.Namespace...)
	return binary.LittleEndian.AppendUint64(dst, uint64(r.Timestamp))
}

// ParseTimerRecord decodes a timer record. Key and Namespace are copies,
// Namespace nil when empty.
func ParseTimerRecord(rec []byte) (TimerRecord, error) {
	bad := func(what string) (TimerRecord, error) {
		return TimerRecord{}, fmt.Errorf("%w: timer record: %s", ErrCorruptChangelog, what)
	}
	if len(rec) == 0 || TimerOp(rec[0]) < TimerRegisterEvent || TimerOp(rec[0]) > TimerDeleteProcessing {
		return bad("unknown operation")
	}
	r := TimerRecord{Op: TimerOp(rec[0])}
	p := rec[1:]
	kg, n := binary.Uvarint(p)
	if n <= 0 {
		return bad("key group")
	}
	r.KeyGroup, p = int(kg), p[n:]
	field := func() ([]byte, bool) {
		l, n := binary.Uvarint(p)
		if n <= 0 || l > uint64(len(p)-n) {
			return nil, false
		}
		f := append([]byte(nil), p[n:n+int(l)]...)
		p = p[n+int(l):]
		return f, true
	}
	key, ok1 := field()
	ns, ok2 := field()
	if !ok1 || !ok2 || len(p) != 8 {
		return bad("layout")
	}
	if len(ns) == 0 {
		ns = nil
	}
	r.Key, r.Namespace, r.Timestamp = key, ns, int64(binary.LittleEndian.Uint64(p))
	return r, nil
}

// ErrCorruptChangelog is wrapped by the errors for records that cannot be
// parsed or do not fit the state they are for.
var ErrCorruptChangelog = errors.New("state: corrupt changelog record")

// ReplayClock is the clock a ChangelogBackend gives the backend it wraps:
// normally the base clock, and a fixed instant while a change is applied,
// so that the timestamp the wrapped backend stamps an entry with is the one
// logged (and, on replay, the one read from the log).
type ReplayClock struct {
	base func() time.Time
	at   int64
	set  bool
}

// NewReplayClock returns a clock reading base (nil: time.Now).
func NewReplayClock(base func() time.Time) *ReplayClock {
	if base == nil {
		base = time.Now
	}
	return &ReplayClock{base: base}
}

// Now is the clock's reading: the pinned instant while one is set.
func (c *ReplayClock) Now() time.Time {
	if c.set {
		return time.UnixMilli(c.at)
	}
	return c.base()
}

func (c *ReplayClock) pin() int64 {
	c.at, c.set = c.base().UnixMilli(), true
	return c.at
}

func (c *ReplayClock) pinAt(ts int64) { c.at, c.set = ts, true }
func (c *ReplayClock) unpin()         { c.set = false }

// ChangelogBackend wraps a backend and logs every change made through the
// states registered on it. With a nil ChangeLog it only replays restored
// records (a job restoring a changelog checkpoint with the changelog off).
// Like every Backend it is used from one goroutine.
type ChangelogBackend struct {
	inner  Backend
	log    ChangeLog
	framed FramedLog // log, if it takes frames
	local  []byte    // records collected for framed, not handed over yet
	clock  *ReplayClock
	buf    []byte

	pending  map[string][][]byte // restored records of unregistered states, in log order
	replayed int64               // restored records applied so far
}

var _ Backend = (*ChangelogBackend)(nil)

// NewChangelogBackend wraps inner, which must have been created with
// clock.Now as its Options.Clock. log may be nil (replay only).
func NewChangelogBackend(inner Backend, clock *ReplayClock, log ChangeLog) *ChangelogBackend {
	b := &ChangelogBackend{inner: inner, clock: clock, pending: map[string][][]byte{}}
	b.SetLog(log)
	return b
}

// Inner returns the wrapped backend (to snapshot it).
func (b *ChangelogBackend) Inner() Backend { return b.inner }

// SetLog sets the log (nil: stop logging). Records collected for the
// previous log must have been flushed.
func (b *ChangelogBackend) SetLog(log ChangeLog) {
	b.log = log
	b.framed, _ = log.(FramedLog)
	b.local = b.local[:0]
}

// Flush hands the records collected so far to the log. Call it before
// reading the log's last sequence number (a checkpoint, a materialization):
// until then a FramedLog has not seen them.
func (b *ChangelogBackend) Flush() error {
	if len(b.local) == 0 || b.framed == nil {
		return nil
	}
	_, err := b.framed.AppendFramed(b.local)
	b.local = b.local[:0]
	return err
}

// AppendRaw logs a record of another layer (a timer change, whose op code
// is FirstForeignOp or above), in order with the state's records.
func (b *ChangelogBackend) AppendRaw(rec []byte) error {
	if b.log == nil {
		return nil
	}
	return b.push(rec)
}

// SetCurrentKey implements Backend.
func (b *ChangelogBackend) SetCurrentKey(key []byte, keyGroup int) {
	b.inner.SetCurrentKey(key, keyGroup)
}

// CurrentKey implements Backend.
func (b *ChangelogBackend) CurrentKey() []byte { return b.inner.CurrentKey() }

// CurrentKeyGroup implements Backend.
func (b *ChangelogBackend) CurrentKeyGroup() int { return b.inner.CurrentKeyGroup() }

// KeyGroupRange implements Backend.
func (b *ChangelogBackend) KeyGroupRange() (start, end int) { return b.inner.KeyGroupRange() }

// CleanupExpired implements Backend; removals are not logged (see the file
// comment).
func (b *ChangelogBackend) CleanupExpired(budget int) (int, error) {
	return b.inner.CleanupExpired(budget)
}

// Close closes the wrapped backend.
func (b *ChangelogBackend) Close() error { return b.inner.Close() }

// AddRestored takes one restored record, in log order. Records outside the
// backend's key groups are dropped (rescaling); state records wait for
// their state's registration. rec is kept, not copied: it must not be
// modified afterwards (replay hands out slices of a freshly read segment
// file, which nothing else writes to).
func (b *ChangelogBackend) AddRestored(rec []byte) error {
	r, err := parseRecord(rec)
	if err != nil {
		return err
	}
	if s, e := b.inner.KeyGroupRange(); r.kg < s || r.kg > e {
		return nil
	}
	b.pending[r.name] = append(b.pending[r.name], rec[:len(rec):len(rec)])
	return nil
}

// Pending returns the restored records of states not registered yet, by
// state name in name order and log order within a name. The slices must
// not be modified.
func (b *ChangelogBackend) Pending() [][]byte {
	names := make([]string, 0, len(b.pending))
	for n := range b.pending {
		names = append(names, n)
	}
	slices.Sort(names)
	var out [][]byte
	for _, n := range names {
		out = append(out, b.pending[n]...)
	}
	return out
}

// Replayed returns the number of restored records applied so far.
func (b *ChangelogBackend) Replayed() int64 { return b.replayed }

// record is a parsed record.
type record struct {
	op      byte // without opTS
	ttl     bool
	name    string
	kg      int
	key, ns []byte
	ts      int64
	payload []byte
}

func parseRecord(rec []byte) (record, error) {
	var r record
	bad := func(what string) (record, error) {
		return record{}, fmt.Errorf("%w: %s", ErrCorruptChangelog, what)
	}
	if !IsStateRecord(rec) {
		return bad("not a state record")
	}
	r.op, r.ttl = rec[0]&^opTS, rec[0]&opTS != 0
	p := rec[1:]
	name, p, ok := cutBytes(p)
	if !ok {
		return bad("bad state name")
	}
	r.name = string(name)
	kg, n := binary.Uvarint(p)
	if n <= 0 || kg > 1<<16 {
		return bad("bad key group")
	}
	r.kg, p = int(kg), p[n:]
	if r.key, p, ok = cutBytes(p); !ok {
		return bad("bad key")
	}
	if r.ns, p, ok = cutBytes(p); !ok {
		return bad("bad namespace")
	}
	if r.ttl {
		if len(p) < 8 {
			return bad("bad timestamp")
		}
		r.ts, p = int64(binary.LittleEndian.Uint64(p)), p[8:]
	}
	r.payload = p
	return r, nil
}

func cutBytes(p []byte) (b, rest []byte, ok bool) {
	l, n := binary.Uvarint(p)
	if n <= 0 || l > uint64(len(p)-n) {
		return nil, nil, false
	}
	return p[n : n+int(l) : n+int(l)], p[n+int(l):], true
}

// begin starts a record of op on the current key and namespace ns.
func (b *ChangelogBackend) begin(op byte, name string, ns []byte, ttl bool, ts int64) []byte {
	if ttl {
		op |= opTS
	}
	buf := append(b.buf[:0], op)
	buf = binary.AppendUvarint(buf, uint64(len(name)))
	buf = append(buf, name...)
	buf = binary.AppendUvarint(buf, uint64(b.inner.CurrentKeyGroup()))
	buf = snapAppendBytes(buf, b.inner.CurrentKey())
	buf = snapAppendBytes(buf, ns)
	if ttl {
		buf = binary.LittleEndian.AppendUint64(buf, uint64(ts))
	}
	return buf
}

// emit appends the record built in rec (b.buf's array, kept for the next).
func (b *ChangelogBackend) emit(rec []byte) error {
	b.buf = rec
	return b.push(rec)
}

func (b *ChangelogBackend) push(rec []byte) error {
	if b.framed == nil {
		_, err := b.log.Append(rec)
		return err
	}
	b.local = binary.AppendUvarint(b.local, uint64(len(rec)))
	b.local = append(b.local, rec...)
	if len(b.local) >= flushSize {
		return b.Flush()
	}
	return nil
}

// replayer applies restored records of one registered state.
type replayer interface {
	apply(r *record) error
}

// adoptPending applies the restored records of state name, kind kind, now
// that it is registered.
func (b *ChangelogBackend) adoptPending(name string, kind stateKind, ttl bool, rp replayer) error {
	recs := b.pending[name]
	if len(recs) == 0 {
		return nil
	}
	key, kg := b.inner.CurrentKey(), b.inner.CurrentKeyGroup()
	defer func() {
		b.clock.unpin()
		if key != nil {
			b.inner.SetCurrentKey(key, kg)
		}
	}()
	for _, rec := range recs {
		r, err := parseRecord(rec)
		if err != nil {
			return fmt.Errorf("state %q: %w", name, err)
		}
		if k := opKind(r.op); k != kind {
			return fmt.Errorf("%w: state %q is registered as a %s state, the changelog has %s changes for it", ErrIncompatibleState, name, kind, k)
		}
		if r.ttl != ttl {
			return fmt.Errorf("%w: state %q is registered with TTL %s, the changelog has changes with TTL %s", ErrIncompatibleState, name, onOff(ttl), onOff(r.ttl))
		}
		b.inner.SetCurrentKey(r.key, r.kg)
		if r.ttl {
			b.clock.pinAt(r.ts)
		} else {
			b.clock.unpin()
		}
		if err := rp.apply(&r); err != nil {
			if errors.Is(err, codec.ErrCorrupt) && !errors.Is(err, ErrCorruptChangelog) {
				err = fmt.Errorf("%w: %w", ErrCorruptChangelog, err)
			}
			return fmt.Errorf("state %q: replay changelog: %w", name, err)
		}
		b.replayed++
	}
	delete(b.pending, name)
	return nil
}

func opKind(op byte) stateKind {
	switch {
	case op <= opValueRead:
		return kindValue
	case op <= opListRead:
		return kindList
	}
	return kindMap
}

// logged runs a write of a state: with TTL the clock is pinned for it and
// the record gets the timestamp. build appends the payload.
func (b *ChangelogBackend) logged(op byte, name string, ns []byte, ttl bool, write func() error, build func([]byte) []byte) error {
	if b.log == nil {
		return write()
	}
	var ts int64
	if ttl {
		ts = b.clock.pin()
	}
	err := write()
	if ttl {
		b.clock.unpin()
	}
	if err != nil {
		return err
	}
	rec := b.begin(op, name, ns, ttl, ts)
	if build != nil {
		rec = build(rec)
	}
	return b.emit(rec)
}

// decodeAll decodes a payload of uvarint n and n encoded values.
func decodeAll[T any](c codec.Codec[T], p []byte) ([]T, error) {
	n, w := binary.Uvarint(p)
	if w <= 0 || n > uint64(len(p)) {
		return nil, fmt.Errorf("%w: bad element count", ErrCorruptChangelog)
	}
	p = p[w:]
	out := make([]T, 0, n)
	for range n {
		v, m, err := c.Decode(p)
		if err != nil {
			return nil, err
		}
		out, p = append(out, v), p[m:]
	}
	if len(p) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the elements", ErrCorruptChangelog, len(p))
	}
	return out, nil
}

func appendAll[T any](dst []byte, c codec.Codec[T], vs []T) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(vs)))
	for _, v := range vs {
		dst = c.Append(dst, v)
	}
	return dst
}

// logsReads reports whether reads of a state with ttl change it.
func logsReads(ttl TTLConfig) bool {
	return ttl.Enabled() && (ttl.UpdateType == OnReadAndWrite || ttl.Visibility == ReturnExpiredIfNotCleanedUp)
}

// clValue is a value state of a ChangelogBackend.
type clValue[T any] struct {
	b     *ChangelogBackend
	inner Value[T]
	name  string
	c     codec.Codec[T]
	ttl   bool
	reads bool
	ns    []byte
}

func newChangelogValue[T any](b *ChangelogBackend, d ValueDescriptor[T]) (Value[T], error) {
	inner, err := NewValue(b.inner, d)
	if err != nil {
		return nil, err
	}
	if len(b.pending[d.Name]) > 0 {
		rp, err := NewValue(b.inner, d)
		if err != nil {
			return nil, err
		}
		if err := b.adoptPending(d.Name, kindValue, d.TTL.Enabled(), valueReplayer[T]{rp, d.Codec}); err != nil {
			return nil, err
		}
	}
	return &clValue[T]{b: b, inner: inner, name: d.Name, c: d.Codec, ttl: d.TTL.Enabled(), reads: logsReads(d.TTL)}, nil
}

type valueReplayer[T any] struct {
	s Value[T]
	c codec.Codec[T]
}

func (r valueReplayer[T]) apply(rec *record) error {
	r.s.SetNamespace(rec.ns)
	switch rec.op {
	case opValueUpdate:
		v, err := snapDecodeExact(r.c, rec.payload)
		if err != nil {
			return err
		}
		return r.s.Update(v)
	case opValueClear:
		return r.s.Clear()
	case opValueRead:
		_, _, err := r.s.Get()
		return err
	}
	return fmt.Errorf("%w: op %#x", ErrCorruptChangelog, rec.op)
}

func (s *clValue[T]) SetNamespace(ns []byte) {
	s.ns = append(s.ns[:0], ns...)
	s.inner.SetNamespace(ns)
}

func (s *clValue[T]) Get() (v T, ok bool, err error) {
	if !s.reads || s.b.log == nil {
		return s.inner.Get()
	}
	err = s.b.logged(opValueRead, s.name, s.ns, true, func() error {
		var e error
		v, ok, e = s.inner.Get()
		return e
	}, nil)
	return v, ok, err
}

func (s *clValue[T]) Update(v T) error {
	return s.b.logged(opValueUpdate, s.name, s.ns, s.ttl, func() error { return s.inner.Update(v) },
		func(dst []byte) []byte { return s.c.Append(dst, v) })
}

func (s *clValue[T]) Clear() error {
	return s.b.logged(opValueClear, s.name, s.ns, s.ttl, s.inner.Clear, nil)
}

// clList is a list state of a ChangelogBackend.
type clList[T any] struct {
	b     *ChangelogBackend
	inner List[T]
	name  string
	c     codec.Codec[T]
	ttl   bool
	reads bool
	ns    []byte
}

func newChangelogList[T any](b *ChangelogBackend, d ListDescriptor[T]) (List[T], error) {
	inner, err := NewList(b.inner, d)
	if err != nil {
		return nil, err
	}
	if len(b.pending[d.Name]) > 0 {
		rp, err := NewList(b.inner, d)
		if err != nil {
			return nil, err
		}
		if err := b.adoptPending(d.Name, kindList, d.TTL.Enabled(), listReplayer[T]{rp, d.Codec}); err != nil {
			return nil, err
		}
	}
	return &clList[T]{b: b, inner: inner, name: d.Name, c: d.Codec, ttl: d.TTL.Enabled(), reads: logsReads(d.TTL)}, nil
}

type listReplayer[T any] struct {
	s List[T]
	c codec.Codec[T]
}

func (r listReplayer[T]) apply(rec *record) error {
	r.s.SetNamespace(rec.ns)
	switch rec.op {
	case opListAdd:
		v, err := snapDecodeExact(r.c, rec.payload)
		if err != nil {
			return err
		}
		return r.s.Add(v)
	case opListAddAll, opListUpdate:
		vs, err := decodeAll(r.c, rec.payload)
		if err != nil {
			return err
		}
		if rec.op == opListAddAll {
			return r.s.AddAll(vs)
		}
		return r.s.Update(vs)
	case opListClear:
		return r.s.Clear()
	case opListRead:
		_, err := r.s.Get()
		return err
	}
	return fmt.Errorf("%w: op %#x", ErrCorruptChangelog, rec.op)
}

func (s *clList[T]) SetNamespace(ns []byte) {
	s.ns = append(s.ns[:0], ns...)
	s.inner.SetNamespace(ns)
}

func (s *clList[T]) Get() (vs []T, err error) {
	if !s.reads || s.b.log == nil {
		return s.inner.Get()
	}
	err = s.b.logged(opListRead, s.name, s.ns, true, func() error {
		var e error
		vs, e = s.inner.Get()
		return e
	}, nil)
	return vs, err
}

func (s *clList[T]) Add(v T) error {
	return s.b.logged(opListAdd, s.name, s.ns, s.ttl, func() error { return s.inner.Add(v) },
		func(dst []byte) []byte { return s.c.Append(dst, v) })
}

func (s *clList[T]) AddAll(vs []T) error {
	return s.b.logged(opListAddAll, s.name, s.ns, s.ttl, func() error { return s.inner.AddAll(vs) },
		func(dst []byte) []byte { return appendAll(dst, s.c, vs) })
}

func (s *clList[T]) Update(vs []T) error {
	return s.b.logged(opListUpdate, s.name, s.ns, s.ttl, func() error { return s.inner.Update(vs) },
		func(dst []byte) []byte { return appendAll(dst, s.c, vs) })
}

func (s *clList[T]) Clear() error {
	return s.b.logged(opListClear, s.name, s.ns, s.ttl, s.inner.Clear, nil)
}

// clMap is a map state of a ChangelogBackend.
type clMap[K comparable, V any] struct {
	b     *ChangelogBackend
	inner Map[K, V]
	name  string
	kc    codec.Codec[K]
	vc    codec.Codec[V]
	ttl   bool
	reads bool
	ns    []byte
}

func newChangelogMap[K comparable, V any](b *ChangelogBackend, d MapDescriptor[K, V]) (Map[K, V], error) {
	inner, err := NewMap(b.inner, d)
	if err != nil {
		return nil, err
	}
	if len(b.pending[d.Name]) > 0 {
		rp, err := NewMap(b.inner, d)
		if err != nil {
			return nil, err
		}
		if err := b.adoptPending(d.Name, kindMap, d.TTL.Enabled(), mapReplayer[K, V]{rp, d.KeyCodec, d.ValueCodec}); err != nil {
			return nil, err
		}
	}
	return &clMap[K, V]{b: b, inner: inner, name: d.Name, kc: d.KeyCodec, vc: d.ValueCodec,
		ttl: d.TTL.Enabled(), reads: logsReads(d.TTL)}, nil
}

type mapReplayer[K comparable, V any] struct {
	s  Map[K, V]
	kc codec.Codec[K]
	vc codec.Codec[V]
}

func (r mapReplayer[K, V]) apply(rec *record) error {
	r.s.SetNamespace(rec.ns)
	key := func() (K, []byte, error) {
		k, n, err := r.kc.Decode(rec.payload)
		return k, rec.payload[min(n, len(rec.payload)):], err
	}
	switch rec.op {
	case opMapPut:
		k, rest, err := key()
		if err != nil {
			return err
		}
		v, err := snapDecodeExact(r.vc, rest)
		if err != nil {
			return err
		}
		return r.s.Put(k, v)
	case opMapRemove, opMapGet, opMapContains:
		k, rest, err := key()
		if err == nil && len(rest) != 0 {
			err = fmt.Errorf("%w: %d bytes after the map key", ErrCorruptChangelog, len(rest))
		}
		if err != nil {
			return err
		}
		switch rec.op {
		case opMapRemove:
			return r.s.Remove(k)
		case opMapGet:
			_, _, err = r.s.Get(k)
		default:
			_, err = r.s.Contains(k)
		}
		return err
	case opMapClear:
		return r.s.Clear()
	case opMapRange:
		return r.s.Range(func(K, V) bool { return true })
	case opMapIsEmpty:
		_, err := r.s.IsEmpty()
		return err
	}
	return fmt.Errorf("%w: op %#x", ErrCorruptChangelog, rec.op)
}

func (s *clMap[K, V]) SetNamespace(ns []byte) {
	s.ns = append(s.ns[:0], ns...)
	s.inner.SetNamespace(ns)
}

// read runs a read that changes TTL state, logged.
func (s *clMap[K, V]) read(op byte, read func() error, build func([]byte) []byte) error {
	if !s.reads || s.b.log == nil {
		return read()
	}
	return s.b.logged(op, s.name, s.ns, true, read, build)
}

func (s *clMap[K, V]) Get(k K) (v V, ok bool, err error) {
	err = s.read(opMapGet, func() error {
		var e error
		v, ok, e = s.inner.Get(k)
		return e
	}, func(dst []byte) []byte { return s.kc.Append(dst, k) })
	return v, ok, err
}

func (s *clMap[K, V]) Contains(k K) (ok bool, err error) {
	err = s.read(opMapContains, func() error {
		var e error
		ok, e = s.inner.Contains(k)
		return e
	}, func(dst []byte) []byte { return s.kc.Append(dst, k) })
	return ok, err
}

func (s *clMap[K, V]) Range(fn func(k K, v V) bool) error {
	if s.reads && s.b.log != nil {
		// The replay touches every entry: so must the live read.
		var stopped bool
		return s.read(opMapRange, func() error {
			return s.inner.Range(func(k K, v V) bool {
				if !stopped && !fn(k, v) {
					stopped = true
				}
				return true
			})
		}, nil)
	}
	return s.inner.Range(fn)
}

func (s *clMap[K, V]) IsEmpty() (empty bool, err error) {
	err = s.read(opMapIsEmpty, func() error {
		var e error
		empty, e = s.inner.IsEmpty()
		return e
	}, nil)
	return empty, err
}

func (s *clMap[K, V]) Put(k K, v V) error {
	return s.b.logged(opMapPut, s.name, s.ns, s.ttl, func() error { return s.inner.Put(k, v) },
		func(dst []byte) []byte { return s.vc.Append(s.kc.Append(dst, k), v) })
}

func (s *clMap[K, V]) Remove(k K) error {
	return s.b.logged(opMapRemove, s.name, s.ns, s.ttl, func() error { return s.inner.Remove(k) },
		func(dst []byte) []byte { return s.kc.Append(dst, k) })
}

func (s *clMap[K, V]) Clear() error {
	return s.b.logged(opMapClear, s.name, s.ns, s.ttl, s.inner.Clear, nil)
}
