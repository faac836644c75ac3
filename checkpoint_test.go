package weir

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/graph"
	"github.com/weirstream/weir/internal/network"
	"github.com/weirstream/weir/internal/operator"
	"github.com/weirstream/weir/internal/task"
)

type tagged = codec.Pair[int64, int64] // value, epoch

// epochTagger tags each record with the id of the last checkpoint its task
// snapshotted.
type epochTagger struct {
	opBase
	epoch int64
	out   network.Output[tagged]
}

func (e *epochTagger) Collect(v int64) { e.out.Collect(tagged{First: v, Second: e.epoch}) }
func (e *epochTagger) SnapshotState(id int64, _ checkpoint.Options) (task.OperatorSnapshot, error) {
	e.epoch = id
	return task.OperatorSnapshot{}, nil
}

// epochChecker fails if a record's epoch differs from the last checkpoint
// its own task snapshotted: with aligned barriers, every record sent before
// barrier n is processed before snapshot n, and every record after it, after.
type epochChecker struct {
	opBase
	epoch int64
	seen  *atomic.Int64
}

func (c *epochChecker) Collect(v tagged) {
	c.tr.Cur = c.id
	if v.Second != c.epoch {
		c.ctx.Fail(fmt.Errorf("record %d of epoch %d processed in epoch %d", v.First, v.Second, c.epoch))
	}
	c.seen.Add(1)
	c.tr.Cur = c.parent
}
func (c *epochChecker) SnapshotState(id int64, _ checkpoint.Options) (task.OperatorSnapshot, error) {
	c.epoch = id
	return task.OperatorSnapshot{}, nil
}

// Checkpoint barriers flow from the sources through a rebalance edge; the
// consumer aligns them across its input channels, so records never cross a
// snapshot, and every subtask acknowledges every checkpoint.
func TestAlignedBarriersSeparateEpochs(t *testing.T) {
	t.Parallel()
	const n = 3_000_000
	env := NewEnvironment(Options{Parallelism: 2, BufferSize: 4096, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	src := FromSource(env, boundedSeq{n: n})
	tag := connect(src, &graph.Node{Name: "tag"}, newNodeImpl(func(ctx *task.OpContext, out network.Output[tagged]) (task.Built, error) {
		op := &epochTagger{opBase: newOpBase(ctx), out: out}
		return task.Built{Op: op, Input: network.Output[int64](op)}, nil
	})).WithCodec(codec.PairOf(codec.Int64(), codec.Int64()))
	var seen atomic.Int64
	connect(tag.Rebalance(), &graph.Node{Name: "check", Sink: true}, newNodeImpl(func(ctx *task.OpContext, _ network.Output[struct{}]) (task.Built, error) {
		op := &epochChecker{opBase: newOpBase(ctx), seen: &seen}
		return task.Built{Op: op, Input: network.Output[tagged](op)}, nil
	}))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	j, err := env.deploy(ctx, "barriers")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- j.Run() }()
	acks := map[int64]int{}
	var id int64
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for finished := false; !finished; {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			finished = true
		case a := <-j.Acks():
			if a.Declined != nil {
				t.Fatalf("subtask %d/%d declined checkpoint %d: %v", a.Vertex, a.Subtask, a.ID, a.Declined)
			}
			acks[a.ID]++
		case <-tick.C:
			id++
			j.TriggerCheckpoint(id, time.Now().UnixMilli(), checkpoint.Options{LastCompleted: id - 1})
		}
	}
	for drained := false; !drained; {
		select {
		case a := <-j.Acks():
			acks[a.ID]++
		default:
			drained = true
		}
	}
	complete := 0
	for _, c := range acks {
		if c == 4 { // 2 source subtasks + 2 checker subtasks
			complete++
		}
	}
	if seen.Load() != n {
		t.Fatalf("checker saw %d records, want %d", seen.Load(), n)
	}
	if complete < 3 {
		t.Fatalf("only %d of %d triggered checkpoints were acknowledged by all 4 subtasks: %v", complete, id, acks)
	}
	t.Logf("%d checkpoints triggered, %d acknowledged by every subtask", id, complete)
}

// boundedSeq emits 0..n-1, split among subtasks.
type boundedSeq struct{ n int64 }

func (b boundedSeq) CreateReader(ctx SourceContext) (SourceReader[int64], error) {
	p := int64(ctx.Parallelism)
	return &seqReader{next: b.n * int64(ctx.Subtask) / p, end: b.n * int64(ctx.Subtask+1) / p}, nil
}

type seqReader struct{ next, end int64 }

func (r *seqReader) ReadBatch(out Collector[int64]) (ReadStatus, error) {
	for stop := min(r.next+1024, r.end); r.next < stop; r.next++ {
		out.Collect(r.next)
	}
	if r.next >= r.end {
		return EndOfInput, nil
	}
	return MoreAvailable, nil
}
func (r *seqReader) Close() error { return nil }

// At a checkpoint a source stores the state of its unfinished splits in its
// operator state.
func TestSourceSnapshotStoresSplits(t *testing.T) {
	op := &sourceOp[int64]{opBase: opBase{opState: operator.NewState(nil, func(err error) { t.Fatal(err) })}}
	op.reader = &checkpointedStub{}
	snap, err := op.SnapshotState(1, checkpoint.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Lists) != 1 || snap.Lists[0].Name != sourceSplitsState || len(snap.Lists[0].Elements) != 2 || string(snap.Lists[0].Elements[1]) != "b" {
		t.Fatalf("snapshot lists %+v", snap.Lists)
	}
	l, err := op.opState.List(sourceSplitsState, false)
	if err != nil || len(l.Elements) != 2 || string(l.Elements[1]) != "b" {
		t.Fatalf("stored %v, %v", l, err)
	}
}

type checkpointedStub struct{}

func (checkpointedStub) ReadBatch(Collector[int64]) (ReadStatus, error) { return EndOfInput, nil }
func (checkpointedStub) Close() error                                   { return nil }
func (checkpointedStub) SnapshotSplits() ([][]byte, error) {
	return [][]byte{[]byte("a"), []byte("b")}, nil
}

// The exponential-delay keys reach the restart strategy; a jitter factor
// of 0 in the configuration means no jitter, not the default.
func TestRestartKeysFromConfig(t *testing.T) {
	c := config.New()
	for k, v := range map[string]string{
		"restart-strategy.type":                                 "exponential-delay",
		"restart-strategy.exponential-delay.backoff-multiplier": "3",
		"restart-strategy.exponential-delay.jitter-factor":      "0",
	} {
		if err := c.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	rc := OptionsFromConfig(c).Restart.config(true)
	if rc.Type != "exponential-delay" || rc.BackoffMultiplier != 3 || rc.JitterFactor != 0 {
		t.Fatalf("restart config %+v", rc)
	}
	if got := OptionsFromConfig(config.New()).Restart.config(true).JitterFactor; got != 0.1 {
		t.Fatalf("default jitter %v, want 0.1", got)
	}
}
