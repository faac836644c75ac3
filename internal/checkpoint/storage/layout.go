package storage

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Names of the fixed entries of the layout.
const (
	MetadataName   = "_metadata"
	SharedDir      = "shared"
	TaskOwnedDir   = "taskowned"
	checkpointPfx  = "chk-"
	tempSuffix     = ".tmp"
	maxSegmentSize = 200
)

// SanitizeJob maps a job name to the directory segment used for it. Every
// rune outside [A-Za-z0-9._-] becomes '_', and a leading or trailing '.'
// becomes '_' (so ".", "..", hidden names and names ending in ".." cannot
// occur). The rule is idempotent, so an
// already sanitized name (as read back from a path) maps to itself.
// Distinct names can collide ("a b" and "a_b"); use unique job names. Empty
// names and results longer than 200 bytes are rejected with ErrInvalidName.
func SanitizeJob(job string) (string, error) {
	if job == "" {
		return "", fmt.Errorf("job name: %w: empty", ErrInvalidName)
	}
	var sb strings.Builder
	for i, r := range job {
		switch {
		case r == '.' && i == 0:
			sb.WriteByte('_')
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9',
			r == '.', r == '_', r == '-':
			sb.WriteRune(r)
		default:
			sb.WriteByte('_')
		}
	}
	s := sb.String()
	if strings.HasSuffix(s, ".") {
		// fileblob escapes the '/' after "..", and Windows drops trailing dots.
		s = s[:len(s)-1] + "_"
	}
	if len(s) > maxSegmentSize {
		return "", fmt.Errorf("job name %.40q...: %w: longer than %d bytes", job, ErrInvalidName, maxSegmentSize)
	}
	return s, nil
}

// validName checks a data file name: one path segment that SanitizeJob
// leaves unchanged (no leading or trailing '.'), not _metadata and not ending in .tmp.
func validName(name string) error {
	s, err := SanitizeJob(name)
	switch {
	case err != nil:
		return fmt.Errorf("file name %q: %w", name, err)
	case s != name || !utf8.ValidString(name):
		return fmt.Errorf("file name %q: %w: only [A-Za-z0-9._-], not starting or ending with '.'", name, ErrInvalidName)
	case name == MetadataName, strings.HasSuffix(name, tempSuffix):
		return fmt.Errorf("file name %q: %w: reserved", name, ErrInvalidName)
	}
	return nil
}

// CheckpointDir returns "chk-<id>", the directory of checkpoint id relative
// to the job directory.
func CheckpointDir(id int64) string {
	return checkpointPfx + strconv.FormatInt(id, 10)
}

// parseCheckpointDir parses "chk-<id>"; ok is false for anything else,
// including non-canonical numbers such as "chk-007".
func parseCheckpointDir(seg string) (int64, bool) {
	rest, ok := strings.CutPrefix(seg, checkpointPfx)
	if !ok || rest == "" {
		return 0, false
	}
	id, err := strconv.ParseInt(rest, 10, 64)
	if err != nil || id < 0 || strconv.FormatInt(id, 10) != rest {
		return 0, false
	}
	return id, true
}

func jobPrefix(job string) (string, error) {
	j, err := SanitizeJob(job)
	if err != nil {
		return "", err
	}
	return j + "/", nil
}

func checkpointPrefix(job string, id int64) (string, error) {
	if id < 0 {
		return "", fmt.Errorf("checkpoint id %d: %w: negative", id, ErrInvalidName)
	}
	jp, err := jobPrefix(job)
	if err != nil {
		return "", err
	}
	return jp + CheckpointDir(id) + "/", nil
}

// validRelPath checks a path relative to the job directory: clean segments
// that each pass validName (the last) or SanitizeJob unchanged (the others).
func validRelPath(p string) error {
	segs := strings.Split(p, "/")
	for i, seg := range segs {
		if i == len(segs)-1 {
			if err := validName(seg); err != nil {
				return fmt.Errorf("path %q: %w", p, err)
			}
			continue
		}
		if s, err := SanitizeJob(seg); err != nil || s != seg {
			return fmt.Errorf("path %q: %w: bad segment %q", p, ErrInvalidName, seg)
		}
	}
	return nil
}
