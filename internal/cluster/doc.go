// Package cluster runs a job across processes: one job manager and task
// managers, as Apache Flink does in application mode.
//
// Every process runs the same binary, which holds the job's code. The job
// manager builds the job graph, waits until the task managers registered
// enough slots, deploys each attempt of the job to them, coordinates its
// checkpoints and owns their files (it alone deletes them); it is the
// runner of an embedded job with another Deploy (runner.Config.Deploy):
// JobManager.Deploy returns a runner.Deployment whose subtasks run in the
// task managers. A task manager registers its slots and its data-plane
// address, heartbeats, and runs the subtasks it is given: it builds the
// same job from the binary's registry with the flags and configuration
// the job manager ships (JobSpec), checks that the job graph is the same
// (GraphHash), and deploys the subtasks placed in its slots
// (task.Options.Placement), whose channels to subtasks elsewhere go over
// the TCP data plane (internal/network/tcpnet).
//
// # Control plane
//
// gRPC: a task manager opens one bidirectional stream (Session) to the job
// manager and keeps it for its registration's life. Its first message
// registers (slots, data address, binary hash, cluster token); the job
// manager answers with the task manager's id or refuses it with a status
// that says why (a wrong token, another binary). Then deploy, cancel,
// checkpoint triggers and notifications flow down the stream, and
// acknowledgements, declines, part status and heartbeats flow up. Messages
// are plain Go structs encoded as JSON (the codec is registered with
// gRPC; no generated code). A closed stream is a lost task manager at
// once; a stream that carries no heartbeat for heartbeat.timeout is
// closed by the job manager. Losing a task manager that runs part of the
// attempt fails the attempt, and the runner's restart strategy deploys
// the next one on the task managers registered by then.
//
// # Security
//
// With security.ssl.internal.enabled the RPC server and the data plane
// use mutual TLS (both sides present a certificate signed by the
// configured CA). Without it, security.cluster.token is a shared secret
// every registration and data connection must present; a job manager
// that binds to a non-loopback address refuses to start with neither.
package cluster
