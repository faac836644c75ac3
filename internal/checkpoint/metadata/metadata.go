// Package metadata is the content of a checkpoint's _metadata file: which
// operator subtask left which state, where its files are, and the
// checkpoint's statistics. The storage package frames it (magic, version,
// checksum); this package encodes the payload inside the frame as JSON, so
// an operator can read it with standard tools (see
// docs/checkpoint-layout.md).
//
// Small state (operator list state: source positions, sink transactions) is
// stored inline; keyed state and timers are data files referenced by
// storage.FileHandle, whose size and CRC-32C are verified on restore.
package metadata

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/weirstream/weir/internal/checkpoint/storage"
)

// Version is the payload schema version this build writes and reads.
const Version = 1

// Checkpoint is the payload of one _metadata file.
type Checkpoint struct {
	Version int    `json:"version"`
	Job     string `json:"job"`
	ID      int64  `json:"id"`
	// TriggerTime and CompletionTime are Unix milliseconds.
	// Savepoint is set for a savepoint: its file handles are relative to
	// the savepoint directory (a checkpoint's to its job directory), and
	// Format says how its keyed state was written.
	Savepoint bool   `json:"savepoint,omitempty"`
	Format    string `json:"format,omitempty"`
	// JobID is the id of the run that took the snapshot (32 hex digits).
	JobID          string `json:"jobId,omitempty"`
	TriggerTime    int64  `json:"triggerTime"`
	CompletionTime int64  `json:"completionTime"`
	// Bytes is the checkpointed data size: the bytes this checkpoint
	// uploaded (Flink's "Checkpointed Data Size").
	Bytes int64 `json:"bytes"`
	// FullBytes is the full size: the bytes of every file the checkpoint
	// references, shared ones included, and its inline state (Flink's
	// "Full Checkpoint Data Size"). For a full checkpoint it equals Bytes.
	FullBytes int64 `json:"fullBytes"`
	// UnalignedSubtasks is the number of subtasks that snapshotted
	// unaligned (0: an aligned checkpoint), PersistedBytes the in-flight
	// data they persisted (part of Bytes; Subtask.Channels says where).
	UnalignedSubtasks int   `json:"unalignedSubtasks,omitempty"`
	PersistedBytes    int64 `json:"persistedBytes,omitempty"`
	// Operators are sorted by UID.
	Operators []Operator `json:"operators"`
	// Tasks are every subtask's checkpoint statistics, by vertex and
	// subtask (absent in checkpoints of older versions): what `weir
	// doctor` reads for a job that no longer runs.
	Tasks []TaskStats `json:"tasks,omitempty"`
	// Graph is the job's vertices and their input edges when the
	// checkpoint was taken (absent in older versions), so that the doctor
	// can follow a late barrier upstream offline.
	Graph []GraphVertex `json:"graph,omitempty"`
}

// GraphVertex is one job vertex: its position (TaskStats.Vertex), name,
// parallelism and the vertices it reads.
type GraphVertex struct {
	Vertex      int    `json:"vertex"`
	Name        string `json:"name"`
	Parallelism int    `json:"parallelism"`
	// UIDs are the chained operators' uids (Operator.UID), head first.
	UIDs   []string     `json:"uids,omitempty"`
	Inputs []GraphInput `json:"inputs,omitempty"`
}

// GraphInput is an edge into a vertex: the producing vertex, and whether
// each subtask reads only the producer subtask of its own index (forward).
type GraphInput struct {
	Vertex  int  `json:"vertex"`
	Forward bool `json:"forward,omitempty"`
}

// TaskStats is one subtask's part of a checkpoint, as the coordinator saw
// its acknowledgement. Durations are in milliseconds.
type TaskStats struct {
	// Vertex is the job vertex's position in the job graph, Name its name
	// (the chained operators' names), Subtask the subtask index.
	Vertex  int    `json:"vertex"`
	Name    string `json:"name"`
	Subtask int    `json:"subtask"`
	// EndToEnd runs from the trigger to the acknowledgement; StartDelay
	// to the first barrier; Alignment is how long inputs were blocked;
	// Sync and Async are the snapshot phases.
	EndToEnd   int64 `json:"endToEndMs"`
	StartDelay int64 `json:"startDelayMs"`
	Alignment  int64 `json:"alignmentMs"`
	Sync       int64 `json:"syncMs"`
	Async      int64 `json:"asyncMs"`
	// Bytes is what the subtask uploaded, PersistedBytes the in-flight
	// data among it.
	Bytes          int64 `json:"bytes"`
	PersistedBytes int64 `json:"persistedBytes,omitempty"`
	Unaligned      bool  `json:"unaligned,omitempty"`
}

// Operator is the state of every subtask of one operator.
type Operator struct {
	UID            string `json:"uid"`
	Name           string `json:"name"`
	Parallelism    int    `json:"parallelism"`
	MaxParallelism int    `json:"maxParallelism"`
	// Subtasks are sorted by Index; a subtask without state may be absent.
	Subtasks []Subtask `json:"subtasks"`
}

// Subtask is the state of one operator subtask.
type Subtask struct {
	Index int `json:"index"`
	// KeyGroupStart and KeyGroupEnd are the inclusive key-group range of
	// the keyed state and timers.
	KeyGroupStart int `json:"keyGroupStart"`
	KeyGroupEnd   int `json:"keyGroupEnd"`
	// Lists are the operator list states, inline.
	Lists []List `json:"lists,omitempty"`
	// Keyed is the keyed state stream (state package format), if any.
	Keyed *storage.FileHandle `json:"keyed,omitempty"`
	// Timers is the timer file, if there are timers.
	Timers *storage.FileHandle `json:"timers,omitempty"`
	// Native is the keyed state as the backend's own files (incremental
	// checkpoints of the pebble backend), instead of Keyed.
	Native *NativeState `json:"native,omitempty"`
	// Changelog is set by the changelog state backend: the keyed state is
	// then Keyed or Native (the materialized part; nil when nothing was
	// materialized yet) plus the log records Changelog.From..To, replayed
	// in order on top of it. Timers are then the materialized timers.
	Changelog *ChangelogState `json:"changelog,omitempty"`
	// Pending holds changelog records restored from an earlier checkpoint
	// for states the job had not registered yet when this checkpoint was
	// taken (a segment file; replayed like the log, before it).
	Pending *LogSegment `json:"pending,omitempty"`
	// Schema says which codecs wrote the keyed state and the timer keys
	// (absent in checkpoints of older versions, and for operators without
	// keyed state); readers of the snapshot use it to decode entries
	// offline (`weir savepoint read`).
	Schema *Schema `json:"schema,omitempty"`
	// Channels is the in-flight data an unaligned checkpoint persisted at
	// the subtask (kept with the head operator of its task): the input
	// buffers its barriers overtook or that arrived before them, and the
	// output buffers queued when it forwarded them.
	Channels []ChannelState `json:"channels,omitempty"`
	// Refs are files under shared/ that the operator's own state refers
	// to: data a sink staged in checkpoint storage before committing it,
	// a source's spilled split. They may have been written for an earlier
	// checkpoint; the shared-state registry keeps each as long as a
	// retained checkpoint lists it, so a restore never finds it deleted by
	// retention (the failure of a long-open sink file whose checkpoint was
	// subsumed).
	Refs []storage.FileHandle `json:"refs,omitempty"`
}

// Schema describes the encoding of a subtask's keyed state, as the keyed
// runtime learnt it from the operator's state registrations.
type Schema struct {
	// Key is the codec of the keyed stream's keys (state entries and
	// timers); nil when the operator did not declare it.
	Key *CodecRef `json:"key,omitempty"`
	// States are the states registered since the subtask started, sorted
	// by name. A state restored but not registered again by the time of
	// the snapshot is missing.
	States []StateSchema `json:"states,omitempty"`
}

// StateSchema is the encoding of one keyed state.
type StateSchema struct {
	Name string `json:"name"`
	// Kind is "value" (also reducing and aggregating states), "list" or
	// "map".
	Kind string `json:"kind"`
	// Value is the codec of a value state's value, a list's elements or a
	// map's values; MapKey that of a map's keys; Namespace that of the
	// namespaces (windows), when the operator declared it.
	Value     CodecRef  `json:"value"`
	MapKey    *CodecRef `json:"mapKey,omitempty"`
	Namespace *CodecRef `json:"namespace,omitempty"`
}

// CodecRef names a codec: Codec is its name in the codec registry
// (codec.NameOf), Type the Go type of the values it encodes.
type CodecRef struct {
	Codec string `json:"codec"`
	Type  string `json:"type,omitempty"`
}

// ChannelState is the in-flight data of one network channel, persisted by
// an unaligned checkpoint: a range of a channel-state file holding a
// sequence of buffers (docs/checkpoint-layout.md). A channel's data is its
// input part (at the consumer) followed by its output part (at the
// producer); on restore the consumer side reads both, in that order,
// before any new data.
type ChannelState struct {
	// Edge names the edge: "<from uid>/<output>-><to uid>/<input>".
	Edge string `json:"edge"`
	// Output is set for buffers queued at the producer (output channel
	// state), unset for buffers received by the consumer (input).
	Output bool `json:"output,omitempty"`
	// Producer and Consumer are the channel's subtasks; Consumers is the
	// consumer operator's parallelism when the checkpoint was taken.
	Producer  int `json:"producer"`
	Consumer  int `json:"consumer"`
	Consumers int `json:"consumers"`
	// File holds the buffers at Offset..Offset+Length.
	File    storage.FileHandle `json:"file"`
	Offset  int64              `json:"offset"`
	Length  int64              `json:"length"`
	Buffers int                `json:"buffers"`
}

// ChangelogState is the non-materialized part of a changelog checkpoint.
type ChangelogState struct {
	// Materialization numbers the materialized part (0: none, the state
	// was empty when the log started).
	Materialization int64 `json:"materialization"`
	// MaterializedSeq is the last log record the materialized part holds.
	// From is MaterializedSeq+1 and To the last record of the checkpoint;
	// From > To means there is nothing to replay.
	MaterializedSeq int64 `json:"materializedSeq"`
	From            int64 `json:"from"`
	To              int64 `json:"to"`
	// Segments are the log files holding From..To, in order.
	Segments []LogSegment `json:"segments,omitempty"`
	// Earlier are log ranges of earlier runs of the subtask, replayed in
	// order before From..To: a run resumed from a changelog checkpoint
	// builds on its materialization and log instead of uploading them
	// again. Their sequence numbers are their own writers'.
	Earlier []LogRange `json:"earlier,omitempty"`
}

// LogRange is the records From..To of one log, in Segments.
type LogRange struct {
	From     int64        `json:"from"`
	To       int64        `json:"to"`
	Segments []LogSegment `json:"segments"`
}

// AllSegments returns the segments of Earlier and then the own ones.
func (c *ChangelogState) AllSegments() []LogSegment {
	var out []LogSegment
	for _, r := range c.Earlier {
		out = append(out, r.Segments...)
	}
	return append(out, c.Segments...)
}

// Records is the number of records to replay.
func (c *ChangelogState) Records() int64 {
	n := max(c.To-c.From+1, 0)
	for _, r := range c.Earlier {
		n += max(r.To-r.From+1, 0)
	}
	return n
}

// LogSegment is a changelog file and the records From..To it holds.
type LogSegment struct {
	File storage.FileHandle `json:"file"`
	From int64              `json:"from"`
	To   int64              `json:"to"`
}

// NativeState is a backend's database files and state registry.
type NativeState struct {
	// Registry is the backend's encoded state registry.
	Registry []byte `json:"registry"`
	// Files are the database files, by their local names.
	Files []NativeFile `json:"files"`
}

// NativeFile is one database file of a NativeState.
type NativeFile struct {
	// Name is the file's name in the database directory.
	Name   string             `json:"name"`
	Handle storage.FileHandle `json:"handle"`
	// Shared files live under shared/ and may be referenced by several
	// checkpoints; the others belong to this checkpoint's chk-<n>.
	Shared bool `json:"shared,omitempty"`
	// New is set when this checkpoint uploaded the file; otherwise it
	// references an upload of an earlier checkpoint.
	New bool `json:"new,omitempty"`
}

// List is one operator list state.
type List struct {
	Name string `json:"name"`
	// Union lists give every subtask all elements on restore; the others
	// are split.
	Union    bool     `json:"union,omitempty"`
	Elements [][]byte `json:"elements"`
}

// Files returns every data file the checkpoint references, each once.
func (c *Checkpoint) Files() []storage.FileHandle {
	var fs []storage.FileHandle
	seen := map[string]bool{}
	for _, op := range c.Operators {
		for _, st := range op.Subtasks {
			for _, f := range st.Files() {
				if !seen[f.Path] {
					seen[f.Path] = true
					fs = append(fs, f)
				}
			}
		}
	}
	return fs
}

// Files returns every data file the subtask's state references.
func (st *Subtask) Files() []storage.FileHandle {
	fs := append(st.SnapshotFiles(), st.Refs...)
	if st.Pending != nil {
		fs = append(fs, st.Pending.File)
	}
	for i, c := range st.Channels {
		if i == 0 || c.File.Path != st.Channels[i-1].File.Path {
			fs = append(fs, c.File)
		}
	}
	if st.Changelog != nil {
		for _, s := range st.Changelog.AllSegments() {
			fs = append(fs, s.File)
		}
	}
	return fs
}

// SnapshotFiles returns the files of the subtask's keyed-state snapshot:
// Keyed or Native, and Timers (for the changelog backend, its materialized
// part).
func (st *Subtask) SnapshotFiles() []storage.FileHandle {
	var fs []storage.FileHandle
	if st.Keyed != nil {
		fs = append(fs, *st.Keyed)
	}
	if st.Timers != nil {
		fs = append(fs, *st.Timers)
	}
	if st.Native != nil {
		for _, f := range st.Native.Files {
			fs = append(fs, f.Handle)
		}
	}
	return fs
}

// SharedFiles returns the files under shared/ the subtask references;
// newOnly keeps those a checkpoint's own upload created (incremental native
// files marked New), which are deleted if that checkpoint is aborted.
// Changelog segments and materialized files are never new: they are
// uploaded apart from checkpoints, and their writer deletes those no
// completed checkpoint referenced.
func (st *Subtask) SharedFiles(newOnly bool) []storage.FileHandle {
	var fs []storage.FileHandle
	if st.Native != nil {
		for _, f := range st.Native.Files {
			if isShared(f.Handle.Path) && (f.New || !newOnly) {
				fs = append(fs, f.Handle)
			}
		}
	}
	if newOnly {
		return fs
	}
	fs = append(fs, st.Refs...)
	for _, h := range []*storage.FileHandle{st.Keyed, st.Timers} {
		if h != nil && isShared(h.Path) {
			fs = append(fs, *h)
		}
	}
	if st.Pending != nil && isShared(st.Pending.File.Path) {
		fs = append(fs, st.Pending.File)
	}
	if st.Changelog != nil {
		for _, s := range st.Changelog.AllSegments() {
			if isShared(s.File.Path) {
				fs = append(fs, s.File)
			}
		}
	}
	return fs
}

func isShared(path string) bool { return strings.HasPrefix(path, storage.SharedDir+"/") }

// SharedFiles returns every file under shared/ the checkpoint references.
func (c *Checkpoint) SharedFiles() []storage.FileHandle {
	var fs []storage.FileHandle
	for _, op := range c.Operators {
		for _, st := range op.Subtasks {
			fs = append(fs, st.SharedFiles(false)...)
		}
	}
	return fs
}

// InlineBytes is the size of the state stored in the metadata itself.
func (st *Subtask) InlineBytes() int64 {
	var n int64
	for _, l := range st.Lists {
		for _, e := range l.Elements {
			n += int64(len(e))
		}
	}
	return n
}

// FullSize is the bytes of every referenced file plus the inline state.
func (c *Checkpoint) FullSize() int64 {
	var n int64
	seen := map[string]bool{} // a channel-state file holds several subtasks' parts
	for _, op := range c.Operators {
		for _, st := range op.Subtasks {
			n += st.InlineBytes()
			for _, f := range st.Files() {
				if !seen[f.Path] {
					seen[f.Path] = true
					n += f.Size
				}
			}
		}
	}
	return n
}

// Operator returns the operator with uid, and false if the checkpoint has
// no state for it.
func (c *Checkpoint) Operator(uid string) (*Operator, bool) {
	for i := range c.Operators {
		if c.Operators[i].UID == uid {
			return &c.Operators[i], true
		}
	}
	return nil, false
}

// Encode returns the payload bytes. Operators and subtasks are sorted first,
// so the same state always encodes the same way.
func Encode(c *Checkpoint) ([]byte, error) {
	c.Version = Version
	slices.SortFunc(c.Operators, func(a, b Operator) int {
		switch {
		case a.UID < b.UID:
			return -1
		case a.UID > b.UID:
			return 1
		}
		return 0
	})
	for _, op := range c.Operators {
		slices.SortFunc(op.Subtasks, func(a, b Subtask) int { return a.Index - b.Index })
	}
	return json.Marshal(c)
}

// ErrInvalid is wrapped by Decode's errors for payloads that do not
// describe a valid checkpoint.
var ErrInvalid = errors.New("metadata: invalid checkpoint metadata")

// Decode parses and validates a payload.
func Decode(payload []byte) (*Checkpoint, error) {
	var c Checkpoint
	if err := json.Unmarshal(payload, &c); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if c.Version != Version {
		return nil, fmt.Errorf("%w: payload version %d, this build reads version %d", ErrInvalid, c.Version, Version)
	}
	if err := c.validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return &c, nil
}

func (c *Checkpoint) validate() error {
	if c.ID < 1 {
		return fmt.Errorf("checkpoint id %d is not positive", c.ID)
	}
	seen := map[string]bool{}
	for _, op := range c.Operators {
		if op.UID == "" {
			return errors.New("an operator has no uid")
		}
		if seen[op.UID] {
			return fmt.Errorf("operator uid %q appears twice", op.UID)
		}
		seen[op.UID] = true
		if op.Parallelism < 1 || op.MaxParallelism < op.Parallelism {
			return fmt.Errorf("operator %q: parallelism %d, max parallelism %d", op.UID, op.Parallelism, op.MaxParallelism)
		}
		indexes := map[int]bool{}
		for _, st := range op.Subtasks {
			if indexes[st.Index] {
				return fmt.Errorf("operator %q: subtask %d appears twice", op.UID, st.Index)
			}
			indexes[st.Index] = true
			if st.Index < 0 || st.Index >= op.Parallelism {
				return fmt.Errorf("operator %q: subtask %d out of range 0..%d", op.UID, st.Index, op.Parallelism-1)
			}
			if st.KeyGroupStart < 0 || st.KeyGroupEnd >= op.MaxParallelism || st.KeyGroupStart > st.KeyGroupEnd+1 {
				return fmt.Errorf("operator %q subtask %d: key groups %d..%d outside 0..%d", op.UID, st.Index, st.KeyGroupStart, st.KeyGroupEnd, op.MaxParallelism-1)
			}
			for _, r := range st.Refs {
				if !isShared(r.Path) && !c.Savepoint {
					return fmt.Errorf("operator %q subtask %d: referenced file %q is not under %s/", op.UID, st.Index, r.Path, storage.SharedDir)
				}
			}
			if err := st.validateLog(); err != nil {
				return fmt.Errorf("operator %q subtask %d: %w", op.UID, st.Index, err)
			}
			for _, ch := range st.Channels {
				if ch.Edge == "" || ch.Producer < 0 || ch.Consumer < 0 || ch.Consumer >= ch.Consumers ||
					ch.Offset < 0 || ch.Length < 0 || ch.Length > ch.File.Size || ch.Offset > ch.File.Size-ch.Length || ch.Buffers < 0 {
					return fmt.Errorf("operator %q subtask %d: bad channel state %+v", op.UID, st.Index, ch)
				}
			}
		}
	}
	if err := c.validateTasks(); err != nil {
		return err
	}
	for _, v := range c.Graph {
		if v.Vertex < 0 || v.Vertex >= maxTaskIndex || v.Parallelism < 1 || v.Parallelism > maxTaskIndex {
			return fmt.Errorf("graph: vertex %d parallelism %d out of range", v.Vertex, v.Parallelism)
		}
		for _, in := range v.Inputs {
			if in.Vertex < 0 || in.Vertex >= v.Vertex {
				return fmt.Errorf("graph: vertex %d reads vertex %d, which is not before it", v.Vertex, in.Vertex)
			}
		}
	}
	return nil
}

// maxTaskIndex bounds vertex and subtask indexes in Tasks: no job has more
// vertices or a larger parallelism (32768 is the largest max parallelism).
const maxTaskIndex = 1 << 15

// validateTasks checks the per-subtask statistics: indexes in range, each
// subtask once, no negative duration or size.
func (c *Checkpoint) validateTasks() error {
	type key struct{ v, s int }
	seen := make(map[key]bool, len(c.Tasks))
	for _, t := range c.Tasks {
		if t.Vertex < 0 || t.Vertex >= maxTaskIndex || t.Subtask < 0 || t.Subtask >= maxTaskIndex {
			return fmt.Errorf("task statistics: vertex %d subtask %d out of range", t.Vertex, t.Subtask)
		}
		if seen[key{t.Vertex, t.Subtask}] {
			return fmt.Errorf("task statistics: vertex %d subtask %d appears twice", t.Vertex, t.Subtask)
		}
		seen[key{t.Vertex, t.Subtask}] = true
		if t.EndToEnd < 0 || t.StartDelay < 0 || t.Alignment < 0 || t.Sync < 0 || t.Async < 0 || t.Bytes < 0 || t.PersistedBytes < 0 {
			return fmt.Errorf("task statistics: vertex %d subtask %d has a negative duration or size", t.Vertex, t.Subtask)
		}
	}
	return nil
}

// validateLog checks the sequence ranges of the subtask's changelog parts:
// each range is empty (From = To+1) or From <= To with From >= 1, and every
// segment holds a non-empty range of positive sequence numbers.
func (st *Subtask) validateLog() error {
	check := func(what string, from, to int64, segs []LogSegment) error {
		if from < 1 || from > to+1 {
			return fmt.Errorf("%s: bad record range %d..%d", what, from, to)
		}
		for _, g := range segs {
			if g.From < 1 || g.From > g.To {
				return fmt.Errorf("%s: segment %s has a bad record range %d..%d", what, g.File.Path, g.From, g.To)
			}
		}
		return nil
	}
	if p := st.Pending; p != nil {
		if err := check("pending changelog records", p.From, p.To, []LogSegment{*p}); err != nil {
			return err
		}
	}
	if c := st.Changelog; c != nil {
		if c.MaterializedSeq < 0 || c.From != c.MaterializedSeq+1 {
			return fmt.Errorf("changelog: records from %d after materialized record %d", c.From, c.MaterializedSeq)
		}
		if err := check("changelog", c.From, c.To, c.Segments); err != nil {
			return err
		}
		for _, e := range c.Earlier {
			if err := check("earlier changelog", e.From, e.To, e.Segments); err != nil {
				return err
			}
		}
	}
	return nil
}

// ChangelogParts sums the parts of a changelog checkpoint over its
// subtasks: the bytes of the materialized state, of the log segments, and
// the number of log records to replay. ok is false when no subtask has a
// changelog.
func (c *Checkpoint) ChangelogParts() (materialized, log, records int64, ok bool) {
	for _, op := range c.Operators {
		for _, st := range op.Subtasks {
			if st.Changelog == nil {
				continue
			}
			ok = true
			for _, h := range st.SnapshotFiles() {
				materialized += h.Size
			}
			for _, s := range st.Changelog.AllSegments() {
				log += s.File.Size
			}
			records += st.Changelog.Records()
		}
	}
	return materialized, log, records, ok
}
