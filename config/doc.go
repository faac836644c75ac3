// Package config defines weir's configuration keys and reads their values.
//
// The keys follow Apache Flink's names, types and defaults (for example
// "parallelism.default" or "taskmanager.memory.segment-size"), so that a
// Flink configuration file for the supported keys loads unchanged.
//
// Values come from three layers, later layers winning:
//
//  1. the built-in default of every key (see [Options]);
//  2. an optional YAML file (weir's --config flag), whose keys may be written
//     flat ("taskmanager.memory.segment-size: 64kb") or as nested maps that
//     are flattened with dots, as in Flink 1.19+ config.yaml;
//  3. --set key=value pairs, applied in order.
//
// [Load] and [LoadFile] validate everything and report every problem at once,
// as an errors.Join of [*Error] values in input order. Unknown keys wrap
// [ErrUnknownKey] and suggest the closest known keys.
//
// Value syntax follows Flink: durations such as "100 ms", "10s" or "1min"
// (a plain number is milliseconds; Go syntax such as "1m30s" is accepted as
// well), and memory sizes such as "32kb" or "64 mb" (binary units, a plain
// number is bytes). The full list of keys and the syntax rules are in
// docs/config.md.
//
// Adding a key is a one-entry change to the table in options_table.go,
// followed by `go test ./config -update-docs` to regenerate the table in
// docs/config.md.
package config
