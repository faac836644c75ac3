package doctor

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/weirstream/weir/internal/task"
)

// blame is what one slow checkpoint is blamed on.
type blame struct {
	cause Cause
	at    SubtaskRef
	// dur is the time blamed: the phase's duration, or for start-delay the
	// time barriers waited behind in-flight data.
	dur time.Duration
	// from is the upstream subtask involved: the one whose barrier came
	// last (alignment) or whose output was full (start-delay).
	from *Subtask
	// source: a start delay at a source, which started the checkpoint
	// late.
	source bool
}

// blameCheckpoint blames slow checkpoint c on one phase of one subtask;
// false if no phase accounts for Options.MinShare of its end-to-end
// time.
func (d *diagnosis) blameCheckpoint(c *Checkpoint) (blame, bool) {
	if len(c.Subtasks) == 0 {
		return blame{}, false
	}
	// The subtask that acknowledged last decided the end-to-end time; on
	// a tie the most downstream one.
	crit := c.Subtasks[0]
	for _, s := range c.Subtasks[1:] {
		if s.EndToEnd > crit.EndToEnd || (s.EndToEnd == crit.EndToEnd && s.Vertex > crit.Vertex) {
			crit = s
		}
	}
	e := c.EndToEnd
	minDur := time.Duration(d.o.MinShare * float64(e))
	var (
		firstWait *blame // the most downstream notable wait behind in-flight data
		waited    time.Duration
	)
	finish := func(b blame) (blame, bool) {
		if b.dur < minDur && firstWait != nil && waited >= minDur {
			b = *firstWait
			b.dur = waited
		}
		return b, b.dur >= minDur && b.dur > 0
	}
	s, withAsync := crit, true
	for range len(c.Subtasks) + 1 {
		phase, _ := dominantPhase(s, withAsync)
		switch phase {
		case CauseAsyncPhase:
			return finish(blame{cause: CauseAsyncPhase, at: s.Ref(), dur: s.Async})
		case CauseSyncPhase:
			return finish(blame{cause: CauseSyncPhase, at: s.Ref(), dur: s.Sync})
		case CauseAlignment:
			ups := d.upstream(c, s.Ref())
			if len(ups) == 0 {
				return finish(blame{cause: CauseAlignment, at: s.Ref(), dur: s.Alignment})
			}
			last := slices.MaxFunc(ups, func(a, b Subtask) int { return cmp.Compare(a.departure(), b.departure()) })
			first := slices.MinFunc(ups, func(a, b Subtask) int { return cmp.Compare(a.departure(), b.departure()) })
			if float64(last.departure()-first.departure()) >= d.o.UpstreamShare*float64(s.Alignment) {
				// The late barrier left its upstream subtask late: the
				// alignment only waits for it. Find out why there (its
				// sync phase, its own alignment or start delay), as for a
				// start delay.
				s, withAsync = last, false
				continue
			}
			return finish(blame{cause: CauseAlignment, at: s.Ref(), dur: s.Alignment, from: &last})
		default: // start delay
			ups := d.upstream(c, s.Ref())
			if len(ups) == 0 {
				return finish(blame{cause: CauseStartDelay, at: s.Ref(), dur: s.StartDelay, source: true})
			}
			first := slices.MinFunc(ups, func(a, b Subtask) int { return cmp.Compare(a.departure(), b.departure()) })
			wait := max(s.StartDelay-first.departure(), 0)
			waited += wait
			b := blame{cause: CauseStartDelay, at: s.Ref(), dur: wait, from: &first}
			if wait >= minDur {
				return finish(b)
			}
			if firstWait == nil && wait >= minDur/3 {
				firstWait = &b
			}
			// The barrier left the upstream subtask late: find out why
			// there. Its asynchronous phase does not hold barriers back.
			s, withAsync = first, false
		}
	}
	return blame{}, false
}

// dominantPhase returns the longest phase of s and its duration; on a tie
// the later phase.
func dominantPhase(s Subtask, withAsync bool) (Cause, time.Duration) {
	phase, dur := CauseStartDelay, s.StartDelay
	for _, p := range []struct {
		c Cause
		d time.Duration
	}{{CauseAlignment, s.Alignment}, {CauseSyncPhase, s.Sync}, {CauseAsyncPhase, s.Async}} {
		if p.c == CauseAsyncPhase && !withAsync {
			continue
		}
		if p.d >= dur {
			phase, dur = p.c, p.d
		}
	}
	return phase, dur
}

// blamed is one slow checkpoint and its blame.
type blamed struct {
	c *Checkpoint
	b blame
}

// phaseFindings blames every slow checkpoint and reports one finding per
// cause.
func (d *diagnosis) phaseFindings() []Finding {
	th, why := d.slowThreshold()
	byCause := map[Cause][]blamed{}
	unexplained := 0
	for i := range d.cps {
		c := &d.cps[i]
		if c.EndToEnd < th {
			continue
		}
		b, ok := d.blameCheckpoint(c)
		if !ok {
			unexplained++
			continue
		}
		byCause[b.cause] = append(byCause[b.cause], blamed{c, b})
	}
	if unexplained > 0 {
		d.in.Notes = append(d.in.Notes, fmt.Sprintf("%d slow checkpoints had no dominant phase "+
			"(the time may have gone to writing _metadata, or spread over several phases).", unexplained))
	}
	var out []Finding
	for _, cause := range []Cause{CauseStartDelay, CauseAlignment, CauseSyncPhase, CauseAsyncPhase} {
		bs := byCause[cause]
		if len(bs) == 0 {
			continue
		}
		f := Finding{Cause: cause, Severity: SeverityInfo}
		if float64(len(bs)) >= d.o.WarningShare*float64(len(d.cps)) {
			f.Severity = SeverityWarning
		}
		var es []time.Duration
		for _, x := range bs {
			f.Checkpoints = append(f.Checkpoints, x.c.ID)
			es = append(es, x.c.EndToEnd)
		}
		at := mostBlamed(bs)
		d.place(&f, at.Vertex, at.Index)
		intro := fmt.Sprintf("%d of %d completed checkpoints were slow (end-to-end median %s, max %s; slow from %s, %s)",
			len(bs), len(d.cps), fmtDur(median(es)), fmtDur(slices.Max(es)), fmtDur(th), why)
		var own []blamed // the checkpoints blamed on the named subtask
		for _, x := range bs {
			if x.b.at == at {
				own = append(own, x)
			}
		}
		switch cause {
		case CauseStartDelay:
			d.startDelay(&f, own, intro)
		case CauseAlignment:
			d.alignment(&f, own, intro)
		case CauseSyncPhase:
			d.syncPhase(&f, own, intro)
		case CauseAsyncPhase:
			d.asyncPhase(&f, own, intro)
		}
		if len(own) < len(bs) {
			f.Evidence += " " + d.others(bs, at)
		}
		out = append(out, f)
	}
	return out
}

// mostBlamed is the subtask blamed most often; on a tie the one blamed
// for the most time, then the first.
func mostBlamed(bs []blamed) SubtaskRef {
	type tally struct {
		n   int
		sum time.Duration
	}
	t := map[SubtaskRef]*tally{}
	var order []SubtaskRef
	for _, x := range bs {
		if t[x.b.at] == nil {
			t[x.b.at] = &tally{}
			order = append(order, x.b.at)
		}
		t[x.b.at].n++
		t[x.b.at].sum += x.b.dur
	}
	best := order[0]
	for _, r := range order[1:] {
		if t[r].n > t[best].n || (t[r].n == t[best].n && t[r].sum > t[best].sum) {
			best = r
		}
	}
	return best
}

// others mentions the subtasks other than at that were blamed.
func (d *diagnosis) others(bs []blamed, at SubtaskRef) string {
	n := map[SubtaskRef]int{}
	var order []SubtaskRef
	for _, x := range bs {
		if x.b.at == at {
			continue
		}
		if n[x.b.at] == 0 {
			order = append(order, x.b.at)
		}
		n[x.b.at]++
	}
	var parts []string
	for _, r := range order {
		parts = append(parts, fmt.Sprintf("%s (%d)", d.subtaskName(r), n[r]))
	}
	return "Also blamed: " + strings.Join(parts, ", ") + "."
}

// durs returns the blamed durations' median and maximum.
func durs(bs []blamed) (time.Duration, time.Duration) {
	var ds []time.Duration
	for _, x := range bs {
		ds = append(ds, x.b.dur)
	}
	return median(ds), slices.Max(ds)
}

func (d *diagnosis) startDelay(f *Finding, own []blamed, intro string) {
	med, mx := durs(own)
	at := SubtaskRef{f.VertexIndex, f.Subtask}
	if own[0].b.source {
		f.Evidence = fmt.Sprintf("%s. Their barriers left late: the source subtask %s started the checkpoint "+
			"only %s after the trigger (median; max %s), as it was busy reading (a ReadBatch that blocks) or its "+
			"output was full.", intro, d.subtaskName(at), fmtDur(med), fmtDur(mx))
		f.Remedy = "A source reader must return NothingAvailable instead of blocking, so that its task can " +
			"serve the checkpoint trigger. If its output is full (backpressure), remove the bottleneck " +
			"downstream (more parallelism) and consider unaligned checkpoints " +
			"(execution.checkpointing.unaligned.enabled: true)."
		d.bottleneckFromMetrics(f)
		return
	}
	up := own[0].b.from
	upName := d.vertexName(up.Vertex)
	f.Backpressured = upName
	f.Evidence = fmt.Sprintf("%s. Barriers reached %s up to %s (median %s) after %s had sent them: they "+
		"queued behind in-flight data on full channels, so %s is backpressured and %s (or a vertex after it) "+
		"is the likely bottleneck.", intro, d.subtaskName(at), fmtDur(mx), fmtDur(med), upName, upName, f.Vertex)
	if d.in.Source == SourceOffline || len(d.in.Tasks) == 0 {
		f.Evidence += " (Without task metrics the bottleneck is inferred from where the barriers waited.)"
	}
	d.bottleneckFromMetrics(f)
	f.Remedy = d.startDelayRemedy(f.Vertex)
}

func (d *diagnosis) startDelayRemedy(bottleneck string) string {
	var r []string
	c := d.in.Config
	switch {
	case !c.Unaligned:
		r = append(r, "Enable unaligned checkpoints (execution.checkpointing.unaligned.enabled: true): barriers "+
			"overtake the in-flight data, which is stored with the checkpoint; with "+
			"execution.checkpointing.aligned-checkpoint-timeout (e.g. 1 s) checkpoints start aligned and switch "+
			"only under backpressure.")
	default:
		r = append(r, "Unaligned checkpoints are on, yet barriers still wait: they cannot overtake on forward, "+
			"rescale and broadcast edges, and an aligned-checkpoint-timeout delays the switch.")
	}
	if !c.BufferDebloat || !c.Known {
		r = append(r, "Enable buffer debloating (taskmanager.network.memory.buffer-debloat.enabled: true) so "+
			"that less data is in flight ahead of a barrier.")
	}
	r = append(r, fmt.Sprintf("Remove the bottleneck: more parallelism for %s, or less work per record there.", bottleneck))
	return strings.Join(r, " ")
}

// bottleneckFromMetrics applies Flink's rule to the current task metrics:
// the first vertex, going downstream, with a busy subtask whose input
// pool is full while an upstream subtask's output pool is full (or it is
// backpressured). If one is found it becomes the finding's subtask.
func (d *diagnosis) bottleneckFromMetrics(f *Finding) {
	if len(d.in.Tasks) == 0 {
		return
	}
	o := d.o
	byVertex := map[int][]task.TaskMetrics{}
	var vs []int
	for _, m := range d.in.Tasks {
		if byVertex[m.Vertex] == nil {
			vs = append(vs, m.Vertex)
		}
		byVertex[m.Vertex] = append(byVertex[m.Vertex], m)
	}
	slices.Sort(vs)
	for _, v := range vs {
		var best *task.TaskMetrics
		for i, m := range byVertex[v] {
			if m.BusyTimeMsPerSecond >= o.BusyMsPerSecond && m.InPoolUsage >= o.PoolUsageHigh &&
				(best == nil || m.BusyTimeMsPerSecond > best.BusyTimeMsPerSecond) {
				best = &byVertex[v][i]
			}
		}
		if best == nil {
			continue
		}
		var up *task.TaskMetrics
		for _, e := range d.inputs(v) {
			for i, m := range byVertex[e.Vertex] {
				if (m.OutPoolUsage >= o.PoolUsageHigh || m.BackPressuredTimeMsPerSecond >= o.BackPressuredMsPerSecond) &&
					(up == nil || m.BackPressuredTimeMsPerSecond > up.BackPressuredTimeMsPerSecond) {
					up = &byVertex[e.Vertex][i]
				}
			}
		}
		if up == nil {
			continue
		}
		d.place(f, best.Vertex, best.Subtask)
		f.Backpressured = d.vertexName(up.Vertex)
		f.Evidence += fmt.Sprintf(" Task metrics now: %s busy %.0f ms/s with inPoolUsage %.2f, fed by %s "+
			"backpressured %.0f ms/s with outPoolUsage %.2f: by Flink's rule %s is the bottleneck.",
			d.subtaskName(SubtaskRef{best.Vertex, best.Subtask}), best.BusyTimeMsPerSecond, best.InPoolUsage,
			d.subtaskName(SubtaskRef{up.Vertex, up.Subtask}), up.BackPressuredTimeMsPerSecond, up.OutPoolUsage,
			d.vertexName(best.Vertex))
		return
	}
}

func (d *diagnosis) alignment(f *Finding, own []blamed, intro string) {
	med, mx := durs(own)
	at := SubtaskRef{f.VertexIndex, f.Subtask}
	f.Evidence = fmt.Sprintf("%s. %s waited up to %s (median %s) from its first barrier to its last, its "+
		"other inputs blocked meanwhile.", intro, d.subtaskName(at), fmtDur(mx), fmtDur(med))
	late := own[len(own)-1]
	if u := late.b.from; u != nil && float64(u.departure()) >= d.o.UpstreamShare*float64(late.b.dur) {
		f.Evidence += fmt.Sprintf(" Its last barrier left %s late (%s after the trigger): that subtask is "+
			"slower than its peers.", d.subtaskName(u.Ref()), fmtDur(u.departure()))
	} else {
		f.Evidence += " Its upstream subtasks sent their barriers at about the same time, so the last one " +
			"waited in a fuller channel: one upstream subtask sends far more than the others (skew)."
	}
	if up, ok := d.mostBackpressured(at.Vertex); ok {
		f.Evidence += fmt.Sprintf(" Task metrics now: %s is backpressured %.0f ms/s with outPoolUsage %.2f, "+
			"the fullest input.", d.subtaskName(SubtaskRef{up.Vertex, up.Subtask}), up.BackPressuredTimeMsPerSecond, up.OutPoolUsage)
	}
	var r []string
	c := d.in.Config
	if !c.Unaligned {
		r = append(r, "Enable unaligned checkpoints (execution.checkpointing.unaligned.enabled: true), or keep "+
			"them aligned at first with execution.checkpointing.aligned-checkpoint-timeout "+
			fmt.Sprintf("(e.g. %s) so that only slow alignments switch to unaligned.", fmtDur(max(med/2, time.Millisecond))))
	} else {
		r = append(r, "Unaligned checkpoints are on: lower execution.checkpointing.aligned-checkpoint-timeout, "+
			"or check for forward, rescale or broadcast edges, which stay aligned.")
	}
	r = append(r, "Fix the skew: spread hot keys (a salted key with a second aggregation, or pre-aggregate "+
		"before the keyBy), balance the sources' splits, give the slow input more parallelism. If duplicates "+
		"after a restore are acceptable, execution.checkpointing.mode: AT_LEAST_ONCE does not align at all.")
	f.Remedy = strings.Join(r, " ")
}

// mostBackpressured is the subtask feeding vertex v that is the most
// backpressured now, if any is at least Options.BackPressuredMsPerSecond.
func (d *diagnosis) mostBackpressured(v int) (task.TaskMetrics, bool) {
	var best task.TaskMetrics
	found := false
	for _, e := range d.inputs(v) {
		for _, m := range d.in.Tasks {
			if m.Vertex == e.Vertex && m.BackPressuredTimeMsPerSecond >= d.o.BackPressuredMsPerSecond &&
				(!found || m.BackPressuredTimeMsPerSecond > best.BackPressuredTimeMsPerSecond) {
				best, found = m, true
			}
		}
	}
	return best, found
}

func (d *diagnosis) syncPhase(f *Finding, own []blamed, intro string) {
	med, mx := durs(own)
	at := SubtaskRef{f.VertexIndex, f.Subtask}
	f.Evidence = fmt.Sprintf("%s. The synchronous phase of %s took up to %s (median %s); it runs on the task "+
		"goroutine, which processes no record meanwhile and forwards its barriers only after it.",
		intro, d.subtaskName(at), fmtDur(mx), fmtDur(med))
	f.Remedy = "Keep the checkpoint hooks that run on the task goroutine short: a BarrierFlusher's " +
		"FlushBeforeBarrier (Flink's prepareSnapshotPreBarrier: emit less, or flush more often between " +
		"checkpoints), a source's SnapshotSplits, a sink's PreCommit (move its fsync or upload to " +
		"SyncPreCommitted, which runs in the asynchronous phase). Many timers are copied in this phase too: " +
		"coalesce them (round timestamps). A task goroutine starved of CPU also shows here: check the machine's load."
}

func (d *diagnosis) asyncPhase(f *Finding, own []blamed, intro string) {
	med, mx := durs(own)
	at := SubtaskRef{f.VertexIndex, f.Subtask}
	var size int64
	var took time.Duration
	for _, x := range own {
		if s, ok := subtaskOf(x.c, at); ok && s.Async > took {
			size, took = s.CheckpointedSize, s.Async
		}
	}
	f.Evidence = fmt.Sprintf("%s. The asynchronous phase of %s took up to %s (median %s), uploading %s",
		intro, d.subtaskName(at), fmtDur(mx), fmtDur(med), fmtBytes(size))
	if took > 0 {
		f.Evidence += fmt.Sprintf(" at %s/s", fmtBytes(int64(float64(size)/took.Seconds())))
	}
	f.Evidence += "."
	var r []string
	c := d.in.Config
	if !c.incremental() || !c.Known {
		r = append(r, "Use incremental checkpoints (state.backend.type: pebble with "+
			"execution.checkpointing.incremental: true): each uploads only the files created since the last one.")
	}
	if !c.Changelog || !c.Known {
		lead := "Or the"
		if len(r) == 0 {
			lead = "Use the"
		}
		r = append(r, lead+" changelog state backend (state.changelog.enabled: true): state changes are "+
			"uploaded continuously and a checkpoint uploads only a short tail.")
	}
	r = append(r, fmt.Sprintf("Faster checkpoint storage (execution.checkpointing.dir) helps, and more "+
		"parallelism for %s spreads the upload over more subtasks. If the size is more than expected, "+
		"expire old state with a TTL.", f.Vertex))
	f.Remedy = strings.Join(r, " ")
}

func subtaskOf(c *Checkpoint, r SubtaskRef) (Subtask, bool) {
	for _, s := range c.Subtasks {
		if s.Ref() == r {
			return s, true
		}
	}
	return Subtask{}, false
}
