package cli

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weirstream/weir/internal/checkpoint/metadata"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/doctor"
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
			[]string{`unknown job "3f2a9c1e"`, "--url"}},
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

// fakeREST serves GET /jobs and /jobs/<id>/doctor for job id "abc" with
// report, and wants the bearer token if token is set.
func fakeREST(t *testing.T, token string, report doctor.Report) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if token != "" && r.Header.Get("Authorization") != "Bearer "+token {
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"errors":["missing or wrong bearer token"]}`))
			return
		}
		switch r.URL.Path {
		case "/jobs":
			w.Write([]byte(`{"jobs":[{"id":"abc","status":"RUNNING"}]}`))
		case "/jobs/abc/doctor":
			rep := report
			rep.Summary += " last=" + r.URL.Query().Get("last")
			json.NewEncoder(w).Encode(rep)
		default:
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"errors":["Job could not be found."]}`))
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestDoctorCommandLive(t *testing.T) {
	rep := doctor.Diagnose(doctor.Input{Job: "orders", Source: doctor.SourceLive, FailuresKnown: true,
		Failures: []doctor.Failure{{ID: 7, Reason: doctor.ReasonExpired}}}, doctor.Options{})
	srv := fakeREST(t, "s3cret", rep)

	r := runCLI(t, "doctor", "abc", "--url", srv.URL+"/", "--token", "s3cret", "--last", "3")
	r.want(t, ExitOK)
	for _, s := range []string{"Job orders (live)", "[CRITICAL] expired", "last=3"} {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("stdout lacks %q:\n%s", s, r.stdout)
		}
	}
	r = runCLI(t, "doctor", "abc", "--url", srv.URL, "--token", "s3cret", "--json")
	r.want(t, ExitOK)
	var got doctor.Report
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || got.Findings[0].Cause != doctor.CauseExpired {
		t.Errorf("--json: %v %s", err, r.stdout)
	}
	runCLI(t, "doctor", "abc", "--url", srv.URL).want(t, ExitUsage, "wants a bearer token", "--token")
	runCLI(t, "doctor", "nosuch", "--url", srv.URL, "--token", "s3cret").want(t, ExitUsage, `unknown job "nosuch"`, "Job could not be found.")

	// Through the _rest files under the checkpoint directory: by name,
	// by id, and a file without the id (the server's only job).
	dir := t.TempDir()
	for job, body := range map[string]string{
		"orders":   `{"url":"` + srv.URL + `","jobId":"abc"}`,
		"payments": `{"url":"` + srv.URL + `"}`,
	} {
		os.MkdirAll(filepath.Join(dir, job), 0o755)
		os.WriteFile(filepath.Join(dir, job, "_rest"), []byte(body), 0o644)
	}
	for _, target := range []string{"orders", "abc", "payments"} {
		r := runCLI(t, "doctor", target, "--dir", dir, "--token", "s3cret")
		r.want(t, ExitOK)
		if !strings.Contains(r.stdout, "[CRITICAL] expired") {
			t.Errorf("weir doctor %s: stdout:\n%s", target, r.stdout)
		}
	}

	srv.Close()
	runCLI(t, "doctor", "abc", "--url", srv.URL).want(t, ExitFailure, "ask "+srv.URL)
}
