package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
)

// jobFileKey is the key of a file directly in job's directory. name must
// start with '_' (the job's own files: _lock, _rest), so that it never
// collides with checkpoint directories or shared state.
func jobFileKey(job, name string) (string, error) {
	jp, err := jobPrefix(job)
	if err != nil {
		return "", err
	}
	if !strings.HasPrefix(name, "_") || strings.ContainsAny(name, `/\`) || name == MetadataName || len(name) < 2 {
		return "", fmt.Errorf("job file %q: %w: must be a plain name starting with '_'", name, ErrInvalidName)
	}
	return jp + name, nil
}

// WriteJobFile writes data to <job>/<name> (name starts with '_', such as
// the REST discovery file _rest), replacing any earlier version. The file
// appears whole or not at all. A storage whose job lock was lost refuses,
// as it refuses checkpoint files.
func (s *Storage) WriteJobFile(ctx context.Context, job, name string, data []byte) error {
	key, err := jobFileKey(job, name)
	if err != nil {
		return err
	}
	w, err := s.b.NewWriter(ctx, key)
	if err != nil {
		return fmt.Errorf("write %s: %w", s.display(key), err)
	}
	if _, err := w.Write(data); err != nil {
		_ = w.Abort()
		return fmt.Errorf("write %s: %w", s.display(key), err)
	}
	if err := w.Finish(); err != nil {
		return fmt.Errorf("write %s: %w", s.display(key), err)
	}
	return nil
}

// ReadJobFile reads <job>/<name>; a missing file is an error wrapping
// ErrNotFound.
func (s *Storage) ReadJobFile(ctx context.Context, job, name string) ([]byte, error) {
	key, err := jobFileKey(job, name)
	if err != nil {
		return nil, err
	}
	r, err := s.b.NewReader(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", s.display(key), err)
	}
	defer r.Close()
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", s.display(key), err)
	}
	return data, nil
}

// DeleteJobFile deletes <job>/<name>; a missing file is not an error.
func (s *Storage) DeleteJobFile(ctx context.Context, job, name string) error {
	key, err := jobFileKey(job, name)
	if err != nil {
		return err
	}
	if err := s.b.Delete(ctx, key); err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("delete %s: %w", s.display(key), err)
	}
	return nil
}
