package state

import (
	"io"
	"math"
)

// StreamState is an entry of a keyed-state stream's state table.
type StreamState struct {
	Name string
	// Kind is "value", "list" or "map".
	Kind string
	TTL  bool
}

// StreamItem is a value of a StreamEntry: a value state's value, a list
// element, or a map pair (MapKey set). TS is the TTL timestamp (Unix ms)
// of states with TTL.
type StreamItem struct {
	MapKey, Value []byte
	TS            int64
}

// StreamEntry is one (key, namespace) of a state in a key group.
type StreamEntry struct {
	KeyGroup int
	Key, NS  []byte
	Items    []StreamItem
}

// ReadStream reads a whole keyed-state stream (the format at the top of
// snapshot.go) without a backend, for tools that inspect encoded bytes:
// it calls states once with the state table, then visit with every entry
// in key-group order (the entry is reused after the call; its byte slices
// stay valid), and checks the trailing checksum after the last visit.
// Errors of a stream that does not parse wrap ErrCorruptSnapshot.
func ReadStream(r io.Reader, states func([]StreamState) error, visit func(state int, e *StreamEntry) error) error {
	return readSnapshot(r, 0, math.MaxInt32, &streamVisitor{onStates: states, visit: visit})
}

// streamVisitor is the snapSink of ReadStream.
type streamVisitor struct {
	onStates func([]StreamState) error
	visit    func(int, *StreamEntry) error
	e        StreamEntry
}

func (v *streamVisitor) states(sts []snapState) error {
	out := make([]StreamState, len(sts))
	for i, st := range sts {
		out[i] = StreamState{Name: st.name, Kind: st.kind.String(), TTL: st.ttl}
	}
	return v.onStates(out)
}

func (v *streamVisitor) record(kg, i int, rec *snapRecord) error {
	v.e.KeyGroup, v.e.Key, v.e.NS = kg, rec.key, rec.ns
	v.e.Items = v.e.Items[:0]
	for _, it := range rec.items {
		v.e.Items = append(v.e.Items, StreamItem{MapKey: it.userKey, Value: it.value, TS: it.ts})
	}
	return v.visit(i, &v.e)
}

func (v *streamVisitor) finish() error { return nil }
func (v *streamVisitor) abort()        {}
