package weir_test

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/stateread"
	"github.com/weirstream/weir/sink"
)

// tally is a user type kept in state with a codec of the job's own, which
// the job's program registers (as in its init function), so that the state
// reader built into the program decodes it.
type tally struct {
	N    int64
	Last int64
}

type tallyCodec struct{}

func (tallyCodec) Append(dst []byte, t tally) []byte {
	return codec.Int64().Append(codec.Int64().Append(dst, t.N), t.Last)
}

func (tallyCodec) Decode(src []byte) (tally, int, error) {
	p, n, err := codec.PairOf(codec.Int64(), codec.Int64()).Decode(src)
	return tally{p.First, p.Second}, n, err
}

func init() { codec.Register[tally](tallyCodec{}) }

// holdingSource emits 0..n-1, split among its subtasks, then has nothing
// more until the job is cancelled: the job stays up for the test to take
// its checkpoint with all the records in the state.
type holdingSource struct{ n int64 }

type holdingReader struct{ next, end int64 }

func (s holdingSource) CreateReader(ctx weir.SourceContext) (weir.SourceReader[int64], error) {
	p := int64(ctx.Parallelism)
	i := int64(ctx.Subtask)
	return &holdingReader{next: s.n * i / p, end: s.n * (i + 1) / p}, nil
}

func (r *holdingReader) ReadBatch(out weir.Collector[int64]) (weir.ReadStatus, error) {
	if r.next >= r.end {
		return weir.NothingAvailable, nil
	}
	for stop := min(r.next+256, r.end); r.next < stop; r.next++ {
		out.Collect(r.next)
	}
	return weir.MoreAvailable, nil
}

func (r *holdingReader) Close() error { return nil }

const (
	statereadRecords = 1000
	statereadKeys    = 10
	statereadTimer   = int64(1) << 50 // a processing-time timer far in the future
)

func statereadKey(i int64) string { return "key-" + strconv.FormatInt(i%statereadKeys, 10) }

// statereadJob declares a job keeping, per key "key-<i mod 10>": count (the
// number of records), last (a list of its records below 30), seen (a
// map of record parity to count), and tally (count and last record, user
// codec), and one processing-time timer. processed counts the records the
// keyed function handled.
func statereadJob(env *weir.Environment, processed *atomic.Int64) {
	nums := weir.FromSource[int64](env, holdingSource{statereadRecords}).UID("numbers")
	out := weir.KeyedProcess(weir.KeyBy(nums, statereadKey), func() weir.KeyedProcessFunction[string, int64, string] {
		var (
			count *weir.ValueState[int64]
			last  *weir.ListState[int64]
			seen  *weir.MapState[string, int64]
			tal   *weir.ValueState[tally]
		)
		return weir.KeyedProcessFunc[string, int64, string](func(ctx *weir.KeyedContext[string, string], i int64) error {
			if count == nil {
				var err error
				if count, err = weir.GetValueState(ctx, weir.ValueStateDescriptor[int64]{Name: "count"}); err != nil {
					return err
				}
				if last, err = weir.GetListState(ctx, weir.ListStateDescriptor[int64]{Name: "last"}); err != nil {
					return err
				}
				if seen, err = weir.GetMapState(ctx, weir.MapStateDescriptor[string, int64]{Name: "seen"}); err != nil {
					return err
				}
				if tal, err = weir.GetValueState(ctx, weir.ValueStateDescriptor[tally]{Name: "tally", Codec: tallyCodec{}}); err != nil {
					return err
				}
			}
			c, _ := count.Value()
			count.Update(c + 1)
			if i < 3*statereadKeys { // from one source subtask: in order
				last.Add(i)
			}
			parity := map[bool]string{true: "even", false: "odd"}[i%2 == 0]
			p, _ := seen.Get(parity)
			seen.Put(parity, p+1)
			tl, _ := tal.Value()
			tal.Update(tally{N: tl.N + 1, Last: max(tl.Last, i)})
			ctx.RegisterProcessingTimeTimer(statereadTimer)
			processed.Add(1)
			return nil
		})
	}).UID("count")
	weir.SinkTo(out, sink.Discard[string]()).UID("sink")
}

// statereadCheckpoint runs the job until every record is in the state,
// takes a checkpoint (canonical: in the canonical format whatever the
// configuration, as a savepoint does) and returns its directory.
func statereadCheckpoint(t *testing.T, opts weir.Options, canonical bool) string {
	t.Helper()
	dir := t.TempDir()
	chk := filepath.Join(dir, "chk")
	opts.Parallelism = 2
	opts.StateDir = filepath.Join(dir, "state")
	opts.Logger = quietLogger(t)
	opts.Checkpoint.Interval = time.Hour
	opts.Checkpoint.Dir = chk
	env := weir.NewEnvironment(opts)
	var processed atomic.Int64
	statereadJob(env, &processed)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- env.Execute(ctx, "stateread") }()
	for processed.Load() < statereadRecords {
		select {
		case err := <-done:
			t.Fatalf("the job ended: %v", err)
		case <-time.After(5 * time.Millisecond):
		}
	}
	var (
		id  int64
		err error
	)
	for attempt := 0; ; attempt++ {
		// With the changelog, the first checkpoint waits for the first
		// materialization.
		if canonical {
			id, err = env.TriggerCanonicalCheckpoint(ctx)
		} else {
			id, err = env.TriggerCheckpoint(ctx)
		}
		if err == nil || attempt == 100 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("checkpoint: %v", err)
	}
	cancel()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("run: %v", err)
	}
	return filepath.Join(chk, "stateread", storage.CheckpointDir(id))
}

// A job's checkpoint, on either backend and in either form of keyed state
// (the canonical stream, pebble's own files), reads back offline with the
// values the job wrote, decoded with the job's codecs.
func TestStateReaderReadsAJobsCheckpoint(t *testing.T) {
	for _, mode := range []string{"hashmap", "pebble", "pebble-incremental", "changelog-canonical"} {
		t.Run(mode, func(t *testing.T) {
			opts := weir.Options{StateBackend: weir.BackendHashMap}
			switch mode {
			case "pebble":
				opts.StateBackend = weir.BackendPebble
			case "pebble-incremental":
				opts.StateBackend = weir.BackendPebble
				opts.Checkpoint.Incremental = true
			case "changelog-canonical":
				opts.Changelog = weir.ChangelogOptions{Enabled: true, MaterializeInterval: 50 * time.Millisecond}
			}
			loc := statereadCheckpoint(t, opts, mode == "changelog-canonical")
			ctx := context.Background()
			r, err := stateread.Open(ctx, loc)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			op, ok := r.Metadata().Operator("count")
			if !ok {
				t.Fatal("no state of operator count")
			}
			for _, st := range op.Subtasks {
				if native := st.Native != nil; native != (mode == "pebble-incremental") || st.Changelog != nil {
					t.Fatalf("subtask %d: native %v, changelog %v", st.Index, native, st.Changelog != nil)
				}
				if st.Schema == nil || st.Schema.Key == nil || st.Schema.Key.Codec != "string" {
					t.Fatalf("subtask %d: schema %+v", st.Index, st.Schema)
				}
			}

			l, err := r.List(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var info *stateread.OperatorInfo
			for i := range l.Operators {
				if l.Operators[i].UID == "count" {
					info = &l.Operators[i]
				}
			}
			keys := int64(statereadKeys)
			want := []stateread.KeyedStateInfo{
				{Name: "count", Kind: "value", Entries: keys, Items: keys, Codecs: &stateread.Codecs{Key: "string", Value: "int64"}},
				{Name: "last", Kind: "list", Entries: keys, Items: 3 * keys, Codecs: &stateread.Codecs{Key: "string", Value: "int64"}},
				{Name: "seen", Kind: "map", Entries: keys, Items: keys, Codecs: &stateread.Codecs{Key: "string", MapKey: "string", Value: "int64"}},
				{Name: "tally", Kind: "value", Entries: keys, Items: keys, Codecs: &stateread.Codecs{Key: "string", Value: "weir_test.tallyCodec"}},
			}
			if info == nil || !reflect.DeepEqual(info.KeyedStates, want) {
				t.Fatalf("operator count listed as %+v, want keyed states %+v", info, want)
			}
			if info.Timers == nil || *info.Timers != (stateread.TimerCounts{ProcessingTime: statereadKeys}) {
				t.Errorf("timers %+v", info.Timers)
			}

			d, err := r.Read(ctx, "count", stateread.Options{})
			if err != nil {
				t.Fatal(err)
			}
			perKey := int64(statereadRecords / statereadKeys)
			got := map[string]map[string]any{}
			for _, s := range d.KeyedStates {
				for _, e := range s.Entries {
					k, ok := e.Key.Value.(string)
					if !ok {
						t.Fatalf("state %s: key %s not decoded", s.Name, e.Key)
					}
					if got[k] == nil {
						got[k] = map[string]any{}
					}
					switch s.Kind {
					case "value":
						got[k][s.Name] = e.Value.Value
					case "list":
						var l []any
						for _, el := range e.Elements {
							l = append(l, el.Value)
						}
						got[k][s.Name] = l
					case "map":
						m := map[any]any{}
						for _, p := range e.Map {
							m[p.Key.Value] = p.Value.Value
						}
						got[k][s.Name] = m
					}
				}
			}
			if len(got) != statereadKeys {
				t.Fatalf("%d keys in the state, want %d", len(got), statereadKeys)
			}
			for j := range int64(statereadKeys) {
				k := statereadKey(j)
				// Key j has the records j, j+10, ...; their parity is j's.
				lastRec := statereadRecords - statereadKeys + j
				first := []any{j, j + statereadKeys, j + 2*statereadKeys}
				parity := map[bool]string{true: "even", false: "odd"}[j%2 == 0]
				want := map[string]any{
					"count": perKey,
					"last":  first,
					"seen":  map[any]any{parity: perKey},
					"tally": tally{N: perKey, Last: lastRec},
				}
				if !reflect.DeepEqual(got[k], want) {
					t.Errorf("state of %s:\n%v\nwant\n%v", k, got[k], want)
				}
			}
			if d.Timers == nil || len(d.Timers.Timers) != statereadKeys {
				t.Fatalf("timers %+v", d.Timers)
			}
			for _, tm := range d.Timers.Timers {
				if _, ok := tm.Key.Value.(string); !ok || tm.Domain != "processing" || tm.Timestamp != statereadTimer {
					t.Errorf("timer %+v", tm)
				}
			}
		})
	}
}

// A changelog checkpoint's keyed state is log records on top of a
// materialized part: the reader refuses it and says what to do.
func TestStateReaderRefusesChangelogCheckpoints(t *testing.T) {
	loc := statereadCheckpoint(t, weir.Options{StateBackend: weir.BackendHashMap,
		Changelog: weir.ChangelogOptions{Enabled: true, MaterializeInterval: time.Hour}}, false)
	ctx := context.Background()
	r, err := stateread.Open(ctx, loc)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	op, _ := r.Metadata().Operator("count")
	logged := false
	for _, st := range op.Subtasks {
		logged = logged || st.Changelog != nil && st.Changelog.Records() > 0
	}
	if !logged {
		t.Fatal("the checkpoint has no changelog records to replay")
	}
	_, err = r.Read(ctx, "count", stateread.Options{})
	if !errors.Is(err, stateread.ErrChangelog) {
		t.Fatalf("reading a changelog checkpoint: %v", err)
	}
	l, err := r.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range l.Operators {
		if o.UID == "count" && o.Changelog == 0 {
			t.Errorf("listing does not say the changelog was not read: %+v", o)
		}
	}
}
