package weir_test

import (
	"context"
	"sync"
	"testing"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/source"
)

type collectSink[T any] struct {
	mu  sync.Mutex
	got []T
}

func (c *collectSink[T]) CreateWriter(weir.SinkContext) (weir.SinkWriter[T], error) { return c, nil }
func (c *collectSink[T]) Write(v T) error {
	c.mu.Lock()
	c.got = append(c.got, v)
	c.mu.Unlock()
	return nil
}
func (c *collectSink[T]) Flush() error { return nil }
func (c *collectSink[T]) Close() error { return nil }

func TestSmoke(t *testing.T) {
	env := weir.NewEnvironment(weir.Options{Parallelism: 4})
	s := weir.FromSource(env, source.Sequence(0, 99999))
	m := weir.Map(s, func(v int64) int64 { return v * 2 })
	r := weir.Map(m.Rebalance(), func(v int64) int64 { return v + 1 })
	out := &collectSink[int64]{}
	weir.SinkTo(r, out)
	plan, err := env.Plan()
	if err != nil {
		t.Fatal(err)
	}
	t.Log(plan)
	if err := env.Execute(context.Background(), "smoke"); err != nil {
		t.Fatal(err)
	}
	if len(out.got) != 100000 {
		t.Fatalf("got %d", len(out.got))
	}
}
