package cli

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/rest"
	"github.com/weirstream/weir/internal/rest/resttest"
)

const doneJobID = "11111111111111111111111111111111"

// restFixture serves the REST fixture job ("orders", running) and a
// finished job ("done") on 127.0.0.1 until the test ends.
func restFixture(t *testing.T, token string) (*rest.Server, *resttest.Job) {
	t.Helper()
	s, err := rest.Start(rest.Config{Port: "0", AuthToken: token, Version: Version,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	j := resttest.NewJob()
	s.AddJob(j.Job)
	s.AddJob(resttest.NewFinishedJob(doneJobID, "done"))
	return s, j
}

// deadURL is the URL of a server that has stopped.
func deadURL(t *testing.T) string {
	t.Helper()
	s, err := rest.Start(rest.Config{Port: "0", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	return s.URL()
}

// discoveryDir writes discovery files to a fresh checkpoint directory:
// orders at the fixture's server, "gone" at a server that stopped, and
// "moved" at the fixture's server, which does not show its job.
func discoveryDir(t *testing.T, url string) string {
	t.Helper()
	ctx := t.Context()
	dir := t.TempDir()
	store, err := storage.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	for job, d := range map[string]rest.Discovery{
		"orders": {URL: url, JobID: resttest.JobID, JobName: resttest.JobName, PID: 1, StartTime: 1},
		"gone":   {URL: deadURL(t), JobID: "22222222222222222222222222222222", JobName: "gone", PID: 2, StartTime: 2},
		"moved":  {URL: url, JobID: "33333333333333333333333333333333", JobName: "moved", PID: 3, StartTime: 3},
	} {
		if err := rest.WriteDiscovery(ctx, store, job, d); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// rowOf returns the line of out that starts with prefix.
func rowOf(t *testing.T, out, prefix string) string {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	t.Fatalf("no line starting with %q:\n%s", prefix, out)
	return ""
}

// wantFields checks that line holds the fields in order, separated by
// runs of spaces.
func wantFields(t *testing.T, line string, fields ...string) {
	t.Helper()
	parts := make([]string, len(fields))
	for i, f := range fields {
		parts[i] = regexp.QuoteMeta(f)
	}
	if !regexp.MustCompile(`^` + strings.Join(parts, `\s+`) + `\s*$`).MatchString(line) {
		t.Errorf("line %q, want fields %q", line, fields)
	}
}

func TestListByURL(t *testing.T) {
	s, _ := restFixture(t, "")
	r := runCLI(t, "list", "--url", s.URL())
	r.want(t, ExitOK)
	wantFields(t, rowOf(t, r.stdout, "ID"), "ID", "NAME", "STATE", "DURATION", "URL")
	wantFields(t, rowOf(t, r.stdout, resttest.JobID), resttest.JobID, "orders", "RUNNING", "10m0s", s.URL())
	wantFields(t, rowOf(t, r.stdout, doneJobID), doneJobID, "done", "FINISHED", "1m0s", s.URL())
}

func TestListByDiscovery(t *testing.T) {
	s, _ := restFixture(t, "")
	dir := discoveryDir(t, s.URL())
	r := runCLI(t, "list", "--dir", dir)
	r.want(t, ExitOK)
	if r.stderr != "" {
		t.Errorf("stderr: %s", r.stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d lines, want a header and 3 jobs:\n%s", len(lines), r.stdout)
	}
	wantFields(t, rowOf(t, r.stdout, resttest.JobID), resttest.JobID, "orders", "RUNNING", "10m0s", s.URL())
	gone := rowOf(t, r.stdout, "2222")
	if !strings.Contains(gone, "gone") || !strings.Contains(gone, "stale (not responding)") {
		t.Errorf("stopped server's job: %q", gone)
	}
	if moved := rowOf(t, r.stdout, "3333"); !strings.Contains(moved, "stale (job not served there)") {
		t.Errorf("job the server does not show: %q", moved)
	}

	// Nothing discovered.
	r = runCLI(t, "list", "--dir", t.TempDir())
	r.want(t, ExitOK)
	if !strings.HasPrefix(r.stdout, "no jobs found under ") {
		t.Errorf("empty directory: %q", r.stdout)
	}
	// A directory that does not exist: given, a usage error; the default,
	// nothing to list.
	r = runCLI(t, "list", "--dir", filepath.Join(t.TempDir(), "nope"))
	r.want(t, ExitUsage, "does not exist")
	t.Chdir(t.TempDir())
	r = runCLI(t, "list")
	r.want(t, ExitOK)
	if !strings.Contains(r.stdout, "no checkpoint directory weir-data/checkpoints here") {
		t.Errorf("default directory missing: %q", r.stdout)
	}
	if _, err := os.Stat("weir-data"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("weir list created the checkpoint directory: %v", err)
	}
}

func TestListToken(t *testing.T) {
	s, _ := restFixture(t, "s3cr3t")
	t.Setenv(TokenEnv, "")
	r := runCLI(t, "list", "--url", s.URL())
	r.want(t, ExitUsage, "refused the request", "401", "--token", TokenEnv)

	dir := discoveryDir(t, s.URL())
	r = runCLI(t, "list", "--dir", dir)
	r.want(t, ExitOK)
	if row := rowOf(t, r.stdout, resttest.JobID); !strings.Contains(row, "unauthorized (pass --token") {
		t.Errorf("without the token: %q", row)
	}

	r = runCLI(t, "list", "--url", s.URL(), "--token", "s3cr3t")
	r.want(t, ExitOK)
	t.Setenv(TokenEnv, "s3cr3t")
	r = runCLI(t, "list", "--dir", dir)
	r.want(t, ExitOK)
	wantFields(t, rowOf(t, r.stdout, resttest.JobID), resttest.JobID, "orders", "RUNNING", "10m0s", s.URL())
}

func TestCancelCommand(t *testing.T) {
	s, j := restFixture(t, "")
	dir := discoveryDir(t, s.URL())

	r := runCLI(t, "cancel", "orders", "--dir", dir)
	r.want(t, ExitOK)
	if r.stdout != "cancelling job "+resttest.JobID+" (orders)\n" || j.Cancels() != 1 {
		t.Errorf("cancel by name: %q, %d calls", r.stdout, j.Cancels())
	}
	// By a unique id prefix, on the server --url names.
	r = runCLI(t, "cancel", resttest.JobID[:6], "--url", s.URL())
	r.want(t, ExitOK)
	if j.Cancels() != 2 {
		t.Errorf("cancel by id prefix: %d calls", j.Cancels())
	}

	r = runCLI(t, "cancel", "done", "--url", s.URL())
	r.want(t, ExitFailure, "job "+doneJobID+" (done) was not cancelled", "terminal state FINISHED")

	// An unknown job: the message lists the jobs found.
	r = runCLI(t, "cancel", "nope", "--url", s.URL())
	r.want(t, ExitUsage, `job "nope" not found`, resttest.JobID+" (orders)", doneJobID+" (done)")
	r = runCLI(t, "cancel", "nope", "--dir", dir)
	r.want(t, ExitUsage, `job "nope" not found`, "discovery file", resttest.JobID+" (orders) at "+s.URL(),
		"(gone) at ")
	if j.Cancels() != 2 {
		t.Errorf("cancelled by failed commands: %d calls", j.Cancels())
	}

	// A job whose server stopped, or no longer shows it.
	r = runCLI(t, "cancel", "gone", "--dir", dir)
	r.want(t, ExitFailure, "does not answer", "stale discovery file")
	r = runCLI(t, "cancel", "moved", "--dir", dir)
	r.want(t, ExitFailure, "is not served at "+s.URL(), "stale")

	r = runCLI(t, "cancel", "--url", s.URL())
	r.want(t, ExitUsage, "missing argument", "job id")
	r = runCLI(t, "cancel", "a", "b", "--url", "ftp://x")
	r.want(t, ExitUsage, "2 problems", `--url "ftp://x": must start with http://`, `unexpected argument "b"`)
}

func TestCheckpointCommand(t *testing.T) {
	s, j := restFixture(t, "")

	// Without --wait the command returns at once; the fake control holds
	// the checkpoint until the server closes.
	r := runCLI(t, "checkpoint", "orders", "--url", s.URL())
	r.want(t, ExitOK)
	if !regexp.MustCompile(`^triggered a checkpoint of job ` + resttest.JobID + ` \(orders\): request-id [0-9a-f]{32}\n$`).
		MatchString(r.stdout) {
		t.Errorf("stdout %q", r.stdout)
	}
	// That checkpoint takes a result before the next one is triggered.
	j.Results <- resttest.Result{ID: 1}

	// 13 is in the server's history: the line has its figures.
	go func() { j.Results <- resttest.Result{ID: resttest.CheckpointCompleted} }()
	r = runCLI(t, "checkpoint", "orders", "--url", s.URL(), "--wait")
	r.want(t, ExitOK)
	if !strings.HasSuffix(r.stdout, "\ncheckpoint 13 completed in 1s: 2.9 KiB checkpointed, 4.9 KiB full\n") {
		t.Errorf("--wait: %q", r.stdout)
	}
	go func() { j.Results <- resttest.Result{ID: 99} }()
	r = runCLI(t, "checkpoint", resttest.JobID, "--url", s.URL(), "--wait")
	r.want(t, ExitOK)
	if !strings.HasSuffix(r.stdout, "\ncheckpoint 99 completed\n") {
		t.Errorf("--wait, checkpoint not in the history: %q", r.stdout)
	}

	go func() { j.Results <- resttest.Result{Err: errors.New("checkpoint declined: task not ready")} }()
	r = runCLI(t, "checkpoint", "orders", "--url", s.URL(), "--wait")
	r.want(t, ExitFailure, "the checkpoint of job "+resttest.JobID+" (orders) failed: checkpoint declined: task not ready")

	r = runCLI(t, "checkpoint", "done", "--url", s.URL())
	r.want(t, ExitFailure, "no checkpoint of job "+doneJobID+" (done)", "terminal state FINISHED")
	r = runCLI(t, "checkpoint", "orders", "--url", s.URL(), "--wait=maybe")
	r.want(t, ExitUsage, `--wait "maybe": must be true or false`)
}

func TestStatusCommand(t *testing.T) {
	s, _ := restFixture(t, "")
	dir := discoveryDir(t, s.URL())
	r := runCLI(t, "status", "orders", "--dir", dir)
	r.want(t, ExitOK)
	out := r.stdout
	for _, want := range []string{
		"job orders (" + resttest.JobID + "): RUNNING for 10m0s, since 2026-01-01T00:00:00Z\n",
		"server " + s.URL() + "\n",
		"last failure (2026-01-01T00:00:03Z): source failed: connection reset\n",
		"checkpoints: 5 triggered, 3 completed, 1 failed, 1 in progress; restored from 10\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	wantFields(t, rowOf(t, out, "VERTEX"), "VERTEX", "PARALLELISM", "RECORDS IN", "RECORDS OUT", "BUSY",
		"BACKPRESSURED", "IDLE", "BACKPRESSURE")
	wantFields(t, rowOf(t, out, "Source"), "Source: numbers", "2", "0", "3000", "90%", "50%", "0%", "low")
	wantFields(t, rowOf(t, out, "Window"), "Window(5s) -> Map", "2", "3000", "2700", "80%", "50%", "10%", "high")
	wantFields(t, rowOf(t, out, "Sink"), "Sink: out", "1", "2700", "0", "20%", "0%", "80%", "ok")
	wantFields(t, rowOf(t, out, "ID "), "ID", "STATUS", "TRIGGERED", "DURATION", "CHECKPOINTED", "FULL", "FAILURE")
	wantFields(t, rowOf(t, out, "15 "), "15", "IN_PROGRESS", "2026-01-01T00:01:00Z", "300ms", "70 B", "70 B", "-")
	wantFields(t, rowOf(t, out, "14 "), "14", "COMPLETED (savepoint)", "2026-01-01T00:00:50Z", "5s", "2.0 KiB",
		"5.9 KiB", "-")
	wantFields(t, rowOf(t, out, "12 "), "12", "FAILED", "2026-01-01T00:00:20Z", "10s", "150 B", "150 B",
		resttest.FailureMessage)
	// The five latest: 11 is the fifth.
	wantFields(t, rowOf(t, out, "11 "), "11", "COMPLETED", "2026-01-01T00:00:10Z", "2s", "1000 B", "1000 B", "-")

	// A finished job: no backpressure figures, an end time.
	r = runCLI(t, "status", "done", "--url", s.URL())
	r.want(t, ExitOK)
	if !strings.Contains(r.stdout, "FINISHED for 1m0s") || !strings.Contains(r.stdout, "ended 2026-01-01T00:01:00Z") {
		t.Errorf("finished job:\n%s", r.stdout)
	}
	wantFields(t, rowOf(t, r.stdout, "Sink"), "Sink: out", "1", "0", "0", "-", "-", "-", "-")
	if strings.Contains(r.stdout, "last failure") {
		t.Errorf("a job that never failed shows a failure:\n%s", r.stdout)
	}

	r = runCLI(t, "status", "orders", "--dir", filepath.Join(t.TempDir(), "nope"))
	r.want(t, ExitUsage, "no running jobs found", "does not exist", "--url")
	r = runCLI(t, "status", "orders", "--url", deadURL(t))
	r.want(t, ExitFailure, "does not answer")
}

// A token goes to a discovered server only over TLS or on loopback: a
// planted discovery file must not collect it.
func TestTokenNotSentToPlantedURL(t *testing.T) {
	cf := &controlFlags{token: "tok"}
	for u, want := range map[string]string{
		"http://127.0.0.1:8081":      "tok",
		"http://[::1]:8081":          "tok",
		"http://localhost:8081":      "tok",
		"https://weir.example:8443":  "tok",
		"http://attacker.example:80": "",
		"http://10.0.0.7:8081":       "",
		"::not a url":                "",
	} {
		if got := cf.bearerFor(u); got != want {
			t.Errorf("bearerFor(%s) = %q, want %q", u, got, want)
		}
	}
}
