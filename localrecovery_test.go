package weir_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
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

// readCountingBucket counts the bytes read from a bucket, by key.
type readCountingBucket struct {
	storage.Bucket
	mu    sync.Mutex
	bytes map[string]int64
}

func (b *readCountingBucket) NewReader(ctx context.Context, key string) (io.ReadCloser, error) {
	rc, err := b.Bucket.NewReader(ctx, key)
	if err != nil {
		return nil, err
	}
	return &countingRC{ReadCloser: rc, b: b, key: key}, nil
}

// read returns the bytes read so far from keys containing part.
func (b *readCountingBucket) read(part string) (n int64, keys []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for k, v := range b.bytes {
		if strings.Contains(k, part) {
			n += v
			keys = append(keys, k)
		}
	}
	return n, keys
}

type countingRC struct {
	io.ReadCloser
	b   *readCountingBucket
	key string
}

func (c *countingRC) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	c.b.mu.Lock()
	if c.b.bytes == nil {
		c.b.bytes = map[string]int64{}
	}
	c.b.bytes[c.key] += int64(n)
	c.b.mu.Unlock()
	return n, err
}

// hookHandler is a slog.Handler that calls onRestore, before passing the
// record on, for the runner's "Restoring job ..." line, which it logs
// before it deploys the tasks of a restart.
type hookHandler struct {
	slog.Handler
	onRestore func()
}

func (h hookHandler) Handle(ctx context.Context, r slog.Record) error {
	if h.onRestore != nil && strings.HasPrefix(r.Message, "Restoring job ") {
		h.onRestore()
	}
	return h.Handler.Handle(ctx, r)
}

func (h hookHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return hookHandler{h.Handler.WithAttrs(as), h.onRestore}
}

func (h hookHandler) WithGroup(name string) slog.Handler {
	return hookHandler{h.Handler.WithGroup(name), h.onRestore}
}

// localRecoveryRun runs the counter job (n records, 97 keys) at
// parallelism 2 with local recovery on, checkpoints every 10ms into a
// read-counting store over dir/chk, and a failure of the count function's
// subtask 0 once 3 checkpoints completed: the job restarts in process
// from its latest checkpoint. beforeRestart runs as the restart begins.
func localRecoveryRun(t *testing.T, dir, backend string, incremental bool, beforeRestart func()) (*readCountingBucket, *lockedBuffer, *metadata.Checkpoint) {
	t.Helper()
	const n = 60_000
	inner, err := storage.OpenLocation(context.Background(), filepath.Join(dir, "chk"))
	if err != nil {
		t.Fatal(err)
	}
	counting := &readCountingBucket{Bucket: inner}
	store := storage.OpenBucket(counting)
	t.Cleanup(func() { store.Close() })
	logs := &lockedBuffer{}
	opts := weir.Options{Parallelism: 2, StateBackend: backend, StateDir: filepath.Join(dir, "state"),
		Logger: slog.New(hookHandler{slog.NewTextHandler(logs, nil), beforeRestart}),
		Checkpoint: weir.CheckpointOptions{Interval: 10 * time.Millisecond, Dir: filepath.Join(dir, "chk"), Incremental: incremental,
			LocalBackup: true, RecoverFromLocal: true},
		Restart: weir.RestartOptions{Type: "fixed-delay", FixedDelayAttempts: 3, FixedDelay: time.Millisecond}}
	env := weir.NewEnvironment(opts)
	var completed atomic.Int64
	weir.SetTestHooks(env, weir.TestHooks{Storage: store, Completed: func(int64, *metadata.Checkpoint) { completed.Add(1) }})
	var failed atomic.Bool
	var seen atomic.Int64
	counterJobWith(env, n, 97, sink.Files(filepath.Join(dir, "out"), func(s string) string { return s }), counterHooks{
		// Past half of the input, 1ms per record until the failure: the
		// input does not end before it on a loaded machine.
		throttle: func(int64) bool { return seen.Add(1) > n/2 && !failed.Load() },
		fail: func(subtask int, _ int64) bool {
			return subtask == 0 && completed.Load() >= 3 && failed.CompareAndSwap(false, true)
		},
	})
	res, err := env.ExecuteResult(context.Background(), "counter")
	if err != nil {
		t.Fatalf("run: %v\n%s", err, logs)
	}
	if !failed.Load() || res.Restarts != 1 {
		t.Fatalf("failed %v, %d restarts: want one injected failure and one restart\n%s", failed.Load(), res.Restarts, logs)
	}
	checkCounterOutput(t, filepath.Join(dir, "out"), n, 97)
	return counting, logs, res.Latest
}

// restoredFrom returns the checkpoint the runner logged it restored last.
func restoredFrom(t *testing.T, logs *lockedBuffer) int64 {
	t.Helper()
	m := regexp.MustCompile(`Restoring job counter from checkpoint (\d+)\.`).FindAllStringSubmatch(logs.String(), -1)
	if len(m) == 0 {
		t.Fatalf("no restore logged\n%s", logs)
	}
	id, _ := strconv.ParseInt(m[len(m)-1][1], 10, 64)
	return id
}

// localCopies lists the chk-<n> directories of the local copies under the
// state directory.
func localCopies(t *testing.T, dir string) []string {
	t.Helper()
	chks, err := filepath.Glob(filepath.Join(dir, "state", "local-recovery", "*", "chk-*"))
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range chks {
		chks[i] = filepath.Base(c)
	}
	return chks
}

// A task failure restarts the job in process from its latest checkpoint:
// with local recovery every subtask restores from its local copy, and the
// restore reads no byte of the count operator's keyed state from the store;
// the output is exactly once. The copies of only the latest checkpoint are
// left at the end.
func TestLocalRecoveryRestoresFromLocalCopy(t *testing.T) {
	for _, mode := range []string{"pebble-incremental", weir.BackendPebble, weir.BackendHashMap} {
		backend, incremental := strings.CutSuffix(mode, "-incremental")
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			counting, logs, latest := localRecoveryRun(t, dir, backend, incremental, nil)
			restored := restoredFrom(t, logs)
			if n, keys := counting.read("op-count-"); n != 0 {
				t.Fatalf("the restore read %d bytes of keyed state from the store (%v), want 0\n%s", n, keys, logs)
			}
			for sub := range 2 {
				if want := fmt.Sprintf("subtask %d from its local copy of checkpoint %d.", sub, restored); !strings.Contains(logs.String(), want) {
					t.Errorf("no log line %q\n%s", want, logs)
				}
			}
			for _, l := range strings.Split(logs.String(), "\n") {
				if strings.Contains(l, "level=WARN") && strings.Contains(l, "local copy") {
					t.Errorf("warning about a local copy: %s", l)
				}
			}
			if got, want := localCopies(t, dir), []string{fmt.Sprintf("chk-%d", latest.ID)}; !slices.Equal(got, want) {
				t.Errorf("local copies %v at the end, want %v (the latest checkpoint's only)", got, want)
			}
		})
	}
}

// A local copy deleted before the restart: every subtask falls back to the
// store with a warning that names it and says why, and the output is
// still exactly once.
func TestLocalRecoveryFallsBackWhenCopyMissing(t *testing.T) {
	for _, mode := range []string{"pebble-incremental", weir.BackendPebble} {
		backend, incremental := strings.CutSuffix(mode, "-incremental")
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			var removed atomic.Bool
			counting, logs, _ := localRecoveryRun(t, dir, backend, incremental, func() {
				if err := os.RemoveAll(filepath.Join(dir, "state", "local-recovery")); err != nil {
					t.Error(err)
				}
				removed.Store(true)
			})
			if !removed.Load() {
				t.Fatal("the copies were never deleted: no restart logged")
			}
			restored := restoredFrom(t, logs)
			if n, _ := counting.read("op-count-"); n == 0 {
				t.Fatalf("the restore read no keyed state from the store, with the local copies deleted\n%s", logs)
			}
			for sub := range 2 {
				want := fmt.Sprintf("subtask %d from checkpoint storage: its local copy of checkpoint %d is missing.", sub, restored)
				if !strings.Contains(logs.String(), want) {
					t.Errorf("no warning %q\n%s", want, logs)
				}
			}
		})
	}
}

// A job stopped mid-way and resumed at another parallelism: the local
// copies of the first run cover other key-group ranges, so every subtask
// restores from the store, with a warning saying so, and the output is
// exactly once.
func TestLocalRecoveryRescaleFallsBack(t *testing.T) {
	dir := t.TempDir()
	logs := &lockedBuffer{}
	local := func(o *weir.Options) {
		o.Checkpoint.LocalBackup, o.Checkpoint.RecoverFromLocal = true, true
		o.Checkpoint.Incremental = true
		o.Logger = newTextLogger(logs)
	}
	if _, err := restoreRun(t, dir, 2, weir.BackendPebble, "", 3, local); !errors.Is(err, context.Canceled) {
		t.Fatalf("first run: %v, want it canceled after 3 checkpoints\n%s", err, logs)
	}
	if len(localCopies(t, dir)) != 1 {
		t.Fatalf("local copies %v after the first run, want the latest checkpoint's", localCopies(t, dir))
	}
	if _, err := restoreRun(t, dir, 3, weir.BackendPebble, weir.RestoreLatest, 0, local); err != nil {
		t.Fatalf("resumed run: %v\n%s", err, logs)
	}
	checkCounterOutput(t, filepath.Join(dir, "out"), 150_000, 97)
	out, id := logs.String(), restoredFrom(t, logs)
	for _, want := range []string{
		fmt.Sprintf("subtask 0 from checkpoint storage: its local copy of checkpoint %d holds key groups [0, 63] and the subtask now owns [0, 42] (the job was rescaled).", id),
		fmt.Sprintf("subtask 1 from checkpoint storage: its local copy of checkpoint %d holds key groups [64, 127] and the subtask now owns [43, 85] (the job was rescaled).", id),
		fmt.Sprintf("subtask 2 from checkpoint storage: its local copy of checkpoint %d is missing.", id),
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no log line %q\n%s", want, out)
		}
	}
	if strings.Contains(out, "from its local copy") {
		t.Errorf("a subtask restored from a local copy of another key-group range\n%s", out)
	}
}
