// Package network moves serialized records and in-band events between the
// subtasks of a job.
//
// A producer subtask owns a ResultPartition with one subpartition per
// consumer subtask. Records are appended, already encoded, into fixed-size
// Buffers (the segment size, 32 KiB by default) taken from the partition's
// bounded Pool; a full buffer is handed to its subpartition's channel. A
// consumer subtask owns one InputGate with one input channel per upstream
// subtask of every input edge.
//
// Flow control is credit based, as in Apache Flink: the receiver grants each
// channel a number of credits (exclusive credits per channel plus floating
// credits shared by the gate and lent to channels that announce a backlog),
// and a sender moves a data buffer to the receiver only while it holds a
// credit. The accounting is a deterministic state machine (CreditGate); the
// gate wraps it with a mutex and a wake-up channel. Since buffers only ever
// come from bounded pools and are recycled by the consumer after it decoded
// them, a slow consumer backpressures its producers with bounded memory.
//
// Wire format of a data buffer: the concatenation of whole records, each the
// self-delimiting encoding of the edge's codec. A record larger than a buffer
// travels as a run of KindFragment buffers closed by a KindFragmentEnd buffer
// on the same channel; the reader reassembles it before decoding. Events
// (end of partition, watermark, checkpoint barriers) travel in band as
// KindEvent buffers that hold no pooled memory and need no credit; they keep
// their place in the channel's order unless they are priority events, which
// overtake queued buffers.
package network
