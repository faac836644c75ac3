package sink

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/weirstream/weir"
)

// Files writes format(v) for every record v as a line into part files under
// dir, exactly once: a file becomes visible only when a checkpoint that
// covers its records completes (or, without checkpointing, at the end of
// the input). It is a weir.TwoPhaseCommitSink.
//
// Files in dir, for subtask s of a run with id r (SinkContext.RunID) and
// the n-th file of that run:
//
//	.part-<s>-<r>-<n>.inprogress   being written (hidden)
//	.part-<s>-<r>-<n>.pending      pre-committed at a barrier (hidden)
//	part-<s>-<r>-<n>               committed: complete and final
//
// Readers of dir should ignore names starting with '.'. Every checkpoint
// rolls the open file, so a file holds the records of one checkpoint
// interval of one subtask. A pending file is renamed to its final name when
// its checkpoint completes; a restored run commits the pending files of the
// checkpoint it restores and deletes every other hidden file earlier runs
// left behind (their records are replayed). Files are fsynced before they
// are renamed, and the directory after.
func Files[T any](dir string, format func(T) string) weir.TwoPhaseCommitSink[T] {
	return &files[T]{dir: dir, format: format}
}

type files[T any] struct {
	dir    string
	format func(T) string
}

func (f *files[T]) Name() string { return "Files(" + f.dir + ")" }

// CreateWriter implements weir.Sink: it deletes the hidden files of earlier
// runs that this subtask owns (their subtask index modulo the parallelism is
// ctx.Subtask).
func (f *files[T]) CreateWriter(ctx weir.SinkContext) (weir.SinkWriter[T], error) {
	if err := os.MkdirAll(f.dir, 0o755); err != nil {
		return nil, fmt.Errorf("file sink: %w", err)
	}
	entries, err := os.ReadDir(f.dir)
	if err != nil {
		return nil, fmt.Errorf("file sink: %w", err)
	}
	removed := 0
	for _, e := range entries {
		sub, run, ok := parseHidden(e.Name())
		if !ok || run == ctx.RunID || sub%ctx.Parallelism != ctx.Subtask {
			continue
		}
		if err := os.Remove(filepath.Join(f.dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("file sink: discard leftover %s: %w", e.Name(), err)
		}
		removed++
	}
	if removed > 0 {
		if ctx.Logger != nil {
			ctx.Logger.Info("file sink discarded uncommitted files of an earlier run", "dir", f.dir, "files", removed)
		}
		if err := syncDir(f.dir); err != nil {
			return nil, fmt.Errorf("file sink: %w", err)
		}
	}
	return &filesWriter[T]{f: f, prefix: fmt.Sprintf("part-%d-%s-", ctx.Subtask, ctx.RunID)}, nil
}

// parseHidden reads ".part-<s>-<r>-<n>.inprogress" and ".pending" names.
func parseHidden(name string) (sub int, run string, ok bool) {
	rest, found := strings.CutPrefix(name, ".part-")
	if !found {
		return 0, "", false
	}
	if r, found := strings.CutSuffix(rest, ".inprogress"); found {
		rest = r
	} else if r, found := strings.CutSuffix(rest, ".pending"); found {
		rest = r
	} else {
		return 0, "", false
	}
	parts := strings.Split(rest, "-")
	if len(parts) != 3 {
		return 0, "", false
	}
	s, err := strconv.Atoi(parts[0])
	if err != nil || s < 0 {
		return 0, "", false
	}
	return s, parts[1], true
}

// Commit implements weir.TwoPhaseCommitSink: txn is the final name; the
// pending file is renamed to it. A transaction already committed (the
// pending file gone, the final file present) is fine.
func (f *files[T]) Commit(_ weir.SinkContext, txn []byte) error {
	name := string(txn)
	if name == "" || strings.ContainsAny(name, `/\`) || strings.HasPrefix(name, ".") {
		return fmt.Errorf("file sink: invalid transaction %q", name)
	}
	final := filepath.Join(f.dir, name)
	err := os.Rename(filepath.Join(f.dir, "."+name+".pending"), final)
	if errors.Is(err, fs.ErrNotExist) {
		if _, serr := os.Stat(final); serr == nil {
			return nil
		}
		return fmt.Errorf("file sink: pending file .%s.pending of a completed checkpoint is missing and was never committed: its records are lost", name)
	}
	if err != nil {
		return fmt.Errorf("file sink: commit %s: %w", name, err)
	}
	return syncDir(f.dir)
}

type filesWriter[T any] struct {
	f      *files[T]
	prefix string
	seq    int
	file   *os.File
	bw     *bufio.Writer
}

func (w *filesWriter[T]) name() string { return w.prefix + strconv.Itoa(w.seq) }

func (w *filesWriter[T]) Write(v T) error {
	if w.file == nil {
		f, err := os.OpenFile(filepath.Join(w.f.dir, "."+w.name()+".inprogress"), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err != nil {
			return fmt.Errorf("file sink: %w", err)
		}
		w.file = f
		if w.bw == nil {
			w.bw = bufio.NewWriterSize(f, 64<<10)
		} else {
			w.bw.Reset(f)
		}
	}
	w.bw.WriteString(w.f.format(v))
	return w.bw.WriteByte('\n')
}

// Flush writes buffered lines to the in-progress file; they stay invisible
// until committed.
func (w *filesWriter[T]) Flush() error {
	if w.file == nil {
		return nil
	}
	return w.bw.Flush()
}

// PreCommit implements weir.PreCommitter: flush and close the open file and
// rename it to pending. SyncPreCommitted makes it durable off the task
// goroutine.
func (w *filesWriter[T]) PreCommit(int64) ([]byte, error) {
	if w.file == nil {
		return nil, nil
	}
	name := w.name()
	f := w.file
	w.file = nil
	w.seq++
	if err := w.bw.Flush(); err != nil {
		f.Close()
		return nil, fmt.Errorf("file sink: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("file sink: %w", err)
	}
	if err := os.Rename(filepath.Join(w.f.dir, "."+name+".inprogress"), filepath.Join(w.f.dir, "."+name+".pending")); err != nil {
		return nil, fmt.Errorf("file sink: %w", err)
	}
	return []byte(name), nil
}

// SyncPreCommitted implements weir.PreCommitSyncer: fsync the pending file
// and the directory that names it.
func (w *filesWriter[T]) SyncPreCommitted(txn []byte) error {
	f, err := os.Open(filepath.Join(w.f.dir, "."+string(txn)+".pending"))
	if err != nil {
		return fmt.Errorf("file sink: %w", err)
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = syncDir(w.f.dir)
	}
	if err != nil {
		return fmt.Errorf("file sink: sync %s: %w", txn, err)
	}
	return nil
}

// Close discards the open in-progress file: its records were not
// pre-committed, so a restore replays them.
func (w *filesWriter[T]) Close() error {
	if w.file == nil {
		return nil
	}
	path := w.file.Name()
	w.file.Close()
	w.file = nil
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("file sink: %w", err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
