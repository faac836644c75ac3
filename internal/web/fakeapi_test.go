package web_test

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/weirstream/weir/internal/web"
)

// The fake REST API answers in the shapes that the dashboard reads, with one
// running job of two vertices and eight checkpoints: six completed (one of
// them a savepoint, one unaligned), one failed, one in progress. A second,
// finished job is only in the overview.

const (
	jobID      = "a3f1c2d4e5b60718293a4b5c6d7e8f90"
	jobName    = "Nexmark Q5 hot items"
	oldJobID   = "0b1c2d3e4f5061728394a5b6c7d8e9f0"
	oldJobName = "word count"
	srcID      = "bc764cd8ddf7a0cff126f51c16239658"
	winID      = "20ba6b65f97481d5570070de90e4e791"
	failedCP   = 5
	runningCP  = 8
	numCPs     = 8
	savepoint  = 3
	unaligned  = 6
	failureMsg = "Asynchronous part of checkpoint 5 could not be completed: uploading shared state to s3://weir-state/q5/shared failed: connection reset by peer"
)

type fakeVertex struct {
	id, name, description string
	parallelism           int
	inputs                []map[string]any
}

var fakeVertices = []fakeVertex{
	{id: srcID, name: "Source: bids", description: "Source: bids<br/>kafka topic nexmark-bids", parallelism: 2},
	{id: winID, name: "Window(sliding 10 s, 2 s) -> hot items -> Sink: results", description: "Window aggregate by auction<br/>Sink: results", parallelism: 4,
		inputs: []map[string]any{{"num": 0, "id": srcID, "ship_strategy": "HASH", "exchange": "pipelined_bounded"}}},
}

type fakeAPI struct {
	start time.Time
	token string // when set, every request must carry "Bearer <token>"

	mu       sync.Mutex
	failing  map[string]int // path -> status answered instead of data
	auths    []string       // Authorization headers seen
	requests map[string]int // path -> count
}

func newFakeAPI(token string) *fakeAPI {
	return &fakeAPI{start: time.Now(), token: token, failing: map[string]int{}, requests: map[string]int{}}
}

// fail makes path answer status (0: answer normally again).
func (f *fakeAPI) fail(path string, status int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if status == 0 {
		delete(f.failing, path)
	} else {
		f.failing[path] = status
	}
}

func (f *fakeAPI) count(path string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests[path]
}

func (f *fakeAPI) authorizations() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.auths)
}

// handler routes as the REST server will: the API's paths first, the
// dashboard for everything else.
func (f *fakeAPI) handler() http.Handler {
	mux := http.NewServeMux()
	api := func(pattern string, h func(r *http.Request) (any, int)) {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			f.mu.Lock()
			f.requests[r.URL.Path]++
			auth := r.Header.Get("Authorization")
			f.auths = append(f.auths, auth)
			status := f.failing[r.URL.Path]
			f.mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			if f.token != "" && auth != "Bearer "+f.token {
				w.WriteHeader(http.StatusUnauthorized)
				fmt.Fprint(w, `{"errors":["missing or wrong bearer token"]}`)
				return
			}
			if status != 0 {
				w.WriteHeader(status)
				fmt.Fprint(w, `{"errors":["injected failure"]}`)
				return
			}
			body, status := h(r)
			if status != 0 {
				w.WriteHeader(status)
			}
			if err := json.NewEncoder(w).Encode(body); err != nil {
				panic(err)
			}
		})
	}
	notFound := map[string]any{"errors": []string{"not found"}}
	job := func(r *http.Request) bool { return r.PathValue("jid") == jobID }
	vertex := func(r *http.Request) int {
		for i, v := range fakeVertices {
			if v.id == r.PathValue("vid") {
				return i
			}
		}
		return -1
	}
	checkpoint := func(r *http.Request) int {
		id, err := strconv.Atoi(r.PathValue("cid"))
		if err != nil || id < 1 || id > numCPs {
			return 0
		}
		return id
	}

	api("GET /jobs/overview", func(*http.Request) (any, int) { return f.overview(), 0 })
	api("GET /jobs/{jid}", func(r *http.Request) (any, int) {
		if !job(r) {
			return notFound, http.StatusNotFound
		}
		return f.job(), 0
	})
	api("GET /jobs/{jid}/vertices/{vid}/backpressure", func(r *http.Request) (any, int) {
		i := vertex(r)
		if !job(r) || i < 0 {
			return notFound, http.StatusNotFound
		}
		return f.backpressure(i), 0
	})
	api("GET /jobs/{jid}/vertices/{vid}/subtasks/metrics", func(r *http.Request) (any, int) {
		i := vertex(r)
		if !job(r) || i < 0 {
			return notFound, http.StatusNotFound
		}
		q := r.URL.Query()
		if q.Get("get") != "currentInputWatermark" || q.Get("agg") != "min" {
			return map[string]any{"errors": []string{"the fake knows only get=currentInputWatermark&agg=min, got " + r.URL.RawQuery}}, http.StatusBadRequest
		}
		var wm any = json.Number("-9223372036854775808") // Long.MIN_VALUE: no watermark yet
		if i > 0 {
			wm = time.Now().Add(-3 * time.Second).UnixMilli()
		}
		return []map[string]any{{"id": "currentInputWatermark", "min": wm}}, 0
	})
	api("GET /jobs/{jid}/checkpoints", func(r *http.Request) (any, int) {
		if !job(r) {
			return notFound, http.StatusNotFound
		}
		return f.checkpoints(), 0
	})
	api("GET /jobs/{jid}/checkpoints/details/{cid}", func(r *http.Request) (any, int) {
		id := checkpoint(r)
		if !job(r) || id == 0 {
			return notFound, http.StatusNotFound
		}
		return f.checkpointDetails(id), 0
	})
	api("GET /jobs/{jid}/checkpoints/details/{cid}/subtasks/{vid}", func(r *http.Request) (any, int) {
		id, i := checkpoint(r), vertex(r)
		if !job(r) || id == 0 || i < 0 {
			return notFound, http.StatusNotFound
		}
		return f.taskDetails(id, i), 0
	})
	mux.Handle("/", web.Handler())
	return mux
}

func (f *fakeAPI) overview() any {
	now := time.Now().UnixMilli()
	started := f.start.Add(-47 * time.Minute).UnixMilli()
	oldStart := f.start.Add(-3 * time.Hour).UnixMilli()
	return map[string]any{"jobs": []map[string]any{
		{
			"jid": oldJobID, "name": oldJobName, "state": "FINISHED",
			"start-time": oldStart, "end-time": oldStart + 754_000, "duration": 754_000, "last-modification": oldStart + 754_000,
			"tasks": map[string]int{"total": 3, "running": 0, "finished": 3},
		},
		{
			"jid": jobID, "name": jobName, "state": "RUNNING",
			"start-time": started, "end-time": -1, "duration": now - started, "last-modification": started,
			"tasks": map[string]int{"total": 6, "running": 6, "finished": 0},
		},
	}}
}

// records returns how many records vertex i read and wrote so far: the
// source makes about 1000 a second, the window about 12.
func (f *fakeAPI) records(i int) (read, write int64) {
	s := time.Since(f.start).Seconds() + 600
	src := int64(1000 * s)
	if i == 0 {
		return 0, src
	}
	return src, int64(12 * s)
}

func (f *fakeAPI) job() any {
	now := time.Now().UnixMilli()
	started := f.start.Add(-47 * time.Minute).UnixMilli()
	var vertices, nodes []map[string]any
	for i, v := range fakeVertices {
		read, write := f.records(i)
		vertices = append(vertices, map[string]any{
			"id": v.id, "name": v.name, "maxParallelism": 128, "parallelism": v.parallelism, "status": "RUNNING",
			"start-time": started, "end-time": -1, "duration": now - started,
			"tasks": map[string]int{"RUNNING": v.parallelism},
			"metrics": map[string]any{
				"read-bytes": read * 64, "read-bytes-complete": true,
				"write-bytes": write * 64, "write-bytes-complete": true,
				"read-records": read, "read-records-complete": true,
				"write-records": write, "write-records-complete": true,
				"accumulated-backpressured-time": []int64{2_400_000, 30_000}[i],
				"accumulated-idle-time":          []int64{120_000, 90_000}[i],
				"accumulated-busy-time":          []float64{300_000, 2_650_000}[i],
			},
		})
		inputs := v.inputs
		if inputs == nil {
			inputs = []map[string]any{}
		}
		nodes = append(nodes, map[string]any{
			"id": v.id, "parallelism": v.parallelism, "operator": "", "operator_strategy": "",
			"description": v.description, "inputs": inputs,
		})
	}
	return map[string]any{
		"jid": jobID, "name": jobName, "isStoppable": false, "state": "RUNNING",
		"start-time": started, "end-time": -1, "duration": now - started, "maxParallelism": -1, "now": now,
		"vertices":      vertices,
		"status-counts": map[string]int{"RUNNING": 2},
		"plan":          map[string]any{"jid": jobID, "name": jobName, "type": "STREAMING", "nodes": nodes},
	}
}

func (f *fakeAPI) backpressure(i int) any {
	now := time.Now().UnixMilli()
	if i == 0 {
		return map[string]any{"status": "ok", "backpressureLevel": "high", "end-timestamp": now, "subtasks": []map[string]any{
			{"subtask": 0, "attempt-number": 0, "backpressureLevel": "high", "ratio": 0.91, "idleRatio": 0.0, "busyRatio": 0.09},
			{"subtask": 1, "attempt-number": 0, "backpressureLevel": "high", "ratio": 0.87, "idleRatio": 0.02, "busyRatio": 0.11},
		}}
	}
	var subs []map[string]any
	for s := range 4 {
		subs = append(subs, map[string]any{"subtask": s, "attempt-number": 0, "backpressureLevel": "ok", "ratio": 0.0, "idleRatio": 0.04, "busyRatio": 0.96})
	}
	return map[string]any{"status": "ok", "backpressureLevel": "ok", "end-timestamp": now, "subtasks": subs}
}

// subtaskStats is what one subtask reported for one checkpoint.
type subtaskStats struct {
	index                              int
	done                               bool
	ack, e2e                           int64
	startDelay, alignment, sync, async int64
	stateSize, checkpointedSize        int64
	buffered, processed, persisted     int64
	unalignedCheckpoint                bool
}

func (f *fakeAPI) trigger(id int) int64 {
	return f.start.Add(time.Duration(id-numCPs)*10*time.Second - 5*time.Second).UnixMilli()
}

func checkpointStatus(id int) string {
	switch id {
	case failedCP:
		return "FAILED"
	case runningCP:
		return "IN_PROGRESS"
	}
	return "COMPLETED"
}

// subtasks makes up, in a fixed way, what the subtasks of vertex i reported
// for checkpoint id.
func (f *fakeAPI) subtasks(id, i int) []subtaskStats {
	v := fakeVertices[i]
	var out []subtaskStats
	for s := range v.parallelism {
		st := subtaskStats{index: s, done: true}
		switch {
		case id == failedCP && i == 1 && s >= 2, id == runningCP && i == 1 && s == 3:
			st.done = false
		}
		if !st.done {
			out = append(out, st)
			continue
		}
		st.startDelay = int64(8 + (id*7+s*3)%25)
		st.sync = int64(2 + (id+s)%5)
		if i == 0 {
			st.async = int64(15 + (id*13+s*5)%30)
			st.stateSize = 2_300 + int64(s)*40
			st.checkpointedSize = st.stateSize
		} else {
			st.alignment = int64(40 + (id*37+s*11)%140)
			st.async = int64(180 + (id*53+s*29)%420)
			st.stateSize = (9<<20 + int64(id)*(1<<19) + int64(s)*(1<<17)) / 4
			st.checkpointedSize = st.stateSize / 5
			if id == 1 {
				st.checkpointedSize = st.stateSize // the first incremental checkpoint uploads everything
			}
			st.processed = int64(40_000 + id*1_000 + s*300)
			if id == unaligned {
				st.unalignedCheckpoint = true
				st.persisted = int64(600_000 + s*50_000)
				st.alignment = 3
			}
		}
		st.e2e = st.startDelay + st.alignment + st.sync + st.async + 4
		st.ack = f.trigger(id) + st.e2e
		out = append(out, st)
	}
	return out
}

// taskSummary sums the subtasks of vertex i for checkpoint id as the task
// statistics of the details endpoint do.
func (f *fakeAPI) taskSummary(id, i int) map[string]any {
	var acked int
	var ack, e2e, state, ckpt, persisted, processed int64
	for _, st := range f.subtasks(id, i) {
		if !st.done {
			continue
		}
		acked++
		ack, e2e = max(ack, st.ack), max(e2e, st.e2e)
		state += st.stateSize
		ckpt += st.checkpointedSize
		persisted += st.persisted
		processed += st.processed
	}
	return map[string]any{
		"id": fakeVertices[i].id, "status": checkpointStatus(id), "latest_ack_timestamp": ack,
		"checkpointed_size": ckpt, "state_size": state, "end_to_end_duration": e2e,
		"alignment_buffered": int64(0), "processed_data": processed, "persisted_data": persisted,
		"num_subtasks": fakeVertices[i].parallelism, "num_acknowledged_subtasks": acked,
	}
}

// checkpointStats is one entry of the history, and the head of the details.
func (f *fakeAPI) checkpointStats(id int) map[string]any {
	status := checkpointStatus(id)
	var subtasks, acked int
	var ack, e2e, state, ckpt, persisted, processed int64
	tasks := map[string]any{}
	for i, v := range fakeVertices {
		t := f.taskSummary(id, i)
		tasks[v.id] = t
		subtasks += v.parallelism
		acked += t["num_acknowledged_subtasks"].(int)
		ack = max(ack, t["latest_ack_timestamp"].(int64))
		e2e = max(e2e, t["end_to_end_duration"].(int64))
		state += t["state_size"].(int64)
		ckpt += t["checkpointed_size"].(int64)
		persisted += t["persisted_data"].(int64)
		processed += t["processed_data"].(int64)
	}
	typ := "CHECKPOINT"
	switch id {
	case savepoint:
		typ = "SAVEPOINT"
	case unaligned:
		typ = "UNALIGNED_CHECKPOINT"
	}
	s := map[string]any{
		"className": map[string]string{"COMPLETED": "completed", "FAILED": "failed", "IN_PROGRESS": "in_progress"}[status],
		"id":        id, "status": status, "is_savepoint": id == savepoint, "savepointFormat": nil, "checkpoint_type": typ,
		"trigger_timestamp": f.trigger(id), "latest_ack_timestamp": ack,
		"checkpointed_size": ckpt, "state_size": state, "end_to_end_duration": e2e,
		"alignment_buffered": int64(0), "processed_data": processed, "persisted_data": persisted,
		"num_subtasks": subtasks, "num_acknowledged_subtasks": acked, "tasks": tasks,
	}
	switch status {
	case "COMPLETED":
		s["discarded"] = false
		if id == savepoint {
			s["external_path"] = "file:///var/lib/weir/savepoints/savepoint-a3f1c2-3"
		} else {
			s["external_path"] = fmt.Sprintf("file:///var/lib/weir/checkpoints/%s/chk-%d", jobID, id)
		}
	case "FAILED":
		s["failure_timestamp"] = f.trigger(id) + 4_000
		s["failure_message"] = failureMsg
	}
	return s
}

func (f *fakeAPI) checkpoints() any {
	var history []map[string]any
	for id := numCPs; id >= 1; id-- { // newest first
		history = append(history, f.checkpointStats(id))
	}
	stat := func(key string) map[string]any {
		var vs []float64
		for _, h := range history {
			if h["status"] == "COMPLETED" {
				vs = append(vs, float64(h[key].(int64)))
			}
		}
		slices.Sort(vs)
		pct := func(p float64) float64 { return vs[int(math.Ceil(p*float64(len(vs))))-1] }
		var sum float64
		for _, v := range vs {
			sum += v
		}
		return map[string]any{"min": vs[0], "max": vs[len(vs)-1], "avg": math.Round(sum / float64(len(vs))),
			"p50": pct(0.5), "p90": pct(0.9), "p95": pct(0.95), "p99": pct(0.99), "p999": pct(0.999)}
	}
	byID := func(id int) map[string]any { return history[numCPs-id] }
	failed := byID(failedCP)
	return map[string]any{
		"counts": map[string]int{"restored": 0, "total": numCPs, "in_progress": 1, "completed": numCPs - 2, "failed": 1},
		"summary": map[string]any{
			"checkpointed_size": stat("checkpointed_size"), "state_size": stat("state_size"),
			"end_to_end_duration": stat("end_to_end_duration"), "alignment_buffered": stat("alignment_buffered"),
			"processed_data": stat("processed_data"), "persisted_data": stat("persisted_data"),
		},
		"latest": map[string]any{
			"completed": byID(7), "savepoint": byID(savepoint), "restored": nil,
			"failed": map[string]any{
				"id": failedCP, "status": "FAILED", "is_savepoint": false, "trigger_timestamp": failed["trigger_timestamp"],
				"latest_ack_timestamp": failed["latest_ack_timestamp"], "checkpointed_size": failed["checkpointed_size"],
				"state_size": failed["state_size"], "end_to_end_duration": failed["end_to_end_duration"],
				"num_subtasks": failed["num_subtasks"], "num_acknowledged_subtasks": failed["num_acknowledged_subtasks"],
				"failure_timestamp": failed["failure_timestamp"], "failure_message": failed["failure_message"],
			},
		},
		"history": history,
	}
}

func (f *fakeAPI) checkpointDetails(id int) any { return f.checkpointStats(id) }

func (f *fakeAPI) taskDetails(id, i int) any {
	t := f.taskSummary(id, i)
	var subs []map[string]any
	for _, st := range f.subtasks(id, i) {
		if !st.done {
			subs = append(subs, map[string]any{"index": st.index, "status": "pending_or_failed"})
			continue
		}
		subs = append(subs, map[string]any{
			"index": st.index, "status": "completed", "ack_timestamp": st.ack, "end_to_end_duration": st.e2e,
			"state_size": st.stateSize, "checkpointed_size": st.checkpointedSize,
			"checkpoint":           map[string]any{"sync": st.sync, "async": st.async},
			"alignment":            map[string]any{"buffered": st.buffered, "processed": st.processed, "persisted": st.persisted, "duration": st.alignment},
			"start_delay":          st.startDelay,
			"unaligned_checkpoint": st.unalignedCheckpoint,
			"aborted":              false,
		})
	}
	minMax := func(v int64) map[string]any { return map[string]any{"min": v, "max": v, "avg": v} }
	t["summary"] = map[string]any{
		"state_size": minMax(t["state_size"].(int64)), "checkpointed_size": minMax(t["checkpointed_size"].(int64)),
		"end_to_end_duration": minMax(t["end_to_end_duration"].(int64)),
	}
	t["subtasks"] = subs
	return t
}
