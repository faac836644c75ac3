package task

// Writing local copies (see localrecovery.go).

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/weirstream/weir/internal/checkpoint/metadata"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/state"
)

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
