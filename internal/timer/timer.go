// Package timer is the timer service of one keyed operator subtask, the
// counterpart of Apache Flink's InternalTimerService.
//
// A timer is identified by its timestamp, key and namespace (a window, or
// empty): registering the same triple twice keeps one timer. Each timer also
// carries the key group of its key, so the timers of a key-group range can be
// snapshotted and restored on their own when a job is rescaled.
//
// There are two time domains, event time and processing time, each a 4-ary
// min-heap ordered by (timestamp, key bytes, namespace bytes), so timers with
// equal timestamps fire in a deterministic order. A hash index on the
// identity makes registration idempotent and, with each entry knowing its
// heap position, deletion O(log n); a list per key group, whose entries also
// know their position, serves ForEachInKeyGroup. The hash seed is random per
// Service, but nothing observable depends on it.
//
// Firing follows Flink: AdvanceWatermark and AdvanceProcessingTime take each
// due timer out of its queue before calling fire, and keep going while the
// earliest timer is due, so a timer registered by fire at or before the
// current time fires in the same call. A fire that re-registers its own timer
// at or before the current time therefore loops forever, as in Flink.
//
// A Service is not safe for concurrent use; the task goroutine owns it.
package timer

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"math"
	"slices"

	"github.com/weirstream/weir/internal/keygroup"
)

// Timer is a timer of one key and namespace.
//
// Key is the encoded key and Namespace the encoded namespace, empty when the
// operator uses none. KeyGroup is the key group of Key (see package
// keygroup); it is not part of the identity, since the key determines it, and
// registering panics unless 0 <= KeyGroup < keygroup.UpperBoundMaxParallelism.
//
// The Service copies Key and Namespace when it stores a timer. The ones it
// passes back are its own: they must not be modified, and stay valid after
// the timer fires or is deleted. Empty Key and Namespace come back as nil.
type Timer struct {
	Timestamp int64 // milliseconds
	Key       []byte
	KeyGroup  int
	Namespace []byte
}

// Compare orders timers by timestamp, then key bytes, then namespace bytes:
// the order in which a Service fires timers. It returns -1, 0 or +1.
func Compare(a, b Timer) int {
	switch {
	case a.Timestamp < b.Timestamp:
		return -1
	case a.Timestamp > b.Timestamp:
		return +1
	}
	if c := bytes.Compare(a.Key, b.Key); c != 0 {
		return c
	}
	return bytes.Compare(a.Namespace, b.Namespace)
}

// Service holds the event-time and processing-time timers of one subtask.
//
// The zero value is not usable; call NewService.
type Service struct {
	event      queue
	processing queue
	watermark  int64
	seed       maphash.Seed
	hashMask   uint64 // all ones; tests clear bits to force collisions
	scratch    []byte // identity of the timer being hashed
}

// NewService returns a Service with no timers and no watermark
// (CurrentWatermark is math.MinInt64).
func NewService() *Service {
	return &Service{
		event:      newQueue(),
		processing: newQueue(),
		watermark:  math.MinInt64,
		seed:       maphash.MakeSeed(),
		hashMask:   math.MaxUint64,
	}
}

// RegisterEventTime adds an event-time timer unless one with the same
// timestamp, key and namespace exists. A timer at or before the current
// watermark fires on the next AdvanceWatermark, or within the running one
// when called from fire.
func (s *Service) RegisterEventTime(t Timer) { s.register(&s.event, t) }

// DeleteEventTime removes the event-time timer with t's timestamp, key and
// namespace, if there is one.
func (s *Service) DeleteEventTime(t Timer) { s.delete(&s.event, t) }

// RegisterProcessingTime adds a processing-time timer unless one with the
// same timestamp, key and namespace exists. The caller arms its clock for
// NextProcessingTime.
func (s *Service) RegisterProcessingTime(t Timer) { s.register(&s.processing, t) }

// DeleteProcessingTime removes the processing-time timer with t's timestamp,
// key and namespace, if there is one.
func (s *Service) DeleteProcessingTime(t Timer) { s.delete(&s.processing, t) }

// AdvanceWatermark records wm as the current watermark and fires, in Compare
// order, every event-time timer with Timestamp <= wm, calling fire for each
// after removing it. fire may register and delete timers; due ones it
// registers fire in this call. fire must not call AdvanceWatermark or
// AdvanceProcessingTime. The first error from fire stops the call and is
// returned as is; the timer that failed has been removed and the others stay.
func (s *Service) AdvanceWatermark(wm int64, fire func(Timer) error) error {
	s.watermark = wm
	return s.event.fireUntil(wm, fire)
}

// CurrentWatermark returns the watermark of the last AdvanceWatermark, or
// math.MinInt64 before the first.
func (s *Service) CurrentWatermark() int64 { return s.watermark }

// AdvanceProcessingTime fires, in Compare order, every processing-time timer
// with Timestamp <= now; see AdvanceWatermark for the contract of fire.
func (s *Service) AdvanceProcessingTime(now int64, fire func(Timer) error) error {
	return s.processing.fireUntil(now, fire)
}

// NextProcessingTime returns the timestamp of the earliest processing-time
// timer, and false if there is none.
func (s *Service) NextProcessingTime() (int64, bool) {
	if len(s.processing.heap) == 0 {
		return 0, false
	}
	return s.processing.heap[0].ts, true
}

// NumEventTimeTimers returns the number of event-time timers.
func (s *Service) NumEventTimeTimers() int { return len(s.event.heap) }

// NumProcessingTimeTimers returns the number of processing-time timers.
func (s *Service) NumProcessingTimeTimers() int { return len(s.processing.heap) }

// ForEachInKeyGroup calls fn for every timer of key group kg: first the
// event-time timers, then the processing-time ones, each in Compare order, so
// a snapshot of the same timers is always written the same way. fn must not
// register or delete timers.
func (s *Service) ForEachInKeyGroup(kg int, fn func(eventTime bool, t Timer)) {
	for _, q := range [...]*queue{&s.event, &s.processing} {
		es := slices.Clone(q.keyGroup(kg))
		slices.SortFunc(es, func(a, b *entry) int { return Compare(a.t, b.t) })
		for _, e := range es {
			fn(q == &s.event, e.t)
		}
	}
}

// Restore adds a timer read from a snapshot; it is RegisterEventTime or
// RegisterProcessingTime as eventTime says.
func (s *Service) Restore(eventTime bool, t Timer) {
	if eventTime {
		s.RegisterEventTime(t)
	} else {
		s.RegisterProcessingTime(t)
	}
}

func (s *Service) register(q *queue, t Timer) {
	if t.KeyGroup < 0 || t.KeyGroup >= keygroup.UpperBoundMaxParallelism {
		panic(fmt.Sprintf("timer: key group %d out of range [0, %d)", t.KeyGroup, keygroup.UpperBoundMaxParallelism))
	}
	h := s.hash(t)
	if q.find(h, t) != nil {
		return
	}
	// One allocation holds both byte strings.
	buf := make([]byte, len(t.Key)+len(t.Namespace))
	copy(buf, t.Key)
	copy(buf[len(t.Key):], t.Namespace)
	e := &entry{t: Timer{Timestamp: t.Timestamp, KeyGroup: t.KeyGroup}, hash: h}
	if len(t.Key) > 0 {
		e.t.Key = buf[:len(t.Key):len(t.Key)]
	}
	if len(t.Namespace) > 0 {
		e.t.Namespace = buf[len(t.Key):]
	}
	q.push(e)
}

func (s *Service) delete(q *queue, t Timer) {
	if e := q.find(s.hash(t), t); e != nil {
		q.remove(e)
	}
}

// hash hashes the identity of t.
func (s *Service) hash(t Timer) uint64 {
	s.scratch = appendID(s.scratch[:0], t)
	return maphash.Bytes(s.seed, s.scratch) & s.hashMask
}

// appendID appends the identity of t, to be hashed: the big-endian
// timestamp, the uvarint length of the key, the key, and the namespace.
func appendID(dst []byte, t Timer) []byte {
	dst = binary.BigEndian.AppendUint64(dst, uint64(t.Timestamp))
	dst = binary.AppendUvarint(dst, uint64(len(t.Key)))
	dst = append(dst, t.Key...)
	return append(dst, t.Namespace...)
}
