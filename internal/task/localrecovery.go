package task

// Task-local recovery (Flink's local recovery).
//
// With LocalRecoveryOptions.Backup, every subtask keeps, besides what it
// uploads, a local copy of its keyed state for each checkpoint: the native
// snapshot directory of an incremental pebble checkpoint is kept instead of
// deleted after the upload (a rename, nothing written), and the canonical
// stream of a full checkpoint (either backend) and the timers are written
// to a local file as they are uploaded (a second write, as Flink does for
// its heap backend). With LocalRecoveryOptions.FromLocal, a restore of the
// job's own checkpoint uses, per operator subtask, a copy that matches
// exactly and reads nothing of that subtask's keyed state from the store;
// every other subtask (no copy, another key-group range after rescaling, a
// damaged copy) reads the store as without local recovery, with a warning
// that names the subtask and why.
//
// # Layout
//
//	<dir>/<job>-<store>/            one scope per job directory and store:
//	                                job = Options.CheckpointJob, store =
//	                                8 hex digits of FNV-1a of the
//	                                storage's Location
//	  chk-<n>/                      the copies of checkpoint n
//	    <uid>-<hash>-<subtask>/     one operator subtask (uid sanitized,
//	                                hash = 8 hex digits of FNV-1a of the
//	                                uid, since sanitizing is not injective)
//	      native/                   a pebble native snapshot (its files)
//	      keyed.kst                 a canonical keyed-state stream
//	      timers.tmr                the encoded timers
//	      _manifest                 written last: the copy is complete
//
// <dir> is LocalRecoveryOptions.Dirs[subtask % len(Dirs)]. The _manifest is
// JSON (localManifest): the checkpoint id, store location, job directory,
// uid, subtask index and key-group range, the format, and for each file the
// handle of its upload (path, size, CRC-32C), whose size and checksum are
// the local file's too. It is written to _manifest.tmp and renamed, so a
// directory without _manifest is an incomplete copy and is never used.
//
// # Matching
//
// A copy is used only if the restored checkpoint is in the job's own store
// and directory, has the copy's id, the subtask owns exactly the copy's
// key-group range, and every keyed file the checkpoint lists for the
// subtask (keyed stream, timers, native files and registry) is the copy's,
// handle for handle: the copy then holds exactly the bytes the store
// holds. Every local file is checked for its size when the job is
// deployed and for its CRC-32C before it is used; a file that fails is
// read from the store instead (with a warning), the others stay local.
// Subtasks of the changelog backend are not covered (their log lives in
// the store only).
//
// # Retention
//
// Only the copies of the latest completed checkpoint are kept, plus those
// of checkpoints in progress: the completion of a checkpoint that has
// copies deletes every older one, an abort deletes the aborted one's, and
// a deployment deletes every copy but those of the checkpoint it restores
// (all of them on a fresh start or a restore of another snapshot). A copy
// written for a checkpoint that was completed over or aborted meanwhile is
// deleted by its writer. Copies of the latest checkpoint stay after the
// job ends, so that a resume on the same machine restores locally.
//
// A failure to write a copy never fails a checkpoint: the subtask warns and
// goes on without one.

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"hash/fnv"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/weirstream/weir/internal/checkpoint/metadata"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/state"
)

// LocalRecoveryOptions configure task-local recovery (see
// localrecovery.go). The zero value turns it off.
type LocalRecoveryOptions struct {
	// Backup keeps a local copy of each subtask's keyed state for the
	// latest completed checkpoint (and those in progress). Default false
	// (execution.checkpointing.local-backup.enabled); FromLocal implies it.
	Backup bool
	// FromLocal restores each subtask from its local copy when one
	// matches the checkpoint exactly, and from the checkpoint storage
	// otherwise. Default false (execution.state-recovery.from-local).
	FromLocal bool
	// Dirs are the root directories of the copies; a subtask's copies go
	// under Dirs[subtask % len(Dirs)]. For the pebble backend they should
	// be on the file system of Options.StateDir: a native snapshot then
	// moves there with a rename and is restored with hard links. Default
	// <StateDir>/local-recovery (execution.checkpointing.local-backup.dirs).
	Dirs []string
}

// DefaultLocalRecoveryDir is the directory under Options.StateDir that
// holds the local copies when LocalRecoveryOptions.Dirs is empty.
const DefaultLocalRecoveryDir = "local-recovery"

const (
	localManifestName    = "_manifest"
	localManifestVersion = 1
	localNativeDir       = "native"
	localKeyedName       = "keyed.kst"
	localTimersName      = "timers.tmr"
	localFormatCanonical = "canonical"
	localFormatNative    = "native"
)

// localManifest is the _manifest of a copy (see the layout above).
type localManifest struct {
	Version    int    `json:"version"`
	Checkpoint int64  `json:"checkpoint"`
	Store      string `json:"store"`
	Job        string `json:"job"`
	UID        string `json:"uid"`
	Subtask    int    `json:"subtask"`
	// KeyGroupStart and KeyGroupEnd are the subtask's key-group range.
	KeyGroupStart int `json:"keyGroupStart"`
	KeyGroupEnd   int `json:"keyGroupEnd"`
	// Format is "native" (pebble's own files) or "canonical" (the
	// backend-independent stream, from either backend).
	Format string `json:"format"`
	// Keyed and Timers are the uploaded handles of keyed.kst and
	// timers.tmr; Native the uploaded native state, whose files are under
	// native/ by their names.
	Keyed  *storage.FileHandle   `json:"keyed,omitempty"`
	Timers *storage.FileHandle   `json:"timers,omitempty"`
	Native *metadata.NativeState `json:"native,omitempty"`
}

// localRecovery is one deployment's side of local recovery: the job scope
// of the copies and which checkpoints' copies are still wanted. Its
// methods are safe for concurrent use (the asynchronous phases of every
// subtask write copies; completions and aborts come from the driver).
type localRecovery struct {
	fromLocal bool
	dirs      []string // the scope directory under each of Dirs
	store     string   // the checkpoint storage's Location
	job       string   // Options.CheckpointJob
	logger    *slog.Logger
	// restoreID is the checkpoint this deployment restores from its own
	// store and directory, whose copies it may use; -1 for none.
	restoreID int64

	mu sync.Mutex
	// floor: copies of checkpoints before it are not wanted (a newer
	// checkpoint with copies completed); aborted: neither are these.
	floor   int64
	aborted map[int64]bool
	// copies are the checkpoints with a complete copy written by this
	// deployment.
	copies map[int64]bool
}

// newLocalRecovery returns the deployment's local recovery, nil when it is
// off or there is no checkpoint storage.
func newLocalRecovery(opts *Options) *localRecovery {
	lo := opts.LocalRecovery
	if !lo.Backup && !lo.FromLocal || opts.Checkpoints == nil || opts.CheckpointJob == "" {
		return nil
	}
	dirs := lo.Dirs
	if len(dirs) == 0 {
		dirs = []string{filepath.Join(opts.StateDir, DefaultLocalRecoveryDir)}
	}
	loc := opts.Checkpoints.Location()
	scope := fmt.Sprintf("%s-%08x", sanitize(opts.CheckpointJob), fnv32(loc))
	l := &localRecovery{fromLocal: lo.FromLocal, store: loc, job: opts.CheckpointJob, logger: opts.Logger,
		restoreID: -1, aborted: map[int64]bool{}, copies: map[int64]bool{}}
	for _, d := range dirs {
		l.dirs = append(l.dirs, filepath.Join(d, scope))
	}
	return l
}

// RemoveLocalCopies deletes every local copy of the job
// opts.CheckpointJob in opts.Checkpoints (with the LocalRecovery, StateDir
// and Logger of opts): for a job that ended without retained checkpoints,
// whose copies nothing can use any more. It does nothing when local
// recovery is off.
func RemoveLocalCopies(opts Options) {
	opts.ensureDefaults()
	l := newLocalRecovery(&opts)
	if l == nil {
		return
	}
	l.removeCopies(func(int64) bool { return true })
	for _, d := range l.dirs {
		_ = os.Remove(d) // the job's scope, if nothing else is in it
	}
}

func fnv32(s string) uint32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(s))
	return h.Sum32()
}

// openLocalRecovery sets up the deployment's local recovery: it deletes
// the copies the deployment cannot use and, with FromLocal, lets the
// restore of the job's own checkpoint use the others.
func (j *Job) openLocalRecovery() {
	l := newLocalRecovery(&j.opts)
	j.local = l
	if l == nil {
		return
	}
	o := &j.opts
	if o.Restore != nil && o.RestoreStorage.Same(o.Checkpoints) && o.RestoreJob == o.CheckpointJob {
		l.restoreID = o.Restore.ID
	}
	l.removeCopies(func(id int64) bool { return id != l.restoreID })
	if l.restoreID >= 0 && l.fromLocal {
		for _, r := range j.restored {
			r.local = l
		}
	}
}

// subtaskDir is the directory of the copy of checkpoint id for subtask
// subtask of the operator uid.
func (l *localRecovery) subtaskDir(id int64, uid string, subtask int) string {
	root := l.dirs[subtask%len(l.dirs)]
	return filepath.Join(root, "chk-"+strconv.FormatInt(id, 10), fmt.Sprintf("%s-%08x-%d", sanitize(uid), fnv32(uid), subtask))
}

// removeCopies deletes the chk-<n> directories of every scope directory
// for which drop(n) is true.
func (l *localRecovery) removeCopies(drop func(id int64) bool) {
	for _, d := range l.dirs {
		entries, err := os.ReadDir(d)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				l.logger.Warn("could not list the local copies of checkpoints", "dir", d, "err", err)
			}
			continue
		}
		for _, e := range entries {
			s, ok := strings.CutPrefix(e.Name(), "chk-")
			id, err := strconv.ParseInt(s, 10, 64)
			if !ok || err != nil || !e.IsDir() || !drop(id) {
				continue
			}
			if err := os.RemoveAll(filepath.Join(d, e.Name())); err != nil {
				l.logger.Warn("could not delete the local copy of a checkpoint", "checkpoint", id, "dir", d, "err", err)
			}
		}
	}
}

// wanted reports whether copies of checkpoint id are still wanted.
func (l *localRecovery) wanted(id int64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.wantedLocked(id)
}

func (l *localRecovery) wantedLocked(id int64) bool { return id >= l.floor && !l.aborted[id] }

// complete notes that checkpoint id completed: if it has copies, every
// older copy goes.
func (l *localRecovery) complete(id int64) {
	if l == nil {
		return
	}
	l.mu.Lock()
	if !l.copies[id] || id <= l.floor {
		l.mu.Unlock()
		return
	}
	l.floor = id
	for k := range l.aborted {
		if k < id {
			delete(l.aborted, k)
		}
	}
	for k := range l.copies {
		if k < id {
			delete(l.copies, k)
		}
	}
	l.mu.Unlock()
	l.removeCopies(func(n int64) bool { return n < id })
}

// abort notes that checkpoint id was aborted: its copies go.
func (l *localRecovery) abort(id int64) {
	if l == nil {
		return
	}
	l.mu.Lock()
	if id >= l.floor {
		l.aborted[id] = true
	}
	delete(l.copies, id)
	l.mu.Unlock()
	l.removeCopies(func(n int64) bool { return n == id })
}

// localCopy is the local copy of one operator subtask's keyed state being
// written by the asynchronous phase of a checkpoint. Every method is a
// no-op on nil (no copy is made) and after a failure, which drops the copy
// with a warning: a copy never fails a checkpoint.
type localCopy struct {
	l    *localRecovery
	dir  string
	name string // "operator %q subtask %d", for messages
	m    localManifest

	kst    *os.File
	kstBuf *bufio.Writer
	kstErr error

	done   bool
	failed bool
}

// beginLocalCopy starts the copy of operator c's snapshot s for
// checkpoint id; nil when no copy is to be made (local recovery off, no
// keyed state, the changelog backend, a savepoint, a checkpoint no longer
// wanted).
func (t *task) beginLocalCopy(id int64, c *OpContext, s *OperatorSnapshot) *localCopy {
	l := t.local
	if l == nil || t.store == nil || s.Keyed == nil && s.Native == nil && len(s.Timers) == 0 || s.Async != nil {
		return nil
	}
	if _, sp := t.targets.get(id); sp || !l.wanted(id) {
		return nil
	}
	lc := &localCopy{l: l, dir: l.subtaskDir(id, c.UID, c.Subtask), name: fmt.Sprintf("operator %q subtask %d", c.Name, c.Subtask),
		m: localManifest{Version: localManifestVersion, Checkpoint: id, Store: l.store, Job: l.job, UID: c.UID, Subtask: c.Subtask,
			KeyGroupStart: c.KeyGroupStart, KeyGroupEnd: c.KeyGroupEnd}}
	// A leftover of an earlier deployment (ids are not reused, but a
	// copy must never mix two writers).
	if err := os.RemoveAll(lc.dir); err != nil {
		lc.fail(err)
	}
	return lc
}

// fail drops the copy, with a warning unless the checkpoint is no longer
// wanted anyway (an abort deleted the copy under its writer).
func (lc *localCopy) fail(err error) {
	if lc.failed {
		return
	}
	lc.failed = true
	if !lc.l.wanted(lc.m.Checkpoint) {
		lc.discard()
		return
	}
	lc.l.logger.Warn(fmt.Sprintf("Could not keep a local copy of checkpoint %d for %s: a restore will read its state from checkpoint storage.",
		lc.m.Checkpoint, lc.name), "dir", lc.dir, "err", err)
	lc.discard()
}

// discard deletes what the copy wrote.
func (lc *localCopy) discard() {
	if lc.kst != nil {
		_ = lc.kst.Close()
		lc.kst = nil
	}
	_ = os.RemoveAll(lc.dir)
	_ = os.Remove(filepath.Dir(lc.dir)) // chk-<n>, if this was its last copy
}

// cleanup drops a copy that was not finished (the checkpoint was declined).
func (lc *localCopy) cleanup() {
	if lc == nil || lc.done || lc.failed {
		return
	}
	lc.done = true
	lc.discard()
}

func (lc *localCopy) active() bool { return lc != nil && !lc.failed && !lc.done }

// teeKeyed returns a writer that writes to w and, without ever failing,
// to the copy's keyed.kst.
func (lc *localCopy) teeKeyed(w io.Writer) io.Writer {
	if !lc.active() {
		return w
	}
	if err := os.MkdirAll(lc.dir, 0o755); err != nil {
		lc.fail(err)
		return w
	}
	f, err := os.Create(filepath.Join(lc.dir, localKeyedName))
	if err != nil {
		lc.fail(err)
		return w
	}
	lc.kst, lc.kstBuf = f, bufio.NewWriterSize(f, 256<<10)
	return io.MultiWriter(w, bestEffort{lc})
}

// bestEffort writes to the copy's keyed.kst and never fails: an error is
// remembered (the copy is dropped at keyed) and later writes are skipped.
type bestEffort struct{ lc *localCopy }

func (b bestEffort) Write(p []byte) (int, error) {
	if b.lc.kstErr == nil {
		_, b.lc.kstErr = b.lc.kstBuf.Write(p)
	}
	return len(p), nil
}

// keyed records the upload h of the stream teeKeyed copied.
func (lc *localCopy) keyed(h *storage.FileHandle) {
	if !lc.active() || lc.kst == nil {
		return
	}
	err := lc.kstErr
	if err == nil {
		err = lc.kstBuf.Flush()
	}
	if cerr := lc.kst.Close(); err == nil {
		err = cerr
	}
	lc.kst = nil
	if err == nil && h == nil {
		err = errors.New("no upload handle")
	}
	if err != nil {
		lc.fail(err)
		return
	}
	lc.m.Format = localFormatCanonical
	lc.m.Keyed = h
}

// timers copies the encoded timers uploaded as h.
func (lc *localCopy) timers(data []byte, h *storage.FileHandle) {
	if !lc.active() || h == nil {
		return
	}
	if err := os.MkdirAll(lc.dir, 0o755); err != nil {
		lc.fail(err)
		return
	}
	if err := os.WriteFile(filepath.Join(lc.dir, localTimersName), data, 0o644); err != nil {
		lc.fail(err)
		return
	}
	lc.m.Timers = h
}

// native keeps the snapshot's directory, uploaded as ns, as the copy's
// native/ directory (a rename on one file system).
func (lc *localCopy) native(snap *state.NativeSnapshot, ns *metadata.NativeState) {
	if !lc.active() || ns == nil {
		return
	}
	if err := os.MkdirAll(lc.dir, 0o755); err != nil {
		lc.fail(err)
		return
	}
	if err := snap.Keep(filepath.Join(lc.dir, localNativeDir)); err != nil {
		lc.fail(err)
		return
	}
	lc.m.Format = localFormatNative
	lc.m.Native = ns
}

// finish writes the manifest, which makes the copy usable, and registers
// the copy; a checkpoint no longer wanted by then loses it at once.
func (lc *localCopy) finish() {
	if !lc.active() {
		return
	}
	if lc.m.Keyed == nil && lc.m.Timers == nil && lc.m.Native == nil {
		lc.cleanup() // nothing keyed to keep
		return
	}
	if err := writeLocalManifest(lc.dir, &lc.m); err != nil {
		lc.fail(err)
		return
	}
	lc.done = true
	l := lc.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.wantedLocked(lc.m.Checkpoint) {
		lc.discard()
		return
	}
	l.copies[lc.m.Checkpoint] = true
}

// writeLocalManifest writes m as dir/_manifest: to a temporary file, then
// renamed. The copy is not synced: after a machine crash, a copy whose
// files did not all reach the disk fails its size or checksum check and
// the store is read instead.
func writeLocalManifest(dir string, m *localManifest) error {
	data, err := json.Marshal(m)
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, localManifestName+".tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, localManifestName))
}

// readLocalManifest reads and checks the manifest of the copy in dir.
func readLocalManifest(dir string) (*localManifest, error) {
	data, err := os.ReadFile(filepath.Join(dir, localManifestName))
	if err != nil {
		return nil, err
	}
	var m localManifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	if m.Version != localManifestVersion {
		return nil, fmt.Errorf("manifest version %d, want %d", m.Version, localManifestVersion)
	}
	return &m, nil
}

// localFiles are the files of a local copy a subtask restores from, by
// the path of their upload.
type localFiles struct {
	l     *localRecovery
	name  string
	id    int64
	files map[string]string
}

// path returns the local file holding h, if the copy has it.
func (lf *localFiles) path(h storage.FileHandle) (string, bool) {
	if lf == nil {
		return "", false
	}
	p, ok := lf.files[h.Path]
	return p, ok
}

// failed warns that the local file of h cannot be used.
func (lf *localFiles) failed(h storage.FileHandle, err error) {
	lf.l.logger.Warn(fmt.Sprintf("The local copy of %s of checkpoint %d for %s is damaged: reading it from checkpoint storage.", h.Path, lf.id, lf.name), "err", err)
}

// attach lets rs, the share of subtask index (key groups kgStart..kgEnd)
// of operator op, read its keyed state from the local copy of the
// restored checkpoint if one matches exactly; otherwise it warns why not.
func (l *localRecovery) attach(rs *RestoredState, op *metadata.Operator, index, kgStart, kgEnd int) {
	var old []*metadata.Subtask
	for i := range op.Subtasks {
		st := &op.Subtasks[i]
		if st.KeyGroupStart <= kgEnd && kgStart <= st.KeyGroupEnd && (st.Keyed != nil || st.Timers != nil || st.Native != nil) {
			if st.Changelog != nil || st.Pending != nil {
				return // the changelog backend: its log is in the store only
			}
			old = append(old, st)
		}
	}
	if len(old) == 0 {
		return // no keyed state to restore
	}
	name := fmt.Sprintf("operator %q subtask %d", op.Name, index)
	dir := l.subtaskDir(l.restoreID, op.UID, index)
	fallback := func(why string, args ...any) {
		l.logger.Warn(fmt.Sprintf("Restoring %s from checkpoint storage: its local copy of checkpoint %d %s.",
			name, l.restoreID, fmt.Sprintf(why, args...)), "dir", dir)
	}
	m, err := readLocalManifest(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		fallback("is missing")
		return
	case err != nil:
		fallback("is damaged (%v)", err)
		return
	}
	if m.KeyGroupStart != kgStart || m.KeyGroupEnd != kgEnd {
		fallback("holds key groups [%d, %d] and the subtask now owns [%d, %d] (the job was rescaled)", m.KeyGroupStart, m.KeyGroupEnd, kgStart, kgEnd)
		return
	}
	if why := m.mismatch(l, op.UID, index, old); why != "" {
		fallback("does not match the checkpoint: %s", why)
		return
	}
	files := map[string]string{}
	add := func(h *storage.FileHandle, name string) {
		if h != nil {
			files[h.Path] = filepath.Join(dir, filepath.FromSlash(name))
		}
	}
	add(m.Keyed, localKeyedName)
	add(m.Timers, localTimersName)
	if m.Native != nil {
		for _, f := range m.Native.Files {
			add(&f.Handle, localNativeDir+"/"+f.Name)
		}
	}
	for _, p := range slices.Sorted(maps.Keys(files)) {
		want := handleSize(m, p)
		fi, err := os.Stat(files[p])
		if err == nil && fi.Size() != want {
			err = fmt.Errorf("%s has %d bytes, not %d", files[p], fi.Size(), want)
		}
		if err != nil {
			fallback("is damaged (%v)", err)
			return
		}
	}
	rs.local = &localFiles{l: l, name: name, id: l.restoreID, files: files}
	l.logger.Info(fmt.Sprintf("Restoring %s from its local copy of checkpoint %d.", name, l.restoreID), "dir", dir)
}

// handleSize returns the size of the upload path of m's files.
func handleSize(m *localManifest, path string) int64 {
	for _, h := range []*storage.FileHandle{m.Keyed, m.Timers} {
		if h != nil && h.Path == path {
			return h.Size
		}
	}
	if m.Native != nil {
		for _, f := range m.Native.Files {
			if f.Handle.Path == path {
				return f.Handle.Size
			}
		}
	}
	return -1
}

// mismatch says how the copy m differs from the state old (the subtasks of
// the checkpoint whose key groups overlap the restoring subtask's), or ""
// if it holds exactly that state.
func (m *localManifest) mismatch(l *localRecovery, uid string, index int, old []*metadata.Subtask) string {
	switch {
	case m.Checkpoint != l.restoreID:
		return fmt.Sprintf("it is of checkpoint %d", m.Checkpoint)
	case m.Store != l.store || m.Job != l.job:
		return fmt.Sprintf("it is of job directory %q in storage %q", m.Job, m.Store)
	case m.UID != uid || m.Subtask != index:
		return fmt.Sprintf("it is of operator uid %q subtask %d", m.UID, m.Subtask)
	case len(old) != 1:
		return fmt.Sprintf("the checkpoint has %d subtasks' state for these key groups", len(old))
	}
	st := old[0]
	if st.KeyGroupStart != m.KeyGroupStart || st.KeyGroupEnd != m.KeyGroupEnd {
		return fmt.Sprintf("the checkpoint's subtask holds key groups [%d, %d]", st.KeyGroupStart, st.KeyGroupEnd)
	}
	if !sameHandle(st.Keyed, m.Keyed) {
		return "the keyed-state file differs"
	}
	if !sameHandle(st.Timers, m.Timers) {
		return "the timers file differs"
	}
	if (st.Native == nil) != (m.Native == nil) {
		return "one holds native files, the other not"
	}
	if st.Native != nil {
		a, b := st.Native, m.Native
		if string(a.Registry) != string(b.Registry) {
			return "the state registry differs"
		}
		if !slices.EqualFunc(a.Files, b.Files, func(x, y metadata.NativeFile) bool {
			return x.Name == y.Name && x.Handle == y.Handle && x.Shared == y.Shared
		}) {
			return "the native files differ"
		}
	}
	return ""
}

func sameHandle(a, b *storage.FileHandle) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// openLocal opens the local file p holding h and verifies its size and
// CRC-32C (a local read, before any byte is used); the returned file is
// positioned at the start.
func openLocal(p string, h storage.FileHandle) (*os.File, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	if err := verifyLocal(f, h); err != nil {
		f.Close()
		return nil, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func verifyLocal(r io.Reader, h storage.FileHandle) error {
	c := crc32.New(castagnoli)
	n, err := io.Copy(c, r)
	switch {
	case err != nil:
		return err
	case n != h.Size:
		return fmt.Errorf("%d bytes, recorded %d", n, h.Size)
	case c.Sum32() != h.CRC32C:
		return fmt.Errorf("checksum %08x, recorded %08x", c.Sum32(), h.CRC32C)
	}
	return nil
}

// countingReader counts the bytes read through it into n.
type countingReader struct {
	io.ReadCloser
	n *atomic.Int64
}

func (c countingReader) Read(p []byte) (int, error) {
	k, err := c.ReadCloser.Read(p)
	c.n.Add(int64(k))
	return k, err
}

// RestoreBytes returns the bytes of keyed state (streams, timers, native
// files) the subtasks' restores read so far from checkpoint storage and
// from local copies.
func (j *Job) RestoreBytes() (store, local int64) {
	for _, t := range j.tasks {
		for _, c := range t.ctxs {
			if r := c.Restored; r != nil {
				store += r.storeBytes.Load()
				local += r.localBytes.Load()
			}
		}
	}
	return store, local
}
