package network

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// PipelinedSubpartition is the in-memory Subpartition: a FIFO of buffers
// under a mutex, with priority events kept at its head.
type PipelinedSubpartition struct {
	mu       sync.Mutex
	q        bufQueue[*Buffer]
	prio     int // priority events at the head of q
	backlog  int // data buffers in q
	listener AvailabilityListener
	// bufferSize is the size the consumer announced (debloat.go).
	bufferSize atomic.Int32
}

var _ Subpartition = (*PipelinedSubpartition)(nil)

// NewPipelinedSubpartition returns an empty subpartition.
func NewPipelinedSubpartition() *PipelinedSubpartition { return &PipelinedSubpartition{} }

// SetListener registers l; see Subpartition.
func (s *PipelinedSubpartition) SetListener(l AvailabilityListener) {
	s.mu.Lock()
	s.listener = l
	s.mu.Unlock()
}

// Send queues b behind everything sent before it.
func (s *PipelinedSubpartition) Send(b *Buffer) {
	s.mu.Lock()
	s.q.push(b)
	if b.IsData() {
		s.backlog++
	}
	l := s.listener
	s.mu.Unlock()
	if l != nil {
		l.NotifyDataAvailable()
	}
}

// SendPriority queues priority event b ahead of every queued buffer except
// earlier priority events, and shows overtaken (if not nil) the data buffers
// it overtook. It panics if b is not a priority event.
func (s *PipelinedSubpartition) SendPriority(b *Buffer, overtaken func(*Buffer)) {
	if b.Kind != KindEvent || !b.Event.Priority {
		panic(fmt.Sprintf("network: SendPriority of a %v buffer that is not a priority event", b.Kind))
	}
	s.mu.Lock()
	if overtaken != nil {
		for i := s.prio; i < s.q.len(); i++ {
			if q := s.q.at(i); q.IsData() {
				overtaken(q)
			}
		}
	}
	s.q.insert(s.prio, b)
	s.prio++
	l := s.listener
	s.mu.Unlock()
	if l != nil {
		l.NotifyDataAvailable()
	}
}

// PollNext takes the head if credit allows; see Subpartition.
func (s *PipelinedSubpartition) PollNext(credit int) (*Buffer, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.q.len() == 0 {
		return nil, s.backlog
	}
	b := s.q.peek()
	if b.IsData() {
		if credit <= 0 {
			return nil, s.backlog
		}
		s.backlog--
	} else if s.prio > 0 {
		s.prio--
	}
	s.q.pop()
	return b, s.backlog
}

// Backlog is the number of data buffers queued.
func (s *PipelinedSubpartition) Backlog() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.backlog
}

// Queued is the number of buffers queued, data and events.
func (s *PipelinedSubpartition) Queued() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.q.len()
}

// BarrierQueued reports whether checkpoint barrier id is queued, not yet
// taken by the transport.
func (s *PipelinedSubpartition) BarrierQueued(id int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.findBarrier(id) >= 0
}

func (s *PipelinedSubpartition) findBarrier(id int64) int {
	for i := s.prio; i < s.q.len(); i++ {
		if b := s.q.at(i); b.Kind == KindEvent && b.Event.Kind == EventBarrier && b.Event.ID == id {
			return i
		}
	}
	return -1
}

// PrioritizeBarrier moves checkpoint barrier id, sent in order and still
// queued, ahead of the data queued before it, as a priority event (an
// aligned checkpoint whose timeout passed turns unaligned), and shows
// overtaken every data buffer it overtook, oldest first. It reports false
// if the barrier is not queued (the transport took it: it went aligned).
func (s *PipelinedSubpartition) PrioritizeBarrier(id int64, overtaken func(*Buffer)) bool {
	s.mu.Lock()
	i := s.findBarrier(id)
	if i < 0 {
		s.mu.Unlock()
		return false
	}
	b := s.q.at(i)
	for j := s.prio; j < i; j++ {
		if q := s.q.at(j); q.IsData() && overtaken != nil {
			overtaken(q)
		}
	}
	s.q.remove(i)
	b.Event.Priority = true
	s.q.insert(s.prio, b)
	s.prio++
	l := s.listener
	s.mu.Unlock()
	if l != nil {
		l.NotifyDataAvailable()
	}
	return true
}
