package task

import (
	"sync"
	"sync/atomic"
)

// Mail is work a task runs on its own goroutine: checkpoint triggers,
// notifications that a checkpoint completed or was aborted, and results of
// asynchronous work. Its error fails the task.
type Mail func() error

// mailbox is a task's queue of mail. Anyone may Post; only the task takes.
// It never drops mail and never blocks the poster.
type mailbox struct {
	mu      sync.Mutex
	queue   []Mail
	pending atomic.Int32
	notify  chan struct{}
}

func newMailbox() *mailbox { return &mailbox{notify: make(chan struct{}, 1)} }

// post enqueues m and wakes the task.
func (mb *mailbox) post(m Mail) {
	mb.mu.Lock()
	mb.queue = append(mb.queue, m)
	mb.pending.Add(1)
	mb.mu.Unlock()
	select {
	case mb.notify <- struct{}{}:
	default:
	}
}

// take removes and returns all queued mail; cheap when there is none.
func (mb *mailbox) take() []Mail {
	if mb.pending.Load() == 0 {
		return nil
	}
	mb.mu.Lock()
	q := mb.queue
	mb.queue = nil
	mb.pending.Store(0)
	mb.mu.Unlock()
	return q
}
