package runner

import (
	"slices"
	"testing"

	"github.com/weirstream/weir/internal/checkpoint/metadata"
	"github.com/weirstream/weir/internal/checkpoint/storage"
)

func checkpointWith(id int64, shared ...string) *metadata.Checkpoint {
	st := metadata.Subtask{Native: &metadata.NativeState{}}
	for _, p := range shared {
		st.Native.Files = append(st.Native.Files, metadata.NativeFile{Name: p, Handle: storage.FileHandle{Path: "shared/" + p}, Shared: true})
	}
	st.Native.Files = append(st.Native.Files, metadata.NativeFile{Name: "MANIFEST", Handle: storage.FileHandle{Path: "chk-1/MANIFEST"}})
	return &metadata.Checkpoint{ID: id, Operators: []metadata.Operator{{UID: "op", Parallelism: 1, MaxParallelism: 1, Subtasks: []metadata.Subtask{st}}}}
}

// A shared file is freed when the last registered checkpoint referencing
// it is released, never before; private files are not tracked.
func TestSharedRegistry(t *testing.T) {
	g := newSharedRegistry()
	cp1, cp2, cp3 := checkpointWith(1, "a", "b"), checkpointWith(2, "a", "b", "c"), checkpointWith(3, "c", "d")
	for _, cp := range []*metadata.Checkpoint{cp1, cp2, cp3} {
		g.register(cp)
	}
	if got := g.paths(); !slices.Equal(got, []string{"shared/a", "shared/b", "shared/c", "shared/d"}) {
		t.Fatalf("paths %v", got)
	}
	if free := g.release(cp1); len(free) != 0 {
		t.Fatalf("releasing 1 freed %v; 2 still uses a and b", free)
	}
	if free := g.release(cp2); !slices.Equal(free, []string{"shared/a", "shared/b"}) {
		t.Fatalf("releasing 2 freed %v, want a and b", free)
	}
	if !g.referenced("shared/c") || g.referenced("shared/a") || g.referenced("chk-1/MANIFEST") {
		t.Fatal("referenced is wrong")
	}
	if free := g.release(cp2); len(free) != 0 {
		t.Fatalf("releasing 2 twice freed %v", free)
	}
	if free := g.release(cp3); !slices.Equal(free, []string{"shared/c", "shared/d"}) {
		t.Fatalf("releasing 3 freed %v", free)
	}
	if len(g.paths()) != 0 {
		t.Fatalf("left %v", g.paths())
	}
}
