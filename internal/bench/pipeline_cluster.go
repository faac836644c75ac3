package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/internal/cluster"
)

// RunPipelineCluster runs the pipeline benchmark on a cluster in this
// process: a job manager and taskManagers task managers of one slot each
// per taskManagers-th of the parallelism, exchanging records over TCP on
// loopback (the cluster's data plane, not the in-process channels). With
// EdgeRebalance and the parallelism spread over the task managers, the
// share of records that crosses TCP is (taskManagers-1)/taskManagers.
// CPU time is the whole process's: the job manager's, every task
// manager's and both ends of every TCP connection.
func RunPipelineCluster(ctx context.Context, opts weir.Options, edge string, records int64, taskManagers int) (PipelineResult, error) {
	if records < 1 {
		return PipelineResult{}, fmt.Errorf("records %d must be at least 1", records)
	}
	if taskManagers < 1 {
		return PipelineResult{}, fmt.Errorf("task managers %d must be at least 1", taskManagers)
	}
	p := max(opts.Parallelism, 1)
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	name := "bench-pipeline-" + edge
	jm, err := cluster.NewJobManager(cluster.JobManagerConfig{Address: "127.0.0.1:0", Spec: cluster.JobSpec{Job: name},
		HeartbeatInterval: time.Second, HeartbeatTimeout: 30 * time.Second, Logger: opts.Logger})
	if err != nil {
		return PipelineResult{}, err
	}
	defer jm.Close()
	build := func(ctx context.Context, _ cluster.JobSpec) error {
		env := weir.NewEnvironment(opts)
		if err := BuildPipeline(env, edge, records); err != nil {
			return err
		}
		return env.Execute(ctx, name)
	}
	tctx, stopTMs := context.WithCancel(ctx)
	ended := make(chan error, taskManagers)
	defer func() {
		stopTMs()
		for range taskManagers {
			<-ended
		}
	}()
	slots := (p + taskManagers - 1) / taskManagers
	for range taskManagers {
		tm, err := cluster.NewTaskManager(tctx, cluster.TaskManagerConfig{JobManager: jm.Addr(), Slots: slots, DataAddress: "127.0.0.1:0",
			Logger: opts.Logger, Build: build, HeartbeatInterval: time.Second, HeartbeatTimeout: 30 * time.Second, RetryInterval: 50 * time.Millisecond})
		if err != nil {
			stopTMs()
			ended <- err
			return PipelineResult{}, err
		}
		go func() { ended <- tm.Run(tctx) }()
	}
	env := weir.NewEnvironment(opts)
	if err := BuildPipeline(env, edge, records); err != nil {
		return PipelineResult{}, err
	}
	// Deployment waits for the task managers to register: time from
	// when every slot is there.
	for {
		if _, s := jm.TaskManagers(); s >= p {
			break
		}
		select {
		case <-ctx.Done():
			return PipelineResult{}, errors.New("the task managers did not register")
		case <-time.After(5 * time.Millisecond):
		}
	}
	cpu0 := ProcessCPU()
	t0 := time.Now()
	err = env.Execute(cluster.WithDeployer(ctx, jm), name)
	wall := time.Since(t0).Seconds()
	cpu := (ProcessCPU() - cpu0).Seconds()
	if err != nil {
		return PipelineResult{}, err
	}
	r := PipelineResult{Edge: edge, Records: records, Parallelism: p, TaskManagers: taskManagers, WallSeconds: wall, CPUSeconds: cpu}
	if wall > 0 {
		r.RecordsPerSecond = float64(records) / wall
	}
	if cpu > 0 {
		r.RecordsPerCoreSecond = float64(records) / cpu
	}
	return r, nil
}
