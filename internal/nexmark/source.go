package nexmark

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/weirstream/weir"
)

// WatermarkDelay is the out-of-orderness bound of the watermarks Events
// generates: the watermark trails the highest event time a subtask emitted
// by this much. Each subtask emits its events in event-time order, so no
// event is ever late; the delay is the 4 seconds the Flink Nexmark
// benchmark's table definitions declare, so that queries see watermarks
// as they would there.
const WatermarkDelay = 4 * time.Second

// batchSize is how many events a reader emits per ReadBatch call.
const batchSize = 1024

// Source returns the Nexmark source of c: subtask k of p generates the
// contiguous range of event numbers [Events*k/p, Events*(k+1)/p), in
// order, as one split. Its readers are checkpointed
// (weir.CheckpointedReader): a split's state is 16 bytes, the next event
// number and the end of the range, both big endian; after a restore a
// reader resumes exactly the splits it is given.
func Source(c Config) weir.Source[Event] { return source{cfg: c.WithDefaults()} }

type source struct{ cfg Config }

func (s source) Name() string { return fmt.Sprintf("Nexmark(%d)", s.cfg.Events) }

func (s source) CreateReader(ctx weir.SourceContext) (weir.SourceReader[Event], error) {
	if s.cfg.Events <= 0 {
		return nil, fmt.Errorf("nexmark source: Events is %d, must be positive", s.cfg.Events)
	}
	if ctx.Parallelism <= 0 || ctx.Subtask < 0 || ctx.Subtask >= ctx.Parallelism {
		return nil, fmt.Errorf("nexmark source: subtask %d of %d", ctx.Subtask, ctx.Parallelism)
	}
	r := &reader{cfg: s.cfg}
	if ctx.RestoredSplits == nil {
		n, k, p := s.cfg.Events, int64(ctx.Subtask), int64(ctx.Parallelism)
		r.splits = []split{{next: n * k / p, end: n * (k + 1) / p}}
		return r, nil
	}
	r.splits = make([]split, 0, len(ctx.RestoredSplits))
	for _, b := range ctx.RestoredSplits {
		sp, err := decodeSplit(b)
		if err != nil {
			return nil, fmt.Errorf("nexmark source: restore: %w", err)
		}
		if sp.next < 0 || sp.next > sp.end || sp.end > s.cfg.Events {
			return nil, fmt.Errorf("nexmark source: restore: split [%d, %d) outside [0, %d)", sp.next, sp.end, s.cfg.Events)
		}
		r.splits = append(r.splits, sp)
	}
	return r, nil
}

// split is the half-open range of event numbers still to emit.
type split struct{ next, end int64 }

func (s split) encode() []byte {
	b := binary.BigEndian.AppendUint64(make([]byte, 0, 16), uint64(s.next))
	return binary.BigEndian.AppendUint64(b, uint64(s.end))
}

func decodeSplit(b []byte) (split, error) {
	if len(b) != 16 {
		return split{}, fmt.Errorf("split state of %d bytes, want 16", len(b))
	}
	return split{int64(binary.BigEndian.Uint64(b)), int64(binary.BigEndian.Uint64(b[8:]))}, nil
}

type reader struct {
	cfg    Config
	splits []split
}

func (r *reader) ReadBatch(out weir.Collector[Event]) (weir.ReadStatus, error) {
	for len(r.splits) > 0 && r.splits[0].next >= r.splits[0].end {
		r.splits = r.splits[1:]
	}
	if len(r.splits) == 0 {
		return weir.EndOfInput, nil
	}
	sp := &r.splits[0]
	stop := min(sp.next+batchSize, sp.end)
	for i := sp.next; i < stop; i++ {
		out.Collect(generate(&r.cfg, i))
	}
	sp.next = stop
	return weir.MoreAvailable, nil
}

func (r *reader) SnapshotSplits() ([][]byte, error) {
	out := make([][]byte, 0, len(r.splits))
	for _, sp := range r.splits {
		if sp.next < sp.end {
			out = append(out, sp.encode())
		}
	}
	return out, nil
}

func (r *reader) Close() error { return nil }

// Events adds the Nexmark source of c to env: the source (UID
// "nexmark-source"), then event timestamps (Event.Timestamp) and
// watermarks bounded by WatermarkDelay, chained to it. Records cross
// network edges in EventCodec's encoding.
func Events(env *weir.Environment, c Config) *weir.DataStream[Event] {
	src := weir.FromSource(env, Source(c)).UID("nexmark-source").WithCodec(EventCodec())
	return weir.AssignTimestampsAndWatermarks(src,
		weir.BoundedOutOfOrderness(WatermarkDelay, Event.Timestamp)).WithCodec(EventCodec())
}
