package state

import "errors"

// HeapBackend keeps state in Go maps. (Stub: being written.)
type HeapBackend struct{ opts Options }

var errTODO = errors.New("state: not implemented yet")

// NewHeapBackend returns an empty heap backend.
func NewHeapBackend(opts Options) *HeapBackend { return &HeapBackend{opts: opts} }

func (b *HeapBackend) SetCurrentKey(key []byte, keyGroup int)                    {}
func (b *HeapBackend) CurrentKey() []byte                                        { return nil }
func (b *HeapBackend) CurrentKeyGroup() int                                      { return 0 }
func (b *HeapBackend) KeyGroupRange() (int, int)                                 { return b.opts.KeyGroupStart, b.opts.KeyGroupEnd }
func (b *HeapBackend) CleanupExpired(budget int) (int, error)                    { return 0, errTODO }
func (b *HeapBackend) Close() error                                              { return nil }
func newHeapValue[T any](b *HeapBackend, d ValueDescriptor[T]) (Value[T], error) { return nil, errTODO }
func newHeapList[T any](b *HeapBackend, d ListDescriptor[T]) (List[T], error)    { return nil, errTODO }
func newHeapMap[K comparable, V any](b *HeapBackend, d MapDescriptor[K, V]) (Map[K, V], error) {
	return nil, errTODO
}
