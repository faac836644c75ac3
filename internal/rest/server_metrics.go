package rest

import (
	"net/http"
	"net/url"
	"strconv"
)

// metricList answers a metric set: the names alone, or with ?get= the
// values of the metrics asked for that exist, in the order asked.
func metricList(set *metricSet, q url.Values) []Metric {
	out := []Metric{}
	get := splitList(q["get"])
	if len(get) == 0 {
		for _, n := range set.names {
			out = append(out, Metric{ID: n})
		}
		return out
	}
	for _, n := range get {
		if v, ok := set.vals[n]; ok {
			out = append(out, Metric{ID: n, Value: v.text})
		}
	}
	return out
}

func (s *Server) jobMetrics(r *http.Request) (any, error) {
	j, err := s.job(r)
	if err != nil {
		return nil, err
	}
	return metricList(jobMetrics(j), r.URL.Query()), nil
}

func (s *Server) vertexMetrics(r *http.Request) (any, error) {
	j, v, err := s.jobVertex(r)
	if err != nil {
		return nil, err
	}
	return metricList(vertexMetrics(j, v, subtaskTasks(v, j.Status().Tasks)), r.URL.Query()), nil
}

// subtasksMetrics is GET .../subtasks/metrics: the metrics of a vertex's
// subtasks aggregated over them (?get=, ?agg=, ?subtasks=).
func (s *Server) subtasksMetrics(r *http.Request) (any, error) {
	j, v, err := s.jobVertex(r)
	if err != nil {
		return nil, err
	}
	q := r.URL.Query()
	aggs, err := parseAggs(q["agg"])
	if err != nil {
		return nil, errorf(http.StatusBadRequest, "%s", capitalize(err.Error()))
	}
	subtasks, err := parseSubtasks(q["subtasks"], v.Parallelism)
	if err != nil {
		return nil, errorf(http.StatusBadRequest, "%s", capitalize(err.Error()))
	}
	tasks := subtaskTasks(v, j.Status().Tasks)
	sets := make([]*metricSet, len(subtasks))
	for i, sub := range subtasks {
		sets[i] = subtaskMetrics(j, v, sub, tasks)
	}
	out := []AggregatedMetric{}
	get := splitList(q["get"])
	if len(get) == 0 {
		seen := map[string]bool{}
		for _, set := range sets {
			for _, n := range set.names {
				if !seen[n] {
					seen[n] = true
					out = append(out, AggregatedMetric{ID: n})
				}
			}
		}
		return out, nil
	}
	for _, n := range get {
		var vals []float64
		for _, set := range sets {
			if v, ok := set.vals[n]; ok {
				vals = append(vals, v.num)
			}
		}
		if len(vals) > 0 {
			out = append(out, aggregate(n, vals, aggs))
		}
	}
	return out, nil
}

// subtaskMetrics is GET .../subtasks/{subtaskindex}/metrics.
func (s *Server) subtaskMetrics(r *http.Request) (any, error) {
	j, v, err := s.jobVertex(r)
	if err != nil {
		return nil, err
	}
	raw := r.PathValue("subtaskindex")
	i, err := strconv.Atoi(raw)
	if err != nil || i < 0 {
		return nil, errorf(http.StatusBadRequest, "Subtask index %q is not a number", raw)
	}
	if i >= v.Parallelism {
		return nil, errorf(http.StatusNotFound, "Subtask %d not found: vertex %s has %d subtasks (0 to %d)", i, v.ID,
			v.Parallelism, v.Parallelism-1)
	}
	return metricList(subtaskMetrics(j, v, i, subtaskTasks(v, j.Status().Tasks)), r.URL.Query()), nil
}

// capitalize upper-cases s's first letter, for messages made of errors.
func capitalize(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}
