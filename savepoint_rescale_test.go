package weir_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/sink"
)

// spRange is a bounded source of the numbers 0..n-1, split into one
// contiguous range per subtask and read in batches of spBatch, whose
// position (the unfinished ranges) is checkpointed. Once its ranges are
// exhausted a reader waits while hold (if set) returns true.
type spRange struct {
	n    int64
	hold func() bool
}

const spBatch = 32

type spRangeReader struct {
	splits [][2]int64 // [next, end)
	hold   func() bool
}

func (s spRange) CreateReader(ctx weir.SourceContext) (weir.SourceReader[int64], error) {
	r := &spRangeReader{hold: s.hold}
	if ctx.RestoredSplits == nil {
		lo := s.n * int64(ctx.Subtask) / int64(ctx.Parallelism)
		hi := s.n * int64(ctx.Subtask+1) / int64(ctx.Parallelism)
		r.splits = [][2]int64{{lo, hi}}
		return r, nil
	}
	for _, b := range ctx.RestoredSplits {
		if len(b) != 16 {
			return nil, fmt.Errorf("range split of %d bytes", len(b))
		}
		r.splits = append(r.splits, [2]int64{int64(binary.BigEndian.Uint64(b)), int64(binary.BigEndian.Uint64(b[8:]))})
	}
	return r, nil
}

func (r *spRangeReader) ReadBatch(out weir.Collector[int64]) (weir.ReadStatus, error) {
	for len(r.splits) > 0 && r.splits[0][0] >= r.splits[0][1] {
		r.splits = r.splits[1:]
	}
	if len(r.splits) == 0 {
		if r.hold != nil && r.hold() {
			return weir.NothingAvailable, nil
		}
		return weir.EndOfInput, nil
	}
	sp := &r.splits[0]
	end := min(sp[0]+spBatch, sp[1])
	for i := sp[0]; i < end; i++ {
		out.Collect(i)
	}
	sp[0] = end
	return weir.MoreAvailable, nil
}

func (r *spRangeReader) SnapshotSplits() ([][]byte, error) {
	var out [][]byte
	for _, sp := range r.splits {
		if sp[0] < sp[1] {
			b := binary.BigEndian.AppendUint64(nil, uint64(sp[0]))
			out = append(out, binary.BigEndian.AppendUint64(b, uint64(sp[1])))
		}
	}
	return out, nil
}

func (r *spRangeReader) Close() error { return nil }

// spRules is a source of the rules 0..count-1 for one subtask: it emits
// rule r only once ready(r) says so (it reports NothingAvailable until
// then) and publishes how many it emitted in next. Its position is
// checkpointed.
type spRules struct {
	count int64
	ready func(r int64) bool
	next  *atomic.Int64
}

type spRulesReader struct {
	s    spRules
	next int64
}

func (s spRules) CreateReader(ctx weir.SourceContext) (weir.SourceReader[int64], error) {
	r := &spRulesReader{s: s}
	if ctx.RestoredSplits != nil {
		r.next = s.count // no split: finished
		for _, b := range ctx.RestoredSplits {
			r.next = int64(binary.BigEndian.Uint64(b))
		}
	}
	s.next.Store(r.next)
	return r, nil
}

func (r *spRulesReader) ReadBatch(out weir.Collector[int64]) (weir.ReadStatus, error) {
	if r.next >= r.s.count {
		return weir.EndOfInput, nil
	}
	if !r.s.ready(r.next) {
		return weir.NothingAvailable, nil
	}
	out.Collect(r.next)
	r.next++
	r.s.next.Store(r.next)
	return weir.MoreAvailable, nil
}

func (r *spRulesReader) SnapshotSplits() ([][]byte, error) {
	if r.next >= r.s.count {
		return nil, nil
	}
	return [][]byte{binary.BigEndian.AppendUint64(nil, uint64(r.next))}, nil
}

func (r *spRulesReader) Close() error { return nil }

// rsTest is the rescaling job (Flink's RescalingITCase shape) and what the
// test knows of it across its runs. Records are the numbers 0..n-1, with
// their own value as event time:
//
//	numbers -> timestamps -> split-list -> union-list -+-> broadcast -> keyBy(i mod keys) -> keyed -> sink
//	rules -> timestamps ---------------------(broadcast)-+
//
// split-list keeps the multiples of 50 it saw in operator list state,
// union-list the numbers 25 mod 50 in union list state (after a restore
// each subtask keeps only its share), broadcast puts every rule r as r->r*r
// in broadcast state, and keyed keeps per key a count, a sum (value
// state), every number (list state) and counts by residue mod 5 (map
// state); it emits
//
//	R,k,c   the running count c of key k, per record
//	E,k,i   an event-time timer at i (registered for every i mod 3 = 0)
//	PT,k,t  a processing-time timer at t fired
//	P,k,i   the processing-time timer registered 20 ms after record i (for
//	        every i mod 4 = 1) handled i (several may share a timer)
//	F,k,... the final state of k, from an event-time timer at rsFinal
//	        that only the end of the input reaches
//
// Every line is unique, so the committed output is exactly once if it
// holds every expected line once and nothing else.
type rsTest struct {
	n, keys, rules int64
	dir, out       string
	backend        string
	maxP           int
	processed      atomic.Int64 // numbers split-list processed, all runs
	rulesNext      atomic.Int64 // rules emitted, all runs
	runs           []*rsRun
}

const rsFinal = int64(1) << 50

// rsRun is what one run's operators showed the test.
type rsRun struct {
	p                      int
	mu                     sync.Mutex
	splitOpen, splitClose  map[int][]int64
	unionOpen, unionClose  map[int][]int64
	bcOpen, bcClose        map[int]map[int64]int64
	splitAdded, unionAdded []int64
	errs                   []string
	// final: the run that finishes the job. The others register a
	// processing-time timer for every number 1 mod 4 (ptRegistered); the
	// final one registers none, so the timers it fires are those restored
	// (and armed) from the savepoint.
	final        bool
	ptRegistered []int64
	ptHandled    atomic.Int64
	// Timers that fired in this run for records of an earlier one: they
	// came from the savepoint.
	restoredEvent, restoredPT atomic.Int64
	eventFired                atomic.Int64
}

func newRsRun(p int) *rsRun {
	return &rsRun{p: p, splitOpen: map[int][]int64{}, splitClose: map[int][]int64{}, unionOpen: map[int][]int64{},
		unionClose: map[int][]int64{}, bcOpen: map[int]map[int64]int64{}, bcClose: map[int]map[int64]int64{}}
}

func (r *rsRun) record(m map[int][]int64, sub int, l []int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := m[sub]; dup {
		r.errs = append(r.errs, fmt.Sprintf("subtask %d reported twice", sub))
	}
	m[sub] = slices.Clone(l)
}

func (r *rsRun) recordBC(m map[int]map[int64]int64, sub int, s *weir.BroadcastState[int64, int64]) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m[sub] = maps.Collect(s.All())
}

// rsSplitFn keeps the multiples of 50 it sees in split list state.
type rsSplitFn struct {
	rt  *rsTest
	run *rsRun
	l   *weir.OperatorListState[int64]
	sub int
}

func (f *rsSplitFn) Open(ctx *weir.Context[int64]) error {
	l, err := weir.GetListOperatorState(ctx, weir.ListStateDescriptor[int64]{Name: "multiples-of-50"})
	if err != nil {
		return err
	}
	f.l, f.sub = l, ctx.Subtask()
	f.run.record(f.run.splitOpen, f.sub, l.Get())
	return nil
}

func (f *rsSplitFn) ProcessElement(ctx *weir.Context[int64], i int64) error {
	f.rt.processed.Add(1)
	if i%16 == 0 {
		time.Sleep(time.Millisecond) // records flow while the savepoints are taken
	}
	if i%50 == 0 {
		f.l.Add(i)
		f.run.mu.Lock()
		f.run.splitAdded = append(f.run.splitAdded, i)
		f.run.mu.Unlock()
	}
	ctx.Emit(i)
	return nil
}

func (f *rsSplitFn) Close() error {
	if f.l != nil {
		f.run.record(f.run.splitClose, f.sub, f.l.Get())
	}
	return nil
}

// rsUnionFn keeps the numbers 25 mod 50 it sees in union list state; after
// a restore each subtask sees all of them and keeps its share.
type rsUnionFn struct {
	run *rsRun
	l   *weir.OperatorListState[int64]
	sub int
}

func (f *rsUnionFn) Open(ctx *weir.Context[int64]) error {
	l, err := weir.GetUnionListOperatorState(ctx, weir.ListStateDescriptor[int64]{Name: "25-mod-50"})
	if err != nil {
		return err
	}
	f.l, f.sub = l, ctx.Subtask()
	all := l.Get()
	f.run.record(f.run.unionOpen, f.sub, all)
	var mine []int64
	for _, e := range all {
		if int(e/50)%ctx.Parallelism() == f.sub {
			mine = append(mine, e)
		}
	}
	l.Update(mine)
	return nil
}

func (f *rsUnionFn) ProcessElement(ctx *weir.Context[int64], i int64) error {
	if i%50 == 25 {
		f.l.Add(i)
		f.run.mu.Lock()
		f.run.unionAdded = append(f.run.unionAdded, i)
		f.run.mu.Unlock()
	}
	ctx.Emit(i)
	return nil
}

func (f *rsUnionFn) Close() error {
	if f.l != nil {
		f.run.record(f.run.unionClose, f.sub, f.l.Get())
	}
	return nil
}

// rsBroadcastFn passes the numbers on and keeps every rule r as r -> r*r.
type rsBroadcastFn struct {
	run *rsRun
	st  *weir.BroadcastState[int64, int64]
	sub int
}

func (f *rsBroadcastFn) Open(ctx *weir.BroadcastContext[int64]) error {
	st, err := weir.GetBroadcastState(ctx, weir.MapStateDescriptor[int64, int64]{Name: "rules"})
	if err != nil {
		return err
	}
	f.st, f.sub = st, ctx.Subtask()
	f.run.recordBC(f.run.bcOpen, f.sub, st)
	return nil
}

func (f *rsBroadcastFn) ProcessElement(ctx *weir.BroadcastContext[int64], i int64) error {
	ctx.Emit(i)
	return nil
}

func (f *rsBroadcastFn) ProcessBroadcastElement(_ *weir.BroadcastContext[int64], r int64) error {
	f.st.Put(r, r*r)
	return nil
}

func (f *rsBroadcastFn) Close() error {
	if f.st != nil {
		f.run.recordBC(f.run.bcClose, f.sub, f.st)
	}
	return nil
}

// rsKeyedFn is the keyed function (see rsTest).
type rsKeyedFn struct {
	run                 *rsRun
	count, sum          *weir.ValueState[int64]
	items               *weir.ListState[int64]
	residues, ptPending *weir.MapState[int64, int64]
	registered          map[int64]bool // the numbers whose timers this subtask registered in this run
}

func (f *rsKeyedFn) Open(ctx *weir.KeyedContext[int64, string]) error {
	var err error
	if f.count, err = weir.GetValueState(ctx, weir.ValueStateDescriptor[int64]{Name: "count"}); err != nil {
		return err
	}
	if f.sum, err = weir.GetValueState(ctx, weir.ValueStateDescriptor[int64]{Name: "sum"}); err != nil {
		return err
	}
	if f.items, err = weir.GetListState(ctx, weir.ListStateDescriptor[int64]{Name: "items"}); err != nil {
		return err
	}
	if f.residues, err = weir.GetMapState(ctx, weir.MapStateDescriptor[int64, int64]{Name: "residues"}); err != nil {
		return err
	}
	f.ptPending, err = weir.GetMapState(ctx, weir.MapStateDescriptor[int64, int64]{Name: "pt-pending"})
	return err
}

func (f *rsKeyedFn) ProcessElement(ctx *weir.KeyedContext[int64, string], i int64) error {
	k := ctx.CurrentKey()
	c, _ := f.count.Value()
	c++
	f.count.Update(c)
	s, _ := f.sum.Value()
	f.sum.Update(s + i)
	f.items.Add(i)
	r, _ := f.residues.Get(i % 5)
	f.residues.Put(i%5, r+1)
	ctx.Emit("R," + strconv.FormatInt(k, 10) + "," + strconv.FormatInt(c, 10))
	pt := i%4 == 1 && !f.run.final
	if i%3 == 0 || pt {
		f.registered[i] = true
	}
	if i%3 == 0 {
		ctx.RegisterEventTimeTimer(i)
	}
	ctx.RegisterEventTimeTimer(rsFinal)
	if pt {
		f.run.mu.Lock()
		f.run.ptRegistered = append(f.run.ptRegistered, i)
		f.run.mu.Unlock()
		at := ctx.CurrentProcessingTime() + 20
		f.ptPending.Put(i, at)
		ctx.RegisterProcessingTimeTimer(at)
	}
	return nil
}

func (f *rsKeyedFn) OnTimer(ctx *weir.KeyedContext[int64, string], tm weir.Timer) error {
	k := ctx.CurrentKey()
	switch {
	case !tm.EventTime:
		ctx.Emit(fmt.Sprintf("PT,%d,%d", k, tm.Timestamp))
		var due []int64
		for i, at := range f.ptPending.All() {
			if at <= tm.Timestamp {
				due = append(due, i)
			}
		}
		for _, i := range due {
			if !f.registered[i] {
				f.run.restoredPT.Add(1)
			}
			f.ptPending.Remove(i)
			ctx.Emit(fmt.Sprintf("P,%d,%d", k, i))
		}
		f.run.ptHandled.Add(int64(len(due)))
	case tm.Timestamp == rsFinal:
		c, _ := f.count.Value()
		s, _ := f.sum.Value()
		items := f.items.Get()
		distinct := map[int64]bool{}
		var isum int64
		for _, i := range items {
			distinct[i] = true
			isum += i
		}
		var rs []string
		for r, n := range f.residues.All() {
			rs = append(rs, fmt.Sprintf("%d:%d", r, n))
		}
		slices.Sort(rs)
		pending := 0
		for range f.ptPending.All() {
			pending++
		}
		ctx.Emit(rsFinalLine(k, c, s, len(items), len(distinct), isum, rs, pending))
	default:
		f.run.eventFired.Add(1)
		if !f.registered[tm.Timestamp] {
			f.run.restoredEvent.Add(1)
		}
		ctx.Emit(fmt.Sprintf("E,%d,%d", k, tm.Timestamp))
	}
	return nil
}

func rsFinalLine(k, count, sum int64, items, distinct int, isum int64, residues []string, pending int) string {
	return fmt.Sprintf("F,%d,count=%d,sum=%d,items=%d,distinct=%d,itemsum=%d,residues=%s,pt-pending=%d",
		k, count, sum, items, distinct, isum, strings.Join(residues, ";"), pending)
}

// ruleTime is rule r's event time, and the number of processed numbers
// the rules source waits for before it emits r: the rules spread over the
// runs.
func (rt *rsTest) ruleTime(r int64) int64 { return (r + 1) * rt.n / (rt.rules + 1) }

func (rt *rsTest) job(env *weir.Environment, run *rsRun, hold func() bool) {
	nums := weir.FromSource(env, spRange{n: rt.n, hold: hold}).UID("numbers")
	nums = weir.AssignTimestampsAndWatermarks(nums, weir.MonotonousTimestamps(func(i int64) int64 { return i })).UID("numbers-ts")
	split := weir.ProcessEach(nums, func() weir.ProcessFunction[int64, int64] { return &rsSplitFn{rt: rt, run: run} }).UID("split-list")
	union := weir.ProcessEach(split, func() weir.ProcessFunction[int64, int64] { return &rsUnionFn{run: run} }).UID("union-list")
	rules := weir.FromSource(env, spRules{count: rt.rules, next: &rt.rulesNext,
		ready: func(r int64) bool { return rt.processed.Load() >= rt.ruleTime(r) }}).SetParallelism(1).UID("rules")
	rules = weir.AssignTimestampsAndWatermarks(rules, weir.MonotonousTimestamps(rt.ruleTime)).SetParallelism(1).UID("rules-ts")
	bc := weir.BroadcastProcess(union, rules, func() weir.BroadcastProcessFunction[int64, int64, int64] {
		return &rsBroadcastFn{run: run}
	}).UID("broadcast")
	keyed := weir.KeyedProcess(weir.KeyBy(bc, func(i int64) int64 { return i % rt.keys }),
		func() weir.KeyedProcessFunction[int64, int64, string] {
			return &rsKeyedFn{run: run, registered: map[int64]bool{}}
		}).UID("keyed")
	weir.SinkTo(keyed, sink.Files(rt.out, func(s string) string { return s })).UID("sink")
}

func (rt *rsTest) options(t *testing.T, p int, restore string) weir.Options {
	return weir.Options{Parallelism: p, MaxParallelism: rt.maxP, StateBackend: rt.backend,
		StateDir: filepath.Join(rt.dir, "state"), AutoWatermarkInterval: 5 * time.Millisecond, Logger: quietLogger(t),
		Checkpoint: weir.CheckpointOptions{Interval: time.Hour, Dir: filepath.Join(rt.dir, "chk"),
			SavepointDir: filepath.Join(rt.dir, "savepoints"), RestorePath: restore},
		Restart: weir.RestartOptions{Type: "none"}}
}

// spWait polls cond until it holds; it fails the test (after canceling
// the job and waiting for it) if the job ends first or a minute passes.
func spWait(t *testing.T, done <-chan error, cancel context.CancelFunc, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		select {
		case err := <-done:
			t.Fatalf("the job ended before %s: %v", what, err)
		case <-time.After(2 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			cancel()
			<-done
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// stopAt runs the job at parallelism p (from restore, if set) until
// split-list processed target numbers in all, stops it with a savepoint of
// format and returns the savepoint.
func (rt *rsTest) stopAt(t *testing.T, p int, restore string, target int64, format string) string {
	t.Helper()
	run := newRsRun(p)
	rt.runs = append(rt.runs, run)
	env := weir.NewEnvironment(rt.options(t, p, restore))
	rt.job(env, run, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- env.Execute(ctx, "rescale") }()
	spWait(t, done, cancel, fmt.Sprintf("%d numbers were processed", target), func() bool { return rt.processed.Load() >= target })
	sp, err := env.StopWithSavepoint(ctx, weir.SavepointOptions{Format: format})
	if err != nil {
		cancel()
		<-done
		t.Fatalf("stop with savepoint at parallelism %d: %v", p, err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the run at parallelism %d stopped with a savepoint returned %v, want nil", p, err)
	}
	if cp := readSavepoint(t, sp); cp.Format != format {
		t.Fatalf("savepoint format %q, want %q", cp.Format, format)
	}
	rt.checkNoDuplicates(t, fmt.Sprintf("after the stop at parallelism %d", p))
	return sp
}

// finish runs the job at parallelism p from restore to its end.
func (rt *rsTest) finish(t *testing.T, p int, restore string) {
	t.Helper()
	run := newRsRun(p)
	run.final = true
	// The input ends once every processing-time timer fired (timers still
	// pending at the end of the input never fire): those the earlier runs
	// registered and did not fire are in the savepoint.
	var registered int64
	for _, r := range rt.runs {
		registered += int64(len(r.ptRegistered))
	}
	rt.runs = append(rt.runs, run)
	var committedP int64
	lines, _ := committedLines(t, rt.out)
	for _, l := range lines {
		if strings.HasPrefix(l, "P,") {
			committedP++
		}
	}
	holdUntil := time.Now().Add(30 * time.Second)
	hold := func() bool {
		return committedP+run.ptHandled.Load() < registered && time.Now().Before(holdUntil)
	}
	env := weir.NewEnvironment(rt.options(t, p, restore))
	rt.job(env, run, hold)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := env.Execute(ctx, "rescale"); err != nil {
		t.Fatalf("final run at parallelism %d: %v", p, err)
	}
}

func (rt *rsTest) checkNoDuplicates(t *testing.T, when string) {
	t.Helper()
	lines, files := committedLines(t, rt.out)
	seen := make(map[string]string, len(lines))
	for i, l := range lines {
		if f, dup := seen[l]; dup {
			t.Fatalf("%s: line %q committed twice (files %s and %s)", when, l, f, files[i])
		}
		seen[l] = files[i]
	}
}

// checkOutput compares the committed output with the model of the job.
func (rt *rsTest) checkOutput(t *testing.T) {
	t.Helper()
	want := map[string]bool{}
	counts := make([]int64, rt.keys)
	sums := make([]int64, rt.keys)
	residues := make([]map[int64]int64, rt.keys)
	for i := range rt.n {
		k := i % rt.keys
		counts[k]++
		sums[k] += i
		if residues[k] == nil {
			residues[k] = map[int64]int64{}
		}
		residues[k][i%5]++
		want[fmt.Sprintf("R,%d,%d", k, counts[k])] = true
		if i%3 == 0 {
			want[fmt.Sprintf("E,%d,%d", k, i)] = true
		}
	}
	for _, r := range rt.runs {
		for _, i := range r.ptRegistered {
			want[fmt.Sprintf("P,%d,%d", i%rt.keys, i)] = true
		}
	}
	for k := range rt.keys {
		var rs []string
		for r, n := range residues[k] {
			rs = append(rs, fmt.Sprintf("%d:%d", r, n))
		}
		slices.Sort(rs)
		want[rsFinalLine(k, counts[k], sums[k], int(counts[k]), int(counts[k]), sums[k], rs, 0)] = true
	}
	lines, _ := committedLines(t, rt.out)
	seen := map[string]int{}
	var unexpected, dups []string
	timers := map[string]int{}
	for _, l := range lines {
		seen[l]++
		if seen[l] == 2 {
			dups = append(dups, l)
		}
		kind, _, _ := strings.Cut(l, ",")
		timers[kind]++
		if kind == "PT" {
			continue
		}
		if !want[l] {
			unexpected = append(unexpected, l)
		}
	}
	var missing []string
	for l := range want {
		if seen[l] == 0 {
			missing = append(missing, l)
		}
	}
	slices.Sort(missing)
	if len(dups)+len(unexpected)+len(missing) > 0 {
		t.Errorf("committed output (%d lines, by kind %v) is not the model: %d duplicated %v, %d unexpected %v, %d missing %v",
			len(lines), timers, len(dups), head(dups), len(unexpected), head(unexpected), len(missing), head(missing))
	}
	if timers["PT"] == 0 {
		t.Errorf("no processing-time timer fired")
	}
}

func head(s []string) []string {
	slices.Sort(s)
	return s[:min(len(s), 5)]
}

// checkOperatorState checks what the operators of run k (k > 0: restored
// from the savepoint of run k-1) saw of their operator and broadcast state
// when they opened: split list state holds every element the earlier
// runs added exactly once across the subtasks, every subtask sees the
// whole union list, and every subtask the same broadcast state, with
// every rule the earlier runs emitted.
func (rt *rsTest) checkOperatorState(t *testing.T, k int, rulesBefore int64) {
	t.Helper()
	run := rt.runs[k]
	var split, union []int64
	for _, r := range rt.runs[:k] {
		split = append(split, r.splitAdded...)
		union = append(union, r.unionAdded...)
	}
	slices.Sort(split)
	slices.Sort(union)
	rules := map[int64]int64{}
	for r := range rulesBefore {
		rules[r] = r * r
	}
	rt.checkLists(t, fmt.Sprintf("run %d (parallelism %d) at open", k, run.p), run, run.splitOpen, run.unionOpen, run.bcOpen, split, union, rules, true)
}

func (rt *rsTest) checkLists(t *testing.T, when string, run *rsRun, splitGot, unionGot map[int][]int64, bcGot map[int]map[int64]int64,
	split, union []int64, rules map[int64]int64, unionWhole bool) {
	t.Helper()
	run.mu.Lock()
	defer run.mu.Unlock()
	if len(run.errs) > 0 {
		t.Errorf("%s: %v", when, run.errs)
	}
	if len(splitGot) != run.p || len(unionGot) != run.p || len(bcGot) != run.p {
		t.Fatalf("%s: %d, %d and %d subtasks reported split list, union list and broadcast state, want %d each",
			when, len(splitGot), len(unionGot), len(bcGot), run.p)
	}
	var all []int64
	for _, l := range splitGot {
		all = append(all, l...)
	}
	slices.Sort(all)
	if !slices.Equal(all, split) {
		t.Errorf("%s: the subtasks' split list state holds %d elements %v, want each of the %d added before exactly once: %v",
			when, len(all), diffInts(all, split), len(split), split[:min(len(split), 10)])
	}
	if unionWhole {
		for sub, l := range unionGot {
			got := slices.Sorted(slices.Values(l))
			if !slices.Equal(got, union) {
				t.Errorf("%s: subtask %d sees %d elements of union list state %v, want all %d, once each",
					when, sub, len(got), diffInts(got, union), len(union))
			}
		}
	} else {
		all = all[:0]
		for _, l := range unionGot {
			all = append(all, l...)
		}
		slices.Sort(all)
		if !slices.Equal(all, union) {
			t.Errorf("%s: the subtasks' shares of union list state hold %d elements %v, want each of %d exactly once",
				when, len(all), diffInts(all, union), len(union))
		}
	}
	for sub, m := range bcGot {
		if !maps.Equal(m, rules) {
			t.Errorf("%s: subtask %d has broadcast state of %d rules, want the %d rules emitted before: %v",
				when, sub, len(m), len(rules), m)
		}
	}
}

// diffInts describes how got differs from want (both sorted).
func diffInts(got, want []int64) string {
	count := map[int64]int{}
	for _, v := range got {
		count[v]++
	}
	for _, v := range want {
		count[v]--
	}
	var extra, missing []int64
	for v, c := range count {
		for ; c > 0; c-- {
			extra = append(extra, v)
		}
		for ; c < 0; c++ {
			missing = append(missing, v)
		}
	}
	slices.Sort(extra)
	slices.Sort(missing)
	return fmt.Sprintf("(extra %v, missing %v)", extra[:min(len(extra), 10)], missing[:min(len(missing), 10)])
}

// A job with keyed value, list and map state, event-time and
// processing-time timers, operator list state, union list state and
// broadcast state is stopped with a savepoint at parallelism 2, resumed
// at 5, stopped again, resumed at 1, stopped again and finished at 3
// (Flink's RescalingITCase, through savepoints). After every restore the
// split list state holds each element once across the subtasks, every
// subtask sees the whole union list and the same broadcast state; the
// committed output holds every running count, every event-time timer and
// every processing-time timer's work exactly once, and the final keyed
// state equals the model. With max parallelism 13 (uneven key groups)
// and 128, from canonical savepoints on the hashmap backend and native
// ones on pebble.
func TestSavepointRescaling(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		format, backend string
	}{{weir.SavepointCanonical, weir.BackendHashMap}, {weir.SavepointNative, weir.BackendPebble}} {
		for _, maxP := range []int{13, 128} {
			t.Run(fmt.Sprintf("%s-%s/maxp%d", c.format, c.backend, maxP), func(t *testing.T) {
				t.Parallel()
				dir := t.TempDir()
				rt := &rsTest{n: 8_000, keys: 37, rules: 24, dir: dir, out: filepath.Join(dir, "out"), backend: c.backend, maxP: maxP}
				steps := []struct {
					p      int
					target int64
				}{{2, rt.n / 4}, {5, rt.n / 2}, {1, 3 * rt.n / 4}}
				var (
					sp    string
					rules []int64 // rules emitted before each run
				)
				for _, s := range steps {
					rules = append(rules, rt.rulesNext.Load())
					sp = rt.stopAt(t, s.p, sp, s.target, c.format)
				}
				rules = append(rules, rt.rulesNext.Load())
				rt.finish(t, 3, sp)
				for k := range rt.runs {
					rt.checkOperatorState(t, k, rules[k])
				}
				// At the end: every element once, in the split list and
				// in the union list's shares; every rule on every subtask.
				last := rt.runs[len(rt.runs)-1]
				var split, union []int64
				for i := range rt.n {
					switch i % 50 {
					case 0:
						split = append(split, i)
					case 25:
						union = append(union, i)
					}
				}
				all := map[int64]int64{}
				for r := range rt.rules {
					all[r] = r * r
				}
				rt.checkLists(t, "the final run at its end", last, last.splitClose, last.unionClose, last.bcClose, split, union, all, false)
				rt.checkOutput(t)
				var restoredEvent, restoredPT int64
				for k, r := range rt.runs {
					t.Logf("run %d at parallelism %d: %d split, %d union elements added; %d rules before it; "+
						"%d event-time timers fired, %d of them and %d processing-time timers from the savepoint",
						k, r.p, len(r.splitAdded), len(r.unionAdded), rules[k], r.eventFired.Load(), r.restoredEvent.Load(), r.restoredPT.Load())
					restoredEvent += r.restoredEvent.Load()
					restoredPT += r.restoredPT.Load()
				}
				// Records flow until each stop and timers trail them (the
				// watermark by at least its interval, processing-time timers
				// by 20 ms): the savepoints must have held pending timers.
				if restoredEvent == 0 || restoredPT == 0 {
					t.Errorf("%d event-time and %d processing-time timers restored from the savepoints fired, want some of each", restoredEvent, restoredPT)
				}
			})
		}
	}
}
