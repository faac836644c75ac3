// Package statereadtest writes small checkpoints with known keyed state,
// operator list state and timers, straight through the state backends and
// checkpoint storage, for the tests of the state reader and of `weir
// savepoint read`.
package statereadtest

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/checkpoint/metadata"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/keygroup"
	"github.com/weirstream/weir/internal/state"
	"github.com/weirstream/weir/internal/timer"
)

// The fixture's job, operators and shape.
const (
	Job            = "fixture"
	CheckpointID   = 3
	KeyedUID       = "count"
	SourceUID      = "numbers"
	MaxParallelism = 8
	Parallelism    = 2
	// TTLTimestamp is the TTL timestamp of the entries of state "recent"
	// (the backend's clock when they were written).
	TTLTimestamp = 1767225600000
)

// Point is a user type with a codec of its own (PointCodec), which tests
// register or not.
type Point struct{ X, Y int32 }

// PointCodec encodes a Point as two int32.
type PointCodec struct{}

// Append implements codec.Codec.
func (PointCodec) Append(dst []byte, p Point) []byte {
	return codec.Int32().Append(codec.Int32().Append(dst, p.X), p.Y)
}

// Decode implements codec.Codec.
func (PointCodec) Decode(src []byte) (Point, int, error) {
	v, n, err := codec.PairOf(codec.Int32(), codec.Int32()).Decode(src)
	return Point{v.First, v.Second}, n, err
}

// Keys are the keys of the keyed operator; Key i has count i+1, seen
// ["k<i>-0" .. "k<i>-<i>"], tags {"even" or "odd": i, "all": 1}, a point
// (i, -i), and an event-time timer at 1000+i.
var Keys = []string{"alice", "bob", "carol", "dave", "erin"}

// Options vary the fixture.
type Options struct {
	// Native writes the keyed state as pebble's own files (an incremental
	// checkpoint), else as the canonical stream.
	Native bool
	// NoSchema leaves the schema out, as in snapshots of older versions.
	NoSchema bool
	// Changelog marks subtask 0's keyed state as a changelog checkpoint
	// with log records to replay.
	Changelog bool
	// Savepoint writes a savepoint, directory SavepointDir under root,
	// instead of a checkpoint.
	Savepoint bool
}

// SavepointDir is the name of the fixture's savepoint directory.
const SavepointDir = "savepoint-fixtur-0123456789ab"

// KeyGroup returns the key group of key.
func KeyGroup(key string) int {
	return keygroup.Of(codec.String().Append(nil, key), MaxParallelism)
}

// Write writes checkpoint CheckpointID of job Job under root (a checkpoint
// directory), or a savepoint of it, and returns the snapshot's directory.
func Write(t testing.TB, root string, o Options) string {
	t.Helper()
	ctx := context.Background()
	s, err := storage.Open(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	store := &fixtureStore{s: s, savepoint: o.Savepoint}
	cp := metadata.Checkpoint{Job: Job, ID: CheckpointID, TriggerTime: TTLTimestamp, CompletionTime: TTLTimestamp + 1500}
	if o.Savepoint {
		cp.Savepoint, cp.Format = true, "canonical"
		if o.Native {
			cp.Format = "native"
		}
	}

	keyed := metadata.Operator{UID: KeyedUID, Name: "KeyedProcess", Parallelism: Parallelism, MaxParallelism: MaxParallelism}
	for sub := range Parallelism {
		start, end := keygroup.Range(sub, MaxParallelism, Parallelism)
		st := metadata.Subtask{Index: sub, KeyGroupStart: start, KeyGroupEnd: end}
		if !o.NoSchema {
			st.Schema = schema()
		}
		writeKeyed(t, ctx, store, &st, o, t.TempDir())
		if o.Changelog && sub == 0 {
			st.Changelog = &metadata.ChangelogState{Materialization: 1, MaterializedSeq: 10, From: 11, To: 14,
				Segments: []metadata.LogSegment{{File: storage.FileHandle{Path: "shared/log-0", Size: 1}, From: 11, To: 14}}}
		}
		keyed.Subtasks = append(keyed.Subtasks, st)
	}
	source := metadata.Operator{UID: SourceUID, Name: "Source: numbers", Parallelism: Parallelism, MaxParallelism: MaxParallelism}
	for sub := range Parallelism {
		source.Subtasks = append(source.Subtasks, metadata.Subtask{Index: sub, KeyGroupEnd: MaxParallelism - 1,
			Lists: []metadata.List{{Name: "splits", Elements: [][]byte{binary.BigEndian.AppendUint64(nil, uint64(100*sub+7))}},
				{Name: "names", Union: true, Elements: [][]byte{[]byte(fmt.Sprintf("reader %d", sub))}}}})
	}
	cp.Operators = []metadata.Operator{keyed, source}
	payload, err := metadata.Encode(&cp)
	if err != nil {
		t.Fatal(err)
	}
	if o.Savepoint {
		if err := s.WriteSavepointMetadata(ctx, SavepointDir, payload); err != nil {
			t.Fatal(err)
		}
		return filepath.Join(root, SavepointDir)
	}
	if err := s.WriteMetadata(ctx, Job, CheckpointID, payload); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, Job, storage.CheckpointDir(CheckpointID))
}

// fixtureStore creates the data files of a checkpoint or a savepoint.
type fixtureStore struct {
	s         *storage.Storage
	savepoint bool
}

func (f *fixtureStore) create(ctx context.Context, name string) (storage.FileWriter, error) {
	if f.savepoint {
		return f.s.CreateSavepointFile(ctx, SavepointDir, name)
	}
	return f.s.CreateFile(ctx, Job, CheckpointID, name)
}

func ref[T any](c codec.Codec[T]) metadata.CodecRef {
	return metadata.CodecRef{Codec: codec.NameOf(c), Type: fmt.Sprintf("%T", *new(T))}
}

func refp[T any](c codec.Codec[T]) *metadata.CodecRef { r := ref(c); return &r }

// UnregisteredName is the name of the codec of state "secret", which no
// program registers.
const UnregisteredName = "statereadtest.unregistered/v1"

func unregistered() codec.Codec[int64] { return codec.WithName(UnregisteredName, codec.Int64()) }

func schema() *metadata.Schema {
	return &metadata.Schema{Key: refp(codec.String()), States: []metadata.StateSchema{
		{Name: "count", Kind: "value", Value: ref(codec.Int64())},
		{Name: "point", Kind: "value", Value: ref[Point](PointCodec{})},
		{Name: "recent", Kind: "list", Value: ref(codec.Int64())},
		{Name: "secret", Kind: "value", Value: ref(unregistered())},
		{Name: "seen", Kind: "list", Value: ref(codec.String())},
		{Name: "tags", Kind: "map", MapKey: refp(codec.String()), Value: ref(codec.Int64())},
	}}
}

func writeKeyed(t testing.TB, ctx context.Context, store *fixtureStore, st *metadata.Subtask, o Options, tmp string) {
	t.Helper()
	opts := state.Options{KeyGroupStart: st.KeyGroupStart, KeyGroupEnd: st.KeyGroupEnd, MaxParallelism: MaxParallelism,
		Clock: func() time.Time { return time.UnixMilli(TTLTimestamp) }, Dir: filepath.Join(tmp, "db")}
	var b state.Backend
	if o.Native {
		pb, err := state.NewPebbleBackend(opts)
		if err != nil {
			t.Fatal(err)
		}
		b = pb
	} else {
		b = state.NewHeapBackend(opts)
	}
	defer b.Close()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	count, err := state.NewValue(b, state.ValueDescriptor[int64]{Name: "count"})
	must(err)
	point, err := state.NewValue(b, state.ValueDescriptor[Point]{Name: "point", Codec: PointCodec{}})
	must(err)
	secret, err := state.NewValue(b, state.ValueDescriptor[int64]{Name: "secret", Codec: unregistered()})
	must(err)
	seen, err := state.NewList(b, state.ListDescriptor[string]{Name: "seen"})
	must(err)
	recent, err := state.NewList(b, state.ListDescriptor[int64]{Name: "recent", TTL: state.TTLConfig{TTL: time.Hour}})
	must(err)
	tags, err := state.NewMap(b, state.MapDescriptor[string, int64]{Name: "tags"})
	must(err)
	timers := timer.NewService()
	for i, k := range Keys {
		kg := KeyGroup(k)
		if kg < st.KeyGroupStart || kg > st.KeyGroupEnd {
			continue
		}
		key := codec.String().Append(nil, k)
		b.SetCurrentKey(key, kg)
		must(count.Update(int64(i + 1)))
		must(point.Update(Point{int32(i), int32(-i)}))
		must(secret.Update(int64(1000 * i)))
		for j := 0; j <= i; j++ {
			must(seen.Add(fmt.Sprintf("k%d-%d", i, j)))
		}
		must(recent.AddAll([]int64{int64(i), int64(10 * i)}))
		parity := "even"
		if i%2 == 1 {
			parity = "odd"
		}
		must(tags.Put(parity, int64(i)))
		must(tags.Put("all", 1))
		timers.RegisterEventTime(timer.Timer{Timestamp: int64(1000 + i), Key: key, KeyGroup: kg})
	}
	base := fmt.Sprintf("op-%s-%d", KeyedUID, st.Index)
	if data := timers.AppendSnapshot(nil, st.KeyGroupStart, st.KeyGroupEnd); len(data) > 0 {
		h := writeFile(t, ctx, store, base+".tmr", func(w io.Writer) error { _, err := w.Write(data); return err })
		st.Timers = &h
	}
	if pb, ok := b.(*state.PebbleBackend); ok && o.Native {
		ns, err := pb.TakeNativeSnapshot(filepath.Join(tmp, "native"))
		must(err)
		defer ns.Release()
		st.Native = &metadata.NativeState{Registry: ns.Registry}
		for _, f := range ns.Files {
			name := base + "-" + strings.NewReplacer("/", "_").Replace(f.Name)
			h := writeFile(t, ctx, store, name, func(w io.Writer) error {
				src, err := os.Open(filepath.Join(ns.Dir, filepath.FromSlash(f.Name)))
				if err != nil {
					return err
				}
				defer src.Close()
				_, err = io.Copy(w, src)
				return err
			})
			st.Native.Files = append(st.Native.Files, metadata.NativeFile{Name: f.Name, Handle: h, New: true})
		}
		return
	}
	snap, err := state.TakeSnapshot(b)
	must(err)
	defer snap.Release()
	h := writeFile(t, ctx, store, base+".kst", func(w io.Writer) error { _, err := snap.WriteStream(w); return err })
	st.Keyed = &h
}

func writeFile(t testing.TB, ctx context.Context, store *fixtureStore, name string, fill func(io.Writer) error) storage.FileHandle {
	t.Helper()
	fw, err := store.create(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	h, err := storage.WriteAll(fw, fill)
	if err != nil {
		t.Fatal(err)
	}
	return h
}
