package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weirstream/weir/internal/checkpoint/metadata"
	"github.com/weirstream/weir/internal/checkpoint/storage"
)

// writeCheckpoints lays out, under a fresh directory: job "orders" with a
// complete chk-1, a complete chk-2 and an incomplete chk-3 (a data file,
// no _metadata); job "my job" (directory my_job) with a complete chk-5 and
// a chk-6 whose _metadata is garbage.
func writeCheckpoints(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	s, err := storage.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const t0 = 1767225600000 // 2026-01-01T00:00:00Z
	for _, c := range []metadata.Checkpoint{
		{Job: "orders", ID: 2, TriggerTime: t0 + 60_000, CompletionTime: t0 + 60_035, Bytes: 3 << 20},
		{Job: "orders", ID: 1, TriggerTime: t0, CompletionTime: t0 + 1500, Bytes: 812},
		{Job: "my job", ID: 5, TriggerTime: t0, CompletionTime: t0 + 7, Bytes: 0},
		{Job: "my job", ID: 4, TriggerTime: t0, Bytes: 10}, // no completion time, as the runner writes it
	} {
		payload, err := metadata.Encode(&c)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.WriteMetadata(ctx, c.Job, c.ID, payload); err != nil {
			t.Fatal(err)
		}
	}
	w, err := s.CreateFile(ctx, "orders", 3, "op-1-0.sst")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("state")); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	chk6 := filepath.Join(dir, "my_job", "chk-6")
	if err := os.MkdirAll(chk6, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(chk6, storage.MetadataName), []byte("garbage bytes, not metadata"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestCheckpointsListTable(t *testing.T) {
	dir := writeCheckpoints(t)
	r := runCLI(t, "checkpoints", "list", "--dir", dir)
	r.want(t, ExitOK)
	if r.stderr != "" {
		t.Errorf("stderr not empty:\n%s", r.stderr)
	}
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	want := [][]string{
		{"JOB", "ID", "STATUS", "COMPLETED", "SIZE", "DURATION"},
		{"my_job", "4", "complete", "-", "10 B", "-"},
		{"my_job", "5", "complete", "2026-01-01T00:00:00Z", "0 B", "7ms"},
		{"my_job", "6", "corrupt: not a weir checkpoint metadata file", "-", "-", "-"},
		{"orders", "1", "complete", "2026-01-01T00:00:01Z", "812 B", "1.5s"},
		{"orders", "2", "complete", "2026-01-01T00:01:00Z", "3.0 MiB", "35ms"},
		{"orders", "3", "incomplete (no _metadata)", "-", "-", "-"},
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), r.stdout)
	}
	for i, cols := range want {
		rest := lines[i]
		for _, col := range cols {
			j := strings.Index(rest, col)
			if j < 0 {
				t.Errorf("line %d lacks %q (in order):\n%s", i, col, lines[i])
				break
			}
			rest = rest[j+len(col):]
		}
	}
	// Columns are aligned: every row starts its ID column at the same offset.
	idCol := strings.Index(lines[0], "ID")
	for _, l := range lines[1:] {
		if len(l) <= idCol || l[idCol-1] != ' ' || l[idCol] == ' ' {
			t.Errorf("ID column not at offset %d:\n%s", idCol, r.stdout)
			break
		}
	}

	// --job takes the job's name and maps it to its directory.
	r = runCLI(t, "checkpoints", "list", "--dir", dir, "--job", "my job")
	r.want(t, ExitOK)
	if strings.Contains(r.stdout, "orders") || strings.Count(r.stdout, "my_job") != 3 {
		t.Errorf("--job 'my job':\n%s", r.stdout)
	}
}

func TestCheckpointsListJSON(t *testing.T) {
	dir := writeCheckpoints(t)
	r := runCLI(t, "checkpoints", "list", "--dir", dir, "--json")
	r.want(t, ExitOK)
	if strings.Count(r.stdout, "\n") != 1 {
		t.Errorf("want exactly one line of JSON:\n%s", r.stdout)
	}
	var got struct {
		Checkpoints []map[string]any `json:"checkpoints"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("%v:\n%s", err, r.stdout)
	}
	want := []map[string]any{
		{"job": "my_job", "id": 4.0, "status": "complete", "bytes": 10.0, "path": "my_job/chk-4"},
		{"job": "my_job", "id": 5.0, "status": "complete", "completed": "2026-01-01T00:00:00Z", "bytes": 0.0, "durationMs": 7.0, "path": "my_job/chk-5"},
		{"job": "my_job", "id": 6.0, "status": "corrupt", "path": "my_job/chk-6"},
		{"job": "orders", "id": 1.0, "status": "complete", "completed": "2026-01-01T00:00:01Z", "bytes": 812.0, "durationMs": 1500.0, "path": "orders/chk-1"},
		{"job": "orders", "id": 2.0, "status": "complete", "completed": "2026-01-01T00:01:00Z", "bytes": float64(3 << 20), "durationMs": 35.0, "path": "orders/chk-2"},
		{"job": "orders", "id": 3.0, "status": "incomplete", "path": "orders/chk-3"},
	}
	if len(got.Checkpoints) != len(want) {
		t.Fatalf("%d checkpoints, want %d:\n%s", len(got.Checkpoints), len(want), r.stdout)
	}
	for i, w := range want {
		g := got.Checkpoints[i]
		if i == 2 { // corrupt: the reason, and nothing about completion
			e, _ := g["error"].(string)
			if !strings.HasPrefix(e, "not a weir checkpoint metadata file") {
				t.Errorf("corrupt checkpoint error = %q", e)
			}
			delete(g, "error")
		}
		if len(g) != len(w) {
			t.Errorf("checkpoint %d = %v, want %v", i, g, w)
			continue
		}
		for k, v := range w {
			if g[k] != v {
				t.Errorf("checkpoint %d: %s = %v, want %v", i, k, g[k], v)
			}
		}
	}
}

func TestCheckpointsListEmpty(t *testing.T) {
	dir := t.TempDir()
	r := runCLI(t, "checkpoints", "list", "--dir", dir)
	r.want(t, ExitOK)
	if want := "no checkpoints under " + dir + "\n"; r.stdout != want {
		t.Errorf("stdout = %q, want %q", r.stdout, want)
	}
	r = runCLI(t, "checkpoints", "list", "--dir", dir, "--json")
	r.want(t, ExitOK)
	if want := `{"checkpoints":[]}` + "\n"; r.stdout != want {
		t.Errorf("stdout = %q, want %q", r.stdout, want)
	}

	dir = writeCheckpoints(t)
	r = runCLI(t, "checkpoints", "list", "--dir", dir, "--job", "nosuch")
	r.want(t, ExitOK)
	if want := "no checkpoints of job nosuch under " + dir + "\n"; r.stdout != want {
		t.Errorf("stdout = %q, want %q", r.stdout, want)
	}
	r = runCLI(t, "checkpoints", "list", "--dir", dir, "--job", "nosuch", "--json")
	r.want(t, ExitOK)
	if want := `{"checkpoints":[]}` + "\n"; r.stdout != want {
		t.Errorf("stdout = %q, want %q", r.stdout, want)
	}
}

func TestCheckpointsListUsageErrors(t *testing.T) {
	tmp := t.TempDir()
	missing := filepath.Join(tmp, "absent")
	file := filepath.Join(tmp, "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"missing dir", []string{"--dir", missing}, []string{"checkpoint directory " + missing + " does not exist"}},
		{"missing file URL", []string{"--dir", "file://" + filepath.ToSlash(missing)}, []string{"does not exist"}},
		{"file as dir", []string{"--dir", file}, []string{"checkpoint directory " + file + " is not a directory"}},
		{"empty job", []string{"--dir", tmp, "--job", ""}, []string{`--job ""`}},
		{"bad json flag", []string{"--dir", tmp, "--json=maybe"}, []string{`--json "maybe": must be true or false`}},
		{"argument", []string{"extra"}, []string{`unexpected argument "extra"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runCLI(t, append([]string{"checkpoints", "list"}, tc.args...)...)
			r.want(t, ExitUsage, append(tc.want, "Run 'weir checkpoints list --help' for usage.")...)
			if !strings.HasPrefix(r.stderr, "error: ") {
				t.Errorf("stderr does not start with \"error: \":\n%s", r.stderr)
			}
			if r.stdout != "" {
				t.Errorf("stdout not empty:\n%s", r.stdout)
			}
		})
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Errorf("the missing directory was created: %v", err)
	}
	r := runCLI(t, "checkpoints")
	r.want(t, ExitUsage, "missing command", "list")
}
