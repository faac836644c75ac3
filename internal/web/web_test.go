package web

import (
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

func get(t *testing.T, h http.Handler, method, path string, header http.Header) *http.Response {
	t.Helper()
	req := httptest.NewRequest(method, path, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Result()
}

func body(t *testing.T, res *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestHandlerServesPageAndAssets(t *testing.T) {
	h := Handler()
	for _, tc := range []struct {
		path, contentType, contains string
	}{
		{"/", "text/html; charset=utf-8", `<table id="job-list">`},
		{"/index.html", "text/html; charset=utf-8", `<table id="job-list">`},
		{"/static/app.js", "text/javascript; charset=utf-8", "jobs/overview"},
		{"/static/style.css", "text/css; charset=utf-8", "#checkpoint-chart"},
		{"/static/favicon.svg", "image/svg+xml", "<svg"},
	} {
		res := get(t, h, http.MethodGet, tc.path, nil)
		if res.StatusCode != http.StatusOK {
			t.Errorf("GET %s: status %d, want 200", tc.path, res.StatusCode)
			continue
		}
		if ct := res.Header.Get("Content-Type"); ct != tc.contentType {
			t.Errorf("GET %s: Content-Type %q, want %q", tc.path, ct, tc.contentType)
		}
		if got := res.Header.Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("GET %s: X-Content-Type-Options %q, want nosniff", tc.path, got)
		}
		if b := body(t, res); !strings.Contains(b, tc.contains) {
			t.Errorf("GET %s: body does not contain %q", tc.path, tc.contains)
		}
	}
	res := get(t, h, http.MethodGet, "/", nil)
	if csp := res.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "connect-src 'self'") {
		t.Errorf("GET /: Content-Security-Policy %q does not keep the page to its own server", csp)
	}
	if res := get(t, h, http.MethodHead, "/static/app.js", nil); res.StatusCode != http.StatusOK || body(t, res) != "" {
		t.Errorf("HEAD /static/app.js: status %d with a body", res.StatusCode)
	}
}

func TestHandlerNotFound(t *testing.T) {
	h := Handler()
	for _, p := range []string{
		"/static/",
		"/static/nope.js",
		"/static/index.html", // only served at / and /index.html
		"/static/../web.go",
		"/static/app.js/",
		"/static",
		"/jobs/overview", // the REST server's, never the dashboard's
		"/favicon.ico",
	} {
		if res := get(t, h, http.MethodGet, p, nil); res.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: status %d, want 404", p, res.StatusCode)
		}
	}
}

func TestHandlerRejectsOtherMethods(t *testing.T) {
	res := get(t, Handler(), http.MethodPost, "/", nil)
	if res.StatusCode != http.StatusMethodNotAllowed || res.Header.Get("Allow") != "GET, HEAD" {
		t.Errorf("POST /: status %d, Allow %q; want 405 with GET, HEAD", res.StatusCode, res.Header.Get("Allow"))
	}
}

func TestHandlerRevalidates(t *testing.T) {
	h := Handler()
	res := get(t, h, http.MethodGet, "/static/app.js", nil)
	etag := res.Header.Get("ETag")
	if etag == "" || res.Header.Get("Cache-Control") != "no-cache" {
		t.Fatalf("GET /static/app.js: ETag %q, Cache-Control %q", etag, res.Header.Get("Cache-Control"))
	}
	res = get(t, h, http.MethodGet, "/static/app.js", http.Header{"If-None-Match": {etag}})
	if res.StatusCode != http.StatusNotModified {
		t.Errorf("GET with If-None-Match: status %d, want 304", res.StatusCode)
	}
}

// TestAssetsAreSelfContained guards the promise of a dashboard that works
// without network: every file the page names is embedded, and no file
// loads anything from another host.
func TestAssetsAreSelfContained(t *testing.T) {
	h := Handler()
	index := body(t, get(t, h, http.MethodGet, "/", nil))
	refs := regexp.MustCompile(`(?:src|href)="([^"]+)"`).FindAllStringSubmatch(index, -1)
	if len(refs) < 3 {
		t.Fatalf("index.html names %d files, want the script, the style sheet and the icon", len(refs))
	}
	for _, m := range refs {
		ref := m[1]
		if !strings.HasPrefix(ref, "static/") {
			t.Errorf("index.html names %q: want a relative path under static/, so that the page works under any prefix", ref)
			continue
		}
		if res := get(t, h, http.MethodGet, "/"+ref, nil); res.StatusCode != http.StatusOK {
			t.Errorf("index.html names %q, which is %d", ref, res.StatusCode)
		}
	}
	external := regexp.MustCompile(`(?:https?:)?//[a-zA-Z0-9.-]+\.[a-z]{2,}/`)
	err := fs.WalkDir(static, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := static.ReadFile(p)
		if err != nil {
			return err
		}
		s := strings.ReplaceAll(string(b), "http://www.w3.org/2000/svg", "") // a namespace, not a request
		if m := external.FindString(s); m != "" {
			t.Errorf("%s names another host: %q", p, m)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
