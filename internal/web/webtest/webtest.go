// Package webtest drives weir's dashboard in a headless Chromium, for the
// tests of internal/web against a fake API and for integration tests against
// a real server. It imports testing, so only tests may import it.
//
// Chromium is optional on a developer's machine: without it the tests that
// call Browser are skipped, unless WEIR_REQUIRE_BROWSER is set (as in CI),
// and then they fail.
package webtest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Environment variables read by this package.
const (
	// EnvRequireBrowser, when set to anything, turns a missing Chromium from
	// a skip into a failure.
	EnvRequireBrowser = "WEIR_REQUIRE_BROWSER"
	// EnvScreenshotDir is where Screenshot writes; a temporary directory of
	// the test when unset.
	EnvScreenshotDir = "WEIR_SCREENSHOT_DIR"
	// EnvChromium names the browser binary, when it is not on PATH under a
	// usual name.
	EnvChromium = "WEIR_CHROMIUM"
)

// Timeout bounds each wait of this package. A wait that runs out fails the
// test with what it waited for.
var Timeout = 30 * time.Second

// browserNames are tried in order on PATH when EnvChromium is unset.
var browserNames = []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless-shell"}

// ExecPath returns the Chromium binary to use, or "" when there is none.
func ExecPath() string {
	if p := os.Getenv(EnvChromium); p != "" {
		if _, err := exec.LookPath(p); err == nil {
			return p
		}
		return ""
	}
	for _, name := range browserNames {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// Browser starts a headless Chromium for t and returns the context of one of
// its tabs, for chromedp actions and for the other functions of this package.
// The browser runs in a fresh profile, with the flags that keep it from
// reaching for the network (the test machines have none), and it is closed
// when t ends. A new tab of the same browser is chromedp.NewContext(ctx).
//
// The console of the tab is logged to t, and an uncaught exception of the
// page fails t: the dashboard must not throw, whatever the API answers.
//
// Without a browser, Browser skips t, or fails it when EnvRequireBrowser is
// set.
func Browser(t testing.TB) context.Context {
	t.Helper()
	path := ExecPath()
	if path == "" {
		msg := fmt.Sprintf("no Chromium found (set %s or put one of %v on PATH; on Debian: apt-get install chromium)", EnvChromium, browserNames)
		if os.Getenv(EnvRequireBrowser) != "" {
			t.Fatalf("%s, and %s is set", msg, EnvRequireBrowser)
		}
		t.Skipf("%s; set %s to make this a failure", msg, EnvRequireBrowser)
	}

	// Chromium keeps lock files in TMPDIR beside the profile: both go in
	// directories of the test, which removes them.
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.Env("TMPDIR="+t.TempDir()),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-domain-reliability", true),
		chromedp.Flag("no-pings", true),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(allocCtx)

	// The first action starts the browser and ties it to the context it
	// gets, so it must not get one with a deadline; the timer bounds the
	// start instead.
	started := make(chan error, 1)
	go func() { started <- chromedp.Do(ctx) }()
	select {
	case err := <-started:
		if err != nil {
			cancelTab()
			cancelAlloc()
			t.Fatalf("starting %s: %v", path, err)
		}
	case <-time.After(Timeout):
		cancelTab()
		cancelAlloc()
		t.Fatalf("starting %s: no answer after %s", path, Timeout)
	}

	var mu sync.Mutex
	closed := false
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			mu.Lock()
			if !closed {
				if m.IsException() {
					t.Errorf("uncaught exception in the page: %s (%s:%d)", m, m.URL, m.Line+1)
				} else {
					t.Logf("browser console: %s", m)
				}
			}
			mu.Unlock()
		}
	}()

	t.Cleanup(func() {
		mu.Lock()
		closed = true
		mu.Unlock()
		// Close the browser as a person would, so that it removes its lock
		// files; killing it (the cancels) is the fallback.
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = chromedp.Cancel(ctx)
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
		}
		cancelTab()
		cancelAlloc()
	})
	return ctx
}

// js quotes s as a JavaScript string literal.
func js(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// WaitFor waits until the JavaScript expression expr is truthy in the page,
// and fails t after Timeout, naming what (a few words: what the test waited
// for), the expression, the error banner of the dashboard if it shows one,
// and a screenshot of the page.
func WaitFor(ctx context.Context, t testing.TB, what, expr string) {
	t.Helper()
	waitFor(ctx, t, expr, func() string { return what })
}

// waitFor is WaitFor with a description made at the time of the failure, so
// that it can tell what the page had then.
func waitFor(ctx context.Context, t testing.TB, expr string, what func() string) {
	t.Helper()
	wctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	_, err := chromedp.Run(wctx, chromedp.Poll[chromedp.Void](expr,
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(Timeout)))
	if err != nil {
		fail(ctx, t, fmt.Sprintf("waiting for %s (%s): %v", what(), expr, err))
	}
}

// fail reports a failed wait with the state of the page, then stops t.
func fail(ctx context.Context, t testing.TB, msg string) {
	t.Helper()
	if banner := bannerText(ctx); banner != "" {
		msg += "\nthe dashboard's error banner says: " + banner
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if png, err := chromedp.Run(sctx, chromedp.FullScreenshot(100)); err == nil {
		p := filepath.Join(ScreenshotDir(t), "failure-"+fileName(t.Name())+".png")
		if os.WriteFile(p, png, 0o644) == nil {
			msg += "\nscreenshot of the page: " + p
		}
	}
	t.Fatal(msg)
}

func bannerText(ctx context.Context) string {
	bctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s, err := chromedp.Run(bctx, chromedp.Evaluate[string](
		`(() => { const b = document.querySelector('#error-banner'); return b && !b.hidden ? b.innerText : ''; })()`))
	if err != nil {
		return ""
	}
	return s
}

// WaitVisible waits until an element matching the CSS selector is visible.
func WaitVisible(ctx context.Context, t testing.TB, selector string) {
	t.Helper()
	WaitFor(ctx, t, "a visible "+selector, fmt.Sprintf(
		`(() => { const e = document.querySelector(%s); return !!e && e.getClientRects().length > 0 && getComputedStyle(e).visibility !== 'hidden'; })()`,
		js(selector)))
}

// WaitCount waits until exactly n elements match the CSS selector.
func WaitCount(ctx context.Context, t testing.TB, selector string, n int) {
	t.Helper()
	waitFor(ctx, t, fmt.Sprintf(`document.querySelectorAll(%s).length === %d`, js(selector), n),
		func() string { return fmt.Sprintf("%d of %s (the page has %s)", n, selector, countNow(ctx, selector)) })
}

func countNow(ctx context.Context, selector string) string {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	n, err := chromedp.Run(cctx, chromedp.Evaluate[int](fmt.Sprintf(`document.querySelectorAll(%s).length`, js(selector))))
	if err != nil {
		return "unknown"
	}
	return fmt.Sprint(n)
}

func textNow(ctx context.Context, selector string) string {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s, err := chromedp.Run(cctx, chromedp.Evaluate[*string](fmt.Sprintf(
		`(() => { const e = document.querySelector(%s); return e ? e.textContent : null; })()`, js(selector))))
	switch {
	case err != nil:
		return "unknown"
	case s == nil:
		return "missing"
	}
	return fmt.Sprintf("%q", *s)
}

// WaitText waits until the text of the first element matching the CSS
// selector matches the regular expression re, and returns that text.
func WaitText(ctx context.Context, t testing.TB, selector, re string) string {
	t.Helper()
	regexp.MustCompile(re) // a typo in the test must not look like a timeout
	waitFor(ctx, t, fmt.Sprintf(
		`(() => { const e = document.querySelector(%s); return !!e && new RegExp(%s).test(e.textContent); })()`,
		js(selector), js(re)),
		func() string {
			return fmt.Sprintf("the text of %s to match %s (it is %s)", selector, re, textNow(ctx, selector))
		})
	return Eval[string](ctx, t, fmt.Sprintf(`document.querySelector(%s).textContent`, js(selector)))
}

// Eval evaluates a JavaScript expression in the page and returns its value.
func Eval[T any](ctx context.Context, t testing.TB, expr string) T {
	t.Helper()
	ectx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	v, err := chromedp.Run(ectx, chromedp.Evaluate[T](expr))
	if err != nil {
		fail(ctx, t, fmt.Sprintf("evaluating %s: %v", expr, err))
	}
	return v
}

// Click clicks the first element matching the CSS selector, once it is
// visible.
func Click(ctx context.Context, t testing.TB, selector string) {
	t.Helper()
	WaitVisible(ctx, t, selector)
	cctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	if err := chromedp.Do(cctx, chromedp.Click(chromedp.CSS(selector), chromedp.NodeVisible)); err != nil {
		fail(ctx, t, fmt.Sprintf("clicking %s: %v", selector, err))
	}
}

// Navigate loads url in the tab.
func Navigate(ctx context.Context, t testing.TB, url string) {
	t.Helper()
	nctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	if err := chromedp.Do(nctx, chromedp.Navigate(url)); err != nil {
		t.Fatalf("loading %s: %v", url, err)
	}
}

// WaitDashboard loads the dashboard at url (the server's root, such as
// http://127.0.0.1:8081/) and waits until it shows a selected job with its
// graph: a row in #job-list, the job's title, and at least one vertex in
// #graph. It returns the name of the selected job.
func WaitDashboard(ctx context.Context, t testing.TB, url string) string {
	t.Helper()
	Navigate(ctx, t, url)
	WaitFor(ctx, t, "a job in #job-list", `document.querySelectorAll('#job-list tr[data-job-id]').length > 0`)
	WaitFor(ctx, t, "a selected job", `!document.querySelector('#job').hidden && document.querySelector('#job-title').textContent !== ''`)
	WaitFor(ctx, t, "a vertex in #graph", `document.querySelectorAll('#graph .vertex[data-vertex-id]').length > 0`)
	return Eval[string](ctx, t, `document.querySelector('#job-title').textContent`)
}

var (
	dirsMu sync.Mutex
	dirs   = map[testing.TB]string{}
)

// ScreenshotDir returns the directory that Screenshot writes to: the one
// named by EnvScreenshotDir (created if needed), or a temporary directory of
// t.
func ScreenshotDir(t testing.TB) string {
	t.Helper()
	if d := os.Getenv(EnvScreenshotDir); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatalf("screenshot directory: %v", err)
		}
		return d
	}
	dirsMu.Lock()
	defer dirsMu.Unlock()
	if d, ok := dirs[t]; ok {
		return d
	}
	d := t.TempDir()
	dirs[t] = d
	t.Cleanup(func() {
		dirsMu.Lock()
		delete(dirs, t)
		dirsMu.Unlock()
	})
	return d
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

func fileName(s string) string { return unsafeName.ReplaceAllString(s, "_") }

// Screenshot saves a PNG of the whole page (not only the window) as
// name.png in ScreenshotDir, logs its path and returns it.
func Screenshot(ctx context.Context, t testing.TB, name string) string {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	png, err := chromedp.Run(sctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	p := filepath.Join(ScreenshotDir(t), fileName(name)+".png")
	if err := os.WriteFile(p, png, 0o644); err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	t.Logf("screenshot: %s", p)
	return p
}
