package coordinator

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/weirstream/weir/internal/checkpoint"
)

// Action is something the driver must do. The concrete types are Trigger,
// WriteMetadata, Completed, NotifyComplete, Subsume, Aborted, CleanupFiles,
// NotifyAborted, DiscardState and FailJob; switch on them with a type
// switch. Every action prints as one line (Completed adds indented lines per
// task) so scripts can show them.
type Action interface {
	fmt.Stringer
	isAction()
}

// Trigger asks the driver to start checkpoint ID: inject barrier ID with
// this Timestamp at every source task.
type Trigger struct {
	ID        int64
	Timestamp time.Time
	// Periodic is false for TriggerManual checkpoints.
	Periodic bool
	// Options travel with the barriers to every operator's snapshot.
	Options checkpoint.Options
}

// WriteMetadata asks the driver to write chk-ID/_metadata durably from the
// handles of every task, then call MetadataWritten (or MetadataFailed). The
// checkpoint is not complete before that.
type WriteMetadata[H any] struct {
	ID      int64
	Handles map[TaskID]H
	Stats   Stats
}

// Completed reports that checkpoint ID is complete: its _metadata is
// durable. Message is Flink's "Completed checkpoint" log line.
type Completed struct {
	ID        int64
	Triggered time.Time
	// Duration runs from the trigger to MetadataWritten.
	Duration time.Duration
	Periodic bool
	// Savepoint is set for a savepoint: it is not retained, subsumes
	// nothing, and only a synchronous one (stop-with-savepoint) is
	// followed by NotifyComplete.
	Savepoint bool
	Stats     Stats
	Message   string
}

// NotifyComplete asks the driver to tell every task that checkpoint ID is
// complete (notifyCheckpointComplete: two-phase-commit sinks commit).
type NotifyComplete struct{ ID int64 }

// Subsume lists completed checkpoints that fell out of Config.NumRetained,
// oldest first. The driver deletes them (a shared file only once no
// retained checkpoint references it).
type Subsume struct{ IDs []int64 }

// Aborted reports that pending checkpoint ID was aborted. Message is the
// Flink log text; Cause the error behind it, if any. Every Aborted is
// followed by CleanupFiles and NotifyAborted for the same ID.
type Aborted struct {
	ID      int64
	Reason  Reason
	Message string
	Cause   error
	// Counted reports whether the abort counted against
	// Config.TolerableFailures.
	Counted bool
}

// CleanupFiles asks the driver to delete what checkpoint ID uploaded
// (chk-ID and the files only it references), after any in-flight write for
// ID (including its _metadata) has ended.
type CleanupFiles struct{ ID int64 }

// NotifyAborted asks the driver to tell every task that checkpoint ID was
// aborted (notifyCheckpointAborted).
type NotifyAborted struct{ ID int64 }

// DiscardState asks the driver to discard the state handle of an
// acknowledgement the coordinator did not take: for a checkpoint that is no
// longer pending (a late ack after expiry is common) or never existed, or
// from an unknown task. Message is the Flink log text.
type DiscardState[H any] struct {
	ID      int64
	Task    TaskID
	Handle  H
	Message string
}

// FailJob asks the driver to fail the job over (restart strategy). The
// coordinator has already suspended itself: it aborted every pending
// checkpoint (ReasonJobFailing) and ignores further input.
type FailJob struct {
	// Message starts with Flink's "Exceeded checkpoint tolerable failure
	// threshold." and names the latest failure.
	Message string
	// ID and Reason are those of the abort that crossed the threshold.
	ID     int64
	Reason Reason
}

func (Trigger) isAction()          {}
func (WriteMetadata[H]) isAction() {}
func (Completed) isAction()        {}
func (NotifyComplete) isAction()   {}
func (Subsume) isAction()          {}
func (Aborted) isAction()          {}
func (CleanupFiles) isAction()     {}
func (NotifyAborted) isAction()    {}
func (DiscardState[H]) isAction()  {}
func (FailJob) isAction()          {}

func fmtTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func (a Trigger) String() string {
	kind := "manual"
	if a.Periodic {
		kind = "periodic"
	}
	if a.Options.Unaligned {
		kind += " unaligned"
	}
	if a.Options.Kind == checkpoint.KindSavepoint {
		kind = "savepoint format=" + a.Options.Format.String()
		if a.Options.Synchronous {
			kind += " synchronous"
		}
		if a.Options.Drain {
			kind += " drain"
		}
	}
	return fmt.Sprintf("trigger id=%d ts=%s %s", a.ID, fmtTime(a.Timestamp), kind)
}

func (a WriteMetadata[H]) String() string {
	tasks := make([]TaskID, 0, len(a.Handles))
	for t := range a.Handles {
		tasks = append(tasks, t)
	}
	sortTasks(tasks)
	var sb strings.Builder
	fmt.Fprintf(&sb, "write-metadata id=%d handles=[", a.ID)
	for i, t := range tasks {
		if i > 0 {
			sb.WriteByte(' ')
		}
		fmt.Fprintf(&sb, "%s:%v", t, a.Handles[t])
	}
	sb.WriteString("]")
	return sb.String()
}

func (a Completed) String() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "completed id=%d duration=%s %s\n  %s", a.ID, a.Duration, a.Stats.summary(), a.Message)
	for _, ts := range a.Stats.Tasks {
		fmt.Fprintf(&sb, "\n  %s", ts)
	}
	return sb.String()
}

func (a NotifyComplete) String() string { return fmt.Sprintf("notify-complete id=%d", a.ID) }
func (a Subsume) String() string        { return fmt.Sprintf("subsume ids=%v", a.IDs) }

func (a Aborted) String() string {
	s := fmt.Sprintf("aborted id=%d reason=%s", a.ID, a.Reason)
	if a.Counted {
		s += " counted"
	}
	s += ": " + a.Message
	if a.Cause != nil {
		s += " (cause: " + a.Cause.Error() + ")"
	}
	return s
}

func (a CleanupFiles) String() string  { return fmt.Sprintf("cleanup-files id=%d", a.ID) }
func (a NotifyAborted) String() string { return fmt.Sprintf("notify-aborted id=%d", a.ID) }

func (a DiscardState[H]) String() string {
	return fmt.Sprintf("discard-state id=%d task=%s handle=%v: %s", a.ID, a.Task, a.Handle, a.Message)
}

func (a FailJob) String() string {
	return fmt.Sprintf("fail-job id=%d reason=%s: %s", a.ID, a.Reason, a.Message)
}

// TaskStats are what a task reports with its acknowledgement (Flink's
// SubtaskStateStats).
type TaskStats struct {
	// StartDelay: from the trigger until the first barrier reached the task.
	StartDelay time.Duration
	// Alignment: from the first to the last barrier at the task's inputs.
	Alignment time.Duration
	// Sync and Async: the two snapshot phases.
	Sync  time.Duration
	Async time.Duration
	// Bytes: the state size the task reports (checkpointed data size),
	// in-flight data included.
	Bytes int64
	// Unaligned: the task's snapshot was taken unaligned (a priority
	// barrier triggered it before every input delivered its barrier).
	Unaligned bool
	// PersistedBytes: the in-flight data (channel state) the task
	// persisted, input and output; part of Bytes.
	PersistedBytes int64
}

// TaskReport is one task's acknowledgement as the coordinator saw it.
type TaskReport struct {
	Task  TaskID
	Stats TaskStats
	// EndToEnd runs from the trigger to the acknowledgement's arrival.
	EndToEnd time.Duration
}

func (r TaskReport) String() string {
	return fmt.Sprintf("%s e2e=%s start-delay=%s alignment=%s sync=%s async=%s bytes=%d",
		r.Task, r.EndToEnd, r.Stats.StartDelay, r.Stats.Alignment, r.Stats.Sync, r.Stats.Async, r.Stats.Bytes)
}

// Max is the largest value of one statistic and the task that reported it
// (the first task in TaskID order on ties).
type Max struct {
	Task TaskID
	D    time.Duration
}

func (m Max) String() string { return fmt.Sprintf("%s@%s", m.D, m.Task) }

// Stats summarise a fully acknowledged checkpoint: per task, sorted by
// TaskID, and the maxima that explain a slow checkpoint.
type Stats struct {
	Tasks []TaskReport
	Bytes int64
	// PersistedBytes is the in-flight data all tasks persisted, and
	// UnalignedTasks the number of tasks that snapshotted unaligned: a
	// checkpoint is unaligned if any task was.
	PersistedBytes int64
	UnalignedTasks int
	MaxStartDelay  Max
	MaxAlignment   Max
	MaxSync        Max
	MaxAsync       Max
	MaxEndToEnd    Max
}

func (s Stats) summary() string {
	return fmt.Sprintf("bytes=%d max-e2e=%s max-start-delay=%s max-alignment=%s max-sync=%s max-async=%s",
		s.Bytes, s.MaxEndToEnd, s.MaxStartDelay, s.MaxAlignment, s.MaxSync, s.MaxAsync)
}

func buildStats(reports []TaskReport) Stats {
	sort.Slice(reports, func(i, j int) bool { return reports[i].Task.less(reports[j].Task) })
	s := Stats{Tasks: reports}
	upd := func(m *Max, t TaskID, d time.Duration, first bool) {
		if first || d > m.D {
			*m = Max{Task: t, D: d}
		}
	}
	for i, r := range reports {
		first := i == 0
		s.Bytes += r.Stats.Bytes
		s.PersistedBytes += r.Stats.PersistedBytes
		if r.Stats.Unaligned {
			s.UnalignedTasks++
		}
		upd(&s.MaxStartDelay, r.Task, r.Stats.StartDelay, first)
		upd(&s.MaxAlignment, r.Task, r.Stats.Alignment, first)
		upd(&s.MaxSync, r.Task, r.Stats.Sync, first)
		upd(&s.MaxAsync, r.Task, r.Stats.Async, first)
		upd(&s.MaxEndToEnd, r.Task, r.EndToEnd, first)
	}
	return s
}
