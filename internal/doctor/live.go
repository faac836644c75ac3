package doctor

import (
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/internal/checkpoint/stats"
	"github.com/weirstream/weir/internal/monitor"
)

// DefaultLast is how many checkpoints the doctor examines unless told
// otherwise: the checkpoint statistics' history size.
const DefaultLast = stats.DefaultHistorySize

// Handle is the REST hook of GET /jobs/{jobid}/doctor: the report on the
// last n checkpoints of the running job j (if n <= 0, as many as its
// statistics keep: web.checkpoints.history), as a value to encode as
// JSON (a Report).
func Handle(j *monitor.Job, n int) any {
	if n <= 0 {
		n, _ = strconv.Atoi(j.Config["web.checkpoints.history"])
	}
	return Diagnose(FromJob(j, n), Options{})
}

// FromJob builds the input from a running (or ended) job: the last n
// checkpoints of its statistics (DefaultLast if n <= 0; the statistics
// keep stats.DefaultHistorySize unless configured otherwise), completed
// and failed (savepoints, checkpoints in progress and those aborted
// because the job was canceled or failing over are left out), the
// current task metrics, the vertices and the checkpoint configuration.
func FromJob(j *monitor.Job, n int) Input {
	if n <= 0 {
		n = DefaultLast
	}
	in := Input{Job: j.Name, Source: SourceLive, Location: j.ID, FailuresKnown: true}
	if in.Job == "" {
		in.Job = j.ID
	}
	for _, v := range j.Vertices {
		x := Vertex{Index: v.Index, Name: v.Name, Parallelism: v.Parallelism, InputsKnown: true, Inputs: []Edge{}}
		for _, e := range v.Inputs {
			x.Inputs = append(x.Inputs, Edge{Vertex: e.Vertex, Forward: e.ShipStrategy == "FORWARD"})
		}
		in.Vertices = append(in.Vertices, x)
	}
	cc := j.Checkpoint
	in.Config = Config{Known: true, Interval: cc.Interval, Timeout: cc.Timeout, TolerableFailures: cc.TolerableFailures,
		Unaligned: cc.Unaligned, AlignedTimeout: cc.AlignedTimeout, Backend: cc.StateBackend,
		Incremental: cc.Incremental, Changelog: cc.Changelog}
	if v, ok := j.Config["taskmanager.network.memory.buffer-debloat.enabled"]; ok {
		in.Config.BufferDebloat, _ = strconv.ParseBool(v)
	}
	if in.Config.Backend == "" {
		in.Config.Backend = defaultBackend()
	}

	status := j.Status()
	in.Tasks = status.Tasks
	for _, e := range status.Exceptions {
		if strings.Contains(e.Message, tolerableFailureMessage) {
			in.JobFailovers++
		}
	}

	snap := j.Checkpoints.Snapshot()
	var hist []stats.Checkpoint // oldest first
	for _, c := range slices.Backward(snap.History) {
		if c.Savepoint || c.Status == stats.InProgress {
			continue
		}
		if r := classifyFailure(c.FailureMessage).Reason; c.Status == stats.Failed && !counted(r) && r != ReasonSubsumed {
			continue // the job was canceled or failing over: not the checkpoint's fault
		}
		hist = append(hist, c)
	}
	if len(hist) > n {
		hist = hist[len(hist)-n:]
	}
	for _, c := range hist {
		subs := make([]Subtask, len(c.Subtasks))
		full := c.StateSize > 0 && c.StateSize == c.CheckpointedSize
		for i, s := range c.Subtasks {
			subs[i] = Subtask{Vertex: s.Vertex, Index: s.Index, EndToEnd: s.EndToEnd, StartDelay: s.StartDelay,
				Alignment: s.Alignment, Sync: s.Sync, Async: s.Async, CheckpointedSize: s.CheckpointedSize,
				PersistedData: s.PersistedData, Unaligned: s.Unaligned}
			if full {
				subs[i].FullSize = s.CheckpointedSize
			}
		}
		if c.Status == stats.Completed {
			in.Checkpoints = append(in.Checkpoints, Checkpoint{ID: c.ID, TriggerTime: c.TriggerTime,
				CompletionTime: c.CompletionTime, EndToEnd: c.EndToEnd(), CheckpointedSize: c.CheckpointedSize,
				FullSize: c.StateSize, PersistedData: c.PersistedData, Unaligned: c.Unaligned, Subtasks: subs})
			continue
		}
		f := classifyFailure(c.FailureMessage)
		f.ID, f.Time, f.Acked = c.ID, c.FailureTime, subs
		if f.Reason == ReasonExpired {
			f.Pending, f.PendingKnown = missing(in.Vertices, subs), true
		}
		in.Failures = append(in.Failures, f)
	}
	return in
}

// missing returns the subtasks of vertices that are not among acked.
func missing(vertices []Vertex, acked []Subtask) []SubtaskRef {
	got := map[SubtaskRef]bool{}
	for _, s := range acked {
		got[s.Ref()] = true
	}
	var out []SubtaskRef
	for _, v := range vertices {
		for i := range v.Parallelism {
			if r := (SubtaskRef{v.Index, i}); !got[r] {
				out = append(out, r)
			}
		}
	}
	return out
}

// tolerableFailureMessage starts the error of a job that exceeded its
// tolerable checkpoint failures (Flink's text, coordinator.FailJob).
const tolerableFailureMessage = "Exceeded checkpoint tolerable failure threshold."

var (
	expiredRE  = regexp.MustCompile(`^Checkpoint (\d+) of job .* expired before completing\.`)
	declinedRE = regexp.MustCompile(`^Decline checkpoint (\d+) by task (\d+)/(\d+) of job .*? at \d\S*\.(?: (.*))?$`)
	abortedRE  = regexp.MustCompile(`^Checkpoint (\d+) of job .* aborted: `)
	subsumedRE = regexp.MustCompile(`^Checkpoint (\d+) of job .* subsumed by completed checkpoint`)
	ioErrorRE  = regexp.MustCompile(`^Could not complete the pending checkpoint (\d+)\.`)
)

// classifyFailure derives a failure's reason, declining task and cause
// from the coordinator's message, as the statistics keep it (the
// message, a space, the cause).
func classifyFailure(msg string) Failure {
	f := Failure{Message: msg, Reason: "unknown"}
	switch {
	case expiredRE.MatchString(msg):
		f.Reason = ReasonExpired
	case declinedRE.MatchString(msg):
		m := declinedRE.FindStringSubmatch(msg)
		v, _ := strconv.Atoi(m[2])
		i, _ := strconv.Atoi(m[3])
		f.Task, f.Cause = &SubtaskRef{v, i}, m[4]
		f.Message = strings.TrimSuffix(msg, " "+m[4])
		f.Reason = declineReason(m[4])
	case subsumedRE.MatchString(msg):
		f.Reason = ReasonSubsumed
	case ioErrorRE.MatchString(msg):
		f.Reason = ReasonIOError
	case abortedRE.MatchString(msg):
		f.Reason = "job-" + map[bool]string{true: "canceled", false: "failing"}[strings.Contains(msg, "shutdown")]
	}
	return f
}

// declineReason guesses the reason of a decline from its cause, for
// statistics that keep only the text.
func declineReason(cause string) string {
	switch {
	case strings.HasPrefix(cause, "asynchronous phase of checkpoint"):
		return ReasonAsyncFailure
	case strings.Contains(cause, "before completing current checkpoint"),
		strings.Contains(cause, "before completing checkpoint"),
		strings.Contains(cause, "started before the channel state"):
		return ReasonSubsumed
	}
	return ReasonDeclined
}

// defaultBackend is state.backend.type's default.
func defaultBackend() string {
	if o, ok := config.Lookup("state.backend.type"); ok {
		return o.Default
	}
	return "hashmap"
}
