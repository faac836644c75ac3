package storage

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"path"
	"path/filepath"
	"strings"
)

// Savepoints.
//
// A savepoint is a directory of its own, <target>/savepoint-<job>-<random>/,
// holding _metadata and every data file the savepoint references, directly
// in it. The data files' handles are relative to the savepoint directory
// (a checkpoint's are relative to its job directory), so the directory can
// be moved or copied anywhere, another bucket included, and restored from
// there. Inside the Storage rooted at <target>, the savepoint directory
// plays the part of a job directory: OpenFile(ctx, dir, h) reads it.

// SavepointPrefix starts the name of every savepoint directory weir makes.
const SavepointPrefix = "savepoint-"

// NewSavepointName returns a fresh savepoint directory name:
// "savepoint-<first 6 characters of jobID>-<12 random hex digits>", as
// Flink names them.
func NewSavepointName(jobID string) string {
	short, _ := SanitizeJob(jobID)
	if len(short) > 6 {
		short = short[:6]
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	return SavepointPrefix + short + "-" + hex.EncodeToString(b[:])
}

// CreateSavepointFile starts data file <dir>/<name> of the savepoint in
// directory dir; the handle's path is name. Name rules as for CreateFile.
func (s *Storage) CreateSavepointFile(ctx context.Context, dir, name string) (FileWriter, error) {
	if err := validName(name); err != nil {
		return nil, err
	}
	return s.create(ctx, dir, name)
}

// WriteSavepointMetadata writes <dir>/_metadata atomically, framed as a
// checkpoint's (WriteMetadata): the savepoint is complete once it returns.
func (s *Storage) WriteSavepointMetadata(ctx context.Context, dir string, payload []byte) error {
	jp, err := jobPrefix(dir)
	if err != nil {
		return err
	}
	return s.writeMetadataKey(ctx, jp+MetadataName, payload)
}

// ReadSavepointMetadata reads and verifies <dir>/_metadata.
func (s *Storage) ReadSavepointMetadata(ctx context.Context, dir string) ([]byte, error) {
	jp, err := jobPrefix(dir)
	if err != nil {
		return nil, err
	}
	return s.readMetadataKey(ctx, jp+MetadataName)
}

// DeleteSavepoint removes the savepoint directory dir: _metadata first, so
// that a partly deleted savepoint is never seen as complete, then every
// other object under it. Deleting an absent savepoint is not an error.
func (s *Storage) DeleteSavepoint(ctx context.Context, dir string) error {
	jp, err := jobPrefix(dir)
	if err != nil {
		return err
	}
	if err := s.b.Delete(ctx, jp+MetadataName); err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("delete savepoint %s: %w", s.display(jp), err)
	}
	objs, err := s.b.List(ctx, jp, "")
	if err != nil {
		return fmt.Errorf("delete savepoint %s: list: %w", s.display(jp), err)
	}
	var errs []error
	for _, o := range objs {
		if err := s.b.Delete(ctx, o.Key); err != nil && !errors.Is(err, ErrNotFound) {
			errs = append(errs, fmt.Errorf("delete %s: %w", o.Key, err))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("delete savepoint %s: %w", s.display(jp), errors.Join(errs...))
	}
	if r, ok := s.b.(dirRemover); ok {
		r.RemoveEmptyDir(jp)
	}
	return nil
}

// Snapshot is a checkpoint or savepoint found by ResolveSnapshot.
type Snapshot struct {
	// Dir is the directory the snapshot's file handles are relative to,
	// within its Storage: the job directory of a checkpoint, the savepoint
	// directory of a savepoint.
	Dir string
	// ID is the checkpoint id of a chk-<n> directory, 0 for a savepoint
	// (its _metadata says).
	ID int64
	// Savepoint is set for a savepoint directory.
	Savepoint bool
	// Path is the snapshot's directory relative to the storage root:
	// "<job>/chk-<n>" or "<savepoint dir>".
	Path    string
	Payload []byte
}

// ResolveSnapshot opens the storage that holds the snapshot at loc (a path
// or URL, as for Open) and reads its _metadata. loc is a checkpoint
// directory (.../<job>/chk-<n>), a savepoint directory (any other
// directory with a _metadata file in it), or either's _metadata file.
// Nothing is created. A missing or invalid _metadata is an error (wrapping
// ErrNotFound, ErrCorrupt or ErrUnsupportedVersion), never a fallback. On
// success the caller owns the returned Storage and must Close it.
func ResolveSnapshot(ctx context.Context, loc string) (*Storage, Snapshot, error) {
	root, dir, leaf, err := splitSnapshotLoc(loc)
	if err != nil {
		return nil, Snapshot{}, err
	}
	if id, ok := parseCheckpointDir(leaf); ok && dir != "" {
		s, c, err := ResolvePath(ctx, trimMetadata(loc))
		if err != nil {
			return nil, Snapshot{}, err
		}
		return s, Snapshot{Dir: c.Job, ID: id, Path: c.Job + "/" + leaf, Payload: c.Payload}, nil
	}
	if sj, err := SanitizeJob(leaf); err != nil || sj != leaf {
		return nil, Snapshot{}, fmt.Errorf("snapshot %s: %w: the directory name %q has characters other than [A-Za-z0-9._-]; rename it", loc, ErrInvalidName, leaf)
	}
	s, err := open(ctx, root, false, Options{})
	if err != nil {
		return nil, Snapshot{}, fmt.Errorf("snapshot %s: %w", loc, err)
	}
	payload, err := s.ReadSavepointMetadata(ctx, leaf)
	if err != nil {
		_ = s.Close()
		if errors.Is(err, ErrNotFound) {
			return nil, Snapshot{}, fmt.Errorf("snapshot %s: %w: no _metadata in it; give a savepoint directory, a chk-<n> checkpoint directory or its _metadata file", loc, err)
		}
		return nil, Snapshot{}, fmt.Errorf("snapshot %s: %w", loc, err)
	}
	return s, Snapshot{Dir: leaf, Savepoint: true, Path: leaf, Payload: payload}, nil
}

// trimMetadata returns the snapshot directory loc names: loc without
// trailing slashes and a final _metadata, in the path of a URL (before its
// query).
func trimMetadata(loc string) string {
	if strings.Contains(loc, "://") {
		if u, err := url.Parse(loc); err == nil {
			p := strings.TrimRight(u.Path, "/")
			u.Path, u.RawPath = strings.TrimRight(strings.TrimSuffix(p, MetadataName), "/"), ""
			return u.String()
		}
	}
	return strings.TrimSuffix(strings.TrimSuffix(strings.TrimRight(loc, "/"), MetadataName), "/")
}

// splitSnapshotLoc splits loc into the location of its parent directory
// (the storage root of a savepoint), the parent's name and the snapshot
// directory's name, dropping a trailing /_metadata.
func splitSnapshotLoc(loc string) (root, parent, leaf string, err error) {
	bad := fmt.Errorf("snapshot path %q: %w: want a savepoint directory, a <job>/chk-<n> directory or a _metadata file", loc, ErrInvalidName)
	if strings.Contains(loc, "://") {
		u, perr := url.Parse(loc)
		if perr != nil {
			return "", "", "", fmt.Errorf("snapshot path %q: %w", loc, perr)
		}
		p := strings.TrimRight(u.Path, "/")
		if path.Base(p) == MetadataName {
			p = path.Dir(p)
		}
		leaf = path.Base(p)
		if p == "" || leaf == "/" || leaf == "." {
			return "", "", "", bad
		}
		parent = path.Base(path.Dir(p))
		if parent == "/" || parent == "." {
			parent = ""
		}
		u.Path, u.RawPath = path.Dir(p), ""
		return u.String(), parent, leaf, nil
	}
	p := filepath.Clean(loc)
	if filepath.Base(p) == MetadataName {
		p = filepath.Dir(p)
	}
	leaf = filepath.Base(p)
	if leaf == string(filepath.Separator) || leaf == "." || leaf == ".." {
		return "", "", "", bad
	}
	parent = filepath.Base(filepath.Dir(p))
	if parent == string(filepath.Separator) || parent == "." {
		parent = ""
	}
	return filepath.Dir(p), parent, leaf, nil
}
