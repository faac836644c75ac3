// Package kafka connects weir jobs to Apache Kafka, with the semantics of
// Flink's KafkaSource and KafkaSink, on franz-go
// (github.com/twmb/franz-go), the Go client that implements transactions
// correctly.
//
// Source reads topics (a list or a pattern): each partition is a split of
// the source, assigned to subtasks as Flink assigns them, its offset kept
// in checkpoints (the checkpoint is the truth; committing offsets back to
// the consumer group on completion is for monitoring tools), with
// starting offsets, a bounded mode, partition discovery and per-partition
// watermarks (weir.FromSourceWithWatermarks).
//
// Sink writes records with a delivery guarantee: none, at-least-once
// (flushed at every checkpoint) or exactly-once (one Kafka transaction per
// checkpoint and subtask, committed when the checkpoint completes).
// Consumers of an exactly-once sink's topic must read with read_committed
// isolation.
//
// The connectors live in their own package so that jobs that do not use
// Kafka do not build franz-go.
package kafka
