package stateread

import (
	"io"

	"github.com/weirstream/weir/internal/state"
)

// The canonical keyed-state stream (format version 1, documented at the
// top of internal/state/snapshot.go) is parsed by state.ReadStream; this
// file adapts its entries to the reader's own types.

// errCorrupt is wrapped by the errors of a stream that does not parse.
var errCorrupt = state.ErrCorruptSnapshot

// streamState is an entry of a stream's state table.
type streamState struct {
	name string
	kind string // "value", "list" or "map"
	ttl  bool
}

// item is a value of an entry: a value state's value, a list element or a
// map pair (mapKey set). ts is the TTL timestamp (Unix ms) of states with
// TTL.
type item struct {
	mapKey, value []byte
	ts            int64
}

// entry is one (key, namespace) of a state in a key group.
type entry struct {
	keyGroup int
	key, ns  []byte
	items    []item
}

// readStream reads a whole stream: states with the state table, then
// visit with every entry, in key-group order; the entry and its slices
// are valid only during the call. It checks the trailing checksum, after
// the last visit.
func readStream(rd io.Reader, states func([]streamState) error, visit func(st int, e *entry) error) error {
	var e entry
	return state.ReadStream(rd, func(sts []state.StreamState) error {
		out := make([]streamState, len(sts))
		for i, st := range sts {
			out[i] = streamState{name: st.Name, kind: st.Kind, ttl: st.TTL}
		}
		return states(out)
	}, func(i int, se *state.StreamEntry) error {
		e.keyGroup, e.key, e.ns = se.KeyGroup, se.Key, se.NS
		e.items = e.items[:0]
		for _, it := range se.Items {
			e.items = append(e.items, item{mapKey: it.MapKey, value: it.Value, ts: it.TS})
		}
		return visit(i, &e)
	})
}
