package task

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"

	"github.com/weirstream/weir/internal/checkpoint/metadata"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/graph"
	"github.com/weirstream/weir/internal/state"
)

// RestoredState is one operator subtask's share of a checkpoint: its
// operator lists after redistribution, and the keyed-state and timer files
// whose key-group ranges overlap the subtask's (several after scaling in,
// part of one after scaling out: the readers filter by key group).
type RestoredState struct {
	Lists  []metadata.List
	Keyed  []storage.FileHandle
	Timers []storage.FileHandle
	// Native are the native (incremental) snapshots of old subtasks whose
	// key-group ranges overlap this subtask's.
	Native []NativeRestore
	// Changelogs are the changelog parts of old subtasks whose key-group
	// ranges overlap this subtask's (changelog state backend): records to
	// replay on top of Keyed or Native, filtered by key group.
	Changelogs []ChangelogRestore
	// OwnStorage is set when the checkpoint is in the storage and job
	// directory this run checkpoints to: its shared files may be
	// referenced by new checkpoints instead of uploaded again.
	OwnStorage bool
	open       func(storage.FileHandle) (io.ReadCloser, error)
	// local are the files of a local copy that matches this share
	// exactly (task-local recovery, localrecovery.go); nil: none.
	local *localFiles
	// storeBytes and localBytes count the bytes Open and FetchFile read
	// from the store and took from the local copy.
	storeBytes, localBytes atomic.Int64
}

// ChangelogRestore is one old subtask's changelog records: Pending first,
// then Log.
type ChangelogRestore struct {
	KeyGroupStart, KeyGroupEnd int
	Log                        *metadata.ChangelogState
	Pending                    *metadata.LogSegment
}

// ReadFile reads a whole restored file, verified against its handle.
func (r *RestoredState) ReadFile(h storage.FileHandle) ([]byte, error) {
	return readAllRestored(r.Open, h)
}

// readAllRestored reads the whole file h opened with open.
func readAllRestored(open func(storage.FileHandle) (io.ReadCloser, error), h storage.FileHandle) ([]byte, error) {
	rc, err := open(h)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return storage.ReadAllSized(rc, h.Size)
}

// NativeRestore is one old subtask's native snapshot.
type NativeRestore struct {
	KeyGroupStart, KeyGroupEnd int
	State                      *metadata.NativeState
}

// Open opens a restored file for reading: from the subtask's local copy
// if it has the file, verified against the handle's size and checksum
// before Open returns, else from the store, verified as it streams (see
// storage.OpenFile). A local file that fails verification is read from
// the store instead, with a warning.
func (r *RestoredState) Open(h storage.FileHandle) (io.ReadCloser, error) {
	if p, ok := r.local.path(h); ok {
		f, err := openLocal(p, h)
		if err == nil {
			r.localBytes.Add(h.Size)
			return f, nil
		}
		r.local.failed(h, err)
	}
	return r.openStore(h)
}

func (r *RestoredState) openStore(h storage.FileHandle) (io.ReadCloser, error) {
	rc, err := r.open(h)
	if err != nil {
		return nil, err
	}
	return countingReader{rc, &r.storeBytes}, nil
}

// FetchFile places the content of the restored file h at path, which must
// not exist (its parent directories are created): from the subtask's
// local copy if it has the file and it passes verification (a hard link
// when immutable, an sstable say, and the file system allows one; a copy
// otherwise), else downloaded from the store and verified as it streams.
// On error nothing is left at path.
func (r *RestoredState) FetchFile(h storage.FileHandle, path string, immutable bool) error {
	if p, ok := r.local.path(h); ok {
		f, err := openLocal(p, h)
		if err == nil {
			f.Close()
			err = state.LinkNativeFile(p, path, immutable)
		}
		if err == nil {
			r.localBytes.Add(h.Size)
			return nil
		}
		_ = os.Remove(path)
		r.local.failed(h, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	src, err := r.openStore(h)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.Create(path)
	if err != nil {
		return err
	}
	_, err = io.Copy(dst, src)
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(path)
	}
	return err
}

// List returns the restored elements of the operator list state name, and
// false if the checkpoint has no such list.
func (r *RestoredState) List(name string) (metadata.List, bool) {
	for _, l := range r.Lists {
		if l.Name == name {
			return l, true
		}
	}
	return metadata.List{}, false
}

type restoredOp struct {
	op *metadata.Operator
	// local, if set, holds local copies of op's state (localrecovery.go).
	local *localRecovery
}

// ErrStateMismatch is wrapped by the errors of a restore whose checkpoint
// does not fit the job.
var ErrStateMismatch = errors.New("checkpoint state does not match the job")

// mapRestoredState matches the checkpoint's operators to the job's nodes by
// uid. State of an operator the job no longer has, or a changed maximum
// parallelism (key groups), is an error: restoring would lose state.
func mapRestoredState(jg *graph.JobGraph, cp *metadata.Checkpoint) (map[string]*restoredOp, error) {
	return mapRestoredStateAllow(jg, cp, nil)
}

// mapRestoredStateAllow is mapRestoredState; with skip set, the state of an
// operator the job does not have is not an error: skip is called with it
// and the state is dropped (execution.state-recovery.ignore-unclaimed-state,
// Flink's --allowNonRestoredState).
func mapRestoredStateAllow(jg *graph.JobGraph, cp *metadata.Checkpoint, skip func(op *metadata.Operator)) (map[string]*restoredOp, error) {
	nodes := map[string]*graph.Node{}
	for _, v := range jg.Vertices {
		for _, n := range v.Nodes {
			nodes[n.UID] = n
		}
	}
	out := map[string]*restoredOp{}
	var errs []string
	kind := "checkpoint"
	if cp.Savepoint {
		kind = "savepoint"
	}
	for i := range cp.Operators {
		op := &cp.Operators[i]
		n, ok := nodes[op.UID]
		if !ok && onlyChannelState(op) {
			// In-flight data of an operator that is gone: its edges are
			// checked (or skipped) with the rest of the channel state.
			continue
		}
		if !ok && skip != nil {
			skip(op)
			continue
		}
		if !ok {
			errs = append(errs, fmt.Sprintf("the %s has state for operator uid %q (%s), which the job does not have; give the operator its old uid, or drop the state with --allow-non-restored-state (execution.state-recovery.ignore-unclaimed-state)", kind, op.UID, op.Name))
			continue
		}
		if n.MaxParallelism != op.MaxParallelism && n.MaxParallelismDerived && op.MaxParallelism >= n.Parallelism {
			// Not set by the user: the snapshot's key groups stay (Flink
			// adopts the restored max parallelism too).
			n.MaxParallelism = op.MaxParallelism
		}
		if n.MaxParallelism != op.MaxParallelism {
			errs = append(errs, fmt.Sprintf("operator %q: max parallelism is %d, the checkpoint was taken with %d; key groups cannot be remapped, set pipeline.max-parallelism back to %d", n.Name, n.MaxParallelism, op.MaxParallelism, op.MaxParallelism))
			continue
		}
		out[op.UID] = &restoredOp{op: op}
	}
	if len(errs) > 0 {
		sort.Strings(errs)
		return nil, fmt.Errorf("%w (%s %d): %s", ErrStateMismatch, kind, cp.ID, strings.Join(errs, "; "))
	}
	return out, nil
}

// onlyChannelState reports whether op's state in the checkpoint is the
// in-flight data of an unaligned checkpoint and nothing else.
func onlyChannelState(op *metadata.Operator) bool {
	channels := false
	for _, st := range op.Subtasks {
		if len(st.Lists) > 0 || st.Keyed != nil || st.Timers != nil || st.Native != nil || st.Changelog != nil || st.Pending != nil {
			return false
		}
		channels = channels || len(st.Channels) > 0
	}
	return channels
}

// forSubtask computes subtask index's share at parallelism p, owning key
// groups kgStart..kgEnd.
func (r *restoredOp) forSubtask(index, p, kgStart, kgEnd int, open func(storage.FileHandle) (io.ReadCloser, error)) *RestoredState {
	rs := &RestoredState{open: open}
	// Operator lists: per name, gather every old subtask's elements and
	// redistribute them (split or union) to the new parallelism.
	type acc struct {
		union bool
		old   [][][]byte
	}
	var names []string
	lists := map[string]*acc{}
	for _, st := range r.op.Subtasks {
		for _, l := range st.Lists {
			a := lists[l.Name]
			if a == nil {
				a = &acc{union: l.Union, old: make([][][]byte, r.op.Parallelism)}
				lists[l.Name] = a
				names = append(names, l.Name)
			}
			a.old[st.Index] = append(a.old[st.Index], l.Elements...)
		}
		if st.KeyGroupStart <= kgEnd && kgStart <= st.KeyGroupEnd {
			if st.Keyed != nil {
				rs.Keyed = append(rs.Keyed, *st.Keyed)
			}
			if st.Timers != nil {
				rs.Timers = append(rs.Timers, *st.Timers)
			}
			if st.Native != nil {
				rs.Native = append(rs.Native, NativeRestore{KeyGroupStart: st.KeyGroupStart, KeyGroupEnd: st.KeyGroupEnd, State: st.Native})
			}
			if st.Changelog != nil || st.Pending != nil {
				rs.Changelogs = append(rs.Changelogs, ChangelogRestore{KeyGroupStart: st.KeyGroupStart, KeyGroupEnd: st.KeyGroupEnd,
					Log: st.Changelog, Pending: st.Pending})
			}
		}
	}
	if r.local != nil {
		r.local.attach(rs, r.op, index, kgStart, kgEnd)
	}
	sort.Strings(names)
	for _, name := range names {
		a := lists[name]
		d := state.SplitDistribute
		if a.union {
			d = state.UnionDistribute
		}
		elems := state.Redistribute(d, a.old, p)[index]
		if elems == nil {
			elems = [][]byte{}
		}
		rs.Lists = append(rs.Lists, metadata.List{Name: name, Union: a.union, Elements: elems})
	}
	return rs
}

// ErrRestoreData is wrapped by the errors of a restore whose checkpoint
// data is damaged: a file the checkpoint references is missing
// (storage.ErrNotFound) or differs from its recorded size or checksum
// (storage.ErrCorrupt). Restoring the same checkpoint again fails the same
// way. Deploy returns it for a file that is missing or of another size
// (checked before any task is built); Run's error wraps it when a task's
// restore read a file whose content does not match its checksum.
var ErrRestoreData = errors.New("checkpoint data cannot be restored")

// restoreDataError wraps err in ErrRestoreData if it reports damaged data.
func restoreDataError(err error) error {
	if err == nil || errors.Is(err, ErrRestoreData) || !errors.Is(err, storage.ErrCorrupt) && !errors.Is(err, storage.ErrNotFound) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrRestoreData, err)
}

// checkRestoredFiles checks, before any task is built, that every file the
// restore will read exists and has its recorded size (one metadata request
// per file, a few at a time; the content is verified as it is read).
func (j *Job) checkRestoredFiles() error {
	if j.opts.RestoreStorage == nil {
		return nil
	}
	var files []storage.FileHandle
	for _, r := range j.restored {
		for _, st := range r.op.Subtasks {
			files = append(files, st.Files()...)
		}
	}
	err := j.opts.RestoreStorage.CheckFiles(j.ctx, j.opts.RestoreJob, files)
	if err == nil {
		return nil
	}
	if err = restoreDataError(err); errors.Is(err, ErrRestoreData) {
		return fmt.Errorf("checkpoint %d: %w", j.opts.Restore.ID, err)
	}
	return fmt.Errorf("check the files of checkpoint %d: %w", j.opts.Restore.ID, err)
}

func (j *Job) openRestored(h storage.FileHandle) (io.ReadCloser, error) {
	if j.opts.RestoreStorage == nil {
		return nil, fmt.Errorf("no checkpoint storage to read %s from", h.Path)
	}
	rc, err := j.opts.RestoreStorage.OpenFile(j.ctx, j.opts.RestoreJob, h)
	if err != nil {
		return nil, j.restoreFailed(restoreDataError(err))
	}
	return &restoredReader{rc: rc, j: j}, nil
}

// restoreFailed remembers the first error of a restored read that found
// damaged data, for Run, and returns err.
func (j *Job) restoreFailed(err error) error {
	if errors.Is(err, ErrRestoreData) {
		j.restoreDamage.CompareAndSwap(nil, &err)
	}
	return err
}

// restoredReader reads a restored file, its verification errors wrapped in
// ErrRestoreData.
type restoredReader struct {
	rc   io.ReadCloser
	j    *Job
	done bool // Read returned an error or io.EOF
}

func (r *restoredReader) Read(p []byte) (int, error) {
	n, err := r.rc.Read(p)
	if err != nil {
		r.done = true
		if err != io.EOF {
			err = r.j.restoreFailed(restoreDataError(err))
		}
	}
	return n, err
}

// Close first reads what the consumer left (it stopped early, after a
// parse error, say): the size and checksum are verified only at the end,
// and damage found there is what Run reports.
func (r *restoredReader) Close() error {
	if !r.done {
		_, _ = io.Copy(io.Discard, r)
	}
	return r.rc.Close()
}
