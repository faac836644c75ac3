package weir

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirstream/weir/internal/metrics"
	"github.com/weirstream/weir/internal/metrics/prom"
	"github.com/weirstream/weir/internal/rest"
	"github.com/weirstream/weir/internal/task"
)

// offsetSource emits 10 numbers and then waits until release is closed.
// Its reader publishes a gauge per partition, as the Kafka source does
// (currentOffset in the child group partition=0), tries to take a name of
// the operator's own metrics (refused), records its context's checkpoint
// interval and the checkpoints it is told of.
type offsetSource struct {
	release     chan struct{}
	interval    chan time.Duration
	notified    *notifications
	snapshotted *notifications // the ids SnapshotSplitsFor was called with
}

type notifications struct {
	mu  sync.Mutex
	ids []int64
}

func (n *notifications) add(id int64) {
	n.mu.Lock()
	n.ids = append(n.ids, id)
	n.mu.Unlock()
}

func (n *notifications) get() []int64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]int64(nil), n.ids...)
}

func (s offsetSource) Name() string { return "offsets" }

func (s offsetSource) CreateReader(ctx SourceContext) (SourceReader[int64], error) {
	r := &offsetReader{s: s}
	ctx.Metrics.Group("partition", "0").Gauge("currentOffset", func() float64 { return float64(r.offset.Load()) })
	ctx.Metrics.Gauge("currentOutputWatermark", func() float64 { return -42 }) // the operator's own: refused
	r.polls = ctx.Metrics.Counter("polls")
	if s.interval != nil {
		s.interval <- ctx.CheckpointInterval
	}
	return r, nil
}

type offsetReader struct {
	s      offsetSource
	offset atomic.Int64
	polls  *Counter
}

func (r *offsetReader) ReadBatch(out Collector[int64]) (ReadStatus, error) {
	r.polls.Inc()
	if n := r.offset.Load(); n < 10 {
		for i := n; i < 10; i++ {
			out.Collect(i)
		}
		r.offset.Store(10)
		return MoreAvailable, nil
	}
	select {
	case <-r.s.release:
		return EndOfInput, nil
	default:
		return NothingAvailable, nil
	}
}

// SnapshotSplitsFor implements CheckpointIDReader.
func (r *offsetReader) SnapshotSplitsFor(id int64) ([][]byte, error) {
	if r.s.snapshotted != nil {
		r.s.snapshotted.add(id)
	}
	return r.SnapshotSplits()
}

// SnapshotSplits implements CheckpointedReader; the source calls
// SnapshotSplitsFor instead.
func (r *offsetReader) SnapshotSplits() ([][]byte, error) {
	return [][]byte{fmt.Appendf(nil, "%d", r.offset.Load())}, nil
}

func (r *offsetReader) NotifyCheckpointComplete(id int64) error {
	if r.s.notified != nil {
		r.s.notified.add(id)
	}
	return nil
}

func (r *offsetReader) Close() error { return nil }

// sendSink counts its writes in a numRecordsSend counter of its metric
// group.
type sendSink struct{ notified *notifications }

func (s sendSink) CreateWriter(ctx SinkContext) (SinkWriter[int64], error) {
	return &sendWriter{sent: ctx.Metrics.Counter("numRecordsSend"), notified: s.notified}, nil
}

type sendWriter struct {
	sent     *Counter
	notified *notifications
}

func (w *sendWriter) Write(int64) error { w.sent.Inc(); return nil }
func (w *sendWriter) Flush() error      { return nil }
func (w *sendWriter) Close() error      { return nil }
func (w *sendWriter) NotifyCheckpointComplete(id int64) error {
	if w.notified != nil {
		w.notified.add(id)
	}
	return nil
}

// await polls cond every 10ms until it returns nil, failing the test with
// its last error after 20s.
func await(t *testing.T, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never happened within 20s: %v", what, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func quietEnv(opts Options) *Environment {
	opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	return NewEnvironment(opts)
}

// A source's and a sink's connector metrics are in the job's registry
// while it runs, in the operator's group or a child group with the extra
// label; a name of the operator's own metrics is refused; all of them are
// gone once the run ended.
func TestConnectorMetricsRegisteredAndRemoved(t *testing.T) {
	reg := metrics.NewRegistry()
	release := make(chan struct{})
	env := quietEnv(Options{Parallelism: 1})
	SinkTo(FromSource(env, offsetSource{release: release}), sendSink{}).Name("send")
	ctx := task.WithMetrics(context.Background(), reg, "job-1")
	done := make(chan error, 1)
	go func() { done <- env.Execute(ctx, "connector-metrics") }()
	released := false
	defer func() {
		if !released {
			close(release)
			<-done
		}
	}()

	await(t, "the reader's gauge and the sink's counter at 10", func() error {
		ps := reg.Find(metrics.ScopeOperator, metrics.Label{Name: "partition", Value: "0"})
		if len(ps) != 1 {
			return fmt.Errorf("%d groups with partition=0", len(ps))
		}
		if op := ps[0].Label(metrics.LabelOperatorName); op != "Source: offsets" || ps[0].Label(metrics.LabelJobID) != "job-1" {
			return fmt.Errorf("partition group labels %v", ps[0].Labels())
		}
		if m, ok := ps[0].Get("currentOffset"); !ok || m.Value() != 10 {
			return fmt.Errorf("currentOffset %v (registered %v)", m, ok)
		}
		sinks := reg.Find(metrics.ScopeOperator, metrics.Label{Name: metrics.LabelOperatorName, Value: "send"})
		if len(sinks) != 1 {
			return fmt.Errorf("%d sink groups", len(sinks))
		}
		if m, ok := sinks[0].Get("numRecordsSend"); !ok || m.Value() != 10 {
			return fmt.Errorf("numRecordsSend %v (registered %v)", m, ok)
		}
		return nil
	})
	srcs := reg.Find(metrics.ScopeOperator, metrics.Label{Name: metrics.LabelOperatorName, Value: "Source: offsets"})
	var own *metrics.Group
	for _, g := range srcs {
		if g.Label("partition") == "" {
			own = g
		}
	}
	if own == nil {
		t.Fatal("no operator group of the source")
	}
	if m, ok := own.Get("polls"); !ok || m.Kind() != metrics.KindCounter || m.Value() < 1 {
		t.Fatalf("polls counter %v (registered %v)", m, ok)
	}
	if m, ok := own.Get("currentOutputWatermark"); !ok || m.Value() == -42 {
		t.Fatalf("the reader replaced the operator's currentOutputWatermark gauge (%v, %v)", m, ok)
	}

	close(release)
	released = true
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if gs := reg.Find(metrics.ScopeOperator); len(gs) != 0 {
		for _, g := range gs {
			t.Errorf("left after the run: %v", g.Labels())
		}
		t.Fatalf("%d operator groups left in the registry after the run", len(gs))
	}
}

// With the REST API on, a reader's metric in a child group shows in the
// subtask's REST metrics as "<operator>.<key>.<value>.<name>" (Flink's
// identifier) and on /metrics with the extra label.
func TestConnectorMetricsInREST(t *testing.T) {
	release := make(chan struct{})
	urls := make(chan string, 1)
	env := quietEnv(Options{Parallelism: 1,
		REST: RESTOptions{Enabled: true, Port: "0", OnStart: func(u string) { urls <- u }}})
	SinkTo(FromSource(env, offsetSource{release: release}), sendSink{}).Name("send")
	done := make(chan error, 1)
	go func() { done <- env.Execute(context.Background(), "connector-metrics-rest") }()
	defer func() {
		close(release)
		if err := <-done; err != nil {
			t.Errorf("Execute = %v", err)
		}
	}()
	var base string
	select {
	case base = <-urls:
	case err := <-done:
		done <- err
		t.Fatalf("the job ended before its REST server started: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("the REST server did not start within 20s")
	}
	c := rest.NewClient(base, "", nil)
	ctx := context.Background()
	var jobID, vertexID string
	await(t, "the job and its source vertex in the REST API", func() error {
		jobs, err := c.Jobs(ctx)
		if err != nil || len(jobs) != 1 {
			return fmt.Errorf("jobs %v, %v", jobs, err)
		}
		d, err := c.Job(ctx, jobs[0].JID)
		if err != nil {
			return err
		}
		for _, v := range d.Vertices {
			if strings.Contains(v.Name, "offsets") {
				jobID, vertexID = jobs[0].JID, v.ID
				return nil
			}
		}
		return fmt.Errorf("no source vertex in %v", d.Vertices)
	})
	get := func(path string) (string, error) {
		resp, err := http.Get(base + path)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return "", fmt.Errorf("GET %s: %s: %s", path, resp.Status, b)
		}
		return string(b), err
	}
	name := "Source: offsets.partition.0.currentOffset"
	await(t, "the partition's gauge at 10 in the subtask's REST metrics", func() error {
		body, err := get(fmt.Sprintf("/jobs/%s/vertices/%s/subtasks/0/metrics?get=%s", jobID, vertexID, url.QueryEscape(name)))
		if err != nil {
			return err
		}
		var ms []rest.Metric
		if err := json.Unmarshal([]byte(body), &ms); err != nil {
			return err
		}
		if len(ms) != 1 || ms[0].ID != name || ms[0].Value != "10" {
			return fmt.Errorf("metrics %s", body)
		}
		return nil
	})
	body, err := get("/metrics")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, "weir_taskmanager_job_task_operator_currentOffset{") && strings.Contains(line, `partition="0"`) {
			if !strings.HasSuffix(line, " 10") {
				t.Fatalf("/metrics: %s, want the value 10", line)
			}
			return
		}
	}
	t.Fatalf("/metrics has no currentOffset with partition=\"0\":\n%s", body)
}

// Readers and writers that are CheckpointListeners hear of completed
// checkpoints, and see the job's checkpoint interval in their context.
func TestConnectorCheckpointListener(t *testing.T) {
	release := make(chan struct{})
	interval := make(chan time.Duration, 1)
	srcN, sinkN, snaps := &notifications{}, &notifications{}, &notifications{}
	env := quietEnv(Options{Parallelism: 1, StateDir: t.TempDir(),
		Checkpoint: CheckpointOptions{Interval: time.Hour, Dir: t.TempDir()}})
	SinkTo(FromSource(env, offsetSource{release: release, interval: interval, notified: srcN, snapshotted: snaps}), sendSink{notified: sinkN})
	done := make(chan error, 1)
	go func() { done <- env.Execute(context.Background(), "connector-listener") }()
	var got time.Duration
	select {
	case got = <-interval:
	case err := <-done:
		t.Fatalf("the job ended before its reader was created: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("no reader created within 20s")
	}
	if got != time.Hour {
		t.Errorf("SourceContext.CheckpointInterval = %v, want 1h", got)
	}
	var id int64
	await(t, "a triggered checkpoint", func() error {
		var err error
		id, err = env.TriggerCheckpoint(context.Background())
		return err
	})
	await(t, fmt.Sprintf("checkpoint %d notified to the reader and the writer", id), func() error {
		s, k := srcN.get(), sinkN.get()
		if len(s) == 0 || s[len(s)-1] != id || len(k) == 0 || k[len(k)-1] != id {
			return fmt.Errorf("reader notified of %v, writer of %v", s, k)
		}
		return nil
	})
	// The reader learned the checkpoint's id when it snapshotted
	// (CheckpointIDReader), so it can tell what the notification is about.
	if s := snaps.get(); len(s) == 0 || s[len(s)-1] != id {
		t.Errorf("SnapshotSplitsFor called with %v, want the notified checkpoint %d last", s, id)
	}
	close(release)
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
}

// A nil MetricGroup (a job without metrics) registers nothing but its
// counters still count; a child group's key must not be a label already.
func TestMetricGroupNilAndBadKeys(t *testing.T) {
	var g *MetricGroup
	c := g.Counter("sent")
	c.Add(3)
	c.Inc()
	g.Gauge("lag", func() float64 { return 1 })
	if c.Count() != 4 || g.Group("partition", "0") != nil {
		t.Fatalf("nil group: count %d, want 4, and a nil child", c.Count())
	}
	var nc *Counter
	nc.Inc()
	if nc.Count() != 0 {
		t.Fatal("a nil counter counted")
	}

	reg := metrics.NewRegistry()
	op := reg.Group(metrics.ScopeOperator, metrics.Label{Name: metrics.LabelOperatorName, Value: "src"})
	op.Gauge("currentOutputWatermark", func() float64 { return 0 })
	mg := newMetricGroup(op, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if mg.Group("operator_name", "x") != nil || mg.Group("", "x") != nil {
		t.Fatal("a child group whose key is empty or already a label was created")
	}
	p := mg.Group("partition", "1")
	if p.Group("partition", "2") != nil {
		t.Fatal("a grandchild with its parent's key was created")
	}
	p.Gauge("lag", func() float64 { return 5 })
	p.Counter("lag").Inc() // another kind under a taken name: not registered, no panic
	if gs := reg.Find(metrics.ScopeOperator, metrics.Label{Name: "partition", Value: "1"}); len(gs) != 1 {
		t.Fatalf("%d groups with partition=1", len(gs))
	} else if m, _ := gs[0].Get("lag"); m.Kind() != metrics.KindGauge || m.Value() != 5 {
		t.Fatalf("lag is %v", m)
	}
}

// countingHandler is a slog.Handler that counts the records whose message
// contains match.
type countingHandler struct {
	match string
	n     *atomic.Int64
}

func (h countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h countingHandler) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, h.match) {
		h.n.Add(1)
	}
	return nil
}
func (h countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h countingHandler) WithGroup(string) slog.Handler      { return h }

// Readers registering one name as a counter and as a gauge from several
// goroutines at once: no panic (mistakes are logged, never panic), one
// kind wins per name and the other is logged and not registered; a
// refused counter still counts, on its own (run with -race).
func TestMetricGroupConcurrentKinds(t *testing.T) {
	// Goroutines of each kind walk the same names in the same order, so
	// they meet on names all the time: before registration was one step
	// under the group's lock, a counter and a gauge both passed the kind
	// check and the second registration panicked.
	const names, perKind = 2000, 2
	var warned atomic.Int64
	reg := metrics.NewRegistry()
	op := reg.Group(metrics.ScopeOperator, metrics.Label{Name: metrics.LabelOperatorName, Value: "src"})
	mg := newMetricGroup(op, slog.New(countingHandler{match: "another kind", n: &warned}))
	counters := make([][]*Counter, perKind)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for k := range perKind {
		counters[k] = make([]*Counter, names)
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			for i := range names {
				counters[k][i] = mg.Counter(fmt.Sprintf("m%d", i))
				counters[k][i].Inc()
			}
		}()
		go func() {
			defer wg.Done()
			<-start
			for i := range names {
				mg.Gauge(fmt.Sprintf("m%d", i), func() float64 { return -1 })
			}
		}()
	}
	close(start)
	wg.Wait()
	gauges := 0
	for i := range names {
		m, ok := op.Get(fmt.Sprintf("m%d", i))
		switch {
		case !ok:
			t.Fatalf("m%d registered as neither kind", i)
		case m.Kind() == metrics.KindGauge:
			gauges++
			for k := range perKind {
				if c := counters[k][i].Count(); c != 1 {
					t.Fatalf("m%d is a gauge; a refused counter counts %d, want 1 (its own)", i, c)
				}
			}
			if m.Value() != -1 {
				t.Fatalf("m%d: gauge reads %v, want -1", i, m.Value())
			}
		case m.Kind() != metrics.KindCounter || m.Value() != perKind:
			t.Fatalf("m%d is %s %v, want the counter at %d (every goroutine's)", i, m.Kind(), m.Value(), perKind)
		}
	}
	// Every refusal is logged: per name, each goroutine of the losing kind.
	if got := warned.Load(); got != names*perKind {
		t.Errorf("%d warnings of a name taken by another kind, want %d (each losing registration)", got, names*perKind)
	}
	t.Logf("%d of %d names went to the gauge", gauges, names)
}

// A child group's key is compared with the group's labels as /metrics
// exports it (characters outside [a-zA-Z0-9:_] replaced by '_'): a key
// that becomes a label the group has already (operator-name, job.id, a
// parent's key spelt differently) or is no valid Prometheus label name
// (a leading digit, the reserved "__" prefix, a ':') is logged and the
// group not created; the operator's labels on /metrics stay its own.
func TestMetricGroupChildKeysAsExported(t *testing.T) {
	var warned atomic.Int64
	reg := metrics.NewRegistry()
	op := reg.Group(metrics.ScopeOperator,
		metrics.Label{Name: metrics.LabelJobID, Value: "job-1"},
		metrics.Label{Name: metrics.LabelOperatorName, Value: "src"})
	mg := newMetricGroup(op, slog.New(countingHandler{match: "group not created", n: &warned}))
	bad := []string{"operator-name", "operator.name", "job.id", "0partition", "__name__", "__x", "a:b", ""}
	for _, key := range bad {
		if c := mg.Group(key, "evil"); c != nil {
			c.Gauge("lag", func() float64 { return 1 })
			t.Errorf("child group with key %q created (exported as %q)", key, prom.Filter(key))
		}
	}
	if got := warned.Load(); got != int64(len(bad)) {
		t.Errorf("%d warnings, want %d (one per refused key)", got, len(bad))
	}
	p := mg.Group("topic-partition", "3") // exported as topic_partition: valid
	if p == nil {
		t.Fatal("child group topic-partition refused")
	}
	for _, key := range []string{"topic_partition", "topic.partition"} {
		if p.Group(key, "evil") != nil {
			t.Errorf("grandchild with key %q created under its parent's topic-partition", key)
		}
	}
	p.Gauge("lag", func() float64 { return 5 })

	pr := prometheus.NewRegistry()
	pr.MustRegister(prom.NewCollector(reg))
	fams, err := pr.Gather()
	if err != nil {
		t.Fatalf("gathering /metrics: %v", err)
	}
	var series []string
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, l.GetName()+"="+l.GetValue())
				if l.GetValue() == "evil" {
					t.Errorf("%s has a label %s=evil from a refused key", f.GetName(), l.GetName())
				}
			}
			series = append(series, f.GetName()+"{"+strings.Join(ls, ",")+"}")
		}
	}
	want := "weir_taskmanager_job_task_operator_lag{job_id=job_1,operator_name=src,topic_partition=3}"
	if len(series) != 1 || series[0] != want {
		t.Fatalf("/metrics series %v, want [%s]", series, want)
	}
}

// txnSink is a two-phase-commit sink that logs its commits and its
// writers' checkpoint notifications in order.
type txnSink struct{ log *orderLog }

type orderLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *orderLog) add(format string, args ...any) {
	l.mu.Lock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
	l.mu.Unlock()
}

func (l *orderLog) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

func (s txnSink) CreateWriter(SinkContext) (SinkWriter[int64], error) {
	return &txnWriter{log: s.log}, nil
}
func (s txnSink) Commit(_ SinkContext, txn []byte) error {
	s.log.add("commit %s", txn)
	return nil
}

type txnWriter struct {
	log *orderLog
	n   int
}

func (w *txnWriter) Write(int64) error { w.n++; return nil }
func (w *txnWriter) Flush() error      { return nil }
func (w *txnWriter) Close() error      { return nil }
func (w *txnWriter) PreCommit(id int64) ([]byte, error) {
	return fmt.Appendf(nil, "%d", id), nil
}
func (w *txnWriter) NotifyCheckpointComplete(id int64) error {
	w.log.add("notify %d", id)
	return nil
}

// A two-phase-commit sink's writer hears of a completed checkpoint after
// the sink committed that checkpoint's transaction.
func TestConnectorCheckpointListenerAfterCommit(t *testing.T) {
	release := make(chan struct{})
	log := &orderLog{}
	env := quietEnv(Options{Parallelism: 1, StateDir: t.TempDir(),
		Checkpoint: CheckpointOptions{Interval: time.Hour, Dir: t.TempDir()}})
	SinkTo(FromSource(env, offsetSource{release: release}), txnSink{log: log})
	done := make(chan error, 1)
	go func() { done <- env.Execute(context.Background(), "connector-listener-2pc") }()
	var id int64
	await(t, "a triggered checkpoint", func() error {
		var err error
		id, err = env.TriggerCheckpoint(context.Background())
		return err
	})
	want := []string{fmt.Sprintf("commit %d", id), fmt.Sprintf("notify %d", id)}
	await(t, "the commit and then the notification of checkpoint "+fmt.Sprint(id), func() error {
		if got := log.get(); len(got) < 2 || got[0] != want[0] || got[1] != want[1] {
			return fmt.Errorf("log %v, want %v first", got, want)
		}
		return nil
	})
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
