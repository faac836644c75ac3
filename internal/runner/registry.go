package runner

import (
	"sort"

	"github.com/weirstream/weir/internal/checkpoint/metadata"
)

// sharedRegistry is Flink's SharedStateRegistry: for every file under
// shared/ it knows which retained checkpoints reference it, and says when a
// file is referenced by none, so that it can be deleted. It is a plain data
// structure owned by the runner's goroutine.
//
// A file that a pending checkpoint uploaded is not registered until that
// checkpoint completes; if the checkpoint is aborted instead, its new files
// are unreferenced (referenced reports false) and deleted. A file a pending
// checkpoint reuses is always referenced by a retained checkpoint: a task
// reuses only uploads of completed checkpoints, and a checkpoint that
// completes aborts every older pending one, so the last retained
// checkpoint referencing a file is never subsumed while a pending
// checkpoint still counts on it.
type sharedRegistry struct {
	refs map[string]map[int64]bool // path (relative to the job dir) -> checkpoint ids
}

func newSharedRegistry() *sharedRegistry {
	return &sharedRegistry{refs: map[string]map[int64]bool{}}
}

// register records cp's references.
func (g *sharedRegistry) register(cp *metadata.Checkpoint) {
	for _, h := range cp.SharedFiles() {
		ids := g.refs[h.Path]
		if ids == nil {
			ids = map[int64]bool{}
			g.refs[h.Path] = ids
		}
		ids[cp.ID] = true
	}
}

// release drops cp's references and returns, sorted, the files no
// registered checkpoint references any more.
func (g *sharedRegistry) release(cp *metadata.Checkpoint) []string {
	var free []string
	for _, h := range cp.SharedFiles() {
		ids := g.refs[h.Path]
		if ids == nil {
			continue
		}
		delete(ids, cp.ID)
		if len(ids) == 0 {
			delete(g.refs, h.Path)
			free = append(free, h.Path)
		}
	}
	sort.Strings(free)
	return free
}

// referenced reports whether a registered checkpoint references path.
func (g *sharedRegistry) referenced(path string) bool { return len(g.refs[path]) > 0 }

// paths returns every registered path, sorted.
func (g *sharedRegistry) paths() []string {
	out := make([]string, 0, len(g.refs))
	for p := range g.refs {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}
