package state

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log"
	"os"
	"reflect"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
)

// Pebble tuning. Durability comes from checkpoints, not from the database,
// so there is no WAL and no fsync on writes: a crash loses the working
// directory, and recovery restores from the last checkpoint.
const (
	// pebbleMemTableSize bounds the versions a snapshot iterator steps
	// over: a memtable keeps every version of a hot key until it is flushed,
	// so a full snapshot of 1,000 keys updated 2,000 times each took 250 ms
	// to write with 64 MiB memtables and 18 ms with 16 MiB
	// (BenchmarkWriteSnapshotPebbleHotKeys), at no measurable cost to
	// BenchmarkPebbleValueGet/Update.
	pebbleMemTableSize = 16 << 20
	// pebbleMemTables is how many memtables may be full or filling before
	// writes stall (Pebble's MemTableStopWritesThreshold).
	pebbleMemTables = 2
	// pebbleBlockCacheSize is the block cache for sstable blocks. Pebble
	// reserves the memory of its memtables in the same cache (up to
	// pebbleMemTables plus one it keeps for recycling), so the cache is
	// created that much larger: with a cache of just 64 MiB the memtable
	// reservations leave no room for blocks, and every Get reads filter,
	// index and data blocks from the file system.
	pebbleBlockCacheSize = 64 << 20
	pebbleCacheSize      = pebbleBlockCacheSize + (pebbleMemTables+1)*pebbleMemTableSize
	pebbleBloomBits      = 10
	// pebbleMaxStates is the number of state ids the 2-byte id field holds
	// (id 0 is unused).
	pebbleMaxStates = 1<<16 - 1
)

// PebbleBackend keeps the state of one operator subtask in a Pebble database
// in Options.Dir, laid out as the package documentation describes. Values
// are stored as their codec's encoding, preceded by an 8-byte little-endian
// timestamp (Unix milliseconds) when the state has TTL. A list is one Pebble
// value, the concatenation of its elements' encodings (each preceded by its
// timestamp with TTL), which Add extends with a blind Pebble merge. A map
// has one Pebble key per entry: the (key, namespace) prefix followed by the
// key codec's encoding of the map key.
//
// Like every Backend, a PebbleBackend is used from one goroutine. Accesses
// build their Pebble key in a scratch buffer owned by the backend, so state
// methods allocate nothing beyond what Pebble and the codecs do.
type PebbleBackend struct {
	opts Options
	// db is the database behind its write-back cache of point writes.
	db *cachedDB

	key      []byte
	keyGroup int

	states map[string]*pebbleState
	byID   []*pebbleState // indexed by state id; byID[0] is nil
	// bgTTL is the number of states whose TTL is cleaned up in the
	// background; CleanupExpired does nothing while it is 0.
	bgTTL int

	keyBuf []byte // scratch: the Pebble key of the current access
	valBuf []byte // scratch: the Pebble value being written
	// cursor is where the next CleanupExpired resumes: the first key it has
	// not examined yet, or empty for the start of the database.
	cursor []byte

	closed bool
}

var _ Backend = (*PebbleBackend)(nil)

// pebbleState is the registration of a state: everything about it that does
// not depend on its Go type parameters, so that CleanupExpired can handle
// entries of any state by id.
type pebbleState struct {
	name string
	id   uint16
	kind stateKind
	// typ is the value or element type, or the map key type; typ2 is the map
	// value type.
	typ, typ2 reflect.Type
	ttl       TTLConfig
	// elemLen returns the length of the codec encoding at the start of src
	// (list states only).
	elemLen func(src []byte) (int, error)
	// restored marks a state that Restore created and no descriptor has
	// registered yet: its entries are stored under id, but only its kind
	// and whether it has TTL (restoredTTL) are known; typ, typ2, ttl and
	// elemLen are unset. The first registration fills them in.
	restored    bool
	restoredTTL bool
	// nativeList marks a restored list whose entries are already in the
	// stored form of lists, because they come from a native snapshot
	// (OpenPebbleFromNative, RestoreFromNative) of a backend that had
	// registered it; a restored list without it is stored as its stream
	// payload, which registration converts (convertRestoredList).
	nativeList bool
}

// NewPebbleBackend opens an empty Pebble backend in opts.Dir. The directory
// belongs to the backend: it is created if missing, emptied if not (a
// previous run may have left a database there), and deleted by Close.
func NewPebbleBackend(opts Options) (*PebbleBackend, error) {
	if err := validatePebbleOptions(&opts); err != nil {
		return nil, err
	}
	// A new backend starts empty: whatever is in the directory is stale
	// (OpenPebbleFromNative opens downloaded files instead).
	if err := os.RemoveAll(opts.Dir); err != nil {
		return nil, fmt.Errorf("state: wipe pebble dir: %w", err)
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("state: create pebble dir: %w", err)
	}
	db, err := openPebbleDB(opts.Dir, false)
	if err != nil {
		_ = os.RemoveAll(opts.Dir)
		return nil, fmt.Errorf("state: open pebble: %w", err)
	}
	return newPebbleBackendDB(opts, db), nil
}

// openPebbleDB opens (or creates, unless readOnly) the database in dir with
// the backend's tuning.
func openPebbleDB(dir string, readOnly bool) (*pebble.DB, error) {
	cache := pebble.NewCache(pebbleCacheSize)
	defer cache.Unref() // the DB holds its own reference
	po := &pebble.Options{
		Cache:                       cache,
		DisableWAL:                  true,
		MemTableSize:                pebbleMemTableSize,
		MemTableStopWritesThreshold: pebbleMemTables,
		Merger:                      pebbleConcatMerger,
		Logger:                      pebbleLogger{},
		FormatMajorVersion:          pebble.FormatNewest,
		ReadOnly:                    readOnly,
	}
	po.Levels[0].FilterPolicy = bloom.FilterPolicy(pebbleBloomBits) // inherited by the other levels
	return pebble.Open(dir, po)
}

// newPebbleBackendDB returns a backend over an open database, with no
// states registered.
func newPebbleBackendDB(opts Options, db *pebble.DB) *PebbleBackend {
	return &PebbleBackend{
		opts:     opts,
		db:       newCachedDB(db),
		keyGroup: opts.KeyGroupStart,
		states:   make(map[string]*pebbleState),
		byID:     []*pebbleState{nil},
	}
}

// validatePebbleOptions reports every problem with opts at once.
func validatePebbleOptions(o *Options) error {
	var errs []error
	if o.Dir == "" {
		errs = append(errs, errors.New("state: pebble backend needs a directory"))
	}
	if o.KeyGroupStart < 0 || o.KeyGroupEnd < o.KeyGroupStart || o.KeyGroupEnd > 0xffff {
		errs = append(errs, fmt.Errorf("state: key group range [%d, %d] is not a range within [0, 65535]", o.KeyGroupStart, o.KeyGroupEnd))
	}
	if o.MaxParallelism > 0 && o.KeyGroupEnd >= o.MaxParallelism {
		errs = append(errs, fmt.Errorf("state: key group %d is not below max parallelism %d", o.KeyGroupEnd, o.MaxParallelism))
	}
	return errors.Join(errs...)
}

// SetCurrentKey implements Backend. It panics if keyGroup is outside the
// backend's range: that is a routing bug.
func (b *PebbleBackend) SetCurrentKey(key []byte, keyGroup int) {
	if keyGroup < b.opts.KeyGroupStart || keyGroup > b.opts.KeyGroupEnd {
		panic(fmt.Sprintf("state: key group %d is outside this backend's range [%d, %d]", keyGroup, b.opts.KeyGroupStart, b.opts.KeyGroupEnd))
	}
	b.key, b.keyGroup = key, keyGroup
}

// CurrentKey implements Backend.
func (b *PebbleBackend) CurrentKey() []byte { return b.key }

// CurrentKeyGroup implements Backend.
func (b *PebbleBackend) CurrentKeyGroup() int { return b.keyGroup }

// KeyGroupRange implements Backend.
func (b *PebbleBackend) KeyGroupRange() (start, end int) {
	return b.opts.KeyGroupStart, b.opts.KeyGroupEnd
}

// Close implements Backend: it closes the database and deletes its
// directory. Closing twice does nothing.
func (b *PebbleBackend) Close() error {
	if b.closed {
		return nil
	}
	b.closed = true
	err := b.db.Close()
	if err != nil {
		err = fmt.Errorf("state: close pebble: %w", err)
	}
	if rerr := os.RemoveAll(b.opts.Dir); rerr != nil {
		err = errors.Join(err, fmt.Errorf("state: remove pebble dir: %w", rerr))
	}
	return err
}

// register finds or adds the registration of a state. The first
// registration of a state that Restore created completes it (see
// adoptRestored).
func (b *PebbleBackend) register(name string, kind stateKind, typ, typ2 reflect.Type, ttl TTLConfig) (*pebbleState, error) {
	if st, ok := b.states[name]; ok {
		if st.restored {
			return b.adoptRestored(st, kind, typ, typ2, ttl)
		}
		if st.kind != kind || st.typ != typ || st.typ2 != typ2 {
			return nil, fmt.Errorf("%w: state %q is a %s, not a %s", ErrIncompatibleState, name, st.describe(), (&pebbleState{kind: kind, typ: typ, typ2: typ2}).describe())
		}
		// The TTL decides the stored format (timestamps) and what the
		// background cleanup does, so it is one per state.
		if st.ttl != ttl {
			return nil, fmt.Errorf("%w: state %q has TTL %+v, not %+v", ErrIncompatibleState, name, st.ttl, ttl)
		}
		return st, nil
	}
	if len(b.byID) > pebbleMaxStates {
		return nil, fmt.Errorf("state %q: more than %d states in one backend", name, pebbleMaxStates)
	}
	st := &pebbleState{name: name, id: uint16(len(b.byID)), kind: kind, typ: typ, typ2: typ2, ttl: ttl}
	b.states[name] = st
	b.byID = append(b.byID, st)
	if ttl.Enabled() && !ttl.DisableBackgroundCleanup {
		b.bgTTL++
	}
	return st, nil
}

func (st *pebbleState) describe() string {
	if st.kind == kindMap {
		return fmt.Sprintf("map[%v]%v state", st.typ, st.typ2)
	}
	return fmt.Sprintf("%s state of %v", st.kind, st.typ)
}

// appendPrefix appends the Pebble key of the current key in namespace ns of
// state id: key group | state id | uvarint(len(key)) | key | uvarint(len(ns))
// | ns. Value and list states store their entry under exactly this key; map
// entries follow it with the encoded map key.
func (b *PebbleBackend) appendPrefix(dst []byte, id uint16, ns []byte) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(b.keyGroup))
	dst = binary.BigEndian.AppendUint16(dst, id)
	dst = binary.AppendUvarint(dst, uint64(len(b.key)))
	dst = append(dst, b.key...)
	dst = binary.AppendUvarint(dst, uint64(len(ns)))
	return append(dst, ns...)
}

// stateKey builds the current access's key for state id in namespace ns in
// the backend's scratch buffer. The result is valid until the next access.
func (b *PebbleBackend) stateKey(id uint16, ns []byte) []byte {
	b.keyBuf = b.appendPrefix(b.keyBuf[:0], id, ns)
	return b.keyBuf
}

// pebblePrefixSuccessor appends to dst the smallest key greater than every key
// that has prefix p: p with its last byte that is not 0xff incremented and
// the bytes after it dropped. Every state prefix contains uvarint lengths,
// whose last byte is below 0x80, so such a byte exists.
func pebblePrefixSuccessor(dst, p []byte) []byte {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] != 0xff {
			dst = append(dst, p[:i+1]...)
			dst[len(dst)-1]++
			return dst
		}
	}
	panic("state: no successor of an all-0xff prefix")
}

// now returns the TTL clock in Unix milliseconds.
func (b *PebbleBackend) now() int64 { return b.opts.now() }

// pebbleLogger drops Pebble's informational messages (one per flush and
// compaction) and keeps its errors.
type pebbleLogger struct{}

func (pebbleLogger) Infof(string, ...any) {}

func (pebbleLogger) Errorf(format string, args ...any) {
	_ = log.Output(2, "pebble: "+fmt.Sprintf(format, args...))
}

func (pebbleLogger) Fatalf(format string, args ...any) {
	pebble.DefaultLogger.Fatalf(format, args...)
}
