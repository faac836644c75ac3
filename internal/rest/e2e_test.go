package rest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/internal/jobs"
	"github.com/weirstream/weir/internal/rest"
	"github.com/weirstream/weir/internal/web/webtest"
	"github.com/weirstream/weir/sink"
	"github.com/weirstream/weir/source"
)

// runningCounter starts the counter job (unbounded, throttled) with the
// REST server on a free port and returns its URL, the job's outcome and
// the number of checkpoints the Go API reported complete.
type runningCounter struct {
	url       string
	done      chan error
	completed *atomic.Int64
	chkDir    string
}

func startCounter(t *testing.T, mutate func(*weir.Options)) *runningCounter {
	t.Helper()
	dir := t.TempDir()
	job := jobs.NewCounter()
	fs := pflag.NewFlagSet("counter", pflag.ContinueOnError)
	job.RegisterFlags(fs)
	if err := fs.Parse([]string{"--records", "1000000000", "--rate", "5000", "--keys", "50", "--output", filepath.Join(dir, "out")}); err != nil {
		t.Fatal(err)
	}
	rc := &runningCounter{done: make(chan error, 1), completed: &atomic.Int64{}, chkDir: filepath.Join(dir, "chk")}
	urls := make(chan string, 1)
	opts := weir.Options{Parallelism: 2, StateDir: filepath.Join(dir, "state"),
		Logger:               slog.New(slog.NewTextHandler(io.Discard, nil)),
		Checkpoint:           weir.CheckpointOptions{Interval: time.Hour, Dir: rc.chkDir},
		REST:                 weir.RESTOptions{Enabled: true, Port: "0", OnStart: func(u string) { urls <- u }},
		OnCheckpointComplete: func(weir.CompletedCheckpoint) { rc.completed.Add(1) },
	}
	if mutate != nil {
		mutate(&opts)
	}
	env := weir.NewEnvironment(opts)
	if err := job.Build(env, io.Discard); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() {
		cancel()
		select {
		case <-rc.done:
		case <-time.After(30 * time.Second):
			t.Error("the job did not stop within 30s of its cancellation")
		}
	})
	go func() { rc.done <- env.Execute(ctx, "counter") }()
	select {
	case rc.url = <-urls:
	case err := <-rc.done:
		rc.done <- err
		t.Fatalf("the job ended before its REST server started: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the REST server did not start within 30s")
	}
	return rc
}

// call sends a request and decodes the JSON answer into out (if not nil),
// failing the test unless the status is want.
func call(t *testing.T, method, url, token string, body any, want int, out any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s: status %d, want %d: %s", method, url, resp.StatusCode, want, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s %s: %v in %s", method, url, err, data)
		}
	}
}

// eventually polls check every 20ms until it returns nil, failing the
// test with its last error after 30s.
func eventually(t *testing.T, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never happened within 30s: %v", what, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

type m = map[string]any

func num(v any) float64 {
	f, _ := v.(float64)
	return f
}

// TestRunningJobServesFlinkAPI runs a real job and reads it through the
// REST API as Flink tooling would: the statistics must equal what the Go
// API reported, manual checkpoints must complete, cancel must stop the
// job, and the discovery file must exist exactly while it runs.
func TestRunningJobServesFlinkAPI(t *testing.T) {
	t.Parallel()
	rc := startCounter(t, nil)
	var jobsList struct {
		Jobs []struct{ ID, Status string }
	}
	call(t, "GET", rc.url+"/jobs", "", nil, 200, &jobsList)
	if len(jobsList.Jobs) != 1 || len(jobsList.Jobs[0].ID) != 32 {
		t.Fatalf("/jobs: %+v", jobsList)
	}
	jid := jobsList.Jobs[0].ID
	eventually(t, "the job running", func() error {
		var st m
		call(t, "GET", rc.url+"/jobs/"+jid+"/status", "", nil, 200, &st)
		if st["status"] != "RUNNING" {
			return fmt.Errorf("status %v", st["status"])
		}
		return nil
	})

	// The discovery file names this server.
	var disc m
	data, err := os.ReadFile(filepath.Join(rc.chkDir, "counter", "_rest"))
	if err != nil {
		t.Fatalf("discovery file: %v", err)
	}
	if err := json.Unmarshal(data, &disc); err != nil || !strings.Contains(string(data), rc.url) || !strings.Contains(string(data), jid) {
		t.Fatalf("discovery file %s (%v) does not name %s and %s", data, err, rc.url, jid)
	}

	// Three manual checkpoints through the API (the periodic interval is an
	// hour, so these are all there are).
	var ids []float64
	for range 3 {
		var trig m
		call(t, "POST", rc.url+"/jobs/"+jid+"/checkpoints", "", m{"checkpointType": "CONFIGURED"}, 202, &trig)
		reqID, _ := trig["request-id"].(string)
		if reqID == "" {
			t.Fatalf("trigger answer %v has no request-id", trig)
		}
		eventually(t, "the manual checkpoint completing", func() error {
			var res struct {
				Status    struct{ ID string }
				Operation m
			}
			call(t, "GET", rc.url+"/jobs/"+jid+"/checkpoints/"+reqID, "", nil, 200, &res)
			if res.Status.ID != "COMPLETED" {
				return fmt.Errorf("status %q", res.Status.ID)
			}
			if res.Operation["failureCause"] != nil {
				t.Fatalf("manual checkpoint failed: %v", res.Operation["failureCause"])
			}
			ids = append(ids, num(res.Operation["checkpointId"]))
			return nil
		})
	}
	var cps struct {
		Counts  map[string]float64
		Summary map[string]map[string]float64
		Latest  map[string]m
		History []m
	}
	call(t, "GET", rc.url+"/jobs/"+jid+"/checkpoints", "", nil, 200, &cps)
	if got := rc.completed.Load(); got != 3 || cps.Counts["completed"] != 3 || cps.Counts["total"] != 3 ||
		cps.Counts["failed"] != 0 || cps.Counts["in_progress"] != 0 || cps.Counts["restored"] != 0 {
		t.Fatalf("counts %v, Go API completed %d; want 3 completed of 3", cps.Counts, got)
	}
	for _, k := range []string{"checkpointed_size", "state_size", "end_to_end_duration", "alignment_buffered", "processed_data", "persisted_data"} {
		s := cps.Summary[k]
		prev := s["min"]
		for _, q := range []string{"p50", "p90", "p95", "p99", "p999", "max"} {
			if s[q] < prev {
				t.Fatalf("summary %s: %s %v below the previous quantile %v (%v)", k, q, s[q], prev, s)
			}
			prev = s[q]
		}
	}
	if cps.Summary["checkpointed_size"]["max"] <= 0 {
		t.Fatalf("checkpointed size summary %v: the counter has keyed state", cps.Summary["checkpointed_size"])
	}
	if len(cps.History) != 3 || num(cps.History[0]["id"]) != ids[2] || cps.History[0]["className"] != "completed" {
		t.Fatalf("history %v, want the 3 manual checkpoints %v newest first", cps.History, ids)
	}
	if num(cps.Latest["completed"]["id"]) != ids[2] {
		t.Fatalf("latest completed %v, want %v", cps.Latest["completed"], ids[2])
	}

	// The job's vertices, and per-subtask details of the last checkpoint.
	var job struct {
		Vertices []m
	}
	call(t, "GET", rc.url+"/jobs/"+jid, "", nil, 200, &job)
	if len(job.Vertices) < 2 {
		t.Fatalf("vertices %v", job.Vertices)
	}
	last := fmt.Sprint(int64(ids[2]))
	var details struct {
		Tasks map[string]m
	}
	call(t, "GET", rc.url+"/jobs/"+jid+"/checkpoints/details/"+last, "", nil, 200, &details)
	for _, v := range job.Vertices {
		vid := v["id"].(string)
		if details.Tasks[vid] == nil {
			t.Fatalf("checkpoint %s details lack vertex %s: %v", last, vid, details.Tasks)
		}
		var sub struct {
			Subtasks []m
		}
		call(t, "GET", rc.url+"/jobs/"+jid+"/checkpoints/details/"+last+"/subtasks/"+vid, "", nil, 200, &sub)
		if len(sub.Subtasks) != int(num(v["parallelism"])) {
			t.Fatalf("vertex %v: %d subtask entries", v["name"], len(sub.Subtasks))
		}
		for _, s := range sub.Subtasks {
			if s["status"] != "completed" {
				t.Fatalf("vertex %v subtask %v", v["name"], s)
			}
		}
		var bp m
		call(t, "GET", rc.url+"/jobs/"+jid+"/vertices/"+vid+"/backpressure", "", nil, 200, &bp)
		if lvl := bp["backpressureLevel"]; lvl != "ok" && lvl != "low" && lvl != "high" {
			t.Fatalf("backpressure %v", bp)
		}
	}
	// The keyed vertex's subtasks report their state size in the last
	// checkpoint, the same bytes the checkpoint details show.
	keyedVertex := job.Vertices[1]["id"].(string)
	var agg []m
	call(t, "GET", rc.url+"/jobs/"+jid+"/vertices/"+keyedVertex+"/subtasks/metrics?get=lastCheckpointSize&agg=sum", "", nil, 200, &agg)
	if len(agg) != 1 || num(agg[0]["sum"]) != num(details.Tasks[keyedVertex]["checkpointed_size"]) || num(agg[0]["sum"]) <= 0 {
		t.Fatalf("lastCheckpointSize of the keyed vertex %v, want the checkpoint details' %v", agg, details.Tasks[keyedVertex]["checkpointed_size"])
	}

	// Records flow: the source vertex reports written records.
	eventually(t, "records counted", func() error {
		call(t, "GET", rc.url+"/jobs/"+jid, "", nil, 200, &job)
		if w := num(job.Vertices[0]["metrics"].(m)["write-records"]); w <= 0 {
			return fmt.Errorf("source write-records %v", w)
		}
		return nil
	})

	// Prometheus sees the same count.
	resp, err := http.Get(rc.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	prom, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(prom), "weir_jobmanager_job_numberOfCompletedCheckpoints{") ||
		!strings.Contains(string(prom), "weir_taskmanager_job_task_numRecordsOut{") {
		t.Fatalf("/metrics lacks the checkpoint count or task record counts:\n%.2000s", prom)
	}
	// The dashboard is served at /.
	resp, err = http.Get(rc.url + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || !strings.HasPrefix(ct, "text/html") {
		t.Fatalf("GET /: %d %s", resp.StatusCode, ct)
	}

	// Cancel: the job ends as canceled and the discovery file goes.
	call(t, "PATCH", rc.url+"/jobs/"+jid+"?mode=cancel", "", nil, 202, nil)
	select {
	case err := <-rc.done:
		rc.done <- err
		if !errors.Is(err, weir.ErrCanceled) {
			t.Fatalf("Execute after a REST cancel: %v, want ErrCanceled", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the job did not end within 30s of its cancellation")
	}
	if _, err := os.Stat(filepath.Join(rc.chkDir, "counter", "_rest")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("discovery file after the end: %v", err)
	}
	if _, err := http.Get(rc.url + "/jobs"); err == nil {
		t.Fatal("the REST server still answers after the job ended")
	}
}

// TestRESTTokenAndLoopback: off loopback a token is required; with one,
// requests without it are refused.
func TestRESTTokenAndLoopback(t *testing.T) {
	t.Parallel()
	env := weir.NewEnvironment(weir.Options{REST: weir.RESTOptions{Enabled: true, BindAddress: "0.0.0.0", Port: "0"}})
	weir.SinkTo(weir.FromSource(env, source.Sequence(0, 10)), sink.Discard[int64]())
	err := env.Execute(context.Background(), "open")
	if err == nil || !strings.Contains(err.Error(), "rest.auth.token") {
		t.Fatalf("binding 0.0.0.0 without a token: %v, want an error naming rest.auth.token", err)
	}

	rc := startCounter(t, func(o *weir.Options) { o.REST.AuthToken = "s3cret" })
	call(t, "GET", rc.url+"/jobs", "", nil, 401, nil)
	call(t, "GET", rc.url+"/jobs", "wrong", nil, 401, nil)
	call(t, "GET", rc.url+"/metrics", "", nil, 401, nil)
	var jobsList m
	call(t, "GET", rc.url+"/jobs", "s3cret", nil, 200, &jobsList)
}

// TestDashboardOfRunningJob opens the dashboard of a real running job in
// headless Chromium: it shows the job and its vertices, the checkpoint
// chart has a bar per checkpoint, and a history row opens the drill-down.
// WEIR_SCREENSHOT_DIR=$PWD/docs/img keeps the screenshots (docs/dashboard.md).
func TestDashboardOfRunningJob(t *testing.T) {
	t.Parallel()
	ctx := webtest.Browser(t) // skips without chromium unless WEIR_REQUIRE_BROWSER is set
	rc := startCounter(t, func(o *weir.Options) {
		o.Checkpoint.Interval = 200 * time.Millisecond
		o.StatusInterval = time.Second
	})
	var jobsList struct {
		Jobs []struct{ ID string }
	}
	call(t, "GET", rc.url+"/jobs", "", nil, 200, &jobsList)
	jid := jobsList.Jobs[0].ID
	eventually(t, "three completed checkpoints", func() error {
		if n := rc.completed.Load(); n < 3 {
			return fmt.Errorf("%d completed", n)
		}
		return nil
	})
	if name := webtest.WaitDashboard(ctx, t, rc.url+"/"); name != "counter" {
		t.Fatalf("dashboard selected job %q, want counter", name)
	}
	webtest.WaitText(ctx, t, "#job-state", `^RUNNING$`)
	var job struct{ Vertices []m }
	call(t, "GET", rc.url+"/jobs/"+jid, "", nil, 200, &job)
	webtest.WaitCount(ctx, t, "#graph .vertex[data-vertex-id]", len(job.Vertices))
	for _, v := range job.Vertices {
		webtest.WaitVisible(ctx, t, fmt.Sprintf(`#graph .vertex[data-vertex-id=%q]`, v["id"]))
	}
	webtest.WaitText(ctx, t, "#graph .vertex .vertex-rate", `/s`) // rates need two refreshes
	webtest.Screenshot(ctx, t, "dashboard-live-overview")

	webtest.Click(ctx, t, "#tab-checkpoints")
	webtest.WaitFor(ctx, t, "at least 3 bars in the checkpoint chart",
		`document.querySelectorAll("#checkpoint-chart .bar[data-checkpoint-id]").length >= 3`)
	webtest.WaitFor(ctx, t, "a history row per chart bar",
		`document.querySelectorAll("#checkpoint-table tr[data-checkpoint-id]").length ===
		 document.querySelectorAll("#checkpoint-chart .bar[data-checkpoint-id]").length`)
	webtest.Click(ctx, t, "#checkpoint-table tr[data-checkpoint-id] button")
	webtest.WaitVisible(ctx, t, "#checkpoint-detail")
	webtest.WaitFor(ctx, t, "a subtask table per vertex in the drill-down",
		fmt.Sprintf(`document.querySelectorAll("#checkpoint-detail table.subtasks[data-vertex-id]").length === %d`, len(job.Vertices)))
	webtest.Screenshot(ctx, t, "dashboard-live-checkpoints")
}

// Bad REST options are refused before anything starts, each naming its
// key and what is valid.
func TestRESTOptionsValidation(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		rest weir.RESTOptions
		want string
	}{
		{weir.RESTOptions{Enabled: true, Port: "80a"}, `rest.port/rest.bind-port: port "80a" is not a port`},
		{weir.RESTOptions{Enabled: true, Port: "9000-8000"}, "a range such as 50100-50200"},
		{weir.RESTOptions{Enabled: true, PrometheusPort: "x"}, "metrics.reporter.prom.port"},
		{weir.RESTOptions{Enabled: true, CertFile: "cert.pem"}, "rest.ssl.cert and rest.ssl.key"},
		{weir.RESTOptions{Enabled: true, BindAddress: "10.1.2.3"}, "set rest.auth.token"},
		{weir.RESTOptions{Enabled: true, HistorySize: -1}, "web.checkpoints.history"},
	} {
		o := weir.Options{REST: c.rest}
		o.EnsureDefaults()
		err := o.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error containing %q", c.rest, err, c.want)
		}
	}
	for _, ok := range []weir.RESTOptions{
		{Enabled: true, BindAddress: "[::1]", Port: "0"},
		{Enabled: true, BindAddress: "0.0.0.0", AuthToken: "t", Port: "50100-50200"},
		{Enabled: false, Port: "nonsense"}, // off: not looked at
	} {
		o := weir.Options{REST: ok}
		o.EnsureDefaults()
		if err := o.Validate(); err != nil {
			t.Errorf("%+v: %v", ok, err)
		}
	}
}

// metrics.reporter.prom.port serves /metrics on a port of its own too.
func TestPrometheusOnItsOwnPort(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close() // free again for the job (another process could take it in between: then the job fails loudly)
	rc := startCounter(t, func(o *weir.Options) { o.REST.PrometheusPort = port })
	if strings.HasSuffix(rc.url, ":"+port) {
		t.Fatalf("the REST server took the Prometheus port %s", port)
	}
	eventually(t, "the job metrics on the Prometheus port", func() error {
		resp, err := http.Get("http://127.0.0.1:" + port + "/metrics")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if !strings.Contains(string(body), "weir_jobmanager_job_totalNumberOfCheckpoints{") ||
			!strings.Contains(string(body), "weir_taskmanager_job_task_busyTimeMsPerSecond{") {
			return fmt.Errorf("status %d, body %.300s", resp.StatusCode, body)
		}
		return nil
	})
}

// A run without checkpoints holds no job lock: it registers in the user's
// runtime directory instead of the checkpoint directory, which it leaves
// untouched, and deregisters at the end.
func TestDiscoveryWithoutCheckpoints(t *testing.T) {
	t.Parallel()
	rc := startCounter(t, func(o *weir.Options) { o.Checkpoint.Interval = 0 })
	var jobID string
	eventually(t, "the local discovery file", func() error {
		found, err := rest.FindLocalDiscovery()
		if err != nil {
			return err
		}
		for _, d := range found {
			if d.URL == rc.url {
				jobID = d.JobID
				return nil
			}
		}
		return fmt.Errorf("%s not among %+v", rc.url, found)
	})
	call(t, "PATCH", rc.url+"/jobs/"+jobID+"?mode=cancel", "", nil, 202, nil)
	if err := <-rc.done; !errors.Is(err, weir.ErrCanceled) {
		t.Fatalf("after cancel: %v", err)
	}
	rc.done <- nil
	found, _ := rest.FindLocalDiscovery()
	for _, d := range found {
		if d.JobID == jobID {
			t.Fatalf("the discovery file of %s outlived the run", jobID)
		}
	}
	if _, err := os.Stat(rc.chkDir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a run without checkpoints created its checkpoint directory: %v", err)
	}
}
