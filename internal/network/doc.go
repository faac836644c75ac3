// Package network moves serialized records and in-band events between the
// subtasks of a job.
//
// A producer subtask owns a ResultPartition with one subpartition per
// consumer subtask. Records are appended, already encoded, into fixed-size
// Buffers (the segment size, 32 KiB by default) taken from the partition's
// bounded Pool; a full buffer is handed to its subpartition. A consumer
// subtask owns one InputGate with one input channel per upstream subtask of
// every input edge.
//
// # Sender, transport, receiver
//
// Each channel has two sides with a transport between them, and the contract
// between them is a handful of small interfaces (exchange.go):
//
//   - Sender side, Subpartition (PipelinedSubpartition): the producer's
//     goroutine Sends buffers into it; they wait there for credit, and the
//     data buffers among them are the channel's backlog. A priority event
//     (SendPriority) goes ahead of every queued buffer. The transport takes
//     buffers with PollNext(credit), which yields an event always and a data
//     buffer only with credit, together with the backlog behind it; it is
//     told of new buffers through an AvailabilityListener.
//   - Receiver side, InputChannel (a channel of an InputGate, from Connect):
//     the transport delivers with OnBuffer(buffer, backlog); received
//     buffers wait there for the consumer, a priority event ahead of those
//     received before it. The gate's credit accounting (CreditGate) learns
//     the backlog from every buffer, or from OnBacklog when the sender has
//     no credit, and answers with credit: at once as OnBuffer's and
//     OnBacklog's result (floating credit lent on the backlog), later
//     through the transport's CreditListener when the consumer releases a
//     buffer.
//   - Transport: LocalConnection, in process, holds the credit and moves
//     buffers without copying on the goroutine that made them movable (the
//     producer's Send or the consumer's Release). A TCP transport implements
//     the same two roles over a connection.
//
// Ownership of a buffer passes with it: to the subpartition on Send, to the
// transport on PollNext, to the receiver when OnBuffer returns no error, to
// the consumer on Poll, who gives a data buffer back with Release, which
// recycles it into the producer's pool and credits the sender.
//
// # Flow control
//
// Credit based, as in Apache Flink: the receiver grants each channel
// exclusive credits for its whole life, and lends the gate's floating
// credits to channels whose backlog exceeds the credit they hold, in the
// order they asked, taking them back when such a channel consumes a buffer
// while its backlog is covered (backlog 0 returns them). A sender moves a
// data buffer only while it holds a credit; events need none. The accounting
// is a deterministic state machine (CreditGate) tested by scripts, as are
// both sides of an exchange (testdata/credit.txt, testdata/exchange.txt).
// Since data buffers only ever come from bounded pools and are recycled by
// the consumer after it decoded them, a slow consumer backpressures its
// producers with bounded memory: a writer whose pool is empty blocks. While
// blocked it serves its task's urgent work (Yielder), so a priority event
// reaches a backpressured task; if its context ends it panics with a
// *CanceledError that the partition also keeps (ResultPartition.Err), so
// user code that recovers the panic cannot make the task carry on.
//
// # Unaligned checkpoints and overdraft
//
// A priority barrier overtakes the data queued before it at the sender
// (SendPriority shows the overtaken data buffers to the caller, which
// persists copies) and at the receiver (the gate records how many buffers
// it overtook in Buffer.Overtook, and Overtaken shows them). A barrier of
// an aligned checkpoint with a timeout travels in order; the receiving gate
// announces it ahead of the data (EventAnnouncement), and both sides can
// later move it ahead when the timeout passes (PipelinedSubpartition's
// and InputGate's PrioritizeBarrier). A pool lends up to its overdraft
// beyond its size to a writer in the middle of a record
// (TryRequestOverdraft), and tells the owning task through its exhausted
// flag, so that it stops after the record and waits at a record boundary,
// where it can take a snapshot.
//
// # Wire format
//
// A data buffer is the concatenation of whole records, each the
// self-delimiting encoding of the edge's codec. A record larger than a buffer
// travels as a run of KindFragment buffers closed by a KindFragmentEnd buffer
// on the same channel; the reader reassembles it before decoding. Events
// (end of partition, end of data, watermark, watermark status, checkpoint
// and cancellation barriers) travel in band as KindEvent buffers that hold
// no pooled memory and need no credit; they keep their place in the
// channel's order unless they are priority events, which overtake queued
// buffers at the sender and at the receiver. Every buffer is delivered with
// the sender's backlog, and a sender without credit announces a backlog
// that grew; credit flows the other way.
//
// # Buffer debloating
//
// Optionally (Flink's FLIP-183), a consumer sizes the buffers its senders
// fill to its throughput: a Debloater (debloat.go) turns the bytes the
// consumer released over time into a buffer size, the gate announces it
// (InputGate.AnnounceBufferSize) through each channel's transport
// (BufferSizeListener) to the subpartition, and the producer's
// ResultPartition sends a data buffer as soon as it holds that many bytes
// instead of when it is full. Under backpressure the data queued in front
// of a barrier then takes about the configured target time to process.
package network
