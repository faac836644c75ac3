package nexmark

import (
	"fmt"
	"time"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/source"
)

// WatermarkDelay is the out-of-orderness bound of the watermarks Events
// generates: the watermark trails the highest event time a subtask emitted
// by this much. Each subtask emits its events in event-time order, so no
// event is ever late; the delay is the 4 seconds the Flink Nexmark
// benchmark's table definitions declare, so that queries see watermarks
// as they would there.
const WatermarkDelay = 4 * time.Second

// Source returns the Nexmark source of c: subtask k of p generates the
// contiguous range of event numbers [Events*k/p, Events*(k+1)/p), in
// order. It is source.Generator over Generate, so its readers are
// checkpointed the same way (a split's state is the next event number and
// the end of the range).
func Source(c Config) weir.Source[Event] {
	c = c.WithDefaults()
	return nexmarkSource{cfg: c, gen: source.Generator(c.Events, func(i int64) Event { return generate(&c, i) })}
}

type nexmarkSource struct {
	cfg Config
	gen weir.Source[Event]
}

func (s nexmarkSource) Name() string { return fmt.Sprintf("Nexmark(%d)", s.cfg.Events) }

func (s nexmarkSource) CreateReader(ctx weir.SourceContext) (weir.SourceReader[Event], error) {
	if s.cfg.Events <= 0 {
		return nil, fmt.Errorf("nexmark source: Events is %d, must be positive", s.cfg.Events)
	}
	r, err := s.gen.CreateReader(ctx)
	if err != nil {
		return nil, fmt.Errorf("nexmark source: %w", err)
	}
	return r, nil
}

// Events adds the Nexmark source of c to env: the source (UID
// "nexmark-source"), then event timestamps (Event.Timestamp) and
// watermarks bounded by WatermarkDelay, chained to it. Records cross
// network edges in EventCodec's encoding.
func Events(env *weir.Environment, c Config) *weir.DataStream[Event] {
	src := weir.FromSource(env, Source(c)).UID("nexmark-source").WithCodec(EventCodec())
	return weir.AssignTimestampsAndWatermarks(src,
		weir.BoundedOutOfOrderness(WatermarkDelay, Event.Timestamp)).WithCodec(EventCodec())
}
