package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/internal/jobs"
	"github.com/weirstream/weir/sink"
	"github.com/weirstream/weir/source"
)

// writeWords writes lines of random words from a small vocabulary, separated
// by single spaces, without empty lines or surrounding spaces.
func writeWords(t *testing.T, path string, lines int) {
	t.Helper()
	vocab := strings.Fields("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau upsilon")
	rng := rand.New(rand.NewPCG(1, 2))
	var b strings.Builder
	for range lines {
		n := 1 + rng.IntN(12)
		for k := range n {
			if k > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(vocab[rng.IntN(len(vocab))])
		}
		b.WriteByte('\n')
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// parseCounts parses "word count" lines, exactly one space apart.
func parseCounts(t *testing.T, out string) map[string]int64 {
	t.Helper()
	got := map[string]int64{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		word, count, ok := strings.Cut(sc.Text(), " ")
		n, err := strconv.ParseInt(count, 10, 64)
		if !ok || word == "" || err != nil || n < 1 {
			t.Fatalf("malformed output line %q", sc.Text())
		}
		if _, dup := got[word]; dup {
			t.Fatalf("word %q printed twice", word)
		}
		got[word] = n
	}
	return got
}

func TestWordCountFile(t *testing.T) {
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in.txt"), filepath.Join(dir, "out")
	writeWords(t, in, 2000)

	r := runCLI(t, "run", "wordcount", "--input", in, "--output", out, "--parallelism", "4")
	r.want(t, ExitOK)
	if r.stdout != "" {
		t.Errorf("stdout not empty with --output:\n%s", r.stdout)
	}
	got := parseCounts(t, readCommitted(t, out))

	text, err := os.ReadFile(in)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{}
	for _, w := range strings.Fields(string(text)) {
		want[w]++
	}
	if !maps.Equal(got, want) {
		t.Errorf("counts differ from strings.Fields:\n got %v\nwant %v", got, want)
	}

	for _, tool := range []string{"bash", "tr", "sort", "uniq"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not found: cannot compare with the shell pipeline", tool)
		}
	}
	cmd := exec.Command("bash", "-c", `tr -s ' ' '\n' < "$1" | sort | uniq -c`, "bash", in)
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	shell, err := cmd.Output()
	if err != nil {
		t.Fatalf("shell pipeline: %v", err)
	}
	fromShell := map[string]int64{}
	for _, line := range strings.Split(strings.TrimSpace(string(shell)), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			t.Fatalf("unexpected uniq -c line %q", line)
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		fromShell[f[1]] = n
	}
	if !maps.Equal(got, fromShell) {
		t.Errorf("counts differ from tr | sort | uniq -c:\n got %v\nwant %v", got, fromShell)
	}
}

func TestWordCountGeneratedToStdout(t *testing.T) {
	const lines = 3000
	r := runCLI(t, "run", "wordcount", "--lines", strconv.Itoa(lines), "-p", "3", "--log-level", "warn")
	r.want(t, ExitOK)
	if r.stderr != "" {
		t.Errorf("stderr not empty at --log-level warn:\n%s", r.stderr)
	}
	got := parseCounts(t, r.stdout)
	want := map[string]int64{}
	for i := range int64(lines) {
		for _, w := range strings.Fields(jobs.GeneratedLine(i)) {
			want[w]++
		}
	}
	if len(want) < 10 {
		t.Fatalf("generated text has only %d distinct words", len(want))
	}
	if !maps.Equal(got, want) {
		t.Errorf("counts differ from the generated text:\n got %v\nwant %v", got, want)
	}
}

func TestConfigFileAndJSONLogs(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "weir.yaml")
	if err := os.WriteFile(cfg, []byte("parallelism:\n  default: 2\npipeline:\n  name: my-count\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	r := runCLI(t, "run", "wordcount", "--config", cfg, "--lines", "200", "--output", out, "--log-format", "json", "--log-level", "debug")
	r.want(t, ExitOK)
	if r.stdout != "" {
		t.Errorf("stdout not empty:\n%s", r.stdout)
	}
	var sawStart bool
	for _, line := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line is not JSON: %q", line)
		}
		if rec["msg"] == "running job" {
			sawStart = true
			if rec["job"] != "my-count" || rec["parallelism"] != float64(2) {
				t.Errorf("pipeline.name or parallelism.default from the file not applied: %s", line)
			}
		}
	}
	if !sawStart {
		t.Errorf("no \"running job\" log line:\n%s", r.stderr)
	}
}

func TestBenchPipelineJSON(t *testing.T) {
	r := runCLI(t, "bench", "pipeline", "--records", "200000", "--json", "--edge", "rebalance", "--parallelism", "2")
	r.want(t, ExitOK)
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	dec.DisallowUnknownFields()
	var res struct {
		Edge                 string  `json:"edge"`
		Metrics              bool    `json:"metrics"`
		Records              int64   `json:"records"`
		Parallelism          int     `json:"parallelism"`
		WallSeconds          float64 `json:"wallSeconds"`
		CPUSeconds           float64 `json:"cpuSeconds"`
		RecordsPerSecond     float64 `json:"recordsPerSecond"`
		RecordsPerCoreSecond float64 `json:"recordsPerCoreSecond"`
	}
	if err := dec.Decode(&res); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, r.stdout)
	}
	if rest, _ := io.ReadAll(dec.Buffered()); strings.TrimSpace(string(rest)) != "" || strings.Count(r.stdout, "\n") != 1 {
		t.Errorf("stdout holds more than one JSON object:\n%s", r.stdout)
	}
	if res.Edge != "rebalance" || !res.Metrics || res.Records != 200000 || res.Parallelism != 2 {
		t.Errorf("result describes the wrong run: %+v", res)
	}
	if res.WallSeconds <= 0 || res.CPUSeconds <= 0 || res.RecordsPerSecond <= 0 || res.RecordsPerCoreSecond <= 0 {
		t.Errorf("measurements must be positive: %+v", res)
	}
}

func TestBenchPipelineTable(t *testing.T) {
	r := runCLI(t, "bench", "pipeline", "--records", "100000")
	r.want(t, ExitOK)
	for _, s := range []string{"edge", "chained", "records", "100000", "wall time", "records/s"} {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("table lacks %q:\n%s", s, r.stdout)
		}
	}
}

// testJob is a job for tests only, added to an injected registry.
type testJob struct {
	name  string
	build func(env *weir.Environment) error
}

func (j *testJob) Name() string                 { return j.name }
func (j *testJob) Description() string          { return "a job for tests" }
func (j *testJob) RegisterFlags(*pflag.FlagSet) {}
func (j *testJob) Validate() error              { return nil }
func (j *testJob) Build(env *weir.Environment, _ io.Writer) error {
	return j.build(env)
}

// registryWith returns the built-in jobs plus a test job.
func registryWith(name string, build func(env *weir.Environment) error) *jobs.Registry {
	reg := jobs.Builtin()
	reg.Add(func() jobs.Job { return &testJob{name: name, build: build} })
	return reg
}

var errBoom = errors.New("boom")

func TestRuntimeFailureExits1(t *testing.T) {
	reg := registryWith("explode", func(env *weir.Environment) error {
		s := weir.FromSource(env, source.Sequence(0, 9999))
		p := weir.Process(s.Rebalance(), weir.ProcessFunc[int64, int64](func(ctx *weir.Context[int64], v int64) error {
			if v == 5000 {
				return fmt.Errorf("record %d: %w", v, errBoom)
			}
			ctx.Emit(v)
			return nil
		})).Name("Explode").UID("explode")
		weir.SinkTo(p, sink.Discard[int64]())
		return nil
	})
	r := runWith(t, context.Background(), reg, "run", "explode", "-p", "2")
	r.want(t, ExitFailure, `error: operator "Explode" (subtask`, "record 5000: boom")
	if strings.Contains(r.stderr, "--help") {
		t.Errorf("a runtime failure is not a usage problem:\n%s", r.stderr)
	}
	if r.stdout != "" {
		t.Errorf("stdout not empty:\n%s", r.stdout)
	}
}

func TestInvalidJobExits2(t *testing.T) {
	reg := registryWith("nosink", func(env *weir.Environment) error {
		weir.Map(weir.FromSource(env, source.Sequence(0, 9)), func(v int64) int64 { return v })
		return nil
	})
	r := runWith(t, context.Background(), reg, "run", "nosink")
	r.want(t, ExitUsage, "error: invalid job: the job has no sink")
}

// endless is a source that never ends; started is closed on its first read.
type endless struct {
	once    sync.Once
	started chan struct{}
}

func (e *endless) CreateReader(weir.SourceContext) (weir.SourceReader[int64], error) { return e, nil }
func (e *endless) Close() error                                                      { return nil }
func (e *endless) ReadBatch(out weir.Collector[int64]) (weir.ReadStatus, error) {
	e.once.Do(func() { close(e.started) })
	out.Collect(1)
	return weir.NothingAvailable, nil
}

func TestInterruptExits130(t *testing.T) {
	src := &endless{started: make(chan struct{})}
	reg := registryWith("forever", func(env *weir.Environment) error {
		weir.SinkTo(weir.FromSource(env, weir.Source[int64](src)), sink.Discard[int64]())
		return nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-src.started
		cancel() // what SIGINT does to Main's context
	}()
	r := runWith(t, ctx, reg, "run", "forever", "-p", "2")
	r.want(t, ExitInterrupted, `job "forever" interrupted`, "stopping the job")
}

// The exactly-once probe gives the same, correct output on both state
// backends through the command line.
func TestCounterIdenticalOnBothBackends(t *testing.T) {
	dir := t.TempDir()
	read := func(backend string) []string {
		out := filepath.Join(dir, backend)
		r := runCLI(t, "run", "counter", "--records", "200000", "--keys", "1000", "--parallelism", "4",
			"--output", out, "--set", "state.backend.type="+backend,
			"--set", "state.backend.local-dir="+filepath.Join(dir, "state"))
		r.want(t, ExitOK)
		parts, _ := filepath.Glob(filepath.Join(out, "part-*"))
		var lines []string
		for _, p := range parts {
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			lines = append(lines, strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")...)
		}
		slices.Sort(lines)
		return lines
	}
	heap, pebble := read("hashmap"), read("pebble")
	if len(heap) != 200000 || !slices.Equal(heap, pebble) {
		t.Fatalf("hashmap wrote %d lines, pebble %d; equal: %v", len(heap), len(pebble), slices.Equal(heap, pebble))
	}
	// Every key k gets the counts 1..200 exactly once.
	counts := map[string]map[int]bool{}
	for _, l := range heap {
		k, c, _ := strings.Cut(l, ",")
		n, err := strconv.Atoi(c)
		if err != nil || n < 1 || n > 200 || counts[k][n] {
			t.Fatalf("bad or repeated line %q", l)
		}
		if counts[k] == nil {
			counts[k] = map[int]bool{}
		}
		counts[k][n] = true
	}
	if len(counts) != 1000 {
		t.Fatalf("%d keys, want 1000", len(counts))
	}
	if entries, _ := os.ReadDir(filepath.Join(dir, "state")); len(entries) != 0 {
		t.Fatalf("state directory not cleaned up: %v", entries)
	}
}

// readCommitted returns the content of the committed part files in dir
// (sink.Files): names not starting with '.'.
func readCommitted(t *testing.T, dir string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		sb.Write(data)
	}
	return sb.String()
}

// The status line shows records in and out with their rates, restarts and
// the last checkpoint.
func TestStatusLine(t *testing.T) {
	var buf strings.Builder
	start := time.Now().Add(-10 * time.Second)
	f := statusLine(&buf, "counter", start)
	f(weir.JobStatus{RecordsIn: 1_500_000, RecordsOut: 1_499_000, Restarts: 1, LastCheckpoint: 7,
		LastCheckpointTime: time.Now().Add(-2 * time.Second), LastCheckpointBytes: 3 << 20})
	f(weir.JobStatus{RecordsIn: 1_600_000, RecordsOut: 1_600_000})
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 lines, got %q", buf.String())
	}
	for _, want := range []string{"[counter 10s]", "in 1.5M", "out 1.5M", "restarts 1", "checkpoint 7 2s ago (3.0 MiB)"} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("first line %q lacks %q", lines[0], want)
		}
	}
	if !strings.Contains(lines[1], "no checkpoint yet") {
		t.Errorf("second line %q", lines[1])
	}
}

// The REST token is a secret: the "running job" line logs the explicit
// configuration with it redacted, and the job still serves with it.
func TestRunLogsNoToken(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	r := runCLI(t, "run", "wordcount", "--lines", "50", "--output", out, "--log-level", "info",
		"--set", "rest.auth.token=SUPERSECRET123", "--set", "rest.port=0")
	r.want(t, ExitOK)
	if strings.Contains(r.stderr, "SUPERSECRET123") {
		t.Fatalf("the token is in the log:\n%s", r.stderr)
	}
	if !strings.Contains(r.stderr, "rest.auth.token:******") || !strings.Contains(r.stderr, "REST API and dashboard listening") {
		t.Fatalf("the log lacks the redacted key or the REST address:\n%s", r.stderr)
	}
}

// A REST port set explicitly that is taken is a usage error naming the
// key and the remedy; [::1] is a loopback address.
func TestRunRESTPortTaken(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	r := runCLI(t, "run", "wordcount", "--lines", "10", "--set", "rest.port="+port)
	r.want(t, ExitUsage)
	for _, want := range []string{"rest.port " + port, "in use", "0 for any free port"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	r = runCLI(t, "run", "wordcount", "--lines", "10", "--set", "rest.port=0", "--set", "rest.bind-address=[::1]")
	if r.code != ExitOK && !strings.Contains(r.stderr, "cannot assign requested address") { // a machine without IPv6
		t.Fatalf("rest.bind-address=[::1]: exit %d\n%s", r.code, r.stderr)
	}
}

// A job's own defaults apply where the configuration is silent: the
// troubled job checkpoints without --set, and --set still wins.
func TestRunAppliesJobDefaults(t *testing.T) {
	dir := t.TempDir()
	r := runCLI(t, "run", "troubled", "--induce", "growth", "--duration", "1500ms", "--log-level", "info",
		"--set", "rest.port=0", "--set", "execution.checkpointing.dir="+filepath.Join(dir, "chk"),
		"--set", "state.backend.local-dir="+filepath.Join(dir, "state"))
	r.want(t, ExitOK)
	if !strings.Contains(r.stderr, "Completed checkpoint") {
		t.Fatalf("no checkpoint completed with the job's default interval:\n%s", r.stderr)
	}
	r = runCLI(t, "run", "troubled", "--induce", "growth", "--duration", "1500ms", "--log-level", "info",
		"--set", "rest.port=0", "--set", "execution.checkpointing.dir="+filepath.Join(dir, "chk2"),
		"--set", "state.backend.local-dir="+filepath.Join(dir, "state2"), "--set", "execution.checkpointing.interval=1h")
	r.want(t, ExitOK)
	if strings.Contains(r.stderr, "Completed checkpoint 2 ") {
		t.Fatalf("--set execution.checkpointing.interval=1h did not win over the job's default:\n%s", r.stderr)
	}
}
