package cluster

import (
	"time"

	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/task"
)

// JobSpec is what a task manager needs to build the job the job manager
// runs: the job's name in the binary's registry, its flags, and the
// configuration (key=value items, applied in order).
type JobSpec struct {
	Job    string   `json:"job"`
	Args   []string `json:"args,omitempty"`
	Config []string `json:"config,omitempty"`
}

// toJM is a message from a task manager to the job manager; exactly one
// field is set.
type toJM struct {
	Hello        *helloMsg     `json:"hello,omitempty"`
	Register     *registerMsg  `json:"register,omitempty"`
	Heartbeat    bool          `json:"heartbeat,omitempty"`
	Deployed     *deployedMsg  `json:"deployed,omitempty"`
	Ack          *ackMsg       `json:"ack,omitempty"`
	SourcesEnded *attemptMsg   `json:"sourcesEnded,omitempty"`
	Counts       *countsMsg    `json:"counts,omitempty"`
	Ended        *partEndedMsg `json:"ended,omitempty"`
}

// toTM is a message from the job manager to a task manager; exactly one
// field is set.
type toTM struct {
	Challenge  *challengeMsg  `json:"challenge,omitempty"`
	Registered *registeredMsg `json:"registered,omitempty"`
	Heartbeat  bool           `json:"heartbeat,omitempty"`
	Deploy     *deployMsg     `json:"deploy,omitempty"`
	Cancel     *cancelMsg     `json:"cancel,omitempty"`
	Trigger    *triggerMsg    `json:"trigger,omitempty"`
	Notify     *notifyMsg     `json:"notify,omitempty"`
	// Release ends an attempt whose every part ended: its data channels
	// may go (a finished part's last buffers and end-of-partition events
	// may still have been on their way to consumers elsewhere until then).
	Release *attemptMsg `json:"release,omitempty"`
}

// helloMsg opens a session: the task manager's nonce, which the job
// manager's proof covers.
type helloMsg struct {
	Nonce []byte `json:"nonce"`
}

// challengeMsg answers a hello: the job manager's nonce and its proof of
// the cluster token (proofOf(token, roleJobManager, tm nonce, jm nonce)).
type challengeMsg struct {
	Nonce []byte `json:"nonce"`
	Proof []byte `json:"proof"`
}

type registerMsg struct {
	// Name is the task manager's name for logs (host:pid by default).
	Name     string `json:"name"`
	Slots    int    `json:"slots"`
	DataAddr string `json:"dataAddr"`
	// Binary identifies the executable (BinaryHash): every process of a
	// cluster must run the same job code.
	Binary string `json:"binary"`
	// Proof is the task manager's proof of the cluster token,
	// proofOf(token, roleTaskManager, jm nonce, tm nonce): the token
	// itself never crosses the wire.
	Proof []byte `json:"proof"`
}

type registeredMsg struct {
	ID string `json:"id"`
}

// deployMsg deploys the subtasks placed in one task manager's slots for
// one attempt.
type deployMsg struct {
	Attempt   uint64  `json:"attempt"`
	Spec      JobSpec `json:"spec"`
	GraphHash string  `json:"graphHash"`
	// Slots are the data addresses of the attempt's slots: subtask i of
	// every vertex runs in slot i (slot sharing).
	Slots []string `json:"slots"`
	// Self is this task manager's data address.
	Self string      `json:"self"`
	Task taskOptions `json:"task"`
}

// taskOptions are the fields of task.Options the runner sets per attempt,
// in a form that crosses the network (storages by location).
type taskOptions struct {
	RunID           string `json:"runId"`
	Checkpoints     string `json:"checkpoints,omitempty"`
	CheckpointJob   string `json:"checkpointJob,omitempty"`
	FinalCheckpoint bool   `json:"finalCheckpoint,omitempty"`
	// CheckpointInterval is in nanoseconds.
	CheckpointInterval time.Duration `json:"checkpointInterval,omitempty"`
	// Restore is the encoded _metadata of the snapshot to restore.
	Restore               []byte `json:"restore,omitempty"`
	RestoreStorage        string `json:"restoreStorage,omitempty"`
	RestoreJob            string `json:"restoreJob,omitempty"`
	RestoreOwned          bool   `json:"restoreOwned,omitempty"`
	AllowNonRestoredState bool   `json:"allowNonRestoredState,omitempty"`
	SkipChannelState      bool   `json:"skipChannelState,omitempty"`
	CountRecords          bool   `json:"countRecords,omitempty"`
	JobID                 string `json:"jobId,omitempty"`
}

type deployedMsg struct {
	Attempt uint64          `json:"attempt"`
	Tasks   []task.TaskInfo `json:"tasks"`
	// Err is why the deployment failed; empty on success.
	Err string `json:"err,omitempty"`
	// NotRestartable: the failure would repeat on every attempt (the
	// job graph differs, the restored state does not fit).
	NotRestartable bool `json:"notRestartable,omitempty"`
}

type ackMsg struct {
	Attempt uint64   `json:"attempt"`
	Ack     task.Ack `json:"ack"`
}

type attemptMsg struct {
	Attempt uint64 `json:"attempt"`
}

type countsMsg struct {
	Attempt uint64 `json:"attempt"`
	In      int64  `json:"in"`
	Out     int64  `json:"out"`
	// RestoreStore and RestoreLocal are the bytes of keyed state the
	// part's restores read from checkpoint storage and from local copies.
	RestoreStore int64 `json:"restoreStore,omitempty"`
	RestoreLocal int64 `json:"restoreLocal,omitempty"`
	// Tasks and Groups are the metrics of the part's subtasks
	// (metrics.go).
	Tasks  []task.TaskMetrics `json:"tasks,omitempty"`
	Groups []metricGroup      `json:"groups,omitempty"`
}

type partEndedMsg struct {
	Attempt uint64 `json:"attempt"`
	// Err is the part's failure; empty when it finished.
	Err      string `json:"err,omitempty"`
	Canceled bool   `json:"canceled,omitempty"`
	// Class names what kind of failure Err is, for the job manager's
	// restart decision: "restore-data" (the checkpoint's data is damaged,
	// task.ErrRestoreData), "not-restartable", or empty.
	Class string `json:"class,omitempty"`
}

type cancelMsg struct {
	Attempt uint64 `json:"attempt"`
	Reason  string `json:"reason"`
}

type triggerMsg struct {
	Attempt uint64             `json:"attempt"`
	ID      int64              `json:"id"`
	Time    int64              `json:"time"`
	Options checkpoint.Options `json:"options"`
	// Savepoint is set for a savepoint: the location of its storage and
	// its directory there.
	Savepoint *targetMsg `json:"savepoint,omitempty"`
}

type targetMsg struct {
	Storage string `json:"storage"`
	Dir     string `json:"dir"`
}

type notifyMsg struct {
	Attempt  uint64 `json:"attempt"`
	ID       int64  `json:"id"`
	Complete bool   `json:"complete"`
	Final    bool   `json:"final,omitempty"`
}
