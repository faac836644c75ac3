package cli

import (
	"encoding/json"
	"io"
	"strings"
	"testing"
)

func TestBenchCheckpointJSON(t *testing.T) {
	r := runCLI(t, "bench", "checkpoint", "--modes", "full-hashmap,incremental", "--state-bytes", "1mb",
		"--duration", "1s", "--interval", "200ms", "--update-rate", "5000", "--json")
	r.want(t, ExitOK)
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	dec.DisallowUnknownFields()
	type mode struct {
		Mode              string  `json:"mode"`
		P50Ms             float64 `json:"p50Ms"`
		P99Ms             float64 `json:"p99Ms"`
		MaxMs             float64 `json:"maxMs"`
		CheckpointedBytes int64   `json:"checkpointedBytes"`
		FullBytes         int64   `json:"fullBytes"`
		RecordsPerSecond  float64 `json:"recordsPerSecond"`
		RestoreMs         float64 `json:"restoreMs"`
	}
	var res struct {
		Modes []mode `json:"modes"`
	}
	if err := dec.Decode(&res); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, r.stdout)
	}
	if rest, _ := io.ReadAll(dec.Buffered()); strings.TrimSpace(string(rest)) != "" || strings.Count(r.stdout, "\n") != 1 {
		t.Errorf("stdout holds more than one JSON object:\n%s", r.stdout)
	}
	if len(res.Modes) != 2 || res.Modes[0].Mode != "full-hashmap" || res.Modes[1].Mode != "incremental" {
		t.Fatalf("result describes the wrong modes: %+v", res)
	}
	for _, m := range res.Modes {
		if !(0 < m.P50Ms && m.P50Ms <= m.P99Ms && m.P99Ms <= m.MaxMs) || m.FullBytes <= 0 ||
			m.CheckpointedBytes <= 0 || m.CheckpointedBytes > m.FullBytes || m.RecordsPerSecond <= 0 || m.RestoreMs <= 0 {
			t.Errorf("implausible measurements: %+v", m)
		}
	}
}

func TestBenchCheckpointChangelog(t *testing.T) {
	r := runCLI(t, "bench", "checkpoint", "--modes", "incremental,changelog", "--state-bytes", "1mb",
		"--duration", "1500ms", "--interval", "200ms", "--materialize-interval", "300ms", "--json")
	r.want(t, ExitOK)
	var res struct {
		Modes []map[string]any `json:"modes"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, r.stdout)
	}
	if len(res.Modes) != 2 || res.Modes[0]["mode"] != "incremental" || res.Modes[1]["mode"] != "changelog" {
		t.Fatalf("result describes the wrong modes: %+v", res)
	}
	changelogFields := []string{"materializedBytes", "nonMaterializedBytes", "materializations"}
	for _, k := range changelogFields {
		if _, ok := res.Modes[0][k]; ok {
			t.Errorf("incremental mode has the changelog field %q: %v", k, res.Modes[0])
		}
		if v, ok := res.Modes[1][k].(float64); !ok || v <= 0 {
			t.Errorf("changelog mode: want a positive %q: %v", k, res.Modes[1])
		}
	}

	tab := runCLI(t, "bench", "checkpoint", "--modes", "incremental,changelog", "--state-bytes", "512kb",
		"--duration", "1s", "--interval", "200ms", "--materialize-interval", "300ms")
	tab.want(t, ExitOK)
	for _, s := range []string{"MATERIALIZED", "NON-MAT", "MATS", "changelog", "incremental"} {
		if !strings.Contains(tab.stdout, s) {
			t.Errorf("table lacks %q:\n%s", s, tab.stdout)
		}
	}
}

func TestBenchCheckpointTable(t *testing.T) {
	r := runCLI(t, "bench", "checkpoint", "--modes", "full-pebble", "--state-bytes", "512kb",
		"--duration", "500ms", "--interval", "100ms")
	r.want(t, ExitOK)
	for _, s := range []string{"MODE", "P50", "P99", "MAX", "CHECKPOINTED", "FULL", "RECORDS/S", "RESTORE", "full-pebble", "KiB"} {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("table lacks %q:\n%s", s, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "MATERIALIZED") {
		t.Errorf("table without the changelog mode has its columns:\n%s", r.stdout)
	}
}

func TestBenchCheckpointUsageErrors(t *testing.T) {
	r := runCLI(t, "bench", "checkpoint", "--modes", "full-hashmap,teleport", "--state-bytes", "lots",
		"--interval", "0s", "--duration", "soon", "--update-rate", "-1", "-p", "0", "--materialize-interval", "0s")
	r.want(t, ExitUsage, `unknown mode "teleport"`, "full-hashmap, full-pebble, incremental, changelog",
		`--state-bytes "lots"`, "--interval 0s", `--duration "soon"`, "--update-rate -1", "--parallelism 0",
		"--materialize-interval 0s")
	if r.stdout != "" {
		t.Errorf("stdout not empty:\n%s", r.stdout)
	}
	runCLI(t, "bench", "checkpoint", "--state-bytes", "100").want(t, ExitUsage, "--state-bytes", "at least 1024")
	runCLI(t, "bench", "--help").want(t, ExitOK)
	if h := runCLI(t, "bench", "checkpoint", "--help"); !strings.Contains(h.stdout, "--modes") || !strings.Contains(h.stdout, "--state-bytes") ||
		!strings.Contains(h.stdout, "--materialize-interval") {
		t.Errorf("help lacks the flags:\n%s", h.stdout)
	}
}
