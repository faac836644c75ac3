// Package web serves weir's dashboard: one HTML page, a script and a style
// sheet, embedded in the binary so that a deployment needs no other files and
// no network.
//
// The page reads the REST API of the same server with relative URLs
// (jobs/overview, jobs/{jid}, jobs/{jid}/checkpoints, ...), so the REST server
// mounts Handler at "/" as the fallback after its own routes, and the page
// also works behind a proxy that serves it under a path prefix.
package web

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed static
var static embed.FS

// asset is one embedded file, read once, with its validator.
type asset struct {
	body        []byte
	contentType string
	etag        string
}

// contentTypes is spelled out rather than taken from the mime package, whose
// table can be extended by the host's /etc/mime.types: the page must get the
// same types on every machine, and a script served as text/plain does not
// run when nosniff is set.
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".svg":  "image/svg+xml",
}

// csp allows only the page's own script, style sheet and API. The page never
// puts API text into HTML (it sets textContent), and the policy makes sure
// that a failure message or a job name with markup cannot run script even if
// that rule is broken one day.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; " +
	"img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Handler returns the handler of the dashboard. It serves the page at "/"
// (and "/index.html") and its files under "/static/"; every other path is
// 404, so that a mistyped API path is not answered with HTML.
func Handler() http.Handler {
	assets := map[string]*asset{}
	err := fs.WalkDir(static, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := static.ReadFile(p)
		if err != nil {
			return err
		}
		ct, ok := contentTypes[path.Ext(p)]
		if !ok {
			ct = "application/octet-stream"
		}
		sum := sha256.Sum256(body)
		assets["/"+p] = &asset{body: body, contentType: ct, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		return nil
	})
	if err != nil {
		// The files are compiled in, so this cannot fail at run time.
		panic("web: reading embedded assets: " + err.Error())
	}
	index := assets["/static/index.html"]
	delete(assets, "/static/index.html")

	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var a *asset
		switch p := r.URL.Path; {
		case p == "/" || p == "/index.html":
			a = index
		case strings.HasPrefix(p, "/static/"):
			a = assets[p]
		}
		if a == nil {
			http.NotFound(w, r)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		h := w.Header()
		h.Set("Content-Type", a.contentType)
		h.Set("ETag", a.etag)
		// The files change with the binary and their names do not, so the
		// browser must ask again each time; the ETag makes that a 304.
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Content-Type-Options", "nosniff")
		if a == index {
			h.Set("Content-Security-Policy", csp)
			h.Set("Referrer-Policy", "no-referrer")
		}
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(a.body))
	})
}
