package rest

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gocloud.dev/blob/fileblob"

	"github.com/weirstream/weir/internal/checkpoint/storage"
)

// DiscoveryName is the name of the discovery file in a job's directory of
// the checkpoint storage: <dir>/<job>/_rest. Listings of checkpoints
// ignore it, as they ignore the job lock's files.
const DiscoveryName = "_rest"

// maxDiscoveryBytes bounds what FindDiscovery reads of one file.
const maxDiscoveryBytes = 64 << 10

// Discovery is what a running job writes to its discovery file so that
// `weir list` and the other commands find its REST server: the file's
// JSON form. It holds no secret: the token stays with whoever started the
// job.
type Discovery struct {
	// URL is the server's base URL (Server.URL).
	URL string `json:"url"`
	// JobID and JobName are the job's REST id and name.
	JobID   string `json:"jobId"`
	JobName string `json:"jobName"`
	// PID is the process serving it, StartTime when the job started (Unix
	// ms).
	PID       int   `json:"pid"`
	StartTime int64 `json:"startTime"`
}

// WriteDiscovery writes d to the discovery file of jobDir (a job
// directory name, storage.SanitizeJob's form) in store, replacing any
// earlier one. The file appears whole or not at all. Only the run that
// holds the job's lock writes it (through the lock's storage); runs
// without checkpoints use WriteLocalDiscovery.
func WriteDiscovery(ctx context.Context, store *storage.Storage, jobDir string, d Discovery) error {
	if err := checkJobDir(jobDir); err != nil {
		return err
	}
	data, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return fmt.Errorf("discovery file: %w", err)
	}
	return store.WriteJobFile(ctx, jobDir, DiscoveryName, append(data, '\n'))
}

// RemoveDiscovery deletes the discovery file of jobDir; a missing file is
// not an error.
func RemoveDiscovery(ctx context.Context, store *storage.Storage, jobDir string) error {
	if err := checkJobDir(jobDir); err != nil {
		return err
	}
	return store.DeleteJobFile(ctx, jobDir, DiscoveryName)
}

// checkJobDir refuses names that are not job directories as
// storage.SanitizeJob makes them.
func checkJobDir(jobDir string) error {
	if s, err := storage.SanitizeJob(jobDir); err != nil || s != jobDir {
		return fmt.Errorf("discovery file: %q is not a job directory name", jobDir)
	}
	return nil
}

// localDir is the local directory dir (a path or file:// URL) names, or
// "" for other URLs.
func localDir(dir string) string {
	if !strings.Contains(dir, "://") {
		return dir
	}
	if u, err := url.Parse(dir); err == nil && u.Scheme == "file" {
		return filepath.FromSlash(u.Path)
	}
	return ""
}

// openForReading opens the storage root dir for reading only: a local
// directory is neither created nor probed for writing. A missing local
// directory is an error wrapping storage.ErrNotFound.
func openForReading(ctx context.Context, dir string) (storage.Bucket, error) {
	local := localDir(dir)
	if local == "" {
		return storage.OpenLocation(ctx, dir)
	}
	abs, err := filepath.Abs(local)
	if err != nil {
		return nil, fmt.Errorf("checkpoint directory %s: %w", dir, err)
	}
	fi, err := os.Stat(abs)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("checkpoint directory %s: %w", dir, storage.ErrNotFound)
	case err != nil:
		return nil, fmt.Errorf("checkpoint directory %s: %w", dir, err)
	case !fi.IsDir():
		return nil, fmt.Errorf("checkpoint directory %s is not a directory", dir)
	}
	b, err := fileblob.OpenBucket(abs, &fileblob.Options{Metadata: fileblob.MetadataDontWrite})
	if err != nil {
		return nil, fmt.Errorf("checkpoint directory %s: %w", dir, err)
	}
	return storage.NewBlobBucket(b), nil
}

// FindDiscovery reads the discovery files under the checkpoint storage
// root dir (a path or a blob URL, as execution.checkpointing.dir), sorted
// by job name and start time. Files that do not decode are skipped. A
// missing local directory is an error wrapping storage.ErrNotFound.
func FindDiscovery(ctx context.Context, dir string) ([]Discovery, error) {
	b, err := openForReading(ctx, dir)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	tops, err := b.List(ctx, "", "/")
	if err != nil {
		return nil, fmt.Errorf("checkpoint directory %s: %w", dir, err)
	}
	var out []Discovery
	for _, t := range tops {
		if !t.IsDir {
			continue
		}
		d, ok, err := readDiscovery(ctx, b, t.Key+DiscoveryName)
		if err != nil {
			return nil, fmt.Errorf("checkpoint directory %s: %w", dir, err)
		}
		if ok {
			out = append(out, d)
		}
	}
	sortDiscovery(out)
	return out, nil
}

// sortDiscovery sorts by job name and start time.
func sortDiscovery(ds []Discovery) {
	slices.SortFunc(ds, func(a, b Discovery) int {
		return cmp.Or(cmp.Compare(a.JobName, b.JobName), cmp.Compare(a.StartTime, b.StartTime))
	})
}

// readDiscovery reads one discovery file; ok is false if it is missing or
// does not decode.
func readDiscovery(ctx context.Context, b storage.Bucket, key string) (d Discovery, ok bool, err error) {
	r, err := b.NewReader(ctx, key)
	if errors.Is(err, storage.ErrNotFound) {
		return Discovery{}, false, nil
	}
	if err != nil {
		return Discovery{}, false, fmt.Errorf("read %s: %w", key, err)
	}
	defer r.Close()
	data, err := io.ReadAll(io.LimitReader(r, maxDiscoveryBytes))
	if err != nil {
		return Discovery{}, false, fmt.Errorf("read %s: %w", key, err)
	}
	if json.Unmarshal(data, &d) != nil || d.URL == "" {
		return Discovery{}, false, nil
	}
	return d, true, nil
}
