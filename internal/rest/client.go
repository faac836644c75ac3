package rest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Client calls a weir (or Flink) REST API. Its methods are safe for
// concurrent use.
type Client struct {
	base  string
	token string
	hc    *http.Client
}

// defaultClientTimeout bounds each request of a Client made without an
// http.Client.
const defaultClientTimeout = 30 * time.Second

// NewClient returns a client of the API at baseURL (such as
// "http://127.0.0.1:8081") that sends token, if not empty, as a bearer
// token. httpClient may be nil: a client with a 30 s timeout.
func NewClient(baseURL, token string, httpClient *http.Client) *Client {
	if httpClient == nil {
		httpClient = &http.Client{Timeout: defaultClientTimeout}
	}
	return &Client{base: strings.TrimRight(baseURL, "/"), token: token, hc: httpClient}
}

// URL is the API's base URL.
func (c *Client) URL() string { return c.base }

// APIError is an answer other than 2xx: its status and the messages of its
// errors body (Flink's {"errors":[...]}), or the start of a body that is
// not one.
type APIError struct {
	Method, Path string
	Status       int
	Errors       []string
}

// Error is "<method> <path>: <status> <text>: <messages>".
func (e *APIError) Error() string {
	msg := strings.Join(e.Errors, "; ")
	if msg == "" {
		msg = "no message"
	}
	return fmt.Sprintf("%s %s: %d %s: %s", e.Method, e.Path, e.Status, http.StatusText(e.Status), msg)
}

// Message is the server's message alone.
func (e *APIError) Message() string { return strings.Join(e.Errors, "; ") }

// StatusOf returns the HTTP status of an *APIError in err's chain, 0 if
// there is none (the server was not reached).
func StatusOf(err error) int {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.Status
	}
	return 0
}

// do sends a request and decodes a 2xx answer's body into out (if not
// nil).
func (c *Client) do(ctx context.Context, method, path string, query url.Values, body, out any) error {
	u := c.base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("%s %s: %w", method, path, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return err // *url.Error names the method and URL
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("%s %s: read the answer: %w", method, path, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		ae := &APIError{Method: method, Path: path, Status: resp.StatusCode}
		var er ErrorResponse
		if json.Unmarshal(data, &er) == nil && len(er.Errors) > 0 {
			ae.Errors = er.Errors
		} else if text := strings.TrimSpace(string(data)); text != "" {
			ae.Errors = []string{truncate(text, 200)}
		}
		return ae
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s %s: decode the answer: %w", method, path, err)
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

func jobPath(jobID string, rest ...string) string {
	p := "/jobs/" + url.PathEscape(jobID)
	for _, r := range rest {
		p += "/" + url.PathEscape(r)
	}
	return p
}

// Config is GET /config.
func (c *Client) Config(ctx context.Context) (DashboardConfig, error) {
	var out DashboardConfig
	return out, c.do(ctx, http.MethodGet, "/config", nil, nil, &out)
}

// Overview is GET /overview.
func (c *Client) Overview(ctx context.Context) (ClusterOverview, error) {
	var out ClusterOverview
	return out, c.do(ctx, http.MethodGet, "/overview", nil, nil, &out)
}

// Jobs is GET /jobs/overview: every job the server shows.
func (c *Client) Jobs(ctx context.Context) ([]JobOverview, error) {
	var out MultipleJobsDetails
	return out.Jobs, c.do(ctx, http.MethodGet, "/jobs/overview", nil, nil, &out)
}

// Job is GET /jobs/{jobid}.
func (c *Client) Job(ctx context.Context, jobID string) (JobDetails, error) {
	var out JobDetails
	return out, c.do(ctx, http.MethodGet, jobPath(jobID), nil, nil, &out)
}

// JobStatus is GET /jobs/{jobid}/status.
func (c *Client) JobStatus(ctx context.Context, jobID string) (string, error) {
	var out JobStatusInfo
	return out.Status, c.do(ctx, http.MethodGet, jobPath(jobID, "status"), nil, nil, &out)
}

// JobExceptions is GET /jobs/{jobid}/exceptions.
func (c *Client) JobExceptions(ctx context.Context, jobID string) (JobExceptions, error) {
	var out JobExceptions
	return out, c.do(ctx, http.MethodGet, jobPath(jobID, "exceptions"), nil, nil, &out)
}

// CancelJob is PATCH /jobs/{jobid}?mode=cancel: the job starts cancelling.
func (c *Client) CancelJob(ctx context.Context, jobID string) error {
	return c.do(ctx, http.MethodPatch, jobPath(jobID), url.Values{"mode": {"cancel"}}, nil, nil)
}

// TriggerCheckpoint is POST /jobs/{jobid}/checkpoints: it returns the
// trigger id to poll with CheckpointTriggerStatus or AwaitCheckpoint.
func (c *Client) TriggerCheckpoint(ctx context.Context, jobID string) (string, error) {
	var out TriggerResponse
	err := c.do(ctx, http.MethodPost, jobPath(jobID, "checkpoints"), nil,
		CheckpointTriggerRequest{CheckpointType: CheckpointTypeConfigured}, &out)
	return out.RequestID, err
}

// CheckpointTriggerStatus is GET /jobs/{jobid}/checkpoints/{triggerid}.
func (c *Client) CheckpointTriggerStatus(ctx context.Context, jobID, triggerID string) (CheckpointTriggerStatus, error) {
	var out CheckpointTriggerStatus
	return out, c.do(ctx, http.MethodGet, jobPath(jobID, "checkpoints", triggerID), nil, nil, &out)
}

// CheckpointFailedError is a triggered checkpoint's failure, as the server
// reported it.
type CheckpointFailedError struct {
	Class, Message string
}

// Error is "checkpoint failed: <message>".
func (e *CheckpointFailedError) Error() string { return "checkpoint failed: " + e.Message }

// AwaitCheckpoint polls trigger triggerID of jobID every poll until the
// checkpoint completed and returns its id; a failed checkpoint is a
// *CheckpointFailedError.
func (c *Client) AwaitCheckpoint(ctx context.Context, jobID, triggerID string, poll time.Duration) (int64, error) {
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		st, err := c.CheckpointTriggerStatus(ctx, jobID, triggerID)
		if err != nil {
			return 0, err
		}
		if st.Status.ID == OperationCompleted {
			switch op := st.Operation; {
			case op == nil:
				return 0, fmt.Errorf("checkpoint trigger %s: completed without a result", triggerID)
			case op.FailureCause != nil:
				return 0, &CheckpointFailedError{Class: op.FailureCause.Class, Message: op.FailureCause.StackTrace}
			case op.CheckpointID != nil:
				return *op.CheckpointID, nil
			}
			return 0, fmt.Errorf("checkpoint trigger %s: completed without a checkpoint id", triggerID)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-t.C:
		}
	}
}

// TriggerSavepoint is POST /jobs/{jobid}/savepoints: it returns the
// trigger id to poll with SavepointTriggerStatus or AwaitSavepoint.
func (c *Client) TriggerSavepoint(ctx context.Context, jobID string, req SavepointTriggerRequest) (string, error) {
	var out TriggerResponse
	err := c.do(ctx, http.MethodPost, jobPath(jobID, "savepoints"), nil, req, &out)
	return out.RequestID, err
}

// StopWithSavepoint is POST /jobs/{jobid}/stop: it returns the trigger id
// of the savepoint, to poll with SavepointTriggerStatus or AwaitSavepoint.
func (c *Client) StopWithSavepoint(ctx context.Context, jobID string, req StopWithSavepointRequest) (string, error) {
	var out TriggerResponse
	err := c.do(ctx, http.MethodPost, jobPath(jobID, "stop"), nil, req, &out)
	return out.RequestID, err
}

// SavepointTriggerStatus is GET /jobs/{jobid}/savepoints/{triggerid}. With
// wait > 0 a weir server holds the answer until the savepoint finished
// or wait passed (rounded down to milliseconds; at most a minute).
func (c *Client) SavepointTriggerStatus(ctx context.Context, jobID, triggerID string,
	wait time.Duration) (SavepointTriggerStatus, error) {
	var q url.Values
	if ms := wait.Milliseconds(); ms > 0 {
		q = url.Values{"wait": {strconv.FormatInt(ms, 10)}}
	}
	var out SavepointTriggerStatus
	return out, c.do(ctx, http.MethodGet, jobPath(jobID, "savepoints", triggerID), q, nil, &out)
}

// SavepointFailedError is a triggered savepoint's failure, as the server
// reported it.
type SavepointFailedError struct {
	Class, Message string
}

// Error is "savepoint failed: <message>".
func (e *SavepointFailedError) Error() string { return "savepoint failed: " + e.Message }

// savepointWait is how long each request of AwaitSavepoint asks the
// server to wait for the result: below the 30 s timeout of clients.
const savepointWait = 10 * time.Second

// AwaitSavepoint waits until savepoint trigger triggerID of jobID finished
// and returns the savepoint's location; a failed savepoint is a
// *SavepointFailedError. Each request asks the server to answer once the
// savepoint finished (up to 10 s, weir's wait parameter); a server that
// answers sooner, still in progress, is asked again poll later.
func (c *Client) AwaitSavepoint(ctx context.Context, jobID, triggerID string, poll time.Duration) (string, error) {
	for {
		asked := time.Now()
		st, err := c.SavepointTriggerStatus(ctx, jobID, triggerID, savepointWait)
		if err != nil {
			return "", err
		}
		if st.Status.ID == OperationCompleted {
			switch op := st.Operation; {
			case op == nil:
				return "", fmt.Errorf("savepoint trigger %s: completed without a result", triggerID)
			case op.FailureCause != nil:
				return "", &SavepointFailedError{Class: op.FailureCause.Class, Message: op.FailureCause.StackTrace}
			case op.Location != "":
				return op.Location, nil
			}
			return "", fmt.Errorf("savepoint trigger %s: completed without a location", triggerID)
		}
		t := time.NewTimer(poll - time.Since(asked))
		select {
		case <-ctx.Done():
			t.Stop()
			return "", ctx.Err()
		case <-t.C:
		}
	}
}

// Checkpoints is GET /jobs/{jobid}/checkpoints.
func (c *Client) Checkpoints(ctx context.Context, jobID string) (CheckpointingStatistics, error) {
	var out CheckpointingStatistics
	return out, c.do(ctx, http.MethodGet, jobPath(jobID, "checkpoints"), nil, nil, &out)
}

// CheckpointConfig is GET /jobs/{jobid}/checkpoints/config.
func (c *Client) CheckpointConfig(ctx context.Context, jobID string) (CheckpointConfigInfo, error) {
	var out CheckpointConfigInfo
	return out, c.do(ctx, http.MethodGet, jobPath(jobID, "checkpoints", "config"), nil, nil, &out)
}

// CheckpointDetails is GET /jobs/{jobid}/checkpoints/details/{checkpointid}.
func (c *Client) CheckpointDetails(ctx context.Context, jobID string, checkpointID int64) (CheckpointStatistics, error) {
	var out CheckpointStatistics
	return out, c.do(ctx, http.MethodGet,
		jobPath(jobID, "checkpoints", "details", strconv.FormatInt(checkpointID, 10)), nil, nil, &out)
}

// Backpressure is GET /jobs/{jobid}/vertices/{vertexid}/backpressure.
func (c *Client) Backpressure(ctx context.Context, jobID, vertexID string) (VertexBackPressure, error) {
	var out VertexBackPressure
	return out, c.do(ctx, http.MethodGet, jobPath(jobID, "vertices", vertexID, "backpressure"), nil, nil, &out)
}

// JobMetrics is GET /jobs/{jobid}/metrics: the names of the job's
// metrics, or with names the values of those.
func (c *Client) JobMetrics(ctx context.Context, jobID string, names ...string) ([]Metric, error) {
	var out []Metric
	var q url.Values
	if len(names) > 0 {
		q = url.Values{"get": {strings.Join(names, ",")}}
	}
	return out, c.do(ctx, http.MethodGet, jobPath(jobID, "metrics"), q, nil, &out)
}

// SubtaskMetrics is GET /jobs/{jobid}/vertices/{vertexid}/subtasks/metrics:
// the metrics names of a vertex's subtasks aggregated over all of them
// with aggs (all aggregations if none).
func (c *Client) SubtaskMetrics(ctx context.Context, jobID, vertexID string, names []string,
	aggs ...string) ([]AggregatedMetric, error) {
	var out []AggregatedMetric
	q := url.Values{"get": {strings.Join(names, ",")}}
	if len(aggs) > 0 {
		q.Set("agg", strings.Join(aggs, ","))
	}
	return out, c.do(ctx, http.MethodGet, jobPath(jobID, "vertices", vertexID, "subtasks", "metrics"), q, nil, &out)
}
