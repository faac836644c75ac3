package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/internal/checkpoint/metadata"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/runner"
)

// Statuses of a listed checkpoint.
const (
	checkpointComplete   = "complete"
	checkpointIncomplete = "incomplete"
	checkpointCorrupt    = "corrupt"
)

// checkpointsCommand is `weir checkpoints`, grouping `weir checkpoints
// list`, `inspect` and `delete`.
func (a *app) checkpointsCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "checkpoints",
		Short: "Inspect and delete the checkpoints in a checkpoint directory, and savepoints",
		Args:  cobra.ArbitraryArgs,
		RunE:  a.groupRunE("command"),
	}
	c.AddCommand(a.checkpointsListCommand(), a.checkpointsInspectCommand(), a.checkpointsDeleteCommand())
	return c
}

func (a *app) checkpointsListCommand() *cobra.Command {
	var (
		dir, job string
		asJSON   bool
	)
	defaultDir := "weir-data/checkpoints"
	if o, ok := config.Lookup("execution.checkpointing.dir"); ok {
		defaultDir = o.Default
	}
	c := &cobra.Command{
		Use:   "list [flags]",
		Short: "List every checkpoint of every job, or of one job, with its status",
		Long: `List the chk-<n> directories under a checkpoint directory (the layout of
execution.checkpointing.dir: <dir>/<job>/chk-<n>/_metadata), sorted by job
and id, with their status: complete, incomplete (no _metadata: the checkpoint
never finished) or corrupt (the _metadata does not verify or decode). For
complete checkpoints it shows when they completed (UTC), the checkpointed
size (the bytes the checkpoint uploaded), the full size (every byte it
references, shared files of earlier checkpoints included) and how long they
took from trigger to completion.

Nothing is created or changed. With --json standard output holds exactly one
JSON object: {"checkpoints":[...]}.`,
		Example: `  weir checkpoints list
  weir checkpoints list --dir /var/lib/weir/checkpoints --job wordcount --json`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			problems := a.flagProblemsOf(c.Flags())
			if _, err := newLogger(a.stderr, a.logFormat, a.logLevel, slog.LevelWarn); err != nil {
				problems = append(problems, err)
			}
			jobDir := ""
			if c.Flags().Changed("job") {
				var err error
				if jobDir, err = storage.SanitizeJob(job); err != nil {
					problems = append(problems, fmt.Errorf("--job %q: %w", job, err))
				}
			}
			if dir == "" {
				problems = append(problems, errors.New("--dir: must not be empty"))
			}
			if len(problems) > 0 {
				return usageError(problems...)
			}
			return a.listCheckpoints(c.Context(), dir, job, jobDir, asJSON)
		},
	}
	f := c.Flags()
	f.StringVar(&dir, "dir", defaultDir, "checkpoint `directory`: a path, file://, or a gocloud blob URL such as s3://bucket/prefix")
	f.StringVar(&job, "job", "", "list only the checkpoints of the job `name` (as given to the job, e.g. pipeline.name)")
	f.BoolVar(&asJSON, "json", false, "print one JSON object instead of a table")
	a.deferErrors(f)
	return c
}

// checkpointInfo is one row of `weir checkpoints list`, and its JSON form.
type checkpointInfo struct {
	Job    string `json:"job"`
	ID     int64  `json:"id"`
	Status string `json:"status"`
	// Error is the reason a corrupt checkpoint is corrupt.
	Error string `json:"error,omitempty"`
	// Bytes, CheckpointedSize and FullSize are set for complete checkpoints
	// only; Completed and DurationMs too, unless the metadata lacks the
	// completion (or trigger) time. Bytes equals CheckpointedSize; it is
	// kept for compatibility.
	Completed        string `json:"completed,omitempty"`
	Bytes            *int64 `json:"bytes,omitempty"`
	CheckpointedSize *int64 `json:"checkpointedSize,omitempty"`
	FullSize         *int64 `json:"fullSize,omitempty"`
	DurationMs       *int64 `json:"durationMs,omitempty"`
	// Path is "<job>/chk-<n>", relative to the checkpoint directory.
	Path string `json:"path"`
}

// listCheckpoints prints the checkpoints under dir: those of jobDir (the
// sanitized form of job) if it is not empty, else those of every job.
func (a *app) listCheckpoints(ctx context.Context, dir, job, jobDir string, asJSON bool) error {
	s, err := openCheckpointDir(ctx, dir)
	if err != nil {
		return err
	}
	defer s.Close()

	jobDirs := []string{jobDir}
	if jobDir == "" {
		if jobDirs, err = s.ListJobs(ctx); err != nil {
			return failure(fmt.Errorf("checkpoint directory %s: %w", dir, err))
		}
	}
	var rows []checkpointInfo
	for _, j := range jobDirs {
		entries, err := s.ListCheckpoints(ctx, j)
		if err != nil {
			return failure(fmt.Errorf("checkpoint directory %s: %w", dir, err))
		}
		for _, e := range entries {
			row, err := inspectCheckpoint(ctx, s, j, e)
			if err != nil {
				return failure(fmt.Errorf("checkpoint directory %s: %w", dir, err))
			}
			rows = append(rows, row)
		}
	}
	slices.SortFunc(rows, func(x, y checkpointInfo) int {
		return cmp.Or(cmp.Compare(x.Job, y.Job), cmp.Compare(x.ID, y.ID))
	})

	if asJSON {
		if rows == nil {
			rows = []checkpointInfo{}
		}
		if err := json.NewEncoder(a.stdout).Encode(struct {
			Checkpoints []checkpointInfo `json:"checkpoints"`
		}{rows}); err != nil {
			return failure(fmt.Errorf("write result: %w", err))
		}
		return nil
	}
	if len(rows) == 0 {
		msg := fmt.Sprintf("no checkpoints under %s\n", dir)
		if jobDir != "" {
			msg = fmt.Sprintf("no checkpoints of job %s under %s\n", job, dir)
		}
		_, err := a.stdout.Write([]byte(msg))
		return err
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tID\tSTATUS\tCOMPLETED\tCHECKPOINTED\tFULL\tDURATION")
	for _, r := range rows {
		status, completed, size, full, duration := r.Status, "-", "-", "-", "-"
		switch r.Status {
		case checkpointIncomplete:
			status = "incomplete (no _metadata)"
		case checkpointCorrupt:
			status = "corrupt: " + r.Error
		case checkpointComplete:
			size, full = runner.FormatBytes(*r.CheckpointedSize), runner.FormatBytes(*r.FullSize)
			if r.Completed != "" {
				completed = r.Completed
			}
			if r.DurationMs != nil {
				duration = (time.Duration(*r.DurationMs) * time.Millisecond).String()
			}
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\n", r.Job, r.ID, status, completed, size, full, duration)
	}
	if err := tw.Flush(); err != nil {
		return failure(fmt.Errorf("write result: %w", err))
	}
	return nil
}

// localPath is the local path that loc (a path or URL, as for
// storage.Open) names, or "" if it is not local.
func localPath(loc string) string {
	if !strings.Contains(loc, "://") {
		return loc
	}
	if u, err := url.Parse(loc); err == nil && u.Scheme == "file" {
		return filepath.FromSlash(u.Path)
	}
	return ""
}

// openCheckpointDir opens the checkpoint storage at dir for reading. A
// local directory that does not exist is a usage error, and is not created.
func openCheckpointDir(ctx context.Context, dir string) (*storage.Storage, error) {
	if local := localPath(dir); local != "" {
		fi, err := os.Stat(local)
		switch {
		case errors.Is(err, os.ErrNotExist):
			return nil, usageError(fmt.Errorf("checkpoint directory %s does not exist", dir))
		case err != nil:
			return nil, usageError(fmt.Errorf("checkpoint directory %s: %w", dir, err))
		case !fi.IsDir():
			return nil, usageError(fmt.Errorf("checkpoint directory %s is not a directory", dir))
		}
	}
	// OpenExisting, unlike Open, neither creates a local directory nor
	// needs write access to it.
	s, err := storage.OpenExisting(ctx, dir)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, usageError(fmt.Errorf("checkpoint directory %s does not exist", dir))
	}
	if err != nil {
		return nil, usageError(err)
	}
	return s, nil
}

// inspectCheckpoint reads and decodes the metadata of checkpoint e of
// jobDir. A missing, corrupt or undecodable _metadata is a status, not an
// error; I/O errors are returned.
func inspectCheckpoint(ctx context.Context, s *storage.Storage, jobDir string, e storage.CheckpointEntry) (checkpointInfo, error) {
	r := checkpointInfo{Job: jobDir, ID: e.ID, Status: checkpointIncomplete, Path: jobDir + "/" + storage.CheckpointDir(e.ID)}
	if !e.Complete {
		return r, nil
	}
	payload, err := s.ReadMetadata(ctx, jobDir, e.ID)
	switch {
	case errors.Is(err, storage.ErrNotFound): // deleted since it was listed
		return r, nil
	case errors.Is(err, storage.ErrCorrupt), errors.Is(err, storage.ErrUnsupportedVersion):
		r.Status, r.Error = checkpointCorrupt, shortReason(err)
		return r, nil
	case err != nil:
		return r, err
	}
	m, err := metadata.Decode(payload)
	if err != nil {
		r.Status, r.Error = checkpointCorrupt, shortReason(err)
		return r, nil
	}
	if m.ID != e.ID {
		r.Status, r.Error = checkpointCorrupt, fmt.Sprintf("metadata is of checkpoint %d", m.ID)
		return r, nil
	}
	full := fullSize(m)
	r.Status, r.Bytes, r.CheckpointedSize, r.FullSize = checkpointComplete, &m.Bytes, &m.Bytes, &full
	// A time of 0 is unknown: the runner writes _metadata before the
	// checkpoint completes, so CompletionTime may be missing.
	if m.CompletionTime != 0 {
		r.Completed = time.UnixMilli(m.CompletionTime).UTC().Format(time.RFC3339)
		if m.TriggerTime != 0 {
			duration := m.CompletionTime - m.TriggerTime
			r.DurationMs = &duration
		}
	}
	return r, nil
}

// fullSize is the full size of checkpoint m: the recorded FullBytes, or,
// for checkpoints written before it was recorded (0), the size computed from
// the files and inline state the metadata references.
func fullSize(m *metadata.Checkpoint) int64 {
	if m.FullBytes != 0 {
		return m.FullBytes
	}
	return m.FullSize()
}

// shortReason is err's message without the path and sentinel prefixes that
// wrap it, on one line: what is wrong with the _metadata.
func shortReason(err error) string {
	msg := err.Error()
	for _, sentinel := range []error{storage.ErrCorrupt, storage.ErrUnsupportedVersion} {
		if i := strings.LastIndex(msg, sentinel.Error()+": "); i >= 0 {
			msg = msg[i+len(sentinel.Error())+2:]
			break
		}
	}
	if rest, ok := strings.CutPrefix(msg, metadata.ErrInvalid.Error()+": "); ok {
		msg = "invalid metadata: " + rest
	}
	return strings.Join(strings.Fields(msg), " ")
}

func (a *app) checkpointsInspectCommand() *cobra.Command {
	var (
		asJSON bool
		dirs   []string
	)
	c := &cobra.Command{
		Use:   "inspect <path> [flags]",
		Short: "Show the sizes and files of a checkpoint or savepoint, or of every checkpoint of a job",
		Long: `Show, for one checkpoint, one savepoint or every complete checkpoint of a
job, its checkpointed size (the bytes the checkpoint uploaded), its full size
(every byte it references: its own files, shared files uploaded by earlier
checkpoints, and inline state) and every file it references: its path
relative to the job directory (to the savepoint directory for a savepoint),
its size, and whether it is shared (under shared/, possibly referenced by
several checkpoints) or private to the checkpoint. For a checkpoint it also
shows which other complete checkpoints of the job reference each file, the
bytes 'weir checkpoints delete' would free (the files no other checkpoint
references), and the runs whose restore records hold it (restored from it
without a checkpoint of their own yet, or in CLAIM mode and running).

<path> is one checkpoint, <dir>/<job>/chk-<n>; a savepoint directory; either's
_metadata file; or a job's checkpoint directory, <dir>/<job>, whose complete
checkpoints are shown in id order (incomplete ones, without _metadata, are
skipped; corrupt ones are reported with the reason). <dir> is a path,
file://, or a gocloud blob URL such as s3://bucket/prefix, as for
"weir checkpoints list --dir".

Restore records are looked for in the job directories under the storage
root holding the snapshot and under every --dir (without --dir: under the
default checkpoint directory too, if it exists).

Nothing is created or changed. With --json standard output holds exactly one
JSON object: {"checkpoints":[...]}.`,
		Example: `  weir checkpoints inspect weir-data/checkpoints/wordcount
  weir checkpoints inspect weir-data/checkpoints/wordcount/chk-7 --json
  weir checkpoints inspect /backups/savepoint-3f2a9c-0b1d2e3f4a5b --dir /data/checkpoints`,
		Args: cobra.ArbitraryArgs,
		RunE: func(c *cobra.Command, args []string) error {
			problems := a.flagProblemsOf(c.Flags())
			if _, err := newLogger(a.stderr, a.logFormat, a.logLevel, slog.LevelWarn); err != nil {
				problems = append(problems, err)
			}
			problems = append(problems, snapshotArgProblems(c, args, "a checkpoint, a savepoint or a job's checkpoint directory")...)
			problems = append(problems, dirProblems(dirs)...)
			if len(problems) > 0 {
				return usageError(problems...)
			}
			return a.inspectCheckpoints(c.Context(), args[0], dirs, c.Flags().Changed("dir"), asJSON)
		},
	}
	f := c.Flags()
	f.BoolVar(&asJSON, "json", false, "print one JSON object instead of tables")
	f.StringArrayVar(&dirs, "dir", nil, "checkpoint `directory` whose jobs' restore records to check as well (repeatable; default: the default checkpoint directory, if it exists)")
	a.deferErrors(f)
	return c
}

// snapshotArgProblems checks that args is one non-empty path of what.
func snapshotArgProblems(c *cobra.Command, args []string, what string) []error {
	switch {
	case len(args) == 0:
		return []error{fmt.Errorf("missing argument: '%s' takes the path of %s", c.CommandPath(), what)}
	case len(args) > 1:
		return []error{fmt.Errorf("unexpected argument %q: '%s' takes one path", args[1], c.CommandPath())}
	case args[0] == "":
		return []error{errors.New("the path must not be empty")}
	}
	return nil
}

// dirProblems checks the values of --dir.
func dirProblems(dirs []string) []error {
	if slices.Contains(dirs, "") {
		return []error{errors.New("--dir: must not be empty")}
	}
	return nil
}

// inspectedFile is one file a checkpoint references, in the output of
// `weir checkpoints inspect`.
type inspectedFile struct {
	// Path is relative to the job directory: "shared/<name>" or
	// "chk-<n>/<name>" (for a savepoint: to the savepoint directory).
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	Shared bool   `json:"shared"`
	// Part is, for the changelog state backend, "materialized" or "log"
	// (or "pending": restored records of states not registered yet).
	Part string `json:"part,omitempty"`
	// SharedWith are the other complete checkpoints of the job that
	// reference the file too.
	SharedWith []int64 `json:"sharedWith,omitempty"`
}

// inspectedChangelog sums a changelog checkpoint's parts.
type inspectedChangelog struct {
	MaterializedSize int64   `json:"materializedSize"`
	LogSize          int64   `json:"logSize"`
	LogSegments      int     `json:"logSegments"`
	LogRecords       int64   `json:"logRecords"`
	Materializations []int64 `json:"materializations"`
}

// inspectedCheckpoint is one checkpoint or savepoint in the output of `weir
// checkpoints inspect`: its sizes and files, or, if Error is set, why it
// could not be read.
type inspectedCheckpoint struct {
	ID int64
	// Path is the snapshot's directory: "chk-<n>" (relative to the job
	// directory), or the savepoint directory's name; "" means chk-<ID>.
	Path string
	// Savepoint marks a savepoint; Job is then the job its metadata names.
	Savepoint        bool
	Job              string
	CheckpointedSize int64
	FullSize         int64
	Files            []inspectedFile
	Changelog        *inspectedChangelog
	InFlight         *inspectedInFlight
	// FreedByDelete is the bytes of the referenced files `weir
	// checkpoints delete` would delete (see deletion); SharedKept, if set,
	// is why it would keep every shared file.
	FreedByDelete int64
	SharedKept    string
	// RestoredBy are the runs whose restore records hold the snapshot.
	RestoredBy []restoreHolder
	Error      string
}

// inspectedInFlight is the in-flight data of an unaligned checkpoint.
type inspectedInFlight struct {
	UnalignedSubtasks int   `json:"unalignedSubtasks"`
	PersistedBytes    int64 `json:"persistedBytes"`
	Channels          int   `json:"channels"`
}

// dir returns the snapshot's directory name.
func (c inspectedCheckpoint) dir() string {
	if c.Path != "" {
		return c.Path
	}
	return storage.CheckpointDir(c.ID)
}

// MarshalJSON gives a readable checkpoint {"id","path","checkpointedSize",
// "fullSize","freedByDelete","restoredBy","files",...} and a corrupt one
// {"id","path","error"}.
func (c inspectedCheckpoint) MarshalJSON() ([]byte, error) {
	if c.Error != "" {
		return json.Marshal(struct {
			ID    int64  `json:"id"`
			Path  string `json:"path"`
			Error string `json:"error"`
		}{c.ID, c.dir(), c.Error})
	}
	files := c.Files
	if files == nil {
		files = []inspectedFile{}
	}
	restoredBy := c.RestoredBy
	if restoredBy == nil {
		restoredBy = []restoreHolder{}
	}
	return json.Marshal(struct {
		ID               int64               `json:"id"`
		Path             string              `json:"path"`
		Savepoint        bool                `json:"savepoint,omitempty"`
		Job              string              `json:"job,omitempty"`
		CheckpointedSize int64               `json:"checkpointedSize"`
		FullSize         int64               `json:"fullSize"`
		FreedByDelete    int64               `json:"freedByDelete"`
		SharedKept       string              `json:"sharedKept,omitempty"`
		RestoredBy       []restoreHolder     `json:"restoredBy"`
		Changelog        *inspectedChangelog `json:"changelog,omitempty"`
		InFlight         *inspectedInFlight  `json:"inFlight,omitempty"`
		Files            []inspectedFile     `json:"files"`
	}{c.ID, c.dir(), c.Savepoint, c.Job, c.CheckpointedSize, c.FullSize, c.FreedByDelete, c.SharedKept, restoredBy,
		c.Changelog, c.InFlight, files})
}

// checkpointDirRE matches the last element of a checkpoint's path.
var checkpointDirRE = regexp.MustCompile(`^chk-[0-9]+$`)

// inspectCheckpoints prints the checkpoint or savepoint at loc, or every
// complete checkpoint of the job directory at loc, with the restore
// records found under its storage root and dirs (see scanRestores).
func (a *app) inspectCheckpoints(ctx context.Context, loc string, dirs []string, explicitDirs, asJSON bool) error {
	t, err := resolveTarget(ctx, loc, true)
	if err != nil {
		return err
	}
	defer t.s.Close()
	var cps []inspectedCheckpoint
	switch {
	case t.savepoint != nil:
		cp := inspectedFrom(t.savepoint)
		cp.Path, cp.Savepoint, cp.Job = t.snapshot, true, t.savepoint.Job
		for _, f := range cp.Files {
			cp.FreedByDelete += f.Size
		}
		cps = append(cps, cp)
	case t.checkpoint != nil:
		jc, err := loadJobCheckpoints(ctx, t.s, t.job)
		if err != nil {
			return failure(fmt.Errorf("checkpoint directory %s: %w", t.rootShown, err))
		}
		cps = []inspectedCheckpoint{inspectedFrom(t.checkpoint)}
		annotate(cps, jc)
	default:
		if cps, err = inspectJobDir(ctx, t); err != nil {
			return err
		}
	}
	scan, err := scanRestores(ctx, t.s, t.rootShown, dirs, explicitDirs)
	if err != nil {
		return err
	}
	for i, cp := range cps {
		if cp.Error != "" {
			continue
		}
		rel := cp.dir()
		if !cp.Savepoint {
			rel = t.job + "/" + rel
		}
		cps[i].RestoredBy = scan.holders(t.s.Location(), rel)
	}

	if asJSON {
		if cps == nil {
			cps = []inspectedCheckpoint{}
		}
		if err := json.NewEncoder(a.stdout).Encode(struct {
			Checkpoints []inspectedCheckpoint `json:"checkpoints"`
		}{cps}); err != nil {
			return failure(fmt.Errorf("write result: %w", err))
		}
		return nil
	}
	if len(cps) == 0 {
		_, err := fmt.Fprintf(a.stdout, "no complete checkpoints in %s\n", loc)
		return err
	}
	for i, cp := range cps {
		if i > 0 {
			fmt.Fprintln(a.stdout)
		}
		if err := a.printInspected(cp); err != nil {
			return err
		}
	}
	return nil
}

// printInspected prints one checkpoint or savepoint of `weir checkpoints
// inspect`: its summary lines and its table of files.
func (a *app) printInspected(cp inspectedCheckpoint) error {
	name := cp.dir()
	if cp.Error != "" {
		fmt.Fprintf(a.stdout, "%s: corrupt: %s\n", name, cp.Error)
		return nil
	}
	noun := "files"
	if len(cp.Files) == 1 {
		noun = "file"
	}
	what := ""
	if cp.Savepoint {
		what = fmt.Sprintf(" savepoint of job %s (checkpoint %d),", cp.Job, cp.ID)
	}
	fmt.Fprintf(a.stdout, "%s:%s checkpointed %s, full %s, %d %s, deleting it frees %s\n", name, what,
		runner.FormatBytes(cp.CheckpointedSize), runner.FormatBytes(cp.FullSize), len(cp.Files), noun, runner.FormatBytes(cp.FreedByDelete))
	if cp.SharedKept != "" {
		fmt.Fprintf(a.stdout, "deleting it keeps its shared files: %s\n", cp.SharedKept)
	}
	for _, h := range cp.RestoredBy {
		fmt.Fprintf(a.stdout, "held by %s\n", h.short())
	}
	if cl := cp.Changelog; cl != nil {
		fmt.Fprintf(a.stdout, "changelog: materialized %s (materialization %s), log %s in %d segments, %d records to replay\n",
			runner.FormatBytes(cl.MaterializedSize), joinInts(cl.Materializations), runner.FormatBytes(cl.LogSize), cl.LogSegments, cl.LogRecords)
	}
	if f := cp.InFlight; f != nil {
		fmt.Fprintf(a.stdout, "unaligned at %d subtasks: in-flight data %s of %d channels\n",
			f.UnalignedSubtasks, runner.FormatBytes(f.PersistedBytes), f.Channels)
	}
	if len(cp.Files) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
	withPart := cp.Changelog != nil || cp.InFlight != nil
	header := "PATH\tSIZE"
	if !cp.Savepoint {
		header += "\tSHARED"
	}
	if withPart {
		header += "\tPART"
	}
	fmt.Fprintln(tw, header)
	for _, f := range cp.Files {
		row := f.Path + "\t" + runner.FormatBytes(f.Size)
		if !cp.Savepoint {
			shared := "no"
			if f.Shared {
				shared = "yes"
			}
			if len(f.SharedWith) > 0 {
				shared += " (also " + idList(f.SharedWith) + ")"
			}
			row += "\t" + shared
		}
		if withPart {
			part := f.Part
			if part == "" {
				part = "-"
			}
			row += "\t" + part
		}
		fmt.Fprintln(tw, row)
	}
	if err := tw.Flush(); err != nil {
		return failure(fmt.Errorf("write result: %w", err))
	}
	return nil
}

// snapshotTarget is what a path given to `weir checkpoints inspect` or
// `delete` names, with the storage root holding it open in s.
type snapshotTarget struct {
	s *storage.Storage
	// rootShown names the storage root as the user wrote it (the
	// directory above the job directory or savepoint).
	rootShown string
	// shown is the target's path as the user gave it, without _metadata.
	shown string
	// job is the job directory (for a checkpoint or a job directory).
	job string
	// snapshot is the snapshot's path relative to the root:
	// "<job>/chk-<n>" or "<savepoint dir>".
	snapshot string
	// checkpoint is set for a checkpoint, savepoint for a savepoint; both
	// are nil for a job directory.
	checkpoint, savepoint *metadata.Checkpoint
}

// resolveTarget opens what loc names: a checkpoint (<dir>/<job>/chk-<n>), a
// savepoint directory, either's _metadata file, or, if jobDirOK, a job's
// checkpoint directory. A snapshot that is missing, incomplete or corrupt
// is a usage error naming loc and what would be valid.
func resolveTarget(ctx context.Context, loc string, jobDirOK bool) (*snapshotTarget, error) {
	base, parent, err := splitLastElement(loc)
	if err != nil {
		return nil, usageError(err)
	}
	if base == storage.MetadataName {
		loc = parent
		if base, parent, err = splitLastElement(parent); err != nil {
			return nil, usageError(err)
		}
	}
	full := loc // a URL
	if !strings.Contains(loc, "://") {
		full = filepath.Join(parent, base) // absolute: "chk-7" alone names the job directory too
	}
	local := localPath(loc)
	if checkpointDirRE.MatchString(base) {
		if local != "" {
			if _, err := os.Stat(local); errors.Is(err, os.ErrNotExist) {
				return nil, usageError(fmt.Errorf("checkpoint %s does not exist", loc))
			}
		}
		s, c, err := resolveCheckpoint(ctx, loc, full, local != "")
		if err != nil {
			return nil, err
		}
		m, bad := decodeCheckpoint(c.ID, c.Payload)
		if m == nil {
			s.Close()
			return nil, usageError(fmt.Errorf("checkpoint %s is corrupt: %s", loc, bad.reason))
		}
		_, root, _ := splitLastElement(parent)
		return &snapshotTarget{s: s, rootShown: root, shown: loc, job: c.Job, snapshot: c.Job + "/" + base, checkpoint: m}, nil
	}

	// A savepoint directory has _metadata in it, a job directory has not.
	var (
		s    *storage.Storage
		snap storage.Snapshot
	)
	err = storage.ErrNotFound
	if fi, serr := os.Stat(local); local == "" || (serr == nil && fi.IsDir()) {
		s, snap, err = storage.ResolveSnapshot(ctx, full)
	}
	switch {
	case err == nil:
		m, err := metadata.Decode(snap.Payload)
		if err != nil {
			s.Close()
			return nil, usageError(fmt.Errorf("savepoint %s is corrupt: %s", loc, shortReason(err)))
		}
		if !m.Savepoint {
			s.Close()
			return nil, usageError(fmt.Errorf("%s holds the _metadata of checkpoint %d of job %s, not of a savepoint, but is not a chk-<n> directory: give a savepoint directory, a <job>/chk-<n> directory or a job's checkpoint directory", loc, m.ID, m.Job))
		}
		return &snapshotTarget{s: s, rootShown: parent, shown: loc, snapshot: snap.Path, savepoint: m}, nil
	case errors.Is(err, storage.ErrCorrupt), errors.Is(err, storage.ErrUnsupportedVersion):
		return nil, usageError(fmt.Errorf("savepoint %s is corrupt: %s", loc, shortReason(err)))
	case !errors.Is(err, storage.ErrNotFound) && !errors.Is(err, storage.ErrInvalidName):
		return nil, failure(err)
	case !jobDirOK:
		if local != "" {
			if _, serr := os.Stat(local); errors.Is(serr, os.ErrNotExist) {
				return nil, usageError(fmt.Errorf("%s does not exist", loc))
			}
		}
		return nil, usageError(fmt.Errorf("%s is neither a checkpoint nor a savepoint: give a <job>/chk-<n> directory, a savepoint directory (one with a _metadata file in it) or a _metadata file", loc))
	}
	s, err = openJobDir(ctx, loc, parent, base)
	if err != nil {
		return nil, err
	}
	return &snapshotTarget{s: s, rootShown: parent, shown: loc, job: base}, nil
}

// splitLastElement splits loc (a path or URL) into its last element and the
// location of its parent. A relative local path is made absolute first, so
// "." names the current directory.
func splitLastElement(loc string) (base, parent string, err error) {
	if strings.Contains(loc, "://") {
		u, perr := url.Parse(loc)
		if perr != nil {
			return "", "", fmt.Errorf("path %q: %w", loc, perr)
		}
		p := strings.TrimRight(u.Path, "/")
		if p == "" {
			return "", "", fmt.Errorf("path %q: want <dir>/<job> or <dir>/<job>/chk-<n>", loc)
		}
		base = path.Base(p)
		u.Path, u.RawPath = path.Dir(p), ""
		return base, u.String(), nil
	}
	abs, err := filepath.Abs(loc)
	if err != nil {
		return "", "", fmt.Errorf("path %s: %w", loc, err)
	}
	base = filepath.Base(abs)
	if base == string(filepath.Separator) || filepath.Dir(abs) == abs {
		return "", "", fmt.Errorf("path %s: want <dir>/<job> or <dir>/<job>/chk-<n>", loc)
	}
	return base, filepath.Dir(abs), nil
}

// resolveCheckpoint reads the checkpoint at resolveLoc, <dir>/<job>/chk-<n>,
// which the user gave as loc; exists tells that it is a local directory
// known to exist. A checkpoint that is missing, incomplete or corrupt is a
// usage error naming loc. On success the caller must Close s.
func resolveCheckpoint(ctx context.Context, loc, resolveLoc string, exists bool) (*storage.Storage, storage.Checkpoint, error) {
	s, c, err := storage.ResolvePath(ctx, resolveLoc)
	switch {
	case errors.Is(err, storage.ErrNotFound) && exists:
		return nil, c, usageError(fmt.Errorf("checkpoint %s is incomplete: it has no %s", loc, storage.MetadataName))
	case errors.Is(err, storage.ErrNotFound):
		return nil, c, usageError(fmt.Errorf("checkpoint %s does not exist or is incomplete (no %s): %w", loc, storage.MetadataName, err))
	case errors.Is(err, storage.ErrCorrupt), errors.Is(err, storage.ErrUnsupportedVersion):
		return nil, c, usageError(fmt.Errorf("checkpoint %s is corrupt: %s", loc, shortReason(err)))
	case errors.Is(err, storage.ErrInvalidName):
		return nil, c, usageError(err)
	case err != nil:
		return nil, c, failure(err)
	}
	return s, c, nil
}

// openJobDir opens the storage root parent of the job directory loc (named
// jobDir), which must exist and be a directory weir could have made.
func openJobDir(ctx context.Context, loc, parent, jobDir string) (*storage.Storage, error) {
	if local := localPath(loc); local != "" {
		fi, err := os.Stat(local)
		switch {
		case errors.Is(err, os.ErrNotExist):
			return nil, usageError(fmt.Errorf("checkpoint directory %s does not exist", loc))
		case err != nil:
			return nil, usageError(fmt.Errorf("checkpoint directory %s: %w", loc, err))
		case !fi.IsDir():
			return nil, usageError(fmt.Errorf("checkpoint directory %s is not a directory", loc))
		}
	}
	if sj, err := storage.SanitizeJob(jobDir); err != nil || sj != jobDir {
		return nil, usageError(fmt.Errorf("%s is not a job's checkpoint directory: weir never names one %q", loc, jobDir))
	}
	s, err := storage.OpenExisting(ctx, parent)
	if err != nil {
		return nil, usageError(fmt.Errorf("checkpoint directory %s: %w", loc, err))
	}
	return s, nil
}

// inspectJobDir reads every complete checkpoint of the job directory t.
// Incomplete checkpoints are skipped; corrupt ones are entries with Error
// set.
func inspectJobDir(ctx context.Context, t *snapshotTarget) ([]inspectedCheckpoint, error) {
	entries, err := t.s.ListCheckpoints(ctx, t.job)
	if err != nil {
		return nil, failure(fmt.Errorf("checkpoint directory %s: %w", t.shown, err))
	}
	if len(entries) == 0 {
		if err := notAJobDir(ctx, t.shown); err != nil {
			return nil, err
		}
	}
	jc, err := loadJobCheckpoints(ctx, t.s, t.job)
	if err != nil {
		return nil, failure(fmt.Errorf("checkpoint directory %s: %w", t.shown, err))
	}
	var cps []inspectedCheckpoint
	for _, id := range jc.ids {
		if m := jc.metas[id]; m != nil {
			cps = append(cps, inspectedFrom(m))
		} else {
			cps = append(cps, inspectedCheckpoint{ID: id, Error: jc.bad[id].reason})
		}
	}
	annotate(cps, jc)
	return cps, nil
}

// annotate adds to each readable checkpoint of cps, all of jc's job, which
// of its files other complete checkpoints of the job reference, and what
// deleting it would free.
func annotate(cps []inspectedCheckpoint, jc *jobCheckpoints) {
	refs := jc.refs()
	for i, cp := range cps {
		if cp.Error != "" || jc.metas[cp.ID] == nil {
			continue
		}
		for k, f := range cp.Files {
			cps[i].Files[k].SharedWith = slices.DeleteFunc(slices.Clone(refs[f.Path]), func(o int64) bool { return o == cp.ID })
			if len(cps[i].Files[k].SharedWith) == 0 {
				cps[i].Files[k].SharedWith = nil
			}
		}
		d := jc.plan(cp.ID, refs)
		cps[i].FreedByDelete, cps[i].SharedKept = d.freed, d.keptUnknown
	}
}

// notAJobDir returns a usage error if loc, which holds no checkpoints, is a
// checkpoint directory holding jobs (the --dir of `weir checkpoints list`)
// rather than one job's directory.
func notAJobDir(ctx context.Context, loc string) error {
	s, err := storage.OpenExisting(ctx, loc)
	if err != nil {
		return nil // nothing to suggest
	}
	defer s.Close()
	jobs, err := s.ListJobs(ctx)
	if err != nil || len(jobs) == 0 {
		return nil
	}
	return usageError(fmt.Errorf("%s holds the checkpoints of jobs (%s), not of one job: give one job's directory, such as %s",
		loc, strings.Join(jobs, ", "), strings.TrimRight(loc, "/")+"/"+jobs[0]))
}

// decodeInspected decodes the metadata payload of checkpoint id into its
// sizes and files; if it does not decode, or is of another checkpoint, the
// result has only Error set.
func decodeInspected(id int64, payload []byte) inspectedCheckpoint {
	m, bad := decodeCheckpoint(id, payload)
	if m == nil {
		return inspectedCheckpoint{ID: id, Error: bad.reason}
	}
	return inspectedFrom(m)
}

// inspectedFrom returns the sizes and files of the checkpoint or savepoint
// m.
func inspectedFrom(m *metadata.Checkpoint) inspectedCheckpoint {
	cp := inspectedCheckpoint{ID: m.ID}
	cp.CheckpointedSize, cp.FullSize = m.Bytes, fullSize(m)
	seen := map[string]int{} // path → index in cp.Files
	add := func(h storage.FileHandle, part string) {
		shared := strings.HasPrefix(h.Path, storage.SharedDir+"/")
		if _, ok := seen[h.Path]; ok {
			return
		}
		seen[h.Path] = len(cp.Files)
		cp.Files = append(cp.Files, inspectedFile{Path: h.Path, Size: h.Size, Shared: shared, Part: part})
	}
	mats := map[int64]bool{}
	for _, op := range m.Operators {
		for _, st := range op.Subtasks {
			part := ""
			if st.Changelog != nil {
				part = "materialized"
				if cp.Changelog == nil {
					cp.Changelog = &inspectedChangelog{Materializations: []int64{}}
				}
				cl := cp.Changelog
				cl.LogSegments += len(st.Changelog.AllSegments())
				cl.LogRecords += st.Changelog.Records()
				if !mats[st.Changelog.Materialization] {
					mats[st.Changelog.Materialization] = true
					cl.Materializations = append(cl.Materializations, st.Changelog.Materialization)
				}
				for _, g := range st.Changelog.AllSegments() {
					add(g.File, "log")
				}
			}
			if st.Pending != nil {
				add(st.Pending.File, "pending")
			}
			for _, c := range st.Channels {
				if cp.InFlight == nil {
					cp.InFlight = &inspectedInFlight{UnalignedSubtasks: m.UnalignedSubtasks, PersistedBytes: m.PersistedBytes}
				}
				cp.InFlight.Channels++
				add(c.File, "in-flight")
			}
			for _, h := range st.Files() {
				add(h, part)
			}
		}
	}
	if cp.Changelog != nil {
		cp.Changelog.MaterializedSize, cp.Changelog.LogSize, _, _ = m.ChangelogParts()
		slices.Sort(cp.Changelog.Materializations)
	}
	slices.SortFunc(cp.Files, func(x, y inspectedFile) int { return cmp.Compare(x.Path, y.Path) })
	return cp
}

func joinInts(vs []int64) string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = strconv.FormatInt(v, 10)
	}
	return strings.Join(out, ", ")
}
