package cli

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

// The end-to-end proof that unaligned checkpoints persist in-flight data
// under backpressure: with a slow sink, every checkpoint of the unaligned
// mode is unaligned and persists data, none of the aligned mode is.
func TestBenchUnalignedJSON(t *testing.T) {
	r := runCLI(t, "bench", "unaligned", "--modes", "aligned,unaligned", "--checkpoints", "2", "--spin", "20us", "--json")
	r.want(t, ExitOK)
	// The fields the issue names come first, in its order.
	num := `-?[0-9.e+-]+`
	head := regexp.MustCompile(`^\{"modes":\[\{"mode":"aligned","p50Ms":` + num + `,"p99Ms":` + num +
		`,"persistedBytes":[0-9]+,"checkpoints":2,"unalignedCheckpoints":0[,}].*\{"mode":"unaligned","p50Ms":` + num +
		`,"p99Ms":` + num + `,"persistedBytes":[0-9]+,"checkpoints":2,"unalignedCheckpoints":[0-9]+[,}]`)
	if !head.MatchString(r.stdout) || strings.Count(r.stdout, "\n") != 1 {
		t.Errorf("stdout is not one JSON object of the expected shape:\n%s", r.stdout)
	}
	type mode struct {
		Mode                 string  `json:"mode"`
		P50Ms                float64 `json:"p50Ms"`
		P99Ms                float64 `json:"p99Ms"`
		PersistedBytes       int64   `json:"persistedBytes"`
		Checkpoints          int     `json:"checkpoints"`
		UnalignedCheckpoints int     `json:"unalignedCheckpoints"`
	}
	var res struct {
		Modes                 []mode  `json:"modes"`
		AlignedToUnalignedP50 float64 `json:"alignedToUnalignedP50"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, r.stdout)
	}
	if len(res.Modes) != 2 || res.Modes[0].Mode != "aligned" || res.Modes[1].Mode != "unaligned" {
		t.Fatalf("result describes the wrong modes: %+v", res)
	}
	for _, m := range res.Modes {
		if m.Checkpoints != 2 || !(0 < m.P50Ms && m.P50Ms <= m.P99Ms) {
			t.Errorf("%s: want 2 checkpoints and 0 < p50 <= p99: %+v", m.Mode, m)
		}
	}
	if a := res.Modes[0]; a.UnalignedCheckpoints != 0 || a.PersistedBytes != 0 {
		t.Errorf("aligned mode took unaligned checkpoints or persisted in-flight data: %+v", a)
	}
	if u := res.Modes[1]; u.UnalignedCheckpoints < 1 || u.PersistedBytes <= 0 {
		t.Errorf("unaligned mode: want unaligned checkpoints that persisted in-flight data: %+v", u)
	}
	if res.AlignedToUnalignedP50 <= 0 {
		t.Errorf("no ratio of the p50s: %s", r.stdout)
	}
}

func TestBenchUnalignedTable(t *testing.T) {
	r := runCLI(t, "bench", "unaligned", "--modes", "unaligned", "--checkpoints", "1", "--spin", "20us", "-p", "1")
	r.want(t, ExitOK)
	for _, s := range []string{"MODE", "CHECKPOINTS", "UNALIGNED", "P50", "P99", "PERSISTED", "START DELAY", "ASYNC", "unaligned", "KiB"} {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("table lacks %q:\n%s", s, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "aligned p50 / unaligned p50") {
		t.Errorf("ratio printed with one mode:\n%s", r.stdout)
	}
}

func TestBenchUnalignedUsageErrors(t *testing.T) {
	r := runCLI(t, "bench", "unaligned", "--modes", "aligned,aligned-bogus", "--checkpoints", "0", "--spin", "0s",
		"--record-size", "lots", "--buffer-size", "100", "-p", "0", "--backpressure-timeout", "0s", "--checkpoint-timeout", "soon")
	r.want(t, ExitUsage, `unknown mode "aligned-bogus": valid modes are aligned, aligned-debloat, unaligned, unaligned-1ms`, "--checkpoints 0",
		"--spin 0s", `--record-size "lots"`, `--buffer-size "100"`, "--parallelism 0", "--backpressure-timeout 0s",
		`--checkpoint-timeout "soon"`)
	if r.stdout != "" {
		t.Errorf("stdout not empty:\n%s", r.stdout)
	}
	runCLI(t, "bench", "unaligned", "--modes", "unaligned-2ms").want(t, ExitUsage, `unknown mode "unaligned-2ms"`, "aligned, aligned-debloat, unaligned, unaligned-1ms")
	h := runCLI(t, "bench", "unaligned", "--help")
	h.want(t, ExitOK)
	for _, s := range []string{"--modes", "--checkpoints", "--spin", "--parallelism", "--record-size", "--buffer-size", "--json", "(default 1)"} {
		if !strings.Contains(h.stdout, s) {
			t.Errorf("help lacks %q:\n%s", s, h.stdout)
		}
	}
}
