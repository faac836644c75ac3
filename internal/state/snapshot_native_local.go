package state

// Local copies of native snapshots, for task-local recovery.
//
// A native snapshot's directory already is a complete copy of the database
// at the snapshot: hard links to the sstables, copies of the small metadata
// files. Local recovery keeps it (Keep) instead of deleting it after the
// upload, and a later restore of the same key-group range builds the new
// database directory from it (LinkNativeFile): hard links to the immutable
// files, copies of the others, so that the restored database, which
// rewrites its MANIFEST and deletes obsolete files, never changes a file
// of the copy.

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// Keep moves the snapshot's directory to dir, which must not exist (its
// parent must), and hands it over to the caller: Dir becomes dir, and
// Release no longer deletes anything. On one file system it is a rename:
// nothing is written. Across file systems the files are hard linked where
// possible and copied otherwise, then the old directory is deleted. After
// an error the snapshot is where it was and still Release's (a partial dir
// is removed). Like Release it may be called from any goroutine, but not
// concurrently with another use of the snapshot.
func (s *NativeSnapshot) Keep(dir string) error {
	if _, err := os.Lstat(dir); err == nil {
		return fmt.Errorf("state: keep native snapshot in %s: %w", dir, fs.ErrExist)
	}
	if err := os.Rename(s.Dir, dir); err != nil {
		// Another file system (or a rename the OS refused): file by file.
		for _, f := range s.Files {
			src := filepath.Join(s.Dir, filepath.FromSlash(f.Name))
			dst := filepath.Join(dir, filepath.FromSlash(f.Name))
			if err := LinkNativeFile(src, dst, f.Shared); err != nil {
				_ = os.RemoveAll(dir)
				return fmt.Errorf("state: keep native snapshot in %s: %w", dir, err)
			}
		}
		_ = os.RemoveAll(s.Dir) // the copy is complete; a leftover is only space
	}
	s.Dir, s.kept = dir, true
	return nil
}

// LinkNativeFile makes dst a copy of src, a file of a native snapshot,
// creating dst's parent directories: a hard link when immutable (an
// sstable, NativeFile.Shared) and the file system allows one, a copy
// otherwise. dst must not exist.
func LinkNativeFile(src, dst string, immutable bool) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	if immutable {
		if err := os.Link(src, dst); err == nil {
			return nil
		}
	}
	return copyFile(src, dst)
}

// copyFile copies src to a new file dst.
func copyFile(src, dst string) (err error) {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			_ = os.Remove(dst)
		}
	}()
	if _, err := io.Copy(out, in); err != nil {
		return fmt.Errorf("copy %s: %w", src, err)
	}
	return nil
}
