package rest

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/weirstream/weir/internal/metrics"
	"github.com/weirstream/weir/internal/monitor"
	"github.com/weirstream/weir/internal/task"
)

// Names of the task metrics that IOMetrics reads from a subtask's group
// (ScopeTask), as Flink names them.
const (
	metricRecordsIn           = "numRecordsIn"
	metricRecordsOut          = "numRecordsOut"
	metricBytesIn             = "numBytesIn"
	metricBytesOut            = "numBytesOut"
	metricAccumulatedBusy     = "accumulatedBusyTime"
	metricAccumulatedIdle     = "accumulatedIdleTime"
	metricAccumulatedBackpres = "accumulatedBackpressuredTime"
)

// taskMetricFields are the fields of task.TaskMetrics, under their metric
// names. A subtask's metrics include them unless its group in the
// registry has a metric of the same name.
var taskMetricFields = []struct {
	name string
	get  func(*task.TaskMetrics) float64
}{
	{"busyTimeMsPerSecond", func(t *task.TaskMetrics) float64 { return t.BusyTimeMsPerSecond }},
	{"idleTimeMsPerSecond", func(t *task.TaskMetrics) float64 { return t.IdleTimeMsPerSecond }},
	{"backPressuredTimeMsPerSecond", func(t *task.TaskMetrics) float64 { return t.BackPressuredTimeMsPerSecond }},
	{"inPoolUsage", func(t *task.TaskMetrics) float64 { return t.InPoolUsage }},
	{"outPoolUsage", func(t *task.TaskMetrics) float64 { return t.OutPoolUsage }},
	{"inputQueueLength", func(t *task.TaskMetrics) float64 { return float64(t.InputQueueLength) }},
	{"outputQueueLength", func(t *task.TaskMetrics) float64 { return float64(t.OutputQueueLength) }},
	{"checkpointStartDelayNanos", func(t *task.TaskMetrics) float64 { return float64(t.CheckpointStartDelayNanos) }},
	{"checkpointAlignmentTime", func(t *task.TaskMetrics) float64 { return float64(t.CheckpointAlignmentTime) }},
	{"debloatedBufferSize", func(t *task.TaskMetrics) float64 { return float64(t.DebloatedBufferSize) }},
}

// histogramSuffixes are the names Flink gives a histogram's figures.
var histogramSuffixes = []struct {
	suffix string
	get    func(metrics.HistogramSnapshot) float64
}{
	{"_min", func(s metrics.HistogramSnapshot) float64 { return s.Min }},
	{"_max", func(s metrics.HistogramSnapshot) float64 { return s.Max }},
	{"_mean", func(s metrics.HistogramSnapshot) float64 { return s.Mean }},
	{"_median", func(s metrics.HistogramSnapshot) float64 { return s.Quantile(0.5) }},
	{"_p75", func(s metrics.HistogramSnapshot) float64 { return s.Quantile(0.75) }},
	{"_p90", func(s metrics.HistogramSnapshot) float64 { return s.Quantile(0.9) }},
	{"_p95", func(s metrics.HistogramSnapshot) float64 { return s.Quantile(0.95) }},
	{"_p98", func(s metrics.HistogramSnapshot) float64 { return s.Quantile(0.98) }},
	{"_p99", func(s metrics.HistogramSnapshot) float64 { return s.Quantile(0.99) }},
	{"_p999", func(s metrics.HistogramSnapshot) float64 { return s.Quantile(0.999) }},
}

// metricSet is an ordered set of named values, as the metric endpoints
// show them: text is the value as Flink formats it, num the number the
// aggregations use.
type metricSet struct {
	names []string
	vals  map[string]metricValue
}

type metricValue struct {
	text string
	num  float64
}

func newMetricSet() *metricSet { return &metricSet{vals: map[string]metricValue{}} }

// put sets name; a name set again keeps its place and takes the new value.
func (s *metricSet) put(name string, v metricValue) {
	if _, ok := s.vals[name]; !ok {
		s.names = append(s.names, name)
	}
	s.vals[name] = v
}

func (s *metricSet) has(name string) bool {
	_, ok := s.vals[name]
	return ok
}

func numValue(f float64) metricValue {
	return metricValue{text: strconv.FormatFloat(f, 'f', -1, 64), num: f}
}

// addGroup adds g's metrics, their names prefixed: a counter's count, a
// gauge's value, a meter's rate per second, a histogram's figures under
// Flink's suffixes.
func (s *metricSet) addGroup(g *metrics.Group, prefix string) {
	g.Each(func(name string, m metrics.Metric) {
		switch mm := m.(type) {
		case *metrics.Counter:
			n := mm.Count()
			s.put(prefix+name, metricValue{text: strconv.FormatInt(n, 10), num: float64(n)})
		case *metrics.Histogram:
			snap := mm.Snapshot()
			for _, h := range histogramSuffixes {
				s.put(prefix+name+h.suffix, numValue(h.get(snap)))
			}
		default:
			s.put(prefix+name, numValue(m.Value()))
		}
	})
}

// ownGroups returns the groups of scope in j's registry that match and
// belong to j: groups labelled with another job's id are left out.
func ownGroups(j *monitor.Job, scope string, match ...metrics.Label) []*metrics.Group {
	if j.Metrics == nil {
		return nil
	}
	var out []*metrics.Group
	for _, g := range j.Metrics.Find(scope, match...) {
		if id := g.Label(metrics.LabelJobID); id != "" && id != j.ID {
			continue
		}
		out = append(out, g)
	}
	return out
}

// jobMetrics are the job's own metrics (scope jobmanager_job).
func jobMetrics(j *monitor.Job) *metricSet {
	s := newMetricSet()
	for _, g := range ownGroups(j, metrics.ScopeJob) {
		s.addGroup(g, "")
	}
	return s
}

// subtaskMetrics are the metrics of v's subtask index: its task group's,
// its operators' as "<operator>.<metric>", and the task metrics its group
// lacks. tasks are v's subtasks' task metrics (subtaskTasks).
func subtaskMetrics(j *monitor.Job, v monitor.Vertex, index int, tasks []*task.TaskMetrics) *metricSet {
	s := newMetricSet()
	labels := []metrics.Label{{Name: metrics.LabelVertexID, Value: v.ID},
		{Name: metrics.LabelSubtaskIndex, Value: strconv.Itoa(index)}}
	for _, g := range ownGroups(j, metrics.ScopeTask, labels...) {
		s.addGroup(g, "")
	}
	for _, g := range ownGroups(j, metrics.ScopeOperator, labels...) {
		s.addGroup(g, operatorPrefix(g))
	}
	if index < len(tasks) && tasks[index] != nil {
		for _, f := range taskMetricFields {
			if !s.has(f.name) {
				s.put(f.name, numValue(f.get(tasks[index])))
			}
		}
	}
	return s
}

// operatorPrefix is "<operator>." and, for a connector's child group
// (Flink's addGroup(key, value)), "<key>.<value>." for each label beyond
// the operator's own: Flink's metric identifiers, such as
// "Source: kafka.partition.0.currentOffset".
func operatorPrefix(g *metrics.Group) string {
	var b strings.Builder
	b.WriteString(g.Label(metrics.LabelOperatorName) + ".")
	for _, l := range g.Labels() {
		switch l.Name {
		case metrics.LabelJobID, metrics.LabelJobName, metrics.LabelTaskName, metrics.LabelSubtaskIndex,
			metrics.LabelOperatorName, metrics.LabelOperatorID, metrics.LabelVertexID:
		default:
			b.WriteString(l.Name + "." + l.Value + ".")
		}
	}
	return b.String()
}

// vertexMetrics are the metrics of all of v's subtasks, each name
// prefixed with "<subtask>." as Flink's vertex metrics are.
func vertexMetrics(j *monitor.Job, v monitor.Vertex, tasks []*task.TaskMetrics) *metricSet {
	s := newMetricSet()
	for i := range v.Parallelism {
		sub := subtaskMetrics(j, v, i, tasks)
		for _, n := range sub.names {
			s.put(fmt.Sprintf("%d.%s", i, n), sub.vals[n])
		}
	}
	return s
}

// ioMetrics are the records, bytes and times of v's subtasks, or of
// subtask only if it is not negative.
func ioMetrics(j *monitor.Job, v monitor.Vertex, only int, tasks []*task.TaskMetrics) IOMetrics {
	// The newest group of each subtask (a restarted task registers anew).
	bySubtask := map[int]*metrics.Group{}
	for _, g := range ownGroups(j, metrics.ScopeTask, metrics.Label{Name: metrics.LabelVertexID, Value: v.ID}) {
		i, err := strconv.Atoi(g.Label(metrics.LabelSubtaskIndex))
		if err != nil || i < 0 || i >= v.Parallelism || (only >= 0 && i != only) {
			continue
		}
		bySubtask[i] = g
	}
	want := v.Parallelism
	if only >= 0 {
		want = 1
	}
	sum := func(name string) (total float64, reported int) {
		for _, g := range bySubtask {
			if m, ok := g.Get(name); ok {
				total += m.Value()
				reported++
			}
		}
		return total, reported
	}
	var io IOMetrics
	count := func(name string, n *int64, complete *bool) {
		total, reported := sum(name)
		*n, *complete = int64(total), reported == want
	}
	count(metricRecordsIn, &io.ReadRecords, &io.ReadRecordsComplete)
	count(metricRecordsOut, &io.WriteRecords, &io.WriteRecordsComplete)
	count(metricBytesIn, &io.ReadBytes, &io.ReadBytesComplete)
	count(metricBytesOut, &io.WriteBytes, &io.WriteBytesComplete)

	busy, nb := sum(metricAccumulatedBusy)
	idle, ni := sum(metricAccumulatedIdle)
	bp, np := sum(metricAccumulatedBackpres)
	if nb+ni+np == 0 {
		// No cumulative times: the current rates, summed.
		for i, t := range tasks {
			if t == nil || (only >= 0 && i != only) {
				continue
			}
			busy += t.BusyTimeMsPerSecond
			idle += t.IdleTimeMsPerSecond
			bp += t.BackPressuredTimeMsPerSecond
		}
	}
	io.AccumulatedBusyTime = busy
	io.AccumulatedIdleTime = int64(math.Round(idle))
	io.AccumulatedBackpressuredTime = int64(math.Round(bp))
	return io
}

// aggregations lists the valid ?agg= values.
var aggregations = []string{AggMin, AggMax, AggSum, AggAvg, AggSkew}

// parseAggs parses the ?agg= values (comma-separated, possibly repeated);
// none means all.
func parseAggs(vals []string) ([]string, error) {
	var out []string
	for _, v := range vals {
		for a := range strings.SplitSeq(v, ",") {
			a = strings.ToLower(strings.TrimSpace(a))
			if a == "" {
				continue
			}
			if !slices.Contains(aggregations, a) {
				return nil, fmt.Errorf("unknown aggregation %q; valid: %s", a, strings.Join(aggregations, ", "))
			}
			if !slices.Contains(out, a) {
				out = append(out, a)
			}
		}
	}
	if len(out) == 0 {
		return aggregations, nil
	}
	return out, nil
}

// splitList splits comma-separated and repeated query values, keeping
// their order and dropping empty ones.
func splitList(vals []string) []string {
	var out []string
	for _, v := range vals {
		for s := range strings.SplitSeq(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}

// parseSubtasks parses ?subtasks= ("0-2,4"), possibly repeated, against a
// vertex of n subtasks; none means all of them. The result is sorted.
func parseSubtasks(vals []string, n int) ([]int, error) {
	parts := splitList(vals)
	if len(parts) == 0 {
		out := make([]int, n)
		for i := range out {
			out[i] = i
		}
		return out, nil
	}
	var out []int
	for _, p := range parts {
		a, b, isRange := strings.Cut(p, "-")
		lo, err := strconv.Atoi(strings.TrimSpace(a))
		hi := lo
		if err == nil && isRange {
			hi, err = strconv.Atoi(strings.TrimSpace(b))
		}
		if err != nil || lo < 0 || hi < lo {
			return nil, fmt.Errorf("subtasks %q is not a subtask index or a range such as 0-3", p)
		}
		if hi >= n {
			return nil, fmt.Errorf("subtasks %q: the vertex has %d subtasks (0 to %d)", p, n, n-1)
		}
		for i := lo; i <= hi; i++ {
			if !slices.Contains(out, i) {
				out = append(out, i)
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

// aggregate aggregates vals (at least one) with aggs.
func aggregate(name string, vals []float64, aggs []string) AggregatedMetric {
	a := AggregatedMetric{ID: name}
	lo, hi, sum := vals[0], vals[0], 0.0
	for _, v := range vals {
		lo, hi, sum = min(lo, v), max(hi, v), sum+v
	}
	avg := sum / float64(len(vals))
	for _, agg := range aggs {
		switch agg {
		case AggMin:
			a.Min = &lo
		case AggMax:
			a.Max = &hi
		case AggSum:
			a.Sum = &sum
		case AggAvg:
			a.Avg = &avg
		case AggSkew:
			skew := dataSkew(vals, avg)
			a.Skew = &skew
		}
	}
	return a
}

// dataSkew is Flink's skew: the mean absolute deviation over the mean, in
// percent, at most 100; 0 when the mean is 0.
func dataSkew(vals []float64, avg float64) float64 {
	if avg == 0 {
		return 0
	}
	dev := 0.0
	for _, v := range vals {
		dev += math.Abs(avg - v)
	}
	return min(dev/float64(len(vals))/avg*100, 100)
}
