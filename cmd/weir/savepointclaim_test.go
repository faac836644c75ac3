package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSavepointClaimScript runs scripts/savepoint-claim.sh: the counter job
// with incremental pebble checkpoints (and with the changelog) is killed
// with SIGKILL, its latest checkpoint restored by path in NO_CLAIM mode as
// another job, the base's checkpoint directory deleted once that job
// checkpointed, the job killed again and resumed with --from latest: its
// checkpoints need nothing of the base, and the committed output counts
// every key exactly once.
func TestSavepointClaimScript(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills weir processes for about 10 seconds")
	}
	bin := filepath.Join(t.TempDir(), "weir")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, m := range []struct{ name, backend, extra string }{
		{"pebble-incremental", "pebble", ""},
		{"pebble-incremental-changelog", "pebble", "--changelog --set state.changelog.periodic-materialize.interval=300ms"},
	} {
		t.Run(m.name, func(t *testing.T) {
			cmd := exec.Command("bash", filepath.Join("..", "..", "scripts", "savepoint-claim.sh"), m.backend)
			cmd.Env = append(os.Environ(), "WEIR="+bin, "EXTRA="+m.extra)
			out, err := cmd.CombinedOutput()
			t.Logf("%s", out)
			if err != nil {
				t.Fatalf("savepoint-claim.sh %s: %v", m.backend, err)
			}
			if !strings.Contains(string(out), "OK: ") {
				t.Fatalf("the script did not report OK")
			}
		})
	}
}
