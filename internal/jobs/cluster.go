package jobs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/spf13/pflag"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/internal/cluster"
)

// Prepare builds job name of r as `weir run` does: its flags parsed from
// args, the configuration from the key=value items in sets (applied in
// order, after the job's own defaults), every problem reported at once.
// It returns the Environment holding the job and the configuration.
func (r *Registry) Prepare(name string, args, sets []string, logger *slog.Logger, out io.Writer) (*weir.Environment, *config.Config, error) {
	job, ok := r.New(name)
	if !ok {
		return nil, nil, fmt.Errorf("unknown job %q: this binary has %v", name, r.Names())
	}
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	job.RegisterFlags(fs)
	var problems []error
	if err := fs.Parse(args); err != nil {
		problems = append(problems, fmt.Errorf("job %s: %w", name, err))
	}
	cfg, err := config.LoadFile("", sets)
	if err != nil {
		problems = append(problems, err)
	}
	if d, ok := job.(Defaulter); ok && cfg != nil {
		for k, v := range d.Defaults() {
			if !cfg.IsSet(k) {
				if err := cfg.Set(k, v); err != nil {
					problems = append(problems, err)
				}
			}
		}
	}
	if err := job.Validate(); err != nil {
		problems = append(problems, err)
	}
	if len(problems) > 0 {
		return nil, nil, errors.Join(problems...)
	}
	opts := weir.OptionsFromConfig(cfg)
	opts.Logger = logger
	if err := opts.Validate(); err != nil {
		return nil, nil, err
	}
	env := weir.NewEnvironment(opts)
	if err := job.Build(env, out); err != nil {
		return nil, nil, fmt.Errorf("job %s: %w", name, err)
	}
	return env, cfg, nil
}

// ClusterBuilder is a task manager's cluster.TaskManagerConfig.Build over
// r: it builds the spec's job as the job manager did and executes the part
// ctx carries.
func (r *Registry) ClusterBuilder(logger *slog.Logger) func(ctx context.Context, spec cluster.JobSpec) error {
	return func(ctx context.Context, spec cluster.JobSpec) error {
		// A job that prints (a print sink) prints on the task manager's
		// standard output, as Flink's task managers do.
		env, cfg, err := r.Prepare(spec.Job, spec.Args, spec.Config, logger, os.Stdout)
		if err != nil {
			return cluster.NotRestartable(err)
		}
		name := spec.Job
		if n := cfg.String("pipeline.name"); n != "" {
			name = n
		}
		err = env.Execute(ctx, name)
		if errors.Is(err, weir.ErrInvalidJob) {
			return cluster.NotRestartable(err)
		}
		return err
	}
}
