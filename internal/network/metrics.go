package network

// Gauges of the network stack for task metrics (Flink's inPoolUsage,
// outPoolUsage, inputQueueLength, outputQueueLength). Unlike the rest of a
// pool's and a partition's methods, these may be called from any goroutine
// while the owning task runs.

// BackpressureObserver is told when a writer of a ResultPartition starts and
// stops waiting for a free buffer in the middle of a record: time the task
// is backpressured. Both calls come from the writer's goroutine (the task's),
// in pairs; the end also comes when the wait ends with a panic.
type BackpressureObserver interface {
	BackpressureStarted()
	BackpressureEnded()
}

// SetBackpressureObserver makes writers blocked on a full pool tell o.
// Call it before the partition is used.
func (rp *ResultPartition) SetBackpressureObserver(o BackpressureObserver) { rp.observer = o }

// QueuedBuffers is the number of buffers, data and events, queued in the
// partition's subpartitions and not yet taken by their transport (the
// consumer had no credit for them). Partially filled buffers the writer
// still holds are not counted. Targets that cannot tell (test recorders)
// count 0.
func (rp *ResultPartition) QueuedBuffers() int {
	n := 0
	for _, t := range rp.targets {
		if q, ok := t.(interface{ Queued() int }); ok {
			n += q.Queued()
		}
	}
	return n
}

// Usage returns the number of buffers handed out and not yet recycled
// (overdraft included, so it may exceed size), and the pool's size.
func (p *Pool) Usage() (inUse, size int) { return int(p.out.Load()), p.size }

// BufferUsage returns the number of data buffers the gate received and the
// consumer has not released yet, and the most it can hold: the exclusive
// credit of every channel plus the floating credit.
func (g *InputGate) BufferUsage() (used, capacity int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.credit.Used(), g.credit.Capacity()
}

// Used is the number of data buffers received and not yet released, over
// every channel.
func (g *CreditGate) Used() int {
	n := 0
	for i := range g.chans {
		n += g.chans[i].queued
	}
	return n
}

// Capacity is the number of data buffers the gate can hold at most: the
// exclusive slots of every channel plus the floating ones.
func (g *CreditGate) Capacity() int { return g.exclusive*len(g.chans) + g.floatingTotal }
