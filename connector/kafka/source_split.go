package kafka

import (
	"encoding/binary"
	"fmt"
)

// splitVersion is the version of the split state encoding.
//
// Version 1: the version byte, the topic's length (uvarint) and bytes,
// the partition (int32), the next offset to read (int64) and the stopping
// offset (int64, -1 when unbounded), big endian.
const splitVersion = 1

// noStop is the stopping offset of an unbounded split.
const noStop = -1

// split is the state of one partition a reader holds.
type split struct {
	tp
	next int64 // the next offset to read
	stop int64 // the offset reading stops at (exclusive), or noStop
}

func (s split) finished() bool { return s.stop != noStop && s.next >= s.stop }

func (s split) encode() []byte {
	b := make([]byte, 0, 1+binary.MaxVarintLen64+len(s.topic)+20)
	b = append(b, splitVersion)
	b = binary.AppendUvarint(b, uint64(len(s.topic)))
	b = append(b, s.topic...)
	b = binary.BigEndian.AppendUint32(b, uint32(s.partition))
	b = binary.BigEndian.AppendUint64(b, uint64(s.next))
	return binary.BigEndian.AppendUint64(b, uint64(s.stop))
}

func decodeSplit(b []byte) (split, error) {
	if len(b) == 0 {
		return split{}, fmt.Errorf("kafka source: empty split state")
	}
	if b[0] != splitVersion {
		return split{}, fmt.Errorf("kafka source: split state of version %d: this weir reads version %d only (a checkpoint of a newer weir?)", b[0], splitVersion)
	}
	n, k := binary.Uvarint(b[1:])
	if k <= 0 || uint64(len(b)-1-k) != n+20 {
		return split{}, fmt.Errorf("kafka source: split state of %d bytes is malformed", len(b))
	}
	b = b[1+k:]
	s := split{tp: tp{topic: string(b[:n])}}
	b = b[n:]
	s.partition = int32(binary.BigEndian.Uint32(b))
	s.next = int64(binary.BigEndian.Uint64(b[4:]))
	s.stop = int64(binary.BigEndian.Uint64(b[12:]))
	if s.partition < 0 || s.next < 0 || s.stop < noStop {
		return split{}, fmt.Errorf("kafka source: split state %s next %d stop %d is out of range", s.tp, s.next, s.stop)
	}
	return s, nil
}
