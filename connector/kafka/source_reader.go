package kafka

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/weirstream/weir"
)

// batchSize is how many records a reader emits per ReadBatch at most.
const batchSize = 1024

// adminTimeout bounds the listings and commits of a reader.
const adminTimeout = 30 * time.Second

// commitGrace is how long Close lets the last group commit finish before
// it cancels it.
const commitGrace = 2 * time.Second

// knownPartitionsState is the union operator list state every reader keeps
// the partitions it holds in ("topic/partition"), so that after a restore
// every subtask knows every partition some subtask holds and partition
// discovery never takes one twice.
const knownPartitionsState = "kafka-known-partitions"

// knownStore holds the known partitions (weir.OperatorListState in a job).
type knownStore interface {
	Get() []string
	Update([]string)
}

// memKnown is a knownStore for readers made outside a job.
type memKnown struct{ v []string }

func (m *memKnown) Get() []string     { return slices.Clone(m.v) }
func (m *memKnown) Update(v []string) { m.v = slices.Clone(v) }

// reader reads the splits of one subtask.
//
// Goroutines: the subtask's (ReadBatch, SnapshotSplits,
// NotifyCheckpointComplete, Close), a poller moving fetches from the
// client into fetches and signalling ready, a discoverer (unbounded
// sources with discovery) sending new partitions this subtask owns into
// discovered, and a committer (when offsets are committed) committing the
// newest offsets NotifyCheckpointComplete left, one commit at a time so
// that the group's offsets never go backwards. Close stops the committer
// (its last commit gets commitGrace), then cancels ctx, closes the client
// and joins them all.
type reader[T any] struct {
	src       *Source[T]
	opts      SourceOptions
	log       *slog.Logger
	subtask   int
	parallel  int
	pattern   *regexp.Regexp
	cl        *kgo.Client
	adm       *kadm.Client
	committed bool // read_committed isolation

	splits     map[tp]*split // held splits, finished ones too
	unfinished int
	known      map[tp]bool // partitions some subtask holds (union state) or this one took
	knownState knownStore

	fetches    chan kgo.Fetches
	discovered chan []split
	ready      chan struct{}
	cur        []*kgo.Record
	pos        int

	fetchWarned map[tp]time.Time // when a partition's retriable fetch error was last logged

	pending []snapshotOffsets // offsets of snapshots not yet committed, oldest first

	// The committer's inputs: the newest offsets to commit (nil when
	// none), under commitMu, and a wake-up.
	commitMu     sync.Mutex
	commitNext   *groupCommit
	commitWake   chan struct{}
	commitStop   chan struct{} // closed by Close (once)
	commitDone   chan struct{} // closed when the committer returns
	commitCtx    context.Context
	commitCancel context.CancelFunc // by Close, after the grace
	stopOnce     sync.Once
	// commitGrace and commitFn are commitGrace and the commit to the
	// group; tests change them before the first notification.
	commitGrace time.Duration
	commitFn    func(context.Context, kadm.Offsets) error

	// Per-split outputs of a weir.SplitCollector (FromSourceWithWatermarks),
	// created when a split is assigned, released when it finishes.
	outs map[tp]weir.SplitOutput[T]

	// The partition of the records ReadBatch is on (a fetch holds each
	// partition's records together), so that a record costs no map
	// lookups; last.sp is nil when it must be looked up again.
	last struct {
		sp  *split
		out weir.SplitOutput[T]
		pm  *partMetrics
	}
	rec  Record   // handed to the deserializer, reused for every record
	hdrs []Header // rec.Headers' storage

	metrics *weir.MetricGroup
	pm      map[tp]*partMetrics // the subtask's goroutine only
	pmMu    sync.Mutex
	pmList  []*partMetrics // read by the lag gauge

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	rounds atomic.Int64 // discovery rounds done (tests)
}

var (
	_ weir.SourceReader[int]  = (*reader[int])(nil)
	_ weir.CheckpointedReader = (*reader[int])(nil)
	_ weir.ReadyNotifier      = (*reader[int])(nil)
	_ weir.CheckpointListener = (*reader[int])(nil)
)

// newReader opens the reader of a subtask; store replaces the operator
// state of known partitions when non-nil (tests).
func newReader[T any](src *Source[T], sctx weir.SourceContext, store knownStore) (*reader[T], error) {
	o := src.opts
	log := sctx.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if sctx.Parallelism < 1 || sctx.Subtask < 0 || sctx.Subtask >= sctx.Parallelism {
		return nil, fmt.Errorf("kafka source: subtask %d of %d", sctx.Subtask, sctx.Parallelism)
	}
	if store == nil {
		st, err := weir.GetUnionListOperatorState(sctx, weir.ListStateDescriptor[string]{Name: knownPartitionsState})
		switch {
		case errors.Is(err, weir.ErrNoOperatorState):
			store = &memKnown{}
		case err != nil:
			return nil, fmt.Errorf("kafka source: %w", err)
		default:
			store = st
		}
	}
	r := &reader[T]{src: src, opts: o, log: log, subtask: sctx.Subtask, parallel: sctx.Parallelism,
		committed: o.IsolationLevel == ReadCommitted, splits: map[tp]*split{}, known: map[tp]bool{},
		knownState: store, fetches: make(chan kgo.Fetches, 1), discovered: make(chan []split, 1),
		ready: make(chan struct{}, 1), fetchWarned: map[tp]time.Time{}, outs: map[tp]weir.SplitOutput[T]{}, metrics: sctx.Metrics, pm: map[tp]*partMetrics{}}
	r.metrics.Gauge("records-lag-max", r.lagMax)
	if o.TopicPattern != "" {
		r.pattern = regexp.MustCompile("^(?:" + o.TopicPattern + ")$") // validated
	}
	iso := kgo.ReadCommitted()
	if !r.committed {
		iso = kgo.ReadUncommitted()
	}
	// fetch.max.wait.ms as the Java consumer Flink uses has it (500ms;
	// franz-go waits 5s), before Client.Opts so that they can change it:
	// a partition added while a fetch waits is fetched after it.
	copts := append([]kgo.Opt{kgo.FetchMaxWait(500 * time.Millisecond)},
		o.Client.opts(kgo.FetchIsolationLevel(iso), kgo.KeepControlRecords(),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	cl, err := kgo.NewClient(copts...)
	if err != nil {
		return nil, fmt.Errorf("kafka source: client: %w", err)
	}
	r.cl, r.adm = cl, kadm.NewClient(cl)
	r.ctx, r.cancel = context.WithCancel(context.Background())
	if err := r.assign(sctx.RestoredSplits); err != nil {
		r.Close()
		return nil, err
	}
	r.consume(r.openSplits())
	if o.commits() {
		r.commitWake, r.commitStop, r.commitDone = make(chan struct{}, 1), make(chan struct{}), make(chan struct{})
		r.commitCtx, r.commitCancel = context.WithCancel(context.Background())
		r.commitGrace, r.commitFn = commitGrace, r.commitToGroup
		r.wg.Add(1)
		go r.commitLoop()
	}
	r.wg.Add(1)
	go r.poll()
	if iv := o.discoveryInterval(); iv > 0 {
		known := make(map[tp]bool, len(r.known))
		for p := range r.known {
			known[p] = true
		}
		r.wg.Add(1)
		go r.discover(iv, known, sctx.RestoredSplits != nil)
	}
	return r, nil
}

// assign takes the restored splits, or on a fresh start the partitions
// this subtask owns from their starting offsets.
func (r *reader[T]) assign(restored [][]byte) error {
	if restored != nil {
		sps := make([]split, 0, len(restored))
		for _, b := range restored {
			sp, err := decodeSplit(b)
			if err != nil {
				return fmt.Errorf("kafka source: restore: %w", err)
			}
			sps = append(sps, sp)
		}
		if err := r.checkRestored(sps); err != nil {
			return err
		}
		for _, sp := range sps {
			r.add(sp)
		}
		for _, s := range r.knownState.Get() {
			p, err := parseTP(s)
			if err != nil {
				return fmt.Errorf("kafka source: restore: known partitions: %w", err)
			}
			r.known[p] = true
		}
		r.log.Info("kafka source restored", "subtask", r.subtask, "splits", len(r.splits), "known partitions", len(r.known))
		return nil
	}
	ctx, cancel := context.WithTimeout(r.ctx, adminTimeout)
	defer cancel()
	all, err := r.listPartitions(ctx, true)
	if err != nil {
		return err
	}
	mine := partitions{}
	for _, p := range all {
		// Only partitions held are known: one another subtask has not
		// taken yet must stay free for it, also after a restore.
		if owner(p.topic, p.partition, r.parallel) == r.subtask {
			mine[p.topic] = append(mine[p.topic], p.partition)
		}
	}
	starts, err := r.opts.StartingOffsets.resolve(ctx, r.adm, r.opts.GroupID, r.committed, mine)
	if err != nil {
		return fmt.Errorf("kafka source: starting offsets: %w", err)
	}
	var stops map[tp]int64
	if r.opts.Bounded {
		stops, err = Latest().resolve(ctx, r.adm, "", r.committed, mine)
		if err != nil {
			return fmt.Errorf("kafka source: stopping offsets: %w", err)
		}
	}
	for p, off := range starts {
		sp := split{tp: p, next: off, stop: noStop}
		if r.opts.Bounded {
			sp.stop = max(stops[p], 0)
		}
		r.add(sp)
	}
	r.log.Info("kafka source assigned", "subtask", r.subtask, "partitions", len(r.splits), "of", len(all))
	return nil
}

// checkRestored fails when a restored split resumes past its partition's
// end: the topic was deleted and re-created, or its log truncated (an
// unclean leader election). Reading on would go wrong silently: the
// client resets an offset out of range to the log start, and the records
// before the checkpoint's offset would be skipped as read already, or,
// resumed from the start, read twice. Flink's KafkaSource resets such a
// split as the consumer's auto.offset.reset says (the starting offsets'
// reset strategy) and goes on; weir fails the restore, naming the
// partition and both offsets, so that someone decides (start afresh
// without the checkpoint). A split before the log start resumes at the
// log start, as in Flink: retention deleted the records between.
func (r *reader[T]) checkRestored(sps []split) error {
	if len(sps) == 0 {
		return nil
	}
	offs := make(map[tp]int64, len(sps))
	for _, sp := range sps {
		offs[sp.tp] = sp.next
	}
	ctx, cancel := context.WithTimeout(r.ctx, adminTimeout)
	defer cancel()
	starts, ends, err := logBounds(ctx, r.adm, offs)
	if err != nil {
		return fmt.Errorf("kafka source: restore: %w", err)
	}
	for _, sp := range sps {
		s, _ := starts.Lookup(sp.topic, sp.partition)
		e, _ := ends.Lookup(sp.topic, sp.partition)
		switch {
		case sp.next > e.Offset:
			return fmt.Errorf("kafka source: restore: partition %s: the checkpoint resumes it at offset %d, past its end %d (log start %d): "+
				"was the topic re-created or its log truncated? Records would be skipped or read twice; start the job without this checkpoint",
				sp.tp, sp.next, e.Offset, s.Offset)
		case sp.next < s.Offset:
			r.log.Warn("kafka source: the checkpoint's offset of a partition was deleted by retention; resuming at the log start",
				"subtask", r.subtask, "partition", sp.tp.String(), "offset", sp.next, "log start", s.Offset)
		}
	}
	return nil
}

// add holds split sp.
func (r *reader[T]) add(sp split) {
	s := sp
	r.splits[sp.tp] = &s
	r.known[sp.tp] = true
	if !s.finished() {
		r.unfinished++
	}
	if _, ok := r.pm[sp.tp]; !ok {
		m := &partMetrics{}
		m.current.Store(sp.next - 1)
		m.committed.Store(-1)
		m.hw.Store(-1)
		g := r.metrics.Group("topic", sp.topic).Group("partition", strconv.Itoa(int(sp.partition)))
		g.Gauge("currentOffset", func() float64 { return float64(m.current.Load()) })
		g.Gauge("committedOffset", func() float64 { return float64(m.committed.Load()) })
		r.pm[sp.tp] = m
		r.pmMu.Lock()
		r.pmList = append(r.pmList, m)
		r.pmMu.Unlock()
	}
}

// partMetrics are a partition's metrics (Flink's KafkaSourceReaderMetrics):
// the offset of the last record emitted, the last offset committed to the
// group, and the partition's end as the last fetch saw it.
type partMetrics struct {
	current, committed, hw atomic.Int64
}

// lagMax is records-lag-max: the largest distance, over the partitions
// held, between a partition's end (last stable offset with read_committed
// isolation, else high watermark) as last fetched and the next offset to
// emit; 0 before any fetch.
func (r *reader[T]) lagMax() float64 {
	r.pmMu.Lock()
	defer r.pmMu.Unlock()
	var lag int64
	for _, m := range r.pmList {
		if hw := m.hw.Load(); hw >= 0 {
			lag = max(lag, hw-(m.current.Load()+1))
		}
	}
	return float64(lag)
}

// openSplits returns the splits still to read.
func (r *reader[T]) openSplits() []split {
	var out []split
	for _, sp := range r.splits {
		if !sp.finished() {
			out = append(out, *sp)
		}
	}
	return out
}

// consume adds splits to the client's partitions.
func (r *reader[T]) consume(sps []split) {
	if len(sps) == 0 {
		return
	}
	m := map[string]map[int32]kgo.Offset{}
	for _, sp := range sps {
		if m[sp.topic] == nil {
			m[sp.topic] = map[int32]kgo.Offset{}
		}
		m[sp.topic][sp.partition] = kgo.NewOffset().At(sp.next)
	}
	r.cl.AddConsumePartitions(m)
}

// listPartitions lists the partitions of the source's topics. strict
// fails when a listed topic does not exist.
func (r *reader[T]) listPartitions(ctx context.Context, strict bool) ([]tp, error) {
	var (
		tds kadm.TopicDetails
		err error
	)
	if r.pattern != nil {
		tds, err = r.adm.ListTopics(ctx)
	} else {
		tds, err = r.adm.ListTopics(ctx, r.opts.Topics...)
	}
	if err != nil {
		return nil, fmt.Errorf("kafka source: list topics: %w", err)
	}
	var out []tp
	for name, td := range tds {
		if r.pattern != nil && !r.pattern.MatchString(name) {
			continue
		}
		if td.Err != nil {
			if strict && errors.Is(td.Err, kerr.UnknownTopicOrPartition) {
				return nil, fmt.Errorf("kafka source: topic %q does not exist: create it or fix Topics (%w)", name, td.Err)
			}
			if strict {
				return nil, fmt.Errorf("kafka source: topic %q: %w", name, td.Err)
			}
			continue
		}
		for p := range td.Partitions {
			out = append(out, tp{name, p})
		}
	}
	slices.SortFunc(out, compareTP)
	return out, nil
}

func compareTP(a, b tp) int {
	return cmp.Or(strings.Compare(a.topic, b.topic), cmp.Compare(a.partition, b.partition))
}

// poll moves fetches from the client to the subtask until Close.
func (r *reader[T]) poll() {
	defer r.wg.Done()
	for {
		fs := r.cl.PollRecords(r.ctx, 4*batchSize)
		if r.ctx.Err() != nil || fs.IsClientClosed() {
			return
		}
		// Empty counts records only: a fetch holding only errors (a
		// non-retriable one franz-go gives up on, such as
		// TOPIC_AUTHORIZATION_FAILED) must reach the subtask too.
		if fs.Empty() && !hasErrors(fs) {
			continue
		}
		select {
		case r.fetches <- fs:
			r.signal()
		case <-r.ctx.Done():
			return
		}
	}
}

// hasErrors says whether fs holds an error other than the end of the
// poll (context canceled, client closed).
func hasErrors(fs kgo.Fetches) bool {
	for _, e := range fs.Errors() {
		if !ignoredFetchErr(e.Err) {
			return true
		}
	}
	return false
}

// ignoredFetchErr says whether a fetch error only ends the poll: Close
// canceled it or closed the client.
func ignoredFetchErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, kgo.ErrClientClosed)
}

// fetchWarnEvery is how often at most a partition's retriable fetch
// errors are logged.
const fetchWarnEvery = 10 * time.Second

// signal wakes the subtask if it waits for data.
func (r *reader[T]) signal() {
	select {
	case r.ready <- struct{}{}:
	default:
	}
}

// discover lists the partitions every interval and hands the new ones
// this subtask owns, from their earliest offsets (as Flink starts
// discovered partitions), to the subtask. known are the partitions some
// subtask holds; now runs a discovery at once (after a restore).
func (r *reader[T]) discover(interval time.Duration, known map[tp]bool, now bool) {
	defer r.wg.Done()
	t := time.NewTicker(interval)
	defer t.Stop()
	var pending []split // found, not yet handed over
	for {
		if !now {
			select {
			case <-r.ctx.Done():
				return
			case <-t.C:
			}
		}
		now = false
		found, err := r.discoverOnce(known)
		r.rounds.Add(1)
		if err != nil {
			if r.ctx.Err() != nil {
				return
			}
			r.log.Warn("kafka source: partition discovery failed; retrying at the next interval", "subtask", r.subtask, "err", err)
			continue
		}
		if len(found) == 0 {
			continue
		}
		for _, sp := range found {
			known[sp.tp] = true
			r.log.Info("kafka source discovered a partition", "subtask", r.subtask, "partition", sp.tp.String(), "from offset", sp.next)
		}
		select {
		case prev := <-r.discovered:
			pending = append(prev, found...)
		default:
			pending = found
		}
		r.discovered <- pending // the only sender, and the channel is empty now
		r.signal()
	}
}

// discoverOnce returns the partitions not known yet that this subtask
// owns, with their earliest offsets.
func (r *reader[T]) discoverOnce(known map[tp]bool) ([]split, error) {
	ctx, cancel := context.WithTimeout(r.ctx, adminTimeout)
	defer cancel()
	all, err := r.listPartitions(ctx, false)
	if err != nil {
		return nil, err
	}
	mine := partitions{}
	for _, p := range all {
		if !known[p] && owner(p.topic, p.partition, r.parallel) == r.subtask {
			mine[p.topic] = append(mine[p.topic], p.partition)
		}
	}
	starts, err := Earliest().resolve(ctx, r.adm, "", r.committed, mine)
	if err != nil {
		return nil, err
	}
	out := make([]split, 0, len(starts))
	for p, off := range starts {
		out = append(out, split{tp: p, next: off, stop: noStop})
	}
	slices.SortFunc(out, func(a, b split) int { return compareTP(a.tp, b.tp) })
	return out, nil
}

// takeDiscovered holds the partitions the discoverer found.
func (r *reader[T]) takeDiscovered() {
	select {
	case sps := <-r.discovered:
		var open []split
		for _, sp := range sps {
			if _, ok := r.splits[sp.tp]; ok {
				continue
			}
			r.add(sp)
			open = append(open, sp)
		}
		r.consume(open)
	default:
	}
}

// nextFetch takes the next fetch the poller moved, without waiting; it
// says whether there was one.
func (r *reader[T]) nextFetch() (bool, error) {
	var fs kgo.Fetches
	select {
	case fs = <-r.fetches:
	default:
		return false, nil
	}
	// franz-go retries retriable fetch errors itself (and keeps them from
	// the poll unless told to); any other error is one it gives up on:
	// authorization, an unknown server error, data loss, a corrupt batch.
	for _, e := range fs.Errors() {
		switch {
		case ignoredFetchErr(e.Err):
		case kerr.IsRetriable(e.Err):
			p := tp{e.Topic, e.Partition}
			if now := time.Now(); now.Sub(r.fetchWarned[p]) >= fetchWarnEvery {
				r.fetchWarned[p] = now
				r.log.Warn("kafka source: fetch failed, retrying", "subtask", r.subtask, "partition", p.String(), "err", e.Err)
			}
		default:
			return false, fmt.Errorf("kafka source: fetch of topic %q partition %d failed (not retriable): %w", e.Topic, e.Partition, e.Err)
		}
	}
	r.cur, r.pos = r.cur[:0], 0
	fs.EachPartition(func(p kgo.FetchTopicPartition) {
		r.cur = append(r.cur, p.Records...)
		if m := r.pm[tp{p.Topic, p.Partition}]; m != nil {
			end := p.HighWatermark
			if r.committed && p.LastStableOffset >= 0 {
				end = p.LastStableOffset
			}
			if end >= 0 {
				m.hw.Store(end)
			}
		}
	})
	return true, nil
}

// ReadBatch emits the records fetched so far, up to batchSize, advancing
// each split's offset past every record emitted (and every control
// record), so that SnapshotSplits between batches is exact.
//
// With a weir.SplitCollector (FromSourceWithWatermarks), every partition
// has its own output from its assignment on (an empty partition holds the
// watermark back, as in Flink), records carry their Kafka timestamps, and
// a finished partition (bounded) is released.
func (r *reader[T]) ReadBatch(out weir.Collector[T]) (weir.ReadStatus, error) {
	r.takeDiscovered()
	sc, _ := out.(weir.SplitCollector[T])
	if sc != nil {
		for p, sp := range r.splits {
			if _, ok := r.outs[p]; !ok && !sp.finished() {
				r.outs[p] = sc.Split(splitID(p))
			}
		}
	}
	r.last.sp = nil // splits and outputs may have changed since the last batch
	emitted := 0
	for emitted < batchSize && !(r.opts.Bounded && r.unfinished == 0) {
		if r.pos >= len(r.cur) {
			ok, err := r.nextFetch()
			if err != nil {
				return weir.NothingAvailable, err
			}
			if !ok {
				break
			}
			continue
		}
		rec := r.cur[r.pos]
		sp := r.last.sp
		if sp == nil || sp.partition != rec.Partition || sp.topic != rec.Topic {
			k := tp{rec.Topic, rec.Partition}
			sp = r.splits[k]
			r.last.sp, r.last.pm, r.last.out = sp, r.pm[k], nil
			if sc != nil {
				r.last.out = r.outs[k]
			}
		}
		if sp == nil || sp.finished() || rec.Offset < sp.next {
			r.pos++ // a partition no longer read, or a record already emitted
			continue
		}
		if sp.stop != noStop && rec.Offset >= sp.stop {
			r.finish(sp, sc)
			r.last.sp = nil
			r.pos++
			continue
		}
		if !rec.Attrs.IsControl() {
			v, err := r.src.deserialize(r.record(rec))
			if err != nil {
				return weir.NothingAvailable, fmt.Errorf("kafka source: deserialize the record of topic %q partition %d at offset %d: %w",
					rec.Topic, rec.Partition, rec.Offset, err)
			}
			if o := r.last.out; o != nil {
				o.CollectWithTimestamp(v, rec.Timestamp.UnixMilli())
			} else {
				out.Collect(v)
			}
			if m := r.last.pm; m != nil {
				m.current.Store(rec.Offset)
			}
			emitted++
		}
		sp.next = rec.Offset + 1
		r.pos++
		if sp.finished() {
			r.finish(sp, sc)
			r.last.sp = nil
		}
	}
	if r.opts.Bounded && r.unfinished == 0 {
		return weir.EndOfInput, nil
	}
	if emitted == 0 {
		return weir.NothingAvailable, nil
	}
	return weir.MoreAvailable, nil
}

// finish ends split sp of a bounded source.
func (r *reader[T]) finish(sp *split, sc weir.SplitCollector[T]) {
	sp.next = max(sp.next, sp.stop)
	r.unfinished--
	r.cl.RemoveConsumePartitions(map[string][]int32{sp.topic: {sp.partition}})
	if sc != nil {
		sc.ReleaseSplit(splitID(sp.tp))
		delete(r.outs, sp.tp)
	}
}

// splitID names a partition's split as Flink's KafkaPartitionSplit does:
// topic-partition.
func splitID(p tp) string { return p.topic + "-" + strconv.Itoa(int(p.partition)) }

// record fills the reader's reused Record with r for the deserializer.
func (rd *reader[T]) record(r *kgo.Record) *Record {
	rd.rec = Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Key: r.Key, Value: r.Value, Timestamp: r.Timestamp}
	if len(r.Headers) > 0 {
		rd.hdrs = rd.hdrs[:0]
		for _, h := range r.Headers {
			rd.hdrs = append(rd.hdrs, Header{Key: h.Key, Value: h.Value})
		}
		rd.rec.Headers = rd.hdrs
	}
	return &rd.rec
}

// snapshotOffsets are the offsets a snapshot for checkpoint id held.
type snapshotOffsets struct {
	id   int64
	offs map[tp]int64
}

// SnapshotSplits implements weir.CheckpointedReader; the source calls
// SnapshotSplitsFor.
func (r *reader[T]) SnapshotSplits() ([][]byte, error) { return r.SnapshotSplitsFor(0) }

// SnapshotSplitsFor implements weir.CheckpointIDReader: the unfinished
// splits, sorted by topic and partition. It also stores the partitions
// this subtask holds in the union state of known partitions, and, when
// offsets are committed, remembers the offsets of checkpoint id for the
// commit when that checkpoint completes.
func (r *reader[T]) SnapshotSplitsFor(id int64) ([][]byte, error) {
	held := make([]tp, 0, len(r.splits))
	for p := range r.splits {
		held = append(held, p)
	}
	slices.SortFunc(held, compareTP)
	out := make([][]byte, 0, len(held))
	known := make([]string, 0, len(r.known))
	var offs map[tp]int64
	if r.opts.commits() {
		offs = make(map[tp]int64, len(held))
	}
	for _, p := range held {
		sp := r.splits[p]
		if !sp.finished() {
			out = append(out, sp.encode())
		}
		if offs != nil {
			offs[p] = sp.next
		}
	}
	// Every subtask writes every partition it knows some subtask holds:
	// the union after a restore is then complete even for partitions
	// whose splits finished.
	for p := range r.known {
		known = append(known, formatTP(p))
	}
	slices.Sort(known)
	r.knownState.Update(known)
	if offs != nil {
		r.pending = append(r.pending, snapshotOffsets{id: id, offs: offs})
		if len(r.pending) > 64 { // checkpoints that never completed
			r.pending = r.pending[len(r.pending)-64:]
		}
	}
	return out, nil
}

// groupCommit is what the committer commits: the offsets of checkpoint
// id's snapshot and the metrics of their partitions.
type groupCommit struct {
	id   int64
	offs map[tp]int64
	ms   map[tp]*partMetrics
}

// NotifyCheckpointComplete commits the offsets the snapshot for checkpoint
// id held (the newest at or before id: a notification may be missed) to
// the consumer group (weir.CheckpointListener), in the background: a
// failed commit is logged, never fails the job (the checkpoint, not the
// group, is what a restore reads). Snapshots of later checkpoints stay
// pending: with overlapping checkpoints they may still fail. Offsets not
// committed yet when newer ones come are replaced by them.
func (r *reader[T]) NotifyCheckpointComplete(id int64) error {
	n := 0
	for n < len(r.pending) && r.pending[n].id <= id {
		n++
	}
	if n == 0 {
		return nil
	}
	c := &groupCommit{id: r.pending[n-1].id, offs: r.pending[n-1].offs}
	r.pending = append(r.pending[:0], r.pending[n:]...)
	c.ms = make(map[tp]*partMetrics, len(c.offs))
	for p := range c.offs {
		c.ms[p] = r.pm[p]
	}
	r.commitMu.Lock()
	r.commitNext = c
	r.commitMu.Unlock()
	select {
	case r.commitWake <- struct{}{}:
	default: // woken already
	}
	return nil
}

// commitLoop commits the newest offsets left until Close, then those left
// at Close.
func (r *reader[T]) commitLoop() {
	defer r.wg.Done()
	defer close(r.commitDone)
	for {
		select {
		case <-r.commitWake:
			r.commitPending()
		case <-r.commitStop:
			r.commitPending()
			return
		}
	}
}

// commitPending commits the newest offsets left, if any.
func (r *reader[T]) commitPending() {
	r.commitMu.Lock()
	c := r.commitNext
	r.commitNext = nil
	r.commitMu.Unlock()
	if c == nil {
		return
	}
	os := make(kadm.Offsets)
	for p, off := range c.offs {
		os.AddOffset(p.topic, p.partition, off, -1)
	}
	ctx, cancel := context.WithTimeout(r.commitCtx, adminTimeout)
	defer cancel()
	if err := r.commitFn(ctx, os); err != nil {
		if r.commitCtx.Err() != nil {
			r.log.Info("kafka source: the last offsets commit did not finish before close (only monitoring sees it)",
				"group", r.opts.GroupID, "checkpoint", c.id, "err", err)
			return
		}
		r.log.Warn("kafka source: committing offsets to the consumer group failed (only monitoring sees it)",
			"group", r.opts.GroupID, "checkpoint", c.id, "err", err)
		return
	}
	for p, off := range c.offs {
		if m := c.ms[p]; m != nil {
			m.committed.Store(off)
		}
	}
}

// commitToGroup commits offsets to the source's consumer group.
func (r *reader[T]) commitToGroup(ctx context.Context, os kadm.Offsets) error {
	resp, err := r.adm.CommitOffsets(ctx, r.opts.GroupID, os)
	if err == nil {
		err = resp.Error()
	}
	return err
}

// Ready implements weir.ReadyNotifier.
func (r *reader[T]) Ready() <-chan struct{} { return r.ready }

// Close implements weir.SourceReader: it stops the goroutines and the
// client. The committer first gets up to commitGrace to commit the
// offsets left (the client is still open then).
func (r *reader[T]) Close() error {
	if r.commitStop != nil {
		r.stopOnce.Do(func() {
			close(r.commitStop)
			t := time.NewTimer(r.commitGrace)
			defer t.Stop()
			select {
			case <-r.commitDone:
			case <-t.C:
			}
			r.commitCancel()
		})
	}
	r.cancel()
	r.cl.Close()
	r.wg.Wait()
	return nil
}

func formatTP(p tp) string { return p.topic + "/" + strconv.Itoa(int(p.partition)) }

func parseTP(s string) (tp, error) {
	i := strings.LastIndexByte(s, '/')
	if i <= 0 {
		return tp{}, fmt.Errorf("partition %q: want topic/partition", s)
	}
	p, err := strconv.ParseInt(s[i+1:], 10, 32)
	if err != nil || p < 0 {
		return tp{}, fmt.Errorf("partition %q: want topic/partition", s)
	}
	return tp{s[:i], int32(p)}, nil
}
