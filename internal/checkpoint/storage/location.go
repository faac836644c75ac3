package storage

import (
	"net/url"
	"path"
	"path/filepath"
	"strings"
)

// Location returns the identity of the root s was opened at, normalized so
// that every Storage over the same root has the same Location:
//   - a plain path or a file:// URL: the absolute, cleaned local path, with
//     symbolic links resolved where the directory exists ("ck",
//     "/abs/ck/", "file:///abs/ck" are the same storage when the working
//     directory is /abs);
//   - another URL: the URL with its scheme and host in lower case, the
//     path cleaned, a "prefix" parameter folded into the path, and the
//     other parameters sorted ("s3://B/a/b/" and "s3://b?prefix=a/b/" are
//     the same);
//   - "" for mem:// (every Open of mem:// is a new, empty store) and for a
//     Storage made by OpenBucket: such a Storage has no identity beyond
//     itself.
//
// Use Same to compare two Storages.
func (s *Storage) Location() string {
	if s == nil {
		return ""
	}
	return s.loc
}

// Same reports whether s and o are the same storage: the same *Storage, or
// both opened at the same non-empty Location. Either may be nil (nil is the
// same only as nil).
func (s *Storage) Same(o *Storage) bool {
	if s == nil || o == nil || s == o {
		return s == o
	}
	return s.loc != "" && s.loc == o.loc
}

// LocationOf returns the Location that Open(loc) would give its Storage,
// without opening anything; "" where loc has none (mem://) or cannot be
// parsed.
func LocationOf(loc string) string {
	id, _ := locationOf(loc)
	return id
}

// locationOf returns the identity of loc (see Location) and how to show
// the root in messages: the absolute path as given (symbolic links not
// resolved) for a local directory, else the URL.
func locationOf(loc string) (id, shown string) {
	if !strings.Contains(loc, "://") {
		return localLocation(loc)
	}
	u, err := url.Parse(loc)
	if err != nil {
		return "", loc
	}
	scheme := strings.ToLower(u.Scheme)
	switch scheme {
	case "file":
		if u.Host != "" && u.Host != "localhost" {
			return "", loc
		}
		return localLocation(filepath.FromSlash(u.Path))
	case "mem":
		return "", loc
	}
	q := u.Query()
	p := u.Path
	if pre := q.Get("prefix"); strings.HasSuffix(pre, "/") && strings.Trim(p, "/") == "" {
		p = pre // the key prefix Open makes of a path
		q.Del("prefix")
	}
	if p = strings.Trim(p, "/"); p != "" {
		p = path.Clean("/" + p)
	}
	n := url.URL{Scheme: scheme, User: u.User, Host: strings.ToLower(u.Host), Path: p}
	shown = n.String()
	n.RawQuery = q.Encode()
	return n.String(), shown
}

func localLocation(dir string) (id, shown string) {
	if dir == "" {
		return "", dir
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", dir
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		return real, abs
	}
	return abs, abs
}

// display returns how messages name key (relative to the root): its local
// path or URL where the root is known, else the key.
func (s *Storage) display(key string) string {
	switch {
	case s.shown == "":
		return key
	case strings.HasSuffix(s.shown, "/"): // "mem://"
		return s.shown + key
	case strings.Contains(s.shown, "://"):
		return s.shown + "/" + key
	}
	return filepath.Join(s.shown, filepath.FromSlash(key))
}
