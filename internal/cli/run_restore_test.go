package cli

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/jobs"
)

// checkpointIDs returns the ids of the complete checkpoints in jobDir.
func checkpointIDs(t *testing.T, jobDir string) []int64 {
	t.Helper()
	metas, _ := filepath.Glob(filepath.Join(jobDir, "chk-*", "_metadata"))
	var ids []int64
	for _, m := range metas {
		id, err := strconv.ParseInt(strings.TrimPrefix(filepath.Base(filepath.Dir(m)), "chk-"), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// treeContents returns every file under dir with its content.
func treeContents(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		files[p] = string(data)
		return err
	})
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return files
}

// weir run --from with a checkpoint one of whose data files was cut short
// after the run that wrote it (as a crash or a full disk leaves it):
// the path of that checkpoint is refused with exit code 2, an error naming
// the file and its sizes, and nothing started; --from latest warns, naming
// the file, restores the checkpoint before it, and the output stays
// exactly once. Both used to restart from the damaged checkpoint forever.
func TestRunFromDamagedCheckpoint(t *testing.T) {
	dir := t.TempDir()
	chk, out := filepath.Join(dir, "chk"), filepath.Join(dir, "out")
	jobDir := filepath.Join(chk, "counter")
	const records, keys = 20000, 97
	run := func(from ...string) result {
		t.Helper()
		args := []string{"run", "counter", "--records", strconv.Itoa(records), "--keys", strconv.Itoa(keys), "-p", "2",
			"--output", out, "--set", "execution.checkpointing.interval=20ms", "--set", "execution.checkpointing.dir=" + chk,
			"--set", "execution.checkpointing.num-retained=2", "--set", "state.backend.local-dir=" + filepath.Join(dir, "state")}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		r := runWith(t, ctx, jobs.Builtin(), append(args, from...)...)
		if ctx.Err() != nil {
			t.Fatalf("weir %s did not end within a minute (restarting forever?):\n%.3000s", strings.Join(from, " "), r.stderr)
		}
		return r
	}
	run().want(t, ExitOK)
	// A restored finished job ends at once with a final checkpoint: the
	// two retained checkpoints then both hold the end of the input.
	run("--from", "latest").want(t, ExitOK)
	ids := checkpointIDs(t, jobDir)
	if len(ids) != 2 {
		t.Fatalf("checkpoints %v, want 2 retained", ids)
	}
	older, newest := ids[0], ids[1]
	ksts, _ := filepath.Glob(filepath.Join(jobDir, fmt.Sprintf("chk-%d", newest), "*.kst"))
	if len(ksts) == 0 {
		t.Fatalf("checkpoint %d has no keyed-state file", newest)
	}
	slices.Sort(ksts)
	file := ksts[0]
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(file, fi.Size()/2); err != nil {
		t.Fatal(err)
	}
	committed := readCommitted(t, out)

	// The damaged checkpoint named: refused, nothing starts.
	outBefore, chkBefore := treeContents(t, out), treeContents(t, chk)
	named := filepath.Join(jobDir, fmt.Sprintf("chk-%d", newest))
	r := run("--from", named)
	r.want(t, ExitUsage)
	wantErr := fmt.Sprintf("error: cannot restore: checkpoint %s: data file %s: size %d, want %d\n", named, file, fi.Size()/2, fi.Size())
	if i := strings.Index(r.stderr, "error: "); i < 0 || !strings.HasPrefix(r.stderr[i:], wantErr) {
		t.Errorf("stderr lacks the line\n%s\ngot:\n%s", wantErr, r.stderr)
	}
	if r.stdout != "" || strings.Contains(r.stderr, "job started") || strings.Contains(r.stderr, "Restoring job") {
		t.Errorf("the job started:\nstdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	}
	if !maps.Equal(outBefore, treeContents(t, out)) {
		t.Errorf("the output changed although nothing should have started")
	}
	if !maps.Equal(chkBefore, treeContents(t, chk)) {
		t.Errorf("the checkpoint directory changed although nothing should have started")
	}

	// latest: a warning naming the file, the older checkpoint restored.
	r = run("--from", "latest")
	r.want(t, ExitOK, "level=WARN msg=\"skipping damaged checkpoint\" job=counter checkpoint="+strconv.FormatInt(newest, 10)+" file="+file,
		fmt.Sprintf("size %d, want %d", fi.Size()/2, fi.Size()),
		fmt.Sprintf("Restoring job counter from checkpoint %d.", older))
	if got := readCommitted(t, out); got != committed {
		t.Errorf("the committed output changed: %d bytes before, %d after", len(committed), len(got))
	}
	lines := strings.Split(strings.TrimSpace(committed), "\n")
	seen := map[string]bool{}
	for _, l := range lines {
		if seen[l] {
			t.Fatalf("line %q committed twice", l)
		}
		seen[l] = true
	}
	if len(lines) != records {
		t.Fatalf("%d lines committed, want %d", len(lines), records)
	}
}

// The counter, stopped midway after a few checkpoints and resumed with
// --from latest at another parallelism, commits every key's counts exactly
// once: the source's splits, the keyed counts and the sink's pending files
// are redistributed to the new subtasks. The first run is throttled to last
// seconds and stopped (as by Ctrl-C) once chk-3/_metadata exists; should
// it finish first, the test fails rather than resume a finished job. (The
// stop may still discard the newest checkpoint, if the runner had not yet
// taken note that its _metadata was written; --from latest then restores
// the one before.)
func TestRunResumeAtAnotherParallelism(t *testing.T) {
	const records, keys, stopAfter = 40_000, 97, 3
	for _, tc := range []struct {
		backend  string
		from, to int
	}{
		{"hashmap", 2, 3},
		{"hashmap", 3, 1},
		{"pebble", 2, 3},
		{"pebble", 3, 1},
	} {
		t.Run(fmt.Sprintf("%s-%d-to-%d", tc.backend, tc.from, tc.to), func(t *testing.T) {
			dir := t.TempDir()
			chk, out := filepath.Join(dir, "chk"), filepath.Join(dir, "out")
			jobDir := filepath.Join(chk, "counter")
			args := func(parallelism int, extra ...string) []string {
				return append([]string{"run", "counter", "--records", strconv.Itoa(records), "--keys", strconv.Itoa(keys),
					"-p", strconv.Itoa(parallelism), "--output", out,
					"--set", "execution.checkpointing.interval=50ms", "--set", "execution.checkpointing.dir=" + chk,
					"--set", "state.backend.type=" + tc.backend, "--set", "state.backend.local-dir=" + filepath.Join(dir, "state")},
					extra...)
			}

			// 40,000 records at 10,000/s: about 4s, against 3 checkpoints
			// 50ms apart.
			ctx, stop := context.WithCancel(context.Background())
			defer stop()
			first := make(chan result, 1)
			go func() { first <- runWith(t, ctx, jobs.Builtin(), args(tc.from, "--rate", "10000")...) }()
			deadline := time.Now().Add(time.Minute)
			// Only the newest checkpoint is retained: wait for its id.
			for ids := checkpointIDs(t, jobDir); len(ids) == 0 || ids[len(ids)-1] < stopAfter; ids = checkpointIDs(t, jobDir) {
				select {
				case r := <-first:
					t.Fatalf("the first run ended (exit code %d) before checkpoint %d completed; it was to be stopped midway:\n%.3000s",
						r.code, stopAfter, r.stderr)
				default:
				}
				if time.Now().After(deadline) {
					stop()
					t.Fatalf("no checkpoint %d within a minute:\n%.3000s", stopAfter, (<-first).stderr)
				}
				time.Sleep(time.Millisecond)
			}
			stop()
			r := <-first
			r.want(t, ExitInterrupted, `job "counter" interrupted`)
			committed := len(strings.Fields(readCommitted(t, out)))
			if committed >= records {
				t.Fatalf("the stopped run committed %d lines of %d: it was not stopped midway", committed, records)
			}
			t.Logf("stopped at parallelism %d after checkpoint %d with %d of %d lines committed", tc.from, checkpointIDs(t, jobDir), committed, records)

			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			r = runWith(t, ctx, jobs.Builtin(), args(tc.to, "--from", "latest")...)
			if ctx.Err() != nil {
				t.Fatalf("the resumed run did not end within a minute:\n%.3000s", r.stderr)
			}
			r.want(t, ExitOK, fmt.Sprintf(`msg="running job" job=counter parallelism=%d `, tc.to), "Restoring job counter from checkpoint ")
			if err := jobs.VerifyCounterOutput(strings.Fields(readCommitted(t, out)), records, keys); err != nil {
				t.Fatalf("committed output after resuming at parallelism %d from %d: %v", tc.to, tc.from, err)
			}
		})
	}
}
