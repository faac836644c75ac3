package weir_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/sink"
	"github.com/weirstream/weir/source"
)

// deadRunStateDir makes what a run killed while it kept Pebble state leaves
// under root: its directory, with the lock file it wrote its pid into (no
// process holds it any more) and a database file.
func deadRunStateDir(t *testing.T, root string) string {
	t.Helper()
	dir := filepath.Join(root, "counter-0123456789ab")
	if err := os.MkdirAll(filepath.Join(dir, "count_0"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".lock"), []byte(strconv.Itoa(os.Getpid()+1)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "count_0", "000001.sst"), []byte("sst"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Every run deletes the state directories of dead runs when it starts,
// whatever its state backend, also without any keyed state: a pebble run
// killed with SIGKILL and resumed on hashmap leaves nothing behind. A run
// creates nothing under the state directory when it needs none.
func TestEveryRunRemovesDeadRunsStateDirs(t *testing.T) {
	for _, c := range []struct {
		name  string
		keyed bool
	}{{"hashmap", true}, {"no-keyed-state", false}} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			root := filepath.Join(dir, "state")
			dead := deadRunStateDir(t, root)
			opts := weir.Options{Parallelism: 2, StateBackend: weir.BackendHashMap, StateDir: root, Logger: quietLogger(t)}
			env := weir.NewEnvironment(opts)
			out := filepath.Join(dir, "out")
			if c.keyed {
				counterJob(env, 2000, 7, sink.Files(out, func(s string) string { return s }), -1, nil)
			} else {
				nums := weir.FromSource(env, source.Sequence(0, 999)).UID("numbers")
				weir.SinkTo(weir.Map(nums, func(i int64) string { return strconv.FormatInt(i, 10) }), sink.Files(out, func(s string) string { return s })).UID("sink")
			}
			if err := env.Execute(context.Background(), "counter"); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(dead); !os.IsNotExist(err) {
				t.Fatalf("the dead run's state directory is still there (%v)", err)
			}
			if entries, err := os.ReadDir(root); err != nil || len(entries) != 0 {
				t.Fatalf("state directory holds %v (%v), want nothing", entries, err)
			}
		})
	}
	t.Run("nothing-created", func(t *testing.T) {
		dir := t.TempDir()
		root := filepath.Join(dir, "weir-data", "state")
		env := weir.NewEnvironment(weir.Options{StateDir: root, Logger: quietLogger(t)})
		counterJob(env, 500, 7, sink.Files(filepath.Join(dir, "out"), func(s string) string { return s }), -1, nil)
		if err := env.Execute(context.Background(), "counter"); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(dir, "weir-data")); !os.IsNotExist(err) {
			t.Fatalf("a run without local state created %s (%v)", filepath.Join(dir, "weir-data"), err)
		}
	})
}
