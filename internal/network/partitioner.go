package network

import "fmt"

// Partitioner decides which consumer subtasks receive a record.
type Partitioner uint8

const (
	// PartitionDefault resolves to Forward when producer and consumer have the
	// same parallelism and to Rebalance otherwise.
	PartitionDefault Partitioner = iota
	// Forward sends producer subtask i's records to consumer subtask i; it
	// needs equal parallelism and is what chaining replaces by direct calls.
	Forward
	// Rebalance sends records round robin to every consumer subtask.
	Rebalance
	// Rescale sends records round robin to a local subset of consumers:
	// producer i of U feeds consumers [i*D/U, (i+1)*D/U) when D >= U, and
	// consumer i*D/U otherwise.
	Rescale
	// Hash sends each record to the subtask owning its key group.
	Hash
	// Broadcast sends every record to every consumer subtask.
	Broadcast
)

// String returns the partitioner's name as Flink prints it.
func (p Partitioner) String() string {
	switch p {
	case PartitionDefault:
		return "DEFAULT"
	case Forward:
		return "FORWARD"
	case Rebalance:
		return "REBALANCE"
	case Rescale:
		return "RESCALE"
	case Hash:
		return "HASH"
	case Broadcast:
		return "BROADCAST"
	}
	return fmt.Sprintf("Partitioner(%d)", uint8(p))
}

// RescaleRange returns the consumer subtasks [lo, hi) that producer subtask
// i of producers feeds over a rescale edge to consumers subtasks.
func RescaleRange(i, producers, consumers int) (lo, hi int) {
	if consumers >= producers {
		return i * consumers / producers, (i + 1) * consumers / producers
	}
	t := i * consumers / producers
	return t, t + 1
}

// NewPartitionedOutput returns the Output that routes records of producer
// subtask index (of producers) through w according to p. For Hash, channel
// maps a record to its consumer subtask.
func NewPartitionedOutput[T any](p Partitioner, w *RecordWriter[T], index, producers int, channel func(T) int) (Output[T], error) {
	consumers := w.rp.NumSubpartitions()
	switch p {
	case Forward:
		if producers != consumers {
			return nil, fmt.Errorf("network: forward edge needs equal parallelism, have %d -> %d", producers, consumers)
		}
		return &forwardOutput[T]{w: w, sub: index}, nil
	case Rebalance:
		return &roundRobinOutput[T]{w: w, lo: 0, hi: consumers, next: index % consumers}, nil
	case Rescale:
		lo, hi := RescaleRange(index, producers, consumers)
		return &roundRobinOutput[T]{w: w, lo: lo, hi: hi, next: lo}, nil
	case Hash:
		if channel == nil {
			return nil, fmt.Errorf("network: hash partitioner needs a channel function")
		}
		return &hashOutput[T]{w: w, channel: channel}, nil
	case Broadcast:
		return &broadcastOutput[T]{w: w}, nil
	}
	return nil, fmt.Errorf("network: unresolved partitioner %v", p)
}

type forwardOutput[T any] struct {
	w   *RecordWriter[T]
	sub int
}

func (o *forwardOutput[T]) Collect(v T) { o.w.Emit(o.sub, v) }

type roundRobinOutput[T any] struct {
	w            *RecordWriter[T]
	lo, hi, next int
}

func (o *roundRobinOutput[T]) Collect(v T) {
	o.w.Emit(o.next, v)
	if o.next++; o.next == o.hi {
		o.next = o.lo
	}
}

type hashOutput[T any] struct {
	w       *RecordWriter[T]
	channel func(T) int
}

func (o *hashOutput[T]) Collect(v T) { o.w.Emit(o.channel(v), v) }

type broadcastOutput[T any] struct{ w *RecordWriter[T] }

func (o *broadcastOutput[T]) Collect(v T) { o.w.Broadcast(v) }
