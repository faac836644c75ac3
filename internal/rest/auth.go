package rest

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
)

// tokenCheck checks bearer tokens. The comparison takes the same time
// whatever the token sent: both sides are hashed first, so that neither
// their contents nor their lengths show in the timing.
type tokenCheck struct {
	want [sha256.Size]byte
	set  bool
}

func newTokenCheck(token string) tokenCheck {
	if token == "" {
		return tokenCheck{}
	}
	return tokenCheck{want: sha256.Sum256([]byte(token)), set: true}
}

// check returns "" if r may pass, else why not.
func (c tokenCheck) check(r *http.Request) string {
	if !c.set {
		return ""
	}
	h := r.Header.Get("Authorization")
	if h == "" {
		return "Unauthorized: this server requires the header Authorization: Bearer <token> (rest.auth.token)"
	}
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "Unauthorized: the Authorization header must be Bearer <token>"
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(token)))
	if subtle.ConstantTimeCompare(got[:], c.want[:]) != 1 {
		return "Unauthorized: wrong token"
	}
	return ""
}

// apiSegments are the first path segments of the API (and of Flink's
// paths weir does not serve): requests under them need the token and are
// never passed to the dashboard.
var apiSegments = map[string]bool{
	"config": true, "overview": true, "jobs": true, "metrics": true, "v1": true,
	"taskmanagers": true, "jobmanager": true, "datasets": true,
}

// isAPIPath reports whether p belongs to the API rather than to the
// dashboard's static files.
func isAPIPath(p string) bool {
	first, _, _ := strings.Cut(strings.TrimPrefix(p, "/"), "/")
	return apiSegments[first]
}
