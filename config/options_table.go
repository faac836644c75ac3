package config

// optionTable lists every configuration key weir knows. Order does not
// matter (Options sorts by key). To add a key, add one entry here and run
// `go test ./config -update-docs` to regenerate the table in docs/config.md.
//
// Keys, types and defaults follow Apache Flink where Flink has the key.
var optionTable = []Option{
	{
		Key:         "parallelism.default",
		Kind:        KindInt,
		Default:     "1",
		Description: "Parallelism of operators that do not set their own.",
		Min:         1,
		Max:         maxParallelismLimit,
	},
	{
		Key:     "pipeline.max-parallelism",
		Kind:    KindInt,
		Default: "-1",
		Description: "Maximum parallelism of operators that do not set their own; it is the number of key groups " +
			"keyed state is split into, so it bounds rescaling. -1 derives it from the parallelism p as " +
			"min(max(roundUpPow2(p + p/2), 128), 32768).",
		Min: -1,
		Max: maxParallelismLimit,
		custom: &intRule{
			ok:   func(v int64) bool { return v == -1 || (v >= 1 && v <= maxParallelismLimit) },
			must: "-1 (derive from the parallelism) or an integer between 1 and 32768",
			doc:  "-1, or 1 to 32768",
		},
	},
	{
		Key:         "pipeline.operator-chaining.enabled",
		Kind:        KindBool,
		Default:     "true",
		Description: "Whether operators with the same parallelism connected one-to-one are chained into one task.",
	},
	{
		Key:         "pipeline.name",
		Kind:        KindString,
		Default:     "",
		Description: "Job name; empty means the name given by the program.",
	},
	{
		Key:         "taskmanager.memory.segment-size",
		Kind:        KindMemorySize,
		Default:     "32kb",
		Description: "Size of a network buffer (memory segment) used to ship records between tasks.",
		Min:         256,
		Max:         1 << 30,
	},
	{
		Key:     "taskmanager.memory.min-segment-size",
		Kind:    KindMemorySize,
		Default: "256 bytes",
		Description: "Smallest size buffer debloating gives a network buffer; at most taskmanager.memory.segment-size, " +
			"the largest.",
		Min: 1,
		Max: 1 << 30,
	},
	{
		Key:     "taskmanager.network.memory.buffer-debloat.enabled",
		Kind:    KindBool,
		Default: "false",
		Description: "Buffer debloating: every task that reads from the network measures its input's throughput and has " +
			"its senders cut their buffers at the size that makes the data its input gate can hold take about " +
			"buffer-debloat.target to process (between min-segment-size and segment-size), so that under backpressure " +
			"a checkpoint barrier waits behind less data.",
	},
	{
		Key:         "taskmanager.network.memory.buffer-debloat.target",
		Kind:        KindDuration,
		Default:     "1 s",
		Description: "Buffer debloating: how long a task should take to process the data its input gate can hold.",
		Min:         1,
	},
	{
		Key:         "taskmanager.network.memory.buffer-debloat.period",
		Kind:        KindDuration,
		Default:     "200 ms",
		Description: "Buffer debloating: how often the throughput is measured and the buffer size recalculated.",
		Min:         1,
	},
	{
		Key:     "taskmanager.network.memory.buffer-debloat.samples",
		Kind:    KindInt,
		Default: "20",
		Description: "Buffer debloating: the number of periods the buffer size is averaged over (an exponential moving " +
			"average); more reacts more slowly.",
		Min: 1,
	},
	{
		Key:     "taskmanager.network.memory.buffer-debloat.threshold-percentages",
		Kind:    KindInt,
		Default: "25",
		Description: "Buffer debloating: a new buffer size is announced to the senders only if it differs from the last " +
			"one by more than this percentage (or reaches min-segment-size or segment-size).",
		Min: 0,
	},
	{
		Key:         "taskmanager.network.memory.buffers-per-channel",
		Kind:        KindInt,
		Default:     "2",
		Description: "Exclusive buffers (credits) of each input channel.",
		Min:         1,
	},
	{
		Key:         "taskmanager.network.memory.floating-buffers-per-gate",
		Kind:        KindInt,
		Default:     "8",
		Description: "Floating buffers shared by all channels of an input gate, handed to channels with backlog.",
		Min:         0,
	},
	{
		Key:     "taskmanager.network.memory.max-overdraft-buffers-per-gate",
		Kind:    KindInt,
		Default: "5",
		Description: "Buffers an output may lend beyond its pool to a task in the middle of a record or source batch, " +
			"so that the record (a large one, a flatMap fan-out) finishes instead of waiting for backpressure and a " +
			"checkpoint barrier behind it is not held up; the task starts no new record until the output is below its pool again.",
		Min: 0,
	},
	{
		Key:     "execution.buffer-timeout.interval",
		Kind:    KindDuration,
		Default: "100 ms",
		Description: "How long a partially filled output buffer may wait before it is flushed; " +
			"0 flushes after every input buffer or source batch. A task also flushes whenever it runs out of input.",
	},
	{
		Key:     "execution.runtime-mode",
		Kind:    KindEnum,
		Default: "STREAMING",
		Description: "Execution mode of jobs. weir currently runs every job as STREAMING whatever this says; " +
			"the key is accepted so that Flink configuration files load.",
		Enum: []string{"STREAMING", "BATCH", "AUTOMATIC"},
	},
	{
		Key:         "state.backend.type",
		Kind:        KindEnum,
		Default:     "hashmap",
		Description: "Where keyed state lives: hashmap (Go maps in memory) or pebble (one Pebble database per operator subtask on local disk).",
		Enum:        []string{"hashmap", "pebble"},
	},
	{
		Key:         "state.backend.local-dir",
		Kind:        KindString,
		Default:     "weir-data/state",
		Description: "Local working directory of the pebble backend: one database per operator subtask under a directory per job run, deleted when the job ends.",
	},
	{
		Key:         "state.changelog.enabled",
		Kind:        KindBool,
		Default:     "false",
		Description: "Changelog state backend: every keyed-state change is also appended to a durable log on the checkpoint storage, uploaded continuously, so that a checkpoint only uploads the log's short tail; the wrapped backend (state.backend.type) is materialized in the background. Needs checkpointing.",
	},
	{
		Key:         "state.changelog.periodic-materialize.interval",
		Kind:        KindDuration,
		Default:     "10 min",
		Description: "How often the changelog backend materializes the wrapped backend (a full or, with execution.checkpointing.incremental, incremental snapshot taken in the background), after which checkpoints no longer need the log before it. 0 disables periodic materialization.",
	},
	{
		Key:         "state.changelog.materialization.max-failures-allowed",
		Kind:        KindInt,
		Default:     "3",
		Min:         0,
		Description: "How many consecutive materializations may fail before the job fails.",
	},
	{
		Key:         "state.changelog.dstl.dfs.batch.persist-delay",
		Kind:        KindDuration,
		Default:     "10 ms",
		Description: "How long the changelog collects changes before it uploads them as one log segment.",
	},
	{
		Key:         "state.changelog.dstl.dfs.batch.persist-size-threshold",
		Kind:        KindMemorySize,
		Default:     "10 mb",
		Min:         1,
		Description: "Size at which collected changes are uploaded at once.",
	},
	{
		Key:         "state.changelog.dstl.dfs.preemptive-persist-threshold",
		Kind:        KindMemorySize,
		Default:     "5 mb",
		Min:         1,
		Description: "Size at which a subtask's collected changes are uploaded early, so that a checkpoint only has a small tail to upload.",
	},
	{
		Key:         "state.changelog.dstl.dfs.upload.timeout",
		Kind:        KindDuration,
		Default:     "1 s",
		Description: "Time after which an attempt to upload a log segment is abandoned and retried.",
	},
	{
		Key:         "state.changelog.dstl.dfs.upload.max-attempts",
		Kind:        KindInt,
		Default:     "3",
		Min:         1,
		Description: "Attempts per log segment upload; when all fail the subtask fails.",
	},
	{
		Key:         "state.changelog.dstl.dfs.upload.max-in-flight",
		Kind:        KindMemorySize,
		Default:     "100 mb",
		Min:         1,
		Description: "Bytes of log segments being uploaded per subtask beyond which the subtask waits (backpressure) instead of buffering more.",
	},
	{
		Key:         "pipeline.auto-watermark-interval",
		Kind:        KindDuration,
		Default:     "200 ms",
		Description: "How often watermark strategies emit watermarks.",
	},
	{
		Key:         "execution.checkpointing.interval",
		Kind:        KindDuration,
		Default:     "0 ms",
		Description: "Interval between periodic checkpoints; 0 disables checkpointing.",
	},
	{
		Key:         "execution.checkpointing.dir",
		Kind:        KindString,
		Default:     "weir-data/checkpoints",
		Description: "Where checkpoints are stored: a directory path, file://, mem:// or a gocloud blob URL such as s3://bucket/prefix. Each job has a sub-directory named after it.",
	},
	{
		Key:         "execution.checkpointing.incremental",
		Kind:        KindBool,
		Default:     "false",
		Description: "Incremental checkpoints of the pebble backend: upload only the files created since the last completed checkpoint and reference the others under shared/. The hashmap backend always takes full checkpoints.",
	},
	{
		Key:         "execution.checkpointing.mode",
		Kind:        KindEnum,
		Default:     "EXACTLY_ONCE",
		Description: "EXACTLY_ONCE aligns barriers at tasks with several inputs; AT_LEAST_ONCE does not block inputs, so records after a barrier may be in the snapshot and are replayed after a restore.",
		Enum:        []string{"EXACTLY_ONCE", "AT_LEAST_ONCE"},
	},
	{
		Key:         "execution.checkpointing.timeout",
		Kind:        KindDuration,
		Default:     "10 min",
		Description: "A checkpoint not complete this long after its trigger expires and is aborted.",
		Min:         1,
	},
	{
		Key:         "execution.checkpointing.min-pause",
		Kind:        KindDuration,
		Default:     "0 ms",
		Description: "Minimum time from the completion of one checkpoint to the trigger of the next periodic one.",
	},
	{
		Key:         "execution.checkpointing.max-concurrent-checkpoints",
		Kind:        KindInt,
		Default:     "1",
		Description: "How many checkpoints may be in progress at once.",
		Min:         1,
	},
	{
		Key:     "execution.checkpointing.unaligned.enabled",
		Kind:    KindBool,
		Default: "false",
		Description: "Unaligned checkpoints: barriers overtake the data queued in the network (on hash and rebalance " +
			"edges; forward, rescale and broadcast edges stay aligned) and the tasks persist that data with the " +
			"checkpoint, so checkpoint time does not depend on backpressure. Needs exactly-once mode and " +
			"max-concurrent-checkpoints 1, otherwise the job warns and checkpoints aligned.",
	},
	{
		Key:     "execution.checkpointing.unaligned.max-subtasks-per-channel-state-file",
		Kind:    KindInt,
		Default: "5",
		Description: "How many subtasks share one file for the in-flight data of an unaligned checkpoint (fewer, larger " +
			"files); 1 writes a file per subtask.",
		Min: 1,
	},
	{
		Key:     "execution.checkpointing.aligned-checkpoint-timeout",
		Kind:    KindDuration,
		Default: "0 ms",
		Description: "With unaligned checkpoints: every checkpoint starts aligned and switches to unaligned where its " +
			"barriers are still held up this long after the trigger (at a task's inputs, and for barriers still queued " +
			"at its outputs), so in-flight data is persisted only under backpressure. 0: unaligned from the start.",
	},
	{
		Key:     "execution.state-recovery.without-channel-state.checkpoint-id",
		Kind:    KindInt,
		Default: "-1",
		Description: "Id of a checkpoint to restore without its in-flight data (the channel state of an unaligned " +
			"checkpoint), when that data cannot be read: the records it held are lost. -1: none.",
		Min: -1,
	},
	{
		Key:         "execution.checkpointing.tolerable-failed-checkpoints",
		Kind:        KindInt,
		Default:     "0",
		Description: "Consecutive failed checkpoints (expired, declined, failed uploads or _metadata writes) the job tolerates; one more fails the job over to its restart strategy. A completed checkpoint resets the count.",
	},
	{
		Key:         "execution.checkpointing.num-retained",
		Kind:        KindInt,
		Default:     "1",
		Description: "Completed checkpoints kept; older ones are deleted when a newer one completes.",
		Min:         1,
	},
	{
		Key:         "execution.checkpointing.externalized-checkpoint-retention",
		Kind:        KindEnum,
		Default:     "RETAIN_ON_CANCELLATION",
		Description: "What happens to completed checkpoints when the job ends: RETAIN_ON_CANCELLATION keeps them (resume with --from latest), DELETE_ON_CANCELLATION deletes them when the job finishes or is canceled but keeps them when it fails, NO_EXTERNALIZED_CHECKPOINTS always deletes them.",
		Enum:        []string{"RETAIN_ON_CANCELLATION", "DELETE_ON_CANCELLATION", "NO_EXTERNALIZED_CHECKPOINTS"},
	},
	{
		Key:     "execution.checkpointing.lock.lease-duration",
		Kind:    KindDuration,
		Default: "30 s",
		Description: "How long the lease a running job holds on its checkpoint directory in an object store (s3://, mem://, ...) lasts unless renewed. " +
			"A second run of the job is refused while it lasts, so a run resuming after a crash that left it behind waits up to this long (or pass weir run --force). " +
			"Local directories use a file lock instead, which dies with its process.",
		Min: 1,
	},
	{
		Key:     "execution.checkpointing.lock.renew-interval",
		Kind:    KindDuration,
		Default: "10 s",
		Description: "How often a running job renews the lease on its checkpoint directory, and checks that its local lock file was not taken over with weir run --force. " +
			"Must be shorter than execution.checkpointing.lock.lease-duration.",
		Min: 1,
	},
	{
		Key:         "execution.state-recovery.path",
		Kind:        KindString,
		Default:     "",
		Description: "Snapshot to start from: a savepoint directory, a chk-<n> checkpoint directory, either's _metadata file, or latest for the newest complete checkpoint of the job under execution.checkpointing.dir. Empty starts fresh. weir run --from sets it.",
	},
	{
		Key:     "execution.state-recovery.claim-mode",
		Kind:    KindEnum,
		Default: "NO_CLAIM",
		Description: "Who owns the snapshot execution.state-recovery.path names. NO_CLAIM: the user; nothing of it is ever deleted or shared, " +
			"several jobs may start from it, and the first checkpoint is a full one (after it completes the snapshot may be deleted). " +
			"CLAIM: the job; it counts as one of its retained checkpoints and is deleted once newer checkpoints subsume it (its chk-<n> " +
			"directory, never the job directory). latest always resumes the job's own checkpoints as CLAIM. weir run --claim-mode sets it.",
		Enum: []string{"NO_CLAIM", "CLAIM"},
	},
	{
		Key:     "execution.state-recovery.ignore-unclaimed-state",
		Kind:    KindBool,
		Default: "false",
		Description: "Start even if the restored snapshot holds state of an operator uid the job no longer has (the state is dropped, with a warning). " +
			"false: such a restore fails and names the uid. weir run --allow-non-restored-state sets it.",
	},
	{
		Key:     "execution.checkpointing.local-backup.enabled",
		Kind:    KindBool,
		Default: "false",
		Description: "Local recovery: every subtask also keeps a local copy of its keyed state for the latest completed checkpoint " +
			"(pebble incremental: the snapshot directory it uploaded from, kept by a rename; full checkpoints: the stream written a " +
			"second time, to a local file). execution.state-recovery.from-local implies it.",
	},
	{
		Key:     "execution.state-recovery.from-local",
		Kind:    KindBool,
		Default: "false",
		Description: "Local recovery: a restart restores each subtask from its local copy when one matches the checkpoint exactly " +
			"(same checkpoint, operator, subtask and key-group range, files verified) and reads nothing of its keyed state from the " +
			"checkpoint storage; other subtasks (no copy, rescaled, damaged copy) read the storage, with a warning.",
	},
	{
		Key:     "execution.checkpointing.local-backup.dirs",
		Kind:    KindString,
		Default: "",
		Description: "Local recovery: root directories of the local copies, separated by commas (or the OS path list separator); " +
			"subtask i uses directory i modulo their number. Empty: <state.backend.local-dir>/local-recovery. For the pebble backend " +
			"use the file system of state.backend.local-dir, so that copies are renames and restores hard links.",
	},
	{
		Key:     "execution.checkpointing.savepoint-dir",
		Kind:    KindString,
		Default: "",
		Description: "Default directory (path or URL) savepoints are written to when a trigger names none (weir savepoint, weir stop, " +
			"POST /jobs/<id>/savepoints). Each savepoint is a directory savepoint-<job id prefix>-<random> in it. Empty: a trigger must name one.",
	},
	{
		Key:         "restart-strategy.type",
		Kind:        KindString,
		Default:     "",
		Description: "How the job restarts after a failure: none, fixed-delay, failure-rate or exponential-delay. Empty means exponential-delay when checkpointing is enabled, none otherwise.",
	},
	{
		Key:         "restart-strategy.fixed-delay.attempts",
		Kind:        KindInt,
		Default:     "1",
		Description: "fixed-delay: restarts before the job fails.",
	},
	{
		Key:         "restart-strategy.fixed-delay.delay",
		Kind:        KindDuration,
		Default:     "1 s",
		Description: "fixed-delay: wait before each restart.",
	},
	{
		Key:         "restart-strategy.failure-rate.max-failures-per-interval",
		Kind:        KindInt,
		Default:     "1",
		Description: "failure-rate: failures within the interval beyond which the job fails.",
		Min:         1,
	},
	{
		Key:         "restart-strategy.failure-rate.failure-rate-interval",
		Kind:        KindDuration,
		Default:     "1 min",
		Description: "failure-rate: the interval failures are counted over.",
		Min:         1,
	},
	{
		Key:         "restart-strategy.failure-rate.delay",
		Kind:        KindDuration,
		Default:     "1 s",
		Description: "failure-rate: wait before each restart.",
	},
	{
		Key:         "restart-strategy.exponential-delay.initial-backoff",
		Kind:        KindDuration,
		Default:     "1 s",
		Description: "exponential-delay: wait before the first restart.",
	},
	{
		Key:         "restart-strategy.exponential-delay.max-backoff",
		Kind:        KindDuration,
		Default:     "1 min",
		Description: "exponential-delay: the longest wait; the backoff grows by a factor of 1.5 per restart up to it.",
	},
	{
		Key:         "restart-strategy.exponential-delay.backoff-multiplier",
		Kind:        KindFloat,
		Default:     "1.5",
		Description: "exponential-delay: the factor the backoff grows by after every restart.",
		FloatMin:    1,
	},
	{
		Key:         "restart-strategy.exponential-delay.jitter-factor",
		Kind:        KindFloat,
		Default:     "0.1",
		Description: "exponential-delay: the backoff varies randomly by up to this share either way.",
		FloatMin:    0,
		FloatMax:    1,
	},
	{
		Key:         "restart-strategy.exponential-delay.reset-backoff-threshold",
		Kind:        KindDuration,
		Default:     "1 h",
		Description: "exponential-delay: once the job ran this long without failing, the backoff starts over.",
		Min:         1,
	},
	{
		Key:     "rest.enabled",
		Kind:    KindBool,
		Default: "true",
		Description: "Whether a running job serves the REST API, the Prometheus endpoint /metrics and the web dashboard " +
			"(docs/rest.md).",
	},
	{
		Key:         "rest.bind-address",
		Kind:        KindString,
		Default:     "127.0.0.1",
		Description: "Address the REST server listens on. Anything but a loopback address requires rest.auth.token.",
	},
	{
		Key:     "rest.port",
		Kind:    KindInt,
		Default: "8081",
		Description: "Port of the REST server; 0 picks a free port. When the default port is taken (another job runs on " +
			"this machine) the job picks a free port and warns; a port set explicitly that is taken is an error. The " +
			"address chosen is logged and written to <execution.checkpointing.dir>/<job>/_rest.",
		Min: 0,
		Max: 65535,
	},
	{
		Key:     "rest.bind-port",
		Kind:    KindString,
		Default: "",
		Description: "Port or port range (\"50100-50200\") the REST server binds to, the first free one taken; " +
			"empty means rest.port.",
	},
	{
		Key:     "rest.auth.token",
		Kind:    KindString,
		Default: "",
		Description: "Bearer token every REST request must carry (Authorization: Bearer <token>); required when " +
			"rest.bind-address is not a loopback address. The CLI reads it from --token or WEIR_REST_TOKEN.",
	},
	{
		Key:         "rest.ssl.enabled",
		Kind:        KindBool,
		Default:     "false",
		Description: "Serve the REST API over TLS with rest.ssl.cert and rest.ssl.key.",
	},
	{
		Key:         "rest.ssl.cert",
		Kind:        KindString,
		Default:     "",
		Description: "PEM file with the REST server's certificate chain (rest.ssl.enabled).",
	},
	{
		Key:         "rest.ssl.key",
		Kind:        KindString,
		Default:     "",
		Description: "PEM file with the private key of rest.ssl.cert.",
	},
	{
		Key:         "web.checkpoints.history",
		Kind:        KindInt,
		Default:     "10",
		Description: "Number of recent checkpoints the REST API and the dashboard show with their details.",
		Min:         1,
	},
	{
		Key:     "metrics.reporter.prom.port",
		Kind:    KindString,
		Default: "",
		Description: "Port or port range on which to serve the Prometheus endpoint /metrics besides the REST server " +
			"(which always serves it); empty means none.",
	},
}
