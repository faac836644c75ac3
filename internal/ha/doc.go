// Package ha is weir's high availability on etcd: leader election among the
// job managers (JMs) of one cluster, leader discovery for the task managers
// (TMs), and a small store, fenced by leadership, for what a new leader needs
// to resume a job after the old one crashed.
//
// It plays the part of Flink's ZooKeeper and Kubernetes HA services. Several
// JMs with the same cluster id call Campaign; one of them leads, the others
// block as standbys. The leader publishes its RPC address; TMs read it with
// Leader and follow changes with WatchLeader. The leader keeps the job spec,
// the checkpoint id counter and the pointer to the latest completed
// checkpoint in etcd (the checkpoint files themselves live in the checkpoint
// storage); a standby that takes over reads them back and resumes the job.
//
// # Leadership
//
// A candidate holds an etcd lease of Config.SessionTTL, kept alive while the
// process runs. Its candidacy is a key under the election prefix attached to
// that lease, and the candidate whose key has the lowest create revision
// leads (go.etcd.io/etcd/client/v3/concurrency.Election). When a leader
// crashes its lease expires after at most SessionTTL, etcd deletes its key
// and the next candidate leads. Resign revokes the lease at once.
//
// The create revision of the leader's key is the leadership's Epoch: it
// grows with every new leader of a cluster, so RPC peers can reject messages
// of a deposed leader.
//
// A Leadership ends (Lost is closed) when the process can no longer be sure
// that etcd still regards it as the leader:
//   - SessionTTL has passed since the sending of the last lease renewal etcd
//     confirmed (etcd unreachable or partitioned: the lease may have
//     expired there; ending the leadership at that instant rather than at
//     the confirmation keeps it no later than the server-side expiry, clock
//     rates being equal),
//   - etcd reports the lease gone (expired or revoked),
//   - the leader key was deleted or replaced (fenced by an operator or by a
//     lease expiry the process had not noticed yet),
//   - Resign, or Close of the Etcd it came from.
//
// Once a leadership is lost it never comes back: the process campaigns
// again for a new one.
//
// # Fencing
//
// Every operation of the store, read or write, is one etcd transaction whose
// first comparison is "the leader key still has this leadership's create
// revision". A deposed leader's transaction therefore fails atomically in
// etcd, even if the process has not noticed the loss yet, and the operation
// returns ErrNotLeader; nothing of it is applied. After Lost is closed the
// operations return ErrNotLeader without asking etcd.
//
// # Key layout
//
// All keys of a cluster live under /weir/<cluster-id>, where <cluster-id> is
// Config.ClusterID without its leading "/" (so the default "/default" gives
// /weir/default). Cluster ids and job ids are single path segments of
// letters, digits, '.', '_' and '-', so no cluster's or job's keys are a
// prefix of another's.
//
//	/weir/<cluster-id>/leader/<lease-id-hex>            candidate; value: the JM's RPC address
//	/weir/<cluster-id>/jobs/<job-id>/spec               job graph/spec, opaque bytes (PutJob)
//	/weir/<cluster-id>/jobs/<job-id>/checkpoint-counter next checkpoint id, decimal (SetCheckpointCounter)
//	/weir/<cluster-id>/jobs/<job-id>/latest-checkpoint  Pointer as JSON (SetLatestCheckpoint)
//	/weir/<cluster-id>/jobs/<job-id>/status             terminal status: FINISHED, CANCELED or FAILED
//
// The leader keys are attached to their candidate's lease; the job keys are
// not (they outlive any leader). A Pointer is stored as
//
//	{"id":42,"path":"s3://bucket/ckpt/job/chk-42","savepoint":false,"time":"2025-01-02T03:04:05.000000006Z"}
//
// # Job lifecycle
//
// The leader stores the spec (PutJob) before it runs a job, advances the
// counter before it triggers a checkpoint (SetCheckpointCounter, which never
// goes down) and moves the pointer once a checkpoint is complete
// (SetLatestCheckpoint). When the job reaches a globally terminal state it
// records the status first (SetJobStatus), cleans up the job's checkpoints,
// then calls RemoveJob, which deletes spec, counter and pointer but keeps the
// status. A new leader lists Jobs: a job with a terminal status is cleaned
// up and removed, never resumed; any other job resumes from its
// LatestCheckpoint. A job id whose status is terminal cannot be stored
// again (ErrJobTerminal).
//
// # Concurrency and lifecycle
//
// Etcd and Leadership are safe for concurrent use. Open connects; Close
// ends the leader watches and the leaderships' monitors, waits for their
// goroutines and closes the client. Close does not resign: a process that
// shuts down cleanly calls Resign first so a standby takes over at once;
// without it the standby waits up to SessionTTL, as after a crash.
package ha
