package cluster_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/cluster"
	"github.com/weirstream/weir/internal/rest"
)

// The job manager's REST API and Prometheus endpoint show the metrics of
// every subtask, though all of them run in task managers: records in and
// out of every subtask of every vertex, back pressure per subtask.
func TestClusterMetricsReachJobManager(t *testing.T) {
	dir := t.TempDir()
	const p = 4
	c := newTestCluster(t, counterSpec(dir, 100_000_000, p, "execution.checkpointing.interval=1h"), cluster.Security{})
	c.startTM(2, nil)
	c.startTM(2, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- c.runJob(ctx) }()

	var client *rest.Client
	var jobID string
	waitFor(t, 30*time.Second, "the job's REST server", func() bool {
		ds, _ := rest.FindDiscovery(ctx, filepath.Join(dir, "chk"))
		if len(ds) == 0 {
			return false
		}
		client, jobID = rest.NewClient(ds[0].URL, "", nil), ds[0].JobID
		return true
	})
	var last string
	waitFor(t, 30*time.Second, "records of every subtask in the job's REST view", func() bool {
		select {
		case err := <-done:
			t.Fatalf("the job ended: %v", err)
		default:
		}
		j, err := client.Job(ctx, jobID)
		if err != nil || len(j.Vertices) != 2 {
			last = fmt.Sprintf("job: %v, %d vertices", err, len(j.Vertices))
			return false
		}
		src, cnt := j.Vertices[0].Metrics, j.Vertices[1].Metrics
		last = fmt.Sprintf("source %+v, count %+v", src, cnt)
		if !src.WriteRecordsComplete || src.WriteRecords == 0 || !cnt.ReadRecordsComplete || cnt.ReadRecords == 0 {
			return false
		}
		for _, v := range j.Vertices {
			bp, err := client.Backpressure(ctx, jobID, v.ID)
			if err != nil || len(bp.Subtasks) != p {
				last = fmt.Sprintf("back pressure of %s: %v, %d subtasks", v.Name, err, len(bp.Subtasks))
				return false
			}
		}
		return true
	}, func() string { return last })
	// The Prometheus endpoint: every subtask's numRecordsOut.
	resp, err := http.Get(client.URL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for i := range p {
		if !strings.Contains(string(body), fmt.Sprintf(`subtask_index="%d"`, i)) {
			t.Errorf("/metrics has no series of subtask %d:\n%.2000s", i, body)
		}
	}
	cancel()
	<-done
}
