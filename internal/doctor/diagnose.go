package doctor

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Diagnose examines in and reports what slows its checkpoints down or
// makes them fail. It is deterministic: the same input and options give
// the same report. The rules (docs/doctor.md):
//
//   - A completed checkpoint is slow when its end-to-end time E is at
//     least Options.SlowFraction of the interval or
//     Options.TimeoutFraction of the timeout (and at least
//     Options.MinSlow). A slow checkpoint is blamed on one phase of one
//     subtask: starting at the subtask that acknowledged last, the
//     largest of its start delay, alignment, synchronous and asynchronous
//     phase; a start delay is followed upstream to where the barrier lost
//     its time (waiting behind in-flight data: start-delay; an upstream
//     synchronous phase: sync-phase), a long alignment to the upstream
//     subtask whose barrier came last. The blamed phase must be at least
//     Options.MinShare of E.
//   - Each cause blamed for some slow checkpoints is a finding naming the
//     subtask blamed most often: a warning when at least
//     Options.WarningShare of the completed checkpoints show it, else
//     info. For start-delay the task metrics, when known, name the
//     bottleneck by Flink's rule (see Options.BusyMsPerSecond).
//   - Expired and declined checkpoints are critical findings; failed
//     checkpoints against execution.checkpointing.tolerable-failed-checkpoints
//     are a failures finding.
//   - A full size growing in most steps across the window is a
//     state-growth finding naming the subtask that grew most.
//
// Findings are sorted by severity, then in the order of the Cause
// constants.
func Diagnose(in Input, opts Options) Report {
	d := newDiagnosis(in, opts.withDefaults())
	var fs []Finding
	fs = append(fs, d.failureFindings()...)
	fs = append(fs, d.phaseFindings()...)
	if f, ok := d.growthFinding(); ok {
		// Growing state makes every upload longer: a slow asynchronous
		// phase where the state grows is its consequence.
		for i := range fs {
			if g := &fs[i]; g.Cause == CauseAsyncPhase && g.VertexIndex == f.VertexIndex && f.VertexIndex >= 0 {
				g.Severity = SeverityInfo
				g.Evidence += " Its state grows (see state-growth): the uploads grow with it."
			}
		}
		fs = append(fs, f)
	}
	slices.SortStableFunc(fs, func(a, b Finding) int {
		return cmp.Or(cmp.Compare(a.Severity.rank(), b.Severity.rank()), cmp.Compare(causeRank[a.Cause], causeRank[b.Cause]))
	})
	if fs == nil {
		fs = []Finding{}
	}
	r := Report{Job: in.Job, Source: in.Source, Location: in.Location, Checkpoints: []int64{}, Failed: []int64{},
		Interval: d.interval, IntervalInferred: d.inferred, Config: in.Config, Findings: fs, Healthy: len(fs) == 0,
		Notes: slices.Clone(d.in.Notes)}
	for _, c := range d.cps {
		r.Checkpoints = append(r.Checkpoints, c.ID)
	}
	for _, f := range d.fails {
		if counted(f.Reason) {
			r.Failed = append(r.Failed, f.ID)
		}
	}
	r.Summary = d.summary(fs)
	if len(fs) == 0 {
		// Slow checkpoints that no single phase of one subtask explains
		// (or without per-subtask statistics) are not healthy.
		th, _ := d.slowThreshold()
		slow := 0
		for _, c := range d.cps {
			if c.EndToEnd >= th {
				slow++
			}
		}
		if slow > 0 {
			r.Healthy = false
			r.Summary = fmt.Sprintf("%d of the last %d checkpoints were slow (from %s), but no single phase of one "+
				"subtask explains it (or their per-subtask statistics are missing): look at the checkpoint details "+
				"(weir status, the dashboard).", slow, len(d.cps), fmtDur(th))
		}
	}
	if !in.FailuresKnown {
		r.Notes = append(r.Notes, "Failed checkpoints are not recorded in _metadata: they are only visible live "+
			"(weir doctor <jobid>) or in the job's log (--log FILE).")
	}
	return r
}

// diagnosis is the state of one Diagnose call.
type diagnosis struct {
	in       Input
	o        Options
	cps      []Checkpoint // completed, by id
	fails    []Failure    // by id
	vertices map[int]Vertex
	interval time.Duration
	inferred bool
}

func newDiagnosis(in Input, o Options) *diagnosis {
	d := &diagnosis{in: in, o: o, vertices: map[int]Vertex{}}
	d.cps = slices.Clone(in.Checkpoints)
	slices.SortFunc(d.cps, func(a, b Checkpoint) int { return cmp.Compare(a.ID, b.ID) })
	for i := range d.cps {
		c := &d.cps[i]
		c.Subtasks = slices.Clone(c.Subtasks)
		slices.SortFunc(c.Subtasks, func(a, b Subtask) int {
			return cmp.Or(cmp.Compare(a.Vertex, b.Vertex), cmp.Compare(a.Index, b.Index))
		})
		if c.EndToEnd <= 0 {
			for _, s := range c.Subtasks {
				c.EndToEnd = max(c.EndToEnd, s.EndToEnd)
			}
		}
	}
	d.fails = slices.DeleteFunc(slices.Clone(in.Failures), stopping)
	slices.SortStableFunc(d.fails, func(a, b Failure) int { return cmp.Compare(a.ID, b.ID) })
	for _, v := range in.Vertices {
		d.vertices[v.Index] = v
	}
	d.interval, d.inferred = in.Config.Interval, in.Config.IntervalInferred
	if d.interval <= 0 {
		d.interval = inferInterval(d.cps, d.fails)
		d.inferred = d.interval > 0
	}
	return d
}

// inferInterval estimates the checkpoint interval from the trigger times
// of checkpoints: the shortest gap between two of them, divided by the
// difference of their ids (failed ones in between took ids too). Slow
// checkpoints are triggered as soon as the previous one completes, so
// the estimate is never below the true interval by more than the
// checkpoints' own spread; manual checkpoints shorten it. 0 if fewer than
// two trigger times are known.
func inferInterval(cps []Checkpoint, fails []Failure) time.Duration {
	type trig struct {
		id int64
		t  time.Time
	}
	var ts []trig
	for _, c := range cps {
		if !c.TriggerTime.IsZero() {
			ts = append(ts, trig{c.ID, c.TriggerTime})
		}
	}
	slices.SortFunc(ts, func(a, b trig) int { return cmp.Compare(a.id, b.id) })
	var best time.Duration
	for i := 1; i < len(ts); i++ {
		if ts[i].id == ts[i-1].id {
			continue // the same checkpoint twice: no gap to learn from
		}
		gap := ts[i].t.Sub(ts[i-1].t) / time.Duration(ts[i].id-ts[i-1].id)
		if gap > 0 && (best == 0 || gap < best) {
			best = gap
		}
	}
	return best
}

// slowThreshold is the end-to-end time from which a checkpoint is slow,
// and how it was derived.
func (d *diagnosis) slowThreshold() (time.Duration, string) {
	var th time.Duration
	var why string
	if d.interval > 0 {
		th = time.Duration(d.o.SlowFraction * float64(d.interval))
		why = fmt.Sprintf("%.0f%% of the %s interval", d.o.SlowFraction*100, fmtDur(d.interval))
	}
	if t := d.in.Config.Timeout; t > 0 && d.in.Config.Known {
		if tt := time.Duration(d.o.TimeoutFraction * float64(t)); th == 0 || tt < th {
			th = tt
			why = fmt.Sprintf("%.0f%% of the %s timeout", d.o.TimeoutFraction*100, fmtDur(t))
		}
	}
	if th == 0 {
		th, why = d.o.SlowWithoutInterval, "the interval and timeout being unknown"
	}
	if th < d.o.MinSlow {
		th, why = d.o.MinSlow, "the noise floor"
	}
	return th, why
}

// vertexName is the name of vertex v, or "vertex v" if unknown.
func (d *diagnosis) vertexName(v int) string {
	if x, ok := d.vertices[v]; ok && x.Name != "" {
		return x.Name
	}
	return fmt.Sprintf("vertex %d", v)
}

// subtaskName names a subtask the way its task does: "Name (2/4)".
func (d *diagnosis) subtaskName(r SubtaskRef) string {
	if x, ok := d.vertices[r.Vertex]; ok && x.Parallelism > 0 {
		return fmt.Sprintf("%s (%d/%d)", d.vertexName(r.Vertex), r.Index+1, x.Parallelism)
	}
	return fmt.Sprintf("%s (subtask %d)", d.vertexName(r.Vertex), r.Index)
}

// place fills the finding's vertex and subtask fields; index < 0 names
// the whole vertex.
func (d *diagnosis) place(f *Finding, vertex, index int) {
	f.VertexIndex, f.Vertex, f.Subtask = vertex, d.vertexName(vertex), index
	if index >= 0 {
		f.SubtaskName = d.subtaskName(SubtaskRef{vertex, index})
	}
}

// inputs are the edges into vertex v: the known ones, or offline the
// vertex before it.
func (d *diagnosis) inputs(v int) []Edge {
	if x, ok := d.vertices[v]; ok && x.InputsKnown {
		return x.Inputs
	}
	if v > 0 {
		return []Edge{{Vertex: v - 1}}
	}
	return nil
}

// upstream returns the subtasks of checkpoint c that send barriers to s.
func (d *diagnosis) upstream(c *Checkpoint, s SubtaskRef) []Subtask {
	var out []Subtask
	for _, e := range d.inputs(s.Vertex) {
		for _, u := range c.Subtasks {
			if u.Vertex == e.Vertex && (!e.Forward || u.Index == s.Index) {
				out = append(out, u)
			}
		}
	}
	return out
}

// summary says in one sentence what the findings say.
func (d *diagnosis) summary(fs []Finding) string {
	if len(fs) == 0 {
		if len(d.cps) == 0 {
			if !d.in.FailuresKnown {
				return "There are no completed checkpoints to examine."
			}
			return "There are no checkpoints to examine."
		}
		var e []time.Duration
		for _, c := range d.cps {
			e = append(e, c.EndToEnd)
		}
		s := fmt.Sprintf("The last %d checkpoints look healthy: end-to-end median %s, max %s", len(d.cps),
			fmtDur(median(e)), fmtDur(slices.Max(e)))
		if d.interval > 0 {
			s += fmt.Sprintf(" (interval %s)", fmtDur(d.interval))
		}
		switch {
		case !d.in.FailuresKnown:
			s += "; failed checkpoints are not visible here."
		case len(d.fails) == 0:
			s += "; none failed."
		default:
			s += "; no failure counts against the tolerable failures."
		}
		return s
	}
	var parts []string
	for _, f := range fs {
		parts = append(parts, fmt.Sprintf("%s (%s)", f.Cause, f.Severity))
	}
	noun := "findings"
	if len(fs) == 1 {
		noun = "finding"
	}
	return fmt.Sprintf("%d %s: %s. The first is the one to look at first.", len(fs), noun, strings.Join(parts, ", "))
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
