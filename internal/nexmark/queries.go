package nexmark

import "github.com/weirstream/weir/codec"

// The Nexmark queries, after the SQL of Flink's Nexmark repository
// (nexmark-flink/src/main/resources/queries/qN.sql), in the weir API. Each
// takes the timestamped event stream (Events) and returns its result
// stream; Queries registers them by name for the benchmark. The files:
//
//   - queries.go: shared helpers;
//   - queries_bid.go: the stateless projections and filters of bids (q0,
//     q1, q2, q13, q14, q21, q22);
//   - queries_window.go: the window queries q5, q11 and q12;
//   - queries_agg.go: the unbounded GROUP BY queries q15, q16 and q17;
//   - queries_rank.go: the ROW_NUMBER queries q18 (deduplication) and q19
//     (top-N);
//   - queries_join.go: the queries that join two relations (q3, q4, q7,
//     q8, q9, q20), with two-input operators.
//
// Result rows follow the SQL's result tables: their JSON names are the
// columns, TIMESTAMP(3) columns are Unix milliseconds (UTC wall clock, as
// Flink's generator fills them; HOUR and DATE_FORMAT read them in UTC),
// DECIMAL(23, 3) columns are Decimal3, and nullable columns that can be
// NULL are pointers (nil is NULL). Queries whose SQL result updates emit
// every new version of a row, and their row types implement Updating: the
// last row per RowKey is the SQL result (Flink's changelog would also
// carry the retractions of the old versions).

var int64s = codec.SliceOf(codec.Int64())

// mod is a modulo that is never negative.
func mod(a, m int64) int64 { return ((a % m) + m) % m }
