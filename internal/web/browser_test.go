package web_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/weirstream/weir/internal/web/webtest"
)

// TestDashboardInBrowser loads the dashboard in a headless Chromium against
// the fake API and checks what a person would look at: the job, the graph
// with its backpressure colours, rates and watermarks, the checkpoint chart
// and history, the drill-down of one checkpoint, and the error banner.
//
// WEIR_SCREENSHOT_DIR=$PWD/docs/img go test ./internal/web -run TestDashboardInBrowser
// writes the screenshots of docs/dashboard.md.
func TestDashboardInBrowser(t *testing.T) {
	fake := newFakeAPI("")
	srv := httptest.NewServer(fake.handler())
	t.Cleanup(srv.Close)
	ctx := webtest.Browser(t)

	vertex := func(id string) string { return fmt.Sprintf(`#graph .vertex[data-vertex-id=%q]`, id) }

	t.Run("job", func(t *testing.T) {
		if name := webtest.WaitDashboard(ctx, t, srv.URL+"/"); name != jobName {
			t.Errorf("selected job %q, want the running one, %q", name, jobName)
		}
		webtest.WaitCount(ctx, t, "#job-list tr[data-job-id]", 2)
		webtest.WaitCount(ctx, t, fmt.Sprintf(`#job-list tr.selected[data-job-id=%q]`, jobID), 1)
		webtest.WaitText(ctx, t, "#job-state", `^RUNNING$`)
		webtest.WaitText(ctx, t, "#job-duration", `^47 m \d+ s$`)
		webtest.WaitText(ctx, t, "#job-start", `^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$`)
		webtest.WaitText(ctx, t, fmt.Sprintf(`#job-list tr[data-job-id=%q] td:nth-child(2)`, oldJobID), `^FINISHED$`)
	})

	t.Run("graph", func(t *testing.T) {
		webtest.WaitCount(ctx, t, "#graph .vertex[data-vertex-id]", 2)
		webtest.WaitCount(ctx, t, fmt.Sprintf(`#graph .edge[data-from=%q][data-to=%q]`, srcID, winID), 1)
		webtest.WaitCount(ctx, t, vertex(srcID)+`[data-backpressure="high"]`, 1)
		webtest.WaitCount(ctx, t, vertex(winID)+`[data-backpressure="ok"]`, 1)
		for id, want := range map[string]string{srcID: "rgb(198, 40, 40)", winID: "rgb(46, 125, 50)"} {
			if got := webtest.Eval[string](ctx, t, fmt.Sprintf(`getComputedStyle(document.querySelector(%q)).fill`, vertex(id)+" .bp")); got != want {
				t.Errorf("backpressure colour of %s is %s, want %s", id, got, want)
			}
		}
		// The source sits left of the window: the layout follows the edges.
		x := func(id string) float64 {
			return webtest.Eval[float64](ctx, t, fmt.Sprintf(`document.querySelector(%q).getBoundingClientRect().x`, vertex(id)))
		}
		if xs, xw := x(srcID), x(winID); xs >= xw {
			t.Errorf("source at x=%v is not left of its consumer at x=%v", xs, xw)
		}
		webtest.WaitText(ctx, t, vertex(srcID)+" .vertex-meta", `^parallelism 2 · RUNNING$`)
		webtest.WaitText(ctx, t, vertex(srcID)+" .vertex-watermark", `^no watermark$`)
		webtest.WaitText(ctx, t, vertex(winID)+" .vertex-watermark", `^watermark \d\d:\d\d:\d\d\.\d{3}$`)
		// Rates need two samples, so this waits for a second refresh.
		webtest.WaitText(ctx, t, vertex(srcID)+" .vertex-rate", `^out [0-9.]+k?/s$`)
		webtest.WaitText(ctx, t, vertex(winID)+" .vertex-rate", `^in [0-9.]+k?/s · out [0-9.]+/s$`)

		webtest.Click(ctx, t, vertex(srcID))
		webtest.WaitVisible(ctx, t, "#vertex-detail")
		webtest.WaitCount(ctx, t, fmt.Sprintf(`#vertex-detail table.backpressure-subtasks[data-vertex-id=%q] tbody tr`, srcID), 2)
		webtest.Screenshot(ctx, t, "dashboard-overview")
	})

	t.Run("checkpoints", func(t *testing.T) {
		webtest.Click(ctx, t, "#tab-checkpoints")
		webtest.WaitVisible(ctx, t, "#checkpoint-chart svg")
		webtest.WaitCount(ctx, t, "#checkpoint-chart .bar[data-checkpoint-id]", numCPs)
		webtest.WaitCount(ctx, t, "#checkpoint-table tr[data-checkpoint-id]", numCPs)
		// Every finished checkpoint gets its phases from the details; the
		// running one is drawn whole.
		webtest.WaitCount(ctx, t, `#checkpoint-chart .bar[data-breakdown="loaded"]`, numCPs-1)
		webtest.WaitCount(ctx, t, fmt.Sprintf(`#checkpoint-chart .bar[data-checkpoint-id="%d"] .seg-async`, 7), 1)
		webtest.WaitCount(ctx, t, fmt.Sprintf(`#checkpoint-chart .bar.status-failed[data-checkpoint-id="%d"] .seg-failed`, failedCP), 1)
		webtest.WaitCount(ctx, t, fmt.Sprintf(`#checkpoint-chart .bar.status-in_progress[data-checkpoint-id="%d"]`, runningCP), 1)
		webtest.WaitCount(ctx, t, "#checkpoint-chart .point-checkpointed", numCPs-1)
		webtest.WaitCount(ctx, t, "#checkpoint-chart .point-state", numCPs-1)
		webtest.WaitText(ctx, t, "#checkpoint-table tbody tr:first-child", fmt.Sprintf(`^#%dIN_PROGRESS`, runningCP))
		webtest.WaitText(ctx, t, fmt.Sprintf(`#checkpoint-table tr[data-checkpoint-id="%d"]`, failedCP), `FAILED`)
		webtest.WaitText(ctx, t, "#checkpoint-failures", `#5 failed at .*connection reset by peer`)
		webtest.WaitText(ctx, t, "#checkpoint-counts", `Total8Completed6Failed1In progress1Restored0`)
		webtest.WaitText(ctx, t, `#checkpoint-summary tr[data-metric="end_to_end_duration"]`, `ms`)

		webtest.Click(ctx, t, fmt.Sprintf(`#checkpoint-table tr[data-checkpoint-id="%d"] button`, unaligned))
		webtest.WaitVisible(ctx, t, "#checkpoint-detail")
		webtest.WaitText(ctx, t, "#checkpoint-detail h3", fmt.Sprintf(`^Checkpoint #%d$`, unaligned))
		webtest.WaitCount(ctx, t, "#checkpoint-detail-tasks tbody tr", 2)
		webtest.WaitCount(ctx, t, fmt.Sprintf(`#checkpoint-detail table.subtasks[data-vertex-id=%q] tbody tr`, srcID), 2)
		webtest.WaitCount(ctx, t, fmt.Sprintf(`#checkpoint-detail table.subtasks[data-vertex-id=%q] tbody tr`, winID), 4)
		webtest.WaitText(ctx, t, fmt.Sprintf(`#checkpoint-detail table.subtasks[data-vertex-id=%q] tbody tr[data-subtask="0"] td:nth-child(14)`, winID), `^yes$`)
		webtest.Screenshot(ctx, t, "dashboard-checkpoints")

		// A failed checkpoint's drill-down shows its message and the
		// subtasks that never acknowledged.
		webtest.Click(ctx, t, fmt.Sprintf(`#checkpoint-table tr[data-checkpoint-id="%d"] button`, failedCP))
		webtest.WaitText(ctx, t, "#checkpoint-detail h3", fmt.Sprintf(`^Checkpoint #%d$`, failedCP))
		webtest.WaitText(ctx, t, "#checkpoint-detail .meta", `connection reset by peer`)
		webtest.WaitCount(ctx, t, fmt.Sprintf(`#checkpoint-detail table.subtasks[data-vertex-id=%q] tbody tr.pending`, winID), 2)
	})

	t.Run("details are fetched once", func(t *testing.T) {
		// Many refreshes have passed; a finished checkpoint's details are
		// not asked for again (the drill-down asked once more for 5 and 6).
		for id := 1; id < numCPs; id++ {
			p := fmt.Sprintf("/jobs/%s/checkpoints/details/%d", jobID, id)
			want := 1
			if id == failedCP || id == unaligned {
				want = 2
			}
			if n := fake.count(p); n != want {
				t.Errorf("%s fetched %d times, want %d", p, n, want)
			}
		}
		if n := fake.count(fmt.Sprintf("/jobs/%s/checkpoints/details/%d", jobID, runningCP)); n != 0 {
			t.Errorf("the running checkpoint's details were fetched %d times for the chart, want 0", n)
		}
	})

	t.Run("error banner", func(t *testing.T) {
		path := "/jobs/" + jobID + "/checkpoints"
		fake.fail(path, http.StatusInternalServerError)
		webtest.WaitVisible(ctx, t, "#error-banner")
		webtest.WaitText(ctx, t, "#error-banner", `checkpoints: 500 injected failure`)
		// The rest of the page stays.
		webtest.WaitCount(ctx, t, "#checkpoint-table tr[data-checkpoint-id]", numCPs)
		fake.fail(path, 0)
		webtest.WaitFor(ctx, t, "the banner to go away", `document.querySelector('#error-banner').hidden`)
	})

	t.Run("error on first load", func(t *testing.T) {
		fake.fail("/jobs/overview", http.StatusServiceUnavailable)
		webtest.Navigate(ctx, t, srv.URL+"/")
		webtest.WaitText(ctx, t, "#error-banner", `jobs/overview: 503 injected failure`)
		fake.fail("/jobs/overview", 0)
		webtest.WaitCount(ctx, t, "#graph .vertex[data-vertex-id]", 2)
		webtest.WaitFor(ctx, t, "the banner to go away", `document.querySelector('#error-banner').hidden`)
	})

	t.Run("pause", func(t *testing.T) {
		webtest.Click(ctx, t, "#pause")
		webtest.WaitText(ctx, t, "#pause", `^Resume$`)
		webtest.WaitText(ctx, t, "#status-line", `paused`)
		webtest.Click(ctx, t, "#pause")
		webtest.WaitText(ctx, t, "#pause", `^Pause$`)
	})
}

// TestDashboardAsksForToken checks that the page asks for the bearer token
// when the API answers 401, and then sends it with every request.
func TestDashboardAsksForToken(t *testing.T) {
	const token = "s3cret-token"
	fake := newFakeAPI(token)
	srv := httptest.NewServer(fake.handler())
	t.Cleanup(srv.Close)
	ctx := webtest.Browser(t)

	webtest.Navigate(ctx, t, srv.URL+"/")
	webtest.WaitVisible(ctx, t, "#auth")
	webtest.WaitVisible(ctx, t, "#token-input")
	webtest.Eval[bool](ctx, t, fmt.Sprintf(`(() => { document.querySelector('#token-input').value = %q; return true; })()`, token))
	webtest.Click(ctx, t, "#token-submit")
	webtest.WaitFor(ctx, t, "the prompt to go away", `document.querySelector('#auth').hidden`)
	webtest.WaitCount(ctx, t, "#graph .vertex[data-vertex-id]", 2)

	auths := fake.authorizations()
	if len(auths) == 0 || auths[0] != "" {
		t.Errorf("first request carried %q, want no token", auths[:min(1, len(auths))])
	}
	last := auths[len(auths)-1]
	if last != "Bearer "+token {
		t.Errorf("requests after the prompt carry %q, want %q", last, "Bearer "+token)
	}
	if got := webtest.Eval[string](ctx, t, `sessionStorage.getItem('weir.token')`); got != token {
		t.Errorf("sessionStorage has %q, want the token", got)
	}
	// A reload uses the stored token and does not ask again.
	webtest.Navigate(ctx, t, srv.URL+"/")
	webtest.WaitCount(ctx, t, "#graph .vertex[data-vertex-id]", 2)
	if !webtest.Eval[bool](ctx, t, `document.querySelector('#auth').hidden`) {
		t.Error("the page asked for the token again after a reload")
	}
	for _, a := range fake.authorizations()[len(auths):] {
		if !strings.HasSuffix(a, token) {
			t.Fatalf("a request after the reload carried %q", a)
		}
	}
}
