package jobs

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/weirstream/weir"
)

// runCounter runs the counter job and returns its output lines, sorted.
func runCounter(t *testing.T, backend string, parallelism int, args ...string) []string {
	t.Helper()
	out := t.TempDir()
	job := NewCounter()
	fs := pflag.NewFlagSet("counter", pflag.ContinueOnError)
	job.RegisterFlags(fs)
	if err := fs.Parse(append(args, "--output", out)); err != nil {
		t.Fatal(err)
	}
	if err := job.Validate(); err != nil {
		t.Fatal(err)
	}
	env := weir.NewEnvironment(weir.Options{Parallelism: parallelism, StateBackend: backend,
		StateDir: filepath.Join(t.TempDir(), "state"), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err := job.Build(env, io.Discard); err != nil {
		t.Fatal(err)
	}
	if err := env.Execute(context.Background(), "counter"); err != nil {
		t.Fatal(err)
	}
	parts, _ := filepath.Glob(filepath.Join(out, "part-*"))
	if len(parts) != parallelism {
		t.Fatalf("%d part files, want one per sink subtask (%d)", len(parts), parallelism)
	}
	var lines []string
	for _, p := range parts {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			lines = append(lines, sc.Text())
		}
		f.Close()
	}
	slices.Sort(lines)
	return lines
}

// checkCounts verifies the exactly-once property of counter output: every
// key k has the counts 1..n_k exactly once.
func checkCounts(t *testing.T, lines []string, records, keys int64) {
	t.Helper()
	if err := VerifyCounterOutput(lines, records, keys); err != nil {
		t.Fatal(err)
	}
}

func TestCounterSameCorrectOutputOnBothBackends(t *testing.T) {
	heap := runCounter(t, weir.BackendHashMap, 4, "--records", "200000", "--keys", "1000")
	checkCounts(t, heap, 200000, 1000)
	pebble := runCounter(t, weir.BackendPebble, 4, "--records", "200000", "--keys", "1000")
	if !slices.Equal(heap, pebble) {
		t.Fatal("hashmap and pebble outputs differ")
	}
	checkCounts(t, runCounter(t, weir.BackendHashMap, 1, "--records", "1003", "--keys", "7"), 1003, 7)
}

func TestCounterRate(t *testing.T) {
	// 2000 records at 20000/s take about 0.1s; mostly this checks that a
	// throttled source still delivers everything.
	checkCounts(t, runCounter(t, weir.BackendHashMap, 2, "--records", "2000", "--keys", "10", "--rate", "20000"), 2000, 10)
}

func TestCounterValidate(t *testing.T) {
	job := NewCounter()
	fs := pflag.NewFlagSet("counter", pflag.ContinueOnError)
	job.RegisterFlags(fs)
	if err := fs.Parse([]string{"--records", "-1", "--keys", "0", "--rate", "-2", "--sink-delay", "-1ms"}); err != nil {
		t.Fatal(err)
	}
	err := job.Validate()
	for _, want := range []string{"--records", "--keys", "--rate", "--output", "--sink-delay -1ms: must not be negative"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("Validate() = %v, want a problem with %s", err, want)
		}
	}
}

// --sink-delay makes every sink subtask spend the delay on each record, and
// the output stays exactly once. Only a lower bound on the run time is
// checked: the busiest of the 2 sink subtasks writes at least 1000 records.
func TestCounterSinkDelay(t *testing.T) {
	const records, delay = 2000, 200 * time.Microsecond
	start := time.Now()
	lines := runCounter(t, weir.BackendHashMap, 2, "--records", strconv.Itoa(records), "--keys", "10", "--sink-delay", delay.String())
	if took, least := time.Since(start), records/2*delay; took < least {
		t.Fatalf("%d records with --sink-delay %v at parallelism 2 took %v, less than %v", records, delay, took, least)
	}
	checkCounts(t, lines, records, 10)
}

// spend takes at least the delay; it spins, without sleeping, through
// delays up to a millisecond (a time.Sleep(200us) takes about 1.1ms on
// machines with a 1ms timer granularity), and sleeps all but the last
// millisecond of longer ones. How long the spinning takes beyond the delay
// is not checked: that depends on how busy the machine is.
func TestSpend(t *testing.T) {
	var slept []time.Duration
	sleep = func(d time.Duration) {
		slept = append(slept, d)
		time.Sleep(d)
	}
	defer func() { sleep = time.Sleep }()
	for _, tc := range []struct {
		d     time.Duration
		sleep []time.Duration
	}{
		{time.Microsecond, nil},
		{20 * time.Microsecond, nil},
		{200 * time.Microsecond, nil},
		{time.Millisecond, nil},
		{3 * time.Millisecond, []time.Duration{2 * time.Millisecond}},
	} {
		slept = nil
		start := time.Now()
		for range 10 {
			spend(tc.d)
		}
		if took := time.Since(start); took < 10*tc.d {
			t.Errorf("10 waits of %v took %v, less than %v", tc.d, took, 10*tc.d)
		}
		want := slices.Repeat(tc.sleep, 10)
		if !slices.Equal(slept, want) {
			t.Errorf("10 waits of %v slept %v, want %v", tc.d, slept, want)
		}
	}
}

// The counter's source resumes exactly where a snapshot of its splits left
// it, at another parallelism too.
func TestCounterSourceResumes(t *testing.T) {
	src := numbers{count: 10_000}
	var got []int64
	var splits [][]byte
	for i := range 3 {
		r, err := src.CreateReader(weir.SourceContext{Subtask: i, Parallelism: 3})
		if err != nil {
			t.Fatal(err)
		}
		c := &collector{}
		r.ReadBatch(c)
		got = append(got, c.got...)
		s, _ := r.(weir.CheckpointedReader).SnapshotSplits()
		splits = append(splits, s...)
	}
	r, err := src.CreateReader(weir.SourceContext{Subtask: 0, Parallelism: 1, RestoredSplits: splits})
	if err != nil {
		t.Fatal(err)
	}
	c := &collector{}
	for {
		st, _ := r.ReadBatch(c)
		if st == weir.EndOfInput {
			break
		}
	}
	got = append(got, c.got...)
	slices.Sort(got)
	if len(got) != 10_000 || got[0] != 0 || got[9999] != 9999 || len(slices.Compact(got)) != 10_000 {
		t.Fatalf("resumed source emitted %d records", len(got))
	}
}

type collector struct{ got []int64 }

func (c *collector) Collect(v int64) { c.got = append(c.got, v) }
