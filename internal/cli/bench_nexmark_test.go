package cli

import (
	"encoding/json"
	"strings"
	"testing"
)

// weir bench nexmark --json prints one object with the fields.
func TestBenchNexmarkJSON(t *testing.T) {
	r := runCLI(t, "bench", "nexmark", "--query", "q5", "--events", "20000", "--parallelism", "2", "--json")
	r.want(t, ExitOK)
	var got map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, r.stdout)
	}
	for _, k := range []string{"query", "events", "wallSeconds", "cpuSeconds", "eventsPerSecond", "eventsPerCoreSecond"} {
		if _, ok := got[k]; !ok {
			t.Errorf("JSON lacks %q: %s", k, r.stdout)
		}
	}
	if len(got) != 6 || got["query"] != "q5" || got["events"] != float64(20000) || got["eventsPerCoreSecond"].(float64) <= 0 {
		t.Fatalf("JSON %s", r.stdout)
	}
}

func TestBenchNexmarkTableAndErrors(t *testing.T) {
	r := runCLI(t, "bench", "nexmark", "--query", "q1", "--events", "10000")
	r.want(t, ExitOK)
	// 157940 is q1's published Flink per-core figure (157.94 K/s).
	for _, want := range []string{"events/CPU-s", "Flink V1 events/CPU-s", "157940"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("table lacks %q:\n%s", want, r.stdout)
		}
	}
	r = runCLI(t, "bench", "nexmark", "--query", "q6", "--events", "0", "--state-backend", "rocks")
	r.want(t, ExitUsage)
	for _, want := range []string{`--query "q6": must be one of q0, q1, q2, q3, q4, q5, q7, q8, q11`, "--events 0", `--state-backend "rocks"`} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
}
