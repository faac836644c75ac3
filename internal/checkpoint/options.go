// Package checkpoint holds what travels with one snapshot from the
// coordinator's trigger, through the barriers, to every operator's
// snapshot: its kind (checkpoint or savepoint), the format the operators
// write, and what the subtasks may reuse. It is a leaf package: the
// coordinator, the network events, the barrier handler and the task layer
// all speak it.
//
// The subpackages are the checkpoint machinery: coordinator (when to
// trigger, complete, abort), barrier (alignment at a task), metadata (the
// _metadata payload), storage (where files live) and registry (when a
// shared file may be deleted).
package checkpoint

import (
	"fmt"
	"time"
)

// Kind says what a snapshot is for.
type Kind uint8

const (
	// KindCheckpoint is a periodic or manual checkpoint: owned by weir,
	// subsumed and deleted by it.
	KindCheckpoint Kind = iota
	// KindSavepoint is a user-owned snapshot: self-contained in a
	// directory of its own, always aligned, never subsumed, never deleted
	// by weir, sharing no file with checkpoints.
	KindSavepoint
)

// String returns "checkpoint" or "savepoint".
func (k Kind) String() string {
	switch k {
	case KindCheckpoint:
		return "checkpoint"
	case KindSavepoint:
		return "savepoint"
	}
	return fmt.Sprintf("Kind(%d)", k)
}

// Format says how operators write their keyed state.
type Format uint8

const (
	// FormatConfigured is what the job's configuration picks: native
	// incremental files with execution.checkpointing.incremental on the
	// pebble backend, the changelog with state.changelog.enabled, the
	// canonical stream otherwise.
	FormatConfigured Format = iota
	// FormatCanonical is the backend-independent key-group stream, for any
	// backend (Flink's canonical savepoint format).
	FormatCanonical
	// FormatNative is the backend's own files (pebble: SST files); a
	// backend without native files writes the canonical stream.
	FormatNative
)

// String returns "configured", "canonical" or "native".
func (f Format) String() string {
	switch f {
	case FormatConfigured:
		return "configured"
	case FormatCanonical:
		return "canonical"
	case FormatNative:
		return "native"
	}
	return fmt.Sprintf("Format(%d)", f)
}

// Options travel with a snapshot from its trigger to every operator.
type Options struct {
	Kind   Kind
	Format Format
	// LastCompleted is the newest checkpoint that had completed when this
	// one was triggered (0: none). A subtask reuses shared files only of
	// checkpoints it knows to be complete, and it knows at least this one
	// when it takes the snapshot, whether or not that checkpoint's
	// notification reached it first: the shared-state registry relies on
	// that bound to know which files an acknowledgement still to come may
	// reference.
	LastCompleted int64
	// Unaligned checkpoints send their barriers as priority events on the
	// edges that allow it (hash and rebalance; pointwise and broadcast
	// edges stay aligned, as in Flink): they overtake the data queued
	// ahead of them, and the tasks persist that data as channel state.
	// Savepoints are never unaligned.
	Unaligned bool
	// AlignedTimeout, with Unaligned, starts the checkpoint aligned: its
	// barriers keep their place in the data, and a task switches to
	// unaligned once AlignedTimeout has passed since the trigger, on the
	// input side (the barrier handler) and on the output side (a barrier
	// still queued is moved ahead of the data it waits behind). 0: unaligned
	// from the start (execution.checkpointing.aligned-checkpoint-timeout).
	AlignedTimeout time.Duration
	// Target is a savepoint's directory: a path or URL (KindSavepoint).
	Target string
	// Synchronous marks a stop-with-savepoint: every subtask stops
	// processing input and timers once it took its snapshot, finishes when
	// the savepoint completes (two-phase-commit sinks commit it first), and
	// resumes if it is aborted. Drain, with it, ends the sources first:
	// they emit the final watermark, so every event-time timer fires and
	// every operator's end of input runs before the snapshot.
	Synchronous, Drain bool
}

// Timeoutable reports whether the checkpoint starts aligned and may switch
// to unaligned: Unaligned with an AlignedTimeout.
func (o Options) Timeoutable() bool { return o.Unaligned && o.AlignedTimeout > 0 }

// String renders the options for logs and test scripts.
func (o Options) String() string {
	u := ""
	if o.Unaligned {
		u = " unaligned"
		if o.AlignedTimeout > 0 {
			u += fmt.Sprintf(" after %s aligned", o.AlignedTimeout)
		}
	}
	if o.Synchronous {
		u += " synchronous"
		if o.Drain {
			u += " drain"
		}
	}
	if o.Target != "" {
		u += " target=" + o.Target
	}
	return fmt.Sprintf("%s format=%s last-completed=%d%s", o.Kind, o.Format, o.LastCompleted, u)
}
