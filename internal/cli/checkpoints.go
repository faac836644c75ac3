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
	"slices"
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

// checkpointsCommand is `weir checkpoints`, grouping `weir checkpoints list`.
func (a *app) checkpointsCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "checkpoints",
		Short: "Inspect the checkpoints in a checkpoint directory",
		Args:  cobra.ArbitraryArgs,
		RunE:  a.groupRunE("command"),
	}
	c.AddCommand(a.checkpointsListCommand())
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
state size and how long they took from trigger to completion.

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
	// Bytes is set for complete checkpoints only; Completed and DurationMs
	// too, unless the metadata lacks the completion (or trigger) time.
	Completed  string `json:"completed,omitempty"`
	Bytes      *int64 `json:"bytes,omitempty"`
	DurationMs *int64 `json:"durationMs,omitempty"`
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
	fmt.Fprintln(tw, "JOB\tID\tSTATUS\tCOMPLETED\tSIZE\tDURATION")
	for _, r := range rows {
		status, completed, size, duration := r.Status, "-", "-", "-"
		switch r.Status {
		case checkpointIncomplete:
			status = "incomplete (no _metadata)"
		case checkpointCorrupt:
			status = "corrupt: " + r.Error
		case checkpointComplete:
			size = runner.FormatBytes(*r.Bytes)
			if r.Completed != "" {
				completed = r.Completed
			}
			if r.DurationMs != nil {
				duration = (time.Duration(*r.DurationMs) * time.Millisecond).String()
			}
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", r.Job, r.ID, status, completed, size, duration)
	}
	if err := tw.Flush(); err != nil {
		return failure(fmt.Errorf("write result: %w", err))
	}
	return nil
}

// openCheckpointDir opens the checkpoint storage at dir for reading. A
// local directory that does not exist is a usage error, and is not created.
func openCheckpointDir(ctx context.Context, dir string) (*storage.Storage, error) {
	local := dir
	if strings.Contains(dir, "://") {
		local = ""
		if u, err := url.Parse(dir); err == nil && u.Scheme == "file" {
			local = u.Path
		}
	}
	if local != "" {
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
	r.Status, r.Bytes = checkpointComplete, &m.Bytes
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
