package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestKillRestartScript runs scripts/kill-restart.sh for both state
// backends, with full, incremental and changelog checkpoints: the counter job is killed with SIGKILL at random moments,
// resumed with --from latest each time, and its committed output must count
// every key exactly once.
func TestKillRestartScript(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills weir processes for about 20 seconds")
	}
	bin := filepath.Join(t.TempDir(), "weir")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	// The changelog modes materialize every 700ms, so that kills land
	// during materializations and log uploads (every 10ms) as well as
	// between them.
	changelog := "--changelog --set state.changelog.periodic-materialize.interval=700ms"
	concurrent := "--set execution.checkpointing.interval=10ms --set execution.checkpointing.max-concurrent-checkpoints=3"
	// Unaligned checkpoints under backpressure (a slow sink), resumed at
	// another parallelism after every kill.
	unaligned := []string{"UNALIGNED=1", "SINK_DELAY=200us", "RESUME_PARALLELISMS=3 1 2", "RECORDS=100000", "RATE=40000"}
	for _, m := range []struct {
		name, backend, extra string
		env                  []string
	}{
		{"hashmap", "hashmap", "", nil},
		{"pebble", "pebble", "", nil},
		{"pebble-incremental", "pebble", "--incremental", nil},
		{"hashmap-changelog", "hashmap", changelog, nil},
		{"pebble-changelog", "pebble", changelog, nil},
		{"pebble-incremental-changelog", "pebble", "--incremental " + changelog, nil},
		// Overlapping checkpoints every 10ms: kills land while several
		// checkpoints upload, complete and subsume each other.
		{"pebble-incremental-concurrent", "pebble", "--incremental " + concurrent, nil},
		{"hashmap-changelog-concurrent", "hashmap", changelog + " " + concurrent, nil},
		{"hashmap-unaligned-rescale", "hashmap", "", unaligned},
		{"pebble-unaligned-1ms-rescale", "pebble", "--set execution.checkpointing.aligned-checkpoint-timeout=1ms", unaligned},
	} {
		t.Run(m.name, func(t *testing.T) {
			backend := m.backend
			cmd := exec.Command("bash", filepath.Join("..", "..", "scripts", "kill-restart.sh"), backend, "4")
			cmd.Env = append(os.Environ(), "WEIR="+bin)
			if m.extra != "" {
				cmd.Env = append(cmd.Env, "EXTRA="+m.extra)
			}
			cmd.Env = append(cmd.Env, m.env...)
			out, err := cmd.CombinedOutput()
			t.Logf("%s", out)
			if err != nil {
				t.Fatalf("kill-restart.sh %s: %v", backend, err)
			}
			if !strings.Contains(string(out), "OK: ") {
				t.Fatalf("the script did not report OK")
			}
		})
	}
}
