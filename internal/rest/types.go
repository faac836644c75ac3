package rest

// The JSON bodies of the API, with Apache Flink's field names. Times are
// Unix milliseconds, durations milliseconds and sizes bytes, as in Flink;
// -1 stands for "not yet" (an end time while the job runs).

// ErrorResponse is the body of every error answer.
type ErrorResponse struct {
	Errors []string `json:"errors"`
}

// DashboardConfig is GET /config: what Flink's dashboard needs to start.
type DashboardConfig struct {
	// RefreshInterval is how often the dashboard polls, in ms.
	RefreshInterval int64 `json:"refresh-interval"`
	// TimezoneName and TimezoneOffset (ms east of UTC) are the server's.
	TimezoneName   string `json:"timezone-name"`
	TimezoneOffset int64  `json:"timezone-offset"`
	// FlinkVersion and WeirVersion are both weir's version.
	FlinkVersion  string            `json:"flink-version"`
	FlinkRevision string            `json:"flink-revision"`
	WeirVersion   string            `json:"weir-version"`
	Features      DashboardFeatures `json:"features"`
}

// DashboardFeatures are the dashboard's optional features; weir has only
// cancel.
type DashboardFeatures struct {
	WebSubmit  bool `json:"web-submit"`
	WebCancel  bool `json:"web-cancel"`
	WebRescale bool `json:"web-rescale"`
	WebHistory bool `json:"web-history"`
}

// ClusterOverview is GET /overview. A weir process is one task manager
// whose slots are the jobs' subtasks.
type ClusterOverview struct {
	TaskManagers   int `json:"taskmanagers"`
	SlotsTotal     int `json:"slots-total"`
	SlotsAvailable int `json:"slots-available"`
	// JobsRunning counts the jobs that have not ended (initializing,
	// restarting and cancelling ones too).
	JobsRunning   int    `json:"jobs-running"`
	JobsFinished  int    `json:"jobs-finished"`
	JobsCancelled int    `json:"jobs-cancelled"`
	JobsFailed    int    `json:"jobs-failed"`
	FlinkVersion  string `json:"flink-version"`
	FlinkCommit   string `json:"flink-commit"`
	WeirVersion   string `json:"weir-version"`
}

// JobIDsWithStatus is GET /jobs.
type JobIDsWithStatus struct {
	Jobs []JobIDWithStatus `json:"jobs"`
}

// JobIDWithStatus is one job of GET /jobs.
type JobIDWithStatus struct {
	ID     string `json:"id"`
	Status string `json:"status"`
}

// MultipleJobsDetails is GET /jobs/overview.
type MultipleJobsDetails struct {
	Jobs []JobOverview `json:"jobs"`
}

// JobOverview is one job of GET /jobs/overview.
type JobOverview struct {
	JID   string `json:"jid"`
	Name  string `json:"name"`
	State string `json:"state"`
	// StartTime is when the job was submitted; EndTime when it ended, -1
	// while it runs; Duration the time in between (or until now).
	StartTime        int64 `json:"start-time"`
	EndTime          int64 `json:"end-time"`
	Duration         int64 `json:"duration"`
	LastModification int64 `json:"last-modification"`
	// Tasks counts the job's subtasks by execution state.
	Tasks TaskCounts `json:"tasks"`
}

// TaskCounts counts subtasks by execution state, with the lower-case keys
// of GET /jobs/overview.
type TaskCounts struct {
	Total        int `json:"total"`
	Created      int `json:"created"`
	Scheduled    int `json:"scheduled"`
	Deploying    int `json:"deploying"`
	Running      int `json:"running"`
	Finished     int `json:"finished"`
	Canceling    int `json:"canceling"`
	Canceled     int `json:"canceled"`
	Failed       int `json:"failed"`
	Reconciling  int `json:"reconciling"`
	Initializing int `json:"initializing"`
}

// ExecutionStates are Flink's subtask states, the keys of the upper-case
// task counts of GET /jobs/{jobid} (JobVertex.Tasks, JobDetails.StatusCounts).
var ExecutionStates = []string{"CREATED", "SCHEDULED", "DEPLOYING", "RUNNING", "FINISHED", "CANCELING",
	"CANCELED", "FAILED", "RECONCILING", "INITIALIZING"}

// JobStatuses are Flink's job states, the keys of JobDetails.Timestamps.
var JobStatuses = []string{"INITIALIZING", "CREATED", "RUNNING", "FAILING", "FAILED", "CANCELLING",
	"CANCELED", "FINISHED", "RESTARTING", "SUSPENDED", "RECONCILING"}

// JobDetails is GET /jobs/{jobid}.
type JobDetails struct {
	JID         string `json:"jid"`
	Name        string `json:"name"`
	IsStoppable bool   `json:"isStoppable"`
	State       string `json:"state"`
	// JobType is "STREAMING".
	JobType   string `json:"job-type"`
	StartTime int64  `json:"start-time"`
	EndTime   int64  `json:"end-time"`
	Duration  int64  `json:"duration"`
	// MaxParallelism is the largest of the vertices' max parallelism.
	MaxParallelism int   `json:"maxParallelism"`
	Now            int64 `json:"now"`
	// Timestamps holds, for every one of JobStatuses, when the job last
	// entered it (0: never).
	Timestamps map[string]int64 `json:"timestamps"`
	Vertices   []JobVertex      `json:"vertices"`
	// StatusCounts counts the vertices by execution state (every one of
	// ExecutionStates is a key).
	StatusCounts map[string]int `json:"status-counts"`
	Plan         JobPlan        `json:"plan"`
}

// JobVertex is one vertex of GET /jobs/{jobid}.
type JobVertex struct {
	ID             string `json:"id"`
	Name           string `json:"name"`
	MaxParallelism int    `json:"maxParallelism"`
	Parallelism    int    `json:"parallelism"`
	Status         string `json:"status"`
	StartTime      int64  `json:"start-time"`
	EndTime        int64  `json:"end-time"`
	Duration       int64  `json:"duration"`
	// Tasks counts the vertex's subtasks by execution state (every one of
	// ExecutionStates is a key).
	Tasks   map[string]int `json:"tasks"`
	Metrics IOMetrics      `json:"metrics"`
}

// IOMetrics are a vertex's or subtask's records and bytes in and out and
// its time split. The *-complete flags say whether every subtask reported
// the figure. The accumulated times are Flink's cumulative
// accumulatedBusyTime, accumulatedIdleTime and accumulatedBackpressuredTime
// metrics (ms) when the registry has them; otherwise the subtasks' current
// busy, idle and backpressured ms/s rates, summed (see docs/rest.md).
type IOMetrics struct {
	ReadBytes                    int64   `json:"read-bytes"`
	ReadBytesComplete            bool    `json:"read-bytes-complete"`
	WriteBytes                   int64   `json:"write-bytes"`
	WriteBytesComplete           bool    `json:"write-bytes-complete"`
	ReadRecords                  int64   `json:"read-records"`
	ReadRecordsComplete          bool    `json:"read-records-complete"`
	WriteRecords                 int64   `json:"write-records"`
	WriteRecordsComplete         bool    `json:"write-records-complete"`
	AccumulatedBackpressuredTime int64   `json:"accumulated-backpressured-time"`
	AccumulatedIdleTime          int64   `json:"accumulated-idle-time"`
	AccumulatedBusyTime          float64 `json:"accumulated-busy-time"`
}

// JobPlan is the job graph as Flink's dashboard draws it.
type JobPlan struct {
	JID  string `json:"jid"`
	Name string `json:"name"`
	// Type is "STREAMING".
	Type  string     `json:"type"`
	Nodes []PlanNode `json:"nodes"`
}

// PlanNode is one vertex of the plan.
type PlanNode struct {
	ID          string `json:"id"`
	Parallelism int    `json:"parallelism"`
	// Operator and OperatorStrategy are empty, as in Flink's streaming
	// jobs; Description names the chained operators, head first.
	Operator         string      `json:"operator"`
	OperatorStrategy string      `json:"operator_strategy"`
	Description      string      `json:"description"`
	Inputs           []PlanInput `json:"inputs,omitempty"`
	// OptimizerProperties is empty.
	OptimizerProperties map[string]any `json:"optimizer_properties"`
}

// PlanInput is an edge into a plan node.
type PlanInput struct {
	Num int `json:"num"`
	// ID is the producing vertex's id.
	ID string `json:"id"`
	// ShipStrategy is the partitioner (FORWARD, HASH, REBALANCE, RESCALE,
	// BROADCAST); Exchange is "pipelined_bounded".
	ShipStrategy string `json:"ship_strategy"`
	Exchange     string `json:"exchange"`
}

// JobStatusInfo is GET /jobs/{jobid}/status.
type JobStatusInfo struct {
	Status string `json:"status"`
}

// JobConfig is GET /jobs/{jobid}/config.
type JobConfig struct {
	JID             string          `json:"jid"`
	Name            string          `json:"name"`
	ExecutionConfig ExecutionConfig `json:"execution-config"`
}

// ExecutionConfig is the execution part of JobConfig.
type ExecutionConfig struct {
	// ExecutionMode is "PIPELINED".
	ExecutionMode string `json:"execution-mode"`
	// RestartStrategy is restart-strategy.type ("default" when unset).
	RestartStrategy string `json:"restart-strategy"`
	JobParallelism  int    `json:"job-parallelism"`
	ObjectReuseMode bool   `json:"object-reuse-mode"`
	// UserConfig is the job's effective configuration; the values of
	// sensitive keys (tokens, passwords, secrets) read "******".
	UserConfig map[string]string `json:"user-config"`
}

// JobExceptions is GET /jobs/{jobid}/exceptions: the older fields
// (root-exception, all-exceptions) and the exception history.
type JobExceptions struct {
	// RootException is the last failure's message, Timestamp its time;
	// both null if the job never failed.
	RootException *string `json:"root-exception"`
	Timestamp     *int64  `json:"timestamp"`
	// AllExceptions is empty: weir reports failures per job, not per
	// subtask.
	AllExceptions    []ExecutionException `json:"all-exceptions"`
	Truncated        bool                 `json:"truncated"`
	ExceptionHistory ExceptionHistory     `json:"exceptionHistory"`
}

// ExecutionException is a subtask's failure (Flink's all-exceptions).
type ExecutionException struct {
	Exception     string `json:"exception"`
	Task          string `json:"task"`
	Location      string `json:"location"`
	Timestamp     int64  `json:"timestamp"`
	TaskManagerID string `json:"taskManagerId"`
}

// ExceptionHistory is the job's failures, newest first.
type ExceptionHistory struct {
	Entries   []ExceptionEntry `json:"entries"`
	Truncated bool             `json:"truncated"`
}

// ExceptionEntry is one failure: a restart's cause or the final error.
type ExceptionEntry struct {
	// ExceptionName is the message's first line, Stacktrace the whole
	// message (Go errors have no class or stack).
	ExceptionName string `json:"exceptionName"`
	Stacktrace    string `json:"stacktrace"`
	Timestamp     int64  `json:"timestamp"`
	// TaskName, Endpoint and TaskManagerID are null: failures are the
	// job's.
	TaskName             *string           `json:"taskName"`
	Endpoint             *string           `json:"endpoint"`
	TaskManagerID        *string           `json:"taskManagerId"`
	FailureLabels        map[string]string `json:"failureLabels"`
	ConcurrentExceptions []ExceptionEntry  `json:"concurrentExceptions"`
}

// CheckpointingStatistics is GET /jobs/{jobid}/checkpoints.
type CheckpointingStatistics struct {
	Counts  CheckpointCounts  `json:"counts"`
	Summary CheckpointSummary `json:"summary"`
	Latest  LatestCheckpoints `json:"latest"`
	// History is the latest checkpoints, newest first.
	History []CheckpointStatistics `json:"history"`
}

// CheckpointCounts are the checkpoint counts since the job started.
type CheckpointCounts struct {
	Restored   int64 `json:"restored"`
	Total      int64 `json:"total"`
	InProgress int64 `json:"in_progress"`
	Completed  int64 `json:"completed"`
	Failed     int64 `json:"failed"`
}

// CheckpointSummary summarises the completed checkpoints. AlignmentBuffered
// and ProcessedData are always 0 (Flink deprecated the first; weir does
// not measure the second).
type CheckpointSummary struct {
	CheckpointedSize  StatsSummary `json:"checkpointed_size"`
	StateSize         StatsSummary `json:"state_size"`
	EndToEndDuration  StatsSummary `json:"end_to_end_duration"`
	AlignmentBuffered StatsSummary `json:"alignment_buffered"`
	ProcessedData     StatsSummary `json:"processed_data"`
	PersistedData     StatsSummary `json:"persisted_data"`
}

// StatsSummary is the minimum, maximum, mean and quantiles of a figure,
// all 0 with no values.
type StatsSummary struct {
	Min  int64   `json:"min"`
	Max  int64   `json:"max"`
	Avg  int64   `json:"avg"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P95  float64 `json:"p95"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p999"`
}

// LatestCheckpoints are the newest completed checkpoint, savepoint, failed
// checkpoint and restore; each null if there is none.
type LatestCheckpoints struct {
	Completed *CheckpointStatistics `json:"completed"`
	Savepoint *CheckpointStatistics `json:"savepoint"`
	Failed    *CheckpointStatistics `json:"failed"`
	Restored  *RestoredCheckpoint   `json:"restored"`
}

// RestoredCheckpoint is the checkpoint the job last (re)started from.
type RestoredCheckpoint struct {
	ID               int64  `json:"id"`
	RestoreTimestamp int64  `json:"restore_timestamp"`
	IsSavepoint      bool   `json:"is_savepoint"`
	ExternalPath     string `json:"external_path"`
}

// Checkpoint class names (CheckpointStatistics.ClassName).
const (
	ClassCompleted  = "completed"
	ClassFailed     = "failed"
	ClassInProgress = "in_progress"
)

// CheckpointStatistics is one checkpoint: an entry of the history and
// GET /jobs/{jobid}/checkpoints/details/{checkpointid}.
type CheckpointStatistics struct {
	// ClassName is ClassCompleted, ClassFailed or ClassInProgress; Status
	// the same in Flink's upper case (COMPLETED, FAILED, IN_PROGRESS).
	ClassName   string `json:"className"`
	ID          int64  `json:"id"`
	Status      string `json:"status"`
	IsSavepoint bool   `json:"is_savepoint"`
	// SavepointFormat is null.
	SavepointFormat  *string `json:"savepointFormat"`
	TriggerTimestamp int64   `json:"trigger_timestamp"`
	// LatestAckTimestamp is -1 before the first acknowledgement.
	LatestAckTimestamp      int64  `json:"latest_ack_timestamp"`
	CheckpointedSize        int64  `json:"checkpointed_size"`
	StateSize               int64  `json:"state_size"`
	EndToEndDuration        int64  `json:"end_to_end_duration"`
	AlignmentBuffered       int64  `json:"alignment_buffered"`
	ProcessedData           int64  `json:"processed_data"`
	PersistedData           int64  `json:"persisted_data"`
	NumSubtasks             int    `json:"num_subtasks"`
	NumAcknowledgedSubtasks int    `json:"num_acknowledged_subtasks"`
	CheckpointType          string `json:"checkpoint_type"`
	// Tasks holds every vertex's figures, by vertex id.
	Tasks map[string]TaskCheckpointStatistics `json:"tasks"`
	// ExternalPath and Discarded are set for completed checkpoints.
	ExternalPath *string `json:"external_path,omitempty"`
	Discarded    *bool   `json:"discarded,omitempty"`
	// FailureTimestamp and FailureMessage are set for failed ones.
	FailureTimestamp *int64  `json:"failure_timestamp,omitempty"`
	FailureMessage   *string `json:"failure_message,omitempty"`
}

// TaskCheckpointStatistics is one vertex's part of a checkpoint.
type TaskCheckpointStatistics struct {
	// ID is the checkpoint's id (as in Flink), Status the checkpoint's.
	ID     int64  `json:"id"`
	Status string `json:"status"`
	// LatestAckTimestamp is -1 before the vertex's first acknowledgement.
	LatestAckTimestamp int64 `json:"latest_ack_timestamp"`
	CheckpointedSize   int64 `json:"checkpointed_size"`
	StateSize          int64 `json:"state_size"`
	// EndToEndDuration runs from the trigger to the latest acknowledgement.
	EndToEndDuration        int64 `json:"end_to_end_duration"`
	AlignmentBuffered       int64 `json:"alignment_buffered"`
	ProcessedData           int64 `json:"processed_data"`
	PersistedData           int64 `json:"persisted_data"`
	NumSubtasks             int   `json:"num_subtasks"`
	NumAcknowledgedSubtasks int   `json:"num_acknowledged_subtasks"`
}

// TaskCheckpointDetails is GET
// /jobs/{jobid}/checkpoints/details/{checkpointid}/subtasks/{vertexid}.
type TaskCheckpointDetails struct {
	TaskCheckpointStatistics
	Summary SubtaskCheckpointSummary `json:"summary"`
	// Subtasks are every subtask of the vertex, by index.
	Subtasks []SubtaskCheckpointStatistics `json:"subtasks"`
}

// SubtaskCheckpointSummary summarises the acknowledged subtasks' figures.
type SubtaskCheckpointSummary struct {
	StateSize          StatsSummary              `json:"state_size"`
	CheckpointedSize   StatsSummary              `json:"checkpointed_size"`
	EndToEndDuration   StatsSummary              `json:"end_to_end_duration"`
	CheckpointDuration CheckpointDurationSummary `json:"checkpoint_duration"`
	Alignment          AlignmentSummary          `json:"alignment"`
	StartDelay         StatsSummary              `json:"start_delay"`
}

// CheckpointDurationSummary summarises the synchronous and asynchronous
// phases.
type CheckpointDurationSummary struct {
	Sync  StatsSummary `json:"sync"`
	Async StatsSummary `json:"async"`
}

// AlignmentSummary summarises the alignments: Buffered and Processed are
// 0, Persisted the in-flight data of unaligned checkpoints, Duration the
// alignment time.
type AlignmentSummary struct {
	Buffered  StatsSummary `json:"buffered"`
	Processed StatsSummary `json:"processed"`
	Persisted StatsSummary `json:"persisted"`
	Duration  StatsSummary `json:"duration"`
}

// Subtask checkpoint statuses (SubtaskCheckpointStatistics.Status).
const (
	SubtaskCompleted       = "completed"
	SubtaskPendingOrFailed = "pending_or_failed"
)

// SubtaskCheckpointStatistics is one subtask's part of a checkpoint. A
// subtask that has not acknowledged has only ClassName "pending", Index
// and Status SubtaskPendingOrFailed.
type SubtaskCheckpointStatistics struct {
	// ClassName is "completed" or "pending".
	ClassName           string               `json:"className"`
	Index               int                  `json:"index"`
	Status              string               `json:"status"`
	AckTimestamp        *int64               `json:"ack_timestamp,omitempty"`
	EndToEndDuration    *int64               `json:"end_to_end_duration,omitempty"`
	StateSize           *int64               `json:"state_size,omitempty"`
	CheckpointedSize    *int64               `json:"checkpointed_size,omitempty"`
	Checkpoint          *CheckpointDuration  `json:"checkpoint,omitempty"`
	Alignment           *CheckpointAlignment `json:"alignment,omitempty"`
	StartDelay          *int64               `json:"start_delay,omitempty"`
	UnalignedCheckpoint *bool                `json:"unaligned_checkpoint,omitempty"`
	Aborted             *bool                `json:"aborted,omitempty"`
}

// CheckpointDuration is a subtask's synchronous and asynchronous phase.
type CheckpointDuration struct {
	Sync  int64 `json:"sync"`
	Async int64 `json:"async"`
}

// CheckpointAlignment is a subtask's alignment.
type CheckpointAlignment struct {
	Buffered  int64 `json:"buffered"`
	Processed int64 `json:"processed"`
	Persisted int64 `json:"persisted"`
	Duration  int64 `json:"duration"`
}

// CheckpointConfigInfo is GET /jobs/{jobid}/checkpoints/config.
type CheckpointConfigInfo struct {
	// Mode is "exactly_once" or "at_least_once".
	Mode                                     string                `json:"mode"`
	Interval                                 int64                 `json:"interval"`
	Timeout                                  int64                 `json:"timeout"`
	MinPause                                 int64                 `json:"min_pause"`
	MaxConcurrent                            int                   `json:"max_concurrent"`
	Externalization                          ExternalizationConfig `json:"externalization"`
	StateBackend                             string                `json:"state_backend"`
	CheckpointStorage                        string                `json:"checkpoint_storage"`
	UnalignedCheckpoints                     bool                  `json:"unaligned_checkpoints"`
	TolerableFailedCheckpoints               int                   `json:"tolerable_failed_checkpoints"`
	AlignedCheckpointTimeout                 int64                 `json:"aligned_checkpoint_timeout"`
	CheckpointsAfterTasksFinish              bool                  `json:"checkpoints_after_tasks_finish"`
	StateChangelogEnabled                    bool                  `json:"state_changelog_enabled"`
	ChangelogPeriodicMaterializationInterval int64                 `json:"changelog_periodic_materialization_interval"`
	// NumRetained and Incremental are weir additions.
	NumRetained int  `json:"num_retained"`
	Incremental bool `json:"incremental"`
}

// ExternalizationConfig says what happens to completed checkpoints when
// the job ends (execution.checkpointing.externalized-checkpoint-retention).
type ExternalizationConfig struct {
	Enabled              bool `json:"enabled"`
	DeleteOnCancellation bool `json:"delete_on_cancellation"`
}

// Checkpoint types a trigger request may ask for
// (CheckpointTriggerRequest.CheckpointType).
const (
	CheckpointTypeConfigured  = "CONFIGURED"
	CheckpointTypeFull        = "FULL"
	CheckpointTypeIncremental = "INCREMENTAL"
)

// CheckpointTriggerRequest is the optional body of POST
// /jobs/{jobid}/checkpoints. weir always takes the configured kind of
// checkpoint; any of the three types is accepted.
type CheckpointTriggerRequest struct {
	CheckpointType string `json:"checkpointType,omitempty"`
}

// TriggerResponse is the answer to POST /jobs/{jobid}/checkpoints (and to
// Flink's other asynchronous operations).
type TriggerResponse struct {
	RequestID string `json:"request-id"`
}

// Asynchronous operation states (QueueStatus.ID).
const (
	OperationInProgress = "IN_PROGRESS"
	OperationCompleted  = "COMPLETED"
)

// CheckpointTriggerStatus is GET /jobs/{jobid}/checkpoints/{triggerid}.
// Operation is null while the checkpoint runs.
type CheckpointTriggerStatus struct {
	Status    QueueStatus          `json:"status"`
	Operation *CheckpointOperation `json:"operation"`
}

// QueueStatus is an asynchronous operation's state: OperationInProgress or
// OperationCompleted (also when it failed).
type QueueStatus struct {
	ID string `json:"id"`
}

// CheckpointOperation is the result of a triggered checkpoint: its id, or
// why it failed.
type CheckpointOperation struct {
	CheckpointID *int64               `json:"checkpointId,omitempty"`
	FailureCause *SerializedThrowable `json:"failureCause,omitempty"`
}

// SerializedThrowable is Flink's form of an error. Class is a short kind
// of failure, StackTrace the error's message; SerializedThrowable is
// empty.
type SerializedThrowable struct {
	Class               string `json:"class"`
	StackTrace          string `json:"stack-trace"`
	SerializedThrowable string `json:"serialized-throwable"`
}

// Savepoint formats a trigger request may ask for (FormatType of
// SavepointTriggerRequest and StopWithSavepointRequest); the server takes
// them in any case. CANONICAL (the default) is readable by every state
// backend; NATIVE is the state backend's own format, faster to take and
// restore.
const (
	SavepointFormatCanonical = "CANONICAL"
	SavepointFormatNative    = "NATIVE"
)

// SavepointTriggerRequest is the optional body of POST
// /jobs/{jobid}/savepoints. TargetDirectory is where the savepoint
// directory is made (default execution.checkpointing.savepoint-dir);
// CancelJob stops the job once the savepoint completed (Flink's
// deprecated cancel-with-savepoint: weir stops it as POST /stop does
// without drain); TriggerID, 32 hex digits, names the operation instead
// of a generated id: the same id again answers the same operation.
type SavepointTriggerRequest struct {
	TargetDirectory string `json:"target-directory,omitempty"`
	CancelJob       bool   `json:"cancel-job,omitempty"`
	FormatType      string `json:"formatType,omitempty"`
	TriggerID       string `json:"triggerId,omitempty"`
}

// StopWithSavepointRequest is the optional body of POST
// /jobs/{jobid}/stop: take a savepoint, then stop the job. Drain first
// ends the sources and emits the final watermark (event-time timers
// fire). Note Flink's spelling: targetDirectory here, target-directory
// in SavepointTriggerRequest.
type StopWithSavepointRequest struct {
	TargetDirectory string `json:"targetDirectory,omitempty"`
	Drain           bool   `json:"drain,omitempty"`
	FormatType      string `json:"formatType,omitempty"`
	TriggerID       string `json:"triggerId,omitempty"`
}

// SavepointTriggerStatus is GET /jobs/{jobid}/savepoints/{triggerid}, for
// savepoints triggered by POST /savepoints and by POST /stop. Operation
// is null while the savepoint runs.
type SavepointTriggerStatus struct {
	Status    QueueStatus         `json:"status"`
	Operation *SavepointOperation `json:"operation"`
}

// SavepointOperation is the result of a triggered savepoint: its location
// (the savepoint directory, what weir run --from takes), or why it
// failed.
type SavepointOperation struct {
	Location     string               `json:"location,omitempty"`
	FailureCause *SerializedThrowable `json:"failure-cause,omitempty"`
}

// JobVertexDetails is GET /jobs/{jobid}/vertices/{vertexid}.
type JobVertexDetails struct {
	ID             string          `json:"id"`
	Name           string          `json:"name"`
	Parallelism    int             `json:"parallelism"`
	MaxParallelism int             `json:"maxParallelism"`
	Now            int64           `json:"now"`
	Subtasks       []SubtaskDetail `json:"subtasks"`
}

// SubtaskDetail is one subtask of JobVertexDetails.
type SubtaskDetail struct {
	Subtask int    `json:"subtask"`
	Status  string `json:"status"`
	// Attempt is the job's number of restarts.
	Attempt       int       `json:"attempt"`
	Endpoint      string    `json:"endpoint"`
	StartTime     int64     `json:"start-time"`
	EndTime       int64     `json:"end-time"`
	Duration      int64     `json:"duration"`
	Metrics       IOMetrics `json:"metrics"`
	TaskManagerID string    `json:"taskmanager-id"`
}

// Backpressure levels: a subtask's ratio of backpressured time up to 0.10
// is ok, up to 0.5 low, above high (Flink's thresholds).
const (
	BackpressureOK   = "ok"
	BackpressureLow  = "low"
	BackpressureHigh = "high"
)

// VertexBackPressure is GET /jobs/{jobid}/vertices/{vertexid}/backpressure.
// The level is given under both of Flink's names; the vertex's is its
// worst subtask's.
type VertexBackPressure struct {
	// Status is "ok".
	Status         string                `json:"status"`
	Level          string                `json:"backpressure-level"`
	LevelCamelCase string                `json:"backpressureLevel"`
	EndTimestamp   int64                 `json:"end-timestamp"`
	Subtasks       []SubtaskBackPressure `json:"subtasks"`
}

// SubtaskBackPressure is one subtask's share of time backpressured, idle
// and busy (0 to 1) over the last seconds.
type SubtaskBackPressure struct {
	Subtask        int     `json:"subtask"`
	AttemptNumber  int     `json:"attempt-number"`
	Level          string  `json:"backpressure-level"`
	LevelCamelCase string  `json:"backpressureLevel"`
	Ratio          float64 `json:"ratio"`
	IdleRatio      float64 `json:"idleRatio"`
	BusyRatio      float64 `json:"busyRatio"`
}

// Metric is one entry of the metrics endpoints: its name alone, or with
// ?get= its value, as a string as Flink gives it.
type Metric struct {
	ID    string `json:"id"`
	Value string `json:"value,omitempty"`
}

// Aggregations of the subtask metrics endpoint (?agg=).
const (
	AggMin  = "min"
	AggMax  = "max"
	AggSum  = "sum"
	AggAvg  = "avg"
	AggSkew = "skew"
)

// AggregatedMetric is one metric aggregated over subtasks; only the
// aggregations asked for (all by default) are set. Skew is Flink's: the
// mean absolute deviation over the mean, in percent, at most 100.
type AggregatedMetric struct {
	ID   string   `json:"id"`
	Min  *float64 `json:"min,omitempty"`
	Max  *float64 `json:"max,omitempty"`
	Avg  *float64 `json:"avg,omitempty"`
	Sum  *float64 `json:"sum,omitempty"`
	Skew *float64 `json:"skew,omitempty"`
}
