package stateread

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/weirstream/weir/internal/checkpoint/metadata"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/timer"
)

// Errors of Read, to be told apart with errors.Is.
var (
	// ErrUnknownOperator: the snapshot has no state of the uid asked for.
	ErrUnknownOperator = errors.New("unknown operator")
	// ErrUnknownState: the operator has no state of the name asked for.
	ErrUnknownState = errors.New("unknown state")
	// ErrChangelog: the operator's keyed state is a changelog checkpoint's
	// materialized part plus log records, which the reader does not
	// replay.
	ErrChangelog = errors.New("changelog checkpoints cannot be read: take a savepoint first (it writes the keyed state whole)")
)

// Reader reads one checkpoint or savepoint.
type Reader struct {
	store *storage.Storage
	snap  storage.Snapshot
	cp    *metadata.Checkpoint
	loc   string
	// TempDir is where native (pebble) state is unpacked while it is
	// read; "" is os.TempDir().
	TempDir string
}

// Open reads the metadata of the snapshot at loc: a savepoint directory,
// a checkpoint directory <root>/<job>/chk-<n>, or either's _metadata file
// (a path or a URL, see storage.ResolveSnapshot). Close the Reader.
func Open(ctx context.Context, loc string) (*Reader, error) {
	store, snap, err := storage.ResolveSnapshot(ctx, loc)
	if err != nil {
		return nil, err
	}
	cp, err := metadata.Decode(snap.Payload)
	if err != nil {
		store.Close()
		return nil, fmt.Errorf("snapshot %s: %s: %w", loc, storage.MetadataName, err)
	}
	return &Reader{store: store, snap: snap, cp: cp, loc: loc}, nil
}

// Close releases the storage.
func (r *Reader) Close() error { return r.store.Close() }

// Metadata is the snapshot's decoded _metadata.
func (r *Reader) Metadata() *metadata.Checkpoint { return r.cp }

// SnapshotInfo describes the snapshot read.
type SnapshotInfo struct {
	// Location is the path or URL it was opened with.
	Location string `json:"location"`
	// Path is its directory relative to its storage root ("<job>/chk-<n>"
	// or the savepoint directory's name).
	Path      string `json:"path"`
	Savepoint bool   `json:"savepoint"`
	Job       string `json:"job"`
	ID        int64  `json:"checkpointId"`
	// Format is the savepoint's format ("canonical", "native"), if any.
	Format string `json:"format,omitempty"`
	// Completed is the completion time, RFC 3339 UTC, if recorded.
	Completed string `json:"completed,omitempty"`
}

// Info describes the snapshot.
func (r *Reader) Info() SnapshotInfo {
	si := SnapshotInfo{Location: r.loc, Path: r.snap.Path, Savepoint: r.cp.Savepoint, Job: r.cp.Job, ID: r.cp.ID, Format: r.cp.Format}
	if r.cp.CompletionTime > 0 {
		si.Completed = time.UnixMilli(r.cp.CompletionTime).UTC().Format(time.RFC3339)
	}
	return si
}

// operator returns the operator with uid, or an error listing the uids.
func (r *Reader) operator(uid string) (*metadata.Operator, error) {
	if op, ok := r.cp.Operator(uid); ok {
		return op, nil
	}
	uids := make([]string, len(r.cp.Operators))
	for i, op := range r.cp.Operators {
		uids[i] = fmt.Sprintf("%q", op.UID)
	}
	if len(uids) == 0 {
		return nil, fmt.Errorf("%w %q: the snapshot holds no operator state", ErrUnknownOperator, uid)
	}
	return nil, fmt.Errorf("%w %q: the snapshot has state of the operators %s", ErrUnknownOperator, uid, strings.Join(uids, ", "))
}

// schemaOf merges the schemas of an operator's subtasks: the first
// subtask that knows a state (or the key codec) says.
func schemaOf(op *metadata.Operator) (key *metadata.CodecRef, states map[string]metadata.StateSchema) {
	states = map[string]metadata.StateSchema{}
	for _, st := range op.Subtasks {
		if st.Schema == nil {
			continue
		}
		if key == nil {
			key = st.Schema.Key
		}
		for _, s := range st.Schema.States {
			if _, ok := states[s.Name]; !ok {
				states[s.Name] = s
			}
		}
	}
	return key, states
}

// changelogRecords returns how many log records a subtask's keyed state
// has beyond its materialized part (pending ones included), -1 for none.
func changelogRecords(st *metadata.Subtask) int64 {
	n := int64(-1)
	if st.Changelog != nil {
		n = max(st.Changelog.Records(), 0)
	}
	if st.Pending != nil {
		n = max(n, 0) + max(st.Pending.To-st.Pending.From+1, 0)
	}
	return n
}

// checkChangelog fails for a subtask whose keyed state needs a log replay.
func checkChangelog(op *metadata.Operator, st *metadata.Subtask) error {
	if n := changelogRecords(st); n > 0 {
		return fmt.Errorf("operator %q subtask %d: its keyed state is %d changelog records on top of a materialized snapshot: %w", op.UID, st.Index, n, ErrChangelog)
	}
	return nil
}

// scanKeyed reads the keyed state of one subtask: states gets each
// stream's state table, visit every entry (valid during the call only).
func (r *Reader) scanKeyed(ctx context.Context, op *metadata.Operator, st *metadata.Subtask, schema map[string]metadata.StateSchema,
	states func([]streamState) error, visit func(int, *entry) error) error {
	if err := checkChangelog(op, st); err != nil {
		return err
	}
	where := fmt.Sprintf("operator %q subtask %d", op.UID, st.Index)
	if st.Keyed != nil {
		f, err := r.store.OpenFile(ctx, r.snap.Dir, *st.Keyed)
		if err != nil {
			return fmt.Errorf("%s: keyed state %s: %w", where, st.Keyed.Path, err)
		}
		defer f.Close()
		if err := readStream(f, states, visit); err != nil {
			if errors.Is(err, errCorrupt) {
				// A damaged file fails its checksum at the end: say so
				// rather than where the parse tripped.
				if _, derr := io.Copy(io.Discard, f); errors.Is(derr, storage.ErrCorrupt) {
					err = derr
				}
			}
			return fmt.Errorf("%s: keyed state %s: %w", where, st.Keyed.Path, err)
		}
	}
	if st.Native != nil {
		if err := r.scanNative(ctx, op, st, schema, states, visit); err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
	}
	return nil
}

func (r *Reader) scanNative(ctx context.Context, op *metadata.Operator, st *metadata.Subtask, schema map[string]metadata.StateSchema,
	states func([]streamState) error, visit func(int, *entry) error) error {
	tmp, err := os.MkdirTemp(r.TempDir, "weir-stateread-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	open := func(f metadata.NativeFile) (io.ReadCloser, error) {
		rc, err := r.store.OpenFile(ctx, r.snap.Dir, f.Handle)
		if err != nil {
			return nil, fmt.Errorf("native state file %s: %w", f.Handle.Path, err)
		}
		return rc, nil
	}
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := nativeStream(ctx, st.Native, op.MaxParallelism, schema, open, tmp, pw)
		pw.CloseWithError(err)
		done <- err
	}()
	rerr := readStream(pr, states, visit)
	pr.CloseWithError(errors.New("reader stopped"))
	werr := <-done
	if werr != nil {
		return werr
	}
	if rerr != nil {
		return fmt.Errorf("native state: %w", rerr)
	}
	return nil
}

// timerEntry is a restored timer.
type timerEntry struct {
	eventTime bool
	t         timer.Timer
}

// scanTimers reads the timers of one subtask.
func (r *Reader) scanTimers(ctx context.Context, op *metadata.Operator, st *metadata.Subtask, visit func(timerEntry)) error {
	if st.Timers == nil {
		return nil
	}
	if err := checkChangelog(op, st); err != nil {
		return err
	}
	data, err := r.store.ReadFile(ctx, r.snap.Dir, *st.Timers)
	if err != nil {
		return fmt.Errorf("operator %q subtask %d: timers %s: %w", op.UID, st.Index, st.Timers.Path, err)
	}
	err = timer.NewService().RestoreSnapshot(data, 0, math.MaxInt, func(eventTime bool, t timer.Timer) {
		visit(timerEntry{eventTime, t})
	})
	if err != nil {
		return fmt.Errorf("operator %q subtask %d: timers %s: %w", op.UID, st.Index, st.Timers.Path, err)
	}
	return nil
}

// mergeState records a stream's state in the operator-wide table, checking
// that subtasks agree on its kind.
func mergeState(all map[string]*streamState, st streamState) error {
	if old, ok := all[st.name]; ok {
		if old.kind != st.kind {
			return fmt.Errorf("state %q is a %s state in one subtask and a %s state in another", st.name, old.kind, st.kind)
		}
		old.ttl = old.ttl || st.ttl
		return nil
	}
	all[st.name] = &st
	return nil
}

func sortedNames[V any](m map[string]V) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
