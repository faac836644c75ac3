package weir_test

import (
	"context"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/internal/checkpoint/metadata"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/sink"
)

// syncCheckedFiles is sink.Files that counts every transaction committed
// before its writer's SyncPreCommitted returned nil for it.
type syncCheckedFiles struct {
	weir.TwoPhaseCommitSink[string]
	synced   sync.Map // transaction name -> struct{}
	commits  atomic.Int64
	unsynced atomic.Int64
}

func (f *syncCheckedFiles) CreateWriter(ctx weir.SinkContext) (weir.SinkWriter[string], error) {
	w, err := f.TwoPhaseCommitSink.CreateWriter(ctx)
	if err != nil {
		return nil, err
	}
	return &syncCheckedWriter{SinkWriter: w, f: f}, nil
}

func (f *syncCheckedFiles) Commit(ctx weir.SinkContext, txn []byte) error {
	f.commits.Add(1)
	if _, ok := f.synced.Load(string(txn)); !ok {
		f.unsynced.Add(1)
	}
	return f.TwoPhaseCommitSink.Commit(ctx, txn)
}

type syncCheckedWriter struct {
	weir.SinkWriter[string]
	f *syncCheckedFiles
}

func (w *syncCheckedWriter) PreCommit(id int64) ([]byte, error) {
	return w.SinkWriter.(weir.PreCommitter).PreCommit(id)
}

func (w *syncCheckedWriter) SyncPreCommitted(txn []byte) error {
	if err := w.SinkWriter.(weir.PreCommitSyncer).SyncPreCommitted(txn); err != nil {
		return err
	}
	w.f.synced.Store(string(txn), struct{}{})
	return nil
}

// listWatch is a checkpoint storage bucket that calls onList after each
// listing, which is how DeleteCheckpoint finds the files to delete.
type listWatch struct {
	storage.Bucket
	onList func(prefix string)
}

func (b *listWatch) List(ctx context.Context, prefix, delimiter string) ([]storage.ObjectInfo, error) {
	objs, err := b.Bucket.List(ctx, prefix, delimiter)
	if delimiter == "" {
		b.onList(prefix)
	}
	return objs, err
}

func (b *listWatch) RemoveEmptyDir(prefix string) {
	if r, ok := b.Bucket.(interface{ RemoveEmptyDir(string) }); ok {
		r.RemoveEmptyDir(prefix)
	}
}

// With overlapping checkpoints (max-concurrent-checkpoints 3, 10 ms
// interval), the asynchronous phases of two checkpoints are held until a
// later checkpoint completed and subsumed them and the runner listed their
// directories to delete them. The later checkpoint's completion commits the
// files pre-committed at the held ones before their own phases ran: every
// file must still be fsynced before its commit, and the output be exactly
// once. The held phases then run late, after their checkpoints' directories
// were cleaned up: they must leave no files behind.
func TestSinkCommitsOnlySyncedFilesWithOverlappingCheckpoints(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	const n, keys = 60_000, 97
	dir := t.TempDir()
	first := 2 + rng.Int64N(3)
	held := map[int64]chan struct{}{first: make(chan struct{}), first + 3 + rng.Int64N(3): make(chan struct{})}
	t.Logf("holding the asynchronous phases of checkpoints %v", slices.Sorted(maps.Keys(held)))
	var (
		mu                 sync.Mutex
		listed             = map[int64]bool{}
		maxDone, overtaken atomic.Int64
	)
	inner, err := storage.OpenLocation(context.Background(), filepath.Join(dir, "chk"))
	if err != nil {
		t.Fatal(err)
	}
	store := storage.OpenBucket(&listWatch{Bucket: inner, onList: func(prefix string) {
		mu.Lock()
		defer mu.Unlock()
		for id, ch := range held {
			if !listed[id] && strings.HasSuffix(prefix, "/"+storage.CheckpointDir(id)+"/") {
				listed[id] = true
				close(ch)
			}
		}
	}})
	defer store.Close()
	opts := weir.Options{Parallelism: 2, Logger: quietLogger(t),
		Checkpoint: weir.CheckpointOptions{Interval: 10 * time.Millisecond, MaxConcurrent: 3, Dir: filepath.Join(dir, "chk")}}
	testHooks := (weir.TestHooks{
		Storage: store,
		Upload: func(_, _ int, id int64) error {
			ch, ok := held[id]
			if !ok {
				return nil
			}
			select {
			case <-ch:
				if maxDone.Load() > id {
					overtaken.Add(1)
				}
			case <-time.After(30 * time.Second):
				// Not an assertion: the count of overtaken phases is.
				t.Logf("checkpoint %d: not subsumed and cleaned up within 30s", id)
			}
			return nil
		},
		Completed: func(id int64, _ *metadata.Checkpoint) {
			for {
				m := maxDone.Load()
				if id <= m || maxDone.CompareAndSwap(m, id) {
					return
				}
			}
		},
	})
	out := &syncCheckedFiles{TwoPhaseCommitSink: sink.Files(filepath.Join(dir, "out"), func(s string) string { return s })}
	env := weir.NewEnvironment(opts)
	weir.SetTestHooks(env, testHooks)
	counterJobWith(env, n, keys, out, counterHooks{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := env.ExecuteResult(ctx, "counter")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d checkpoints completed, %d commits, %d held phases overtaken", len(res.Completed), out.commits.Load(), overtaken.Load())
	if overtaken.Load() == 0 {
		t.Fatal("no held asynchronous phase was overtaken by a later checkpoint: the test did not overlap checkpoints")
	}
	if u := out.unsynced.Load(); u != 0 {
		t.Errorf("%d of %d transactions committed before their files were fsynced", u, out.commits.Load())
	}
	checkCounterOutput(t, filepath.Join(dir, "out"), n, keys)
	// Checkpoint directories without _metadata must hold no files. (An
	// empty one may stay: a late acknowledgement's files are deleted one
	// by one, not with their directory.)
	chks, err := filepath.Glob(filepath.Join(dir, "chk", "*", "chk-*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range chks {
		if _, err := os.Stat(filepath.Join(c, "_metadata")); err == nil {
			continue
		}
		var files []string
		filepath.WalkDir(c, func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				files = append(files, strings.TrimPrefix(p, c+"/"))
			}
			return nil
		})
		if len(files) > 0 {
			t.Errorf("incomplete checkpoint directory %s holds %v", filepath.Base(c), files)
		} else {
			t.Logf("incomplete checkpoint directory %s is empty", filepath.Base(c))
		}
	}
}
