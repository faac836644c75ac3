package cluster_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/cluster"
	"github.com/weirstream/weir/internal/ha"
	"github.com/weirstream/weir/internal/ha/etcdtest"
)

// A leader that dies after running the job but before it recorded a
// checkpoint (one may have completed, and its sinks committed it) leaves
// the next leader a Resume with ID 0 (resume from storage's newest complete
// checkpoint) rather than a fresh start; a job never run starts fresh; a
// recorded checkpoint is resumed as recorded.
func TestLeadResumesWhenNoCheckpointWasRecorded(t *testing.T) {
	eps := etcdtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	store, err := ha.Open(ctx, ha.Config{Endpoints: eps, ClusterID: "lead-test"})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	job := cluster.HAJob{Store: store, JobID: "counter", Address: "127.0.0.1:1", Spec: []byte(`{"job":"counter"}`), Logger: quiet()}
	// lead runs one leadership; crash ends it as a killed process would
	// (its context canceled, no terminal status), optionally after
	// recording checkpoint record.
	lead := func(record int64) *cluster.Resume {
		lctx, lcancel := context.WithCancel(ctx)
		var got *cluster.Resume
		err := cluster.Lead(lctx, job, func(_ context.Context, resume *cluster.Resume, completed func(int64, string)) error {
			if resume != nil {
				r := *resume
				got = &r
			} else {
				got = nil
			}
			if record > 0 {
				completed(record, "chk-x")
			}
			lcancel()
			return context.Canceled
		})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("lead: %v", err)
		}
		return got
	}
	if r := lead(0); r != nil {
		t.Fatalf("a job never run resumes from %+v, want a fresh start", *r)
	}
	if r := lead(3); r == nil || r.ID != 0 {
		t.Fatalf("after a leader that recorded nothing: resume %+v, want ID 0 (storage's newest checkpoint)", r)
	}
	if r := lead(0); r == nil || r.ID != 3 {
		t.Fatalf("after a leader that recorded checkpoint 3: resume %+v, want 3", r)
	}
}
