package network

import "errors"

// The contract of one channel of an exchange, from the producer's buffer to
// the consumer's input gate:
//
//	producer task          transport                 consumer task
//	ResultPartition --Send--> Subpartition --PollNext--> InputChannel.OnBuffer --> InputGate.Poll
//	                              ^                            |
//	                              +------- CreditListener <----+ (credit, on Release)
//
// The sender side (Subpartition) queues the buffers that wait for credit and
// knows their number, the backlog. The receiver side (InputChannel, a channel
// of an InputGate) queues the buffers it received and owns the credit
// accounting (CreditGate). The transport in between holds the credit the
// receiver granted, takes from the subpartition what that credit allows and
// delivers it with the backlog behind it; the receiver answers with more
// credit. LocalConnection is the in-process transport; a TCP transport
// implements the same two roles over a connection, with the same messages:
// a buffer with its backlog one way, a backlog announcement and credit the
// other.

// Target is where a ResultPartition puts the buffers of one subpartition:
// the producer's end of a Subpartition (or a recorder in tests).
//
// Send and SendPriority are called by the producing task's goroutine only.
// From the call on, the target owns b: the producer must not touch it again.
// Neither blocks for long: memory is bounded by the producer's Pool, not by
// the target.
type Target interface {
	// Send appends b, a data or event buffer, behind everything sent
	// before it.
	Send(b *Buffer)
	// SendPriority puts b, an event buffer whose Event.Priority is set,
	// ahead of every buffer queued and not yet delivered, behind priority
	// events sent before it. If overtaken is not nil it is called, before
	// SendPriority returns, with every data buffer b overtook, oldest
	// first: an unaligned checkpoint persists them as output channel
	// state. overtaken must not keep the buffer (copy its Data) and must
	// not call back into the target.
	SendPriority(b *Buffer, overtaken func(*Buffer))
}

// Subpartition is the sender side of one channel: the buffers one producer
// subtask made for one consumer subtask and the transport has not taken yet.
//
// The producer calls Send and SendPriority (Target). The transport calls
// PollNext, never from two goroutines at once, and SetListener once before
// the first buffer. Backlog may be called from any goroutine.
type Subpartition interface {
	Target
	// PollNext removes and returns the head of the queue if credit allows
	// sending it: an event always (events need no credit), a data buffer
	// only when credit > 0. b is nil when the queue is empty or its head is
	// a data buffer and credit is 0. backlog is the number of data buffers
	// still queued behind b, which the receiver learns with b. Ownership of
	// b passes to the caller.
	PollNext(credit int) (b *Buffer, backlog int)
	// Backlog is the number of data buffers queued.
	Backlog() int
	// SetListener registers the transport's listener, told after every
	// Send and SendPriority.
	SetListener(l AvailabilityListener)
}

// AvailabilityListener is told that a subpartition's queue grew.
type AvailabilityListener interface {
	// NotifyDataAvailable is called on the producer's goroutine after a
	// buffer was queued, without the subpartition's lock held, so it may
	// call PollNext. Whether the buffer can be sent depends on the credit.
	NotifyDataAvailable()
}

// InputChannel is the receiver side of one channel, as a transport sees it:
// a channel of an InputGate (InputGate.Connect).
//
// OnBuffer and OnBacklog are called by the channel's transport, never from
// two goroutines at once, in the order the sender produced the buffers. They
// never block for long and never call the transport's CreditListener: credit
// granted in answer to them is returned, so that the transport is not
// re-entered.
type InputChannel interface {
	// OnBuffer receives b, the next buffer of the channel, and backlog, the
	// number of data buffers the sender still has queued behind it. A data
	// buffer uses one credit; delivered without one it is a protocol
	// violation: OnBuffer returns ErrNoCredit and does not take b. Event
	// buffers need no credit. A priority event (Event.Priority) is
	// delivered to the consumer ahead of the buffers received before it.
	// On success the receiver owns b. credit is what the receiver grants at
	// once: floating credit lent because the backlog exceeds the credit the
	// sender holds.
	OnBuffer(b *Buffer, backlog int) (credit int, err error)
	// OnBacklog announces that the sender has backlog data buffers queued
	// and no credit to send them; it returns the credit granted at once.
	OnBacklog(backlog int) (credit int)
}

// CreditListener receives the credit a receiver grants a sender after the
// consumer released buffers.
type CreditListener interface {
	// AddCredit grants n more data buffers on the channel. It is called on
	// the goroutine that released the buffers (the consumer's), without the
	// gate's lock held, never from inside OnBuffer or OnBacklog; it must not
	// block for long (it may deliver buffers, which takes the gate's lock).
	AddCredit(n int)
}

// ErrNoCredit is returned when a sender delivers a data buffer on a channel
// that holds no credit: a protocol violation.
var ErrNoCredit = errors.New("network: data buffer received without credit")
