package cli

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/weirstream/weir/internal/checkpoint/metadata"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/rest"
)

// savepointPollInterval is how often `weir savepoint` and `weir stop` ask
// again whether the savepoint completed when the server answered at once
// (a weir server holds each answer until the savepoint finished, up to
// 10 s).
const savepointPollInterval = 100 * time.Millisecond

// savepointTypeFlag checks --type and returns the formatType of the
// request: canonical or native, in any case.
func savepointTypeFlag(typ string) (string, error) {
	switch f := strings.ToUpper(typ); f {
	case rest.SavepointFormatCanonical, rest.SavepointFormatNative:
		return f, nil
	}
	return "", fmt.Errorf("--type %q: must be canonical (readable by every state backend, the default) or "+
		"native (the state backend's own format)", typ)
}

// savepointTarget is the directory a savepoint is to be made in, as the
// server is to get it: a local path relative to the current directory is
// made absolute (the job's process may run elsewhere); a URL and "" (the
// job's execution.checkpointing.savepoint-dir) pass as they are.
func savepointTarget(dir string) (string, error) {
	if dir == "" || strings.Contains(dir, "://") || filepath.IsAbs(dir) {
		return dir, nil
	}
	return filepath.Abs(dir)
}

const savepointHelp = `weir takes savepoints with the checkpoint coordinator: the job must run with
checkpointing on (execution.checkpointing.interval). A savepoint is a
directory of its own, <target>/savepoint-<job id prefix>-<random>, holding
its _metadata and every file it needs, so it can be moved; 'weir run <job>
--from <path>' restores it. Without a target directory the job's
execution.checkpointing.savepoint-dir is taken. A relative local target is
relative to the current directory.`

func (a *app) savepointCommand() *cobra.Command {
	cf := &controlFlags{}
	var typ, dispose string
	var detached bool
	c := &cobra.Command{
		Use:   "savepoint <job> [targetDirectory] [flags]",
		Short: "Take a savepoint of a running job, or dispose of a savepoint",
		Long: `Take a savepoint of a running job through its REST server (Flink's POST
/jobs/<id>/savepoints), wait until it completed and print its path:

  Savepoint completed. Path: <path>

With --detached the command prints the request id and returns at once
(Savepoint triggered. Request id: <id>); GET /jobs/<id>/savepoints/<request
id> tells how it went. The job keeps running; 'weir stop' takes a savepoint
and stops the job.

` + savepointHelp + `

With --dispose <path> the command deletes the savepoint directory at path
(a path or storage URL) instead, and takes no job. It refuses to delete
anything that is not a savepoint; checkpoints (chk-<n>) are deleted with
'weir checkpoints delete'.

` + findHelp + `

Exit codes: 0 the savepoint completed (--detached: triggered; --dispose:
deleted); 1 the savepoint failed or could not be taken (the job ended, or
cannot take savepoints), the server does not answer, or the deletion
failed; 2 usage problems, an unknown job, a refused token, or a --dispose
path that is not a savepoint; 130 interrupted while waiting (the savepoint
goes on).`,
		Example: `  weir savepoint orders
  weir savepoint orders /backups/savepoints --type native
  weir savepoint orders s3://bucket/savepoints --detached
  weir savepoint --dispose /backups/savepoints/savepoint-0a1b2c-5e1f00c2a3b4`,
		Args: cobra.ArbitraryArgs,
		RunE: func(c *cobra.Command, args []string) error {
			problems := a.controlProblems(c, cf)
			if c.Flags().Changed("dispose") {
				if len(args) > 0 {
					problems = append(problems, fmt.Errorf("unexpected argument %q: 'weir savepoint --dispose "+
						"<path>' takes no job", args[0]))
				}
				if dispose == "" {
					problems = append(problems, errors.New("--dispose: the savepoint path must not be empty"))
				}
				for _, f := range []string{"type", "detached", "url", "token", "cacert", "dir"} {
					if c.Flags().Changed(f) {
						problems = append(problems, fmt.Errorf("--%s does not go with --dispose, which deletes a "+
							"savepoint directory and talks to no job", f))
					}
				}
				if len(problems) > 0 {
					return usageError(problems...)
				}
				return a.disposeSavepoint(c.Context(), dispose)
			}
			if len(args) > 2 {
				problems = append(problems, fmt.Errorf("unexpected argument %q: '%s' takes a job and an optional "+
					"target directory", args[2], c.CommandPath()))
			} else if err := oneJobArg(c, args[:min(len(args), 1)]); err != nil {
				problems = append(problems, err)
			}
			format, err := savepointTypeFlag(typ)
			if err != nil {
				problems = append(problems, err)
			}
			var target string
			if len(args) == 2 {
				if args[1] == "" {
					problems = append(problems, errors.New("the target directory must not be empty (leave it out "+
						"for the job's execution.checkpointing.savepoint-dir)"))
				} else if target, err = savepointTarget(args[1]); err != nil {
					problems = append(problems, fmt.Errorf("target directory %s: %w", args[1], err))
				}
			}
			if len(problems) > 0 {
				return usageError(problems...)
			}
			return a.withJob(c.Context(), cf, args[0], func(ctx context.Context, t controlTarget) error {
				id, err := t.client.TriggerSavepoint(ctx, t.job.JID,
					rest.SavepointTriggerRequest{TargetDirectory: target, FormatType: format})
				return a.followSavepoint(ctx, t, id, err, savepointRun{detached: detached, target: target})
			})
		},
	}
	a.addControlFlags(c, cf)
	f := c.Flags()
	f.StringVarP(&typ, "type", "t", "canonical", "format of the savepoint: canonical (readable by every state "+
		"backend) or native (the state backend's own, faster to take and restore)")
	f.BoolVar(&detached, "detached", false, "print the request id and return without waiting for the savepoint")
	f.StringVarP(&dispose, "dispose", "d", "", "delete the savepoint directory at `path` instead of taking a savepoint")
	a.deferErrors(f)
	c.AddCommand(a.savepointReadCommand())
	return c
}

func (a *app) stopCommand() *cobra.Command {
	cf := &controlFlags{}
	var typ, path string
	var drain, detached bool
	c := &cobra.Command{
		Use:   "stop <job> [flags]",
		Short: "Stop a running job with a savepoint",
		Long: `Stop a running job gracefully: take a savepoint and, once it completed, stop
the job (Flink's stop-with-savepoint, POST /jobs/<id>/stop). The command
waits until the savepoint completed and prints its path:

  Savepoint completed. Path: <path>

Resume the job from it with 'weir run <job> --from <path>'. With --drain the
sources end first and the final watermark is emitted, so that every
event-time timer and window fires: use it when the job is not to be resumed.
With --detached the command prints the request id and returns at once
(Stop-with-savepoint triggered. Request id: <id>).

` + savepointHelp + `

` + findHelp + `

Exit codes: 0 the savepoint completed and the job stops (--detached:
triggered); 1 the savepoint failed or could not be taken (the job ended, or
cannot take savepoints) or the server does not answer; 2 usage problems, an
unknown job or a refused token; 130 interrupted while waiting (the stop goes
on).`,
		Example: `  weir stop orders
  weir stop orders --savepoint-path /backups/savepoints
  weir stop orders --drain`,
		Args: cobra.ArbitraryArgs,
		RunE: func(c *cobra.Command, args []string) error {
			problems := a.controlProblems(c, cf)
			if err := oneJobArg(c, args); err != nil {
				problems = append(problems, err)
			}
			format, err := savepointTypeFlag(typ)
			if err != nil {
				problems = append(problems, err)
			}
			if c.Flags().Changed("savepoint-path") && path == "" {
				problems = append(problems, errors.New("--savepoint-path: must not be empty (leave it out for the "+
					"job's execution.checkpointing.savepoint-dir)"))
			}
			target, err := savepointTarget(path)
			if err != nil {
				problems = append(problems, fmt.Errorf("--savepoint-path %s: %w", path, err))
			}
			if len(problems) > 0 {
				return usageError(problems...)
			}
			return a.withJob(c.Context(), cf, args[0], func(ctx context.Context, t controlTarget) error {
				id, err := t.client.StopWithSavepoint(ctx, t.job.JID,
					rest.StopWithSavepointRequest{TargetDirectory: target, Drain: drain, FormatType: format})
				return a.followSavepoint(ctx, t, id, err, savepointRun{stop: true, detached: detached, target: target})
			})
		},
	}
	a.addControlFlags(c, cf)
	f := c.Flags()
	f.StringVarP(&path, "savepoint-path", "p", "", "`directory` to make the savepoint in (default: the job's "+
		"execution.checkpointing.savepoint-dir)")
	f.BoolVarP(&drain, "drain", "d", false, "end the sources and emit the final watermark before the savepoint, "+
		"so that every timer and window fires")
	f.StringVarP(&typ, "type", "t", "canonical", "format of the savepoint: canonical (readable by every state "+
		"backend) or native (the state backend's own, faster to take and restore)")
	f.BoolVar(&detached, "detached", false, "print the request id and return without waiting for the savepoint")
	a.deferErrors(f)
	return c
}

// savepointRun says what a savepoint command asked for.
type savepointRun struct {
	stop, detached bool
	// target is the directory asked for, "" for the job's default.
	target string
}

// followSavepoint reports a savepoint triggered as id (or the trigger's
// error trigErr) and, unless detached, waits for it and prints its path.
func (a *app) followSavepoint(ctx context.Context, t controlTarget, id string, trigErr error, r savepointRun) error {
	what := "savepoint"
	if r.stop {
		what = "stop-with-savepoint"
	}
	job := fmt.Sprintf("job %s (%s)", t.job.JID, t.job.Name)
	if trigErr != nil {
		var ae *rest.APIError
		if errors.As(trigErr, &ae) && ae.Status == http.StatusConflict {
			return failure(fmt.Errorf("no savepoint of %s: %s", job, ae.Message()))
		}
		return unreachable(t.client.URL(), trigErr)
	}
	if r.detached {
		if r.stop {
			_, err := fmt.Fprintf(a.stdout, "Stop-with-savepoint triggered. Request id: %s\n", id)
			return err
		}
		_, err := fmt.Fprintf(a.stdout, "Savepoint triggered. Request id: %s\n", id)
		return err
	}
	fmt.Fprintf(a.stderr, "Triggered the %s of %s; waiting for it to complete (request id %s)\n", what, job, id)
	loc, err := t.client.AwaitSavepoint(ctx, t.job.JID, id, savepointPollInterval)
	var failed *rest.SavepointFailedError
	switch {
	case errors.As(err, &failed):
		return failure(fmt.Errorf("the %s of %s failed: %s", what, job, failed.Message))
	case errors.Is(err, context.Canceled):
		return interrupted(fmt.Errorf("interrupted while waiting for the %s; it goes on (request id %s)", what, id))
	case err != nil && r.stop && rest.StatusOf(err) == 0:
		where := "the job's execution.checkpointing.savepoint-dir"
		if r.target != "" {
			where = r.target
		}
		return failure(fmt.Errorf("the REST server of %s at %s stopped answering while the job stopped with a "+
			"savepoint: the job has probably stopped, but the savepoint's path is unknown here; look for the "+
			"newest savepoint-%s-* directory in %s: %w", job, t.client.URL(), shortJobID(t.job.JID), where, err))
	case err != nil:
		return unreachable(t.client.URL(), err)
	}
	_, err = fmt.Fprintf(a.stdout, "Savepoint completed. Path: %s\n", loc)
	return err
}

// shortJobID is the job id prefix in savepoint directory names
// (storage.NewSavepointName).
func shortJobID(id string) string {
	if len(id) > 6 {
		return id[:6]
	}
	return id
}

// disposeSavepoint deletes the savepoint directory at path, refusing
// anything that is not a savepoint.
func (a *app) disposeSavepoint(ctx context.Context, path string) error {
	store, snap, err := storage.ResolveSnapshot(ctx, path)
	if err != nil {
		if errors.Is(err, storage.ErrNotFound) || errors.Is(err, storage.ErrInvalidName) {
			return usageError(fmt.Errorf("--dispose %s: no savepoint there: %w", path, err))
		}
		return failure(fmt.Errorf("--dispose %s: %w", path, err))
	}
	defer store.Close()
	if !snap.Savepoint {
		return usageError(fmt.Errorf("--dispose %s: this is checkpoint %d (%s), not a savepoint; nothing deleted. "+
			"Delete checkpoints with 'weir checkpoints delete'", path, snap.ID, snap.Path))
	}
	m, err := metadata.Decode(snap.Payload)
	if err != nil {
		return usageError(fmt.Errorf("--dispose %s: its _metadata is not a savepoint's that this weir can read, "+
			"so it may not be one; nothing deleted: %w", path, err))
	}
	if !m.Savepoint {
		return usageError(fmt.Errorf("--dispose %s: its _metadata is that of checkpoint %d of job %q, not of a "+
			"savepoint (a copied chk-<n> directory?); nothing deleted", path, m.ID, m.Job))
	}
	// A job restored from it that has no checkpoint of its own yet still
	// needs it (its restore record says so).
	t, err := resolveTarget(ctx, path, false)
	if err != nil {
		return err
	}
	defer t.s.Close()
	if _, err := checkHolders(ctx, t, nil, false, "savepoint"); err != nil {
		return err
	}
	if err := store.DeleteSavepoint(ctx, snap.Dir); err != nil {
		return failure(fmt.Errorf("--dispose %s: %w", path, err))
	}
	_, err = fmt.Fprintf(a.stdout, "Savepoint '%s' disposed.\n", path)
	return err
}
