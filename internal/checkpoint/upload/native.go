// Package upload moves the native snapshots of a state backend (its own
// database files, state.NativeSnapshot) to checkpoint storage, and tracks
// which uploads a later snapshot may reference instead of uploading the
// same file again. It is used by the asynchronous phase of an incremental
// checkpoint (internal/task) and by a changelog materialization
// (internal/keyed): one uploader for both.
//
// # Reuse
//
// A shared file (an sstable: one name, one content within one backend, see
// state/snapshot_native.go) that an earlier upload of the same operator
// subtask put under shared/ is referenced again instead of uploaded, if its
// size matches. Which earlier uploads may be referenced is the Tracker's
// business: an upload becomes reusable only once the checkpoint that made
// it completed, so a checkpoint never references a file that may be
// deleted with an aborted one.
//
// # Ownership
//
// Files an upload creates belong to the caller until a snapshot that
// references them is acknowledged; from then on only the job's shared-state
// registry (internal/checkpoint/registry) deletes them. A failed upload
// deletes what it created under shared/ itself (best effort: a later run's
// sweep removes what it misses).
package upload

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/weirstream/weir/internal/checkpoint/metadata"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/state"
)

// Native says where the files of native snapshots go. Its zero value is not
// usable: Store and SharedName are required, PrivateName for checkpoints.
type Native struct {
	Store *storage.Storage
	Job   string
	// Checkpoint is the checkpoint the upload is for, or 0 for a changelog
	// materialization. A checkpoint's upload puts the files that are not
	// shared under chk-<Checkpoint>/ (named by PrivateName) and marks every
	// file it uploads New in the metadata. A materialization's upload puts
	// every file under shared/, since many checkpoints reference it, and
	// marks none New: it belongs to no single checkpoint.
	Checkpoint int64
	// SharedName returns the name under shared/ of a new upload of the
	// snapshot file name. It must be unique to this upload (operator
	// subtask, run and checkpoint or materialization): a file not
	// confirmed yet may be uploaded again by the next snapshot, and the two
	// uploads must not be one object, or deleting the unused one would
	// delete the other.
	SharedName func(name string) string
	// PrivateName returns the name under chk-<Checkpoint>/ of a file that
	// is not shared.
	PrivateName func(name string) string
	// Savepoint puts every file, shared or not, into the savepoint
	// directory Job (storage.CreateSavepointFile, named by PrivateName):
	// a savepoint holds its own copy of everything and reuses nothing.
	Savepoint bool
}

// Result is what an upload made.
type Result struct {
	// State is the snapshot's entry in the checkpoint metadata.
	State *metadata.NativeState
	// Created are the files the upload put under shared/, by their name in
	// the snapshot.
	Created map[string]storage.FileHandle
	// Bytes is the size of every file the upload wrote.
	Bytes int64
}

// Upload copies the files of snap to storage, referencing the upload in
// reuse (snapshot file name to handle) of each shared file that has one of
// the same size. On failure it deletes the files it created under shared/
// and returns the error.
func (n *Native) Upload(ctx context.Context, snap *state.NativeSnapshot, reuse map[string]storage.FileHandle) (Result, error) {
	r := Result{State: &metadata.NativeState{Registry: snap.Registry}, Created: map[string]storage.FileHandle{}}
	for _, f := range snap.Files {
		if f.Shared {
			if h, ok := reuse[f.Name]; ok && h.Size == f.Size {
				r.State.Files = append(r.State.Files, metadata.NativeFile{Name: f.Name, Handle: h, Shared: true})
				continue
			}
		}
		shared := (f.Shared || n.Checkpoint == 0) && !n.Savepoint
		h, err := n.copy(ctx, filepath.Join(snap.Dir, f.Name), f.Name, shared)
		if err != nil {
			for _, h := range r.Created {
				_ = n.Store.DeleteFile(context.WithoutCancel(ctx), n.Job, h.Path)
			}
			return Result{}, fmt.Errorf("upload %s: %w", f.Name, err)
		}
		if shared {
			r.Created[f.Name] = h
		}
		r.Bytes += h.Size
		r.State.Files = append(r.State.Files, metadata.NativeFile{Name: f.Name, Handle: h, Shared: shared, New: n.Checkpoint > 0})
	}
	return r, nil
}

// copy copies the local file path to shared/ or to chk-<Checkpoint>/.
func (n *Native) copy(ctx context.Context, path, name string, shared bool) (storage.FileHandle, error) {
	f, err := os.Open(path)
	if err != nil {
		return storage.FileHandle{}, err
	}
	defer f.Close()
	var fw storage.FileWriter
	if n.Savepoint {
		fw, err = n.Store.CreateSavepointFile(ctx, n.Job, n.PrivateName(name))
	} else if shared {
		fw, err = n.Store.CreateSharedFile(ctx, n.Job, n.SharedName(name))
	} else {
		fw, err = n.Store.CreateFile(ctx, n.Job, n.Checkpoint, n.PrivateName(name))
	}
	if err != nil {
		return storage.FileHandle{}, err
	}
	if _, err := io.Copy(fw, f); err != nil {
		_ = fw.Abort()
		return storage.FileHandle{}, err
	}
	return fw.Finish()
}
