package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weirstream/weir/internal/checkpoint/storage/s3test"
)

// buildWeir builds the weir binary into a temporary directory.
func buildWeir(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "weir")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// runClusterKill runs scripts/cluster-kill.sh: `weir cluster local` with
// three task-manager processes runs the counter job at parallelism 6; a
// random task manager is killed with SIGKILL three times at random
// moments and replaced; the committed output must be exactly once.
func runClusterKill(t *testing.T, bin, backend string, env ...string) {
	t.Helper()
	cmd := exec.Command("bash", filepath.Join("..", "..", "scripts", "cluster-kill.sh"), backend, "3")
	cmd.Env = append(append(os.Environ(), "WEIR="+bin), env...)
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("cluster-kill.sh %s: %v", backend, err)
	}
	if !strings.Contains(string(out), "every key counted exactly once") {
		t.Fatalf("cluster-kill.sh %s did not check the output", backend)
	}
}

func TestClusterKillTaskManagers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a local cluster and kills task-manager processes for about 20 seconds")
	}
	bin := buildWeir(t)
	t.Run("hashmap", func(t *testing.T) { runClusterKill(t, bin, "hashmap") })
	t.Run("pebble-incremental", func(t *testing.T) { runClusterKill(t, bin, "pebble", "EXTRA=--incremental") })
	// Checkpoints on s3:// (gofakes3 in this test process; the job
	// manager and the task managers reach it over HTTP).
	t.Run("pebble-incremental-s3", func(t *testing.T) {
		runClusterKill(t, bin, "pebble", "EXTRA=--incremental", "CHK_DIR="+s3test.Start(t))
	})
}
