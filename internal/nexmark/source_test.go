package nexmark_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"sync"
	"testing"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/internal/nexmark"
)

// eventSink keeps every event it is given, from any subtask.
type eventSink struct {
	mu  sync.Mutex
	out []nexmark.Event
}

func (s *eventSink) CreateWriter(weir.SinkContext) (weir.SinkWriter[nexmark.Event], error) {
	return s, nil
}
func (s *eventSink) Write(e nexmark.Event) error {
	s.mu.Lock()
	s.out = append(s.out, e)
	s.mu.Unlock()
	return nil
}
func (s *eventSink) Flush() error { return nil }
func (s *eventSink) Close() error { return nil }

// eventKey is an event's full contents as a string.
func eventKey(e nexmark.Event) string {
	switch e.Kind {
	case nexmark.KindPerson:
		return fmt.Sprintf("P%+v", *e.Person)
	case nexmark.KindAuction:
		return fmt.Sprintf("A%+v", *e.Auction)
	}
	return fmt.Sprintf("B%+v", *e.Bid)
}

// checkExactlyEvents checks that got holds events 0..c.Events-1 of c, each
// once, in any order.
func checkExactlyEvents(t *testing.T, got []nexmark.Event, c nexmark.Config) {
	t.Helper()
	if int64(len(got)) != c.Events {
		t.Fatalf("got %d events, want %d", len(got), c.Events)
	}
	want := map[string]int{}
	for i := range c.Events {
		want[eventKey(nexmark.Generate(c, i))]++
	}
	for _, e := range got {
		k := eventKey(e)
		if want[k] == 0 {
			t.Fatalf("unexpected or duplicated event %s", k)
		}
		want[k]--
	}
}

func TestSourceJob(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, p := range []int{1, 3} {
		t.Run(fmt.Sprint("parallelism ", p), func(t *testing.T) {
			c := nexmark.Config{Events: 10_007, Seed: 3}
			env := weir.NewEnvironment(weir.Options{Parallelism: p, Logger: quiet})
			out := &eventSink{}
			// Rebalance so that events cross a network edge in EventCodec's encoding.
			weir.SinkTo(nexmark.Events(env, c).Rebalance(), out)
			if err := env.Execute(context.Background(), "nexmark-source"); err != nil {
				t.Fatal(err)
			}
			checkExactlyEvents(t, out.out, c)
		})
	}
}

// sliceCollector collects a reader's output.
type sliceCollector struct{ out []nexmark.Event }

func (s *sliceCollector) Collect(e nexmark.Event) { s.out = append(s.out, e) }

func readAll(t *testing.T, r weir.SourceReader[nexmark.Event], out *sliceCollector, maxBatches int) {
	t.Helper()
	for b := 0; maxBatches < 0 || b < maxBatches; b++ {
		st, err := r.ReadBatch(out)
		if err != nil {
			t.Fatal(err)
		}
		if st == weir.EndOfInput {
			return
		}
	}
}

func TestSourceSplitsAndRestore(t *testing.T) {
	// More events per subtask than one batch, so that the checkpoint
	// after the first batch falls mid-split.
	const events = 20_000
	c := nexmark.Config{Events: events, Seed: 9}
	src := nexmark.Source(c)
	var all []nexmark.Event
	var snaps [][]byte
	for k := range 3 {
		r, err := src.CreateReader(weir.SourceContext{Subtask: k, Parallelism: 3})
		if err != nil {
			t.Fatal(err)
		}
		out := &sliceCollector{}
		readAll(t, r, out, 1) // one batch, then checkpoint
		s, err := r.(weir.CheckpointedReader).SnapshotSplits()
		if err != nil {
			t.Fatal(err)
		}
		if len(s) != 1 || len(s[0]) != 16 {
			t.Fatalf("subtask %d: snapshot %v, want one 16-byte split", k, s)
		}
		all = append(all, out.out...)
		snaps = append(snaps, s...)
		readAll(t, r, &sliceCollector{}, -1) // output after the checkpoint is lost
	}
	// Restore all three splits into two subtasks.
	for k, restored := range [][][]byte{snaps[:2], snaps[2:]} {
		r, err := src.CreateReader(weir.SourceContext{Subtask: k, Parallelism: 2, RestoredSplits: restored})
		if err != nil {
			t.Fatal(err)
		}
		out := &sliceCollector{}
		readAll(t, r, out, -1)
		all = append(all, out.out...)
		if s, _ := r.(weir.CheckpointedReader).SnapshotSplits(); len(s) != 0 {
			t.Fatalf("finished reader snapshots %d splits", len(s))
		}
	}
	if len(all) != events {
		t.Fatalf("got %d events after restore, want %d", len(all), events)
	}
	checkExactlyEvents(t, all, c)

	// A subtask's fresh output is its contiguous range in order.
	r, _ := src.CreateReader(weir.SourceContext{Subtask: 1, Parallelism: 3})
	out := &sliceCollector{}
	readAll(t, r, out, -1)
	for j, e := range out.out {
		if want := nexmark.Generate(c, events/3+int64(j)); !reflect.DeepEqual(e, want) {
			t.Fatalf("subtask 1 event %d is not event %d", j, events/3+j)
		}
	}
	// Restoring no splits emits nothing.
	r, _ = src.CreateReader(weir.SourceContext{Subtask: 0, Parallelism: 1, RestoredSplits: [][]byte{}})
	if st, _ := r.ReadBatch(&sliceCollector{}); st != weir.EndOfInput {
		t.Fatal("reader restored with no splits is not at end of input")
	}
}

func TestSourceErrors(t *testing.T) {
	if _, err := nexmark.Source(nexmark.Config{}).CreateReader(weir.SourceContext{Parallelism: 1}); err == nil {
		t.Error("no error for Events 0")
	}
	src := nexmark.Source(nexmark.Config{Events: 10})
	for _, bad := range [][]byte{{1, 2, 3}, append(make([]byte, 15), 99)} {
		if _, err := src.CreateReader(weir.SourceContext{Parallelism: 1, RestoredSplits: [][]byte{bad}}); err == nil {
			t.Errorf("no error for split state %v", bad)
		}
	}
}
