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
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/weirstream/weir/internal/checkpoint/metadata"
	"github.com/weirstream/weir/internal/checkpoint/storage"
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
