package state

// PebbleBackend keeps state in a Pebble database. (Stub: being written.)
type PebbleBackend struct{ opts Options }

// NewPebbleBackend opens a Pebble backend in opts.Dir.
func NewPebbleBackend(opts Options) (*PebbleBackend, error) { return &PebbleBackend{opts: opts}, nil }

func (b *PebbleBackend) SetCurrentKey(key []byte, keyGroup int) {}
func (b *PebbleBackend) CurrentKey() []byte                     { return nil }
func (b *PebbleBackend) CurrentKeyGroup() int                   { return 0 }
func (b *PebbleBackend) KeyGroupRange() (int, int)              { return b.opts.KeyGroupStart, b.opts.KeyGroupEnd }
func (b *PebbleBackend) CleanupExpired(budget int) (int, error) { return 0, errTODO }
func (b *PebbleBackend) Close() error                           { return nil }
func newPebbleValue[T any](b *PebbleBackend, d ValueDescriptor[T]) (Value[T], error) {
	return nil, errTODO
}
func newPebbleList[T any](b *PebbleBackend, d ListDescriptor[T]) (List[T], error) {
	return nil, errTODO
}
func newPebbleMap[K comparable, V any](b *PebbleBackend, d MapDescriptor[K, V]) (Map[K, V], error) {
	return nil, errTODO
}
