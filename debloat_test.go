package weir_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/sink"
	"github.com/weirstream/weir/source"
)

// debloatRun is one run of the backpressured job of
// TestBufferDebloatSpeedsUpAlignedCheckpoints.
type debloatRun struct {
	durations []time.Duration // of the checkpoints triggered
	size      int             // the map's debloatedBufferSize at the end
	sizes     []int           // every size the map reported, in order, each once
	converged time.Duration   // from the start until the job was ready for checkpoints
}

// runBackpressured runs source -> rebalance -> a map that spins 50µs per
// record -> sink at parallelism 1 with d, waits until the source is
// backpressured, the map's input gate full, minWait passed and ready says
// so (if set), then triggers n aligned checkpoints one after the
// other and returns their durations.
func runBackpressured(t *testing.T, d weir.BufferDebloatOptions, ready func(mapTask weir.TaskMetrics) bool, minWait time.Duration, n int) debloatRun {
	t.Helper()
	const segment = 32 << 10
	status := make(chan weir.JobStatus, 64)
	var mu sync.Mutex
	done := map[int64]time.Duration{}
	opts := weir.Options{Parallelism: 1, BufferSize: segment, BufferDebloat: d, Logger: quietLogger(t),
		Checkpoint:     weir.CheckpointOptions{Interval: time.Hour, Dir: t.TempDir()},
		StatusInterval: 50 * time.Millisecond,
		OnStatus: func(s weir.JobStatus) {
			select {
			case status <- s:
			default:
			}
		},
		OnCheckpointComplete: func(c weir.CompletedCheckpoint) {
			mu.Lock()
			done[c.ID] = c.Duration
			mu.Unlock()
		},
	}
	env := weir.NewEnvironment(opts)
	nums := weir.FromSource(env, source.Sequence(0, math.MaxInt64-1)).Name("numbers")
	var mapped atomic.Int64
	slow := weir.Map(nums.Rebalance(), func(v int64) int64 {
		mapped.Add(1)
		spin(50 * time.Microsecond)
		return v
	}).Name("slow")
	weir.SinkTo(slow, sink.Discard[int64]())

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ended := make(chan error, 1)
	start := time.Now()
	go func() { ended <- env.Execute(ctx, "debloat") }()
	defer func() {
		cancel()
		if err := <-ended; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("Execute = %v", err)
		}
	}()

	var run debloatRun
	find := func(s weir.JobStatus, prefix string) (weir.TaskMetrics, bool) {
		for _, m := range s.Tasks {
			if strings.HasPrefix(m.Name, prefix) {
				return m, true
			}
		}
		return weir.TaskMetrics{}, false
	}
	var last weir.JobStatus
	seen := func(s weir.JobStatus) (weir.TaskMetrics, weir.TaskMetrics, bool) {
		last = s
		src, ok1 := find(s, "numbers")
		m, ok2 := find(s, "slow")
		if ok2 && (len(run.sizes) == 0 || run.sizes[len(run.sizes)-1] != m.DebloatedBufferSize) {
			run.sizes = append(run.sizes, m.DebloatedBufferSize)
		}
		run.size = m.DebloatedBufferSize
		return src, m, ok1 && ok2
	}
	deadline := time.After(90 * time.Second)
wait:
	for {
		select {
		case s := <-status:
			src, m, ok := seen(s)
			if ok && src.BackPressuredTimeMsPerSecond > 500 && m.InPoolUsage > 0.5 && time.Since(start) >= minWait && (ready == nil || ready(m)) {
				run.converged = time.Since(start)
				break wait
			}
		case <-deadline:
			t.Fatalf("not ready for checkpoints after 90s; map's sizes %v; last metrics:\n%s", run.sizes, metricsLines(last.Tasks))
		}
	}
	m0, t0 := mapped.Load(), time.Now()
	for range n {
		id, err := env.TriggerCheckpoint(ctx)
		if err != nil {
			t.Fatalf("checkpoint: %v", err)
		}
		mu.Lock()
		run.durations = append(run.durations, done[id])
		mu.Unlock()
	}
	t.Logf("map rate %.0f records/s", float64(mapped.Load()-m0)/time.Since(t0).Seconds())
	// The size at the end, after the checkpoints.
	for drained := false; !drained; {
		select {
		case s := <-status:
			seen(s)
		default:
			drained = true
		}
	}
	seen(<-status)
	t.Logf("metrics at the end:\n%s", metricsLines(last.Tasks))
	return run
}

func metricsLines(ms []weir.TaskMetrics) string {
	var b strings.Builder
	for _, m := range ms {
		fmt.Fprintf(&b, "  %-28s busy %6.1f idle %6.1f backpressured %6.1f ms/s, inPool %.2f outPool %.2f, debloatedBufferSize %d\n",
			m.Name, m.BusyTimeMsPerSecond, m.IdleTimeMsPerSecond, m.BackPressuredTimeMsPerSecond,
			m.InPoolUsage, m.OutPoolUsage, m.DebloatedBufferSize)
	}
	return b.String()
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// A backpressured job (a map that spins 50µs per record behind a rebalance)
// with buffer debloating: the map announces a buffer size well under the
// 32 KiB segment, and an aligned checkpoint, whose barrier queues behind the
// data in front of the map, completes several times faster than without
// debloating, and than with a debloater that never announces (a threshold
// of 100%: sizes are calculated, no decrease is announced), which shows the
// speedup comes from the senders cutting smaller buffers.
func TestBufferDebloatSpeedsUpAlignedCheckpoints(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a backpressured job for tens of seconds")
	}
	const (
		segment     = 32 << 10
		checkpoints = 3
	)
	// The map consumes about 150 KB/s, so its gate's 10 buffers of 32 KiB
	// (or the half-full ones the buffer timeout sends) take 1 to 2 s:
	// Flink's 1 s target would barely shorten that. A 50ms target asks
	// for buffers of about 750 bytes, which the average approaches in a few
	// seconds; the samples and threshold are Flink's.
	on := weir.BufferDebloatOptions{Enabled: true, Target: 50 * time.Millisecond}
	debloated := runBackpressured(t, on, func(m weir.TaskMetrics) bool { return m.DebloatedBufferSize < segment/16 }, 0, checkpoints)
	t.Logf("debloating on: ready after %v, map's sizes %v, checkpoints %v", debloated.converged.Round(time.Millisecond), debloated.sizes, debloated.durations)

	off := runBackpressured(t, weir.BufferDebloatOptions{}, nil, time.Second, checkpoints)
	t.Logf("debloating off: checkpoints %v, map's sizes %v", off.durations, off.sizes)

	// As long as the debloating run took to get ready.
	silent := on
	silent.ThresholdPercentages = 100
	never := runBackpressured(t, silent, nil, debloated.converged, checkpoints)
	t.Logf("debloater that never announces: checkpoints %v, map's sizes %v", never.durations, never.sizes)

	if debloated.size >= segment/16 {
		t.Errorf("debloated size %d after the checkpoints, want well under the %d segment", debloated.size, segment)
	}
	for name, r := range map[string]debloatRun{"off": off, "never announcing": never} {
		if !slices.Equal(r.sizes, []int{segment}) {
			t.Errorf("debloating %s: the map reported sizes %v, want only the segment size %d", name, r.sizes, segment)
		}
	}
	mOn, mOff, mNever := median(debloated.durations), median(off.durations), median(never.durations)
	t.Logf("median checkpoint: %v with debloating, %v without, %v with a debloater that never announces", mOn, mOff, mNever)
	if mOff < 3*mOn {
		t.Errorf("median checkpoint %v with debloating, %v without: want at least 3 times faster", mOn, mOff)
	}
	if mNever < 3*mOn {
		t.Errorf("median checkpoint %v with debloating, %v with a debloater that never announces: want at least 3 times faster", mOn, mNever)
	}
}

// The buffer debloating keys map to Options.BufferDebloat and
// MinBufferSize, with Flink's defaults.
func TestBufferDebloatOptionsFromConfig(t *testing.T) {
	o := weir.OptionsFromConfig(config.New())
	o.EnsureDefaults()
	want := weir.BufferDebloatOptions{Target: time.Second, Period: 200 * time.Millisecond, Samples: 20, ThresholdPercentages: 25}
	if o.BufferDebloat != want || o.MinBufferSize != 256 {
		t.Fatalf("defaults %+v, min %d; want %+v, 256", o.BufferDebloat, o.MinBufferSize, want)
	}
	c, err := config.Load(nil, []string{
		"taskmanager.network.memory.buffer-debloat.enabled=true",
		"taskmanager.network.memory.buffer-debloat.target=300ms",
		"taskmanager.network.memory.buffer-debloat.period=50ms",
		"taskmanager.network.memory.buffer-debloat.samples=5",
		"taskmanager.network.memory.buffer-debloat.threshold-percentages=0",
		"taskmanager.memory.min-segment-size=1kb",
	})
	if err != nil {
		t.Fatal(err)
	}
	o = weir.OptionsFromConfig(c)
	o.EnsureDefaults()
	want = weir.BufferDebloatOptions{Enabled: true, Target: 300 * time.Millisecond, Period: 50 * time.Millisecond, Samples: 5, ThresholdPercentages: -1}
	if o.BufferDebloat != want || o.MinBufferSize != 1024 {
		t.Fatalf("got %+v, min %d; want %+v, 1024", o.BufferDebloat, o.MinBufferSize, want)
	}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	o.MinBufferSize = o.BufferSize + 1
	o.BufferDebloat.Samples = -1
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "minimum buffer size") || !strings.Contains(err.Error(), "samples -1") {
		t.Fatalf("Validate = %v, want the minimum buffer size and the samples named", err)
	}
}
