package weir_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/internal/checkpoint/metadata"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/sink"
)

// Helpers of the savepoint and claim-mode tests (savepoint_*_test.go).

// liveJob is a job Execute runs in the background.
type liveJob struct {
	t         *testing.T
	name      string
	env       *weir.Environment
	ctx       context.Context
	cancel    context.CancelFunc
	done      chan error
	completed chan int64 // ids of completed checkpoints, in order
	ended     bool
	err       error
}

// startJob runs the job build declares with opts under name in the
// background; the job's completed checkpoints are reported on
// j.completed (opts.OnCheckpointComplete is kept).
func startJob(t *testing.T, opts weir.Options, name string, build func(*weir.Environment)) *liveJob {
	t.Helper()
	j := &liveJob{t: t, name: name, done: make(chan error, 1), completed: make(chan int64, 1<<12)}
	user := opts.OnCheckpointComplete
	opts.OnCheckpointComplete = func(c weir.CompletedCheckpoint) {
		if user != nil {
			user(c)
		}
		select {
		case j.completed <- c.ID:
		default:
			panic("too many checkpoints unread")
		}
	}
	env := weir.NewEnvironment(opts)
	build(env)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	j.env, j.ctx, j.cancel = env, ctx, cancel
	go func() { j.done <- env.Execute(ctx, name) }()
	t.Cleanup(func() {
		if !j.ended {
			cancel()
			<-j.done
		}
	})
	return j
}

// nextCheckpoint waits for the job's next completed checkpoint and returns
// its id; the job ending first fails the test.
func (j *liveJob) nextCheckpoint() int64 {
	j.t.Helper()
	select {
	case id := <-j.completed:
		return id
	case err := <-j.done:
		j.ended, j.err = true, err
		j.t.Fatalf("job %s ended (%v) before its next checkpoint", j.name, err)
	case <-time.After(time.Minute):
		j.t.Fatalf("job %s completed no checkpoint within a minute", j.name)
	}
	return 0
}

// await polls cond until it holds, failing the test if the job ends first
// or after a minute.
func (j *liveJob) await(what string, cond func() bool) {
	j.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		select {
		case err := <-j.done:
			j.ended, j.err = true, err
			j.t.Fatalf("job %s ended (%v) while waiting for %s", j.name, err, what)
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			j.t.Fatalf("waited a minute for %s", what)
		}
	}
}

// stop cancels the job and waits for its end, which must be the
// cancellation's.
func (j *liveJob) stop() {
	j.t.Helper()
	j.cancel()
	if err := j.wait(); err != nil && !errors.Is(err, context.Canceled) {
		j.t.Fatalf("job %s: %v", j.name, err)
	}
}

// savepoint takes the savepoint o of the job and returns its location;
// with stop, it is a stop-with-savepoint and the job must then finish
// cleanly.
func (j *liveJob) savepoint(o weir.SavepointOptions, stop bool) string {
	j.t.Helper()
	take := j.env.TriggerSavepoint
	if stop {
		take = j.env.StopWithSavepoint
	}
	path, err := take(j.ctx, o)
	if err != nil {
		j.t.Fatalf("savepoint of job %s: %v", j.name, err)
	}
	if stop {
		if err := j.wait(); err != nil {
			j.t.Fatalf("job %s stopped with a savepoint: %v, want nil", j.name, err)
		}
	}
	return path
}

// wait waits for the end of the job and returns Execute's error.
func (j *liveJob) wait() error {
	j.t.Helper()
	if !j.ended {
		j.err, j.ended = <-j.done, true
	}
	return j.err
}

// throttled is the throttle of runs that last until they are canceled:
// a millisecond every 16 records, some 16 records per millisecond and
// source subtask, so that a source batch (2048 records), and a checkpoint
// the source waits for, takes some 130 ms.
func throttled(i int64) bool { return i%16 == 0 }

// counter returns a build function of the counter job writing to out;
// slow, it is throttled (throttled): 100,000 records take some 3 seconds
// at parallelism 2.
func counter(n, keys int64, out string, slow bool) func(*weir.Environment) {
	return func(env *weir.Environment) {
		var h counterHooks
		if slow {
			h.throttle = throttled
		}
		counterJobWith(env, n, keys, sink.Files(out, func(s string) string { return s }), h)
	}
}

// runCounter runs the counter job to its end and returns Execute's error.
func runCounter(t *testing.T, opts weir.Options, name string, n, keys int64, out string) error {
	t.Helper()
	return startJob(t, opts, name, counter(n, keys, out, false)).wait()
}

func exists(t *testing.T, path string) bool {
	t.Helper()
	_, err := os.Stat(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	return err == nil
}

// fileDigest identifies the content of a file and when it last changed.
type fileDigest struct {
	size    int64
	modTime int64 // UnixNano
	sum     [sha256.Size]byte
}

// digests returns every regular file under dir (by its path relative to
// dir) with its digest, except job lock files (their lease is renewed).
func digests(t *testing.T, dir string) map[string]fileDigest {
	t.Helper()
	out := map[string]fileDigest{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() == storage.LockFileName {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		dg, err := digest(p)
		out[filepath.ToSlash(rel)] = dg
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func digest(path string) (fileDigest, error) {
	f, err := os.Open(path)
	if err != nil {
		return fileDigest{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fileDigest{}, err
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return fileDigest{}, err
	}
	dg := fileDigest{size: fi.Size(), modTime: fi.ModTime().UnixNano()}
	h.Sum(dg.sum[:0])
	return dg, nil
}

// checkUnchanged fails the test unless every file of before (digests of
// dir) is still there with the same size, modification time and content.
// Other files may come and go meanwhile.
func checkUnchanged(t *testing.T, dir string, before map[string]fileDigest, when string) {
	t.Helper()
	var problems []string
	for p, d := range before {
		switch n, err := digest(filepath.Join(dir, filepath.FromSlash(p))); {
		case errors.Is(err, fs.ErrNotExist):
			problems = append(problems, p+" is gone")
		case err != nil:
			t.Fatal(err)
		case n != d:
			problems = append(problems, fmt.Sprintf("%s changed (size %d -> %d, mtime %v -> %v)", p, d.size, n.size, d.modTime, n.modTime))
		}
	}
	if len(problems) > 0 {
		slices.Sort(problems)
		t.Fatalf("%s, %s: %d of its %d files changed: %s", when, dir, len(problems), len(before), strings.Join(problems, "; "))
	}
}

// copyDir copies the regular files under src to dst.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func fileURL(p string) string { return "file://" + filepath.ToSlash(p) }

// filePaths returns the paths of cp's data files, relative to jobDir's
// parent (the storage root), so that files of different job directories
// differ.
func filePaths(cp *metadata.Checkpoint, job string) map[string]bool {
	m := map[string]bool{}
	for _, f := range cp.Files() {
		m[job+"/"+f.Path] = true
	}
	return m
}

// latestCheckpoint returns the newest complete checkpoint of jobDir.
func latestCheckpoint(t *testing.T, jobDir string) int64 {
	t.Helper()
	ids := completeCheckpoints(t, jobDir)
	if len(ids) == 0 {
		t.Fatalf("%s has no complete checkpoint", jobDir)
	}
	return ids[len(ids)-1]
}

// verifyCheckpoint checks that every data file checkpoint id of jobDir
// references is there, of its recorded size and checksum.
func verifyCheckpoint(t *testing.T, jobDir string, id int64) {
	t.Helper()
	ctx := context.Background()
	s, err := storage.Open(ctx, filepath.Dir(jobDir))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cp := readCheckpoint(t, jobDir, id)
	if err := s.VerifyFiles(ctx, filepath.Base(jobDir), cp.Files()); err != nil {
		t.Fatalf("checkpoint %d of %s: %v", id, jobDir, err)
	}
}
