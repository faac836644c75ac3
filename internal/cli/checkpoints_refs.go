package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/weirstream/weir/internal/checkpoint/metadata"
	"github.com/weirstream/weir/internal/checkpoint/pins"
	"github.com/weirstream/weir/internal/checkpoint/storage"
)

// What the checkpoints of a job share, what deleting one frees, and who
// restored from a snapshot: shared by `weir checkpoints inspect` and
// `weir checkpoints delete`, so that inspect's numbers are what delete does.

// jobCheckpoints is what is known about the complete checkpoints of one job
// directory.
type jobCheckpoints struct {
	job string
	// ids are the complete checkpoints (a _metadata exists), ascending.
	ids []int64
	// metas are those whose _metadata verified and decoded.
	metas map[int64]*metadata.Checkpoint
	// bad are the others: why each cannot be read.
	bad map[int64]badCheckpoint
}

// badCheckpoint is a complete checkpoint whose metadata cannot be used.
type badCheckpoint struct {
	reason string
	// newer: the metadata is of a format this build does not know, so the
	// checkpoint may well be valid.
	newer bool
}

// loadJobCheckpoints reads the metadata of every complete checkpoint of
// job. A _metadata that does not verify or decode is recorded in bad; I/O
// errors are returned.
func loadJobCheckpoints(ctx context.Context, s *storage.Storage, job string) (*jobCheckpoints, error) {
	entries, err := s.ListCheckpoints(ctx, job)
	if err != nil {
		return nil, err
	}
	j := &jobCheckpoints{job: job, metas: map[int64]*metadata.Checkpoint{}, bad: map[int64]badCheckpoint{}}
	for _, e := range entries {
		if !e.Complete {
			continue
		}
		payload, err := s.ReadMetadata(ctx, job, e.ID)
		switch {
		case errors.Is(err, storage.ErrNotFound): // deleted since it was listed
			continue
		case errors.Is(err, storage.ErrCorrupt):
			j.bad[e.ID] = badCheckpoint{reason: shortReason(err)}
		case errors.Is(err, storage.ErrUnsupportedVersion):
			j.bad[e.ID] = badCheckpoint{reason: shortReason(err), newer: true}
		case err != nil:
			return nil, err
		default:
			m, bad := decodeCheckpoint(e.ID, payload)
			if m == nil {
				j.bad[e.ID] = bad
			} else {
				j.metas[e.ID] = m
			}
		}
		j.ids = append(j.ids, e.ID)
	}
	return j, nil
}

// decodeCheckpoint decodes the metadata payload of checkpoint id; if it
// does not decode, or is of another checkpoint, it says why.
func decodeCheckpoint(id int64, payload []byte) (*metadata.Checkpoint, badCheckpoint) {
	m, err := metadata.Decode(payload)
	if err != nil {
		var v struct {
			Version int `json:"version"`
		}
		_ = json.Unmarshal(payload, &v)
		return nil, badCheckpoint{reason: shortReason(err), newer: v.Version > metadata.Version}
	}
	if m.ID != id {
		return nil, badCheckpoint{reason: fmt.Sprintf("metadata is of checkpoint %d", m.ID)}
	}
	return m, badCheckpoint{}
}

// refs maps every file path the readable checkpoints reference to their
// ids, ascending.
func (j *jobCheckpoints) refs() map[string][]int64 {
	out := map[string][]int64{}
	for _, id := range j.ids {
		m := j.metas[id]
		if m == nil {
			continue
		}
		for _, f := range m.Files() {
			out[f.Path] = append(out[f.Path], id)
		}
	}
	return out
}

// unknownRefs says why the shared files of checkpoint id must be kept even
// where no readable checkpoint references them, as the job's own sweep
// keeps them: another complete checkpoint may reference them, namely one
// of a metadata format this build does not know, or a corrupt one newer
// than every other readable checkpoint (perhaps repairable, and what
// --from latest would try first). "" if there is none.
func (j *jobCheckpoints) unknownRefs(id int64) string {
	newestOther := j.newestOther(id)
	var why []string
	for _, other := range j.ids {
		b, ok := j.bad[other]
		if !ok || other == id || (!b.newer && other < newestOther) {
			continue
		}
		why = append(why, fmt.Sprintf("checkpoint %d cannot be read (%s), so the files it references are unknown", other, b.reason))
	}
	return strings.Join(why, "; ")
}

// deletion is what deleting one checkpoint of a job does to the files its
// metadata references.
type deletion struct {
	id int64
	// files are the files that go: those under chk-<id>/ and those under
	// shared/ that no other checkpoint references (none of the latter if
	// keptUnknown is set).
	files []storage.FileHandle
	// freed is the bytes of files.
	freed int64
	// kept are the shared files that other readable checkpoints reference,
	// with their ids.
	kept map[string][]int64
	// keptUnknown, if set, is why every shared file of the checkpoint is
	// kept (see unknownRefs); withheld are those no other readable
	// checkpoint references, which would go otherwise.
	keptUnknown string
	withheld    []storage.FileHandle
	// crossRefs are files under chk-<id>/ that other checkpoints reference
	// too: deleting the checkpoint would break them. weir never writes
	// such references; delete refuses if it finds any.
	crossRefs map[string][]int64
}

// plan returns what deleting readable checkpoint id would do; refs is
// j.refs(). Files the checkpoint references outside chk-<id>/ and shared/
// are never deleted.
func (j *jobCheckpoints) plan(id int64, refs map[string][]int64) deletion {
	d := deletion{id: id, kept: map[string][]int64{}, crossRefs: map[string][]int64{}, keptUnknown: j.unknownRefs(id)}
	own := storage.CheckpointDir(id) + "/"
	for _, f := range j.metas[id].Files() {
		others := slices.DeleteFunc(slices.Clone(refs[f.Path]), func(o int64) bool { return o == id })
		private := strings.HasPrefix(f.Path, own)
		shared := strings.HasPrefix(f.Path, storage.SharedDir+"/")
		switch {
		case private && len(others) > 0:
			d.crossRefs[f.Path] = others
		case private:
			d.files = append(d.files, f)
		case !shared:
		case len(others) > 0:
			d.kept[f.Path] = others
		case d.keptUnknown == "":
			d.files = append(d.files, f)
		default:
			d.withheld = append(d.withheld, f)
		}
	}
	for _, f := range d.files {
		d.freed += f.Size
	}
	return d
}

// newestOther returns the newest readable checkpoint of the job other than
// id, 0 if none.
func (j *jobCheckpoints) newestOther(id int64) int64 {
	var n int64
	for other := range j.metas {
		if other != id {
			n = max(n, other)
		}
	}
	return n
}

// restoreHolder is a run that holds a snapshot through its restore record,
// in the output of inspect and in delete's refusal.
type restoreHolder struct {
	Job   string    `json:"job"`
	JobID string    `json:"jobId,omitempty"`
	Mode  string    `json:"mode"`
	Time  time.Time `json:"time"`
	// Dir is the checkpoint directory holding the run's job directory.
	Dir string `json:"dir"`
	// Running is set for a released CLAIM restore whose job is running:
	// the running job owns the snapshot (which is why it holds it).
	Running bool `json:"running,omitempty"`
}

// who names the run.
func (h restoreHolder) who() string {
	run := ""
	if h.JobID != "" {
		run = ", run " + h.JobID
	}
	return fmt.Sprintf("job %s (under %s%s)", h.Job, h.Dir, run)
}

// describe names the run and why it holds the snapshot, for messages.
func (h restoreHolder) describe() string {
	at := h.Time.UTC().Format(time.RFC3339)
	if h.Running {
		return fmt.Sprintf("%s restored from it in CLAIM mode at %s and owns it: the running job deletes it itself once a newer checkpoint subsumes it; stop that job first", h.who(), at)
	}
	return fmt.Sprintf("%s restored from it in %s mode at %s and has not completed a checkpoint of its own yet: until it has, a failover restores from this snapshot again", h.who(), h.Mode, at)
}

// short is describe for inspect's summary line.
func (h restoreHolder) short() string {
	at := h.Time.UTC().Format(time.RFC3339)
	if h.Running {
		return fmt.Sprintf("%s: restored from it in CLAIM mode at %s, owns it and is running", h.who(), at)
	}
	return fmt.Sprintf("%s: restored from it in %s mode at %s, no checkpoint of its own yet", h.who(), h.Mode, at)
}

// restoreScan is the restore records of every job directory under the
// checkpoint directories scanned.
type restoreScan struct {
	// dirs are the checkpoint directories scanned, as given.
	dirs    []string
	records []scannedRestore
}

type scannedRestore struct {
	pins.Restore
	dir string
	// running is set for a released CLAIM restore whose job is running.
	running bool
}

// scanRestores reads the restore records under the storage root s (shown
// as shown: the root holding the snapshot) and under each of dirs, each
// root once. Without explicit dirs (explicit false) the default
// checkpoint directory is scanned too if it exists. A directory given
// explicitly that does not exist is a usage error; a record that cannot
// be read is a failure naming it.
func scanRestores(ctx context.Context, s *storage.Storage, shown string, dirs []string, explicit bool) (*restoreScan, error) {
	rs := &restoreScan{}
	seen := map[string]bool{}
	scan := func(st *storage.Storage, dir string) error {
		if loc := st.Location(); loc != "" {
			if seen[loc] {
				return nil
			}
			seen[loc] = true
		}
		all, err := pins.List(ctx, st)
		if err != nil {
			return failure(fmt.Errorf("restore records under %s: %w", dir, err))
		}
		rs.dirs = append(rs.dirs, dir)
		for _, r := range all {
			sr := scannedRestore{Restore: r, dir: dir}
			if r.Mode == pins.ModeClaim && r.Released {
				// It owns the snapshot while it runs.
				_, held, err := st.JobLockHolder(ctx, r.Job)
				if err != nil {
					return failure(fmt.Errorf("restore records under %s: job %s: %w", dir, r.Job, err))
				}
				sr.running = held
			}
			rs.records = append(rs.records, sr)
		}
		return nil
	}
	if err := scan(s, shown); err != nil {
		return nil, err
	}
	if !explicit {
		def := defaultCheckpointDir()
		local := localPath(def)
		if fi, err := os.Stat(local); local == "" || err != nil || !fi.IsDir() {
			return rs, nil
		}
		dirs = []string{def}
	}
	for _, d := range dirs {
		st, err := openCheckpointDir(ctx, d)
		if err != nil {
			return nil, err
		}
		err = scan(st, d)
		st.Close()
		if err != nil {
			return nil, err
		}
	}
	return rs, nil
}

// holders returns the runs whose restore records hold the snapshot at path
// under the root whose Location is root, by checkpoint directory and job
// directory: unreleased restores of either mode (pins.Restore.Holds), and
// released CLAIM restores whose job is running (it owns the snapshot).
func (rs *restoreScan) holders(root, path string) []restoreHolder {
	out := []restoreHolder{}
	for _, r := range rs.records {
		if r.Names(root, path) && (r.Holds() || r.running) {
			out = append(out, restoreHolder{Job: r.Job, JobID: r.JobID, Mode: r.Mode, Time: r.Time, Dir: r.dir, Running: r.running && !r.Holds()})
		}
	}
	slices.SortFunc(out, func(x, y restoreHolder) int { return cmp.Or(cmp.Compare(x.Dir, y.Dir), cmp.Compare(x.Job, y.Job)) })
	return out
}

// idList formats checkpoint ids as "chk-1, chk-3".
func idList(ids []int64) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = storage.CheckpointDir(id)
	}
	return strings.Join(s, ", ")
}
