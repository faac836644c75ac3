package doctor

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/task"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

// st is a subtask's acknowledgement with its phases in milliseconds; its
// end-to-end time is their sum.
func st(v, i, sd, al, sy, as int) Subtask {
	return Subtask{Vertex: v, Index: i, StartDelay: ms(sd), Alignment: ms(al), Sync: ms(sy), Async: ms(as),
		EndToEnd: ms(sd + al + sy + as)}
}

// sized sets a subtask's checkpointed (and full) size.
func sized(s Subtask, n int64) Subtask {
	s.CheckpointedSize, s.FullSize = n, n
	return s
}

// cp is checkpoint id, triggered every second, ending with its slowest
// acknowledgement; its sizes are the subtasks' sum.
func cp(id int64, subs ...Subtask) Checkpoint {
	c := Checkpoint{ID: id, TriggerTime: t0.Add(time.Duration(id) * time.Second), Subtasks: subs}
	for _, s := range subs {
		c.EndToEnd = max(c.EndToEnd, s.EndToEnd)
		c.CheckpointedSize += s.CheckpointedSize
		c.FullSize += s.CheckpointedSize
	}
	c.CompletionTime = c.TriggerTime.Add(c.EndToEnd)
	return c
}

// chain is a linear job: each vertex reads every subtask of the one before.
func chain(p int, names ...string) []Vertex {
	var vs []Vertex
	for i, n := range names {
		v := Vertex{Index: i, Name: n, Parallelism: p, InputsKnown: true, Inputs: []Edge{}}
		if i > 0 {
			v.Inputs = []Edge{{Vertex: i - 1}}
		}
		vs = append(vs, v)
	}
	return vs
}

// live is an input with a known configuration: a 1 s interval.
func live(vs []Vertex, cps ...Checkpoint) Input {
	return Input{Job: "j", Source: SourceLive, FailuresKnown: true, Vertices: vs, Checkpoints: cps,
		Config: Config{Known: true, Interval: time.Second, Timeout: 10 * time.Minute, Backend: "hashmap"}}
}

// repeat returns n checkpoints with ids 1..n made by mk.
func repeat(n int, mk func(id int64) Checkpoint) []Checkpoint {
	var out []Checkpoint
	for id := int64(1); id <= int64(n); id++ {
		out = append(out, mk(id))
	}
	return out
}

// want is what a table test expects of the first finding.
type want struct {
	cause    Cause // "": no finding at all
	severity Severity
	vertex   int
	subtask  int
	evidence []string
	remedy   []string
	// only: no other finding.
	only bool
	// slow: with no finding, the checkpoints were slow all the same, so
	// the report is not healthy.
	slow bool
}

func (w want) check(t *testing.T, r Report) {
	t.Helper()
	if w.cause == "" {
		if len(r.Findings) != 0 || r.Healthy == w.slow {
			t.Fatalf("findings %+v, healthy %v, want none and healthy %v", r.Findings, r.Healthy, !w.slow)
		}
		if w.slow && !strings.Contains(r.Summary, "were slow") {
			t.Fatalf("summary %q does not say the checkpoints were slow", r.Summary)
		}
		return
	}
	if len(r.Findings) == 0 {
		t.Fatalf("no finding, want %s", w.cause)
	}
	f := r.Findings[0]
	if f.Cause != w.cause || f.Severity != w.severity || f.VertexIndex != w.vertex || f.Subtask != w.subtask {
		t.Fatalf("first finding %s/%s at %d/%d, want %s/%s at %d/%d\n%s", f.Cause, f.Severity, f.VertexIndex, f.Subtask,
			w.cause, w.severity, w.vertex, w.subtask, r.Text())
	}
	for _, e := range w.evidence {
		if !strings.Contains(f.Evidence, e) {
			t.Errorf("evidence lacks %q: %s", e, f.Evidence)
		}
	}
	for _, e := range w.remedy {
		if !strings.Contains(f.Remedy, e) {
			t.Errorf("remedy lacks %q: %s", e, f.Remedy)
		}
	}
	if w.only && len(r.Findings) > 1 {
		t.Errorf("more findings than %s:\n%s", w.cause, r.Text())
	}
}

func TestDoctorPhaseRules(t *testing.T) {
	three := chain(2, "Source: Events", "Map", "Sink")
	two := chain(2, "Source: Events", "Slow sink")
	for _, tc := range []struct {
		name string
		in   Input
		want want
	}{
		{"healthy", live(two, repeat(5, func(id int64) Checkpoint {
			return cp(id, st(0, 0, 0, 0, 1, 0), st(0, 1, 0, 0, 1, 0), st(1, 0, 5, 2, 1, 10), st(1, 1, 5, 2, 1, 12))
		})...), want{}},
		{"just under half the interval is not slow", live(two, repeat(4, func(id int64) Checkpoint {
			return cp(id, st(0, 0, 0, 0, 0, 0), st(1, 0, 499, 0, 0, 0))
		})...), want{}},
		{"half the interval is slow", live(two, repeat(4, func(id int64) Checkpoint {
			return cp(id, st(0, 0, 0, 0, 0, 0), st(1, 0, 500, 0, 0, 0))
		})...), want{cause: CauseStartDelay, severity: SeverityWarning, vertex: 1, subtask: 0, only: true,
			evidence: []string{"4 of 4", "Slow sink (1/2)", "500ms"},
			remedy:   []string{"execution.checkpointing.unaligned.enabled", "buffer-debloat", "more parallelism for Slow sink"}}},
		{"backpressure names the most downstream wait", live(three, repeat(4, func(id int64) Checkpoint {
			// Source -> Map waits 300 ms, Map -> Sink another 400 ms.
			return cp(id, st(0, 0, 0, 0, 0, 0), st(0, 1, 0, 0, 0, 0), st(1, 0, 300, 0, 0, 1), st(1, 1, 300, 0, 0, 1),
				st(2, 0, 650, 0, 0, 1), st(2, 1, 700, 0, 0, 1))
		})...), want{cause: CauseStartDelay, severity: SeverityWarning, vertex: 2, subtask: 1,
			evidence: []string{"Map is backpressured"}}},
		{"a small last wait is followed upstream", live(three, repeat(4, func(id int64) Checkpoint {
			// Map -> Sink waits 20 ms only: the wait happened before Map.
			return cp(id, st(0, 0, 0, 0, 0, 0), st(0, 1, 0, 0, 0, 0), st(1, 0, 600, 0, 0, 1), st(1, 1, 600, 0, 0, 1),
				st(2, 0, 620, 0, 0, 1), st(2, 1, 620, 0, 0, 1))
		})...), want{cause: CauseStartDelay, severity: SeverityWarning, vertex: 1, subtask: 0,
			evidence: []string{"Source: Events is backpressured"}}},
		{"small waits on every edge add up", live(chain(1, "A", "B", "C", "D"), repeat(4, func(id int64) Checkpoint {
			// 4 x 25% of the end-to-end time: none alone is 30%.
			return cp(id, st(0, 0, 150, 0, 0, 0), st(1, 0, 300, 0, 0, 0), st(2, 0, 450, 0, 0, 0), st(3, 0, 600, 0, 0, 0))
		})...), want{cause: CauseStartDelay, severity: SeverityWarning, vertex: 3, subtask: 0, evidence: []string{"600ms"}}},
		{"a source that starts late", live(two, repeat(4, func(id int64) Checkpoint {
			return cp(id, st(0, 0, 600, 0, 0, 0), st(0, 1, 590, 0, 0, 0), st(1, 0, 595, 5, 0, 1), st(1, 1, 595, 5, 0, 1))
		})...), want{cause: CauseStartDelay, severity: SeverityWarning, vertex: 0, subtask: 1,
			evidence: []string{"source subtask Source: Events (2/2) started the checkpoint"}, remedy: []string{"NothingAvailable"}}},
		{"alignment", live(two, repeat(4, func(id int64) Checkpoint {
			return cp(id, st(0, 0, 0, 0, 0, 0), st(0, 1, 0, 0, 0, 0), st(1, 0, 10, 50, 0, 1), st(1, 1, 10, 600, 0, 1))
		})...), want{cause: CauseAlignment, severity: SeverityWarning, vertex: 1, subtask: 1, only: true,
			evidence: []string{"Slow sink (2/2) waited up to 600ms", "fuller channel"},
			remedy:   []string{"execution.checkpointing.unaligned.enabled", "aligned-checkpoint-timeout", "skew"}}},
		{"alignment behind a late upstream", live(two, repeat(4, func(id int64) Checkpoint {
			// Source subtask 1 sends its barrier 500 ms late, on its own.
			return cp(id, st(0, 0, 0, 0, 0, 0), st(0, 1, 500, 0, 0, 0), st(1, 0, 5, 500, 0, 1), st(1, 1, 5, 500, 0, 1))
		})...), want{cause: CauseStartDelay, severity: SeverityWarning, vertex: 0, subtask: 1}},
		{"alignment behind an upstream that aligned late itself", live(three, repeat(4, func(id int64) Checkpoint {
			// A hot key: Map (2/2) aligns 700 ms; the sink only waits for it.
			return cp(id, st(0, 0, 0, 0, 0, 0), st(1, 0, 5, 0, 0, 0), st(1, 1, 5, 700, 0, 0), st(2, 0, 5, 700, 0, 1))
		})...), want{cause: CauseAlignment, severity: SeverityWarning, vertex: 1, subtask: 1}},
		{"alignment caused by an upstream sync phase, at the boundary", live(two, repeat(4, func(id int64) Checkpoint {
			return cp(id, st(0, 0, 0, 0, 0, 0), st(0, 1, 0, 0, 300, 0), st(1, 0, 5, 600, 0, 1), st(1, 1, 5, 600, 0, 1))
		})...), want{cause: CauseSyncPhase, severity: SeverityWarning, vertex: 0, subtask: 1}},
		{"alignment with an upstream sync phase just under the boundary", live(two, repeat(4, func(id int64) Checkpoint {
			return cp(id, st(0, 0, 0, 0, 0, 0), st(0, 1, 0, 0, 299, 0), st(1, 0, 5, 600, 0, 1), st(1, 1, 5, 600, 0, 1))
		})...), want{cause: CauseAlignment, severity: SeverityWarning, vertex: 1, subtask: 0}},
		{"sync phase", live(two, repeat(4, func(id int64) Checkpoint {
			return cp(id, st(0, 0, 0, 0, 0, 0), st(1, 0, 5, 0, 700, 1), st(1, 1, 5, 0, 10, 1))
		})...), want{cause: CauseSyncPhase, severity: SeverityWarning, vertex: 1, subtask: 0, only: true,
			evidence: []string{"Slow sink (1/2) took up to 700ms"}, remedy: []string{"FlushBeforeBarrier", "SyncPreCommitted", "timers"}}},
		{"a start delay caused by an upstream sync phase", live(three, repeat(4, func(id int64) Checkpoint {
			return cp(id, st(0, 0, 0, 0, 0, 0), st(1, 0, 1, 0, 600, 0), st(1, 1, 1, 0, 600, 0), st(2, 0, 610, 0, 0, 5))
		})...), want{cause: CauseSyncPhase, severity: SeverityWarning, vertex: 1, subtask: 0, only: true}},
		{"async phase", live(two, repeat(4, func(id int64) Checkpoint {
			return cp(id, st(0, 0, 0, 0, 0, 0), sized(st(1, 0, 1, 0, 0, 800), 80<<20), sized(st(1, 1, 1, 0, 0, 50), 5<<20))
		})...), want{cause: CauseAsyncPhase, severity: SeverityWarning, vertex: 1, subtask: 0, only: true,
			evidence: []string{"uploading 80.0 MiB at 100.0 MiB/s"},
			remedy:   []string{"execution.checkpointing.incremental: true", "state.changelog.enabled: true", "more parallelism for Slow sink"}}},
		{"the phase blamed must be 30% of the time", live(two, repeat(4, func(id int64) Checkpoint {
			// 30% async, the rest spread over four equal parts below it.
			return cp(id, st(0, 0, 0, 0, 0, 0), st(1, 0, 175, 175, 175, 300), st(1, 1, 175, 175, 175, 299))
		})...), want{cause: CauseAsyncPhase, severity: SeverityWarning, vertex: 1, subtask: 0}},
		{"below 30% nothing is blamed", live(chain(1, "A"), repeat(4, func(id int64) Checkpoint {
			return cp(id, Subtask{Vertex: 0, StartDelay: ms(290), Alignment: ms(290), Sync: ms(130), Async: ms(290), EndToEnd: ms(1000)})
		})...), want{slow: true}}, // slow, but no phase to blame: not healthy either
		{"half the checkpoints make a warning", live(two, repeat(4, func(id int64) Checkpoint {
			as := 1
			if id%2 == 0 {
				as = 700
			}
			return cp(id, st(0, 0, 0, 0, 0, 0), st(1, 0, 1, 0, 0, as))
		})...), want{cause: CauseAsyncPhase, severity: SeverityWarning, vertex: 1, subtask: 0}},
		{"fewer make an info", live(two, repeat(4, func(id int64) Checkpoint {
			as := 1
			if id == 2 {
				as = 700
			}
			return cp(id, st(0, 0, 0, 0, 0, 0), st(1, 0, 1, 0, 0, as))
		})...), want{cause: CauseAsyncPhase, severity: SeverityInfo, vertex: 1, subtask: 0, evidence: []string{"1 of 4"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.want.check(t, Diagnose(tc.in, Options{}))
		})
	}
}

func TestDoctorSlowThreshold(t *testing.T) {
	mk := func(cfg Config) Input {
		in := live(chain(1, "A"), repeat(3, func(id int64) Checkpoint { return cp(id, st(0, 0, 0, 0, 0, 400)) })...)
		in.Config = cfg
		return in
	}
	for _, tc := range []struct {
		name string
		cfg  Config
		slow bool
	}{
		{"half the interval", Config{Known: true, Interval: 800 * time.Millisecond}, true},
		{"under half the interval", Config{Known: true, Interval: 801 * time.Millisecond, Timeout: time.Hour}, false},
		{"half the timeout", Config{Known: true, Interval: time.Hour, Timeout: 800 * time.Millisecond}, true},
		// Unknown: the interval is inferred from the trigger times (1 s).
		{"inferred interval", Config{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Diagnose(mk(tc.cfg), Options{})
			if got := len(r.Findings) > 0; got != tc.slow {
				t.Fatalf("slow = %v, want %v\n%s", got, tc.slow, r.Text())
			}
		})
	}
	in := mk(Config{})
	in.Checkpoints = in.Checkpoints[:1] // no interval to infer: 10 s
	if r := Diagnose(in, Options{}); !r.Healthy || r.Interval != 0 {
		t.Fatalf("one checkpoint of 400ms without interval: %+v", r)
	}
	if r := Diagnose(in, Options{SlowWithoutInterval: 400 * time.Millisecond}); r.Healthy {
		t.Fatalf("SlowWithoutInterval is not applied")
	}
	if r := Diagnose(in, Options{SlowWithoutInterval: time.Millisecond, MinSlow: time.Second}); !r.Healthy {
		t.Fatalf("MinSlow is not applied")
	}
}

func TestDoctorInferInterval(t *testing.T) {
	at := func(id int64, s float64) Checkpoint {
		return Checkpoint{ID: id, TriggerTime: t0.Add(time.Duration(s * float64(time.Second)))}
	}
	for _, tc := range []struct {
		cps  []Checkpoint
		want time.Duration
	}{
		{nil, 0},
		{[]Checkpoint{at(1, 0)}, 0},
		{[]Checkpoint{at(1, 0), at(2, 2), at(3, 3)}, time.Second},
		// A failed checkpoint took id 4 in between.
		{[]Checkpoint{at(3, 3), at(5, 7)}, 2 * time.Second},
		{[]Checkpoint{at(2, 2), {ID: 3}, at(1, 0)}, 2 * time.Second},
	} {
		if got := inferInterval(tc.cps, nil); got != tc.want {
			t.Errorf("inferInterval(%v) = %v, want %v", tc.cps, got, tc.want)
		}
	}
}

func TestDoctorMetricsNameTheBottleneck(t *testing.T) {
	// The stats blame Map (barriers waited before it), but the metrics show
	// Sink busy with a full input while Map's output is full.
	in := live(chain(1, "Source: Events", "Map", "Sink"), repeat(4, func(id int64) Checkpoint {
		return cp(id, st(0, 0, 0, 0, 0, 0), st(1, 0, 600, 0, 0, 1), st(2, 0, 620, 0, 0, 1))
	})...)
	in.Tasks = []task.TaskMetrics{
		{Vertex: 0, BackPressuredTimeMsPerSecond: 900, OutPoolUsage: 1},
		{Vertex: 1, BusyTimeMsPerSecond: 100, BackPressuredTimeMsPerSecond: 850, InPoolUsage: 1, OutPoolUsage: 1},
		{Vertex: 2, BusyTimeMsPerSecond: 990, InPoolUsage: 0.9},
	}
	want{cause: CauseStartDelay, severity: SeverityWarning, vertex: 2, subtask: 0,
		evidence: []string{"Sink (1/1) busy 990 ms/s with inPoolUsage 0.90", "by Flink's rule Sink is the bottleneck"}}.
		check(t, Diagnose(in, Options{}))
	if r := Diagnose(in, Options{}); r.Findings[0].Backpressured != "Map" {
		t.Errorf("backpressured %q, want Map", r.Findings[0].Backpressured)
	}
	// Below the busy threshold the stats' answer stands.
	in.Tasks[2].BusyTimeMsPerSecond = 499
	want{cause: CauseStartDelay, severity: SeverityWarning, vertex: 1, subtask: 0}.check(t, Diagnose(in, Options{}))
}

func TestDoctorFailureRules(t *testing.T) {
	vs := chain(2, "Source: Events", "Large state")
	decline := func(id int64, v, i int, reason, cause string) Failure {
		return Failure{ID: id, Reason: reason, Task: &SubtaskRef{v, i}, Cause: cause,
			Message: fmt.Sprintf("Decline checkpoint %d by task %d/%d of job j at 2026-01-01T00:00:00Z.", id, v, i)}
	}
	expired := func(id int64, pending ...SubtaskRef) Failure {
		return Failure{ID: id, Reason: ReasonExpired, Pending: pending, PendingKnown: true}
	}
	fast := func(id int64) Checkpoint { return cp(id, st(0, 0, 0, 0, 0, 0), st(1, 0, 1, 0, 0, 5)) }
	for _, tc := range []struct {
		name  string
		cps   []Checkpoint
		fails []Failure
		cfg   func(*Config)
		fovs  int
		want  want
	}{
		{"expired, one subtask pending", []Checkpoint{fast(1)},
			[]Failure{expired(2, SubtaskRef{1, 1}), expired(3, SubtaskRef{1, 1}, SubtaskRef{1, 0})}, nil, 0,
			want{cause: CauseExpired, severity: SeverityCritical, vertex: 1, subtask: 1,
				evidence: []string{"2 checkpoints expired", "10m0s timeout", "Large state (2/2) (2 of 2)", "Large state (1/2) (1 of 2)"},
				remedy:   []string{"execution.checkpointing.timeout"}}},
		{"expired, a whole vertex pending", nil,
			[]Failure{expired(2, SubtaskRef{1, 0}, SubtaskRef{1, 1})}, nil, 0,
			want{cause: CauseExpired, severity: SeverityCritical, vertex: 1, subtask: -1}},
		{"expired offline: the slow completed checkpoints name the subtask",
			repeat(3, func(id int64) Checkpoint { return cp(id, st(0, 0, 0, 0, 0, 0), st(1, 0, 1, 0, 0, 700)) }),
			[]Failure{{ID: 4, Reason: ReasonExpired}}, nil, 0,
			want{cause: CauseExpired, severity: SeverityCritical, vertex: 1, subtask: 0,
				evidence: []string{"not known", "held up most by Large state (1/2) (async-phase)"}}},
		{"declines grouped by task and cause", []Checkpoint{fast(1)},
			[]Failure{
				decline(2, 1, 1, ReasonAsyncFailure, "asynchronous phase of checkpoint 2 failed in Large state (2/2): disk full"),
				decline(4, 1, 1, ReasonAsyncFailure, "asynchronous phase of checkpoint 4 failed in Large state (2/2): disk full"),
				decline(5, 1, 0, ReasonDeclined, "boom"),
			}, nil, 0,
			want{cause: CauseDeclined, severity: SeverityCritical, vertex: 1, subtask: 1,
				evidence: []string{"checkpoints 2, 4 declined by Large state (2/2) (async-failure): asynchronous phase of checkpoint N failed",
					"checkpoint 5 declined by Large state (1/2) (declined): boom"},
				remedy: []string{"execution.checkpointing.dir", "tolerable-failed-checkpoints"}}},
		{"subsumed declines are info", []Checkpoint{fast(1), fast(3)},
			[]Failure{decline(2, 1, 0, ReasonSubsumed, "Received checkpoint barrier for checkpoint 3 before completing current checkpoint 2. Skipping current checkpoint.")},
			nil, 0,
			want{cause: CauseDeclined, severity: SeverityInfo, vertex: 1, subtask: 0, only: true, remedy: []string{"min-pause"}}},
		{"failures within the tolerance", []Checkpoint{fast(1), fast(3)},
			[]Failure{{ID: 2, Reason: ReasonIOError}}, func(c *Config) { c.TolerableFailures = 3 }, 0,
			want{cause: CauseFailures, severity: SeverityWarning, vertex: -1, subtask: -1, only: true,
				evidence: []string{"1 of the 3 checkpoints examined failed (1 io-error)", "a checkpoint completed since", "is 3", "4th"}}},
		{"consecutive failures beyond the tolerance", []Checkpoint{fast(1)},
			[]Failure{{ID: 2, Reason: ReasonIOError}, {ID: 3, Reason: ReasonIOError}}, func(c *Config) { c.TolerableFailures = 1 }, 0,
			want{cause: CauseFailures, severity: SeverityCritical, vertex: -1, subtask: -1, evidence: []string{"2 in a row"}}},
		{"consecutive failures at the tolerance", []Checkpoint{fast(1)},
			[]Failure{{ID: 2, Reason: ReasonIOError}, {ID: 3, Reason: ReasonIOError}}, func(c *Config) { c.TolerableFailures = 2 }, 0,
			want{cause: CauseFailures, severity: SeverityWarning, vertex: -1, subtask: -1}},
		{"failovers make failures critical", []Checkpoint{fast(1), fast(3)},
			[]Failure{{ID: 2, Reason: ReasonIOError}}, func(c *Config) { c.TolerableFailures = 3 }, 2,
			want{cause: CauseFailures, severity: SeverityCritical, vertex: -1, subtask: -1, evidence: []string{"failed over 2 times"}}},
		{"a decline of the job stopping is no failure", []Checkpoint{fast(1)},
			[]Failure{decline(2, 1, 0, ReasonAsyncFailure, "asynchronous phase of checkpoint 2 failed in Large state (1/2): "+
				"operator \"Large state\": keyed state: finish chk-2/x.kst: context canceled")}, nil, 0, want{}},
		{"expired, late acknowledgements in too few checkpoints name nobody", nil,
			[]Failure{{ID: 2, Reason: ReasonExpired, Pending: []SubtaskRef{{0, 0}}}, {ID: 3, Reason: ReasonExpired},
				{ID: 4, Reason: ReasonExpired}}, nil, 0,
			want{cause: CauseExpired, severity: SeverityCritical, vertex: -1, subtask: -1,
				evidence: []string{"Acknowledged only after they expired", "Source: Events (1/2) (1 of 3)"}}},
		{"expired, late acknowledgements in half the checkpoints", nil,
			[]Failure{{ID: 2, Reason: ReasonExpired, Pending: []SubtaskRef{{1, 1}}}, {ID: 3, Reason: ReasonExpired}}, nil, 0,
			want{cause: CauseExpired, severity: SeverityCritical, vertex: 1, subtask: 1}},
		{"expired, on a tie the most downstream pending subtask", nil,
			[]Failure{expired(2, SubtaskRef{0, 0}, SubtaskRef{1, 1})}, nil, 0,
			want{cause: CauseExpired, severity: SeverityCritical, vertex: 1, subtask: 1,
				evidence: []string{"Large state (2/2) (1 of 1), Source: Events (1/2) (1 of 1)"}}},
		{"aborts that do not count are no failure", []Checkpoint{fast(1)},
			[]Failure{{ID: 2, Reason: "job-canceled"}, {ID: 3, Reason: ReasonSubsumed}}, nil, 0, want{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := live(vs, tc.cps...)
			in.Failures, in.JobFailovers = tc.fails, tc.fovs
			if tc.cfg != nil {
				tc.cfg(&in.Config)
			}
			r := Diagnose(in, Options{})
			tc.want.check(t, r)
			if tc.want.severity == SeverityCritical && (tc.want.cause == CauseExpired || tc.want.cause == CauseDeclined) {
				found := false
				for _, f := range r.Findings {
					found = found || f.Cause == CauseFailures
				}
				if !found {
					t.Errorf("no failures finding:\n%s", r.Text())
				}
			}
		})
	}
}

func TestDoctorStateGrowth(t *testing.T) {
	vs := chain(2, "Source: Events", "Sessions")
	// series builds checkpoints whose Sessions subtask 0 has the sizes
	// given (in KiB) and subtask 1 a constant 100 KiB.
	series := func(kib ...int64) []Checkpoint {
		var out []Checkpoint
		for i, k := range kib {
			out = append(out, cp(int64(i+1), sized(st(0, 0, 0, 0, 0, 0), 8), sized(st(1, 0, 1, 0, 0, 2), k<<10),
				sized(st(1, 1, 1, 0, 0, 2), 100<<10)))
		}
		return out
	}
	growth := want{cause: CauseStateGrowth, severity: SeverityWarning, vertex: 1, subtask: 0, only: true,
		evidence: []string{"in 4 of 4 steps", "Sessions (1/2) grew most: 100.0 KiB to 300.0 KiB"},
		remedy:   []string{"TTL", "keys"}}
	for _, tc := range []struct {
		name string
		cps  []Checkpoint
		want want
	}{
		{"steady growth", series(100, 150, 200, 250, 300), growth},
		{"three of four steps is enough", series(100, 150, 150, 250, 300), want{cause: CauseStateGrowth,
			severity: SeverityWarning, vertex: 1, subtask: 0, evidence: []string{"in 3 of 4 steps"}}},
		{"two of four steps is not", series(100, 150, 150, 150, 300), want{}},
		{"three checkpoints are too few", series(100, 200, 300), want{}},
		// The job's full size is both subtasks': 200 KiB; 25% is 50 KiB,
		// and at least 64 KiB must be added.
		{"at least 64 KiB", series(100, 120, 140, 150, 163), want{}},
		{"64 KiB and 25%", series(100, 120, 140, 150, 164), want{cause: CauseStateGrowth, severity: SeverityWarning, vertex: 1, subtask: 0}},
		{"a flat size", series(300, 300, 300, 300, 300), want{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.want.check(t, Diagnose(live(vs, tc.cps...), Options{}))
		})
	}
	t.Run("slow uploads of growing state are its consequence", func(t *testing.T) {
		cps := series(100, 150, 200, 250, 300)
		for i := range cps {
			cps[i].Subtasks[1].Async, cps[i].Subtasks[1].EndToEnd = ms(700), ms(701)
			cps[i].EndToEnd = ms(701)
		}
		r := Diagnose(live(vs, cps...), Options{})
		if len(r.Findings) != 2 || r.Findings[0].Cause != CauseStateGrowth || r.Findings[1].Cause != CauseAsyncPhase ||
			r.Findings[1].Severity != SeverityInfo || !strings.Contains(r.Findings[1].Evidence, "see state-growth") {
			t.Fatalf("findings:\n%s", r.Text())
		}
	})
	t.Run("incremental checkpoints read live name no subtask", func(t *testing.T) {
		cps := series(100, 150, 200, 250, 300)
		for i := range cps {
			cps[i].FullSize = cps[i].CheckpointedSize * 3
			for j := range cps[i].Subtasks {
				cps[i].Subtasks[j].FullSize = 0
			}
		}
		want{cause: CauseStateGrowth, severity: SeverityWarning, vertex: -1, subtask: -1, evidence: []string{"not known"}}.
			check(t, Diagnose(live(vs, cps...), Options{}))
	})
}

func TestDoctorReport(t *testing.T) {
	in := live(chain(2, "Source: Events", "Slow sink"), repeat(4, func(id int64) Checkpoint {
		return cp(id, st(0, 0, 0, 0, 0, 0), st(1, 0, 600, 0, 0, 1))
	})...)
	in.Failures = []Failure{{ID: 5, Reason: ReasonExpired}}
	in.Notes = []string{"a note"}
	r := Diagnose(in, Options{})
	text := r.Text()
	for _, s := range []string{"Job j (live)", "Checkpoints examined: 1-4; failed: 5", "interval 1s, timeout 10m0s",
		"[CRITICAL] expired", "[WARNING] start-delay at Slow sink (1/2)", "  backpressured: Source: Events",
		"  remedy: ", "3 findings: expired (critical), failures (critical), start-delay (warning)", "Note: a note"} {
		if !strings.Contains(text, s) {
			t.Errorf("text lacks %q:\n%s", s, text)
		}
	}
	for _, l := range strings.Split(text, "\n") {
		if len(l) > wrapWidth && strings.Contains(l, " ") {
			t.Errorf("line longer than %d: %q", wrapWidth, l)
		}
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{`"cause":"expired"`, `"severity":"critical"`, `"checkpoints":[1,2,3,4]`, `"failed":[5]`,
		`"vertex":"Slow sink"`, `"vertexIndex":1`, `"subtask":0`, `"subtaskName":"Slow sink (1/2)"`, `"healthy":false`} {
		if !strings.Contains(string(b), s) {
			t.Errorf("JSON lacks %s: %s", s, b)
		}
	}
	offline := Diagnose(Input{Job: "j", Source: SourceOffline, Checkpoints: in.Checkpoints[:1]}, Options{})
	if !offline.Healthy || !strings.Contains(offline.Text(), "only visible live") ||
		!strings.Contains(offline.Summary, "not visible here") || !strings.Contains(offline.Text(), "other settings unknown") {
		t.Errorf("offline report:\n%s", offline.Text())
	}
	if got := idList([]int64{1, 2, 3, 5, 7, 8}); got != "1-3, 5, 7, 8" {
		t.Errorf("idList = %q", got)
	}
	if got := Diagnose(Input{FailuresKnown: true}, Options{}); got.Summary != "There are no checkpoints to examine." ||
		got.Findings == nil || got.Checkpoints == nil {
		t.Errorf("empty input: %+v", got)
	}
}

func TestDoctorDeterministic(t *testing.T) {
	in := live(chain(2, "A", "B"), repeat(6, func(id int64) Checkpoint {
		return cp(id, st(0, 0, 0, 0, 0, 0), st(0, 1, 0, 0, 0, 0), st(1, int(id%2), 600, 0, 0, 1), st(1, 1-int(id%2), 10, 0, 0, 700))
	})...)
	a, _ := json.Marshal(Diagnose(in, Options{}))
	for range 20 {
		if b, _ := json.Marshal(Diagnose(in, Options{})); string(a) != string(b) {
			t.Fatalf("reports differ:\n%s\n%s", a, b)
		}
	}
}

// Odd inputs from a hand-made Input: the same checkpoint twice does not
// divide by zero, and hashmap with the incremental flag still gets the
// incremental advice (hashmap checkpoints are always full).
func TestDoctorOddInputs(t *testing.T) {
	two := chain(2, "Source: Events", "Slow sink")
	c := cp(3, st(0, 0, 0, 0, 0, 0), sized(st(1, 0, 1, 0, 0, 800), 80<<20))
	in := live(two, c, c, cp(4, st(0, 0, 0, 0, 0, 0), sized(st(1, 0, 1, 0, 0, 800), 80<<20)))
	in.Config.Incremental = true // on hashmap: no effect
	in.Config.Interval = 0       // inferred from the trigger times
	r := Diagnose(in, Options{})
	if len(r.Findings) == 0 || r.Findings[0].Cause != CauseAsyncPhase {
		t.Fatalf("findings %+v", r.Findings)
	}
	if !strings.Contains(r.Findings[0].Remedy, "execution.checkpointing.incremental: true") ||
		strings.HasPrefix(r.Findings[0].Remedy, "Or") || strings.Contains(r.Text(), "hashmap, incremental") {
		t.Fatalf("hashmap with incremental set:\n%s", r.Text())
	}
}
