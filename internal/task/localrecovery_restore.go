package task

// Restoring from local copies (see localrecovery.go).

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"

	"github.com/weirstream/weir/internal/checkpoint/metadata"
	"github.com/weirstream/weir/internal/checkpoint/storage"
)

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
