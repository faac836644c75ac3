package doctor

import (
	"fmt"
	"strings"
	"time"
)

// Cause is what a finding blames.
type Cause string

// The causes, in the order a report lists findings of equal severity.
const (
	// CauseExpired: checkpoints expired (execution.checkpointing.timeout).
	CauseExpired Cause = "expired"
	// CauseDeclined: subtasks declined checkpoints.
	CauseDeclined Cause = "declined"
	// CauseStartDelay: barriers were slow to reach a subtask: they queued
	// behind in-flight data (backpressure), or a source was slow to start
	// the checkpoint.
	CauseStartDelay Cause = "start-delay"
	// CauseAlignment: one input's barrier arrived long after the others'
	// (skew between channels) while the others were blocked.
	CauseAlignment Cause = "alignment"
	// CauseSyncPhase: the synchronous part of a snapshot, on the task
	// goroutine, took long.
	CauseSyncPhase Cause = "sync-phase"
	// CauseAsyncPhase: the asynchronous part (the upload) took long.
	CauseAsyncPhase Cause = "async-phase"
	// CauseStateGrowth: the checkpointed state grows steadily.
	CauseStateGrowth Cause = "state-growth"
	// CauseFailures: failed checkpoints against the tolerable failures.
	CauseFailures Cause = "failures"
)

var causeRank = map[Cause]int{CauseExpired: 0, CauseDeclined: 1, CauseStartDelay: 2, CauseAlignment: 3,
	CauseSyncPhase: 4, CauseAsyncPhase: 5, CauseStateGrowth: 6, CauseFailures: 7}

// Severity grades a finding.
type Severity string

// The severities, most severe first.
const (
	// SeverityCritical: checkpoints fail (or the job fails over).
	SeverityCritical Severity = "critical"
	// SeverityWarning: most checkpoints of the window show the problem.
	SeverityWarning Severity = "warning"
	// SeverityInfo: some checkpoints show it.
	SeverityInfo Severity = "info"
)

func (s Severity) rank() int {
	switch s {
	case SeverityCritical:
		return 0
	case SeverityWarning:
		return 1
	}
	return 2
}

// Finding is one diagnosed problem.
type Finding struct {
	// Cause is what the finding blames, Severity how bad it is.
	Cause    Cause    `json:"cause"`
	Severity Severity `json:"severity"`
	// Checkpoints are the ids of the checkpoints that show it, ascending.
	Checkpoints []int64 `json:"checkpoints"`
	// Vertex is the name of the vertex where the cause is, VertexIndex its
	// index (-1 and "" when the finding is about the whole job), Subtask
	// the subtask's index (-1 when not about one subtask).
	Vertex      string `json:"vertex,omitempty"`
	VertexIndex int    `json:"vertexIndex"`
	Subtask     int    `json:"subtask"`
	// SubtaskName names the subtask as its task does, Flink's way:
	// "Count -> Sink (2/4)" is subtask 1 of 4.
	SubtaskName string `json:"subtaskName,omitempty"`
	// Backpressured is, for start-delay, the vertex upstream of Vertex
	// whose output was full: the backpressured one, Vertex being the
	// likely bottleneck.
	Backpressured string `json:"backpressured,omitempty"`
	// Evidence are the figures behind the finding, Remedy what to change,
	// with Flink's configuration keys.
	Evidence string `json:"evidence"`
	Remedy   string `json:"remedy"`
}

// Report is the doctor's answer.
type Report struct {
	// Job, Source and Location are the Input's: the job's name, live or
	// offline, and the checkpoint directory or job id read.
	Job      string `json:"job"`
	Source   string `json:"source"`
	Location string `json:"location,omitempty"`
	// Checkpoints are the ids of the completed checkpoints examined,
	// Failed those of the failed ones (counted reasons only).
	Checkpoints []int64 `json:"checkpoints"`
	Failed      []int64 `json:"failed"`
	// Interval is the checkpoint interval the rules used (0: unknown),
	// IntervalInferred whether it came from trigger times.
	Interval         time.Duration `json:"interval"`
	IntervalInferred bool          `json:"intervalInferred,omitempty"`
	// Config is the checkpoint configuration as the doctor knew it.
	Config Config `json:"config"`
	// Healthy is set when there is no finding.
	Healthy bool `json:"healthy"`
	// Summary says in one sentence what the findings say.
	Summary  string    `json:"summary"`
	Findings []Finding `json:"findings"`
	// Notes say what the doctor could not see.
	Notes []string `json:"notes,omitempty"`
}

// Text renders the report for a terminal.
func (r Report) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Job %s (%s", r.Job, r.Source)
	if r.Location != "" {
		fmt.Fprintf(&b, ", %s", r.Location)
	}
	b.WriteString(")\n")
	fmt.Fprintf(&b, "Checkpoints examined: %s", idList(r.Checkpoints))
	if len(r.Failed) > 0 {
		fmt.Fprintf(&b, "; failed: %s", idList(r.Failed))
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "Configuration: %s\n", r.configLine())
	b.WriteString("\n")
	for _, f := range r.Findings {
		where := ""
		switch {
		case f.SubtaskName != "":
			where = " at " + f.SubtaskName
		case f.Vertex != "":
			where = " at " + f.Vertex
		}
		fmt.Fprintf(&b, "[%s] %s%s\n", strings.ToUpper(string(f.Severity)), f.Cause, where)
		if len(f.Checkpoints) > 0 {
			writeWrapped(&b, "  checkpoints: ", idList(f.Checkpoints))
		}
		if f.Backpressured != "" {
			writeWrapped(&b, "  backpressured: ", f.Backpressured)
		}
		writeWrapped(&b, "  evidence: ", f.Evidence)
		writeWrapped(&b, "  remedy: ", f.Remedy)
		b.WriteString("\n")
	}
	writeWrapped(&b, "", r.Summary)
	for _, n := range r.Notes {
		writeWrapped(&b, "Note: ", n)
	}
	return b.String()
}

func (r Report) configLine() string {
	c := r.Config
	var parts []string
	switch {
	case r.Interval == 0:
		parts = append(parts, "interval unknown")
	case r.IntervalInferred:
		parts = append(parts, "interval ~"+fmtDur(r.Interval)+" (inferred from trigger times)")
	default:
		parts = append(parts, "interval "+fmtDur(r.Interval))
	}
	if !c.Known {
		parts = append(parts, "other settings unknown (offline without the job's log)")
		return strings.Join(parts, ", ")
	}
	parts = append(parts, "timeout "+fmtDur(c.Timeout), fmt.Sprintf("tolerable failures %d", c.TolerableFailures))
	switch {
	case c.Unaligned && c.AlignedTimeout > 0:
		parts = append(parts, "unaligned after "+fmtDur(c.AlignedTimeout))
	case c.Unaligned:
		parts = append(parts, "unaligned")
	default:
		parts = append(parts, "aligned")
	}
	backend := c.Backend
	if backend == "" {
		backend = "hashmap"
	}
	switch {
	case c.Changelog:
		backend += " with changelog"
	case c.incremental():
		backend += ", incremental"
	default:
		backend += ", full checkpoints"
	}
	return strings.Join(append(parts, backend), ", ")
}

// idList renders checkpoint ids, runs of consecutive ids as ranges.
func idList(ids []int64) string {
	if len(ids) == 0 {
		return "none"
	}
	var parts []string
	for i := 0; i < len(ids); {
		j := i
		for j+1 < len(ids) && ids[j+1] == ids[j]+1 {
			j++
		}
		switch {
		case j == i:
			parts = append(parts, fmt.Sprint(ids[i]))
		case j == i+1:
			parts = append(parts, fmt.Sprint(ids[i]), fmt.Sprint(ids[j]))
		default:
			parts = append(parts, fmt.Sprintf("%d-%d", ids[i], ids[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ", ")
}

// wrapWidth is the width Text wraps its lines at.
const wrapWidth = 100

// writeWrapped writes prefix and text, wrapped at wrapWidth, continuation
// lines indented like the text.
func writeWrapped(b *strings.Builder, prefix, text string) {
	indent := strings.Repeat(" ", len(prefix))
	line := prefix
	empty := true
	for _, w := range strings.Fields(text) {
		if !empty && len(line)+1+len(w) > wrapWidth {
			b.WriteString(line + "\n")
			line, empty = indent, true
		}
		if !empty {
			line += " "
		}
		line += w
		empty = false
	}
	b.WriteString(line + "\n")
}

// fmtDur renders a duration for people: 2.5s, 340ms, 12µs.
func fmtDur(d time.Duration) string {
	switch {
	case d >= time.Minute:
		return d.Round(time.Second).String()
	case d >= 10*time.Second:
		return d.Round(100 * time.Millisecond).String()
	case d >= time.Second:
		return d.Round(10 * time.Millisecond).String()
	case d >= time.Millisecond:
		return d.Round(time.Millisecond).String()
	}
	return d.String()
}

// fmtBytes renders a size: "812 B", "3.2 KiB", "41.0 MiB".
func fmtBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
