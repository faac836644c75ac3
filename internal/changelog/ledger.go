package changelog

import (
	"context"
	"sort"
	"sync"

	"github.com/weirstream/weir/internal/checkpoint/storage"
)

// Ledger decides which of an operator subtask's changelog files (log
// segments and materialized files, all under shared/) the subtask deletes
// itself. A file is the subtask's until a snapshot references it: it is
// then acknowledged, and only the job's shared-state registry
// (internal/checkpoint/registry) deletes it. A file the subtask retires (no
// future checkpoint will reference it) or leaves behind at Close is deleted
// only if no snapshot ever referenced it.
//
// Deletions run on goroutines of the Ledger's own; Close waits for them.
// Reference may be called from a checkpoint's asynchronous phase, the other
// methods from the task goroutine: it is safe for concurrent use.
type Ledger struct {
	store *storage.Storage
	job   string

	mu    sync.Mutex
	acked map[string]bool // referenced by a snapshot: the registry's
	wg    sync.WaitGroup
}

// NewLedger returns the ledger of a subtask's files in job's directory of
// store.
func NewLedger(store *storage.Storage, job string) *Ledger {
	return &Ledger{store: store, job: job, acked: map[string]bool{}}
}

// Reference records that a snapshot references files and returns the
// bytes of those no earlier snapshot referenced.
func (l *Ledger) Reference(files []storage.FileHandle) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var n int64
	for _, h := range files {
		if !l.acked[h.Path] {
			n += h.Size
			l.acked[h.Path] = true
		}
	}
	return n
}

// Retire hands over files (paths relative to the job directory) no future
// checkpoint references: those no snapshot referenced are deleted, the
// others are the registry's.
func (l *Ledger) Retire(paths []string) {
	if len(paths) == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var del []string
	for _, p := range paths {
		if l.acked[p] {
			delete(l.acked, p)
			continue
		}
		del = append(del, p)
	}
	l.deleteLocked(del)
}

func (l *Ledger) deleteLocked(paths []string) {
	if len(paths) == 0 {
		return
	}
	sort.Strings(paths)
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		for _, p := range paths {
			_ = l.store.DeleteFile(context.Background(), l.job, p)
		}
	}()
}

// Close deletes, when the subtask ends, those of its files (paths) that no
// snapshot referenced, and waits for every deletion.
func (l *Ledger) Close(paths []string) {
	l.mu.Lock()
	var del []string
	seen := map[string]bool{}
	for _, p := range paths {
		if !l.acked[p] && !seen[p] {
			del = append(del, p)
			seen[p] = true
		}
	}
	l.deleteLocked(del)
	l.mu.Unlock()
	l.wg.Wait()
}
