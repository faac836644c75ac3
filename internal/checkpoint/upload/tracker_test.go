package upload

import (
	"testing"

	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/state"
)

// Only the uploads of a checkpoint that completed become reusable: not
// those of an aborted checkpoint, even when its asynchronous phase reports
// them after the abort, nor those of older checkpoints that never
// completed.
func TestTracker(t *testing.T) {
	u := NewTracker()
	h := func(p string) map[string]storage.FileHandle {
		return map[string]storage.FileHandle{p: {Path: "shared/" + p, Size: 1}}
	}
	files := []state.NativeFile{{Name: "a", Shared: true}, {Name: "b", Shared: true}, {Name: "c", Shared: true}, {Name: "d", Shared: true}}
	u.Uploaded(1, h("a"))
	u.Confirm(1)
	u.Abort(2)
	u.Uploaded(2, h("b")) // late report of an aborted checkpoint
	u.Uploaded(3, h("c")) // checkpoint 3 never completes
	u.Uploaded(4, h("d"))
	u.Confirm(4)
	u.Uploaded(3, h("c")) // later still
	got := u.Reusable(files)
	if len(got) != 2 || got["a"].Path != "shared/a" || got["d"].Path != "shared/d" {
		t.Fatalf("reusable %v, want a and d only", got)
	}
}
