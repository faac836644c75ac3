package rest

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// EnvRuntimeDir names the directory of local discovery files, overriding
// the default (LocalDiscoveryDir).
const EnvRuntimeDir = "WEIR_RUNTIME_DIR"

// LocalDiscoveryDir is where a run without checkpoints writes its
// discovery file: it holds no job lock, so it must not write into the
// job's checkpoint directory (where a checkpointing run of the same job
// may hold the lock), and it should leave nothing behind in the working
// directory. $WEIR_RUNTIME_DIR, else $XDG_RUNTIME_DIR/weir, else
// <temp dir>/weir-<uid>: private to the user, found by `weir list` from
// any directory.
func LocalDiscoveryDir() string {
	if d := os.Getenv(EnvRuntimeDir); d != "" {
		return d
	}
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "weir")
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("weir-%d", os.Getuid()))
}

// localFile is the local discovery file of job id.
func localFile(jobID string) (string, error) {
	if jobID == "" || strings.ContainsAny(jobID, `/\.`) {
		return "", fmt.Errorf("discovery file: %q is not a job id", jobID)
	}
	return filepath.Join(LocalDiscoveryDir(), jobID+".json"), nil
}

// WriteLocalDiscovery writes d to <LocalDiscoveryDir>/<job id>.json (the
// directory is created private to the user) and returns the file's path.
// The file appears whole or not at all.
func WriteLocalDiscovery(d Discovery) (string, error) {
	path, err := localFile(d.JobID)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", fmt.Errorf("discovery file: %w", err)
	}
	data, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return "", fmt.Errorf("discovery file: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o600); err != nil {
		return "", fmt.Errorf("discovery file: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("discovery file: %w", err)
	}
	return path, nil
}

// RemoveLocalDiscovery deletes the local discovery file of job id; a
// missing file is not an error.
func RemoveLocalDiscovery(jobID string) error {
	path, err := localFile(jobID)
	if err != nil {
		return err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("discovery file: %w", err)
	}
	return nil
}

// FindLocalDiscovery reads the local discovery files, sorted like
// FindDiscovery's. A missing directory means none; files that do not
// decode are skipped.
func FindLocalDiscovery() ([]Discovery, error) {
	dir := LocalDiscoveryDir()
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("discovery files in %s: %w", dir, err)
	}
	var out []Discovery
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil || len(data) > maxDiscoveryBytes {
			continue
		}
		var d Discovery
		if json.Unmarshal(data, &d) == nil && d.URL != "" {
			out = append(out, d)
		}
	}
	sortDiscovery(out)
	return out, nil
}
