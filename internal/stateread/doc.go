// Package stateread reads the state in a checkpoint or savepoint offline,
// without the job: what `weir savepoint read` prints (docs/state-reader.md).
// It is the first step toward a State Processor API.
//
// Open resolves a snapshot (storage.ResolveSnapshot) and decodes its
// metadata; List counts every operator's states, Read returns one
// operator's entries. Keyed state is read in each of the forms a subtask
// may have left it:
//
//   - the canonical key-group stream (metadata.Subtask.Keyed), parsed here
//     (stream.go; the format is documented in internal/state/snapshot.go);
//   - native pebble files (Native: incremental checkpoints), downloaded to
//     a temporary directory, opened as a pebble backend and written out as
//     a canonical stream (native.go);
//   - a changelog checkpoint (Changelog: a materialized part plus log
//     records): not read, ErrChangelog. Replaying the log needs every
//     state registered with its Go types; a savepoint (or a canonical
//     checkpoint) writes the state whole and reads fine.
//
// Timers are read from the timer file with the timer package; operator
// list states are inline in the metadata.
//
// Values are decoded with the codecs that wrote them: the keyed runtime
// records each state's kind and codec names in the snapshot
// (metadata.Subtask.Schema), and the reader looks the names up in the
// codec registry (codec.Register, codec.Lookup). A codec the registry does
// not have, a decoding error, and snapshots without a schema (older
// versions, operator list states) give the raw bytes (Datum), never an
// error. A program that registers its codecs in an init function and calls
// the reader decodes its own types.
package stateread
