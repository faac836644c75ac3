package ha_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/weirstream/weir/internal/ha"
	"github.com/weirstream/weir/internal/ha/etcdtest"
)

// TestJobLifecycle walks a job through the store: spec, counter, pointer,
// terminal status, removal.
func TestJobLifecycle(t *testing.T) {
	t.Parallel()
	endpoints := etcdtest.Start(t)
	ctx := ctxT(t)
	l := mustCampaign(t, open(t, endpoints, "c"), "jm:1")
	const job = "job-1"

	if _, ok, err := l.Job(ctx, job); err != nil || ok {
		t.Fatalf("Job before PutJob: ok %v, err %v", ok, err)
	}
	if n, err := l.CheckpointCounter(ctx, job); err != nil || n != 0 {
		t.Fatalf("CheckpointCounter before any: %d, %v; want 0", n, err)
	}
	if _, ok, err := l.LatestCheckpoint(ctx, job); err != nil || ok {
		t.Fatalf("LatestCheckpoint before any: ok %v, err %v", ok, err)
	}
	if _, ok, err := l.JobStatus(ctx, job); err != nil || ok {
		t.Fatalf("JobStatus before any: ok %v, err %v", ok, err)
	}
	for _, j := range []string{job, "job-2"} {
		if err := l.PutJob(ctx, j, []byte("spec of "+j)); err != nil {
			t.Fatal(err)
		}
	}
	if jobs, err := l.Jobs(ctx); err != nil || strings.Join(jobs, ",") != "job-1,job-2" {
		t.Fatalf("Jobs = %v, %v", jobs, err)
	}

	// The counter goes up or stays, never down.
	for _, n := range []int64{1, 5, 5, 9} {
		if err := l.SetCheckpointCounter(ctx, job, n); err != nil {
			t.Fatalf("SetCheckpointCounter(%d): %v", n, err)
		}
	}
	err := l.SetCheckpointCounter(ctx, job, 8)
	if !errors.Is(err, ha.ErrCounterDecrease) || !strings.Contains(err.Error(), "it is 9") {
		t.Fatalf("SetCheckpointCounter(8) after 9: %v; want ErrCounterDecrease naming 9", err)
	}
	if n, err := l.CheckpointCounter(ctx, job); err != nil || n != 9 {
		t.Fatalf("CheckpointCounter = %d, %v; want 9", n, err)
	}
	if err := l.SetCheckpointCounter(ctx, job, -1); err == nil {
		t.Error("negative counter accepted")
	}

	// Concurrent advances of one leadership end at the highest value.
	var wg sync.WaitGroup
	for i := int64(10); i < 30; i++ {
		wg.Go(func() {
			if err := l.SetCheckpointCounter(ctx, job, i); err != nil && !errors.Is(err, ha.ErrCounterDecrease) {
				t.Errorf("concurrent SetCheckpointCounter(%d): %v", i, err)
			}
		})
	}
	wg.Wait()
	if n, err := l.CheckpointCounter(ctx, job); err != nil || n != 29 {
		t.Fatalf("CheckpointCounter after concurrent advances = %d, %v; want 29", n, err)
	}

	p := ha.Pointer{ID: 3, Path: "file:///ckpt/chk-3", Savepoint: true}
	if err := l.SetLatestCheckpoint(ctx, job, p); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := l.LatestCheckpoint(ctx, job); err != nil || !ok || got != p {
		t.Fatalf("LatestCheckpoint = %+v, %v, %v; want %+v", got, ok, err, p)
	}
	for _, bad := range []ha.Pointer{{ID: 0, Path: "x"}, {ID: 1}} {
		if err := l.SetLatestCheckpoint(ctx, job, bad); err == nil {
			t.Errorf("SetLatestCheckpoint(%+v) accepted", bad)
		}
	}

	// Removal needs a terminal status first; the status then stays.
	if err := l.RemoveJob(ctx, job); !errors.Is(err, ha.ErrJobNotTerminal) {
		t.Fatalf("RemoveJob without status: %v; want ErrJobNotTerminal", err)
	}
	if err := l.SetJobStatus(ctx, job, "RUNNING"); err == nil || !strings.Contains(err.Error(), "FINISHED, CANCELED or FAILED") {
		t.Fatalf("SetJobStatus(RUNNING): %v; want an error naming the valid statuses", err)
	}
	if err := l.SetJobStatus(ctx, job, ha.StatusFinished); err != nil {
		t.Fatal(err)
	}
	if err := l.SetJobStatus(ctx, job, ha.StatusFinished); err != nil {
		t.Fatalf("same status again: %v", err)
	}
	if err := l.SetJobStatus(ctx, job, ha.StatusFailed); !errors.Is(err, ha.ErrJobTerminal) {
		t.Fatalf("another terminal status: %v; want ErrJobTerminal", err)
	}
	if err := l.RemoveJob(ctx, job); err != nil {
		t.Fatal(err)
	}
	if err := l.RemoveJob(ctx, job); err != nil {
		t.Fatalf("RemoveJob again: %v", err)
	}
	if jobs, err := l.Jobs(ctx); err != nil || strings.Join(jobs, ",") != "job-2" {
		t.Fatalf("Jobs after removal = %v, %v; want [job-2]", jobs, err)
	}
	if _, ok, _ := l.Job(ctx, job); ok {
		t.Error("spec survived RemoveJob")
	}
	if _, ok, _ := l.LatestCheckpoint(ctx, job); ok {
		t.Error("pointer survived RemoveJob")
	}
	if n, _ := l.CheckpointCounter(ctx, job); n != 0 {
		t.Errorf("counter survived RemoveJob: %d", n)
	}
	if s, ok, err := l.JobStatus(ctx, job); err != nil || !ok || s != ha.StatusFinished {
		t.Errorf("JobStatus after removal = %q, %v, %v; want FINISHED", s, ok, err)
	}
	if err := l.PutJob(ctx, job, []byte("again")); !errors.Is(err, ha.ErrJobTerminal) {
		t.Errorf("PutJob of a finished job: %v; want ErrJobTerminal", err)
	}
}

func TestJobIDValidation(t *testing.T) {
	t.Parallel()
	endpoints := etcdtest.Start(t)
	ctx := ctxT(t)
	l := mustCampaign(t, open(t, endpoints, "c"), "jm:1")
	for _, id := range []string{"", "a/b", "spaces here", strings.Repeat("x", 129)} {
		calls := map[string]error{
			"PutJob":               l.PutJob(ctx, id, nil),
			"SetCheckpointCounter": l.SetCheckpointCounter(ctx, id, 1),
			"SetLatestCheckpoint":  l.SetLatestCheckpoint(ctx, id, ha.Pointer{ID: 1, Path: "p"}),
			"SetJobStatus":         l.SetJobStatus(ctx, id, ha.StatusCanceled),
			"RemoveJob":            l.RemoveJob(ctx, id),
		}
		for name, err := range calls {
			if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("job id %q", id)) {
				t.Errorf("%s(%q): %v; want an error naming the job id", name, id, err)
			}
		}
	}
}
