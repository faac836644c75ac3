// Package rest serves Apache Flink's REST API for the jobs of a weir
// process: the endpoints and JSON field names of Flink's monitoring API
// (/overview, /jobs, /jobs/{jobid}/checkpoints, .../backpressure,
// .../metrics, ...), so that Flink's dashboard, its CLI habits and the
// scripts written against them work on weir. It also mounts the
// Prometheus endpoint (/metrics) and the web dashboard that other
// packages provide.
//
// The server reads what monitor.Job shows (state, vertices, the current
// deployment's task metrics, the checkpoint statistics tracker and the
// metric registry) on every request; it keeps no copy. Its only state of
// its own is the checkpoints and savepoints triggered through it (POST
// /jobs/{jobid}/checkpoints, /savepoints, /stop) and their results, kept
// for the last maxFinishedTriggers of them.
//
// # Files
//
//   - types.go: the JSON bodies, as Go types with Flink's field names; the
//     client, the CLI and other packages' tests decode them.
//   - convert.go, convert_metrics.go: from monitor and stats to the types.
//   - server.go, server_jobs.go, server_checkpoints.go,
//     server_savepoints.go, server_metrics.go: routing and handlers;
//     triggers.go: the asynchronous operations (triggered checkpoints and
//     savepoints), their ids, bound and results; listen.go: the port;
//     auth.go: the bearer token.
//   - client.go: a typed client; discovery.go: the _rest file a running
//     job leaves in its checkpoint directory so that `weir list` and the
//     other commands find it.
//
// # Errors
//
// Every error answer has Flink's body {"errors":["..."]} and a status
// code: 400 for malformed parameters and bodies, 401 without the right
// bearer token, 404 for unknown paths, jobs, vertices, checkpoints and
// trigger ids, 405 for a wrong method, 409 for controls of a job that has
// ended and savepoints of a job that cannot take them, 429 beyond the
// bound on running triggers. Errors inside the package are plain Go
// errors; the status is chosen where the answer is written.
//
// # Concurrency and lifecycle
//
// Start listens before it returns and serves in a goroutine; AddJob may be
// called at any time from any goroutine. Close stops listening, gives the
// requests in flight a short grace period, cancels the checkpoints and
// savepoints the API triggered that are still running and waits for their
// goroutines.
package rest
