package prom_test

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/internal/metrics"
	"github.com/weirstream/weir/internal/metrics/prom"
	"github.com/weirstream/weir/internal/task"
	"github.com/weirstream/weir/sink"
)

// scrape GETs url and parses the text exposition format.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse the exposition: %v", err)
	}
	return fams
}

func labelsOf(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// The collector on a registry built by hand: names, types, label padding,
// duplicates, histograms as summaries.
func TestCollector(t *testing.T) {
	now := time.Unix(5000, 0)
	reg := metrics.NewRegistryClock(func() time.Time { return now })
	task0 := reg.Group(metrics.ScopeTask, metrics.Label{Name: metrics.LabelJobID, Value: "j1"},
		metrics.Label{Name: metrics.LabelTaskName, Value: "Source: nums -> Map"},
		metrics.Label{Name: metrics.LabelSubtaskIndex, Value: "0"})
	task0.Counter("numRecordsIn").Set(42)
	task0.Gauge("buffers.inPoolUsage", func() float64 { return 0.25 })
	var n int64
	task0.Meter("numRecordsInPerSecond", func() int64 { return n })
	reg.Sample()
	now, n = now.Add(2*time.Second), 600
	// Another group of the family with other label names: padded.
	other := reg.Group(metrics.ScopeTask, metrics.Label{Name: metrics.LabelJobID, Value: "j1"},
		metrics.Label{Name: "host", Value: "h-1"})
	other.Counter("numRecordsIn").Set(7)
	// The same scope and labels again: the first group's value is exported.
	dup := reg.Group(metrics.ScopeTask, task0.Labels()...)
	dup.Counter("numRecordsIn").Set(1000)
	job := reg.Group(metrics.ScopeJob, metrics.Label{Name: metrics.LabelJobID, Value: "j1"})
	h := job.Histogram("checkpointDuration", 100)
	for i := 1; i <= 100; i++ {
		h.Update(float64(i))
	}
	job.Gauge("lastCheckpointDuration", func() float64 { return -1 })

	srv := httptest.NewServer(prom.Handler(reg))
	defer srv.Close()
	fams := scrape(t, srv.URL)

	in := fams["weir_taskmanager_job_task_numRecordsIn"]
	if in == nil || in.GetType() != dto.MetricType_GAUGE || len(in.GetMetric()) != 2 {
		t.Fatalf("numRecordsIn family: %v", in)
	}
	got := map[string]float64{}
	for _, m := range in.GetMetric() {
		ls := labelsOf(m)
		if len(ls) != 4 {
			t.Fatalf("labels %v: want job_id, task_name, subtask_index and host on every sample", ls)
		}
		got[ls["task_name"]+"|"+ls["host"]] = m.GetGauge().GetValue()
	}
	// Flink's reporter filters label values: every character outside
	// [a-zA-Z0-9:_] becomes '_'.
	if want := map[string]float64{"Source:_nums____Map|": 42, "|h_1": 7}; !equal(got, want) {
		t.Fatalf("numRecordsIn by task_name|host %v, want %v (the first of two equal groups, the other padded)", got, want)
	}
	if f := fams["weir_taskmanager_job_task_buffers_inPoolUsage"]; f == nil || f.GetMetric()[0].GetGauge().GetValue() != 0.25 {
		t.Fatalf("buffers.inPoolUsage: %v", f)
	}
	if f := fams["weir_taskmanager_job_task_numRecordsInPerSecond"]; f == nil || f.GetMetric()[0].GetGauge().GetValue() != 300 {
		t.Fatalf("the meter's rate: %v", f)
	}
	if f := fams["weir_jobmanager_job_lastCheckpointDuration"]; f == nil || f.GetMetric()[0].GetGauge().GetValue() != -1 {
		t.Fatalf("lastCheckpointDuration: %v", f)
	}
	sum := fams["weir_jobmanager_job_checkpointDuration"]
	if sum == nil || sum.GetType() != dto.MetricType_SUMMARY {
		t.Fatalf("histogram family: %v", sum)
	}
	s := sum.GetMetric()[0].GetSummary()
	if s.GetSampleCount() != 100 || s.GetSampleSum() != 5050 || len(s.GetQuantile()) != len(prom.Quantiles) {
		t.Fatalf("summary count %d sum %v quantiles %v", s.GetSampleCount(), s.GetSampleSum(), s.GetQuantile())
	}
	for _, q := range s.GetQuantile() {
		if want := 1 + q.GetQuantile()*99; math.Abs(q.GetValue()-want) > 1e-9 {
			t.Fatalf("quantile %v = %v, want %v", q.GetQuantile(), q.GetValue(), want)
		}
	}

	// Keeping label values as they are.
	c := prom.NewCollector(reg)
	c.KeepLabelValues = true
	pr := prometheus.NewRegistry()
	pr.MustRegister(c)
	gathered, err := pr.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, f := range gathered {
		if f.GetName() != "weir_taskmanager_job_task_numRecordsIn" {
			continue
		}
		for _, m := range f.GetMetric() {
			found = found || labelsOf(m)["task_name"] == "Source: nums -> Map"
		}
	}
	if !found {
		t.Fatal("KeepLabelValues: the task name was filtered")
	}
}

func TestName(t *testing.T) {
	for _, tc := range []struct{ scope, name, want string }{
		{metrics.ScopeJob, "lastCheckpointDuration", "weir_jobmanager_job_lastCheckpointDuration"},
		{metrics.ScopeTask, "busyTimeMsPerSecond", "weir_taskmanager_job_task_busyTimeMsPerSecond"},
		{metrics.ScopeTask, "buffers.inPoolUsage", "weir_taskmanager_job_task_buffers_inPoolUsage"},
		{metrics.ScopeOperator, "numRecordsIn", "weir_taskmanager_job_task_operator_numRecordsIn"},
		{metrics.ScopeTaskManagerJob, "ChangelogStorage.numberOfUploadRequests", "weir_taskmanager_job_ChangelogStorage_numberOfUploadRequests"},
		{"x", "a-b c/é", "weir_x_a_b_c__"},
	} {
		if got := prom.Name(tc.scope, tc.name); got != tc.want {
			t.Errorf("Name(%q, %q) = %q, want %q", tc.scope, tc.name, got, tc.want)
		}
	}
}

// heldSource emits records, per subtask, then has nothing more but does
// not end: the job stays deployed, with its metric groups, until canceled.
type heldSource struct{ perSubtask int64 }

func (s heldSource) Name() string { return "held" }

func (s heldSource) CreateReader(weir.SourceContext) (weir.SourceReader[int64], error) {
	return &heldReader{left: s.perSubtask}, nil
}

type heldReader struct{ left int64 }

func (r *heldReader) ReadBatch(out weir.Collector[int64]) (weir.ReadStatus, error) {
	if r.left == 0 {
		return weir.NothingAvailable, nil
	}
	for range min(r.left, 1000) {
		out.Collect(r.left)
		r.left--
	}
	return weir.MoreAvailable, nil
}

func (r *heldReader) Close() error { return nil }

// A running job's task and operator metrics, scraped over HTTP: Flink's
// names and labels, and record counts equal to the records the job
// processed. Its groups are gone once the job ended.
func TestScrapeRunningJob(t *testing.T) {
	t.Run("sources count", func(t *testing.T) { testScrapeRunningJob(t, true) })
	// Without sources counting their records (which costs a call per
	// record) the source's own count and its chained map's input are
	// unknown: not exported, and the source task's numRecordsIn is 0.
	t.Run("sources do not count", func(t *testing.T) { testScrapeRunningJob(t, false) })
}

func testScrapeRunningJob(t *testing.T, sourcesCount bool) {
	const (
		parallelism = 2
		perSubtask  = 5000
		records     = parallelism * perSubtask
		jobID       = "0123456789abcdef0123456789abcdef"
	)
	reg := metrics.NewRegistry()
	opts := weir.Options{Parallelism: parallelism, StateDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)}
	if sourcesCount {
		opts.OnStatus = func(weir.JobStatus) {} // makes sources count, as weir run's status line does
	}
	env := weir.NewEnvironment(opts)
	nums := weir.Map(weir.FromSource(env, heldSource{perSubtask}), func(v int64) int64 { return v * 2 })
	kept := weir.Filter(nums.Rebalance(), func(int64) bool { return true })
	weir.SinkTo(kept, sink.Discard[int64]())

	ctx, cancel := context.WithCancel(task.WithMetrics(context.Background(), reg, jobID))
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- env.Execute(ctx, "scrape me") }()

	srv := httptest.NewServer(prom.Handler(reg))
	defer srv.Close()

	// sums adds up a family's samples per task_name (or operator_name).
	sums := func(fams map[string]*dto.MetricFamily, name, by string) map[string]float64 {
		out := map[string]float64{}
		if f := fams[name]; f != nil {
			for _, m := range f.GetMetric() {
				out[labelsOf(m)[by]] += m.GetGauge().GetValue()
			}
		}
		return out
	}
	const srcTask, sinkTask = "Source:_held____Map", "Filter____Sink:_Discard"
	wantTask := map[string]float64{srcTask: records, sinkTask: records}
	wantOps := map[string]float64{"Source:_held": records, "Map": records, "Filter": records, "Sink:_Discard": records}
	wantIn, wantOpsIn, wantOpsOut := wantTask, wantOps, wantOps
	opsIn, opsOut := 4*parallelism, 4*parallelism
	if !sourcesCount {
		wantIn = map[string]float64{srcTask: 0, sinkTask: records}
		wantOpsIn = map[string]float64{"Filter": records, "Sink:_Discard": records}
		wantOpsOut = map[string]float64{"Map": records, "Filter": records, "Sink:_Discard": records}
		opsIn, opsOut = 2*parallelism, 3*parallelism
	}
	var fams map[string]*dto.MetricFamily
	deadline := time.Now().Add(20 * time.Second)
	for {
		fams = scrape(t, srv.URL)
		in, out := sums(fams, "weir_taskmanager_job_task_numRecordsIn", "task_name"), sums(fams, "weir_taskmanager_job_task_numRecordsOut", "task_name")
		opIn, opOut := sums(fams, "weir_taskmanager_job_task_operator_numRecordsIn", "operator_name"), sums(fams, "weir_taskmanager_job_task_operator_numRecordsOut", "operator_name")
		bytesIn, bytesOut := sums(fams, "weir_taskmanager_job_task_numBytesIn", "task_name"), sums(fams, "weir_taskmanager_job_task_numBytesOut", "task_name")
		if equal(in, wantIn) && equal(out, wantTask) && equal(opIn, wantOpsIn) && equal(opOut, wantOpsOut) &&
			bytesOut[srcTask] > 0 && bytesIn[sinkTask] == bytesOut[srcTask] && bytesIn[srcTask] == 0 && bytesOut[sinkTask] == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("counts did not settle on %d records:\nin %v\nout %v\noperators in %v\noperators out %v\nbytes in %v out %v",
				records, in, out, opIn, opOut, bytesIn, bytesOut)
		}
		time.Sleep(20 * time.Millisecond)
	}

	hex32 := regexp.MustCompile(`^[0-9a-f]{32}$`)
	for _, name := range []string{"numRecordsIn", "numRecordsOut", "numBytesIn", "numBytesOut",
		"numRecordsInPerSecond", "numRecordsOutPerSecond", "numBytesInPerSecond", "numBytesOutPerSecond",
		"busyTimeMsPerSecond", "idleTimeMsPerSecond", "backPressuredTimeMsPerSecond",
		"accumulatedBusyTime", "accumulatedIdleTime", "accumulatedBackPressuredTime",
		"buffers_inPoolUsage", "buffers_outPoolUsage", "buffers_inputQueueLength", "buffers_outputQueueLength",
		"checkpointStartDelayNanos", "checkpointAlignmentTime", "debloatedBufferSize", "currentInputWatermark",
		"lastCheckpointSize", "lastCheckpointPersistedData"} {
		f := fams["weir_taskmanager_job_task_"+name]
		if f == nil || f.GetType() != dto.MetricType_GAUGE || len(f.GetMetric()) != 2*parallelism {
			t.Fatalf("task metric %s: %v", name, f)
		}
		var subtasks []string
		for _, m := range f.GetMetric() {
			ls := labelsOf(m)
			if ls["job_id"] != jobID || ls["job_name"] != "scrape_me" || !hex32.MatchString(ls["vertex_id"]) ||
				(ls["task_name"] != srcTask && ls["task_name"] != sinkTask) || len(ls) != 5 {
				t.Fatalf("task metric %s labels %v", name, ls)
			}
			subtasks = append(subtasks, ls["task_name"]+"/"+ls["subtask_index"])
			if name == "currentInputWatermark" && m.GetGauge().GetValue() != math.MinInt64 {
				t.Fatalf("currentInputWatermark %v before any watermark, want Long.MIN_VALUE", m.GetGauge().GetValue())
			}
		}
		slices.Sort(subtasks)
		if want := []string{sinkTask + "/0", sinkTask + "/1", srcTask + "/0", srcTask + "/1"}; !slices.Equal(subtasks, want) {
			t.Fatalf("task metric %s subtasks %v, want %v", name, subtasks, want)
		}
	}
	for name, n := range map[string]int{"numRecordsIn": opsIn, "numRecordsOut": opsOut, "numRecordsInPerSecond": opsIn,
		"numRecordsOutPerSecond": opsOut, "currentInputWatermark": 4 * parallelism, "currentOutputWatermark": 4 * parallelism} {
		f := fams["weir_taskmanager_job_task_operator_"+name]
		if f == nil || len(f.GetMetric()) != n {
			t.Fatalf("operator metric %s: %v", name, f)
		}
		for _, m := range f.GetMetric() {
			ls := labelsOf(m)
			if len(ls) != 7 || !hex32.MatchString(ls["operator_id"]) || ls["operator_name"] == "" {
				t.Fatalf("operator metric %s labels %v", name, ls)
			}
			if i, err := strconv.Atoi(ls["subtask_index"]); err != nil || i < 0 || i >= parallelism {
				t.Fatalf("operator metric %s labels %v", name, ls)
			}
		}
	}

	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("job ended with %v, want canceled", err)
	}
	for name := range scrape(t, srv.URL) {
		t.Fatalf("%s still exported after the job ended", name)
	}
}

func equal(a, b map[string]float64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
