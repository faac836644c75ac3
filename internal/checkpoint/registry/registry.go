// Package registry is the job-level shared-state registry (Flink's
// SharedStateRegistry): the one place that decides when a file a subtask
// acknowledged may be deleted.
//
// # Ownership
//
// A subtask uploads files for its snapshots: incremental SST files,
// changelog segments and materializations (under shared/), and private
// files under chk-<n>/. Until the subtask acknowledges a file as part of a
// snapshot, the file is the subtask's: it deletes it if it will never
// acknowledge it (a failed upload, a retired log segment no snapshot
// referenced). Once acknowledged, only this registry decides: the runner
// feeds it the checkpoints' lifecycle and deletes exactly the paths
// Collect returns. Sweeps of what no one knows about (files a killed
// process left) go through Sweep, with the same references.
//
// # When a file may go
//
// For every acknowledged file the registry knows the retained completed
// checkpoints that reference it, the pending checkpoints whose
// acknowledgements received so far reference it, and the last checkpoint
// that used it (the highest id of any acknowledgement naming it). A file is
// deletable when no retained and no pending checkpoint references it and no
// acknowledgement still to come can name it. The last condition is the
// subtle one: a subtask reuses files of the newest checkpoint it knows to
// be complete, and with several checkpoints in flight an older completion
// can reach it between two barriers, so a pending checkpoint may reference
// a file that the completion of another checkpoint has just stopped
// referencing. The trigger of every checkpoint carries the newest completed
// checkpoint at that time (checkpoint.Options.LastCompleted), and a subtask
// knows at least that one when it snapshots; a file whose last use is older
// than the LastCompleted of every pending checkpoint, and older than the
// newest completed checkpoint (which does not reference it, so subtasks
// have moved past it), can no longer be named. Changelog files obey the
// same rule: a subtask's log only moves forward, so once a completed
// checkpoint newer than a file's last use does not reference it, no later
// snapshot does.
//
// When no task runs (between attempts, at the start and end of a run),
// Idle makes every file deletable that no retained checkpoint references.
//
// The Registry is a plain data structure, not safe for concurrent use: the
// runner's goroutine owns it. It does no I/O.
package registry

import (
	"errors"
	"slices"
	"sort"
)

// Registry tracks the references of acknowledged files. The zero value is
// not usable; call New.
type Registry struct {
	files map[string]*entry
	// pending maps the undecided checkpoints to the newest completed
	// checkpoint at their trigger.
	pending map[int64]int64
	// retained are the retained completed checkpoints and the files each
	// references.
	retained map[int64][]string
	// acked are the files the acknowledgements of each pending checkpoint
	// named so far.
	acked map[int64][]string
	// newestCompleted is the newest completed checkpoint, retained or not.
	newestCompleted int64
	// idle is set while no task runs.
	idle bool
}

type entry struct {
	retainedBy map[int64]bool
	pendingBy  map[int64]bool
	lastUsed   int64
}

// New returns an empty registry; no task runs yet (Idle).
func New() *Registry {
	return &Registry{files: map[string]*entry{}, pending: map[int64]int64{}, retained: map[int64][]string{},
		acked: map[int64][]string{}, idle: true}
}

func (g *Registry) entry(path string) *entry {
	e := g.files[path]
	if e == nil {
		e = &entry{retainedBy: map[int64]bool{}, pendingBy: map[int64]bool{}}
		g.files[path] = e
	}
	return e
}

// Running says that tasks run from now on: acknowledgements may come, and
// only Collect's rule lets files go.
func (g *Registry) Running() { g.idle = false }

// Idle says that no task runs any more: no acknowledgement will come, so
// every pending checkpoint is decided (aborted) and every file no retained
// checkpoint references is deletable.
func (g *Registry) Idle() {
	for id := range g.pending {
		g.Aborted(id)
	}
	g.idle = true
}

// Adopt registers retained completed checkpoint id, found in storage at the
// start of a run (or restored), with the files it references.
func (g *Registry) Adopt(id int64, files []string) {
	g.Completed(id, files)
}

// Triggered records pending checkpoint id and the newest completed
// checkpoint at its trigger (checkpoint.Options.LastCompleted).
func (g *Registry) Triggered(id, lastCompleted int64) {
	g.pending[id] = lastCompleted
}

// Acked records that an acknowledgement of checkpoint id names files. For
// a pending checkpoint the files are referenced until it is decided; for
// one decided already (a late acknowledgement) they are only marked used
// by id, and go once Collect's rule allows.
func (g *Registry) Acked(id int64, files []string) {
	_, pending := g.pending[id]
	for _, p := range files {
		e := g.entry(p)
		e.lastUsed = max(e.lastUsed, id)
		if pending {
			e.pendingBy[id] = true
		}
	}
	if pending {
		g.acked[id] = append(g.acked[id], files...)
	}
}

// Completed decides checkpoint id: it is retained and references files
// (every file of its metadata under shared/, whether this checkpoint
// uploaded it or reused it).
func (g *Registry) Completed(id int64, files []string) {
	g.decide(id)
	g.newestCompleted = max(g.newestCompleted, id)
	files = slices.Clone(files)
	g.retained[id] = files
	for _, p := range files {
		e := g.entry(p)
		e.retainedBy[id] = true
		e.lastUsed = max(e.lastUsed, id)
	}
}

// Keep decides pending checkpoint id without completing it, but keeps the
// files its acknowledgements named as if a retained checkpoint referenced
// them: its chk-<id> could not be deleted and may be complete on disk. They
// stay until a sweep (Idle) reads what is on disk.
func (g *Registry) Keep(id int64) {
	files := g.acked[id]
	g.decide(id)
	g.Completed(-id, files)
}

// DropKept releases what Keep kept: the sweep, which reads the checkpoints
// on disk, decides about those files from then on.
func (g *Registry) DropKept() {
	for id := range g.retained {
		if id < 0 {
			g.Released(id)
		}
	}
}

// Aborted decides checkpoint id without completing it.
func (g *Registry) Aborted(id int64) { g.decide(id) }

func (g *Registry) decide(id int64) {
	for _, p := range g.acked[id] {
		if e := g.files[p]; e != nil {
			delete(e.pendingBy, id)
		}
	}
	delete(g.acked, id)
	delete(g.pending, id)
}

// Released drops retained checkpoint id (subsumed, or deleted at the end
// of the job): its files stay referenced by the others that name them.
func (g *Registry) Released(id int64) {
	for _, p := range g.retained[id] {
		if e := g.files[p]; e != nil {
			delete(e.retainedBy, id)
		}
	}
	delete(g.retained, id)
}

// Retained reports whether a retained checkpoint references path.
func (g *Registry) Retained(path string) bool {
	e := g.files[path]
	return e != nil && len(e.retainedBy) > 0
}

func (g *Registry) deletable(e *entry) bool {
	if len(e.retainedBy) > 0 || len(e.pendingBy) > 0 {
		return false
	}
	if g.idle {
		return true
	}
	if g.newestCompleted <= e.lastUsed {
		// No completed checkpoint has moved past the file: the subtask
		// may still build on it (a changelog segment of its current log).
		return false
	}
	for _, lastCompleted := range g.pending {
		if lastCompleted <= e.lastUsed {
			// Triggered when the file's last user may have been the
			// newest completed checkpoint a subtask knew: its
			// acknowledgements still to come may name the file.
			return false
		}
	}
	return true
}

// Collect returns, sorted, the files that may be deleted now and forgets
// them: the caller deletes them (after the chk-<n> directories that might
// reference them, see the runner).
func (g *Registry) Collect() []string {
	var out []string
	for p, e := range g.files {
		if g.deletable(e) {
			out = append(out, p)
			delete(g.files, p)
		}
	}
	sort.Strings(out)
	return out
}

// Sweep returns, sorted, the paths of listed (the files found under
// shared/) that may be deleted: those the registry does not track and that
// no entry of referenced (the files of complete checkpoints the registry
// does not own, such as an older run's) names, plus those Collect would
// return that referenced does not name. It is only valid while Idle (a running task's uploads not
// acknowledged yet are unknown here): otherwise it returns ErrRunning and
// nothing.
func (g *Registry) Sweep(listed []string, referenced map[string]bool) ([]string, error) {
	if !g.idle {
		return nil, ErrRunning
	}
	var out []string
	seen := map[string]bool{}
	for _, p := range g.Collect() {
		seen[p] = true
		if !referenced[p] {
			out = append(out, p)
		}
	}
	for _, p := range listed {
		if g.files[p] == nil && !referenced[p] && !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out, nil
}

// ErrRunning is returned by Sweep while tasks run.
var ErrRunning = errors.New("registry: cannot sweep shared files while tasks run")
