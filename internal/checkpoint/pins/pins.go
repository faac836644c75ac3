// Package pins keeps the restore records that pin snapshots: what a run
// restored from, written into the run's own job directory, so that a tool
// looking at checkpoint storage offline (weir checkpoints delete) knows
// which snapshots a run still depends on and does not delete them.
//
// A run restored in NO_CLAIM mode (Flink's default) does not own the
// snapshot it restored from, and never deletes it; but until its own first
// checkpoint completes (always a full one), a failover restores from that
// snapshot again, so the snapshot must stay. A run restored in CLAIM mode
// owns the snapshot from then on (it is one of the run's retained
// checkpoints, deleted by the run once subsumed) and depends on it the
// same way until its first checkpoint completes. Either run records the
// restore with Write when it starts and marks it released (Release) once
// its first checkpoint completed.
//
// The record is the job file <job dir>/_restored (storage.WriteJobFile):
// one JSON object, see Restore and docs/checkpoint-layout.md. A job
// directory holds at most one: the record of its latest restore. Holders
// and Restores find the records naming a snapshot by scanning the job
// directories of one storage root (storage.JobsWithFile), those without
// checkpoints included; a run whose job directory is under another root is
// only found by scanning that root too.
package pins

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/weirstream/weir/internal/checkpoint/storage"
)

// FileName is the name of the restore record in a job directory.
const FileName = "_restored"

// Restore modes, as Flink names them.
const (
	// ModeNoClaim: the run does not own the snapshot; it depends on it
	// until its first own checkpoint completed (Released).
	ModeNoClaim = "NO_CLAIM"
	// ModeClaim: the run owns the snapshot and deletes it itself once
	// subsumed; it depends on it until its first own checkpoint
	// completed (Released).
	ModeClaim = "CLAIM"
)

// Version is the format version of the records this build writes; Read
// rejects records of a newer version.
const Version = 1

// ErrInvalid is wrapped by the errors of records that do not decode or are
// not valid.
var ErrInvalid = errors.New("pins: invalid restore record")

// Restore is what a run restored from, written to <its job dir>/_restored.
type Restore struct {
	// Root is the storage.Location of the storage root holding the
	// snapshot (storage.LocationOf of the path or URL it was opened at, or
	// Storage.Location of the Storage ResolveSnapshot returned); "" for
	// mem://, which has no identity.
	Root string `json:"root"`
	// Path is the snapshot's directory relative to Root: "<job>/chk-<n>"
	// for a checkpoint, "<savepoint dir>" for a savepoint (both as
	// storage.Snapshot.Path).
	Path string `json:"path"`
	// Mode is ModeNoClaim or ModeClaim.
	Mode string `json:"mode"`
	// Job is the restoring run's job directory name (Read sets it to the
	// directory it read the record from), JobID the run's id.
	Job   string `json:"job"`
	JobID string `json:"jobId,omitempty"`
	// Time is when the run restored.
	Time time.Time `json:"time"`
	// Released is set once the run's first own checkpoint, ReleasedBy,
	// completed: the run no longer needs the snapshot.
	Released   bool  `json:"released,omitempty"`
	ReleasedBy int64 `json:"releasedBy,omitempty"`
}

// record is the JSON form: Restore with the format version.
type record struct {
	Version int `json:"version"`
	Restore
}

// Holds reports whether the run still depends on its snapshot: it is not
// released yet, in either mode. A released CLAIM restore's snapshot still
// belongs to the run while it runs (it deletes it once subsumed); whether
// the run is running is the job lock's business (storage.JobLockHolder),
// not the record's.
func (r Restore) Holds() bool {
	return !r.Released
}

// String names the run and how it holds the snapshot, for messages:
// `job orders (run 3f2a...) restored from it in NO_CLAIM mode at <time>`.
func (r Restore) String() string {
	run := ""
	if r.JobID != "" {
		run = " (run " + r.JobID + ")"
	}
	s := fmt.Sprintf("job %s%s restored from it in %s mode at %s", r.Job, run, r.Mode, r.Time.UTC().Format(time.RFC3339))
	if r.Released {
		s += fmt.Sprintf(", released by its checkpoint %d", r.ReleasedBy)
	}
	return s
}

// validate checks the fields a record must have.
func (r Restore) validate() error {
	switch r.Mode {
	case ModeNoClaim, ModeClaim:
	default:
		return fmt.Errorf("%w: mode %q: want %s or %s", ErrInvalid, r.Mode, ModeNoClaim, ModeClaim)
	}
	if r.Path == "" || cleanPath(r.Path) != r.Path {
		return fmt.Errorf("%w: snapshot path %q: want <job>/chk-<n> or a savepoint directory, relative to the root", ErrInvalid, r.Path)
	}
	if r.Job == "" {
		return fmt.Errorf("%w: no job", ErrInvalid)
	}
	if r.Released != (r.ReleasedBy > 0) || r.ReleasedBy < 0 {
		return fmt.Errorf("%w: released %v by checkpoint %d: a released record names the checkpoint that released it, an unreleased one none", ErrInvalid, r.Released, r.ReleasedBy)
	}
	return nil
}

// cleanPath is p as a clean relative slash path.
func cleanPath(p string) string {
	p = path.Clean("/" + strings.TrimSpace(p))
	return strings.TrimPrefix(p, "/")
}

// Write records r as the restore of the job directory jobDir (replacing
// any earlier record). r.Path is cleaned; r.Job, if empty, becomes
// jobDir's directory name and otherwise must be it; a zero r.Time becomes
// now. Use the Storage of the run's job lock, so that a run that lost its
// lock cannot write.
func Write(ctx context.Context, s *storage.Storage, jobDir string, r Restore) error {
	dir, err := storage.SanitizeJob(jobDir)
	if err != nil {
		return err
	}
	switch {
	case r.Job == "":
		r.Job = dir
	case r.Job != dir:
		return fmt.Errorf("restore record of %s: %w: it names job %q; a run records its restore in its own job directory", dir, ErrInvalid, r.Job)
	}
	if r.Time.IsZero() {
		r.Time = time.Now()
	}
	r.Time = r.Time.UTC()
	if r.Path != "" {
		r.Path = cleanPath(r.Path)
	}
	if err := r.validate(); err != nil {
		return fmt.Errorf("restore record of %s: %w", dir, err)
	}
	data, err := json.Marshal(record{Version: Version, Restore: r})
	if err != nil {
		return err
	}
	return s.WriteJobFile(ctx, dir, FileName, append(data, '\n'))
}

// Read returns the restore record of the job directory jobDir; ok is false
// (and the error nil) if it has none. A record that does not decode, is
// invalid or of a newer version is an error wrapping ErrInvalid.
func Read(ctx context.Context, s *storage.Storage, jobDir string) (r Restore, ok bool, err error) {
	dir, err := storage.SanitizeJob(jobDir)
	if err != nil {
		return Restore{}, false, err
	}
	data, err := s.ReadJobFile(ctx, dir, FileName)
	if errors.Is(err, storage.ErrNotFound) {
		return Restore{}, false, nil
	}
	if err != nil {
		return Restore{}, false, err
	}
	var rec record
	if err := json.Unmarshal(data, &rec); err != nil {
		return Restore{}, false, fmt.Errorf("restore record %s/%s: %w: %v", dir, FileName, ErrInvalid, err)
	}
	if rec.Version < 1 || rec.Version > Version {
		return Restore{}, false, fmt.Errorf("restore record %s/%s: %w: format version %d, this build reads version %d", dir, FileName, ErrInvalid, rec.Version, Version)
	}
	r = rec.Restore
	r.Job = dir // a moved job directory keeps a valid record
	if err := r.validate(); err != nil {
		return Restore{}, false, fmt.Errorf("restore record %s/%s: %w", dir, FileName, err)
	}
	return r, true, nil
}

// Release marks the restore record of jobDir released by checkpoint id,
// the run's first own checkpoint, in either mode: a failover no longer
// restores from the snapshot.
// Without a record, or with one already released, it does nothing.
func Release(ctx context.Context, s *storage.Storage, jobDir string, id int64) error {
	if id < 1 {
		return fmt.Errorf("release the restore record of %s: checkpoint id %d is not positive", jobDir, id)
	}
	r, ok, err := Read(ctx, s, jobDir)
	if err != nil || !ok || r.Released {
		return err
	}
	r.Released, r.ReleasedBy = true, id
	return Write(ctx, s, jobDir, r)
}

// List returns the restore record of every job directory under s that has
// one, sorted by job directory. A record that cannot be read is an error
// naming it: a tool about to delete must not guess.
func List(ctx context.Context, s *storage.Storage) ([]Restore, error) {
	jobs, err := s.JobsWithFile(ctx, FileName)
	if err != nil {
		return nil, err
	}
	var out []Restore
	for _, j := range jobs {
		r, ok, err := Read(ctx, s, j)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, r)
		}
	}
	return out, nil
}

// Names reports whether r is a restore from the snapshot at snapshotPath
// (cleaned) under the storage root whose Location is root.
func (r Restore) Names(root, snapshotPath string) bool {
	return r.Root == root && r.Path == cleanPath(snapshotPath)
}

// Restores returns the restore records of the job directories under s
// whose snapshot is snapshotPath under the storage root whose Location is
// root (see Names), sorted by job directory: every mode, released or not.
// A record that cannot be read is an error (see List).
func Restores(ctx context.Context, s *storage.Storage, root, snapshotPath string) ([]Restore, error) {
	all, err := List(ctx, s)
	if err != nil {
		return nil, err
	}
	var out []Restore
	for _, r := range all {
		if r.Names(root, snapshotPath) {
			out = append(out, r)
		}
	}
	return out, nil
}

// Holders returns the unreleased NO_CLAIM restores recorded by the jobs
// under s whose snapshot is root+path (see Restores): the runs that still
// depend on the snapshot without owning it.
func Holders(ctx context.Context, s *storage.Storage, root, snapshotPath string) ([]Restore, error) {
	all, err := Restores(ctx, s, root, snapshotPath)
	if err != nil {
		return nil, err
	}
	var out []Restore
	for _, r := range all {
		if r.Mode == ModeNoClaim && !r.Released {
			out = append(out, r)
		}
	}
	return out, nil
}
