package doctor

import "fmt"

// growthFinding reports a full size that grows steadily across the
// completed checkpoints (Options.GrowthMinCheckpoints and the others).
func (d *diagnosis) growthFinding() (Finding, bool) {
	o := d.o
	if len(d.cps) < o.GrowthMinCheckpoints {
		return Finding{}, false
	}
	sizes := make([]int64, len(d.cps))
	for i, c := range d.cps {
		sizes[i] = c.FullSize
		if sizes[i] <= 0 {
			sizes[i] = c.CheckpointedSize
		}
	}
	if !growing(sizes, o) {
		return Finding{}, false
	}
	first, last := d.cps[0], d.cps[len(d.cps)-1]
	f := Finding{Cause: CauseStateGrowth, Severity: SeverityWarning, VertexIndex: -1, Subtask: -1}
	for _, c := range d.cps {
		f.Checkpoints = append(f.Checkpoints, c.ID)
	}
	steps := 0
	for i := 1; i < len(sizes); i++ {
		if sizes[i] > sizes[i-1] {
			steps++
		}
	}
	grown := sizes[len(sizes)-1] - sizes[0]
	f.Evidence = fmt.Sprintf("The full checkpoint size grew from %s (checkpoint %d) to %s (checkpoint %d), in %d of %d steps",
		fmtBytes(sizes[0]), first.ID, fmtBytes(sizes[len(sizes)-1]), last.ID, steps, len(sizes)-1)
	if span := last.TriggerTime.Sub(first.TriggerTime); span > 0 && !first.TriggerTime.IsZero() {
		f.Evidence += fmt.Sprintf(", %s per minute", fmtBytes(int64(float64(grown)/span.Minutes())))
	}
	f.Evidence += "."
	if r, from, to, ok := d.fastestGrowing(); ok {
		d.place(&f, r.Vertex, r.Index)
		f.Evidence += fmt.Sprintf(" %s grew most: %s to %s.", d.subtaskName(r), fmtBytes(from), fmtBytes(to))
	} else {
		f.Evidence += " Which subtask grows is not known: incremental checkpoints read live record only what each subtask uploaded."
	}
	where := "the operator"
	if f.Vertex != "" {
		where = f.Vertex
	}
	f.Remedy = fmt.Sprintf("State that only grows ends in slow checkpoints and restores. In %s: give the state "+
		"descriptors a TTL (the descriptor's TTL field, a StateTTLConfig like Flink's StateTtlConfig) or clear state when a key is done (a timer that "+
		"calls Clear), and check the keys: ever-new keys (ids, timestamps, sessions that never end) keep their "+
		"state forever. Windows keep state until the watermark passes their end plus the allowed lateness.", where)
	return f, true
}

// growing applies the growth rule to a series of sizes.
func growing(sizes []int64, o Options) bool {
	if len(sizes) < o.GrowthMinCheckpoints {
		return false
	}
	steps := 0
	for i := 1; i < len(sizes); i++ {
		if sizes[i] > sizes[i-1] {
			steps++
		}
	}
	first, last := sizes[0], sizes[len(sizes)-1]
	return float64(steps) >= o.GrowthStepShare*float64(len(sizes)-1) &&
		last-first >= o.GrowthMinBytes && float64(last-first) >= o.GrowthMinRatio*float64(first)
}

// fastestGrowing is the subtask whose full size grew most between the
// first and the last checkpoint that recorded it. Full sizes of subtasks
// are known offline; live, a full checkpoint's checkpointed size is its
// full size.
func (d *diagnosis) fastestGrowing() (SubtaskRef, int64, int64, bool) {
	type span struct {
		first, last int64
		seen        bool
	}
	spans := map[SubtaskRef]*span{}
	var order []SubtaskRef
	for _, c := range d.cps {
		full := c.FullSize > 0 && c.FullSize == c.CheckpointedSize
		for _, s := range c.Subtasks {
			size := s.FullSize
			if size == 0 && full {
				size = s.CheckpointedSize
			}
			if size == 0 && s.FullSize == 0 && !full {
				continue
			}
			x := spans[s.Ref()]
			if x == nil {
				x = &span{}
				spans[s.Ref()] = x
				order = append(order, s.Ref())
			}
			if !x.seen {
				x.first, x.seen = size, true
			}
			x.last = size
		}
	}
	var best SubtaskRef
	var bestGrowth int64
	found := false
	for _, r := range order {
		if g := spans[r].last - spans[r].first; g > 0 && (!found || g > bestGrowth) {
			best, bestGrowth, found = r, g, true
		}
	}
	if !found {
		return SubtaskRef{}, 0, 0, false
	}
	return best, spans[best].first, spans[best].last, true
}
