package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestKillRestartScript runs scripts/kill-restart.sh for both state
// backends: the counter job is killed with SIGKILL at random moments,
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
	for _, mode := range []string{"hashmap", "pebble", "pebble-incremental"} {
		t.Run(mode, func(t *testing.T) {
			backend, incremental := strings.CutSuffix(mode, "-incremental")
			cmd := exec.Command("bash", filepath.Join("..", "..", "scripts", "kill-restart.sh"), backend, "4")
			cmd.Env = append(os.Environ(), "WEIR="+bin)
			if incremental {
				cmd.Env = append(cmd.Env, "EXTRA=--incremental")
			}
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
