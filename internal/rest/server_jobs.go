package rest

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/weirstream/weir/internal/monitor"
)

// job is the job the request's {jobid} names.
func (s *Server) job(r *http.Request) (*monitor.Job, error) {
	id := r.PathValue("jobid")
	for _, j := range s.jobList() {
		if j.ID == id {
			return j, nil
		}
	}
	return nil, errorf(http.StatusNotFound, "Job %s not found", id)
}

// vertex is the vertex of j the request's {vertexid} names (its id or
// its index).
func vertex(r *http.Request, j *monitor.Job) (monitor.Vertex, error) {
	id := r.PathValue("vertexid")
	if v, ok := j.Vertex(id); ok {
		return v, nil
	}
	return monitor.Vertex{}, errorf(http.StatusNotFound, "Vertex %s not found in job %s", id, j.ID)
}

// jobVertex finds the job and the vertex a request's path names.
func (s *Server) jobVertex(r *http.Request) (*monitor.Job, monitor.Vertex, error) {
	j, err := s.job(r)
	if err != nil {
		return nil, monitor.Vertex{}, err
	}
	v, err := vertex(r, j)
	return j, v, err
}

func (s *Server) dashboardConfig(*http.Request) (any, error) {
	zone, offset := s.cfg.now().Zone()
	return DashboardConfig{RefreshInterval: s.cfg.RefreshInterval.Milliseconds(), TimezoneName: zone,
		TimezoneOffset: int64(offset) * 1000, FlinkVersion: s.cfg.Version, FlinkRevision: "weir",
		WeirVersion: s.cfg.Version, Features: DashboardFeatures{WebCancel: true}}, nil
}

func (s *Server) overview(*http.Request) (any, error) {
	o := ClusterOverview{TaskManagers: 1, FlinkVersion: s.cfg.Version, FlinkCommit: "weir", WeirVersion: s.cfg.Version}
	for _, j := range s.jobList() {
		switch st := j.Status().State; st {
		case monitor.Finished:
			o.JobsFinished++
		case monitor.Canceled:
			o.JobsCancelled++
		case monitor.Failed:
			o.JobsFailed++
		default:
			o.JobsRunning++
			o.SlotsTotal += jobParallelism(j, false)
		}
	}
	return o, nil
}

// prometheus serves GET /metrics with the configured handler.
func (s *Server) prometheus(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method != http.MethodGet && r.Method != http.MethodHead:
		w.Header().Set("Allow", "GET, HEAD")
		writeError(w, http.StatusMethodNotAllowed, "Method "+r.Method+" not allowed for /metrics; allowed: GET")
	case s.cfg.Metrics == nil:
		writeError(w, http.StatusNotFound, "Not found: /metrics (this server has no Prometheus endpoint)")
	default:
		s.cfg.Metrics.ServeHTTP(w, r)
	}
}

func (s *Server) jobIDs(*http.Request) (any, error) {
	out := JobIDsWithStatus{Jobs: []JobIDWithStatus{}}
	for _, j := range s.jobList() {
		out.Jobs = append(out.Jobs, JobIDWithStatus{ID: j.ID, Status: string(j.Status().State)})
	}
	return out, nil
}

func (s *Server) jobsOverview(*http.Request) (any, error) {
	out := MultipleJobsDetails{Jobs: []JobOverview{}}
	for _, j := range s.jobList() {
		out.Jobs = append(out.Jobs, jobOverview(j, j.Status(), j.Now()))
	}
	return out, nil
}

func (s *Server) jobDetails(r *http.Request) (any, error) {
	j, err := s.job(r)
	if err != nil {
		return nil, err
	}
	st := j.Status()
	return jobDetails(j, st, j.Now(), func(v monitor.Vertex) IOMetrics {
		return ioMetrics(j, v, -1, subtaskTasks(v, st.Tasks))
	}), nil
}

// cancelJob is PATCH /jobs/{jobid}?mode=cancel.
func (s *Server) cancelJob(r *http.Request) (any, error) {
	j, err := s.job(r)
	if err != nil {
		return nil, err
	}
	switch mode := r.URL.Query().Get("mode"); mode {
	case "cancel", "": // Flink's default mode is cancel
	case "stop":
		return nil, errorf(http.StatusBadRequest, "mode=stop is not supported: PATCH /jobs/{jobid} only cancels, "+
			"as in Flink; to stop the job with a savepoint, POST /jobs/%s/stop, or use mode=cancel", j.ID)
	default:
		return nil, errorf(http.StatusBadRequest, "Unknown mode %q; valid: cancel", mode)
	}
	if err := j.Cancel(); err != nil {
		if errors.Is(err, monitor.ErrNotRunning) {
			if st := j.Status().State; st.Terminal() {
				return nil, errorf(http.StatusConflict, "Job cancellation failed: job %s has already reached the "+
					"terminal state %s", j.ID, st)
			}
			return nil, errorf(http.StatusConflict, "Job cancellation failed: job %s cannot be cancelled yet "+
				"(it has not started running)", j.ID)
		}
		return nil, err
	}
	return withStatus{status: http.StatusAccepted, body: struct{}{}}, nil
}

func (s *Server) jobStatus(r *http.Request) (any, error) {
	j, err := s.job(r)
	if err != nil {
		return nil, err
	}
	return JobStatusInfo{Status: string(j.Status().State)}, nil
}

func (s *Server) jobConfig(r *http.Request) (any, error) {
	j, err := s.job(r)
	if err != nil {
		return nil, err
	}
	return jobConfig(j), nil
}

func (s *Server) jobExceptions(r *http.Request) (any, error) {
	j, err := s.job(r)
	if err != nil {
		return nil, err
	}
	return jobExceptions(j.Status()), nil
}

func (s *Server) doctor(r *http.Request) (any, error) {
	j, err := s.job(r)
	if err != nil {
		return nil, err
	}
	if s.cfg.Doctor == nil {
		return nil, errorf(http.StatusNotFound, "Not found: %s (this server has no checkpoint doctor)", r.URL.Path)
	}
	last := 0
	if q := r.URL.Query().Get("last"); q != "" {
		if last, err = strconv.Atoi(q); err != nil || last < 0 {
			return nil, errorf(http.StatusBadRequest, "Bad query parameter last=%q: want the number of latest "+
				"checkpoints to examine (0: as many as the history keeps)", q)
		}
	}
	return s.cfg.Doctor(j, last), nil
}

func (s *Server) vertexDetails(r *http.Request) (any, error) {
	j, v, err := s.jobVertex(r)
	if err != nil {
		return nil, err
	}
	now := j.Now()
	st := j.Status()
	tasks := subtaskTasks(v, st.Tasks)
	start, end, d := vertexTimes(st, now)
	out := JobVertexDetails{ID: v.ID, Name: v.Name, Parallelism: v.Parallelism, MaxParallelism: v.MaxParallelism,
		Now: now.UnixMilli(), Subtasks: []SubtaskDetail{}}
	host := s.endpoint()
	for i := range v.Parallelism {
		out.Subtasks = append(out.Subtasks, SubtaskDetail{Subtask: i, Status: executionState(st.State),
			Attempt: st.Restarts, Endpoint: host, StartTime: start, EndTime: end, Duration: d,
			Metrics: ioMetrics(j, v, i, tasks), TaskManagerID: "weir-" + strconv.Itoa(pid)})
	}
	return out, nil
}

func (s *Server) backpressure(r *http.Request) (any, error) {
	j, v, err := s.jobVertex(r)
	if err != nil {
		return nil, err
	}
	return vertexBackPressure(v, j.Status(), j.Now()), nil
}
