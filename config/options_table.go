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
		Key:         "pipeline.auto-watermark-interval",
		Kind:        KindDuration,
		Default:     "200 ms",
		Description: "How often watermark strategies emit watermarks.",
	},
}
