package keyed

import (
	"reflect"
	"testing"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/checkpoint/metadata"
	"github.com/weirstream/weir/internal/state"
	"github.com/weirstream/weir/internal/task"
)

type sumAgg struct{}

func (sumAgg) CreateAccumulator() int64        { return 0 }
func (sumAgg) Add(v int32, acc int64) int64    { return acc + int64(v) }
func (sumAgg) GetResult(acc int64) float64     { return float64(acc) }
func (sumAgg) Merge(a, b int64) int64          { return a + b }
func add(a, b string) string                   { return a + b }
func ref(name, typ string) metadata.CodecRef   { return metadata.CodecRef{Codec: name, Type: typ} }
func refp(name, typ string) *metadata.CodecRef { r := ref(name, typ); return &r }

// Every state an operator registers through the handles lands in the
// snapshot's schema with its kind and its codecs' names (nil codecs
// resolved to the built-ins), sorted by name, with the key codec.
func TestSnapshotCarriesTheSchema(t *testing.T) {
	rt := New(&task.OpContext{Name: "op", MaxParallelism: 8, KeyGroupEnd: 7}, Config{}, nil)
	if err := rt.Open(); err != nil {
		t.Fatal(err)
	}
	defer rt.Close()

	var s task.OperatorSnapshot
	if err := rt.Snapshot(1, checkpoint.Options{}, &s); err != nil {
		t.Fatal(err)
	}
	s.Keyed.Release()
	if s.Schema != nil {
		t.Fatalf("schema before any registration: %+v", s.Schema)
	}

	SetKeyCodec(rt, codec.PairOf(codec.String(), codec.Int64()))
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	_, err := NewValue[int64](rt, "count", nil, TTL{})
	must(err)
	_, err = NewList(rt, "seen", codec.SliceOf(codec.Bool()), TTL{})
	must(err)
	_, err = NewMap[string, float64](rt, "avg", nil, nil, TTL{})
	must(err)
	_, err = NewReducing[string](rt, "concat", nil, TTL{}, add)
	must(err)
	_, err = NewAggregating[int32, int64, float64](rt, "sum", nil, TTL{}, state.AggregateFunction[int32, int64, float64](sumAgg{}))
	must(err)
	// Registering again changes nothing.
	_, err = NewValue[int64](rt, "count", codec.Int64(), TTL{})
	must(err)

	s = task.OperatorSnapshot{}
	must(rt.Snapshot(2, checkpoint.Options{}, &s))
	s.Keyed.Release()
	want := &metadata.Schema{
		Key: refp("pair(string,int64)", "codec.Pair[string,int64]"),
		States: []metadata.StateSchema{
			{Name: "avg", Kind: "map", Value: ref("float64", "float64"), MapKey: refp("string", "string")},
			{Name: "concat", Kind: "value", Value: ref("string", "string")},
			{Name: "count", Kind: "value", Value: ref("int64", "int64")},
			{Name: "seen", Kind: "list", Value: ref("slice(bool)", "[]bool")},
			{Name: "sum", Kind: "value", Value: ref("int64", "int64")},
		},
	}
	if !reflect.DeepEqual(s.Schema, want) {
		t.Errorf("schema\n%+v\nwant\n%+v", s.Schema, want)
	}

	// The snapshot's schema is a copy: later registrations do not show.
	DescribeList[int32](rt, "window-contents", nil)
	DescribeNamespace(rt, "window-contents", codec.Int64())
	if len(s.Schema.States) != 5 {
		t.Errorf("the snapshot's schema changed: %+v", s.Schema.States)
	}
	if got := rt.schema.snapshot().States[5]; !reflect.DeepEqual(got, metadata.StateSchema{Name: "window-contents", Kind: "list",
		Value: ref("int32", "int32"), Namespace: refp("int64", "int64")}) {
		t.Errorf("described state: %+v", got)
	}
}
