package nexmark

import "github.com/weirstream/weir"

// miniBatch is the local stage of a local/global aggregation, as Flink's
// suite plans the Nexmark aggregations (table.exec.mini-batch.size 5000):
// a process function folds its records per group into acc in memory and
// sends one partial aggregate per group (emit) when miniBatchSize records
// have been folded, before every watermark (so that partials are never
// late), before every checkpoint barrier (so that a restore loses none)
// and at the end of the input. A query's local stage embeds it and
// implements ProcessElement with fold.
type miniBatch[K comparable, A, OUT any] struct {
	acc  map[K]A
	n    int
	emit func(ctx *weir.Context[OUT], k K, a A)
}

// miniBatchSize is how many records a local stage folds before it sends
// its partial aggregates.
const miniBatchSize = 5000

func newMiniBatch[K comparable, A, OUT any](emit func(ctx *weir.Context[OUT], k K, a A)) miniBatch[K, A, OUT] {
	return miniBatch[K, A, OUT]{acc: make(map[K]A), emit: emit}
}

// fold replaces k's partial aggregate with f of it (and whether there was
// one), and flushes once the batch is full.
func (m *miniBatch[K, A, OUT]) fold(ctx *weir.Context[OUT], k K, f func(a A, ok bool) A) {
	a, ok := m.acc[k]
	m.acc[k] = f(a, ok)
	if m.n++; m.n >= miniBatchSize {
		m.flush(ctx)
	}
}

func (m *miniBatch[K, A, OUT]) flush(ctx *weir.Context[OUT]) {
	for k, a := range m.acc {
		m.emit(ctx, k, a)
	}
	clear(m.acc)
	m.n = 0
}

// OnWatermark implements weir.WatermarkListener.
func (m *miniBatch[K, A, OUT]) OnWatermark(ctx *weir.Context[OUT], _ int64) error {
	m.flush(ctx)
	return nil
}

// FlushBeforeBarrier implements weir.BarrierFlusher.
func (m *miniBatch[K, A, OUT]) FlushBeforeBarrier(ctx *weir.Context[OUT]) error {
	m.flush(ctx)
	return nil
}

// EndOfInput implements weir.EndOfInputHandler.
func (m *miniBatch[K, A, OUT]) EndOfInput(ctx *weir.Context[OUT]) error {
	m.flush(ctx)
	return nil
}
