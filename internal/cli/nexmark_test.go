package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weirstream/weir/internal/nexmark"
)

func allQueries() []string { return nexmark.QueryNames() }

// weir nexmark generate writes Flink-shaped JSON lines; the same flags
// give the same bytes, to a file or to standard output.
func TestNexmarkGenerate(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.jsonl"), filepath.Join(dir, "b.jsonl")
	runCLI(t, "nexmark", "generate", "--events", "20000", "--tps", "1000", "--seed", "5", "--output", a).want(t, ExitOK)
	runCLI(t, "nexmark", "generate", "--events", "20000", "--tps", "1000", "--seed", "5", "--output", b).want(t, ExitOK)
	ab, err := os.ReadFile(a)
	if err != nil {
		t.Fatal(err)
	}
	bb, _ := os.ReadFile(b)
	if string(ab) != string(bb) {
		t.Fatal("equal flags wrote different files")
	}
	lines := strings.Split(strings.TrimSuffix(string(ab), "\n"), "\n")
	if len(lines) != 20000 {
		t.Fatalf("%d lines, want 20000", len(lines))
	}
	kinds := map[float64]int{}
	for _, l := range lines {
		var ev map[string]any
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		kinds[ev["event_type"].(float64)]++
	}
	if kinds[0] != 400 || kinds[1] != 1200 || kinds[2] != 18400 {
		t.Errorf("event types %v, want 400 persons, 1200 auctions, 18400 bids", kinds)
	}
	// Event 19999 is at 19999 * 1000 / 1000 ms after the base time.
	var last struct{ Bid struct{ DateTime int64 } }
	json.Unmarshal([]byte(lines[len(lines)-1]), &last)
	if want := nexmark.DefaultBaseTime + 19999; last.Bid.DateTime != want {
		t.Errorf("last event's dateTime %d, want %d (--tps 1000)", last.Bid.DateTime, want)
	}

	r := runCLI(t, "nexmark", "generate", "--events", "20000", "--tps", "1000", "--seed", "5", "--output", "-")
	r.want(t, ExitOK)
	if r.stdout != string(ab) {
		t.Error("--output - wrote other bytes than the file")
	}
	r = runCLI(t, "nexmark", "generate", "--events", "100", "--tps", "1000", "--seed", "6", "--output", "-")
	if r.stdout == strings.Join(lines[:100], "\n")+"\n" {
		t.Error("another seed wrote the same events")
	}
}

func TestNexmarkGenerateErrors(t *testing.T) {
	runCLI(t, "nexmark", "generate", "--tps", "0").want(t, ExitUsage, "--events 0: must be at least 1", "--tps 0", "--output: give a file, or - for standard output")
	runCLI(t, "nexmark").want(t, ExitUsage, "missing command; valid commands: generate")
	runCLI(t, "nexmark", "generate", "--events", "1", "--output", filepath.Join(t.TempDir(), "no", "f")).want(t, ExitUsage, "--output")
}
