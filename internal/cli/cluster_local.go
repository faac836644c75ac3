package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/weirstream/weir/internal/cluster"
)

// localCluster is `weir cluster local`: task manager processes of this
// binary on this machine, kept running (a task manager that dies is
// replaced, as a Kubernetes Deployment would), for development and tests.
type localCluster struct {
	taskManagers, slots int
}

// clusterCommand is `weir cluster`.
func (a *app) clusterCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "cluster",
		Short: "Run a job across processes (job manager and task managers)",
		Long: `Cluster mode runs a job as one job manager and task managers, each a process
of this binary. In production, start 'weir run <job> --set execution.target=cluster'
(the job manager) and 'weir taskmanager' processes on the machines (see
docs/cluster.md); 'weir cluster local' starts them all on this machine.`,
		Args: noArgs,
		RunE: a.groupRunE("command"),
	}
	local := &localCluster{}
	lc := a.runCommandFor(local)
	lc.Use = "local <job> [flags]"
	lc.Short = "Run a job on a job manager and task manager processes on this machine"
	lc.Long = `Run a job on a local cluster: this process is the job manager (REST, checkpoint
coordination; only it deletes checkpoint files) and it starts --taskmanagers
task manager processes of this binary with --slots slots each, on 127.0.0.1.
The subtasks run in the task managers, which exchange records over TCP. A task
manager that exits while the job runs is replaced by a new one (the job
restarts from its latest checkpoint on the task managers it has). For
development and tests: production clusters start the processes themselves.

Every flag of 'weir run' applies (the job's flags, --set, --from, ...).`
	lc.Example = `  weir cluster local counter --taskmanagers 3 --slots 2 -p 6 --output out --set execution.checkpointing.interval=1s`
	lc.PersistentFlags().IntVar(&local.taskManagers, "taskmanagers", 2, "number of task manager processes")
	lc.PersistentFlags().IntVar(&local.slots, "slots", 0, "slots of each task manager (default: enough for the job's parallelism)")
	c.AddCommand(lc)
	return c
}

// start starts the task manager processes and a supervisor that replaces
// those that exit; stop ends them.
func (l *localCluster) start(ctx context.Context, a *app, jmAddr string, sec cluster.Security, parallelism int, logger *slog.Logger) (stop func(), err error) {
	if l.taskManagers < 1 {
		return nil, fmt.Errorf("--taskmanagers %d: must be at least 1", l.taskManagers)
	}
	slots := l.slots
	if slots <= 0 {
		slots = (max(parallelism, 1) + l.taskManagers - 1) / l.taskManagers
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("cluster local: find this binary: %w", err)
	}
	host, port, _ := net.SplitHostPort(jmAddr)
	args := []string{"taskmanager", "--log-format", a.logFormat, "--log-level", a.logLevel,
		"--set", "jobmanager.rpc.address=" + host, "--set", "jobmanager.rpc.port=" + port,
		"--set", "taskmanager.numberOfTaskSlots=" + strconv.Itoa(slots), "--set", "taskmanager.host=127.0.0.1"}
	if sec.TLSEnabled() {
		args = append(args, "--set", "security.ssl.internal.enabled=true", "--set", "security.ssl.internal.cert-file="+sec.CertFile,
			"--set", "security.ssl.internal.key-file="+sec.KeyFile, "--set", "security.ssl.internal.ca-file="+sec.CAFile)
	}
	sctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i := range l.taskManagers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; sctx.Err() == nil; n++ {
				cmd := exec.Command(exe, args...)
				// The token goes in the environment, not in the
				// arguments every user of the machine can list.
				cmd.Env = append(os.Environ(), ClusterTokenEnv+"="+sec.Token)
				cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
				cmd.Stdout = a.stdout
				pr, pw := io.Pipe()
				cmd.Stderr = pw
				go prefixLines(a.stderr, pr, fmt.Sprintf("[taskmanager %d] ", i+1))
				if err := cmd.Start(); err != nil {
					pw.Close()
					logger.Error("could not start a task manager", "err", err)
					return
				}
				logger.Info("started task manager", "index", i+1, "pid", cmd.Process.Pid, "slots", slots)
				exited := make(chan error, 1)
				go func() { exited <- cmd.Wait() }()
				select {
				case err := <-exited:
					pw.Close()
					if sctx.Err() != nil {
						return
					}
					logger.Warn("task manager exited; starting a replacement", "index", i+1, "pid", cmd.Process.Pid, "status", fmt.Sprint(err))
					select {
					case <-sctx.Done():
						return
					case <-time.After(200 * time.Millisecond):
					}
				case <-sctx.Done():
					_ = cmd.Process.Signal(syscall.SIGTERM)
					select {
					case <-exited:
					case <-time.After(5 * time.Second):
						_ = cmd.Process.Kill()
						<-exited
					}
					pw.Close()
					return
				}
			}
		}()
	}
	return func() {
		cancel()
		wg.Wait()
	}, nil
}

// prefixLines copies r to w line by line, each line prefixed.
func prefixLines(w io.Writer, r io.Reader, prefix string) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fmt.Fprintf(w, "%s%s\n", prefix, sc.Text())
	}
	_, _ = io.Copy(io.Discard, r)
}
