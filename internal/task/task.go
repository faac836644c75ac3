package task

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime/debug"
	"time"

	"github.com/weirstream/weir/internal/network"
)

// task is one subtask: a chain of operators fed by a source or an input gate.
type task struct {
	name          string
	index         int
	ops           []Operator
	ctxs          []*OpContext
	tracker       *Tracker
	source        SourceDriver
	gate          *network.InputGate
	readers       []network.BufferReader // per gate channel
	partitions    []*network.ResultPartition
	bufferTimeout time.Duration
	clock         Clock
	lastFlush     time.Time

	watermarks []int64 // per gate channel
	ended      []bool  // per gate channel
	watermark  int64   // last watermark forwarded
}

// run executes the subtask to the end of its input, a failure or ctx's end.
func (t *task) run(ctx context.Context) (err error) {
	opened := 0
	defer func() {
		if r := recover(); r != nil {
			err = t.recovered(ctx, r)
		}
		if cerr := t.closeOps(opened); err == nil {
			err = cerr
		}
		if err != nil {
			for _, rp := range t.partitions {
				rp.Close()
			}
		}
	}()
	for i := len(t.ops) - 1; i >= 0; i-- {
		t.tracker.Cur = i
		opened++
		if err := t.ops[i].Open(); err != nil {
			return t.opError(i, fmt.Errorf("open: %w", err))
		}
	}
	t.lastFlush = t.clock.Now()
	if t.source != nil {
		err = t.runSource(ctx)
	} else {
		err = t.runInput(ctx)
	}
	if err != nil {
		return err
	}
	for i, op := range t.ops {
		t.tracker.Cur = i
		if err := op.EndInput(); err != nil {
			return t.opError(i, fmt.Errorf("end of input: %w", err))
		}
	}
	for _, rp := range t.partitions {
		rp.BroadcastEvent(network.Event{Kind: network.EventEndOfPartition})
	}
	return nil
}

// closeOps closes the first opened operators (counted from the tail, the
// order they were opened in), head first, and returns the first error.
func (t *task) closeOps(opened int) (first error) {
	for i := len(t.ops) - opened; i < len(t.ops); i++ {
		if err := t.closeOp(i); err != nil && first == nil {
			first = err
		}
	}
	return first
}

func (t *task) closeOp(i int) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = t.opError(i, &PanicError{Value: r, Stack: debug.Stack()})
		}
	}()
	if err := t.ops[i].Close(); err != nil {
		return t.opError(i, fmt.Errorf("close: %w", err))
	}
	return nil
}

func (t *task) recovered(ctx context.Context, r any) error {
	switch v := r.(type) {
	case *opFailure:
		return t.opError(v.op, v.err)
	case *network.CanceledError:
		return t.canceled(ctx)
	}
	return t.opError(t.tracker.Cur, &PanicError{Value: r, Stack: debug.Stack()})
}

func (t *task) canceled(ctx context.Context) error {
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return fmt.Errorf("%w: %w", ErrTaskCanceled, cause)
	}
	return fmt.Errorf("%w: %w", ErrTaskCanceled, ctx.Err())
}

func (t *task) opError(i int, err error) error {
	var oe *OperatorError
	if errors.As(err, &oe) {
		return err
	}
	c := t.ctxs[i]
	return &OperatorError{Operator: c.Name, UID: c.UID, Subtask: c.Subtask, Parallelism: c.Parallelism, Err: err}
}

func (t *task) flush() {
	for _, rp := range t.partitions {
		rp.Flush()
	}
	t.lastFlush = t.clock.Now()
}

// maybeFlush flushes partially filled buffers once the buffer timeout passed
// since the last flush. It is called per input buffer or source batch, never
// per record.
func (t *task) maybeFlush() {
	if t.bufferTimeout > 0 && t.clock.Now().Sub(t.lastFlush) >= t.bufferTimeout {
		t.flush()
	}
}

// awaitOutputs blocks while an output has no free buffer, so that the task
// does not start work it cannot hand on (backpressure), unless ctx ends.
func (t *task) awaitOutputs(ctx context.Context) error {
	for _, rp := range t.partitions {
		if err := rp.Pool().WaitAvailable(ctx); err != nil {
			return t.canceled(ctx)
		}
	}
	return nil
}

const sourceIdleBackoff = time.Millisecond

func (t *task) runSource(ctx context.Context) error {
	var backoff *time.Timer
	defer func() {
		if backoff != nil {
			backoff.Stop()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return t.canceled(ctx)
		default:
		}
		if err := t.awaitOutputs(ctx); err != nil {
			return err
		}
		t.tracker.Cur = 0
		st, err := t.source.Read()
		if err != nil {
			return t.opError(0, err)
		}
		switch st {
		case EndOfInput:
			return nil
		case NothingAvailable:
			t.flush()
			ready := t.source.Ready()
			if ready == nil {
				if backoff == nil {
					backoff = time.NewTimer(sourceIdleBackoff)
				} else {
					backoff.Reset(sourceIdleBackoff)
				}
				select {
				case <-backoff.C:
				case <-ctx.Done():
					return t.canceled(ctx)
				}
				continue
			}
			select {
			case <-ready:
			case <-ctx.Done():
				return t.canceled(ctx)
			}
		default:
			t.maybeFlush()
		}
	}
}

func (t *task) runInput(ctx context.Context) error {
	n := t.gate.NumChannels()
	t.watermarks = make([]int64, n)
	for i := range t.watermarks {
		t.watermarks[i] = math.MinInt64
	}
	t.watermark = math.MinInt64
	t.ended = make([]bool, n)
	live := n
	for live > 0 {
		if err := t.awaitOutputs(ctx); err != nil {
			return err
		}
		ch, b, ok := t.gate.Poll()
		if !ok {
			t.flush() // idle: hand on what we have
			select {
			case <-t.gate.Notify():
			case <-ctx.Done():
				return t.canceled(ctx)
			}
			continue
		}
		if b.Kind == network.KindEvent {
			switch b.Event.Kind {
			case network.EventEndOfPartition:
				t.ended[ch] = true
				live--
				if err := t.advanceWatermark(); err != nil {
					return err
				}
			case network.EventWatermark:
				t.watermarks[ch] = max(t.watermarks[ch], b.Event.Timestamp)
				if err := t.advanceWatermark(); err != nil {
					return err
				}
			}
			continue
		}
		t.tracker.Cur = 0
		if err := t.readers[ch].Read(ch, b); err != nil {
			return t.opError(0, err)
		}
		t.gate.Release(ch, b)
		t.maybeFlush()
	}
	return nil
}

// advanceWatermark forwards the minimum watermark over live channels when it
// moved forward.
func (t *task) advanceWatermark() error {
	wm := int64(math.MaxInt64)
	for ch, w := range t.watermarks {
		if !t.ended[ch] {
			wm = min(wm, w)
		}
	}
	if wm == math.MaxInt64 || wm <= t.watermark {
		return nil
	}
	t.watermark = wm
	for i, op := range t.ops {
		if h, ok := op.(WatermarkHandler); ok {
			t.tracker.Cur = i
			if err := h.ProcessWatermark(wm); err != nil {
				return t.opError(i, err)
			}
		}
	}
	for _, rp := range t.partitions {
		rp.BroadcastEvent(network.Event{Kind: network.EventWatermark, Timestamp: wm})
	}
	return nil
}
