package task

import (
	"testing"
	"time"

	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/clock"
	"github.com/weirstream/weir/internal/network"
)

// The time accounting and its sliding window, driven by a manual clock: each
// case runs steps on one task's accounting, then reads its rates.
func TestTimeAccountingWindow(t *testing.T) {
	type env struct {
		m   *taskMetrics
		clk *clock.Manual
	}
	type step func(e env)
	busy := func(d time.Duration) step { return func(e env) { e.clk.Advance(d) } }
	in := func(s int32, d time.Duration) step {
		return func(e env) { e.m.enter(s); e.clk.Advance(d); e.m.exit() }
	}
	idle := func(d time.Duration) step { return in(stateIdle, d) }
	bp := func(d time.Duration) step { return in(stateBackPressured, d) }
	sample := func(e env) { e.m.sample() }
	repeat := func(n int, steps ...step) step {
		return func(e env) {
			for range n {
				for _, s := range steps {
					s(e)
				}
			}
		}
	}
	const s = time.Second
	ms := time.Millisecond
	for _, tc := range []struct {
		name                 string
		steps                []step
		busy, idle, backPrsd float64
	}{
		{name: "no sample yet: all zero", steps: []step{busy(s), idle(s)}},
		{name: "no time since the first sample: all zero", steps: []step{sample}},
		{name: "all busy", steps: []step{sample, repeat(3, busy(s), sample)}, busy: 1000},
		{name: "a quarter idle", steps: []step{sample, repeat(3, busy(750*ms), idle(250*ms), sample)},
			busy: 750, idle: 250},
		{name: "all three", steps: []step{sample, repeat(2, busy(200*ms), idle(300*ms), bp(500*ms), sample)},
			busy: 200, idle: 300, backPrsd: 500},
		{name: "the rates run to now, not to the newest sample", steps: []step{sample, busy(s), sample, idle(s)},
			busy: 500, idle: 500},
		{name: "an open period counts until now", steps: []step{sample, busy(500 * ms),
			func(e env) { e.m.enter(stateBackPressured); e.clk.Advance(1500 * ms) }},
			busy: 250, backPrsd: 750},
		// Samples at 0..13 s; the window keeps 8..13, of which 8..10 were
		// backpressured.
		{name: "old time leaves the window", steps: []step{sample, repeat(10, bp(s), sample), repeat(3, busy(s), sample)},
			busy: 600, backPrsd: 400},
		{name: "old time has left the window", steps: []step{sample, repeat(10, bp(s), sample), repeat(6, busy(s), sample)},
			busy: 1000},
		// Samples closer than a second are not taken: the window still
		// starts at 0, not half a second ago.
		{name: "samples closer than the interval are skipped", steps: []step{sample, idle(s), repeat(10, busy(100*ms), sample)},
			busy: 500, idle: 500},
		{name: "an ended task keeps the window before its end", steps: []step{sample, idle(s), sample, busy(s),
			func(e env) { e.m.finish() }, repeat(10, busy(s), sample)},
			busy: 500, idle: 500},
		{name: "mail served while waiting is busy", steps: []step{sample, func(e env) {
			_ = e.m.idleWhile(func() error {
				e.clk.Advance(s)
				resume := e.m.suspend()
				e.clk.Advance(s)
				resume()
				e.clk.Advance(2 * s)
				return nil
			})
		}}, busy: 250, idle: 750},
		{name: "nested periods do not count twice", steps: []step{sample, func(e env) {
			e.m.enter(stateIdle)
			e.m.enter(stateBackPressured) // ignored: a period is open
			e.clk.Advance(s)
			e.m.exit()
			e.m.exit() // nothing open
			e.clk.Advance(s)
		}}, busy: 500, idle: 500},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := env{m: &taskMetrics{}, clk: clock.NewManual(time.Unix(1_700_000_000, 0))}
			e.m.start(e.clk)
			for _, st := range tc.steps {
				st(e)
			}
			b, i, p := e.m.rates()
			if b != tc.busy || i != tc.idle || p != tc.backPrsd {
				t.Fatalf("busy %v idle %v backpressured %v ms/s, want %v %v %v", b, i, p, tc.busy, tc.idle, tc.backPrsd)
			}
		})
	}
}

// msPerSecond keeps each rate within a second and makes the three add up
// to 1000 even when the counters say more (they never should).
func TestMsPerSecond(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		from, to             timeSample
		busy, idle, backPrsd float64
	}{
		{name: "split", from: timeSample{at: 1e9}, to: timeSample{at: 3e9, idle: 5e8, backPressured: 1e9}, busy: 250, idle: 250, backPrsd: 500},
		{name: "no time", from: timeSample{at: 5, idle: 1}, to: timeSample{at: 5, idle: 9}},
		{name: "backwards", from: timeSample{at: 5}, to: timeSample{at: 4}},
		{name: "too much", from: timeSample{}, to: timeSample{at: 1e9, idle: 8e8, backPressured: 4e8}, idle: 800, backPrsd: 200},
		{name: "counters went down", from: timeSample{idle: 5}, to: timeSample{at: 1e9}, busy: 1000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, i, p := msPerSecond(tc.from, tc.to)
			if b != tc.busy || i != tc.idle || p != tc.backPrsd {
				t.Fatalf("busy %v idle %v backpressured %v, want %v %v %v", b, i, p, tc.busy, tc.idle, tc.backPrsd)
			}
		})
	}
}

// Readings on another goroutine are consistent with the writer's: a task
// that is never busy reads exactly 1000 ms/s idle whenever the reader looks,
// never a period counted twice or missed between an update and a clock
// reading.
func TestTimeAccountingConsistentUnderConcurrentReads(t *testing.T) {
	clk := clock.NewManual(time.Unix(0, 0))
	m := &taskMetrics{}
	m.start(clk)
	m.sample()
	m.enter(stateIdle)
	clk.Advance(time.Millisecond)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { // the task goroutine: idle, with no time between two waits
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			m.exit()
			m.enter(stateIdle)
			clk.Advance(time.Millisecond)
		}
	}()
	for i := range 5000 {
		if b, idle, p := m.rates(); b != 0 || idle != 1000 || p != 0 {
			close(stop)
			<-done
			t.Fatalf("reading %d: busy %v idle %v backpressured %v, want 0 1000 0", i, b, idle, p)
		}
		if i%500 == 0 {
			m.sample()
		}
	}
	close(stop)
	<-done
}

// A subtask reports the start delay and alignment of the last checkpoint it
// snapshotted, in nanoseconds (a negative start delay, from clock skew
// between the trigger and the task, as 0).
func TestCheckpointFiguresOfLastSnapshot(t *testing.T) {
	clk := clock.NewManual(time.Unix(1_700_000_000, 0))
	tk := &task{name: "op (1/1)", ops: []Operator{&wmOp{}}, ctxs: []*OpContext{{Name: "op"}}, tracker: &Tracker{},
		children: [][]int{nil}, parts: [][]*network.ResultPartition{nil}, clock: clk}
	tk.init()
	tk.startMetrics(clk)
	for _, tc := range []struct {
		id                    int64
		startDelay, alignment time.Duration
		wantDelay, wantAlign  int64
	}{
		{id: 1, startDelay: 3 * time.Millisecond, alignment: 250 * time.Microsecond, wantDelay: 3e6, wantAlign: 250e3},
		{id: 2, startDelay: 7 * time.Millisecond, wantDelay: 7e6},
		{id: 3, startDelay: -time.Millisecond, alignment: time.Second, wantAlign: 1e9},
	} {
		if err := tk.snapshotAndForward(tc.id, clk.Now().UnixMilli(), checkpoint.Options{}, tc.startDelay, tc.alignment, false); err != nil {
			t.Fatal(err)
		}
		tk.async.Wait()
		m := tk.metrics()
		if m.CheckpointStartDelayNanos != tc.wantDelay || m.CheckpointAlignmentTime != tc.wantAlign {
			t.Fatalf("after checkpoint %d: start delay %d ns, alignment %d ns; want %d, %d",
				tc.id, m.CheckpointStartDelayNanos, m.CheckpointAlignmentTime, tc.wantDelay, tc.wantAlign)
		}
	}
}
