package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weirstream/weir/internal/checkpoint/metadata"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/doctor"
	"github.com/weirstream/weir/internal/rest"
	"github.com/weirstream/weir/internal/rest/resttest"
)

// writeDoctorCheckpoints lays out job "orders" with three checkpoints,
// one a second, each taking 600 ms, nearly all of it Count's upload.
func writeDoctorCheckpoints(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	s, err := storage.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const t0 = 1767225600000
	for id := int64(1); id <= 3; id++ {
		c := metadata.Checkpoint{Job: "orders", ID: id, TriggerTime: t0 + id*1000, CompletionTime: t0 + id*1000 + 600,
			Bytes: 64 << 20, FullBytes: 64 << 20,
			Tasks: []metadata.TaskStats{
				{Vertex: 0, Name: "Source: Orders"},
				{Vertex: 1, Name: "Count -> Sink", EndToEnd: 600, StartDelay: 2, Sync: 1, Async: 597, Bytes: 64 << 20},
			}}
		payload, err := metadata.Encode(&c)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.WriteMetadata(ctx, "orders", id, payload); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestDoctorCommandOffline(t *testing.T) {
	dir := writeDoctorCheckpoints(t)
	job := filepath.Join(dir, "orders")
	for _, target := range []string{job, dir, "file://" + job} {
		r := runCLI(t, "doctor", target)
		r.want(t, ExitOK)
		for _, s := range []string{"Job orders (offline, ", "/orders)\n", "Checkpoints examined: 1-3",
			"[WARNING] async-phase at Count -> Sink (1/1)", "uploading 64.0 MiB", "execution.checkpointing.incremental",
			"Note: Failed checkpoints are not recorded in _metadata"} {
			if !strings.Contains(r.stdout, s) {
				t.Errorf("weir doctor %s: stdout lacks %q:\n%s", target, s, r.stdout)
			}
		}
	}

	r := runCLI(t, "doctor", job, "--json", "--last", "2")
	r.want(t, ExitOK)
	var rep doctor.Report
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || strings.Count(r.stdout, "\n") != 1 {
		t.Fatalf("--json: %v\n%s", err, r.stdout)
	}
	if len(rep.Checkpoints) != 2 || rep.Findings[0].Cause != doctor.CauseAsyncPhase || rep.Findings[0].Subtask != 0 {
		t.Errorf("--json report %+v", rep)
	}

	log := filepath.Join(t.TempDir(), "job.log")
	os.WriteFile(log, []byte(`time=2026-01-01T00:00:04.060Z level=WARN msg="Checkpoint 4 of job orders expired before completing." job=orders checkpoint=4 reason=expired cause="coordinator: checkpoint expired"`+"\n"), 0o644)
	r = runCLI(t, "doctor", job, "--log", log)
	r.want(t, ExitOK)
	if !strings.Contains(r.stdout, "[CRITICAL] expired") || strings.Contains(r.stdout, "only visible live") {
		t.Errorf("--log: stdout:\n%s", r.stdout)
	}
}

func TestDoctorCommandErrors(t *testing.T) {
	dir := writeDoctorCheckpoints(t)
	empty := t.TempDir()
	broken := filepath.Join(empty, "broken", "chk-2")
	os.MkdirAll(broken, 0o755)
	os.WriteFile(filepath.Join(broken, storage.MetadataName), []byte("garbage"), 0o644)
	twoJobs := writeDoctorCheckpoints(t)
	os.MkdirAll(filepath.Join(twoJobs, "other", "chk-1"), 0o755)
	os.WriteFile(filepath.Join(twoJobs, "other", "chk-1", "part"), []byte("x"), 0o644)

	for _, tc := range []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"no argument", []string{"doctor"}, ExitUsage, []string{"missing argument", "weir doctor --help"}},
		{"two arguments", []string{"doctor", "a", "b"}, ExitUsage, []string{`unexpected argument "b"`}},
		{"bad flags", []string{"doctor", dir, "--last", "0", "--url", "ftp://x"}, ExitUsage,
			[]string{"2 problems", "--last 0", `--url "ftp://x"`}},
		{"unknown job", []string{"doctor", "3f2a9c1e", "--dir", dir}, ExitUsage,
			[]string{`job "3f2a9c1e" not found`, "--url"}},
		{"missing directory", []string{"doctor", filepath.Join(empty, "nosuch")}, ExitUsage, []string{"does not exist"}},
		{"no checkpoints", []string{"doctor", t.TempDir()}, ExitUsage, []string{"no checkpoints"}},
		{"unreadable metadata", []string{"doctor", filepath.Join(empty, "broken")}, ExitUsage,
			[]string{"unreadable _metadata", "chk-2"}},
		{"several jobs", []string{"doctor", twoJobs}, ExitUsage, []string{"several jobs", "orders"}},
		{"missing log", []string{"doctor", dir, "--log", filepath.Join(empty, "nosuch.log")}, ExitUsage, []string{"--log"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runCLI(t, tc.args...)
			r.want(t, tc.code, tc.want...)
			if r.stdout != "" {
				t.Errorf("stdout: %s", r.stdout)
			}
		})
	}
}

// startDoctorServer serves the REST fixture job (resttest) with the
// doctor's hook, as a running job does, and returns the server.
func startDoctorServer(t *testing.T) (*rest.Server, *resttest.Job) {
	t.Helper()
	j := resttest.NewJob()
	srv, err := rest.Start(rest.Config{BindAddress: "127.0.0.1", Port: "0", AuthToken: "s3cret",
		Doctor: doctor.Handle})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	srv.AddJob(j.Job)
	return srv, j
}

func TestDoctorCommandLive(t *testing.T) {
	srv, j := startDoctorServer(t)
	want := doctor.Diagnose(doctor.FromJob(j.Job, 0), doctor.Options{})

	r := runCLI(t, "doctor", resttest.JobID[:8], "--url", srv.URL(), "--token", "s3cret")
	r.want(t, ExitOK)
	if r.stdout != want.Text() {
		t.Errorf("stdout:\n%s\nwant:\n%s", r.stdout, want.Text())
	}
	t.Setenv(TokenEnv, "s3cret")
	r = runCLI(t, "doctor", resttest.JobName, "--url", srv.URL(), "--json")
	r.want(t, ExitOK)
	var got doctor.Report
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || got.Source != doctor.SourceLive || got.Job != resttest.JobName {
		t.Errorf("--json: %v %s", err, r.stdout)
	}
	// --last reaches the server's doctor.
	r = runCLI(t, "doctor", resttest.JobName, "--url", srv.URL(), "--json", "--last", "1")
	r.want(t, ExitOK)
	var one doctor.Report
	if err := json.Unmarshal([]byte(r.stdout), &one); err != nil || len(one.Checkpoints)+len(one.Failed) > 1 ||
		len(got.Checkpoints)+len(got.Failed) < 2 {
		t.Errorf("--last 1: %v, %d+%d checkpoints examined (default window %d+%d)", err, len(one.Checkpoints), len(one.Failed),
			len(got.Checkpoints), len(got.Failed))
	}
	runCLI(t, "doctor", "nosuch", "--url", srv.URL()).want(t, ExitUsage, `job "nosuch" not found`)
	runCLI(t, "doctor", resttest.JobID, "--url", srv.URL(), "--token", "wrong").want(t, ExitUsage, "--token")

	// Through the discovery file under the checkpoint directory.
	dir := t.TempDir()
	st, err := storage.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := rest.WriteDiscovery(context.Background(), st, resttest.JobName,
		rest.Discovery{URL: srv.URL(), JobID: resttest.JobID, JobName: resttest.JobName}); err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, "doctor", resttest.JobName, "--dir", dir)
	r.want(t, ExitOK)
	if r.stdout != want.Text() {
		t.Errorf("through the discovery file: stdout:\n%s", r.stdout)
	}
}

func TestDoctorCommandWithoutDoctor(t *testing.T) {
	// A server without the hook (an older weir) answers 404.
	j := resttest.NewJob()
	srv, err := rest.Start(rest.Config{BindAddress: "127.0.0.1", Port: "0"})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	srv.AddJob(j.Job)
	runCLI(t, "doctor", resttest.JobID, "--url", srv.URL()).want(t, ExitFailure, "has no checkpoint doctor")
	srv.Close()
	runCLI(t, "doctor", resttest.JobID, "--url", srv.URL()).want(t, ExitFailure, "does not answer")
}

func TestDoctorCommandJobNotRunning(t *testing.T) {
	// No discovery file: the job's checkpoints under --dir are read.
	dir := writeDoctorCheckpoints(t)
	r := runCLI(t, "doctor", "orders", "--dir", dir)
	r.want(t, ExitOK)
	if !strings.Contains(r.stdout, "Job orders (offline") {
		t.Errorf("stdout:\n%s", r.stdout)
	}
}

// A log that is not weir's is a usage error (exit 2) naming --log.
func TestDoctorBadLog(t *testing.T) {
	dir := writeDoctorCheckpoints(t)
	bad := filepath.Join(t.TempDir(), "notes.txt")
	os.WriteFile(bad, []byte("hello\nworld\n"), 0o644)
	r := runCLI(t, "doctor", filepath.Join(dir, "orders"), "--log", bad)
	r.want(t, ExitUsage, "--log", "not a weir log")
}
