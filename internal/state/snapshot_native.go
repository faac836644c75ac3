package state

// Native snapshots of a PebbleBackend: its database files, for incremental
// checkpoints (Flink's RocksDB incremental checkpoints).
//
// TakeNativeSnapshot flushes the memtable (the database runs without a WAL,
// so unflushed writes would be missing from the files) and takes a Pebble
// checkpoint into a local directory: hard links to the sstables, copies of
// the small metadata files (MANIFEST, OPTIONS, marker files). The caller
// uploads the files, and may skip the sstables it uploaded for an earlier
// snapshot of the same backend: a database never reuses a file number, so
// within one backend (from NewPebbleBackend or OpenPebbleFromNative to
// Close) a name stands for one content.
//
// Names are not unique across backends, which the uploader must key its
// shared files by: a backend from NewPebbleBackend numbers its files from
// the start (RestoreFromNative writes into such a backend), and one from
// OpenPebbleFromNative continues from the number recorded in the
// snapshot, so its new files may take names that the original backend
// gave other files after that snapshot. The sstables a backend was opened
// from keep their names and contents, so their uploads can be reused by
// the restored backend's snapshots (as Flink does after restoring an
// incremental checkpoint).
//
// Next to the files, a snapshot carries the state registry (name, id, kind,
// TTL-ness, list format of every state), because entries are keyed by
// state id and the database knows nothing of names. See nativeRegistry.
//
// Restoring the same key-group range opens the downloaded files as the
// database (OpenPebbleFromNative). Restoring another range (rescaling)
// copies the entries of the key groups in range out of one or more
// downloaded snapshots (RestoreFromNative).

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cockroachdb/pebble/v2"
)

// NativeSnapshot is a point-in-time copy of a PebbleBackend's database
// files, taken by TakeNativeSnapshot.
type NativeSnapshot struct {
	// Dir is the local directory holding the checkpoint; Release deletes
	// it (unless Keep moved it).
	Dir string
	// Files lists every regular file under Dir, by name relative to Dir
	// (slash-separated), sorted by name.
	Files []NativeFile
	// Registry is the encoded state registry, to be stored with the files
	// and passed to OpenPebbleFromNative or RestoreFromNative.
	Registry []byte
	// KeyGroupStart and KeyGroupEnd are the backend's key-group range
	// (inclusive).
	KeyGroupStart, KeyGroupEnd int

	kept bool // Keep handed Dir over: Release leaves it
}

// NativeFile is a file of a NativeSnapshot.
type NativeFile struct {
	// Name is relative to the snapshot's Dir: "000012.sst",
	// "MANIFEST-000008", "OPTIONS-000010", "marker.manifest.000002.MANIFEST-000008"...
	Name string
	// Size is the file's size in bytes.
	Size int64
	// Shared marks immutable data files (".sst" sstables, and ".blob"
	// value files should Pebble write any): the same name in two snapshots
	// of one backend has the same content, so an upload can be shared
	// (but see the package comment in snapshot_native.go on names across
	// backends). The other files (MANIFEST, OPTIONS, markers, an empty
	// ".log" WAL) may differ between snapshots.
	Shared bool
}

// TakeNativeSnapshot is the synchronous phase of a native checkpoint: it
// flushes the memtable, then takes a Pebble checkpoint into dir, which
// must not exist (it is created; its parent must be on the same file
// system as the database for the sstables to be hard links rather than
// copies). Like every use of the backend it must be called from the task
// goroutine; the returned snapshot is independent of the backend (writes
// after it do not show in its files, and it outlives Close) and may be
// read and released from any goroutine.
func (b *PebbleBackend) TakeNativeSnapshot(dir string) (*NativeSnapshot, error) {
	if b.closed {
		return nil, errors.New("state: native snapshot of a closed pebble backend")
	}
	reg, err := b.encodeRegistry()
	if err != nil {
		return nil, err
	}
	if err := b.db.Flush(); err != nil {
		return nil, fmt.Errorf("state: native snapshot: flush: %w", err)
	}
	if err := b.db.Checkpoint(dir); err != nil {
		return nil, fmt.Errorf("state: native snapshot: %w", err)
	}
	s := &NativeSnapshot{Dir: dir, Registry: reg, KeyGroupStart: b.opts.KeyGroupStart, KeyGroupEnd: b.opts.KeyGroupEnd}
	s.Files, err = listNativeFiles(dir)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

// Release deletes the snapshot's directory, unless Keep handed it over.
// The backend is not involved, so Release may be called from any
// goroutine, before or after the backend's Close.
func (s *NativeSnapshot) Release() error {
	if s.kept {
		return nil
	}
	if err := os.RemoveAll(s.Dir); err != nil {
		return fmt.Errorf("state: release native snapshot: %w", err)
	}
	return nil
}

func listNativeFiles(dir string) ([]NativeFile, error) {
	var files []NativeFile
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		name := filepath.ToSlash(rel)
		files = append(files, NativeFile{
			Name:   name,
			Size:   info.Size(),
			Shared: strings.HasSuffix(name, ".sst") || strings.HasSuffix(name, ".blob"),
		})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("state: native snapshot: list files: %w", err)
	}
	slices.SortFunc(files, func(x, y NativeFile) int { return strings.Compare(x.Name, y.Name) })
	return files, nil
}

// Compact compacts the whole database. Tests use it to make compactions
// happen (and sstables disappear) when they want.
func (b *PebbleBackend) Compact() error {
	if b.closed {
		return errors.New("state: compact a closed pebble backend")
	}
	it, err := b.db.NewIter(nil)
	if err != nil {
		return fmt.Errorf("state: compact: %w", err)
	}
	var first, last []byte
	if it.First() {
		first = bytes.Clone(it.Key())
		if it.Last() {
			last = bytes.Clone(it.Key())
		}
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return fmt.Errorf("state: compact: %w", err)
	}
	if first == nil {
		return nil
	}
	// The end is exclusive: last followed by a zero byte is the smallest
	// key after last.
	if err := b.db.Compact(context.Background(), first, append(last, 0), true); err != nil {
		return fmt.Errorf("state: compact: %w", err)
	}
	return nil
}

// nativeRegistryVersion is the version of the registry encoding.
const nativeRegistryVersion = 1

// nativeRegistry is the state registry of a native snapshot, encoded as
// JSON:
//
//	{"version": 1, "keyGroupStart": 0, "keyGroupEnd": 127,
//	 "states": [{"name": "s", "id": 1, "kind": "list", "ttl": false,
//	             "listFormat": "native"}, ...]}
//
// States are in id order and their ids are 1, 2, ..., n. kind is "value",
// "list" or "map". listFormat (lists only) is "native" for entries in the
// stored form of lists (the concatenation of the elements, each preceded
// by its TTL timestamp with TTL), or "stream" for the stream payload of a
// list restored from a canonical snapshot and not registered yet, which
// registration converts.
type nativeRegistry struct {
	Version       int                   `json:"version"`
	KeyGroupStart int                   `json:"keyGroupStart"`
	KeyGroupEnd   int                   `json:"keyGroupEnd"`
	States        []nativeRegistryState `json:"states"`
}

type nativeRegistryState struct {
	Name       string `json:"name"`
	ID         uint16 `json:"id"`
	Kind       string `json:"kind"`
	TTL        bool   `json:"ttl"`
	ListFormat string `json:"listFormat,omitempty"`
}

const (
	nativeListNative = "native"
	nativeListStream = "stream"
)

func (b *PebbleBackend) encodeRegistry() ([]byte, error) {
	r := nativeRegistry{
		Version:       nativeRegistryVersion,
		KeyGroupStart: b.opts.KeyGroupStart,
		KeyGroupEnd:   b.opts.KeyGroupEnd,
		States:        make([]nativeRegistryState, 0, len(b.byID)-1),
	}
	for _, st := range b.byID[1:] {
		rs := nativeRegistryState{Name: st.name, ID: st.id, Kind: st.kind.String(), TTL: st.ttl.Enabled()}
		if st.restored {
			rs.TTL = st.restoredTTL
		}
		if st.kind == kindList {
			rs.ListFormat = nativeListNative
			if st.restored && !st.nativeList {
				rs.ListFormat = nativeListStream
			}
		}
		r.States = append(r.States, rs)
	}
	enc, err := json.Marshal(&r)
	if err != nil {
		return nil, fmt.Errorf("state: encode registry: %w", err)
	}
	return enc, nil
}

func nativeRegistryCorrupt(format string, args ...any) error {
	return fmt.Errorf("%w: native snapshot registry: "+format, append([]any{ErrCorruptSnapshot}, args...)...)
}

// decodeNativeRegistry decodes and validates an encoded registry. The
// returned states are restored states, in id order.
func decodeNativeRegistry(enc []byte) (*nativeRegistry, []*pebbleState, error) {
	var r nativeRegistry
	if err := json.Unmarshal(enc, &r); err != nil {
		return nil, nil, nativeRegistryCorrupt("%v", err)
	}
	if r.Version != nativeRegistryVersion {
		return nil, nil, nativeRegistryCorrupt("version %d, want %d", r.Version, nativeRegistryVersion)
	}
	if r.KeyGroupStart < 0 || r.KeyGroupEnd < r.KeyGroupStart || r.KeyGroupEnd > 0xffff {
		return nil, nil, nativeRegistryCorrupt("key group range [%d, %d]", r.KeyGroupStart, r.KeyGroupEnd)
	}
	if len(r.States) > pebbleMaxStates {
		return nil, nil, nativeRegistryCorrupt("%d states", len(r.States))
	}
	sts := make([]*pebbleState, len(r.States))
	names := make(map[string]bool, len(r.States))
	for i, rs := range r.States {
		if int(rs.ID) != i+1 {
			return nil, nil, nativeRegistryCorrupt("state %q has id %d at position %d", rs.Name, rs.ID, i+1)
		}
		if names[rs.Name] {
			return nil, nil, nativeRegistryCorrupt("state %q twice", rs.Name)
		}
		names[rs.Name] = true
		st := &pebbleState{name: rs.Name, id: rs.ID, restored: true, restoredTTL: rs.TTL}
		switch rs.Kind {
		case "value":
			st.kind = kindValue
		case "list":
			st.kind = kindList
		case "map":
			st.kind = kindMap
		default:
			return nil, nil, nativeRegistryCorrupt("state %q has kind %q", rs.Name, rs.Kind)
		}
		switch {
		case st.kind != kindList && rs.ListFormat == "":
		case st.kind == kindList && rs.ListFormat == nativeListNative:
			st.nativeList = true
		case st.kind == kindList && rs.ListFormat == nativeListStream:
		default:
			return nil, nil, nativeRegistryCorrupt("%s state %q has list format %q", rs.Kind, rs.Name, rs.ListFormat)
		}
		sts[i] = st
	}
	return &r, sts, nil
}

// OpenPebbleFromNative opens a PebbleBackend over the database files of a
// native snapshot, placed (downloaded) in opts.Dir, with the snapshot's
// registry. The snapshot must be of a backend with the same key-group
// range as opts; RestoreFromNative restores another range.
//
// The snapshot's states come back as restored states, as after Restore:
// an operator adopts one by registering it, with the same kind and
// TTL-ness (else ErrIncompatibleState). Restored lists must be registered
// before the next TakeSnapshot (canonical), which cannot split the stored
// form of a list into elements without its codec; TakeNativeSnapshot has
// no such restriction.
//
// Unlike NewPebbleBackend it does not empty opts.Dir; as with
// NewPebbleBackend the directory belongs to the backend from then on, and
// Close deletes it. On error the directory is left as it was.
func OpenPebbleFromNative(opts Options, registry []byte) (*PebbleBackend, error) {
	if err := validatePebbleOptions(&opts); err != nil {
		return nil, err
	}
	r, sts, err := decodeNativeRegistry(registry)
	if err != nil {
		return nil, err
	}
	if r.KeyGroupStart != opts.KeyGroupStart || r.KeyGroupEnd != opts.KeyGroupEnd {
		return nil, fmt.Errorf("state: native snapshot of key groups [%d, %d] opened for [%d, %d]: restore another range with RestoreFromNative", r.KeyGroupStart, r.KeyGroupEnd, opts.KeyGroupStart, opts.KeyGroupEnd)
	}
	if _, err := os.Stat(opts.Dir); err != nil {
		return nil, fmt.Errorf("state: open native snapshot: %w", err)
	}
	db, err := openPebbleDB(opts.Dir, false)
	if err != nil {
		return nil, fmt.Errorf("state: open native snapshot: %w", err)
	}
	b := newPebbleBackendDB(opts, db)
	for _, st := range sts {
		b.states[st.name] = st
		b.byID = append(b.byID, st)
	}
	return b, nil
}

// RestoreFromNative copies into b the entries of the key groups in b's
// range out of a native snapshot held in dir: the database files and the
// registry of another backend, of key groups [kgStart, kgEnd], which may
// overlap b's range in part or not at all. This is the rescaling path;
// for the same range, OpenPebbleFromNative is much faster.
//
// As for Restore, b must have no state registered yet, and it may be
// called several times for several snapshots (of disjoint ranges), and
// mixed with Restore; states come back as restored states. dir is opened
// read-only and left as it was (the LOCK file Pebble creates even then is
// removed). After an error b holds an unspecified part of the snapshot and
// must be discarded.
//
// Entries are copied as they are stored, with their state ids mapped by
// name: a codec-free copy, where a canonical stream (TakeSnapshot on the
// snapshot, then Restore) would need the codecs of registered lists to
// split their stored values into elements.
func RestoreFromNative(b *PebbleBackend, dir string, registry []byte, kgStart, kgEnd int) (err error) {
	if b.closed {
		return errors.New("state: restore into a closed pebble backend")
	}
	for _, st := range b.byID[1:] {
		if !st.restored {
			return fmt.Errorf("state: restore into a pebble backend with registered state %q: restore before registering", st.name)
		}
	}
	r, srcSts, err := decodeNativeRegistry(registry)
	if err != nil {
		return err
	}
	if r.KeyGroupStart != kgStart || r.KeyGroupEnd != kgEnd {
		return fmt.Errorf("state: native snapshot registry of key groups [%d, %d], not [%d, %d]", r.KeyGroupStart, r.KeyGroupEnd, kgStart, kgEnd)
	}
	if _, err := os.Stat(dir); err != nil {
		return fmt.Errorf("state: restore native snapshot: %w", err)
	}

	// Map the snapshot's states to b's, creating restored states, before
	// opening anything: the checks need no files.
	dst := make([]*pebbleState, len(srcSts))
	convert := make([]bool, len(srcSts)) // stream-format list into a native one
	for i, src := range srcSts {
		st, ok := b.states[src.name]
		if !ok {
			if len(b.byID) > pebbleMaxStates {
				return fmt.Errorf("state %q: more than %d states in one backend", src.name, pebbleMaxStates)
			}
			st = &pebbleState{name: src.name, id: uint16(len(b.byID)), kind: src.kind, restored: true, restoredTTL: src.restoredTTL, nativeList: src.nativeList}
			b.states[st.name] = st
			b.byID = append(b.byID, st)
			dst[i] = st
			continue
		}
		old := snapState{name: st.name, kind: st.kind, ttl: st.restoredTTL}
		if err := old.compatible(src.kind, src.restoredTTL); err != nil {
			return err
		}
		if st.kind == kindList && st.nativeList != src.nativeList {
			if src.nativeList {
				// b has it as stream payloads (from Restore): convert
				// them, as registration would, so that both forms do
				// not mix.
				if err := b.convertRestoredList(st); err != nil {
					return err
				}
				st.nativeList = true
			} else {
				convert[i] = true
			}
		}
		dst[i] = st
	}

	lo, hi := max(kgStart, b.opts.KeyGroupStart), min(kgEnd, b.opts.KeyGroupEnd)
	if lo > hi || len(srcSts) == 0 {
		return nil
	}
	lock := filepath.Join(dir, "LOCK")
	_, lockErr := os.Stat(lock)
	db, err := openPebbleDB(dir, true)
	if err != nil {
		return fmt.Errorf("state: open native snapshot: %w", err)
	}
	defer func() {
		if cerr := db.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("state: close native snapshot: %w", cerr)
		}
		if errors.Is(lockErr, fs.ErrNotExist) {
			// Pebble creates the lock file even when read-only.
			_ = os.Remove(lock)
		}
	}()
	it, err := db.NewIter(nil)
	if err != nil {
		return fmt.Errorf("state: restore native snapshot: %w", err)
	}
	defer func() {
		if cerr := it.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("state: restore native snapshot: %w", cerr)
		}
	}()
	batch, err := b.db.NewBatch()
	if err != nil {
		return fmt.Errorf("state: restore native snapshot: %w", err)
	}
	defer func() {
		if batch != nil {
			_ = batch.Close()
		}
	}()
	var lower, upper [4]byte
	var key, val []byte
	for kg := lo; kg <= hi; kg++ {
		for i, src := range srcSts {
			binary.BigEndian.PutUint16(lower[:], uint16(kg))
			binary.BigEndian.PutUint16(lower[2:], src.id)
			var ub []byte // nil: no upper bound, past the largest possible prefix
			if l := binary.BigEndian.Uint32(lower[:]); l != 1<<32-1 {
				ub = binary.BigEndian.AppendUint32(upper[:0], l+1)
			}
			it.SetBounds(lower[:], ub)
			rs := snapState{name: src.name, kind: src.kind, ttl: src.restoredTTL}
			for valid := it.First(); valid; valid = it.Next() {
				raw, err := it.ValueAndErr()
				if err != nil {
					return fmt.Errorf("state %q: restore native snapshot: %w", src.name, err)
				}
				key = binary.BigEndian.AppendUint16(key[:0], uint16(kg))
				key = binary.BigEndian.AppendUint16(key, dst[i].id)
				key = append(key, it.Key()[4:]...)
				if convert[i] {
					val = val[:0]
					if err := snapDecodeListPayload(rs, raw, func(elem []byte, ts int64) {
						if rs.ttl {
							val = pebbleAppendTS(val, ts)
						}
						val = append(val, elem...)
					}); err != nil {
						return err
					}
					raw = val
				}
				if err := batch.Set(key, raw, nil); err != nil {
					return fmt.Errorf("state %q: restore native snapshot: %w", src.name, err)
				}
				if batch.Len() >= pebbleRestoreBatch {
					if err := commitNativeBatch(batch); err != nil {
						batch = nil
						return err
					}
					if batch, err = b.db.NewBatch(); err != nil {
						return fmt.Errorf("state: restore native snapshot: %w", err)
					}
				}
			}
			if err := it.Error(); err != nil {
				return fmt.Errorf("state %q: restore native snapshot: %w", src.name, err)
			}
		}
	}
	err = commitNativeBatch(batch)
	batch = nil
	return err
}

// commitNativeBatch commits and closes batch.
func commitNativeBatch(batch *pebble.Batch) error {
	err := batch.Commit(pebble.NoSync)
	if cerr := batch.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("state: restore native snapshot: %w", err)
	}
	return nil
}
