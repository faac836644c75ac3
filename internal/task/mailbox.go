package task

import (
	"sync"
	"sync/atomic"
)

// Mail is work a task runs on its own goroutine: checkpoint triggers,
// notifications that a checkpoint completed or was aborted, and results of
// asynchronous work. Its error fails the task.
type Mail func() error

// mailbox is a task's queue of mail. Anyone may post; only the task takes.
// It never drops mail and never blocks the poster.
//
// Urgent mail (priority events: an unaligned barrier) runs before other mail
// and also while the task is blocked on backpressure in the middle of a
// record (network.Yielder): it must not emit records, and whatever it does to
// operator state must not assume a record boundary. Other mail runs only
// between records.
type mailbox struct {
	mu      sync.Mutex
	queue   []Mail
	urgent  []Mail
	pending atomic.Int32
	notify  chan struct{} // any mail
	// urgentNotify is signalled for urgent mail only, so that a writer
	// blocked mid-record does not wake for mail it may not run.
	urgentNotify chan struct{}
}

func newMailbox() *mailbox {
	return &mailbox{notify: make(chan struct{}, 1), urgentNotify: make(chan struct{}, 1)}
}

// post enqueues m and wakes the task.
func (mb *mailbox) post(m Mail) {
	mb.mu.Lock()
	mb.queue = append(mb.queue, m)
	mb.pending.Add(1)
	mb.mu.Unlock()
	signal(mb.notify)
}

// postUrgent enqueues urgent mail m and wakes the task, also where it is
// blocked on backpressure.
func (mb *mailbox) postUrgent(m Mail) {
	mb.mu.Lock()
	mb.urgent = append(mb.urgent, m)
	mb.pending.Add(1)
	mb.mu.Unlock()
	signal(mb.urgentNotify)
	signal(mb.notify)
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// take removes and returns all queued mail, urgent mail first; cheap when
// there is none.
func (mb *mailbox) take() []Mail {
	if mb.pending.Load() == 0 {
		return nil
	}
	mb.mu.Lock()
	q := mb.queue
	if len(mb.urgent) > 0 {
		q = append(mb.urgent, q...)
	}
	mb.queue, mb.urgent = nil, nil
	mb.pending.Store(0)
	mb.mu.Unlock()
	return q
}

// takeUrgent removes and returns the queued urgent mail.
func (mb *mailbox) takeUrgent() []Mail {
	if mb.pending.Load() == 0 {
		return nil
	}
	mb.mu.Lock()
	q := mb.urgent
	mb.urgent = nil
	mb.pending.Add(-int32(len(q)))
	mb.mu.Unlock()
	return q
}
