package doctor_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/internal/cli"
	"github.com/weirstream/weir/internal/doctor"
	"github.com/weirstream/weir/internal/jobs"
	"github.com/weirstream/weir/internal/rest"
)

// progress counts what a scenario's job did so far.
type progress struct {
	completed, expired, declined atomic.Int64
}

// scenario is a troubled job to run until stop says it showed enough.
type scenario struct {
	induce string
	stop   func(p *progress) bool
	// sets are configuration items after the job's defaults.
	sets []string
	// live, if set, runs the job with its REST server on a free port and
	// is called with the server's URL once stop holds, while the job
	// still runs.
	live func(url string)
}

// ran is where a scenario's run left its checkpoints and log.
type ran struct {
	dir, job, log string
}

// scenarioTimeout bounds a scenario's run; each stops well before it.
const scenarioTimeout = 30 * time.Second

// runScenario runs the troubled job in process, with its default
// configuration, a fresh checkpoint directory and a text log in a file,
// until sc.stop holds; it fails the test if the job ends first or the
// run times out.
func runScenario(t *testing.T, sc scenario) ran {
	t.Helper()
	job := jobs.NewTroubled().(*jobs.Troubled)
	job.SetInduce(sc.induce)
	var items []string
	for k, v := range job.Defaults() {
		items = append(items, k+"="+v)
	}
	slices.Sort(items)
	r := ran{dir: t.TempDir(), job: "troubled-" + sc.induce}
	items = append(items, "execution.checkpointing.dir="+r.dir)
	items = append(items, sc.sets...)
	cfg, err := config.LoadFile("", items)
	if err != nil {
		t.Fatal(err)
	}
	opts := weir.OptionsFromConfig(cfg)
	r.log = filepath.Join(t.TempDir(), "job.log")
	f, err := os.Create(r.log)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	ctx, cancel := context.WithTimeout(context.Background(), scenarioTimeout)
	defer cancel()
	var p progress
	var stopped atomic.Bool
	showed := make(chan struct{})
	check := func() {
		if sc.stop(&p) && stopped.CompareAndSwap(false, true) {
			close(showed)
		}
	}
	urls := make(chan string, 1)
	if sc.live != nil {
		opts.REST = weir.RESTOptions{Enabled: true, Port: "0", OnStart: func(u string) { urls <- u }}
	}
	opts.Logger = slog.New(&watcher{Handler: slog.NewTextHandler(f, nil), p: &p, check: check})
	opts.OnCheckpointComplete = func(weir.CompletedCheckpoint) {
		p.completed.Add(1)
		check()
	}
	env := weir.NewEnvironment(opts)
	if err := job.Build(env, io.Discard); err != nil {
		t.Fatal(err)
	}
	// As `weir run` does: the doctor reads the configuration from it.
	opts.Logger.Info("running job", "job", r.job, "config", cfg.Explicit())
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- env.Execute(ctx, r.job) }()
	select {
	case <-showed:
		if sc.live != nil {
			sc.live(<-urls)
		}
		cancel()
		err = <-done
	case err = <-done:
	}
	if !stopped.Load() {
		t.Fatalf("the %s scenario ended before it showed its problem (completed %d, expired %d, declined %d): %v",
			sc.induce, p.completed.Load(), p.expired.Load(), p.declined.Load(), err)
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		t.Logf("the job ended with %v", err)
	}
	t.Logf("%s: ran %s: completed %d, expired %d, declined %d", sc.induce, time.Since(start).Round(time.Millisecond),
		p.completed.Load(), p.expired.Load(), p.declined.Load())
	return r
}

var (
	expiredMsg  = regexp.MustCompile(`^Checkpoint \d+ of job .* expired before completing\.$`)
	declinedMsg = regexp.MustCompile(`^Decline checkpoint \d+ by task `)
)

// watcher counts expired and declined checkpoints as the job logs them.
type watcher struct {
	slog.Handler
	p     *progress
	check func()
	mu    sync.Mutex
}

func (w *watcher) Handle(ctx context.Context, r slog.Record) error {
	err := w.Handler.Handle(ctx, r)
	switch {
	case expiredMsg.MatchString(r.Message):
		w.p.expired.Add(1)
	case declinedMsg.MatchString(r.Message):
		w.p.declined.Add(1)
	default:
		return err
	}
	w.check()
	return err
}

func (w *watcher) WithAttrs(as []slog.Attr) slog.Handler {
	return &watcher{Handler: w.Handler.WithAttrs(as), p: w.p, check: w.check}
}

func (w *watcher) WithGroup(name string) slog.Handler {
	return &watcher{Handler: w.Handler.WithGroup(name), p: w.p, check: w.check}
}

// diagnoseOffline runs the doctor on what the scenario left.
func diagnoseOffline(t *testing.T, r ran) doctor.Report {
	t.Helper()
	in, err := doctor.FromCheckpoints(context.Background(), r.dir, r.job, 10, r.log)
	if err != nil {
		t.Fatal(err)
	}
	rep := doctor.Diagnose(in, doctor.Options{})
	t.Logf("report:\n%s", rep.Text())
	return rep
}

func completed(n int64) func(*progress) bool {
	return func(p *progress) bool { return p.completed.Load() >= n }
}

// expectation is what the doctor must say about a scenario.
type expectation struct {
	cause doctor.Cause
	// vertex is part of the named vertex's name ("" : none is named),
	// subtask the named subtask (-1: any).
	vertex  string
	subtask int
	// evidence are parts of the finding's evidence.
	evidence []string
	// companions are causes that may accompany the cause at the same
	// severity (failures go with expired and declined checkpoints).
	companions []doctor.Cause
}

// check asserts that the report's first finding is want's cause at want's
// subtask, and that no other finding competes with it: any other is of
// lower severity or a companion.
func (want expectation) check(t *testing.T, rep doctor.Report) {
	t.Helper()
	if len(rep.Findings) == 0 {
		t.Fatalf("no finding, want %s", want.cause)
	}
	f := rep.Findings[0]
	if f.Cause != want.cause {
		t.Fatalf("first finding is %s, want %s", f.Cause, want.cause)
	}
	if f.Severity == doctor.SeverityInfo {
		t.Errorf("%s is only %s", f.Cause, f.Severity)
	}
	if !strings.Contains(f.Vertex, want.vertex) || (want.vertex == "" && f.Vertex != "") {
		t.Errorf("%s names vertex %q, want one containing %q", f.Cause, f.Vertex, want.vertex)
	}
	if want.subtask >= 0 && f.Subtask != want.subtask {
		t.Errorf("%s names subtask %d, want %d", f.Cause, f.Subtask, want.subtask)
	}
	for _, e := range want.evidence {
		if !strings.Contains(f.Evidence, e) {
			t.Errorf("%s evidence lacks %q: %s", f.Cause, e, f.Evidence)
		}
	}
	for _, g := range rep.Findings[1:] {
		if g.Severity == f.Severity && !slices.Contains(want.companions, g.Cause) {
			t.Errorf("%s competes with %s at severity %s", g.Cause, f.Cause, g.Severity)
		}
	}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var back doctor.Report
	if err := json.Unmarshal(b, &back); err != nil || back.Findings[0].Cause != want.cause {
		t.Errorf("the report does not survive JSON: %v", err)
	}
}

// TestDoctorScenarios runs the troubled job for each problem, in process,
// until it showed it (a few checkpoints, or failures), then diagnoses its
// checkpoint directory and log offline.
func TestDoctorScenarios(t *testing.T) {
	for _, x := range []struct {
		sc   scenario
		want expectation
	}{
		{scenario{induce: "backpressure", stop: completed(4)},
			expectation{cause: doctor.CauseStartDelay, vertex: "Slow writer", subtask: -1, evidence: []string{"Events"}}},
		{scenario{induce: "skew", stop: completed(4)},
			expectation{cause: doctor.CauseAlignment, vertex: "Count", subtask: -1, evidence: []string{"fuller channel"}}},
		{scenario{induce: "slow-sync", stop: completed(4)},
			expectation{cause: doctor.CauseSyncPhase, vertex: "Buffering", subtask: 0}},
		{scenario{induce: "slow-async", stop: completed(4)},
			expectation{cause: doctor.CauseAsyncPhase, vertex: "Large state", subtask: 0, evidence: []string{"48.1 MiB"}}},
		{scenario{induce: "growth", stop: completed(6)},
			expectation{cause: doctor.CauseStateGrowth, vertex: "Sessions", subtask: 0}},
		// Offline, nothing says which subtasks an expired checkpoint
		// waited for: weir cancels the uploads of an expired checkpoint,
		// so no late acknowledgement is logged either.
		{scenario{induce: "expire", stop: func(p *progress) bool { return p.expired.Load() >= 3 }},
			expectation{cause: doctor.CauseExpired, subtask: -1, evidence: []string{"60ms timeout"},
				companions: []doctor.Cause{doctor.CauseFailures}}},
		{scenario{induce: "decline", stop: func(p *progress) bool { return p.declined.Load() >= 2 }},
			expectation{cause: doctor.CauseDeclined, vertex: "Flaky sink", subtask: 1,
				evidence: []string{"injected storage error"}, companions: []doctor.Cause{doctor.CauseFailures}}},
	} {
		t.Run(x.sc.induce, func(t *testing.T) {
			t.Parallel()
			r := runScenario(t, x.sc)
			x.want.check(t, diagnoseOffline(t, r))
		})
	}
}

// TestDoctorScenarioLive asks a running job's REST server, through `weir
// doctor <jobid> --url`, about its expiring checkpoints: live, the doctor
// knows which subtask had not acknowledged them, which the checkpoint
// directory and the log cannot tell.
func TestDoctorScenarioLive(t *testing.T) {
	t.Parallel()
	var rep doctor.Report
	runScenario(t, scenario{induce: "expire", stop: func(p *progress) bool { return p.expired.Load() >= 3 },
		live: func(url string) {
			ctx := context.Background()
			jobs, err := rest.NewClient(url, "", nil).Jobs(ctx)
			if err != nil || len(jobs) != 1 {
				t.Fatalf("jobs at %s: %v %v", url, jobs, err)
			}
			var stdout, stderr bytes.Buffer
			if code := cli.Main([]string{"doctor", jobs[0].JID, "--url", url, "--json"}, strings.NewReader(""),
				&stdout, &stderr); code != cli.ExitOK {
				t.Fatalf("weir doctor exited with %d: %s", code, stderr.String())
			}
			if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
				t.Fatalf("%v: %s", err, stdout.String())
			}
		}})
	t.Logf("report:\n%s", rep.Text())
	if rep.Source != doctor.SourceLive {
		t.Errorf("source %q", rep.Source)
	}
	expectation{cause: doctor.CauseExpired, vertex: "Large state", subtask: 0,
		evidence:   []string{"60ms timeout", "Not acknowledged when they expired: Large state -> Discard (1/1)"},
		companions: []doctor.Cause{doctor.CauseFailures}}.check(t, rep)
}
