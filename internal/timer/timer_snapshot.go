package timer

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Timer snapshot format (version 1), written per key-group range:
//
//	magic    8 bytes "WEIRTMR\x00"
//	count    uvarint: number of timers
//	count × timer, in key-group order, then as ForEachInKeyGroup gives them:
//	  domain   1 byte: 1 event time, 2 processing time
//	  keygroup uvarint
//	  ts       varint (Unix ms)
//	  key      uvarint length + bytes
//	  ns       uvarint length + bytes
//
// The checkpoint file that holds it carries the checksum.

const snapMagic = "WEIRTMR\x00"

// ErrCorruptSnapshot is wrapped by RestoreSnapshot's errors for bytes that
// are not a timer snapshot.
var ErrCorruptSnapshot = errors.New("timer: corrupt snapshot")

// AppendSnapshot appends the timers of key groups start..end (inclusive) to
// dst, or returns dst unchanged when there are none.
func (s *Service) AppendSnapshot(dst []byte, start, end int) []byte {
	if s.NumEventTimeTimers()+s.NumProcessingTimeTimers() == 0 {
		return dst
	}
	var body []byte
	n := 0
	for kg := start; kg <= end; kg++ {
		s.ForEachInKeyGroup(kg, func(eventTime bool, t Timer) {
			n++
			if eventTime {
				body = append(body, 1)
			} else {
				body = append(body, 2)
			}
			body = binary.AppendUvarint(body, uint64(t.KeyGroup))
			body = binary.AppendVarint(body, t.Timestamp)
			body = binary.AppendUvarint(body, uint64(len(t.Key)))
			body = append(body, t.Key...)
			body = binary.AppendUvarint(body, uint64(len(t.Namespace)))
			body = append(body, t.Namespace...)
		})
	}
	if n == 0 {
		return dst
	}
	dst = append(dst, snapMagic...)
	dst = binary.AppendUvarint(dst, uint64(n))
	return append(dst, body...)
}

// RestoreSnapshot adds the timers of data whose key group is within
// start..end, and calls each for every restored timer (to arm
// processing-time wake-ups). It fails on malformed data without having
// restored a partial set only if the error is in the header.
func (s *Service) RestoreSnapshot(data []byte, start, end int, each func(eventTime bool, t Timer)) error {
	if len(data) < len(snapMagic) || string(data[:len(snapMagic)]) != snapMagic {
		return fmt.Errorf("%w: bad magic", ErrCorruptSnapshot)
	}
	p := data[len(snapMagic):]
	uv := func() (uint64, error) {
		v, k := binary.Uvarint(p)
		if k <= 0 {
			return 0, fmt.Errorf("%w: truncated", ErrCorruptSnapshot)
		}
		p = p[k:]
		return v, nil
	}
	bytesField := func() ([]byte, error) {
		l, err := uv()
		if err != nil {
			return nil, err
		}
		if uint64(len(p)) < l {
			return nil, fmt.Errorf("%w: truncated", ErrCorruptSnapshot)
		}
		b := append([]byte(nil), p[:l]...)
		p = p[l:]
		return b, nil
	}
	n, err := uv()
	if err != nil {
		return err
	}
	for range n {
		if len(p) == 0 {
			return fmt.Errorf("%w: truncated", ErrCorruptSnapshot)
		}
		domain := p[0]
		p = p[1:]
		if domain != 1 && domain != 2 {
			return fmt.Errorf("%w: unknown time domain %d", ErrCorruptSnapshot, domain)
		}
		kg, err := uv()
		if err != nil {
			return err
		}
		ts, k := binary.Varint(p)
		if k <= 0 {
			return fmt.Errorf("%w: truncated", ErrCorruptSnapshot)
		}
		p = p[k:]
		key, err := bytesField()
		if err != nil {
			return err
		}
		ns, err := bytesField()
		if err != nil {
			return err
		}
		if int(kg) < start || int(kg) > end {
			continue
		}
		t := Timer{Timestamp: ts, Key: key, KeyGroup: int(kg), Namespace: ns}
		s.Restore(domain == 1, t)
		if each != nil {
			each(domain == 1, t)
		}
	}
	if len(p) != 0 {
		return fmt.Errorf("%w: %d trailing bytes", ErrCorruptSnapshot, len(p))
	}
	return nil
}
