package tcpnet

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/network"
)

// The wire format is described in the package doc.

const (
	magic           uint32 = 0x57454952 // "WEIR"
	protocolVersion uint16 = 1
)

// frameType is the byte after a frame's length.
type frameType uint8

const (
	frameHello frameType = iota + 1
	frameProof
	frameOpen
	frameCredit
	frameSize
	frameBacklog
	frameData
	frameEvent
	frameHeartbeat
)

// String names the frame type for errors.
func (t frameType) String() string {
	switch t {
	case frameHello:
		return "hello"
	case frameProof:
		return "proof"
	case frameOpen:
		return "open"
	case frameCredit:
		return "credit"
	case frameSize:
		return "size"
	case frameBacklog:
		return "backlog"
	case frameData:
		return "data"
	case frameEvent:
		return "event"
	case frameHeartbeat:
		return "heartbeat"
	}
	return fmt.Sprintf("type %d", uint8(t))
}

const (
	headerLen  = 5  // length:u32 type:u8
	channelLen = 20 // attempt:u64 edge:u32 from:u32 to:u32
	nonceLen   = 16
	proofLen   = 32
	// Body lengths (after the type byte).
	helloFixedLen = 4 + 2 + nonceLen + proofLen + 2
	controlLen    = channelLen + 4 // open, credit, size, backlog
	dataFixedLen  = channelLen + 1 + 4
	eventFixedLen = channelLen + 4 + 1 + 1 + 8 + 8 + 1 + 1 + 8 + 8 + 2
	maxTargetLen  = math.MaxUint16
	// maxFrameLen bounds the length field of any frame: data frames are
	// further bounded by the receiver's segment size.
	maxFrameLen = 1 << 30
)

// Event flags.
const (
	flagPriority = 1 << iota
	flagIdle
	flagUnaligned
	flagSynchronous
	flagDrain
	flagsKnown = flagPriority | flagIdle | flagUnaligned | flagSynchronous | flagDrain
)

// ChannelID names a channel among all the channels between two nodes: the
// job attempt, the edge of the job graph, and the producer and consumer
// subtasks (or whatever numbering of subpartitions and input channels the
// owner uses, as long as both sides agree).
type ChannelID struct {
	// Attempt is the job attempt: frames of another attempt never reach
	// this channel.
	Attempt uint64
	// Edge, From and To name the channel within the attempt.
	Edge, From, To uint32
}

// String renders the id for errors and logs.
func (id ChannelID) String() string {
	return fmt.Sprintf("attempt %d edge %d %d->%d", id.Attempt, id.Edge, id.From, id.To)
}

func appendHeader(dst []byte, t frameType, bodyLen int) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(1+bodyLen))
	return append(dst, byte(t))
}

func appendChannel(dst []byte, id ChannelID) []byte {
	dst = binary.BigEndian.AppendUint64(dst, id.Attempt)
	dst = binary.BigEndian.AppendUint32(dst, id.Edge)
	dst = binary.BigEndian.AppendUint32(dst, id.From)
	return binary.BigEndian.AppendUint32(dst, id.To)
}

func parseChannel(b []byte) ChannelID {
	return ChannelID{
		Attempt: binary.BigEndian.Uint64(b),
		Edge:    binary.BigEndian.Uint32(b[8:]),
		From:    binary.BigEndian.Uint32(b[12:]),
		To:      binary.BigEndian.Uint32(b[16:]),
	}
}

// u32 clamps a count into a u32 field.
func u32(n int) uint32 { return uint32(min(max(n, 0), math.MaxUint32)) }

// appendControl appends a whole open, credit, size or backlog frame.
func appendControl(dst []byte, t frameType, id ChannelID, n int) []byte {
	dst = appendHeader(dst, t, controlLen)
	dst = appendChannel(dst, id)
	return binary.BigEndian.AppendUint32(dst, u32(n))
}

// appendDataHeader appends a data frame up to its payload, len(payload)
// bytes.
func appendDataHeader(dst []byte, id ChannelID, kind network.Kind, backlog, payload int) []byte {
	dst = appendHeader(dst, frameData, dataFixedLen+payload)
	dst = appendChannel(dst, id)
	dst = append(dst, byte(kind))
	return binary.BigEndian.AppendUint32(dst, u32(backlog))
}

// appendEventHeader appends an event frame up to the checkpoint target,
// which follows it. Every field of network.Event and checkpoint.Options is
// encoded.
func appendEventHeader(dst []byte, id ChannelID, ev *network.Event, backlog int) ([]byte, error) {
	opts := &ev.Checkpoint
	if len(opts.Target) > maxTargetLen {
		return dst, fmt.Errorf("event %v of checkpoint %d: target of %d bytes is longer than %d", ev.Kind, ev.ID, len(opts.Target), maxTargetLen)
	}
	var flags byte
	for _, f := range []struct {
		set  bool
		flag byte
	}{{ev.Priority, flagPriority}, {ev.Idle, flagIdle}, {opts.Unaligned, flagUnaligned},
		{opts.Synchronous, flagSynchronous}, {opts.Drain, flagDrain}} {
		if f.set {
			flags |= f.flag
		}
	}
	dst = appendHeader(dst, frameEvent, eventFixedLen+len(opts.Target))
	dst = appendChannel(dst, id)
	dst = binary.BigEndian.AppendUint32(dst, u32(backlog))
	dst = append(dst, byte(ev.Kind), flags)
	dst = binary.BigEndian.AppendUint64(dst, uint64(ev.ID))
	dst = binary.BigEndian.AppendUint64(dst, uint64(ev.Timestamp))
	dst = append(dst, byte(opts.Kind), byte(opts.Format))
	dst = binary.BigEndian.AppendUint64(dst, uint64(opts.LastCompleted))
	dst = binary.BigEndian.AppendUint64(dst, uint64(opts.AlignedTimeout))
	return binary.BigEndian.AppendUint16(dst, uint16(len(opts.Target))), nil
}

// parseEventFixed decodes the fixed part of an event frame's body (after
// the channel) and returns the event, the backlog and the length of the
// target that follows.
func parseEventFixed(b []byte) (ev network.Event, backlog, targetLen int, err error) {
	backlog = int(binary.BigEndian.Uint32(b))
	b = b[4:]
	ev.Kind = network.EventKind(b[0])
	flags := b[1]
	ev.ID = int64(binary.BigEndian.Uint64(b[2:]))
	ev.Timestamp = int64(binary.BigEndian.Uint64(b[10:]))
	opts := &ev.Checkpoint
	opts.Kind = checkpoint.Kind(b[18])
	opts.Format = checkpoint.Format(b[19])
	opts.LastCompleted = int64(binary.BigEndian.Uint64(b[20:]))
	opts.AlignedTimeout = time.Duration(binary.BigEndian.Uint64(b[28:]))
	targetLen = int(binary.BigEndian.Uint16(b[36:]))
	ev.Priority = flags&flagPriority != 0
	ev.Idle = flags&flagIdle != 0
	opts.Unaligned = flags&flagUnaligned != 0
	opts.Synchronous = flags&flagSynchronous != 0
	opts.Drain = flags&flagDrain != 0
	switch {
	case ev.Kind < network.EventEndOfPartition || ev.Kind > network.EventAnnouncement:
		err = fmt.Errorf("unknown event kind %d", ev.Kind)
	case flags&^flagsKnown != 0:
		err = fmt.Errorf("unknown event flags %#x", flags&^flagsKnown)
	case opts.Kind > checkpoint.KindSavepoint:
		err = fmt.Errorf("unknown checkpoint kind %d", opts.Kind)
	case opts.Format > checkpoint.FormatNative:
		err = fmt.Errorf("unknown checkpoint format %d", opts.Format)
	}
	return ev, backlog, targetLen, err
}
