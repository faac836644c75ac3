package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/runner"
)

func (a *app) checkpointsDeleteCommand() *cobra.Command {
	var (
		dryRun bool
		dirs   []string
	)
	c := &cobra.Command{
		Use:   "delete <chk-N dir | savepoint dir> [flags]",
		Short: "Delete one checkpoint and the shared files only it references, or one savepoint",
		Long: `Delete one retained checkpoint, <dir>/<job>/chk-<n>: its directory and the
files under the job's shared/ that no other complete checkpoint of the job
references (incremental SST files, changelog segments and materializations
only it used). Or delete one savepoint directory, whole. The path may also
name the snapshot's _metadata file.

It refuses (exit code 2) and deletes nothing when
  - a run holds the job's checkpoint directory (the job is running): its
    checkpoints are the running job's, which deletes them itself;
  - a run restored from the snapshot and its restore record still holds it:
    until that run completed a checkpoint of its own (a failover would
    restore from the snapshot again), and after that, in CLAIM mode, while
    the run is running (it owns the snapshot and deletes it itself);
  - another complete checkpoint of the job references a file in the
    checkpoint's directory (weir never writes such checkpoints).
Restore records are looked for in the job directories under the storage
root holding the snapshot and under every --dir (without --dir: under the
default checkpoint directory too, if it exists).

A corrupt or incomplete snapshot (no _metadata, or one that does not verify
or decode) is not deleted: weir cannot tell which files it references. The
job's next run removes incomplete checkpoints, and corrupt ones once a newer
checkpoint is intact. Shared files are kept, and said so, while another
complete checkpoint's references are unknown (its _metadata is corrupt and
it is the newest, or of a newer format), as the job's own clean-up keeps
them.

With --dry-run it checks the same and prints what it would delete, but
deletes nothing. Deleting the newest checkpoint prints a warning: 'weir run
--from latest' restores the previous one from then on, or finds none.`,
		Example: `  weir checkpoints delete weir-data/checkpoints/wordcount/chk-7 --dry-run
  weir checkpoints delete weir-data/checkpoints/wordcount/chk-7
  weir checkpoints delete /backups/savepoint-3f2a9c-0b1d2e3f4a5b --dir /data/checkpoints`,
		Args: cobra.ArbitraryArgs,
		RunE: func(c *cobra.Command, args []string) error {
			problems := a.flagProblemsOf(c.Flags())
			if _, err := newLogger(a.stderr, a.logFormat, a.logLevel, slog.LevelWarn); err != nil {
				problems = append(problems, err)
			}
			problems = append(problems, snapshotArgProblems(c, args, "a checkpoint (<dir>/<job>/chk-<n>) or a savepoint directory")...)
			problems = append(problems, dirProblems(dirs)...)
			if len(problems) > 0 {
				return usageError(problems...)
			}
			return a.deleteSnapshot(c.Context(), args[0], dirs, c.Flags().Changed("dir"), dryRun)
		},
	}
	f := c.Flags()
	f.BoolVar(&dryRun, "dry-run", false, "check and print what would be deleted and the bytes freed, but delete nothing")
	f.StringArrayVar(&dirs, "dir", nil, "checkpoint `directory` whose jobs' restore records to check as well (repeatable; default: the default checkpoint directory, if it exists)")
	a.deferErrors(f)
	return c
}

// deletedFile is one object `weir checkpoints delete` deletes.
type deletedFile struct {
	path string
	size int64
}

// deleteSnapshot deletes the checkpoint or savepoint at loc, or with dryRun
// says what it would delete.
func (a *app) deleteSnapshot(ctx context.Context, loc string, dirs []string, explicitDirs, dryRun bool) error {
	t, err := resolveTarget(ctx, loc, false)
	if err != nil {
		return err
	}
	defer t.s.Close()
	if t.savepoint != nil {
		return a.deleteSavepoint(ctx, t, dirs, explicitDirs, dryRun)
	}
	return a.deleteCheckpoint(ctx, t, dirs, explicitDirs, dryRun)
}

// checkHolders refuses if a restore record holds the snapshot t.
func checkHolders(ctx context.Context, t *snapshotTarget, dirs []string, explicitDirs bool, kind string) (*restoreScan, error) {
	scan, err := scanRestores(ctx, t.s, t.rootShown, dirs, explicitDirs)
	if err != nil {
		return nil, err
	}
	hs := scan.holders(t.s.Location(), t.snapshot)
	if len(hs) == 0 {
		return scan, nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "refusing to delete %s %s: a run that restored from it still holds it; nothing was deleted:", kind, t.shown)
	for _, h := range hs {
		fmt.Fprintf(&b, "\n- %s", h.describe())
	}
	return nil, refused(errors.New(b.String()))
}

// deleteCheckpoint deletes checkpoint t under the job's lock.
func (a *app) deleteCheckpoint(ctx context.Context, t *snapshotTarget, dirs []string, explicitDirs, dryRun bool) error {
	id := t.checkpoint.ID
	running := func(h storage.Holder) error {
		who := "another process (its identity could not be read)"
		if h.PID != 0 || h.Host != "" {
			who = h.String()
		}
		return refused(fmt.Errorf("refusing to delete checkpoint %s: job %s is running (%s holds its checkpoint directory); "+
			"a running job's checkpoints are its own, deleted as execution.checkpointing.num-retained says; stop the job first; nothing was deleted",
			t.shown, t.job, who))
	}
	// The job's lock: a running job refuses, and no run starts while the
	// files go. A dry run only looks.
	store := t.s
	if dryRun {
		h, held, err := t.s.JobLockHolder(ctx, t.job)
		if err != nil {
			return failure(err)
		}
		if held {
			return running(h)
		}
	} else {
		l, err := t.s.LockJob(ctx, t.job, storage.LockOptions{Dir: t.rootShown})
		var locked *storage.JobLockedError
		if errors.As(err, &locked) {
			return running(locked.Holder)
		}
		if err != nil {
			return failure(fmt.Errorf("delete checkpoint %s: %w", t.shown, err))
		}
		defer l.Release(context.WithoutCancel(ctx))
		store = l.Storage()
	}
	scan, err := checkHolders(ctx, t, dirs, explicitDirs, "checkpoint")
	if err != nil {
		return err
	}

	jc, err := loadJobCheckpoints(ctx, store, t.job)
	if err != nil {
		return failure(fmt.Errorf("delete checkpoint %s: %w", t.shown, err))
	}
	if jc.metas[id] == nil {
		return failure(fmt.Errorf("checkpoint %s changed while it was being deleted: its _metadata is gone or no longer reads; nothing was deleted", t.shown))
	}
	d := jc.plan(id, jc.refs())
	if len(d.crossRefs) > 0 {
		var refs []string
		for _, p := range slices.Sorted(maps.Keys(d.crossRefs)) {
			refs = append(refs, fmt.Sprintf("%s (%s)", p, idList(d.crossRefs[p])))
		}
		return refused(fmt.Errorf("refusing to delete checkpoint %s: other checkpoints of the job reference files in its directory, and would be broken: %s; delete those checkpoints first; nothing was deleted",
			t.shown, strings.Join(refs, ", ")))
	}

	objs, err := store.ListCheckpointFiles(ctx, t.job, id)
	if err != nil {
		return failure(fmt.Errorf("delete checkpoint %s: %w", t.shown, err))
	}
	existing, err := store.ListShared(ctx, t.job)
	if err != nil {
		return failure(fmt.Errorf("delete checkpoint %s: %w", t.shown, err))
	}
	sizes := map[string]int64{}
	for _, o := range existing {
		sizes[o.Key] = o.Size
	}
	var files []deletedFile
	for _, o := range objs {
		files = append(files, deletedFile{o.Key, o.Size})
	}
	var shared, missing []string
	for _, f := range d.files {
		if !strings.HasPrefix(f.Path, storage.SharedDir+"/") {
			continue
		}
		if size, ok := sizes[f.Path]; ok {
			shared = append(shared, f.Path)
			files = append(files, deletedFile{f.Path, size})
		} else {
			missing = append(missing, f.Path)
		}
	}
	slices.SortFunc(files, func(x, y deletedFile) int { return cmp.Compare(x.path, y.path) })

	a.warnNewest(jc, t)
	if !dryRun {
		// _metadata first (DeleteCheckpoint): from then on the checkpoint
		// is incomplete, never complete with missing files.
		if err := store.DeleteCheckpoint(ctx, t.job, id); err != nil {
			return failure(fmt.Errorf("delete checkpoint %s: %w; the job's next run removes what is left once its _metadata is gone", t.shown, err))
		}
		for _, p := range shared {
			if err := store.DeleteFile(ctx, t.job, p); err != nil {
				return failure(fmt.Errorf("delete checkpoint %s: the checkpoint is deleted, but not every shared file only it referenced: %w; the job's next run deletes the shared files no checkpoint references", t.shown, err))
			}
		}
	}

	what := fmt.Sprintf("checkpoint %d of job %s (%s)", id, t.job, t.shown)
	if err := a.printDeleted(what, files, dryRun); err != nil {
		return err
	}
	for _, p := range slices.Sorted(maps.Keys(d.kept)) {
		fmt.Fprintf(a.stdout, "kept %s: %s references it too\n", p, idList(d.kept[p]))
	}
	if len(d.withheld) > 0 {
		fmt.Fprintf(a.stdout, "kept %d shared %s only this checkpoint references: %s; the job's own clean-up deletes them once no checkpoint references them\n",
			len(d.withheld), plural(len(d.withheld), "file", "files"), d.keptUnknown)
	}
	for _, p := range missing {
		fmt.Fprintf(a.stdout, "already missing: %s\n", p)
	}
	fmt.Fprintf(a.stdout, "restore records checked under %s\n", strings.Join(scan.dirs, ", "))
	if dryRun {
		fmt.Fprintln(a.stdout, "dry run: nothing was deleted")
	}
	return nil
}

// warnNewest warns, on standard error, when checkpoint t is the newest
// complete checkpoint of its job: --from latest will restore another one.
func (a *app) warnNewest(jc *jobCheckpoints, t *snapshotTarget) {
	id := t.checkpoint.ID
	if slices.ContainsFunc(jc.ids, func(o int64) bool { return o > id }) {
		return
	}
	if prev := jc.newestOther(id); prev > 0 {
		fmt.Fprintf(a.stderr, "warning: checkpoint %d is the newest complete checkpoint of job %s: once it is deleted, 'weir run --from latest' restores checkpoint %d (the newest other readable one)\n", id, t.job, prev)
		return
	}
	fmt.Fprintf(a.stderr, "warning: checkpoint %d is the only readable checkpoint of job %s: once it is deleted, 'weir run --from latest' finds no checkpoint to restore\n", id, t.job)
}

// deleteSavepoint deletes the savepoint directory t whole.
func (a *app) deleteSavepoint(ctx context.Context, t *snapshotTarget, dirs []string, explicitDirs, dryRun bool) error {
	scan, err := checkHolders(ctx, t, dirs, explicitDirs, "savepoint")
	if err != nil {
		return err
	}
	objs, err := t.s.ListSavepointFiles(ctx, t.snapshot)
	if err != nil {
		return failure(fmt.Errorf("delete savepoint %s: %w", t.shown, err))
	}
	files := make([]deletedFile, len(objs))
	for i, o := range objs {
		files[i] = deletedFile{o.Key, o.Size}
	}
	if !dryRun {
		if err := t.s.DeleteSavepoint(ctx, t.snapshot); err != nil {
			return failure(fmt.Errorf("delete savepoint %s: %w; run the command again to delete the rest", t.shown, err))
		}
	}
	what := fmt.Sprintf("savepoint %s of job %s (checkpoint %d, %s)", t.snapshot, t.savepoint.Job, t.savepoint.ID, t.shown)
	if err := a.printDeleted(what, files, dryRun); err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "restore records checked under %s\n", strings.Join(scan.dirs, ", "))
	if dryRun {
		fmt.Fprintln(a.stdout, "dry run: nothing was deleted")
	}
	return nil
}

// printDeleted prints the summary line and the table of files.
func (a *app) printDeleted(what string, files []deletedFile, dryRun bool) error {
	var total int64
	for _, f := range files {
		total += f.size
	}
	noun := plural(len(files), "file", "files")
	verb := "deleted"
	if dryRun {
		verb = "would delete"
	}
	fmt.Fprintf(a.stdout, "%s %s: %d %s, %s\n", verb, what, len(files), noun, runner.FormatBytes(total))
	tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PATH\tSIZE")
	for _, f := range files {
		fmt.Fprintf(tw, "%s\t%s\n", f.path, runner.FormatBytes(f.size))
	}
	if err := tw.Flush(); err != nil {
		return failure(fmt.Errorf("write result: %w", err))
	}
	return nil
}

// plural returns one for n == 1, else more.
func plural(n int, one, more string) string {
	if n == 1 {
		return one
	}
	return more
}
