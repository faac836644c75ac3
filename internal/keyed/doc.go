// Package keyed is the keyed runtime of an operator subtask: what every
// operator on a keyed stream (weir.KeyedProcess, windows) has underneath
// its user function.
//
// A Runtime owns, for its subtask's key-group range:
//
//   - the state backend (hashmap or pebble, Config.Backend) and its
//     lifecycle: opened in Open (claiming the local state directory for
//     pebble), restored from the subtask's share of a checkpoint (the
//     canonical key-group stream, native pebble files of the same range, or
//     of other ranges when the job was rescaled, and changelog records),
//     closed in Close;
//   - the current key, set by the operator before every record (SetKey) and
//     by the runtime before every timer;
//   - the timer service, its processing-time wake-ups and the firing of
//     timers with their key current;
//   - background TTL cleanup, once a state with TTL registers;
//   - the snapshot strategy of the synchronous checkpoint phase, chosen by
//     the trigger's checkpoint.Options.Format: the changelog (materialized
//     part plus log tail), native incremental files, or the canonical
//     stream;
//   - with the changelog on (Config.Changelog), the log and its periodic
//     materialization (changelog.go).
//
// Typed access to keyed state goes through the handles of state.go
// (Value, List, Map, Reducing, Aggregating), which fail the subtask on a
// backend error or on use without a current key, so that the public API
// needs no error returns per access.
//
// Invariants: a Runtime is used from its task's goroutine only, except
// where a method says otherwise (the asynchronous phases it starts report
// back through task.OpContext.Post). Files it uploads belong to it until a
// snapshot that references them is acknowledged; after that only the
// job's shared-state registry deletes them.
package keyed
