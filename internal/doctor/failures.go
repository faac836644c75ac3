package doctor

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// failureFindings reports expired and declined checkpoints and the failed
// checkpoints against the tolerable failures.
func (d *diagnosis) failureFindings() []Finding {
	var out []Finding
	if f, ok := d.expired(); ok {
		out = append(out, f)
	}
	if f, ok := d.declined(); ok {
		out = append(out, f)
	}
	if f, ok := d.failures(); ok {
		out = append(out, f)
	}
	return out
}

func (d *diagnosis) expired() (Finding, bool) {
	var exp []Failure
	for _, f := range d.fails {
		if f.Reason == ReasonExpired {
			exp = append(exp, f)
		}
	}
	if len(exp) == 0 {
		return Finding{}, false
	}
	f := Finding{Cause: CauseExpired, Severity: SeverityCritical, VertexIndex: -1, Subtask: -1}
	pending := map[SubtaskRef]int{}
	var order []SubtaskRef
	complete := true
	for _, x := range exp {
		f.Checkpoints = append(f.Checkpoints, x.ID)
		complete = complete && x.PendingKnown
		for _, p := range x.Pending {
			if pending[p] == 0 {
				order = append(order, p)
			}
			pending[p]++
		}
	}
	timeout := "the timeout"
	if c := d.in.Config; c.Known && c.Timeout > 0 {
		timeout = fmt.Sprintf("the %s timeout (execution.checkpointing.timeout)", fmtDur(c.Timeout))
	}
	f.Evidence = fmt.Sprintf("%d checkpoint%s expired: not complete %s after the trigger.", len(exp), plural(len(exp)), timeout)
	switch {
	case len(order) > 0:
		// Most often pending first; on a tie the most downstream: an
		// upstream subtask acknowledges once its own snapshot is up, while
		// one downstream also waits for the barriers to reach it.
		slices.SortStableFunc(order, func(a, b SubtaskRef) int {
			return cmp.Or(-cmp.Compare(pending[a], pending[b]), -cmp.Compare(a.Vertex, b.Vertex), cmp.Compare(a.Index, b.Index))
		})
		top := order[0]
		// A whole vertex missing alike is named as the vertex.
		whole := true
		if v, ok := d.vertices[top.Vertex]; ok && v.Parallelism > 1 {
			for i := range v.Parallelism {
				if pending[SubtaskRef{top.Vertex, i}] != pending[top] {
					whole = false
				}
			}
		} else {
			whole = false
		}
		switch {
		case !complete && 2*pending[top] < len(exp):
			// Late acknowledgements in a few of the expired checkpoints
			// only: too little to name a culprit.
		case whole:
			d.place(&f, top.Vertex, -1)
		default:
			d.place(&f, top.Vertex, top.Index)
		}
		var parts []string
		for _, r := range order {
			parts = append(parts, fmt.Sprintf("%s (%d of %d)", d.subtaskName(r), pending[r], len(exp)))
		}
		lead := "Not acknowledged when they expired: "
		if !complete {
			lead = "Acknowledged only after they expired (the log names no others): "
		}
		f.Evidence += " " + lead + strings.Join(parts, ", ") + "."
	case complete:
		f.Evidence += " Every subtask had acknowledged: the time went to completing the checkpoint (_metadata)."
	default:
		f.Evidence += " Which subtasks had not acknowledged is not known (offline, only acknowledgements " +
			"that arrived after the expiry are logged)."
		if at, cause, ok := d.slowestCompleted(); ok {
			d.place(&f, at.Vertex, at.Index)
			f.Evidence += fmt.Sprintf(" The slow completed checkpoints were held up most by %s (%s): likely "+
				"the expired ones too.", d.subtaskName(at), cause)
		}
	}
	total := 0
	for _, v := range d.vertices {
		total += v.Parallelism
	}
	if x := exp[len(exp)-1]; x.PendingKnown && total > 0 && len(x.Acked)+len(x.Pending) == total {
		f.Evidence += fmt.Sprintf(" %d of %d subtasks had acknowledged checkpoint %d.", len(x.Acked), total, x.ID)
	}
	f.Remedy = "Raise execution.checkpointing.timeout above the time the checkpoints need, or make them " +
		"faster: the subtasks named above hold them up; look at their start delay (backpressure), alignment, " +
		"and synchronous and asynchronous phases (the other findings). Every expired checkpoint's uploads are wasted."
	return f, true
}

// slowestCompleted is the subtask blamed most often for the slow
// completed checkpoints, and for what.
func (d *diagnosis) slowestCompleted() (SubtaskRef, Cause, bool) {
	th, _ := d.slowThreshold()
	var bs []blamed
	for i := range d.cps {
		if c := &d.cps[i]; c.EndToEnd >= th {
			if b, ok := d.blameCheckpoint(c); ok {
				bs = append(bs, blamed{c, b})
			}
		}
	}
	if len(bs) == 0 {
		return SubtaskRef{}, "", false
	}
	at := mostBlamed(bs)
	for _, x := range bs {
		if x.b.at == at {
			return at, x.b.cause, true
		}
	}
	return SubtaskRef{}, "", false
}

// checkpointNumber matches the checkpoint numbers in a decline's cause,
// to group causes that differ only in them.
var checkpointNumber = regexp.MustCompile(`(checkpoint|attempt) \d+`)

func (d *diagnosis) declined() (Finding, bool) {
	type group struct {
		reason, cause string
		task          *SubtaskRef
		ids           []int64
	}
	var groups []*group
	anyCounted := false
	for _, x := range d.fails {
		switch x.Reason {
		case ReasonDeclined, ReasonAsyncFailure, ReasonSubsumed:
		default:
			continue
		}
		if x.Task == nil && x.Reason == ReasonSubsumed {
			continue // subsumed by a newer completed checkpoint: not a decline
		}
		anyCounted = anyCounted || counted(x.Reason)
		cause := x.Cause
		if cause == "" {
			cause = x.Message
		}
		cause = checkpointNumber.ReplaceAllString(cause, "$1 N")
		var g *group
		for _, y := range groups {
			if y.reason == x.Reason && y.cause == cause && sameRef(y.task, x.Task) {
				g = y
			}
		}
		if g == nil {
			g = &group{reason: x.Reason, cause: cause, task: x.Task}
			groups = append(groups, g)
		}
		g.ids = append(g.ids, x.ID)
	}
	if len(groups) == 0 {
		return Finding{}, false
	}
	slices.SortStableFunc(groups, func(a, b *group) int { return -cmp.Compare(len(a.ids), len(b.ids)) })
	f := Finding{Cause: CauseDeclined, Severity: SeverityInfo, VertexIndex: -1, Subtask: -1}
	if anyCounted {
		f.Severity = SeverityCritical
	}
	for _, g := range groups {
		f.Checkpoints = append(f.Checkpoints, g.ids...)
	}
	slices.Sort(f.Checkpoints)
	if t := groups[0].task; t != nil {
		d.place(&f, t.Vertex, t.Index)
	}
	var parts []string
	for _, g := range groups {
		by := ""
		if g.task != nil {
			by = " by " + d.subtaskName(*g.task)
		}
		parts = append(parts, fmt.Sprintf("checkpoint%s %s declined%s (%s): %s", plural(len(g.ids)), idList(g.ids), by, g.reason, g.cause))
	}
	f.Evidence = strings.Join(parts, "; ") + "."
	var r []string
	seen := map[string]bool{}
	for _, g := range groups {
		if seen[g.reason] {
			continue
		}
		seen[g.reason] = true
		switch g.reason {
		case ReasonAsyncFailure:
			r = append(r, "An asynchronous phase failed: an upload to the checkpoint storage "+
				"(execution.checkpointing.dir: is it reachable, writable, not full?) or a sink's sync of its "+
				"pre-committed data, as the cause says; the declining task's log has the details.")
		case ReasonSubsumed:
			r = append(r, "A newer checkpoint's barrier overtook an older one before it was aligned (Flink's "+
				"checkpoint cancel): checkpoints overlap; raise execution.checkpointing.interval or "+
				"execution.checkpointing.min-pause, or make alignments shorter.")
		default:
			r = append(r, "A subtask could not take its snapshot: fix the cause above.")
		}
	}
	if anyCounted {
		r = append(r, "Declines count against execution.checkpointing.tolerable-failed-checkpoints; one too many fails the job over.")
	}
	f.Remedy = strings.Join(r, " ")
	return f, true
}

func sameRef(a, b *SubtaskRef) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func (d *diagnosis) failures() (Finding, bool) {
	var failed []Failure
	for _, x := range d.fails {
		if counted(x.Reason) {
			failed = append(failed, x)
		}
	}
	if len(failed) == 0 && d.in.JobFailovers == 0 {
		return Finding{}, false
	}
	var lastCompleted int64
	if len(d.cps) > 0 {
		lastCompleted = d.cps[len(d.cps)-1].ID
	}
	consecutive := 0
	reasons := map[string]int{}
	var order []string
	f := Finding{Cause: CauseFailures, Severity: SeverityWarning, VertexIndex: -1, Subtask: -1}
	for _, x := range failed {
		f.Checkpoints = append(f.Checkpoints, x.ID)
		if x.ID > lastCompleted {
			consecutive++
		}
		if reasons[x.Reason] == 0 {
			order = append(order, x.Reason)
		}
		reasons[x.Reason]++
	}
	var parts []string
	for _, r := range order {
		parts = append(parts, fmt.Sprintf("%d %s", reasons[r], r))
	}
	total := len(failed) + len(d.cps)
	f.Evidence = fmt.Sprintf("%d of the %d checkpoints examined failed", len(failed), total)
	if len(parts) > 0 {
		f.Evidence += " (" + strings.Join(parts, ", ") + ")"
	}
	if consecutive > 0 {
		f.Evidence += fmt.Sprintf("; %d in a row since the last completed one.", consecutive)
	} else {
		f.Evidence += "; a checkpoint completed since."
	}
	c := d.in.Config
	if c.Known {
		f.Evidence += fmt.Sprintf(" execution.checkpointing.tolerable-failed-checkpoints is %d: the job fails "+
			"over at the %s consecutive counted failure.", c.TolerableFailures, ordinal(c.TolerableFailures+1))
		if consecutive > c.TolerableFailures {
			f.Severity = SeverityCritical
		}
	}
	if d.in.JobFailovers > 0 {
		f.Severity = SeverityCritical
		f.Evidence += fmt.Sprintf(" The job failed over %d time%s because it exceeded them.", d.in.JobFailovers, plural(d.in.JobFailovers))
	}
	f.Remedy = "Remove the causes of the failures (the findings above). Raising " +
		"execution.checkpointing.tolerable-failed-checkpoints only keeps the job running without new " +
		"checkpoints, so a restart replays more: use it for short, known storage outages."
	return f, true
}

func ordinal(n int) string {
	suffix := "th"
	switch {
	case n%100 >= 11 && n%100 <= 13:
	case n%10 == 1:
		suffix = "st"
	case n%10 == 2:
		suffix = "nd"
	case n%10 == 3:
		suffix = "rd"
	}
	return fmt.Sprintf("%d%s", n, suffix)
}
