package network

// bufQueue is a FIFO with amortized O(1) push and pop; insert (priority
// events, rare) is O(n). It is not safe for concurrent use.
type bufQueue[T any] struct {
	items []T
	head  int
}

func (q *bufQueue[T]) len() int { return len(q.items) - q.head }
func (q *bufQueue[T]) peek() T  { return q.items[q.head] }

// at returns the i-th queued element, 0 being the head.
func (q *bufQueue[T]) at(i int) T { return q.items[q.head+i] }

func (q *bufQueue[T]) push(v T) {
	if q.head > 0 && q.head == len(q.items) {
		q.items, q.head = q.items[:0], 0
	}
	q.items = append(q.items, v)
}

func (q *bufQueue[T]) pop() T {
	var zero T
	v := q.items[q.head]
	q.items[q.head] = zero
	q.head++
	if q.head == len(q.items) {
		q.items, q.head = q.items[:0], 0
	}
	return v
}

// insert puts v so that i elements stay ahead of it (0: at the head).
func (q *bufQueue[T]) insert(i int, v T) {
	if i == 0 && q.head > 0 {
		q.head--
		q.items[q.head] = v
		return
	}
	var zero T
	q.items = append(q.items, zero)
	at := q.head + i
	copy(q.items[at+1:], q.items[at:])
	q.items[at] = v
}

// remove deletes the i-th queued element (0: the head).
func (q *bufQueue[T]) remove(i int) {
	var zero T
	at := q.head + i
	copy(q.items[at:], q.items[at+1:])
	q.items[len(q.items)-1] = zero
	q.items = q.items[:len(q.items)-1]
	if q.head == len(q.items) {
		q.items, q.head = q.items[:0], 0
	}
}
