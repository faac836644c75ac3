package weir_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/internal/checkpoint/metadata"
	"github.com/weirstream/weir/internal/jobs"
	"github.com/weirstream/weir/sink"
)

// restoreRun runs the counter job into dir at parallelism p on backend, with
// checkpoints every 10ms, resuming from restore; stopAfter > 0 cancels the
// run once that many checkpoints completed.
func restoreRun(t *testing.T, dir string, p int, backend, restore string, stopAfter int, extra func(*weir.Options)) (weir.Options, error) {
	t.Helper()
	opts := weir.Options{Parallelism: p, StateBackend: backend, StateDir: filepath.Join(dir, "state"), Logger: quietLogger(t),
		Checkpoint: weir.CheckpointOptions{Interval: 10 * time.Millisecond, Dir: filepath.Join(dir, "chk"), RestorePath: restore}}
	if extra != nil {
		extra(&opts)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var done atomic.Int64
	env := weir.NewEnvironment(opts)
	weir.SetTestHooks(env, weir.TestHooks{Completed: func(int64, *metadata.Checkpoint) {
		if stopAfter > 0 && done.Add(1) == int64(stopAfter) {
			cancel()
		}
	}})
	// A run that is to be canceled after stopAfter checkpoints must not
	// end its input first (as it could on a loaded machine): past half of
	// the input it goes at 1ms per record until then.
	var h counterHooks
	if stopAfter > 0 {
		var seen atomic.Int64
		h.throttle = func(int64) bool { return seen.Add(1) > 75_000 && done.Load() < int64(stopAfter) }
	}
	counterJobWith(env, 150_000, 97, sink.Files(filepath.Join(dir, "out"), func(s string) string { return s }), h)
	_, err := env.ExecuteResult(ctx, "counter")
	return opts, err
}

// A job stopped mid-way resumes from its latest checkpoint at another
// parallelism and on the other state backend (the snapshot format is
// backend independent, state is split by key group): the committed output
// is still exactly once.
func TestResumeRescaledOnOtherBackend(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		from, to   int
		fromB, toB string
	}{{2, 3, weir.BackendHashMap, weir.BackendPebble}, {4, 1, weir.BackendPebble, weir.BackendHashMap}} {
		t.Run(fmt.Sprintf("p%d-%s-to-p%d-%s", c.from, c.fromB, c.to, c.toB), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			if _, err := restoreRun(t, dir, c.from, c.fromB, "", 3, nil); !errors.Is(err, context.Canceled) {
				t.Fatalf("first run: %v, want it canceled after 3 checkpoints", err)
			}
			if _, err := restoreRun(t, dir, c.to, c.toB, weir.RestoreLatest, 0, nil); err != nil {
				t.Fatalf("resumed run: %v", err)
			}
			checkCounterOutput(t, filepath.Join(dir, "out"), 150_000, 97)
		})
	}
}

// --from latest skips a newest checkpoint whose _metadata is corrupt, with a
// warning naming it, and restores the one before.
func TestRestoreLatestSkipsCorruptMetadata(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	retain2 := func(o *weir.Options) { o.Checkpoint.NumRetained = 2 }
	if _, err := restoreRun(t, dir, 2, weir.BackendHashMap, "", 4, retain2); !errors.Is(err, context.Canceled) {
		t.Fatalf("first run: %v", err)
	}
	chks, _ := filepath.Glob(filepath.Join(dir, "chk", "counter", "chk-*", "_metadata"))
	if len(chks) != 2 {
		t.Fatalf("retained %v, want 2 checkpoints", chks)
	}
	id := func(path string) int {
		n, _ := strconv.Atoi(strings.TrimPrefix(filepath.Base(filepath.Dir(path)), "chk-"))
		return n
	}
	newest, older := chks[0], chks[1]
	if id(newest) < id(older) {
		newest, older = older, newest
	}
	data, err := os.ReadFile(newest)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0xff
	if err := os.WriteFile(newest, data, 0o644); err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuffer{}
	withLogs := func(o *weir.Options) {
		retain2(o)
		o.Logger = newTextLogger(logs)
	}
	// The output of the skipped checkpoint may have been committed, so it is
	// not checked here; only which checkpoint was restored.
	if _, err := restoreRun(t, dir, 2, weir.BackendHashMap, weir.RestoreLatest, 0, withLogs); err != nil {
		t.Fatalf("resumed run: %v\n%s", err, logs)
	}
	newID, oldID := strconv.Itoa(id(newest)), strconv.Itoa(id(older))
	if !strings.Contains(logs.String(), "Restoring job counter from checkpoint "+oldID+".") {
		t.Fatalf("did not restore checkpoint %s:\n%s", oldID, logs)
	}
	if !strings.Contains(logs.String(), "checkpoint="+newID) || !strings.Contains(logs.String(), "level=WARN") {
		t.Fatalf("no warning about the corrupt checkpoint %s:\n%s", newID, logs)
	}
}

// A named checkpoint that is corrupt is an error and nothing starts.
func TestRestoreNamedCorruptCheckpointFails(t *testing.T) {
	dir := t.TempDir()
	if _, err := restoreRun(t, dir, 1, weir.BackendHashMap, "", 2, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("first run: %v", err)
	}
	chks, _ := filepath.Glob(filepath.Join(dir, "chk", "counter", "chk-*", "_metadata"))
	if len(chks) != 1 {
		t.Fatalf("retained %v", chks)
	}
	if err := os.Truncate(chks[0], 10); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadDir(filepath.Join(dir, "out"))
	_, err := restoreRun(t, dir, 1, weir.BackendHashMap, filepath.Dir(chks[0]), 0, nil)
	if !errors.Is(err, weir.ErrNoCheckpoint) || !strings.Contains(err.Error(), "corrupt") {
		t.Fatalf("err = %v, want ErrNoCheckpoint naming the corruption", err)
	}
	after, _ := os.ReadDir(filepath.Join(dir, "out"))
	if len(after) != len(before) {
		t.Fatalf("the output changed although nothing should have started")
	}
}

func newTextLogger(w *lockedBuffer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }

// wordcount keeps its counts in keyed state and emits them from timers at
// the end of time: stopped mid-way and resumed (at another parallelism), it
// still writes every word's count once, and right.
func TestWordCountResumesWithTimers(t *testing.T) {
	t.Parallel()
	const lines = 60_000
	dir := t.TempDir()
	run := func(p int, restore string, stopAfter int64) error {
		opts := weir.Options{Parallelism: p, Logger: quietLogger(t), StateDir: filepath.Join(dir, "state"),
			Checkpoint: weir.CheckpointOptions{Interval: 5 * time.Millisecond, Dir: filepath.Join(dir, "chk"), RestorePath: restore}}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var done atomic.Int64
		env := weir.NewEnvironment(opts)
		weir.SetTestHooks(env, weir.TestHooks{Completed: func(int64, *metadata.Checkpoint) {
			if stopAfter > 0 && done.Add(1) == stopAfter {
				cancel()
			}
		}})
		job := jobs.NewWordCount()
		fs := pflag.NewFlagSet("wordcount", pflag.ContinueOnError)
		job.RegisterFlags(fs)
		if err := fs.Parse([]string{"--lines", strconv.Itoa(lines), "--output", filepath.Join(dir, "out")}); err != nil {
			t.Fatal(err)
		}
		if err := job.Build(env, io.Discard); err != nil {
			t.Fatal(err)
		}
		return env.Execute(ctx, "wordcount")
	}
	if err := run(2, "", 2); !errors.Is(err, context.Canceled) {
		t.Fatalf("first run: %v, want it canceled", err)
	}
	if err := run(3, weir.RestoreLatest, 0); err != nil {
		t.Fatalf("resumed run: %v", err)
	}
	want := map[string]int64{}
	for i := range int64(lines) {
		for _, w := range strings.Fields(jobs.GeneratedLine(i)) {
			want[w]++
		}
	}
	got := map[string]int64{}
	parts, _ := filepath.Glob(filepath.Join(dir, "out", "part-*"))
	for _, p := range parts {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			w, n, _ := strings.Cut(line, " ")
			c, err := strconv.ParseInt(n, 10, 64)
			if err != nil {
				t.Fatalf("bad line %q", line)
			}
			if _, dup := got[w]; dup {
				t.Fatalf("word %q written twice", w)
			}
			got[w] = c
		}
	}
	if len(got) != len(want) {
		t.Fatalf("%d words written, want %d", len(got), len(want))
	}
	for w, n := range want {
		if got[w] != n {
			t.Fatalf("word %q: count %d, want %d", w, got[w], n)
		}
	}
}

// Options.OnStatus reports progress while the job runs: records counted at
// the sources and sinks, and the latest checkpoint.
func TestOnStatusReportsProgress(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var maxOut, maxIn, lastCP atomic.Int64
	_, err := restoreRun(t, dir, 2, weir.BackendHashMap, "", 0, func(o *weir.Options) {
		o.StatusInterval = 5 * time.Millisecond
		o.OnStatus = func(s weir.JobStatus) {
			maxIn.Store(max(maxIn.Load(), s.RecordsIn))
			maxOut.Store(max(maxOut.Load(), s.RecordsOut))
			lastCP.Store(max(lastCP.Load(), s.LastCheckpoint))
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if maxIn.Load() <= 0 || maxIn.Load() > 150_000 || maxOut.Load() <= 0 || maxOut.Load() > 150_000 || lastCP.Load() < 1 {
		t.Fatalf("status saw in %d, out %d, checkpoint %d", maxIn.Load(), maxOut.Load(), lastCP.Load())
	}
}

// Environment.TriggerCheckpoint takes a checkpoint of the running job on
// demand and returns once it completed; without a running job it fails.
func TestTriggerCheckpointManually(t *testing.T) {
	dir := t.TempDir()
	opts := weir.Options{Parallelism: 2, Logger: quietLogger(t),
		Checkpoint: weir.CheckpointOptions{Interval: time.Hour, Dir: filepath.Join(dir, "chk")}}
	env := weir.NewEnvironment(opts)
	var never atomic.Bool
	never.Store(true)
	counterJob(env, 1_000_000, 97, sink.Files(filepath.Join(dir, "out"), func(s string) string { return s }), -1, &never)
	if _, err := env.TriggerCheckpoint(context.Background()); !errors.Is(err, weir.ErrNotRunning) {
		t.Fatalf("before Execute: %v, want ErrNotRunning", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- env.Execute(ctx, "counter") }()
	var id int64
	var err error
	for range 100 { // Execute may not have started yet
		if id, err = env.TriggerCheckpoint(ctx); !errors.Is(err, weir.ErrNotRunning) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if err != nil || id != 1 {
		t.Fatalf("TriggerCheckpoint = %d, %v; want checkpoint 1 completed", id, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "chk", "counter", "chk-1", "_metadata")); err != nil {
		t.Fatalf("checkpoint 1 reported complete without _metadata: %v", err)
	}
	cancel()
	<-done
}

// An incremental (native) pebble checkpoint resumes at the same
// parallelism (files opened as they are), at another one (key groups
// copied out of each old database), and is refused, before anything
// starts, by the hashmap backend.
func TestResumeFromIncrementalCheckpoint(t *testing.T) {
	t.Parallel()
	incremental := func(o *weir.Options) { o.Checkpoint.Incremental = true }
	for _, c := range []struct{ from, to int }{{2, 2}, {2, 3}, {4, 1}} {
		t.Run(fmt.Sprintf("p%d-to-p%d", c.from, c.to), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			if _, err := restoreRun(t, dir, c.from, weir.BackendPebble, "", 3, incremental); !errors.Is(err, context.Canceled) {
				t.Fatalf("first run: %v, want it canceled after 3 checkpoints", err)
			}
			if _, err := restoreRun(t, dir, c.to, weir.BackendPebble, weir.RestoreLatest, 0, incremental); err != nil {
				t.Fatalf("resumed run: %v", err)
			}
			checkCounterOutput(t, filepath.Join(dir, "out"), 150_000, 97)
		})
	}
	t.Run("into-hashmap", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		if _, err := restoreRun(t, dir, 2, weir.BackendPebble, "", 2, incremental); !errors.Is(err, context.Canceled) {
			t.Fatalf("first run: %v", err)
		}
		// With restarts allowed: a state that does not fit the job is not
		// restored again and again.
		opts := weir.Options{Parallelism: 2, StateBackend: weir.BackendHashMap, StateDir: filepath.Join(dir, "state"), Logger: quietLogger(t),
			Checkpoint: weir.CheckpointOptions{Interval: 10 * time.Millisecond, Dir: filepath.Join(dir, "chk"), RestorePath: weir.RestoreLatest},
			Restart:    weir.RestartOptions{Type: "fixed-delay", FixedDelayAttempts: 1000, FixedDelay: time.Millisecond}}
		env := weir.NewEnvironment(opts)
		var never atomic.Bool
		never.Store(true)
		counterJob(env, 150_000, 97, sink.Files(filepath.Join(dir, "out"), func(s string) string { return s }), -1, &never)
		res, err := env.ExecuteResult(context.Background(), "counter")
		if !errors.Is(err, weir.ErrStateMismatch) || !strings.Contains(err.Error(), "state.backend.type=pebble") {
			t.Fatalf("err = %v, want ErrStateMismatch naming the pebble backend", err)
		}
		if res.Restarts != 0 {
			t.Fatalf("%d restarts from a checkpoint whose state does not fit the job, want 0", res.Restarts)
		}
	})
}

// Options.OnCheckpointComplete sees every completed checkpoint with its
// sizes and phases.
func TestOnCheckpointComplete(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var seen []weir.CompletedCheckpoint
	var mu sync.Mutex
	_, err := restoreRun(t, dir, 2, weir.BackendPebble, "", 0, func(o *weir.Options) {
		o.Checkpoint.Incremental = true
		o.OnCheckpointComplete = func(c weir.CompletedCheckpoint) {
			mu.Lock()
			seen = append(seen, c)
			mu.Unlock()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) < 2 {
		t.Fatalf("saw %d checkpoints", len(seen))
	}
	for i, c := range seen {
		if c.ID != int64(i+1) || c.Duration <= 0 || c.FullBytes < c.CheckpointedBytes || c.FullBytes == 0 || c.MaxSync <= 0 {
			t.Fatalf("checkpoint %d: %+v", i+1, c)
		}
	}
}
