package upload

// pendingByCheckpoint holds a value per checkpoint until the checkpoint is
// decided. Completions are notified in checkpoint order, so completing
// checkpoint id also decides every older one (they did not complete); a
// value reported for a decided checkpoint (an asynchronous phase that ended
// after its checkpoint was aborted) is refused. It is not safe for
// concurrent use: its owners hold their own lock.
type pendingByCheckpoint[V any] struct {
	values       map[int64]V
	lastComplete int64
	aborted      map[int64]bool
}

func newPendingByCheckpoint[V any]() pendingByCheckpoint[V] {
	return pendingByCheckpoint[V]{values: map[int64]V{}, aborted: map[int64]bool{}}
}

// decided reports whether checkpoint id completed, was aborted, or is older
// than a completed one.
func (p *pendingByCheckpoint[V]) decided(id int64) bool {
	return id <= p.lastComplete || p.aborted[id]
}

// add records v for checkpoint id unless id is decided, and reports whether
// it did.
func (p *pendingByCheckpoint[V]) add(id int64, v V) bool {
	if p.decided(id) {
		return false
	}
	p.values[id] = v
	return true
}

// complete decides checkpoint id (and every older one) and returns its
// value.
func (p *pendingByCheckpoint[V]) complete(id int64) (V, bool) {
	v, ok := p.values[id]
	for cid := range p.values {
		if cid <= id {
			delete(p.values, cid)
		}
	}
	for cid := range p.aborted {
		if cid <= id {
			delete(p.aborted, cid)
		}
	}
	p.lastComplete = max(p.lastComplete, id)
	return v, ok
}

// abort decides checkpoint id and drops its value.
func (p *pendingByCheckpoint[V]) abort(id int64) {
	delete(p.values, id)
	if id > p.lastComplete {
		p.aborted[id] = true
	}
}
