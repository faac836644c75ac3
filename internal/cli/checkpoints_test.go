package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
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
		{Job: "orders", ID: 2, TriggerTime: t0 + 60_000, CompletionTime: t0 + 60_035, Bytes: 3 << 20, FullBytes: 5 << 20},
		// No FullBytes, as written before it was recorded: the full size is
		// computed from the referenced files.
		{Job: "orders", ID: 1, TriggerTime: t0, CompletionTime: t0 + 1500, Bytes: 812, Operators: []metadata.Operator{{
			UID: "op", Parallelism: 1, MaxParallelism: 128,
			Subtasks: []metadata.Subtask{{KeyGroupEnd: 127, Keyed: &storage.FileHandle{Path: "chk-1/op-0.state", Size: 900}}},
		}}},
		{Job: "my job", ID: 5, TriggerTime: t0, CompletionTime: t0 + 7, Bytes: 0},
		{Job: "my job", ID: 4, TriggerTime: t0, Bytes: 10, FullBytes: 10}, // no completion time, as the runner writes it
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
		{"JOB", "ID", "STATUS", "COMPLETED", "CHECKPOINTED", "FULL", "DURATION"},
		{"my_job", "4", "complete", "-", "10 B", "10 B", "-"},
		{"my_job", "5", "complete", "2026-01-01T00:00:00Z", "0 B", "0 B", "7ms"},
		{"my_job", "6", "corrupt: not a weir checkpoint metadata file", "-", "-", "-", "-"},
		{"orders", "1", "complete", "2026-01-01T00:00:01Z", "812 B", "900 B", "1.5s"},
		{"orders", "2", "complete", "2026-01-01T00:01:00Z", "3.0 MiB", "5.0 MiB", "35ms"},
		{"orders", "3", "incomplete (no _metadata)", "-", "-", "-", "-"},
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
	// Columns are aligned: every row starts its ID and FULL columns at the
	// same offsets.
	for _, col := range []string{"ID", "FULL"} {
		off := strings.Index(lines[0], col)
		for _, l := range lines[1:] {
			if strings.Contains(l, "corrupt") && col == "FULL" {
				continue // the reason is wider than the column
			}
			if len(l) <= off || l[off-1] != ' ' || l[off] == ' ' {
				t.Errorf("%s column not at offset %d:\n%s", col, off, r.stdout)
				break
			}
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
		{"job": "my_job", "id": 4.0, "status": "complete", "bytes": 10.0, "checkpointedSize": 10.0, "fullSize": 10.0, "path": "my_job/chk-4"},
		{"job": "my_job", "id": 5.0, "status": "complete", "completed": "2026-01-01T00:00:00Z", "bytes": 0.0, "checkpointedSize": 0.0, "fullSize": 0.0, "durationMs": 7.0, "path": "my_job/chk-5"},
		{"job": "my_job", "id": 6.0, "status": "corrupt", "path": "my_job/chk-6"},
		{"job": "orders", "id": 1.0, "status": "complete", "completed": "2026-01-01T00:00:01Z", "bytes": 812.0, "checkpointedSize": 812.0, "fullSize": 900.0, "durationMs": 1500.0, "path": "orders/chk-1"},
		{"job": "orders", "id": 2.0, "status": "complete", "completed": "2026-01-01T00:01:00Z", "bytes": float64(3 << 20), "checkpointedSize": float64(3 << 20), "fullSize": float64(5 << 20), "durationMs": 35.0, "path": "orders/chk-2"},
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
		t.Run(tc.name, func(t *testing.T) { wantCheckpointsUsageError(t, "list", tc.args, tc.want) })
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Errorf("the missing directory was created: %v", err)
	}
	r := runCLI(t, "checkpoints")
	r.want(t, ExitUsage, "missing command", "list")
}

// writeDataFile writes a data file of n bytes, under shared/ or under
// chk-<id>/, and returns its handle.
func writeDataFile(t *testing.T, s *storage.Storage, job string, id int64, shared bool, name string, n int) storage.FileHandle {
	t.Helper()
	ctx := context.Background()
	var (
		w   storage.FileWriter
		err error
	)
	if shared {
		w, err = s.CreateSharedFile(ctx, job, name)
	} else {
		w, err = s.CreateFile(ctx, job, id, name)
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte(strings.Repeat("x", n))); err != nil {
		t.Fatal(err)
	}
	h, err := w.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// writeIncrementalCheckpoints lays out job "orders" under a fresh directory
// (returned) with incremental checkpoints of a pebble-like backend:
//   - chk-1: operator "keyed" subtask 0 with native files shared/000001.sst
//     (100 B) and shared/000002.sst (50 B), both new, and a private
//     chk-1/MANIFEST-000003 (20 B); operator "window" with a Keyed stream
//     chk-1/window-0.state (30 B) and 5 B of inline list state; no
//     FullBytes recorded, so its full size is computed: 205 B;
//   - chk-2: subtask 0 reuses shared/000001.sst and adds shared/000004.sst
//     (70 B, new) and chk-2/MANIFEST-000005 (25 B); subtask 1 references
//     shared/000001.sst again; "window" has chk-2/window-0.state (40 B)
//     and timers chk-2/window-0.timers (8 B); checkpointed 143 B, full 243 B;
//   - chk-3: incomplete (a data file, no _metadata);
//   - chk-4: a _metadata that is garbage.
func writeIncrementalCheckpoints(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	s, err := storage.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const job = "orders"
	sst1 := writeDataFile(t, s, job, 1, true, "000001.sst", 100)
	sst2 := writeDataFile(t, s, job, 1, true, "000002.sst", 50)
	man3 := writeDataFile(t, s, job, 1, false, "MANIFEST-000003", 20)
	win1 := writeDataFile(t, s, job, 1, false, "window-0.state", 30)
	sst4 := writeDataFile(t, s, job, 2, true, "000004.sst", 70)
	man5 := writeDataFile(t, s, job, 2, false, "MANIFEST-000005", 25)
	win2 := writeDataFile(t, s, job, 2, false, "window-0.state", 40)
	tim2 := writeDataFile(t, s, job, 2, false, "window-0.timers", 8)
	writeDataFile(t, s, job, 3, false, "MANIFEST-000006", 5)

	keyed := func(sub metadata.Subtask) metadata.Operator {
		return metadata.Operator{UID: "keyed", Parallelism: 2, MaxParallelism: 128, Subtasks: []metadata.Subtask{sub}}
	}
	for _, c := range []metadata.Checkpoint{
		{Job: job, ID: 1, Bytes: 200, Operators: []metadata.Operator{
			keyed(metadata.Subtask{KeyGroupEnd: 63, Native: &metadata.NativeState{Registry: []byte("reg"), Files: []metadata.NativeFile{
				{Name: "000001.sst", Handle: sst1, Shared: true, New: true},
				{Name: "000002.sst", Handle: sst2, Shared: true, New: true},
				{Name: "MANIFEST-000003", Handle: man3},
			}}}),
			{UID: "window", Parallelism: 1, MaxParallelism: 128, Subtasks: []metadata.Subtask{{
				KeyGroupEnd: 127, Keyed: &win1,
				Lists: []metadata.List{{Name: "offsets", Elements: [][]byte{[]byte("12345")}}},
			}}},
		}},
		{Job: job, ID: 2, Bytes: 143, FullBytes: 243, Operators: []metadata.Operator{
			{UID: "keyed", Parallelism: 2, MaxParallelism: 128, Subtasks: []metadata.Subtask{
				{KeyGroupEnd: 63, Native: &metadata.NativeState{Registry: []byte("reg"), Files: []metadata.NativeFile{
					{Name: "000001.sst", Handle: sst1, Shared: true},
					{Name: "000004.sst", Handle: sst4, Shared: true, New: true},
					{Name: "MANIFEST-000005", Handle: man5},
				}}},
				{Index: 1, KeyGroupStart: 64, KeyGroupEnd: 127, Native: &metadata.NativeState{Files: []metadata.NativeFile{
					{Name: "000001.sst", Handle: sst1, Shared: true},
				}}},
			}},
			{UID: "window", Parallelism: 1, MaxParallelism: 128, Subtasks: []metadata.Subtask{{
				KeyGroupEnd: 127, Keyed: &win2, Timers: &tim2,
			}}},
		}},
	} {
		payload, err := metadata.Encode(&c)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.WriteMetadata(ctx, c.Job, c.ID, payload); err != nil {
			t.Fatal(err)
		}
	}
	chk4 := filepath.Join(dir, job, "chk-4")
	if err := os.MkdirAll(chk4, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(chk4, storage.MetadataName), []byte("garbage bytes, not metadata"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

const (
	// chk4Unknown is why deleting chk-1 or chk-2 keeps their shared files
	// (JSON-escaped): chk-4, newer than both, is corrupt.
	chk4Unknown = `checkpoint 4 cannot be read (not a weir checkpoint metadata file (magic \"garbage \", want \"WEIRCHK\\x00\")), so the files it references are unknown`

	inspectChk1JSON = `{"id":1,"path":"chk-1","checkpointedSize":200,"fullSize":205,"freedByDelete":50,"sharedKept":"` + chk4Unknown + `","restoredBy":[],"files":[
		{"path":"chk-1/MANIFEST-000003","size":20,"shared":false},
		{"path":"chk-1/window-0.state","size":30,"shared":false},
		{"path":"shared/000001.sst","size":100,"shared":true,"sharedWith":[2]},
		{"path":"shared/000002.sst","size":50,"shared":true}]}`
	inspectChk2JSON = `{"id":2,"path":"chk-2","checkpointedSize":143,"fullSize":243,"freedByDelete":73,"sharedKept":"` + chk4Unknown + `","restoredBy":[],"files":[
		{"path":"chk-2/MANIFEST-000005","size":25,"shared":false},
		{"path":"chk-2/window-0.state","size":40,"shared":false},
		{"path":"chk-2/window-0.timers","size":8,"shared":false},
		{"path":"shared/000001.sst","size":100,"shared":true,"sharedWith":[1]},
		{"path":"shared/000004.sst","size":70,"shared":true}]}`
)

// chk4UnknownLine is inspect's line saying why deleting chk-1 or chk-2
// keeps their shared files.
const chk4UnknownLine = `deleting it keeps its shared files: checkpoint 4 cannot be read (not a weir checkpoint metadata file (magic "garbage ", want "WEIRCHK\x00")), so the files it references are unknown`

// wantJSON fails the test unless got is one line of JSON equal to want.
func wantJSON(t *testing.T, got, want string) {
	t.Helper()
	if strings.Count(got, "\n") != 1 || !strings.HasSuffix(got, "\n") {
		t.Errorf("want exactly one line of JSON:\n%s", got)
	}
	var g, w any
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		t.Fatalf("%v:\n%s", err, got)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("want: %v", err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("JSON =\n%s\nwant\n%s", got, want)
	}
}

// wantLines fails the test unless text has the lines of want, each line's
// whitespace-separated fields compared.
func wantLines(t *testing.T, text string, want []string) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), text)
	}
	for i, w := range want {
		if !slices.Equal(strings.Fields(lines[i]), strings.Fields(w)) {
			t.Errorf("line %d = %q, want %q", i, lines[i], w)
		}
	}
}

func TestCheckpointsInspectJobDir(t *testing.T) {
	dir := writeIncrementalCheckpoints(t)
	jobDir := filepath.Join(dir, "orders")

	r := runCLI(t, "checkpoints", "inspect", jobDir)
	r.want(t, ExitOK)
	if r.stderr != "" {
		t.Errorf("stderr not empty:\n%s", r.stderr)
	}
	wantLines(t, r.stdout, []string{
		"chk-1: checkpointed 200 B, full 205 B, 4 files, deleting it frees 50 B",
		chk4UnknownLine,
		"PATH                   SIZE   SHARED",
		"chk-1/MANIFEST-000003  20 B   no",
		"chk-1/window-0.state   30 B   no",
		"shared/000001.sst      100 B  yes (also chk-2)",
		"shared/000002.sst      50 B   yes",
		"",
		"chk-2: checkpointed 143 B, full 243 B, 5 files, deleting it frees 73 B",
		chk4UnknownLine,
		"PATH                   SIZE   SHARED",
		"chk-2/MANIFEST-000005  25 B   no",
		"chk-2/window-0.state   40 B   no",
		"chk-2/window-0.timers  8 B    no",
		"shared/000001.sst      100 B  yes (also chk-1)",
		"shared/000004.sst      70 B   yes",
		"",
		`chk-4: corrupt: not a weir checkpoint metadata file (magic "garbage ", want "WEIRCHK\x00")`,
	})
	// The table is aligned: SIZE starts at the same offset on every row.
	lines := strings.Split(r.stdout, "\n")
	off := strings.Index(lines[2], "SIZE")
	for _, l := range lines[3:7] {
		if len(l) <= off || l[off-1] != ' ' || l[off] == ' ' {
			t.Errorf("SIZE column not at offset %d:\n%s", off, r.stdout)
			break
		}
	}

	r = runCLI(t, "checkpoints", "inspect", jobDir, "--json")
	r.want(t, ExitOK)
	var got struct {
		Checkpoints []map[string]any `json:"checkpoints"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("%v:\n%s", err, r.stdout)
	}
	if n := len(got.Checkpoints); n != 3 {
		t.Fatalf("%d checkpoints, want 3:\n%s", n, r.stdout)
	}
	// The corrupt checkpoint is an entry with only id, path and error.
	corrupt := got.Checkpoints[2]
	if e, _ := corrupt["error"].(string); !strings.HasPrefix(e, "not a weir checkpoint metadata file") {
		t.Errorf("corrupt checkpoint error = %q", e)
	}
	corrupt["error"] = "E"
	fixed, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	wantJSON(t, string(fixed)+"\n", `{"checkpoints":[`+inspectChk1JSON+`,`+inspectChk2JSON+`,{"id":4,"path":"chk-4","error":"E"}]}`)

	// A trailing slash and a relative path name the same directory.
	t.Chdir(dir)
	r = runCLI(t, "checkpoints", "inspect", "orders/", "--json")
	r.want(t, ExitOK)
	if !strings.Contains(r.stdout, `"path":"chk-2"`) {
		t.Errorf("relative path:\n%s", r.stdout)
	}
	t.Chdir(jobDir)
	r = runCLI(t, "checkpoints", "inspect", ".")
	r.want(t, ExitOK)
	if !strings.HasPrefix(r.stdout, "chk-1: checkpointed 200 B") {
		t.Errorf("inspect . :\n%s", r.stdout)
	}
	r = runCLI(t, "checkpoints", "inspect", "chk-2", "--json")
	r.want(t, ExitOK)
	wantJSON(t, r.stdout, `{"checkpoints":[`+inspectChk2JSON+`]}`)
}

func TestCheckpointsInspectOne(t *testing.T) {
	dir := writeIncrementalCheckpoints(t)
	chk2 := filepath.Join(dir, "orders", "chk-2")

	r := runCLI(t, "checkpoints", "inspect", chk2)
	r.want(t, ExitOK)
	wantLines(t, r.stdout, []string{
		"chk-2: checkpointed 143 B, full 243 B, 5 files, deleting it frees 73 B",
		chk4UnknownLine,
		"PATH                   SIZE   SHARED",
		"chk-2/MANIFEST-000005  25 B   no",
		"chk-2/window-0.state   40 B   no",
		"chk-2/window-0.timers  8 B    no",
		"shared/000001.sst      100 B  yes (also chk-1)",
		"shared/000004.sst      70 B   yes",
	})

	r = runCLI(t, "checkpoints", "inspect", chk2, "--json")
	r.want(t, ExitOK)
	wantJSON(t, r.stdout, `{"checkpoints":[`+inspectChk2JSON+`]}`)

	// file:// URLs work too; chk-1 has no recorded full size: it is computed.
	r = runCLI(t, "checkpoints", "inspect", "file://"+filepath.ToSlash(filepath.Join(dir, "orders", "chk-1")), "--json")
	r.want(t, ExitOK)
	wantJSON(t, r.stdout, `{"checkpoints":[`+inspectChk1JSON+`]}`)
}

func TestCheckpointsInspectEmpty(t *testing.T) {
	dir := t.TempDir()
	jobDir := filepath.Join(dir, "orders")
	if err := os.MkdirAll(filepath.Join(jobDir, "shared"), 0o755); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, "checkpoints", "inspect", jobDir)
	r.want(t, ExitOK)
	if want := "no complete checkpoints in " + jobDir + "\n"; r.stdout != want {
		t.Errorf("stdout = %q, want %q", r.stdout, want)
	}
	r = runCLI(t, "checkpoints", "inspect", jobDir, "--json")
	r.want(t, ExitOK)
	if want := `{"checkpoints":[]}` + "\n"; r.stdout != want {
		t.Errorf("stdout = %q, want %q", r.stdout, want)
	}

	// Only incomplete checkpoints: nothing to show either.
	dir = writeCheckpoints(t)
	if err := os.Remove(filepath.Join(dir, "orders", "chk-1", storage.MetadataName)); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "orders", "chk-2", storage.MetadataName)); err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, "checkpoints", "inspect", filepath.Join(dir, "orders"), "--json")
	r.want(t, ExitOK)
	if want := `{"checkpoints":[]}` + "\n"; r.stdout != want {
		t.Errorf("stdout = %q, want %q", r.stdout, want)
	}
}

func TestCheckpointsInspectUsageErrors(t *testing.T) {
	dir := writeIncrementalCheckpoints(t)
	jobDir := filepath.Join(dir, "orders")
	missing := filepath.Join(dir, "absent")
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	badName := filepath.Join(dir, "my job")
	if err := os.Mkdir(badName, 0o755); err != nil {
		t.Fatal(err)
	}
	// A _metadata that verifies but does not decode (chk-5), and one of
	// another checkpoint (chk-6).
	s, err := storage.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	other, err := metadata.Encode(&metadata.Checkpoint{Job: "orders", ID: 2})
	if err != nil {
		t.Fatal(err)
	}
	for id, payload := range map[int64][]byte{5: []byte(`{"version":1,"id":-3}`), 6: other} {
		if err := s.WriteMetadata(context.Background(), "orders", id, payload); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"missing job dir", []string{missing}, []string{"checkpoint directory " + missing + " does not exist"}},
		{"missing job dir URL", []string{"file://" + filepath.ToSlash(missing)}, []string{"does not exist"}},
		{"file as job dir", []string{file}, []string{"checkpoint directory " + file + " is not a directory"}},
		{"missing checkpoint", []string{filepath.Join(jobDir, "chk-9")}, []string{"checkpoint " + filepath.Join(jobDir, "chk-9") + " does not exist"}},
		{"missing root of checkpoint", []string{filepath.Join(missing, "orders", "chk-1")}, []string{"does not exist"}},
		{"incomplete checkpoint", []string{filepath.Join(jobDir, "chk-3")}, []string{"checkpoint " + filepath.Join(jobDir, "chk-3") + " is incomplete: it has no _metadata"}},
		{"corrupt checkpoint", []string{filepath.Join(jobDir, "chk-4")}, []string{"checkpoint " + filepath.Join(jobDir, "chk-4") + " is corrupt: not a weir checkpoint metadata file"}},
		{"undecodable checkpoint", []string{filepath.Join(jobDir, "chk-5")}, []string{"checkpoint " + filepath.Join(jobDir, "chk-5") + " is corrupt: invalid metadata: checkpoint id -3 is not positive"}},
		{"checkpoint of another id", []string{filepath.Join(jobDir, "chk-6")}, []string{"checkpoint " + filepath.Join(jobDir, "chk-6") + " is corrupt: metadata is of checkpoint 2"}},
		{"non-canonical id", []string{filepath.Join(jobDir, "chk-01")}, []string{"chk-01"}},
		{"root instead of job", []string{dir}, []string{dir + " holds the checkpoints of jobs (orders), not of one job", filepath.Join(dir, "orders")}},
		{"not a job directory name", []string{badName}, []string{badName + ` is not a job's checkpoint directory`}},
		{"no path", nil, []string{"missing argument"}},
		{"empty path", []string{""}, []string{"the path must not be empty"}},
		{"two paths", []string{jobDir, jobDir}, []string{`unexpected argument "` + jobDir + `"`}},
		{"bad json flag", []string{jobDir, "--json=maybe"}, []string{`--json "maybe": must be true or false`}},
	} {
		t.Run(tc.name, func(t *testing.T) { wantCheckpointsUsageError(t, "inspect", tc.args, tc.want) })
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Errorf("the missing directory was created: %v", err)
	}
	r := runCLI(t, "checkpoints")
	r.want(t, ExitUsage, "missing command", "delete, inspect, list")
}

// wantCheckpointsUsageError runs `weir checkpoints <sub> args...` and
// checks that it is a usage error naming want, on stderr only.
func wantCheckpointsUsageError(t *testing.T, sub string, args, want []string) {
	t.Helper()
	r := runCLI(t, append([]string{"checkpoints", sub}, args...)...)
	r.want(t, ExitUsage, append(want, "Run 'weir checkpoints "+sub+" --help' for usage.")...)
	if !strings.HasPrefix(r.stderr, "error: ") {
		t.Errorf("stderr does not start with \"error: \":\n%s", r.stderr)
	}
	if r.stdout != "" {
		t.Errorf("stdout not empty:\n%s", r.stdout)
	}
}

// A changelog checkpoint shows its parts: the materialization the log builds
// on, the log segments (of this run and of an earlier one), and pending
// records.
func TestCheckpointsInspectChangelog(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := storage.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const job = "counter"
	mat := writeDataFile(t, s, job, 0, true, "op-c-0-r1-m2.kst", 300)
	tmr := writeDataFile(t, s, job, 0, true, "op-c-0-r1-m2.tmr", 10)
	old := writeDataFile(t, s, job, 0, true, "op-c-0-r1-log-7.log", 40)
	seg := writeDataFile(t, s, job, 0, true, "op-c-0-r2-log-1.log", 50)
	pend := writeDataFile(t, s, job, 5, false, "op-c-1.pending", 5)
	c := metadata.Checkpoint{Job: job, ID: 5, Bytes: 50, Operators: []metadata.Operator{{UID: "c", Parallelism: 2, MaxParallelism: 128,
		Subtasks: []metadata.Subtask{
			{KeyGroupEnd: 63, Keyed: &mat, Timers: &tmr, Changelog: &metadata.ChangelogState{
				Materialization: 2, MaterializedSeq: 0, From: 1, To: 30,
				Segments: []metadata.LogSegment{{File: seg, From: 1, To: 30}},
				Earlier:  []metadata.LogRange{{From: 101, To: 120, Segments: []metadata.LogSegment{{File: old, From: 95, To: 120}}}},
			}},
			{Index: 1, KeyGroupStart: 64, KeyGroupEnd: 127, Pending: &metadata.LogSegment{File: pend, From: 1, To: 2}},
		}}}}
	payload, err := metadata.Encode(&c)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.WriteMetadata(ctx, job, 5, payload); err != nil {
		t.Fatal(err)
	}
	chk := filepath.Join(dir, job, "chk-5")
	r := runCLI(t, "checkpoints", "inspect", chk)
	r.want(t, ExitOK)
	wantLines(t, r.stdout, []string{
		"chk-5: checkpointed 50 B, full 405 B, 5 files, deleting it frees 405 B",
		"changelog: materialized 310 B (materialization 2), log 90 B in 2 segments, 50 records to replay",
		"PATH                            SIZE   SHARED  PART",
		"chk-5/op-c-1.pending            5 B    no      pending",
		"shared/op-c-0-r1-log-7.log      40 B   yes     log",
		"shared/op-c-0-r1-m2.kst         300 B  yes     materialized",
		"shared/op-c-0-r1-m2.tmr         10 B   yes     materialized",
		"shared/op-c-0-r2-log-1.log      50 B   yes     log",
	})
	r = runCLI(t, "checkpoints", "inspect", chk, "--json")
	r.want(t, ExitOK)
	wantJSON(t, r.stdout, `{"checkpoints":[{"id":5,"path":"chk-5","checkpointedSize":50,"fullSize":405,"freedByDelete":405,"restoredBy":[],
		"changelog":{"materializedSize":310,"logSize":90,"logSegments":2,"logRecords":50,"materializations":[2]},"files":[
		{"path":"chk-5/op-c-1.pending","size":5,"shared":false,"part":"pending"},
		{"path":"shared/op-c-0-r1-log-7.log","size":40,"shared":true,"part":"log"},
		{"path":"shared/op-c-0-r1-m2.kst","size":300,"shared":true,"part":"materialized"},
		{"path":"shared/op-c-0-r1-m2.tmr","size":10,"shared":true,"part":"materialized"},
		{"path":"shared/op-c-0-r2-log-1.log","size":50,"shared":true,"part":"log"}]}]}`)
}

// The in-flight data of an unaligned checkpoint is summarised once, and a
// channel-state file shared by several subtasks is listed (and counted in
// the full size) once.
func TestInspectUnalignedCheckpoint(t *testing.T) {
	file := storage.FileHandle{Path: "chk-3/channel-state-0", Size: 900}
	ch := func(consumer int, off int64) metadata.ChannelState {
		return metadata.ChannelState{Edge: "a/0->b/0", Consumer: consumer, Consumers: 2, File: file, Offset: off, Length: 300, Buffers: 1}
	}
	payload, err := metadata.Encode(&metadata.Checkpoint{Job: "j", ID: 3, Bytes: 900, UnalignedSubtasks: 2, PersistedBytes: 900,
		Operators: []metadata.Operator{{UID: "b", Name: "B", Parallelism: 2, MaxParallelism: 128, Subtasks: []metadata.Subtask{
			{Index: 0, KeyGroupEnd: 63, Channels: []metadata.ChannelState{ch(0, 0), ch(0, 300)}},
			{Index: 1, KeyGroupStart: 64, KeyGroupEnd: 127, Channels: []metadata.ChannelState{ch(1, 600)}},
		}}}})
	if err != nil {
		t.Fatal(err)
	}
	cp := decodeInspected(3, payload)
	if cp.Error != "" {
		t.Fatal(cp.Error)
	}
	if f := cp.InFlight; f == nil || f.UnalignedSubtasks != 2 || f.PersistedBytes != 900 || f.Channels != 3 {
		t.Errorf("in-flight summary %+v, want 2 subtasks, 900 bytes, 3 channels", cp.InFlight)
	}
	if len(cp.Files) != 1 || cp.Files[0].Part != "in-flight" || cp.FullSize != 900 {
		t.Errorf("files %+v, full size %d; want the channel-state file once, 900 bytes", cp.Files, cp.FullSize)
	}
}
