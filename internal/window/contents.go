package window

import (
	"slices"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/keyed"
	"github.com/weirstream/weir/internal/state"
)

// Contents keeps the contents of a key's windows, each in its window's
// namespace, and computes their results. Its methods run with the key
// current.
type Contents[K, IN any] interface {
	// Add adds v to the window of namespace ns.
	Add(ns []byte, v IN) error
	// MergeInto folds the contents of sources into target and clears them.
	MergeInto(target []byte, sources [][]byte) error
	// Clear drops a window's contents.
	Clear(ns []byte) error
	// Fire emits the results of window w (namespace ns) of key.
	Fire(key K, ns []byte, w Window) error
}

// contentsState is the keyed state every kind of contents is stored in.
const contentsState = "window-contents"

// NewReduce returns contents that fold a window's records with reduce into
// one value of codec c, and emit result of it when the window fires.
func NewReduce[K, T, OUT any](rt *keyed.Runtime, c codec.Codec[T], reduce func(a, b T) T, result func(K, Window, T) OUT, emit func(OUT)) (Contents[K, T], error) {
	v, err := state.NewValue(rt.Backend(), state.ValueDescriptor[T]{Name: contentsState, Codec: c})
	if err != nil {
		return nil, err
	}
	return &reduceContents[K, T, OUT]{v: v, reduce: reduce, result: result, emit: emit}, nil
}

// NewAggregate returns contents that aggregate a window's records with agg
// into an accumulator of codec c, and emit result of agg's result when the
// window fires.
func NewAggregate[K, IN, ACC, R, OUT any](rt *keyed.Runtime, c codec.Codec[ACC], agg state.AggregateFunction[IN, ACC, R], result func(K, Window, R) OUT, emit func(OUT)) (Contents[K, IN], error) {
	v, err := state.NewValue(rt.Backend(), state.ValueDescriptor[ACC]{Name: contentsState, Codec: c})
	if err != nil {
		return nil, err
	}
	return &aggregateContents[K, IN, ACC, R, OUT]{v: v, agg: agg, result: result, emit: emit}, nil
}

// NewProcess returns contents that keep every record of a window (codec
// c) and call fire with them when the window fires.
func NewProcess[K, IN any](rt *keyed.Runtime, c codec.Codec[IN], fire func(key K, w Window, elements []IN) error) (Contents[K, IN], error) {
	l, err := state.NewList(rt.Backend(), state.ListDescriptor[IN]{Name: contentsState, Codec: c})
	if err != nil {
		return nil, err
	}
	return &processContents[K, IN]{l: l, fire: fire}, nil
}

var (
	_ Contents[int, int] = (*reduceContents[int, int, int])(nil)
	_ Contents[int, int] = (*aggregateContents[int, int, int, int, int])(nil)
	_ Contents[int, int] = (*processContents[int, int])(nil)
)

type reduceContents[K, T, OUT any] struct {
	v      state.Value[T]
	reduce func(a, b T) T
	result func(K, Window, T) OUT
	emit   func(OUT)
}

func (c *reduceContents[K, T, OUT]) Add(ns []byte, v T) error {
	c.v.SetNamespace(ns)
	cur, ok, err := c.v.Get()
	if err != nil {
		return err
	}
	if ok {
		v = c.reduce(cur, v)
	}
	return c.v.Update(v)
}

func (c *reduceContents[K, T, OUT]) MergeInto(target []byte, sources [][]byte) error {
	for _, ns := range sources {
		c.v.SetNamespace(ns)
		v, ok, err := c.v.Get()
		if err != nil {
			return err
		}
		if err := c.v.Clear(); err != nil {
			return err
		}
		if ok {
			if err := c.Add(target, v); err != nil {
				return err
			}
		}
	}
	return nil
}

func (c *reduceContents[K, T, OUT]) Clear(ns []byte) error {
	c.v.SetNamespace(ns)
	return c.v.Clear()
}

func (c *reduceContents[K, T, OUT]) Fire(key K, ns []byte, w Window) error {
	c.v.SetNamespace(ns)
	v, ok, err := c.v.Get()
	if err != nil || !ok {
		return err
	}
	c.emit(c.result(key, w, v))
	return nil
}

type aggregateContents[K, IN, ACC, R, OUT any] struct {
	v      state.Value[ACC]
	agg    state.AggregateFunction[IN, ACC, R]
	result func(K, Window, R) OUT
	emit   func(OUT)
}

func (c *aggregateContents[K, IN, ACC, R, OUT]) Add(ns []byte, v IN) error {
	c.v.SetNamespace(ns)
	acc, ok, err := c.v.Get()
	if err != nil {
		return err
	}
	if !ok {
		acc = c.agg.CreateAccumulator()
	}
	return c.v.Update(c.agg.Add(v, acc))
}

func (c *aggregateContents[K, IN, ACC, R, OUT]) MergeInto(target []byte, sources [][]byte) error {
	c.v.SetNamespace(target)
	acc, ok, err := c.v.Get()
	if err != nil {
		return err
	}
	for _, ns := range sources {
		c.v.SetNamespace(ns)
		a, found, err := c.v.Get()
		if err != nil {
			return err
		}
		if err := c.v.Clear(); err != nil {
			return err
		}
		switch {
		case !found:
		case !ok:
			acc, ok = a, true
		default:
			acc = c.agg.Merge(acc, a)
		}
	}
	if !ok {
		return nil
	}
	c.v.SetNamespace(target)
	return c.v.Update(acc)
}

func (c *aggregateContents[K, IN, ACC, R, OUT]) Clear(ns []byte) error {
	c.v.SetNamespace(ns)
	return c.v.Clear()
}

func (c *aggregateContents[K, IN, ACC, R, OUT]) Fire(key K, ns []byte, w Window) error {
	c.v.SetNamespace(ns)
	acc, ok, err := c.v.Get()
	if err != nil || !ok {
		return err
	}
	c.emit(c.result(key, w, c.agg.GetResult(acc)))
	return nil
}

type processContents[K, IN any] struct {
	l    state.List[IN]
	fire func(key K, w Window, elements []IN) error
}

func (c *processContents[K, IN]) Add(ns []byte, v IN) error {
	c.l.SetNamespace(ns)
	return c.l.Add(v)
}

func (c *processContents[K, IN]) MergeInto(target []byte, sources [][]byte) error {
	for _, ns := range sources {
		c.l.SetNamespace(ns)
		vs, err := c.l.Get()
		if err != nil {
			return err
		}
		vs = slices.Clone(vs)
		if err := c.l.Clear(); err != nil {
			return err
		}
		if len(vs) > 0 {
			c.l.SetNamespace(target)
			if err := c.l.AddAll(vs); err != nil {
				return err
			}
		}
	}
	return nil
}

func (c *processContents[K, IN]) Clear(ns []byte) error {
	c.l.SetNamespace(ns)
	return c.l.Clear()
}

func (c *processContents[K, IN]) Fire(key K, ns []byte, w Window) error {
	c.l.SetNamespace(ns)
	vs, err := c.l.Get()
	if err != nil || len(vs) == 0 {
		return err
	}
	return c.fire(key, w, vs)
}
