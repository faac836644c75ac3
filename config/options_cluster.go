package config

import "time"

// clusterOptionTable lists the keys of cluster mode: the roles of the
// processes, their addresses, heartbeats, security and high availability.
// Flink's names and defaults where Flink has the key.
var clusterOptionTable = []Option{
	{
		Key:     "execution.target",
		Kind:    KindEnum,
		Default: "embedded",
		Description: "Where `weir run` runs the job: embedded (every subtask in this process) or cluster (this process is the job manager: " +
			"it deploys the job to the task managers that register with it, `weir taskmanager`).",
		Enum: []string{"embedded", "cluster"},
	},
	{
		Key:         "jobmanager.rpc.address",
		Kind:        KindString,
		Default:     "localhost",
		Description: "Host the job manager's RPC server binds to (on the job manager) and task managers connect to (on a task manager).",
	},
	{
		Key:         "jobmanager.rpc.port",
		Kind:        KindInt,
		Default:     "6123",
		Description: "Port of the job manager's RPC server (gRPC). 0 picks a free port (the job manager logs it).",
		Min:         0,
		Max:         65535,
	},
	{
		Key:     "jobmanager.scheduler.min-slots",
		Kind:    KindInt,
		Default: "0",
		Description: "Slots that must be registered before the job manager deploys the job; the job's need (its highest parallelism, " +
			"with slot sharing) when that is more.",
		Min: 0,
		Max: 1 << 20,
	},
	{
		Key:         "slot.request.timeout",
		Kind:        KindDuration,
		Default:     "5 min",
		Description: "How long the job manager waits for enough slots before a deployment fails (and the restart strategy decides).",
		Min:         int64(time.Millisecond),
	},
	{
		Key:         "taskmanager.numberOfTaskSlots",
		Kind:        KindInt,
		Default:     "1",
		Description: "Slots a task manager offers; one slot runs one subtask of every vertex of the job (slot sharing).",
		Min:         1,
		Max:         1 << 16,
	},
	{
		Key:         "taskmanager.host",
		Kind:        KindString,
		Default:     "localhost",
		Description: "Host a task manager's data plane binds to and announces to the other task managers.",
	},
	{
		Key:         "taskmanager.data.port",
		Kind:        KindInt,
		Default:     "0",
		Description: "Port of a task manager's data plane (TCP connections from the other task managers); 0 picks a free port.",
		Min:         0,
		Max:         65535,
	},
	{
		Key:     "heartbeat.interval",
		Kind:    KindDuration,
		Default: "10 s",
		Description: "How often the job manager and the task managers send each other heartbeats (also on the data connections). " +
			"A process that died is detected at once by its closed connection; heartbeats find the ones that hang.",
		Min: int64(time.Millisecond),
	},
	{
		Key:         "heartbeat.timeout",
		Kind:        KindDuration,
		Default:     "50 s",
		Description: "How long without a heartbeat before a peer is considered lost; must be longer than heartbeat.interval.",
		Min:         int64(time.Millisecond),
	},
	{
		Key:     "security.cluster.token",
		Kind:    KindString,
		Default: "",
		Description: "Shared secret of a cluster's processes: the job manager and the task managers prove to each other that they hold it " +
			"(HMAC challenge-response; it is never sent). Default: $WEIR_CLUSTER_TOKEN, which, unlike a --set flag, other users of the " +
			"machine cannot read from the process list. Required when a process binds beyond loopback without security.ssl.internal.enabled.",
	},
	{
		Key:         "security.ssl.internal.enabled",
		Kind:        KindBool,
		Default:     "false",
		Description: "Mutual TLS between the processes of a cluster (RPC and data plane): every process presents the certificate of security.ssl.internal.cert-file and accepts only peers whose certificate the CA of security.ssl.internal.ca-file signed.",
	},
	{
		Key:         "security.ssl.internal.cert-file",
		Kind:        KindString,
		Default:     "",
		Description: "PEM certificate of this process (security.ssl.internal.enabled).",
	},
	{
		Key:         "security.ssl.internal.key-file",
		Kind:        KindString,
		Default:     "",
		Description: "PEM private key of security.ssl.internal.cert-file.",
	},
	{
		Key:         "security.ssl.internal.ca-file",
		Kind:        KindString,
		Default:     "",
		Description: "PEM certificate of the CA that signs every process's certificate (Flink's truststore).",
	},
	{
		Key:         "high-availability.type",
		Kind:        KindEnum,
		Default:     "NONE",
		Description: "High availability of the job manager: NONE, or etcd (job managers of one cluster id elect a leader in etcd, which keeps the job, the checkpoint counter and the latest checkpoint's pointer; a new leader resumes the job).",
		Enum:        []string{"NONE", "etcd"},
	},
	{
		Key:         "high-availability.etcd.endpoints",
		Kind:        KindString,
		Default:     "",
		Description: "Comma-separated etcd client endpoints (http://host:2379,...) for high-availability.type etcd.",
	},
	{
		Key:         "high-availability.cluster-id",
		Kind:        KindString,
		Default:     "/default",
		Description: "Name of the cluster in the high-availability store: job managers and task managers of one cluster share it.",
	},
	{
		Key:     "high-availability.etcd.session-ttl",
		Kind:    KindDuration,
		Default: "15 s",
		Description: "Lease of a job manager's leadership in etcd: a crashed leader's leadership ends after it and a standby takes over; " +
			"a leader that cannot renew it within that time stops its job.",
		Min: int64(time.Second),
	},
	{
		Key:         "high-availability.storageDir",
		Kind:        KindString,
		Default:     "",
		Description: "Durable directory for high-availability metadata that does not fit in etcd; weir keeps everything in etcd and the checkpoint storage today, so it is accepted and unused.",
	},
}
