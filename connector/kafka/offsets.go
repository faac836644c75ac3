package kafka

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// OffsetsInitializer says where a partition starts being read the first
// time the source takes it (Flink's OffsetsInitializer). From then on the
// checkpoint holds the partition's offset. The zero value is Earliest.
type OffsetsInitializer struct {
	kind    offsetsKind
	ts      time.Time
	offsets map[string]map[int32]int64
	reset   offsetsKind // for committed and explicit offsets: earliest or latest
}

type offsetsKind uint8

const (
	offsetsEarliest offsetsKind = iota
	offsetsLatest
	offsetsCommitted
	offsetsTimestamp
	offsetsExplicit
)

// Earliest starts at the earliest offset still in the log.
func Earliest() OffsetsInitializer { return OffsetsInitializer{kind: offsetsEarliest} }

// Latest starts at the end of the log: only records produced afterwards
// are read (with read_committed isolation, the last stable offset).
func Latest() OffsetsInitializer { return OffsetsInitializer{kind: offsetsLatest} }

// Committed starts at the offset committed to SourceOptions.GroupID, or
// where reset says for a partition the group has no offset of. reset must
// be Earliest or Latest. A committed offset outside the log is moved into
// it, as with Offsets.
func Committed(reset OffsetsInitializer) OffsetsInitializer {
	return OffsetsInitializer{kind: offsetsCommitted, reset: reset.kind}
}

// Timestamp starts at the first record whose timestamp is at or after t,
// or at the end of the log if there is none. With ReadCommitted isolation
// it starts at the last stable offset at the latest, so that the records
// of a transaction open at start are read once it commits.
func Timestamp(t time.Time) OffsetsInitializer {
	return OffsetsInitializer{kind: offsetsTimestamp, ts: t}
}

// Offsets starts at the offsets in m (topic, partition, offset), or where
// reset says for a partition m lacks. reset must be Earliest or Latest.
// An offset before the log start (deleted by retention) is moved to the
// log start, one past the log end (the high watermark) to the end.
func Offsets(m map[string]map[int32]int64, reset OffsetsInitializer) OffsetsInitializer {
	return OffsetsInitializer{kind: offsetsExplicit, offsets: m, reset: reset.kind}
}

func (o OffsetsInitializer) String() string {
	switch o.kind {
	case offsetsEarliest:
		return "Earliest()"
	case offsetsLatest:
		return "Latest()"
	case offsetsCommitted:
		return fmt.Sprintf("Committed(%s)", OffsetsInitializer{kind: o.reset})
	case offsetsTimestamp:
		return fmt.Sprintf("Timestamp(%s)", o.ts.Format(time.RFC3339Nano))
	default:
		return fmt.Sprintf("Offsets(%d topics, %s)", len(o.offsets), OffsetsInitializer{kind: o.reset})
	}
}

// validate reports a misuse of the initializer.
func (o OffsetsInitializer) validate(group string) error {
	switch o.kind {
	case offsetsCommitted, offsetsExplicit:
		if o.reset != offsetsEarliest && o.reset != offsetsLatest {
			return fmt.Errorf("kafka source: StartingOffsets %s: the reset must be Earliest() or Latest()", o)
		}
		if o.kind == offsetsCommitted && group == "" {
			return errors.New("kafka source: StartingOffsets Committed(...) needs the consumer group whose offsets it reads: set GroupID")
		}
		for t, ps := range o.offsets {
			for p, off := range ps {
				if off < 0 {
					return fmt.Errorf("kafka source: StartingOffsets: offset %d of %s/%d is negative: want an offset >= 0", off, t, p)
				}
			}
		}
	case offsetsEarliest, offsetsLatest, offsetsTimestamp:
	default:
		return fmt.Errorf("kafka source: StartingOffsets: unknown initializer %d", o.kind)
	}
	return nil
}

// partitions is a set of partitions by topic.
type partitions map[string][]int32

func (ps partitions) topics() []string {
	out := make([]string, 0, len(ps))
	for t := range ps {
		out = append(out, t)
	}
	return out
}

// resolve returns the starting offset of each partition in ps.
func (o OffsetsInitializer) resolve(ctx context.Context, adm *kadm.Client, group string, committed bool, ps partitions) (map[tp]int64, error) {
	out := make(map[tp]int64)
	if len(ps) == 0 {
		return out, nil
	}
	var need partitions // partitions left to the reset
	switch o.kind {
	case offsetsEarliest, offsetsLatest:
		need = ps
	case offsetsTimestamp:
		l, err := adm.ListOffsetsAfterMilli(ctx, o.ts.UnixMilli(), ps.topics()...)
		if err := listedErr(l, err); err != nil {
			return nil, fmt.Errorf("offsets at %s: %w", o.ts.Format(time.RFC3339Nano), err)
		}
		if err := take(out, l, ps); err != nil {
			return nil, err
		}
		if committed {
			// The listing is at read_uncommitted and falls back to the
			// high watermark: past the records of a transaction open
			// now, which read_committed reads once it commits.
			lso, err := adm.ListCommittedOffsets(ctx, ps.topics()...)
			if err := listedErr(lso, err); err != nil {
				return nil, fmt.Errorf("last stable offsets: %w", err)
			}
			for p, off := range out {
				if e, ok := lso.Lookup(p.topic, p.partition); ok && e.Offset >= 0 && e.Offset < off {
					out[p] = e.Offset
				}
			}
		}
		return out, nil
	case offsetsCommitted:
		r, err := adm.FetchOffsetsForTopics(ctx, group, ps.topics()...)
		if err == nil {
			err = r.Error()
		}
		if err != nil {
			return nil, fmt.Errorf("committed offsets of group %q: %w", group, err)
		}
		need = partitions{}
		for t, list := range ps {
			for _, p := range list {
				if c, ok := r.Lookup(t, p); ok && c.At >= 0 {
					out[tp{t, p}] = c.At
				} else {
					need[t] = append(need[t], p)
				}
			}
		}
	case offsetsExplicit:
		need = partitions{}
		for t, list := range ps {
			for _, p := range list {
				if off, ok := o.offsets[t][p]; ok {
					out[tp{t, p}] = off
				} else {
					need[t] = append(need[t], p)
				}
			}
		}
	}
	if o.kind == offsetsCommitted || o.kind == offsetsExplicit {
		if err := clampToLog(ctx, adm, out); err != nil {
			return nil, err
		}
	}
	if len(need) == 0 {
		return out, nil
	}
	kind := o.kind
	if kind != offsetsEarliest && kind != offsetsLatest {
		kind = o.reset
	}
	var l kadm.ListedOffsets
	var err error
	if kind == offsetsEarliest {
		l, err = adm.ListStartOffsets(ctx, need.topics()...)
	} else {
		l, err = endOffsets(ctx, adm, committed, need.topics())
	}
	if err := listedErr(l, err); err != nil {
		return nil, fmt.Errorf("%s offsets: %w", OffsetsInitializer{kind: kind}, err)
	}
	if err := take(out, l, need); err != nil {
		return nil, err
	}
	return out, nil
}

// clampToLog moves each offset in offs into its partition's log: one
// before the log start to the start, one past the end (the high
// watermark) to the end. Else the client would reset an offset past the
// end to the log start, and the records before the offset asked for
// would be read too.
func clampToLog(ctx context.Context, adm *kadm.Client, offs map[tp]int64) error {
	if len(offs) == 0 {
		return nil
	}
	starts, ends, err := logBounds(ctx, adm, offs)
	if err != nil {
		return err
	}
	for p, off := range offs {
		s, _ := starts.Lookup(p.topic, p.partition)
		e, _ := ends.Lookup(p.topic, p.partition)
		offs[p] = min(max(off, s.Offset), e.Offset)
	}
	return nil
}

// logBounds lists the log start and end (high watermark) of the
// partitions in offs; each is listed.
func logBounds(ctx context.Context, adm *kadm.Client, offs map[tp]int64) (starts, ends kadm.ListedOffsets, err error) {
	topics := map[string]bool{}
	for p := range offs {
		topics[p.topic] = true
	}
	names := make([]string, 0, len(topics))
	for t := range topics {
		names = append(names, t)
	}
	starts, err = adm.ListStartOffsets(ctx, names...)
	if err := listedErr(starts, err); err != nil {
		return nil, nil, fmt.Errorf("log start offsets: %w", err)
	}
	ends, err = adm.ListEndOffsets(ctx, names...)
	if err := listedErr(ends, err); err != nil {
		return nil, nil, fmt.Errorf("log end offsets: %w", err)
	}
	for p := range offs {
		s, ok1 := starts.Lookup(p.topic, p.partition)
		e, ok2 := ends.Lookup(p.topic, p.partition)
		if !ok1 || !ok2 || s.Offset < 0 || e.Offset < 0 {
			return nil, nil, fmt.Errorf("partition %s: no log start or end listed (does it exist?)", p)
		}
	}
	return starts, ends, nil
}

// endOffsets lists the end of each partition of topics: the last stable
// offset with read_committed isolation, else the high watermark.
func endOffsets(ctx context.Context, adm *kadm.Client, committed bool, topics []string) (kadm.ListedOffsets, error) {
	if committed {
		return adm.ListCommittedOffsets(ctx, topics...)
	}
	return adm.ListEndOffsets(ctx, topics...)
}

// take copies the listed offsets of ps into out.
func take(out map[tp]int64, l kadm.ListedOffsets, ps partitions) error {
	for t, list := range ps {
		for _, p := range list {
			o, ok := l.Lookup(t, p)
			if !ok || o.Offset < 0 {
				return fmt.Errorf("no offset listed for %s/%d", t, p)
			}
			out[tp{t, p}] = o.Offset
		}
	}
	return nil
}

// listedErr is the first error of a listing.
func listedErr(l kadm.ListedOffsets, err error) error {
	if err != nil {
		return err
	}
	return l.Error()
}
