package doctor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/weirstream/weir/internal/checkpoint/metadata"
	"github.com/weirstream/weir/internal/checkpoint/storage"
)

// Errors of FromCheckpoints, wrapped with the details.
var (
	// ErrNoCheckpoints: the directory holds no complete checkpoint of the
	// job (and the log, if given, no failed one).
	ErrNoCheckpoints = errors.New("no checkpoints")
	// ErrUnreadable: the job has complete checkpoints but none of their
	// _metadata could be read.
	ErrUnreadable = errors.New("unreadable _metadata")
	// ErrAmbiguous: the directory holds the checkpoints of several jobs
	// and none was named.
	ErrAmbiguous = errors.New("several jobs")
	// ErrLog: the log file (--log) cannot be read or is not a weir log.
	ErrLog = errors.New("bad log file")
)

// FromCheckpoints builds the input from the retained checkpoints of a job
// under the checkpoint directory dir (a path, file:// or blob URL, the
// layout of execution.checkpointing.dir): the newest n complete ones
// (DefaultLast if n <= 0), whose _metadata records every subtask's
// statistics. job names the job's directory under dir; if it is empty,
// dir is the job's directory itself, or a checkpoint directory holding
// one job only.
//
// Only the checkpoints the job retained are there
// (execution.checkpointing.num-retained, default 1), and failed
// checkpoints leave no _metadata: logFile, if not empty, is the job's log
// (weir's text or JSON logs), from which the failures, the late
// acknowledgements of expired checkpoints, failovers for too many failed
// checkpoints and the configuration (the "running job" line) are read.
// Without it Input.FailuresKnown is false. There are no task metrics
// offline, and the vertices' inputs are not recorded: each vertex is
// taken to read the one before it.
func FromCheckpoints(ctx context.Context, dir, job string, n int, logFile string) (Input, error) {
	if n <= 0 {
		n = DefaultLast
	}
	root, jobDir, err := resolveJobDir(ctx, dir, job)
	if err != nil {
		return Input{}, err
	}
	s, err := storage.OpenExisting(ctx, root)
	if err != nil {
		return Input{}, fmt.Errorf("checkpoint directory %s: %w", root, err)
	}
	defer s.Close()
	in := Input{Job: jobDir, Source: SourceOffline, Location: joinLoc(root, jobDir), Config: defaultConfig()}
	in.Config.Backend = defaultBackend()

	entries, err := s.ListCheckpoints(ctx, jobDir)
	if err != nil {
		return Input{}, fmt.Errorf("checkpoint directory %s: %w", in.Location, err)
	}
	var complete []storage.CheckpointEntry
	var lastComplete int64
	for _, e := range entries {
		if e.Complete {
			complete = append(complete, e)
			lastComplete = max(lastComplete, e.ID)
		}
	}
	slices.SortFunc(complete, func(a, b storage.CheckpointEntry) int { return cmp.Compare(a.ID, b.ID) })
	var incomplete []int64
	for _, e := range entries {
		if !e.Complete && e.ID > lastComplete {
			incomplete = append(incomplete, e.ID)
		}
	}
	if len(incomplete) > 0 {
		in.Notes = append(in.Notes, fmt.Sprintf("Checkpoint %s has no _metadata: it was in progress when the job "+
			"stopped, or failed and was not cleaned up.", idList(incomplete)))
	}
	if len(complete) > n {
		complete = complete[len(complete)-n:]
	}
	var metas []*metadata.Checkpoint
	var firstErr error
	for _, e := range complete {
		m, err := readMetadata(ctx, s, jobDir, e.ID)
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			in.Notes = append(in.Notes, fmt.Sprintf("Checkpoint %d is skipped: %v.", e.ID, err))
			continue
		}
		metas = append(metas, m)
	}
	if len(complete) > 0 && len(metas) == 0 {
		return Input{}, fmt.Errorf("%w: no checkpoint of %s could be read: %w", ErrUnreadable, in.Location, firstErr)
	}
	in.Vertices = verticesOf(metas)
	noStats := 0
	for _, m := range metas {
		c := checkpointOf(m, in.Vertices)
		if len(c.Subtasks) == 0 {
			noStats++
		}
		in.Checkpoints = append(in.Checkpoints, c)
		if m.Job != "" && in.Job == jobDir {
			in.Job = m.Job
		}
	}
	if noStats > 0 {
		in.Notes = append(in.Notes, fmt.Sprintf("%d checkpoints have no per-subtask statistics (written by an "+
			"older weir): only their sizes and durations are used.", noStats))
	}
	if len(metas) == 1 {
		in.Notes = append(in.Notes, "Only one checkpoint is retained: set execution.checkpointing.num-retained "+
			"higher to let the doctor see trends (state growth) offline.")
	}

	if logFile != "" {
		if err := readLog(logFile, in.Job, jobDir, &in); err != nil {
			return Input{}, err
		}
		in.FailuresKnown = true
	}
	if len(in.Checkpoints) == 0 && len(in.Failures) == 0 {
		return Input{}, fmt.Errorf("%w: %s holds no complete checkpoint", ErrNoCheckpoints, in.Location)
	}
	trimWindow(&in, n)
	return in, nil
}

// trimWindow keeps the newest n checkpoints, completed and failed.
func trimWindow(in *Input, n int) {
	var ids []int64
	for _, c := range in.Checkpoints {
		ids = append(ids, c.ID)
	}
	for _, f := range in.Failures {
		ids = append(ids, f.ID)
	}
	if len(ids) <= n {
		return
	}
	slices.Sort(ids)
	from := ids[len(ids)-n]
	in.Checkpoints = slices.DeleteFunc(in.Checkpoints, func(c Checkpoint) bool { return c.ID < from })
	in.Failures = slices.DeleteFunc(in.Failures, func(f Failure) bool { return f.ID < from })
}

// resolveJobDir returns the storage root and the job's directory name.
func resolveJobDir(ctx context.Context, dir, job string) (root, jobDir string, err error) {
	if job != "" {
		j, err := storage.SanitizeJob(job)
		if err != nil {
			return "", "", fmt.Errorf("job %q: %w", job, err)
		}
		return dir, j, nil
	}
	// dir itself a job's directory?
	if parent, base, ok := splitLoc(dir); ok {
		if sj, err := storage.SanitizeJob(base); err == nil && sj == base {
			if s, err := storage.OpenExisting(ctx, parent); err == nil {
				entries, lerr := s.ListCheckpoints(ctx, base)
				s.Close()
				if lerr == nil && len(entries) > 0 {
					return parent, base, nil
				}
			}
		}
	}
	s, err := storage.OpenExisting(ctx, dir)
	if errors.Is(err, storage.ErrNotFound) {
		return "", "", fmt.Errorf("%w: checkpoint directory %s does not exist", ErrNoCheckpoints, dir)
	}
	if err != nil {
		return "", "", err
	}
	defer s.Close()
	jobs, err := s.ListJobs(ctx)
	if err != nil {
		return "", "", fmt.Errorf("checkpoint directory %s: %w", dir, err)
	}
	switch len(jobs) {
	case 0:
		return "", "", fmt.Errorf("%w: %s holds no checkpoints", ErrNoCheckpoints, dir)
	case 1:
		return dir, jobs[0], nil
	}
	return "", "", fmt.Errorf("%w: %s holds the checkpoints of jobs %s: name one, such as %s", ErrAmbiguous, dir,
		strings.Join(jobs, ", "), joinLoc(dir, jobs[0]))
}

// splitLoc splits a path or URL into its parent and last element.
func splitLoc(loc string) (parent, base string, ok bool) {
	if strings.Contains(loc, "://") {
		u, err := url.Parse(loc)
		if err != nil {
			return "", "", false
		}
		p := strings.TrimRight(u.Path, "/")
		if p == "" {
			return "", "", false
		}
		base = path.Base(p)
		u.Path, u.RawPath = path.Dir(p), ""
		return u.String(), base, true
	}
	abs, err := filepath.Abs(loc)
	if err != nil || filepath.Dir(abs) == abs {
		return "", "", false
	}
	return filepath.Dir(abs), filepath.Base(abs), true
}

// joinLoc is root/job for paths and URLs.
func joinLoc(root, job string) string {
	if strings.Contains(root, "://") {
		return strings.TrimRight(root, "/") + "/" + job
	}
	return filepath.Join(root, job)
}

func readMetadata(ctx context.Context, s *storage.Storage, jobDir string, id int64) (*metadata.Checkpoint, error) {
	payload, err := s.ReadMetadata(ctx, jobDir, id)
	if err != nil {
		return nil, err
	}
	m, err := metadata.Decode(payload)
	if err != nil {
		return nil, err
	}
	if m.ID != id {
		return nil, fmt.Errorf("its _metadata is of checkpoint %d", m.ID)
	}
	return m, nil
}

// verticesOf derives the vertices from the checkpoints' statistics: names
// and subtask counts; the parallelism of a vertex is at least that of its
// operators in the metadata.
func verticesOf(metas []*metadata.Checkpoint) []Vertex {
	// Checkpoints record the job graph: take the newest that has it.
	for i := len(metas) - 1; i >= 0; i-- {
		if g := metas[i].Graph; len(g) > 0 {
			out := make([]Vertex, len(g))
			for j, gv := range g {
				v := Vertex{Index: gv.Vertex, Name: gv.Name, Parallelism: gv.Parallelism, Inputs: []Edge{}, InputsKnown: true}
				for _, in := range gv.Inputs {
					v.Inputs = append(v.Inputs, Edge{Vertex: in.Vertex, Forward: in.Forward})
				}
				out[j] = v
			}
			slices.SortFunc(out, func(a, b Vertex) int { return cmp.Compare(a.Index, b.Index) })
			return out
		}
	}
	byIndex := map[int]*Vertex{}
	for _, m := range metas {
		for _, t := range m.Tasks {
			v := byIndex[t.Vertex]
			if v == nil {
				v = &Vertex{Index: t.Vertex, Inputs: []Edge{}}
				byIndex[t.Vertex] = v
			}
			v.Name = t.Name
			v.Parallelism = max(v.Parallelism, t.Subtask+1)
		}
	}
	var out []Vertex
	for _, v := range byIndex {
		for _, m := range metas {
			for _, op := range m.Operators {
				if slices.Contains(strings.Split(v.Name, " -> "), op.Name) {
					v.Parallelism = max(v.Parallelism, op.Parallelism)
				}
			}
		}
		if v.Index > 0 {
			v.Inputs = []Edge{{Vertex: v.Index - 1}}
		}
		out = append(out, *v)
	}
	slices.SortFunc(out, func(a, b Vertex) int { return cmp.Compare(a.Index, b.Index) })
	return out
}

// checkpointOf converts one checkpoint's metadata.
func checkpointOf(m *metadata.Checkpoint, vertices []Vertex) Checkpoint {
	c := Checkpoint{ID: m.ID, CheckpointedSize: m.Bytes, FullSize: m.FullBytes, PersistedData: m.PersistedBytes,
		Unaligned: m.UnalignedSubtasks > 0}
	if c.FullSize == 0 {
		c.FullSize = m.FullSize()
	}
	if m.TriggerTime != 0 {
		c.TriggerTime = time.UnixMilli(m.TriggerTime)
	}
	if m.CompletionTime != 0 {
		c.CompletionTime = time.UnixMilli(m.CompletionTime)
		if m.TriggerTime != 0 {
			c.EndToEnd = c.CompletionTime.Sub(c.TriggerTime)
		}
	}
	full := subtaskFullSizes(m, vertices)
	ms := time.Millisecond
	for _, t := range m.Tasks {
		ref := SubtaskRef{t.Vertex, t.Subtask}
		c.Subtasks = append(c.Subtasks, Subtask{Vertex: t.Vertex, Index: t.Subtask,
			EndToEnd: time.Duration(t.EndToEnd) * ms, StartDelay: time.Duration(t.StartDelay) * ms,
			Alignment: time.Duration(t.Alignment) * ms, Sync: time.Duration(t.Sync) * ms, Async: time.Duration(t.Async) * ms,
			CheckpointedSize: t.Bytes, PersistedData: t.PersistedBytes, FullSize: full[ref], Unaligned: t.Unaligned})
	}
	return c
}

// subtaskFullSizes sums the state every subtask references in m: its
// operators' inline state, files and in-flight data, each operator
// mapped to the vertex whose name lists it.
func subtaskFullSizes(m *metadata.Checkpoint, vertices []Vertex) map[SubtaskRef]int64 {
	out := map[SubtaskRef]int64{}
	byUID := map[string]int{} // from the recorded graph: exact where names repeat
	for _, gv := range m.Graph {
		for _, uid := range gv.UIDs {
			byUID[uid] = gv.Vertex
		}
	}
	for _, op := range m.Operators {
		v, ok := byUID[op.UID]
		if !ok {
			v = -1
			for _, x := range vertices {
				if slices.Contains(strings.Split(x.Name, " -> "), op.Name) {
					v = x.Index
					break
				}
			}
		}
		if v < 0 {
			continue
		}
		for _, st := range op.Subtasks {
			n := st.InlineBytes()
			for _, f := range st.SnapshotFiles() {
				n += f.Size
			}
			if st.Pending != nil {
				n += st.Pending.File.Size
			}
			if st.Changelog != nil {
				for _, g := range st.Changelog.AllSegments() {
					n += g.File.Size
				}
			}
			for _, ch := range st.Channels {
				n += ch.Length
			}
			out[SubtaskRef{v, st.Index}] += n
		}
	}
	return out
}
