package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/cluster"
	"github.com/weirstream/weir/internal/ha"
	"github.com/weirstream/weir/internal/jobs"
)

// isClusterTarget reports whether `weir run` makes this process a job
// manager (execution.target cluster).
func isClusterTarget(cfg *config.Config) bool {
	return strings.EqualFold(cfg.String("execution.target"), "cluster")
}

// jobArgs rebuilds the job flags the user gave c (not the flags common
// to every job), for the task managers.
func jobArgs(c *cobra.Command) []string {
	var args []string
	local := c.LocalNonPersistentFlags()
	c.Flags().Visit(func(f *pflag.Flag) {
		if local.Lookup(f.Name) == nil {
			return
		}
		v := f.Value
		if d, ok := v.(*deferredValue); ok {
			v = d.Value
		}
		if sv, ok := v.(pflag.SliceValue); ok {
			for _, s := range sv.GetSlice() {
				args = append(args, "--"+f.Name+"="+s)
			}
			return
		}
		args = append(args, "--"+f.Name+"="+v.String())
	})
	return args
}

// shippedConfig is the configuration the task managers build the job
// with: the job manager's explicit settings, without the process-level
// ones (roles, addresses, secrets), which every process sets itself.
func shippedConfig(cfg *config.Config) []string {
	var sets []string
	for k, v := range cfg.Explicit() {
		if strings.HasPrefix(k, "security.") || strings.HasPrefix(k, "high-availability.") || strings.HasPrefix(k, "jobmanager.") ||
			strings.HasPrefix(k, "taskmanager.host") || strings.HasPrefix(k, "taskmanager.data.") || strings.HasPrefix(k, "taskmanager.numberOfTaskSlots") ||
			k == "execution.target" || strings.HasPrefix(k, "heartbeat.") || strings.HasPrefix(k, "rest.") {
			continue
		}
		sets = append(sets, k+"="+v)
	}
	slices.Sort(sets)
	return sets
}

// ClusterTokenEnv is the environment variable that holds the cluster
// token when security.cluster.token is not set: unlike a --set flag, it
// is not visible to other users of the machine in the process list.
const ClusterTokenEnv = "WEIR_CLUSTER_TOKEN"

func securityOf(cfg *config.Config) (cluster.Security, error) {
	s := cluster.Security{Token: cfg.String("security.cluster.token")}
	if s.Token == "" {
		s.Token = os.Getenv(ClusterTokenEnv)
	}
	if cfg.Bool("security.ssl.internal.enabled") {
		s.CertFile, s.KeyFile, s.CAFile = cfg.String("security.ssl.internal.cert-file"), cfg.String("security.ssl.internal.key-file"), cfg.String("security.ssl.internal.ca-file")
		if s.CertFile == "" || s.KeyFile == "" || s.CAFile == "" {
			return s, errors.New("security.ssl.internal.enabled: set security.ssl.internal.cert-file, security.ssl.internal.key-file and security.ssl.internal.ca-file")
		}
	}
	return s, nil
}

func rpcAddress(cfg *config.Config) string {
	return net.JoinHostPort(cfg.String("jobmanager.rpc.address"), strconv.FormatInt(cfg.Int("jobmanager.rpc.port"), 10))
}

// haConfig returns the etcd configuration, or nil without high
// availability.
func haConfig(cfg *config.Config, logger *slog.Logger) (*ha.Config, error) {
	if !strings.EqualFold(cfg.String("high-availability.type"), "etcd") {
		return nil, nil
	}
	var eps []string
	for _, e := range strings.Split(cfg.String("high-availability.etcd.endpoints"), ",") {
		if e = strings.TrimSpace(e); e != "" {
			eps = append(eps, e)
		}
	}
	if len(eps) == 0 {
		return nil, errors.New("high-availability.type etcd: set high-availability.etcd.endpoints (http://host:2379,...)")
	}
	hc := &ha.Config{Endpoints: eps, ClusterID: cfg.String("high-availability.cluster-id"), Logger: logger,
		SessionTTL: cfg.Duration("high-availability.etcd.session-ttl")}
	hc.EnsureDefaults()
	if err := hc.Validate(); err != nil {
		return nil, err
	}
	return hc, nil
}

// runJobManager runs job as a cluster's job manager: the RPC server for
// task managers, the job's runner deploying to them, and, with high
// availability, the leadership that decides which job manager runs it.
func (a *app) runJobManager(ctx context.Context, logger *slog.Logger, c *cobra.Command, job jobs.Job, cfg *config.Config, opts weir.Options, name string, local *localCluster) error {
	sec, err := securityOf(cfg)
	if err != nil {
		return usageError(err)
	}
	hc, err := haConfig(cfg, logger)
	if err != nil {
		return usageError(err)
	}
	spec := cluster.JobSpec{Job: job.Name(), Args: jobArgs(c), Config: shippedConfig(cfg)}
	addr := rpcAddress(cfg)
	if local != nil && !cfg.IsSet("jobmanager.rpc.address") && !cfg.IsSet("jobmanager.rpc.port") {
		addr = "127.0.0.1:0" // a free port: several local clusters may run at once
	}
	jm, err := cluster.NewJobManager(cluster.JobManagerConfig{Address: addr, Spec: spec, Security: sec,
		MinSlots: int(cfg.Int("jobmanager.scheduler.min-slots")), SlotTimeout: cfg.Duration("slot.request.timeout"),
		HeartbeatInterval: cfg.Duration("heartbeat.interval"), HeartbeatTimeout: cfg.Duration("heartbeat.timeout"), Logger: logger})
	if err != nil {
		return refused(err)
	}
	defer jm.Close()
	if local != nil {
		stop, err := local.start(ctx, a, jm.Addr(), sec, opts.Parallelism, logger)
		if err != nil {
			return failure(err)
		}
		defer stop()
	}
	execute1 := func(ctx context.Context, o weir.Options) error {
		env := weir.NewEnvironment(o)
		if err := job.Build(env, a.stdout); err != nil {
			return usageError(fmt.Errorf("job %s: %w", job.Name(), err))
		}
		return env.Execute(cluster.WithDeployer(ctx, jm), name)
	}
	logger.Info("running job on the cluster", "job", name, "jobmanager", jm.Addr(), "parallelism", opts.Parallelism)
	if hc == nil {
		return execute(ctx, logger, name, func(ctx context.Context) error { return execute1(ctx, opts) })
	}
	store, err := ha.Open(ctx, *hc)
	if err != nil {
		return refused(err)
	}
	defer store.Close()
	specJSON, _ := json.Marshal(spec)
	jobDir, err := storage.SanitizeJob(name)
	if err != nil {
		return usageError(err)
	}
	chkDir := opts.Checkpoint.Dir
	return execute(ctx, logger, name, func(ctx context.Context) error {
		return cluster.Lead(ctx, cluster.HAJob{Store: store, JobID: jobDir, Address: jm.Addr(), Spec: specJSON, Logger: logger},
			func(ctx context.Context, resume *cluster.Resume, completed func(int64, string)) error {
				o := opts
				// The leadership fences the job: a new leader takes the
				// job's checkpoint directory over from the crashed one.
				o.JobLock.Force = true
				if r := strings.ToUpper(o.Checkpoint.Retention); r != "" && r != "RETAIN_ON_CANCELLATION" {
					// A leader that stops (a signal, a lost leadership) hands
					// the job over: the standby needs its checkpoints.
					logger.Warn("with high availability the checkpoints are retained when a job manager stops, whatever execution.checkpointing.externalized-checkpoint-retention says: the next leader resumes from them")
					o.Checkpoint.Retention = "RETAIN_ON_CANCELLATION"
				}
				if resume != nil {
					// The newest complete checkpoint, which is the one
					// recorded or a newer one whose record the last
					// leader did not write before it died (its sinks may
					// have committed it: restoring the older one would
					// replay what they committed).
					latest, err := latestCheckpointID(ctx, chkDir, jobDir, logger)
					if err != nil {
						return err
					}
					if latest < resume.ID {
						return fmt.Errorf("the last leader recorded checkpoint %d (%s) in etcd, but the newest complete checkpoint in %s is %d: the checkpoint storage lost data; restore a savepoint or checkpoint with --from",
							resume.ID, resume.Path, chkDir, latest)
					}
					if latest > resume.ID {
						logger.Info("a checkpoint newer than the recorded one completed before the last leader died; resuming from it", "recorded", resume.ID, "latest", latest)
					}
					if latest > 0 {
						o.Checkpoint.RestorePath = weir.RestoreLatest
					}
				}
				prev := o.OnCheckpointComplete
				o.OnCheckpointComplete = func(cc weir.CompletedCheckpoint) {
					completed(cc.ID, joinPath(chkDir, jobDir, fmt.Sprintf("chk-%d", cc.ID)))
					if prev != nil {
						prev(cc)
					}
				}
				return execute1(ctx, o)
			})
	})
}

// joinPath joins a checkpoint directory (a path or URL) with elements.
func joinPath(dir string, elems ...string) string {
	if strings.Contains(dir, "://") {
		return strings.TrimRight(dir, "/") + "/" + strings.Join(elems, "/")
	}
	return filepath.Join(append([]string{dir}, elems...)...)
}

// latestCheckpointID returns the id of the newest complete checkpoint of
// job in dir (0: none).
func latestCheckpointID(ctx context.Context, dir, job string, logger *slog.Logger) (int64, error) {
	st, err := storage.Open(ctx, dir)
	if err != nil {
		return 0, err
	}
	defer st.Close()
	cp, err := st.Latest(ctx, job, logger)
	var none *storage.NoCheckpointError
	if errors.As(err, &none) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("find the latest checkpoint of %s in %s: %w", job, dir, err)
	}
	return cp.ID, nil
}

// taskManagerCommand is `weir taskmanager`.
func (a *app) taskManagerCommand() *cobra.Command {
	var sets []string
	var configPath string
	c := &cobra.Command{
		Use:   "taskmanager [--set key=value ...]",
		Short: "Run a task manager of a cluster",
		Long: `Run a task manager: it registers its slots with the job manager
(jobmanager.rpc.address, jobmanager.rpc.port, or the leader found in etcd with
high-availability.type etcd), runs the subtasks the job manager deploys to it,
and exchanges data with the other task managers over TCP (taskmanager.host,
taskmanager.data.port). The job's code is this binary's: every process of a
cluster must run the same binary. A lost job manager cancels the running
subtasks; the task manager then registers again. Ctrl-C stops it.`,
		Example: `  ` + ClusterTokenEnv + `=$(cat cluster-token) weir taskmanager --set jobmanager.rpc.address=10.0.0.5 \
      --set taskmanager.numberOfTaskSlots=4 --set taskmanager.host=10.0.0.6`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			logger, err := newLogger(a.stderr, a.logFormat, a.logLevel, slog.LevelDebug)
			if err != nil {
				return usageError(err)
			}
			cfg, err := config.LoadFile(configPath, sets)
			if err != nil {
				return usageError(err)
			}
			return a.runTaskManager(c.Context(), cfg, logger)
		},
	}
	c.Flags().StringArrayVar(&sets, "set", nil, "set the configuration `key=value`; repeatable")
	c.Flags().StringVar(&configPath, "config", "", "YAML configuration `file`")
	return c
}

func (a *app) runTaskManager(ctx context.Context, cfg *config.Config, logger *slog.Logger) error {
	sec, err := securityOf(cfg)
	if err != nil {
		return usageError(err)
	}
	hc, err := haConfig(cfg, logger)
	if err != nil {
		return usageError(err)
	}
	tc := cluster.TaskManagerConfig{JobManager: rpcAddress(cfg), Slots: int(cfg.Int("taskmanager.numberOfTaskSlots")),
		DataAddress: net.JoinHostPort(cfg.String("taskmanager.host"), strconv.FormatInt(cfg.Int("taskmanager.data.port"), 10)),
		Security:    sec, HeartbeatInterval: cfg.Duration("heartbeat.interval"), HeartbeatTimeout: cfg.Duration("heartbeat.timeout"),
		Logger: logger, Build: a.registry.ClusterBuilder(logger), Config: shippedConfig(cfg)}
	if hc != nil {
		store, err := ha.Open(ctx, *hc)
		if err != nil {
			return refused(err)
		}
		defer store.Close()
		tc.Leader = func(ctx context.Context) (string, error) {
			for {
				addr, err := store.Leader(ctx)
				if err == nil && addr != "" {
					return addr, nil
				}
				if !errors.Is(err, ha.ErrNoLeader) && err != nil {
					return "", err
				}
				select {
				case <-ctx.Done():
					return "", ctx.Err()
				case <-time.After(200 * time.Millisecond):
				}
			}
		}
	}
	tm, err := cluster.NewTaskManager(ctx, tc)
	if err != nil {
		return refused(err)
	}
	if err := tm.Run(ctx); err != nil {
		if errors.Is(err, cluster.ErrRefused) {
			return refused(err)
		}
		return failure(err)
	}
	return nil
}
