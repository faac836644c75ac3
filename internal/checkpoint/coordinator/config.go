package coordinator

import (
	"errors"
	"fmt"
	"time"
)

// Config configures a Coordinator. Field comments give the Flink key and the
// default that EnsureDefaults fills in.
type Config struct {
	// Interval between periodic triggers
	// (execution.checkpointing.interval). Default 0: periodic checkpoints
	// off; TriggerManual still works.
	Interval time.Duration
	// MinPause is the minimum time from the completion of one checkpoint to
	// the trigger of the next periodic one
	// (execution.checkpointing.min-pause). Default 0. As in Flink it is
	// measured from the last completion, not from aborts, and manual
	// triggers ignore it.
	MinPause time.Duration
	// MaxConcurrent pending checkpoints
	// (execution.checkpointing.max-concurrent-checkpoints). Default 1.
	// A checkpoint whose _metadata is being written is still pending.
	MaxConcurrent int
	// Timeout after which a pending checkpoint expires
	// (execution.checkpointing.timeout). Default 10m.
	Timeout time.Duration
	// TolerableFailures is how many consecutive counted failures the job
	// survives (execution.checkpointing.tolerable-failed-checkpoints).
	// Default 0: the first counted failure fails the job.
	TolerableFailures int
	// NumRetained completed checkpoints
	// (execution.checkpointing.num-retained). Default 1.
	NumRetained int
	// Tasks that must acknowledge every checkpoint. Required, no
	// duplicates.
	Tasks []TaskID
	// JobName appears in messages. Default "job".
	JobName string
	// Unaligned makes checkpoints unaligned
	// (execution.checkpointing.unaligned.enabled): their barriers overtake
	// in-flight data, which the tasks persist. The caller enables it only
	// for exactly-once checkpoints with MaxConcurrent 1.
	Unaligned bool
	// AlignedTimeout starts unaligned checkpoints aligned and switches them
	// to unaligned after this long since their trigger
	// (execution.checkpointing.aligned-checkpoint-timeout). 0: unaligned
	// from the start.
	AlignedTimeout time.Duration
}

// EnsureDefaults fills the zero fields that have a default.
func (c *Config) EnsureDefaults() {
	if c.MaxConcurrent == 0 {
		c.MaxConcurrent = 1
	}
	if c.Timeout == 0 {
		c.Timeout = 10 * time.Minute
	}
	if c.NumRetained == 0 {
		c.NumRetained = 1
	}
	if c.JobName == "" {
		c.JobName = "job"
	}
}

// Validate reports every problem at once (after EnsureDefaults).
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.Interval < 0 {
		bad("interval %s is negative", c.Interval)
	}
	if c.MinPause < 0 {
		bad("min-pause %s is negative", c.MinPause)
	}
	if c.MaxConcurrent < 1 {
		bad("max-concurrent-checkpoints %d is less than 1", c.MaxConcurrent)
	}
	if c.Timeout <= 0 {
		bad("timeout %s is not positive", c.Timeout)
	}
	if c.TolerableFailures < 0 {
		bad("tolerable-failed-checkpoints %d is negative", c.TolerableFailures)
	}
	if c.NumRetained < 1 {
		bad("num-retained %d is less than 1", c.NumRetained)
	}
	if len(c.Tasks) == 0 {
		bad("no tasks")
	}
	seen := make(map[TaskID]bool, len(c.Tasks))
	for _, t := range c.Tasks {
		if seen[t] {
			bad("task %s listed twice", t)
		}
		seen[t] = true
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("coordinator: invalid config: %w", errors.Join(errs...))
}
