package weir

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/checkpoint/metadata"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/checkpoint/upload"
	"github.com/weirstream/weir/internal/graph"
	"github.com/weirstream/weir/internal/network"
	"github.com/weirstream/weir/internal/state"
	"github.com/weirstream/weir/internal/task"
)

// scriptedNative is an operator whose native snapshots hold exactly the
// files a script names, so that a test decides what "compactions" did. It
// uses the real upload tracker, task upload and runner registry.
type scriptedNative struct {
	opBase
	dir     string
	files   map[int64][]string
	uploads *upload.Tracker
}

func (o *scriptedNative) Collect(int64) {}

func (o *scriptedNative) SnapshotState(id int64, _ checkpoint.Options) (task.OperatorSnapshot, error) {
	dir := filepath.Join(o.dir, fmt.Sprint(id))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return task.OperatorSnapshot{}, err
	}
	ns := &state.NativeSnapshot{Dir: dir, Registry: []byte("{}")}
	for _, name := range o.files[id] {
		content := []byte("content of " + name)
		if err := os.WriteFile(filepath.Join(dir, name), content, 0o644); err != nil {
			return task.OperatorSnapshot{}, err
		}
		ns.Files = append(ns.Files, state.NativeFile{Name: name, Size: int64(len(content)), Shared: true})
	}
	return task.OperatorSnapshot{Native: &task.NativeUpload{Snap: ns, Reuse: o.uploads.Reusable(ns.Files), Uploaded: o.uploads.Uploaded}}, nil
}

func (o *scriptedNative) NotifyCheckpointComplete(id int64) error { o.uploads.Confirm(id); return nil }
func (o *scriptedNative) NotifyCheckpointAborted(id int64) error  { o.uploads.Abort(id); return nil }

// neverSource never emits and never ends.
type neverSource struct{}

func (neverSource) CreateReader(SourceContext) (SourceReader[int64], error) {
	return neverReader{}, nil
}

type neverReader struct{}

func (neverReader) ReadBatch(Collector[int64]) (ReadStatus, error) { return NothingAvailable, nil }
func (neverReader) Close() error                                   { return nil }

// Flink's documented incremental checkpoint scenario, with
// execution.checkpointing.num-retained=2 and the "compactions" scripted:
//
//	CP1: sst 1,2          uploads 1,2
//	CP2: sst 1,2,3,4      uploads 3,4; references 1,2
//	CP3: sst 4,5          (1,2,3 compacted into 5) uploads 5; references 4;
//	                      CP1 is subsumed, 1,2 stay (CP2 uses them)
//	CP4: sst 6            (4,5 compacted into 6) uploads 6; CP2 is subsumed:
//	                      1,2,3 are deleted
//	CP5: sst 6            uploads nothing; CP3 is subsumed: 4,5 are deleted
func TestIncrementalCheckpointScenario(t *testing.T) {
	dir := t.TempDir()
	script := map[int64][]string{
		1: {"1.sst", "2.sst"},
		2: {"1.sst", "2.sst", "3.sst", "4.sst"},
		3: {"4.sst", "5.sst"},
		4: {"6.sst"},
		5: {"6.sst"},
	}
	want := []struct {
		uploaded, referenced, shared []string // shared: what exists under shared/ after the checkpoint
	}{
		{[]string{"1.sst", "2.sst"}, nil, []string{"1.sst", "2.sst"}},
		{[]string{"3.sst", "4.sst"}, []string{"1.sst", "2.sst"}, []string{"1.sst", "2.sst", "3.sst", "4.sst"}},
		{[]string{"5.sst"}, []string{"4.sst"}, []string{"1.sst", "2.sst", "3.sst", "4.sst", "5.sst"}},
		{[]string{"6.sst"}, nil, []string{"4.sst", "5.sst", "6.sst"}},
		{nil, []string{"6.sst"}, []string{"6.sst"}},
	}
	env := NewEnvironment(Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Checkpoint: CheckpointOptions{Interval: time.Hour, Dir: filepath.Join(dir, "chk"), NumRetained: 2}})
	src := FromSource(env, neverSource{})
	connect(src, &graph.Node{Name: "scripted", UID: "scripted", Sink: true}, newNodeImpl(func(ctx *task.OpContext, _ network.Output[struct{}]) (task.Built, error) {
		op := &scriptedNative{opBase: newOpBase(ctx), dir: filepath.Join(dir, "local"), files: script, uploads: upload.NewTracker()}
		return task.Built{Op: op, Input: network.Output[int64](op)}, nil
	}))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var completed []*checkpointFiles
	env.hooks.runner.Completed = func(id int64, cp *metadataCheckpoint) {
		completed = append(completed, filesOf(cp))
	}
	done := make(chan error, 1)
	go func() { done <- env.Execute(ctx, "scenario") }()
	store, err := storage.Open(ctx, filepath.Join(dir, "chk"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	for i, w := range want {
		id := int64(i + 1)
		var got int64
		for attempt := 0; ; attempt++ {
			if got, err = env.TriggerCheckpoint(ctx); err == nil || attempt == 1000 {
				break
			}
			time.Sleep(time.Millisecond) // Execute may not have started yet
		}
		if err != nil || got != id {
			t.Fatalf("checkpoint %d: TriggerCheckpoint = %d, %v", id, got, err)
		}
		cp := completed[i]
		if !slices.Equal(cp.uploaded, w.uploaded) || !slices.Equal(cp.referenced, w.referenced) {
			t.Fatalf("checkpoint %d uploaded %v and referenced %v, want %v and %v", id, cp.uploaded, cp.referenced, w.uploaded, w.referenced)
		}
		// Deletions run in the background after the completion.
		deadline := time.Now().Add(5 * time.Second)
		for {
			shared := sharedNames(t, store)
			if slices.Equal(shared, w.shared) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("after checkpoint %d shared/ holds %v, want %v", id, shared, w.shared)
			}
			time.Sleep(time.Millisecond)
		}
	}
	cancel()
	<-done
}

type checkpointFiles struct{ uploaded, referenced []string }

// local name of a shared file: after the last "-".
func localName(path string) string { return path[strings.LastIndex(path, "-")+1:] }

func filesOf(cp *metadataCheckpoint) *checkpointFiles {
	f := &checkpointFiles{}
	for _, op := range cp.Operators {
		for _, st := range op.Subtasks {
			if st.Native == nil {
				continue
			}
			for _, nf := range st.Native.Files {
				if nf.New {
					f.uploaded = append(f.uploaded, nf.Name)
				} else {
					f.referenced = append(f.referenced, nf.Name)
				}
			}
		}
	}
	slices.Sort(f.uploaded)
	slices.Sort(f.referenced)
	return f
}

func sharedNames(t *testing.T, s *storage.Storage) []string {
	objs, err := s.ListShared(context.Background(), "scenario")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, o := range objs {
		out = append(out, localName(o.Key))
	}
	slices.Sort(out)
	return out
}

type metadataCheckpoint = metadata.Checkpoint
