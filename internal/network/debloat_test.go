package network

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirstream/weir/codec"
)

// debloatStep feeds a Debloater the counters at ms milliseconds and
// expects what it returns.
type debloatStep struct {
	ms       int   // time since the start
	consumed int64 // bytes consumed so far
	idleMs   int   // idle time so far
	size     int   // 0: the size announced before
	announce bool
}

// With the base config (target 1s, 10 buffers, period 200ms) a fully active
// period that consumed 2*S bytes measures a throughput of 10*S bytes per
// second, so the size it asks for is S.
func baseDebloat() DebloatConfig {
	return DebloatConfig{Target: time.Second, Period: 200 * time.Millisecond, Samples: 1,
		ThresholdPercentages: 0, MinSize: 256, MaxSize: 32768, Buffers: 10}
}

func TestDebloater(t *testing.T) {
	cfg := func(f func(*DebloatConfig)) DebloatConfig {
		c := baseDebloat()
		if f != nil {
			f(&c)
		}
		return c
	}
	for _, tc := range []struct {
		name  string
		cfg   DebloatConfig
		steps []debloatStep
	}{{
		name: "the first call starts the measurement, nothing before a period",
		cfg:  cfg(nil),
		steps: []debloatStep{
			{ms: 0, consumed: 0, size: 32768},
			{ms: 199, consumed: 2000, size: 32768},
			{ms: 200, consumed: 2000, size: 1000, announce: true},
		},
	}, {
		name: "throughput falls, the size falls and is clamped to the minimum",
		cfg:  cfg(nil),
		steps: []debloatStep{
			{ms: 0},
			{ms: 200, consumed: 20000, size: 10000, announce: true},
			{ms: 400, consumed: 30000, size: 5000, announce: true},
			{ms: 600, consumed: 31000, size: 500, announce: true},
			{ms: 800, consumed: 31100, size: 256, announce: true}, // asks for 50
			{ms: 1000, consumed: 31100, size: 256},                // nothing consumed: 0, still the minimum
		},
	}, {
		name: "clamped to the segment size",
		cfg:  cfg(nil),
		steps: []debloatStep{
			{ms: 0},
			{ms: 200, consumed: 20000, size: 10000, announce: true},
			{ms: 400, consumed: 20000 + 2*20000, size: 20000, announce: true},
			{ms: 600, consumed: 60000 + 2*40000, size: 32768, announce: true}, // asks for 40000
		},
	}, {
		name: "changes within the threshold are not announced",
		cfg:  cfg(func(c *DebloatConfig) { c.ThresholdPercentages = 25 }),
		steps: []debloatStep{
			{ms: 0},
			{ms: 200, consumed: 20000, size: 10000, announce: true},
			{ms: 400, consumed: 20000 + 2*8000, size: 10000},                 // 20% less
			{ms: 600, consumed: 36000 + 2*12500, size: 10000},                // exactly 25% more
			{ms: 800, consumed: 61000 + 2*7400, size: 7400, announce: true},  // 26% less
			{ms: 1000, consumed: 75800 + 2*9000, size: 7400},                 // 21.6% more
			{ms: 1200, consumed: 93800 + 2*300, size: 300, announce: true},   // far less
			{ms: 1400, consumed: 94400 + 2*200, size: 256, announce: true},   // 14.7% less, but the minimum
			{ms: 1600, consumed: 94800 + 2*32000, size: 512, announce: true}, // growth: at most twice the average
		},
	}, {
		name: "a bound is announced even within the threshold",
		cfg:  cfg(func(c *DebloatConfig) { c.ThresholdPercentages = 25 }),
		steps: []debloatStep{
			{ms: 0},
			{ms: 200, consumed: 2 * 10000, size: 10000, announce: true},
			{ms: 400, consumed: 20000 + 2*20000, size: 20000, announce: true},
			{ms: 600, consumed: 60000 + 2*26500, size: 26500, announce: true},
			{ms: 800, consumed: 113000 + 2*40000, size: 32768, announce: true}, // 23.6% more, but the maximum
		},
	}, {
		name: "a threshold of 100% announces no decrease",
		cfg:  cfg(func(c *DebloatConfig) { c.ThresholdPercentages = 100 }),
		steps: []debloatStep{
			{ms: 0},
			{ms: 200, consumed: 2000, size: 32768},
			{ms: 400, consumed: 2600, size: 32768},
		},
	}, {
		name: "samples: an exponential moving average over them",
		cfg:  cfg(func(c *DebloatConfig) { c.Samples = 20 }), // alpha = 2/21
		steps: []debloatStep{
			{ms: 0},
			// Nothing consumed asks for 0: the size shrinks by 2/21 of
			// itself per period (Flink's example: 32768, 29647, 26823, truncated).
			{ms: 200, size: 29647, announce: true},
			{ms: 400, size: 26824, announce: true},
			// One period at the old throughput moves it back by 2/21 of
			// the way only.
			{ms: 600, consumed: 2 * 32768, size: 27390, announce: true},
		},
	}, {
		name: "samples: three periods average",
		cfg:  cfg(func(c *DebloatConfig) { c.Samples = 3 }), // alpha = 1/2
		steps: []debloatStep{
			{ms: 0},
			{ms: 200, consumed: 2 * 4000, size: 18384, announce: true},
			{ms: 400, consumed: 4 * 4000, size: 11192, announce: true},
			{ms: 600, consumed: 6 * 4000, size: 7596, announce: true},
			{ms: 800, consumed: 8 * 4000, size: 5798, announce: true},
		},
	}, {
		name: "idle time is not measured",
		cfg:  cfg(nil),
		steps: []debloatStep{
			{ms: 0, idleMs: 50},
			// 100ms active of 200: 1000 bytes in 100ms, 10000 bytes/s.
			{ms: 200, consumed: 1000, idleMs: 150, size: 1000, announce: true},
			// Idle throughout: nothing measured, nothing changes.
			{ms: 400, consumed: 1000, idleMs: 350, size: 1000},
			{ms: 600, consumed: 1000 + 2*2000, idleMs: 350, size: 2000, announce: true},
		},
	}, {
		name: "late calls measure the whole time since the last",
		cfg:  cfg(nil),
		steps: []debloatStep{
			{ms: 0},
			{ms: 1000, consumed: 10 * 1000, size: 1000, announce: true},
			{ms: 1100, consumed: 10 * 1000, size: 1000},
			{ms: 1300, consumed: 10*1000 + 3*1500, size: 1500, announce: true}, // 300ms
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			d := NewDebloater(tc.cfg)
			start := time.Unix(1000, 0)
			prev := tc.cfg.MaxSize
			for i, s := range tc.steps {
				if s.size == 0 {
					s.size = prev
				}
				prev = s.size
				now := start.Add(time.Duration(s.ms) * time.Millisecond)
				due := d.Due(now)
				size, announce := d.Sample(now, s.consumed, time.Duration(s.idleMs)*time.Millisecond)
				if !due && announce {
					t.Fatalf("step %d: announced while not Due", i)
				}
				if size != s.size || announce != s.announce {
					t.Fatalf("step %d (%+v): got size %d, announce %v (throughput %.0f B/s)", i, s, size, announce, d.Throughput())
				}
				if d.Size() != size {
					t.Fatalf("step %d: Size() = %d, want the announced %d", i, d.Size(), size)
				}
			}
		})
	}
}

func TestDebloaterInvalidConfig(t *testing.T) {
	for _, f := range []func(*DebloatConfig){
		func(c *DebloatConfig) { c.Target = 0 },
		func(c *DebloatConfig) { c.Period = 0 },
		func(c *DebloatConfig) { c.Samples = 0 },
		func(c *DebloatConfig) { c.ThresholdPercentages = -1 },
		func(c *DebloatConfig) { c.MinSize = 0 },
		func(c *DebloatConfig) { c.MaxSize = c.MinSize - 1 },
		func(c *DebloatConfig) { c.Buffers = 0 },
	} {
		c := baseDebloat()
		f(&c)
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("NewDebloater(%+v) did not panic", c)
				}
			}()
			NewDebloater(c)
		}()
	}
}

// pollData polls every buffer g has and returns the data buffers' kinds
// and lengths, as "len" or "F len"/"E len" for fragments, releasing them.
func pollData(g *InputGate) []string {
	var got []string
	for {
		ch, b, ok := g.Poll()
		if !ok {
			return got
		}
		if !b.IsData() {
			continue
		}
		switch b.Kind {
		case KindFragment:
			got = append(got, fmt.Sprintf("F%d", len(b.Data)))
		case KindFragmentEnd:
			got = append(got, fmt.Sprintf("E%d", len(b.Data)))
		default:
			got = append(got, fmt.Sprint(len(b.Data)))
		}
		g.Release(ch, b)
	}
}

// A size the consumer's gate announces travels through the local
// connection to the subpartition, and the producer cuts the channel's data
// buffers once they hold at least that many bytes: records stay whole, and
// a record larger than a segment is fragmented as before.
func TestSenderCutsAtAnnouncedSize(t *testing.T) {
	const segment = 256
	for _, tc := range []struct {
		name     string
		announce int // 0: none
		records  []int
		bcast    bool // Broadcast instead of Emit
		want     string
	}{
		// A string record of n bytes is n+1 bytes encoded.
		{name: "none: buffers are sent full", records: []int{99, 99, 99, 99, 99}, want: "200 200 100"},
		{name: "cut at 100", announce: 100, records: []int{49, 49, 49, 99, 9, 9, 9}, want: "100 150 30"},
		{name: "at least the size: records are not split", announce: 100, records: []int{69, 69, 69, 19}, want: "140 90"},
		{name: "broadcast", announce: 100, records: []int{69, 69, 69, 19}, bcast: true, want: "140 90"},
		{name: "a record over the size", announce: 100, records: []int{9, 199, 9}, want: "211 10"},
		{name: "a record that does not fit", announce: 100, records: []int{9, 249, 9}, want: "10 251 10"},
		{name: "fragments stay fragments", announce: 100, records: []int{9, 599, 9}, want: "10 F256 F256 E89 10"},
		{name: "the minimum", announce: 1, records: []int{0, 0, 3}, want: "1 1 4"},
		{name: "the segment size", announce: segment, records: []int{99, 99, 99, 99, 99}, want: "200 200 100"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewInputGate(1, 2, 8)
			sub := NewPipelinedSubpartition()
			ConnectLocal(sub, g, 0)
			rp := NewResultPartition(context.Background(), NewPool(20, segment), []Target{sub})
			w := NewRecordWriter(rp, codec.String())
			if tc.announce > 0 {
				g.AnnounceBufferSize(tc.announce)
				if got := sub.BufferSizeLimit().Load(); got != int32(tc.announce) {
					t.Fatalf("subpartition's limit %d, want %d", got, tc.announce)
				}
			}
			var got []string
			for _, n := range tc.records {
				if tc.bcast {
					w.Broadcast(strings.Repeat("x", n))
				} else {
					w.Emit(0, strings.Repeat("x", n))
				}
				got = append(got, pollData(g)...)
			}
			rp.Flush()
			got = append(got, pollData(g)...)
			if s := strings.Join(got, " "); s != tc.want {
				t.Fatalf("buffers %s, want %s", s, tc.want)
			}
			if err := g.CheckCredit(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A new announcement applies from the next record on, also to the buffer
// being filled, and reaches every channel of the gate.
func TestAnnouncedSizeChanges(t *testing.T) {
	g := NewInputGate(3, 2, 8)
	subs := connectLocal(g)
	g.AnnounceBufferSize(1000)
	for ch, s := range subs {
		if got := s.BufferSizeLimit().Load(); got != 1000 {
			t.Fatalf("channel %d: limit %d, want 1000", ch, got)
		}
	}
	rp := NewResultPartition(context.Background(), NewPool(20, 32768), []Target{subs[1]})
	w := NewRecordWriter(rp, codec.Int64())
	for i := range 200 { // 1600 bytes: one buffer cut at 1000, 600 left
		w.Emit(0, int64(i))
	}
	g.AnnounceBufferSize(64)
	w.Emit(0, 200) // 608 >= 64: cut
	for i := range 16 {
		w.Emit(0, int64(i))
	}
	rp.Flush()
	if got, want := strings.Join(pollData(g), " "), "1000 608 64 64"; got != want {
		t.Fatalf("buffers %s, want %s", got, want)
	}
	if got := g.ConsumedBytes(); got != 1736 {
		t.Fatalf("ConsumedBytes %d, want 1736", got)
	}
}

// The check of the announced size costs little per record.
func BenchmarkRecordWriterEmit(b *testing.B) {
	for _, announce := range []int{0, 4096} {
		b.Run(fmt.Sprintf("announce=%d", announce), func(b *testing.B) {
			sub := &discardTarget{}
			sub.limit.Store(int32(announce))
			rp := NewResultPartition(context.Background(), NewPool(4, 32768), []Target{sub})
			w := NewRecordWriter(rp, codec.Int64())
			b.SetBytes(8)
			for i := range b.N {
				w.Emit(0, int64(i))
			}
		})
	}
}

// discardTarget recycles what it is sent at once.
type discardTarget struct{ limit atomic.Int32 }

func (d *discardTarget) Send(b *Buffer)                          { b.Recycle() }
func (d *discardTarget) SendPriority(b *Buffer, _ func(*Buffer)) { b.Recycle() }
func (d *discardTarget) BufferSizeLimit() *atomic.Int32          { return &d.limit }
