package cli

import (
	"bufio"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// weir bench nexmark --json prints one object with the fields,
// the setup of Flink's suite by default.
func TestBenchNexmarkJSON(t *testing.T) {
	r := runCLI(t, "bench", "nexmark", "--query", "q5", "--events", "10000", "--parallelism", "2", "--json")
	r.want(t, ExitOK)
	var got map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, r.stdout)
	}
	for _, k := range []string{"query", "events", "wallSeconds", "cpuSeconds", "eventsPerSecond", "eventsPerCoreSecond",
		"parallelism", "seed", "stateBackend", "checkpointing", "tps", "eventTimeSpanSeconds", "resultRows"} {
		if _, ok := got[k]; !ok {
			t.Errorf("JSON lacks %q: %s", k, r.stdout)
		}
	}
	if got["query"] != "q5" || got["events"] != float64(10000) || got["eventsPerCoreSecond"].(float64) <= 0 {
		t.Fatalf("JSON %s", r.stdout)
	}
	if got["stateBackend"] != "pebble" || got["tps"] != float64(10_000_000) || got["eventTimeSpanSeconds"] != 10000.0/10_000_000 {
		t.Errorf("defaults: JSON %s", r.stdout)
	}
	cp, _ := got["checkpointing"].(map[string]any)
	if cp["interval"] != "3m0s" || cp["mode"] != "exactly-once" || cp["incremental"] != true {
		t.Errorf("checkpointing %v, want Flink's suite's (3m0s, exactly-once, incremental)", cp)
	}
}

// The flags reach the run and its JSON; q0's rows are its bids, so a
// reader sees the sink got rows.
func TestBenchNexmarkFlags(t *testing.T) {
	r := runCLI(t, "bench", "nexmark", "--query", "q0", "--events", "20000", "--tps", "1000", "--seed", "9",
		"--state-backend", "hashmap", "--checkpoint-interval", "0", "--incremental=false",
		"--checkpointing-mode", "at-least-once", "--json")
	r.want(t, ExitOK)
	var got struct {
		Events               int64
		TPS                  int64
		Seed                 uint64
		StateBackend         string
		EventTimeSpanSeconds float64
		ResultRows           int64
		Checkpointing        struct {
			Interval, Mode string
			Incremental    bool
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatal(err)
	}
	if got.TPS != 1000 || got.Seed != 9 || got.StateBackend != "hashmap" || got.Checkpointing.Interval != "off" ||
		got.Checkpointing.Mode != "at-least-once" || got.Checkpointing.Incremental {
		t.Errorf("JSON %s", r.stdout)
	}
	if math.Abs(got.EventTimeSpanSeconds-float64(got.Events)/float64(got.TPS)) > 1e-9 || got.EventTimeSpanSeconds != 20 {
		t.Errorf("eventTimeSpanSeconds %v, want events/tps = 20", got.EventTimeSpanSeconds)
	}
	// 46 of every 50 events are bids.
	if got.ResultRows != 20000*46/50 {
		t.Errorf("q0 resultRows %d, want %d", got.ResultRows, 20000*46/50)
	}
}

func TestBenchNexmarkTableAndErrors(t *testing.T) {
	r := runCLI(t, "bench", "nexmark", "--query", "q1", "--events", "10000")
	r.want(t, ExitOK)
	// 157940 is q1's published Flink per-core figure (157.94 K/s).
	for _, want := range []string{"events/CPU-s", "Flink V1 events/CPU-s", "157940", "result rows", "9200",
		"pebble backend, checkpoints every 3m0s, exactly-once, incremental", "event time spanned: 0.001 s"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("table lacks %q:\n%s", want, r.stdout)
		}
	}
	r = runCLI(t, "bench", "nexmark", "--query", "q6", "--events", "0", "--state-backend", "rocks", "--tps", "0",
		"--checkpointing-mode", "once", "--checkpoint-interval", "-1s")
	r.want(t, ExitUsage, `--query "q6": must be one of q0, q1`, "--events 0", `--state-backend "rocks": must be pebble or hashmap`,
		"--tps 0", `--checkpointing-mode "once": must be exactly-once or at-least-once`, "--checkpoint-interval -1s")
	runCLI(t, "bench", "nexmark", "--events", "10").want(t, ExitUsage, "give --query (one of q0")
	runCLI(t, "bench", "nexmark", "--all", "--query", "q1", "--events", "10").want(t, ExitUsage, "--query and --all are mutually exclusive")
	runCLI(t, "bench", "nexmark", "--all", "--output", "x", "--events", "10").want(t, ExitUsage, "--output: only with --query")
}

// --all runs every query of the catalog with the same flags: a table with
// Flink's figure per query, or one JSON array.
func TestBenchNexmarkAll(t *testing.T) {
	r := runCLI(t, "bench", "nexmark", "--all", "--events", "20000", "--checkpoint-interval", "0", "--state-backend", "hashmap", "--json")
	r.want(t, ExitOK)
	var got []struct {
		Query      string
		ResultRows int64
	}
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("stdout is not one JSON array: %v\n%s", err, r.stdout)
	}
	names := allQueries()
	if len(got) != len(names) {
		t.Fatalf("%d results, want one per query %v", len(got), names)
	}
	for i, q := range names {
		if got[i].Query != q {
			t.Errorf("result %d is %q, want %q", i, got[i].Query, q)
		}
	}
	if got[0].ResultRows == 0 {
		t.Errorf("q0 emitted no rows: %s", r.stdout)
	}
	r = runCLI(t, "bench", "nexmark", "--all", "--events", "5000", "--checkpoint-interval", "0", "--state-backend", "hashmap")
	r.want(t, ExitOK)
	for _, want := range []string{"QUERY", "EVENTS/CORE-S", "FLINK EVENTS/CORE-S", "RATIO", "RESULT ROWS", "155020", "hashmap backend, checkpoints off"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("table lacks %q:\n%s", want, r.stdout)
		}
	}
	if n := strings.Count(r.stdout, "\n"); n != len(names)+2 {
		t.Errorf("%d lines, want a setup line, a header and one per query:\n%s", n, r.stdout)
	}
}

// --output writes the result rows as sorted JSON lines: the same flags give
// the same bytes, whatever the parallelism.
func TestBenchNexmarkOutput(t *testing.T) {
	dir := t.TempDir()
	run := func(name, p string) []byte {
		path := filepath.Join(dir, name)
		runCLI(t, "bench", "nexmark", "--query", "q2", "--events", "20000", "--parallelism", p, "--output", path).want(t, ExitOK)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	a, b, c := run("a.jsonl", "1"), run("b.jsonl", "1"), run("c.jsonl", "2")
	if string(a) != string(b) || string(a) != string(c) {
		t.Fatal("equal flags wrote different files")
	}
	sc := bufio.NewScanner(strings.NewReader(string(a)))
	lines, prev := 0, ""
	for sc.Scan() {
		var row map[string]any
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		if sc.Text() < prev {
			t.Fatalf("lines not sorted: %q after %q", sc.Text(), prev)
		}
		prev = sc.Text()
		lines++
	}
	if lines == 0 {
		t.Fatal("q2 wrote no rows")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 3 {
		t.Errorf("temporary files left in %s: %v", dir, entries)
	}
	runCLI(t, "bench", "nexmark", "--query", "q2", "--events", "10", "--output", filepath.Join(dir, "no", "such", "dir")).want(t, ExitUsage, "--output")
}
