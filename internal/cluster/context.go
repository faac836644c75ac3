package cluster

import (
	"context"

	"github.com/weirstream/weir/internal/graph"
	"github.com/weirstream/weir/internal/runner"
	"github.com/weirstream/weir/internal/task"
)

type deployerKey struct{}
type partKey struct{}

// Deployer deploys a job's attempts somewhere else than in this process:
// a cluster's job manager.
type Deployer interface {
	Deploy(ctx context.Context, jg *graph.JobGraph, opts task.Options) (runner.Deployment, error)
}

// WithDeployer returns a context that makes Environment.Execute run the
// job with d deploying its attempts (the job manager's role).
func WithDeployer(ctx context.Context, d Deployer) context.Context {
	return context.WithValue(ctx, deployerKey{}, d)
}

// DeployerFrom returns the Deployer of ctx, or nil.
func DeployerFrom(ctx context.Context) Deployer {
	d, _ := ctx.Value(deployerKey{}).(Deployer)
	return d
}

// PartRunner runs the part of a job's attempt placed in a task manager,
// given the job graph and task options the job's Environment built.
type PartRunner interface {
	RunPart(ctx context.Context, jg *graph.JobGraph, opts task.Options) error
}

// WithPart returns a context that makes Environment.Execute run only p,
// the task manager's part of an attempt, instead of the whole job.
func WithPart(ctx context.Context, p PartRunner) context.Context {
	return context.WithValue(ctx, partKey{}, p)
}

// PartFrom returns the PartRunner of ctx, or nil.
func PartFrom(ctx context.Context) PartRunner {
	p, _ := ctx.Value(partKey{}).(PartRunner)
	return p
}
