package task

import (
	"context"
	"testing"
	"time"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/clock"
	"github.com/weirstream/weir/internal/network"
)

// debloatRig is a consumer task with an input gate of one channel (10
// buffers of credit) fed by an upstream partition, driven by hand with a
// manual clock.
type debloatRig struct {
	tk  *task
	clk *clock.Manual
	sub *network.PipelinedSubpartition
	up  *network.ResultPartition
	w   *network.RecordWriter[int64]
}

func newDebloatRig(cfg *network.DebloatConfig) *debloatRig {
	clk := clock.NewManual(time.Unix(1_700_000_000, 0))
	g := network.NewInputGate(1, 2, 8)
	sub := network.NewPipelinedSubpartition()
	network.ConnectLocal(sub, g, 0)
	up := network.NewResultPartition(context.Background(), network.NewPool(20, 32768), []network.Target{sub})
	tk := &task{name: "op (1/1)", ops: []Operator{&wmOp{}}, ctxs: []*OpContext{{Name: "op"}}, tracker: &Tracker{},
		children: [][]int{nil}, parts: [][]*network.ResultPartition{nil}, clock: clk, gate: g}
	tk.init()
	tk.startMetrics(clk)
	tk.initDebloat(cfg, 32768)
	return &debloatRig{tk: tk, clk: clk, sub: sub, up: up, w: network.NewRecordWriter(up, codec.Int64())}
}

// consume sends n bytes (a multiple of 8) through the channel and has the
// task consume them.
func (r *debloatRig) consume(t *testing.T, n int) {
	t.Helper()
	for i := range n / 8 {
		r.w.Emit(0, int64(i))
	}
	r.up.Flush()
	for {
		ch, b, ok := r.tk.gate.Poll()
		if !ok {
			return
		}
		r.tk.gate.Release(ch, b)
	}
}

func (r *debloatRig) tick(t *testing.T) {
	t.Helper()
	if err := r.tk.tick(); err != nil {
		t.Fatal(err)
	}
}

// check expects the task to report size and the sender to cut at limit
// (0: none).
func (r *debloatRig) check(t *testing.T, what string, size int, limit int32) {
	t.Helper()
	if got := r.tk.metrics().DebloatedBufferSize; got != size {
		t.Fatalf("%s: debloatedBufferSize %d, want %d", what, got, size)
	}
	if got := r.sub.BufferSizeLimit().Load(); got != limit {
		t.Fatalf("%s: the sender cuts at %d, want %d", what, got, limit)
	}
}

// A consumer task with debloating measures its gate's throughput on its
// ticks, with the task's clock, not counting the time it was idle, and
// announces the size to its senders and in its metrics.
func TestTaskAnnouncesDebloatedSize(t *testing.T) {
	// Samples 1: no averaging; threshold -1: every change is announced.
	r := newDebloatRig(&network.DebloatConfig{Samples: 1, ThresholdPercentages: -1})
	r.check(t, "at the start", 32768, 0)
	r.tick(t) // starts the measurement

	r.consume(t, 20000)
	r.clk.Advance(100 * time.Millisecond)
	r.tick(t)
	r.check(t, "before a period passed", 32768, 0)

	// 20000 bytes in 200ms: 100000 bytes/s, 1s of it over 10 buffers.
	r.clk.Advance(100 * time.Millisecond)
	r.tick(t)
	r.check(t, "after a period", 10000, 10000)

	// 1000 bytes, then a second idle, then 100ms busy: 10000 bytes/s.
	r.consume(t, 1000)
	r.tk.perf.enter(stateIdle)
	r.clk.Advance(time.Second)
	r.tk.perf.exit()
	r.clk.Advance(100 * time.Millisecond)
	r.tick(t)
	r.check(t, "after an idle second", 1000, 1000)

	// Nothing consumed while busy: down to the minimum.
	r.clk.Advance(time.Second)
	r.tick(t)
	r.check(t, "after a busy second consuming nothing", 256, 256)
}

// With debloating off the senders cut at nothing and the task reports the
// segment size.
func TestTaskWithoutDebloating(t *testing.T) {
	r := newDebloatRig(nil)
	r.tick(t)
	r.consume(t, 1000)
	r.clk.Advance(time.Second)
	r.tick(t)
	r.check(t, "off", 32768, 0)
}

// Zero fields of the configuration take Flink's defaults, bounded by the
// segment size.
func TestDebloatDefaults(t *testing.T) {
	c := network.DebloatConfig{}
	debloatDefaults(&c)
	want := network.DebloatConfig{Target: time.Second, Period: 200 * time.Millisecond, Samples: 20, ThresholdPercentages: 25, MinSize: 256}
	if c != want {
		t.Fatalf("defaults %+v, want %+v", c, want)
	}
	c = network.DebloatConfig{ThresholdPercentages: -5, MinSize: 1}
	debloatDefaults(&c)
	if c.ThresholdPercentages != 0 || c.MinSize != 1 {
		t.Fatalf("threshold %d min %d, want 0 and 1", c.ThresholdPercentages, c.MinSize)
	}
}
