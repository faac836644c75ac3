package cluster_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/cluster"
	"github.com/weirstream/weir/internal/jobs"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// testCluster is a job manager and task managers in this process, their
// data exchanged through a Hub.
type testCluster struct {
	t     *testing.T
	jm    *cluster.JobManager
	hub   *cluster.Hub
	spec  cluster.JobSpec
	reg   *jobs.Registry
	tcp   bool // the TCP data plane, not the hub
	stops []context.CancelFunc
	ended []chan error
}

func newTestCluster(t *testing.T, spec cluster.JobSpec, sec cluster.Security) *testCluster {
	t.Helper()
	jm, err := cluster.NewJobManager(cluster.JobManagerConfig{Address: "127.0.0.1:0", Spec: spec, Security: sec,
		HeartbeatInterval: 50 * time.Millisecond, HeartbeatTimeout: 2 * time.Second, SlotTimeout: 20 * time.Second, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	c := &testCluster{t: t, jm: jm, hub: cluster.NewHub(), spec: spec, reg: jobs.Builtin()}
	t.Cleanup(func() {
		for _, s := range c.stops {
			s()
		}
		for _, e := range c.ended {
			<-e
		}
		jm.Close()
	})
	return c
}

// startTM starts a task manager with slots slots; stop kills it.
func (c *testCluster) startTM(slots int, mod func(*cluster.TaskManagerConfig)) (stop func(), ended <-chan error) {
	stop, ended, _ = c.startTaskManager(slots, mod)
	return stop, ended
}

func (c *testCluster) startTaskManager(slots int, mod func(*cluster.TaskManagerConfig)) (stop func(), ended <-chan error, tm *cluster.TaskManager) {
	c.t.Helper()
	cfg := cluster.TaskManagerConfig{JobManager: c.jm.Addr(), Slots: slots, DataAddress: "127.0.0.1:0",
		HeartbeatInterval: 50 * time.Millisecond, HeartbeatTimeout: 2 * time.Second, RetryInterval: 50 * time.Millisecond,
		Logger: quiet(), Build: c.reg.ClusterBuilder(quiet())}
	if !c.tcp {
		cfg.NewDataPlane = c.hub.DataPlane
	}
	if mod != nil {
		mod(&cfg)
	}
	ctx, cancel := context.WithCancel(context.Background())
	tm, err := cluster.NewTaskManager(ctx, cfg)
	if err != nil {
		cancel()
		c.t.Fatal(err)
	}
	done, finished := make(chan error, 1), make(chan error)
	go func() {
		done <- tm.Run(ctx)
		close(finished)
	}()
	c.stops = append(c.stops, cancel)
	c.ended = append(c.ended, finished)
	return cancel, done, tm
}

// runJob runs the spec's job with the job manager deploying it.
func (c *testCluster) runJob(ctx context.Context) error {
	env, _, err := c.reg.Prepare(c.spec.Job, c.spec.Args, c.spec.Config, quiet(), io.Discard)
	if err != nil {
		return err
	}
	return env.Execute(cluster.WithDeployer(ctx, c.jm), c.spec.Job)
}

func committed(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") || e.IsDir() {
			continue
		}
		f, err := os.Open(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			lines = append(lines, sc.Text())
		}
		f.Close()
	}
	return lines
}

func counterSpec(dir string, records, p int, extra ...string) cluster.JobSpec {
	return cluster.JobSpec{Job: "counter",
		Args: []string{"--records", itoa(records), "--keys", "97", "--rate", "40000", "--output", filepath.Join(dir, "out")},
		Config: append([]string{"parallelism.default=" + itoa(p), "execution.checkpointing.interval=20ms",
			"execution.checkpointing.dir=" + filepath.Join(dir, "chk"), "state.backend.local-dir=" + filepath.Join(dir, "state"),
			"restart-strategy.type=fixed-delay", "restart-strategy.fixed-delay.attempts=10", "restart-strategy.fixed-delay.delay=50ms",
			// Another package's tests may want the default REST port.
			"rest.port=0"}, extra...)}
}

func itoa(n int) string { return strconv.Itoa(n) }

// The counter job at parallelism 6 over three task managers of two slots:
// every subtask runs in a task manager, the output is exactly once.
func TestClusterRunsCounterExactlyOnce(t *testing.T) {
	forTransports(t, testRunsCounter)
}

// forTransports runs test over the in-process hub and over TCP.
func forTransports(t *testing.T, test func(*testing.T, bool)) {
	for _, tcp := range []bool{false, true} {
		name := "hub"
		if tcp {
			name = "tcp"
		}
		t.Run(name, func(t *testing.T) { test(t, tcp) })
	}
}

func testRunsCounter(t *testing.T, tcp bool) {
	dir := t.TempDir()
	c := newTestCluster(t, counterSpec(dir, 30_000, 6), cluster.Security{})
	c.tcp = tcp
	for range 3 {
		c.startTM(2, nil)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := c.runJob(ctx); err != nil {
		t.Fatal(err)
	}
	if err := jobs.VerifyCounterOutput(committed(t, filepath.Join(dir, "out")), 30_000, 97); err != nil {
		t.Fatal(err)
	}
}

// A task manager lost mid-run fails the attempt; the job restarts from the
// latest checkpoint on the remaining task manager and a new one, and the
// output is still exactly once.
func TestClusterSurvivesLostTaskManager(t *testing.T) {
	forTransports(t, testSurvivesLostTaskManager)
}

func testSurvivesLostTaskManager(t *testing.T, tcp bool) {
	dir := t.TempDir()
	c := newTestCluster(t, counterSpec(dir, 60_000, 4), cluster.Security{})
	c.tcp = tcp
	c.startTM(2, nil)
	kill, _ := c.startTM(2, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- c.runJob(ctx) }()
	// Kill once a checkpoint completed, then start a replacement.
	waitFor(t, 30*time.Second, "a completed checkpoint", func() bool {
		m, _ := filepath.Glob(filepath.Join(dir, "chk", "counter", "chk-*", "_metadata"))
		return len(m) > 0
	})
	kill()
	c.startTM(2, nil)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := c.jm.Attempts(); n < 2 {
		t.Fatalf("%d attempts deployed: the lost task manager did not fail the attempt", n)
	}
	if err := jobs.VerifyCounterOutput(committed(t, filepath.Join(dir, "out")), 60_000, 97); err != nil {
		t.Fatal(err)
	}
}

// A task manager with another cluster token or another binary is refused
// at registration, with the reason; a task manager refuses a job manager
// that cannot prove it holds the token.
func TestClusterRefusesRegistration(t *testing.T) {
	dir := t.TempDir()
	c := newTestCluster(t, counterSpec(dir, 10, 1), cluster.Security{Token: "s3cret"})
	_, ended := c.startTM(1, func(cfg *cluster.TaskManagerConfig) { cfg.Security.Token = "wrong" })
	err := <-ended
	if !errors.Is(err, cluster.ErrRefused) || !strings.Contains(err.Error(), "does not hold this task manager's cluster token") {
		t.Fatalf("wrong token: %v", err)
	}
	// A task manager with a token does not register with a job manager
	// that has none (it may be an impostor).
	open := newTestCluster(t, counterSpec(dir, 10, 1), cluster.Security{})
	_, ended = open.startTM(1, func(cfg *cluster.TaskManagerConfig) { cfg.Security.Token = "s3cret" })
	if err := <-ended; !errors.Is(err, cluster.ErrRefused) || !strings.Contains(err.Error(), "security.cluster.token") {
		t.Fatalf("job manager without a token: %v", err)
	}
	_, ended = c.startTM(1, func(cfg *cluster.TaskManagerConfig) { cfg.Security.Token = "s3cret"; cfg.Binary = "0123456789abcdef" })
	err = <-ended
	if !errors.Is(err, cluster.ErrRefused) || !strings.Contains(err.Error(), "another binary") {
		t.Fatalf("other binary: %v", err)
	}
	if n, _ := c.jm.TaskManagers(); n != 0 {
		t.Fatalf("%d task managers registered, want none", n)
	}
}

// waitFor fails the test unless cond holds within d; detail, if given,
// says what was seen last.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool, detail ...func() string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			if len(detail) > 0 {
				t.Fatalf("%s did not happen within %s (last seen: %s)", what, d, detail[0]())
			}
			t.Fatalf("%s did not happen within %s", what, d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Local recovery across task managers: every task manager keeps a local
// copy of its subtasks' pebble state (its own directory); after a task
// failure the attempt restarts on the same task managers, which restore
// the keyed state from their copies and read none of it from the store.
func TestClusterLocalRecovery(t *testing.T) {
	dir := t.TempDir()
	spec := counterSpec(dir, 60_000, 4, "state.backend.type=pebble", "execution.checkpointing.incremental=true",
		"execution.checkpointing.local-backup.enabled=true", "execution.state-recovery.from-local=true")
	c := newTestCluster(t, spec, cluster.Security{})
	c.tcp = true
	var tms []*cluster.TaskManager
	for i := range 2 {
		own := filepath.Join(dir, "tm"+strconv.Itoa(i))
		_, _, tm := c.startTaskManager(2, func(cfg *cluster.TaskManagerConfig) {
			cfg.Config = []string{"state.backend.local-dir=" + own}
		})
		tms = append(tms, tm)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- c.runJob(ctx) }()
	copies := func(i int) []string {
		m, _ := filepath.Glob(filepath.Join(dir, "tm"+strconv.Itoa(i), "local-recovery", "*", "chk-*"))
		return m
	}
	waitFor(t, 30*time.Second, "two completed checkpoints with local copies in both task managers", func() bool {
		return checkpointsAtLeast(dir, 2) && len(copies(0)) > 0 && len(copies(1)) > 0
	})
	if n := c.jm.Attempts(); n != 1 {
		t.Fatalf("%d attempts before the injected failure", n)
	}
	tms[0].FailRunning(errors.New("injected task failure"))
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	rs := c.jm.Restores()
	if len(rs) < 2 {
		t.Fatalf("%d attempts ended, want the failed one and the restarted one", len(rs))
	}
	if r := rs[1]; r.Local == 0 || r.Store != 0 {
		t.Fatalf("the restarted attempt read %d bytes of keyed state from the store and %d from local copies; want all from local copies", r.Store, r.Local)
	}
	for i := range 2 {
		if m := copies(i); len(m) > 0 {
			t.Errorf("task manager %d kept local copies after the job finished: %v", i, m)
		}
	}
	if err := jobs.VerifyCounterOutput(committed(t, filepath.Join(dir, "out")), 60_000, 97); err != nil {
		t.Fatal(err)
	}
}

// checkpointsAtLeast reports whether checkpoint n or a later one completed.
func checkpointsAtLeast(dir string, n int) bool {
	m, _ := filepath.Glob(filepath.Join(dir, "chk", "counter", "chk-*", "_metadata"))
	for _, p := range m {
		id, _ := strconv.Atoi(strings.TrimPrefix(filepath.Base(filepath.Dir(p)), "chk-"))
		if id >= n {
			return true
		}
	}
	return false
}

// Unaligned checkpoints across task managers: every
// task manager writes its own channel-state files into the shared
// checkpoint directory, and a task failure restores the in-flight data
// they hold: the output is exactly once.
func TestClusterUnalignedRestore(t *testing.T) {
	dir := t.TempDir()
	spec := counterSpec(dir, 100_000, 4, "execution.checkpointing.unaligned.enabled=true")
	spec.Args = append(spec.Args, "--rate", "20000")
	c := newTestCluster(t, spec, cluster.Security{})
	c.tcp = true
	var tms []*cluster.TaskManager
	for range 2 {
		_, _, tm := c.startTaskManager(2, nil)
		tms = append(tms, tm)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- c.runJob(ctx) }()
	// Fail a task once checkpoints completed; log whose in-flight data
	// they persisted (each task manager names its channel-state files
	// after its first subtask). The source is rate-limited rather than
	// the sink slowed: behind a slowed sink the whole input fits in the
	// network buffers, the sources end at once, and every checkpoint
	// after that is aligned (the final one must follow the last records),
	// on either transport. (The root package's TestUnalignedStrictOrder
	// runs backpressured unaligned checkpoints over TCP.)
	names := map[string]bool{}
	waitFor(t, 60*time.Second, "a completed unaligned checkpoint", func() bool {
		select {
		case err := <-done:
			t.Fatalf("the job ended (%v) before a checkpoint completed", err)
		default:
		}
		cs, _ := filepath.Glob(filepath.Join(dir, "chk", "counter", "chk-*", "channel-state-*"))
		for _, f := range cs {
			if _, err := os.Stat(filepath.Join(filepath.Dir(f), "_metadata")); err == nil {
				names[filepath.Base(f)] = true
			}
		}
		return checkpointsAtLeast(dir, 3)
	})
	t.Logf("channel-state files seen in completed checkpoints: %v", names)
	tms[1].FailRunning(errors.New("injected task failure"))
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := c.jm.Attempts(); n < 2 {
		t.Fatalf("%d attempts: the failure did not restart the job", n)
	}
	if err := jobs.VerifyCounterOutput(committed(t, filepath.Join(dir, "out")), 100_000, 97); err != nil {
		t.Fatal(err)
	}
}

// Canceling the job manager's run ends it promptly, checkpoint or not.
func TestClusterCancelEndsRun(t *testing.T) {
	dir := t.TempDir()
	spec := counterSpec(dir, 100_000_000, 2, "execution.checkpointing.interval=1h")
	c := newTestCluster(t, spec, cluster.Security{})
	c.startTM(2, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.runJob(ctx) }()
	waitFor(t, 20*time.Second, "the deployment", func() bool { return c.jm.Attempts() == 1 })
	cancel()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a canceled run returned nil")
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the run did not end within 15s of its cancellation")
	}
}

// A task manager that announces an address others cannot dial, or the
// data address of a registered one, is refused with the reason.
func TestClusterRefusesBadDataAddress(t *testing.T) {
	dir := t.TempDir()
	c := newTestCluster(t, counterSpec(dir, 10, 1), cluster.Security{Token: "t"})
	c.tcp = true
	_, ended := c.startTM(1, func(cfg *cluster.TaskManagerConfig) { cfg.DataAddress = "0.0.0.0:0"; cfg.Security.Token = "t" })
	if err := <-ended; !errors.Is(err, cluster.ErrRefused) || !strings.Contains(err.Error(), "taskmanager.host") {
		t.Fatalf("unspecified address: %v", err)
	}
	// Two task managers with the same data address: the second is kept
	// out (it retries, as a restarted task manager whose predecessor the
	// job manager has not noticed gone yet would) while the first lives.
	hub := cluster.NewHub()
	same := func(cfg *cluster.TaskManagerConfig) {
		cfg.Security.Token = "t"
		cfg.NewDataPlane = func(ctx context.Context, tc cluster.TaskManagerConfig, lost func(string, error)) (cluster.DataPlane, error) {
			dp, err := hub.DataPlane(ctx, tc, lost)
			return fixedAddr{dp}, err
		}
	}
	_, _, first := c.startTaskManager(1, same)
	waitFor(t, 10*time.Second, "the first registration", func() bool { return first.Registrations() == 1 })
	_, _, second := c.startTaskManager(1, same)
	// The refusal is logged on the job manager; wait until the second
	// task manager tried at least twice, then check it never registered.
	waitFor(t, 10*time.Second, "the second task manager's attempts", func() bool { return second.Attempts() >= 2 })
	if n, _ := c.jm.TaskManagers(); n != 1 || second.Registrations() != 0 {
		t.Fatalf("%d task managers registered (the second %d times), want only the first", n, second.Registrations())
	}
}

type fixedAddr struct{ cluster.DataPlane }

func (fixedAddr) Addr() string { return "10.0.0.1:6121" }

// Task managers outlive a job manager: a second job manager (a failover,
// as a new leader) deploys to the same task managers, whose data planes
// closed the first one's attempts, and resumes from the latest checkpoint:
// exactly once.
func TestClusterSecondJobManagerReusesTaskManagers(t *testing.T) {
	dir := t.TempDir()
	spec := counterSpec(dir, 60_000, 2)
	c := newTestCluster(t, spec, cluster.Security{})
	c.tcp = true
	var leader atomic.Value
	leader.Store(c.jm.Addr())
	for range 2 {
		c.startTM(1, func(cfg *cluster.TaskManagerConfig) {
			cfg.JobManager = ""
			cfg.Leader = func(context.Context) (string, error) { return leader.Load().(string), nil }
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.runJob(ctx) }()
	waitFor(t, 30*time.Second, "a completed checkpoint", func() bool { return checkpointsAtLeast(dir, 1) })
	cancel()
	<-done
	c.jm.Close()
	jm2, err := cluster.NewJobManager(cluster.JobManagerConfig{Address: "127.0.0.1:0", Spec: spec,
		HeartbeatInterval: 50 * time.Millisecond, HeartbeatTimeout: 2 * time.Second, SlotTimeout: 20 * time.Second, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer jm2.Close()
	leader.Store(jm2.Addr())
	c.jm = jm2
	c.spec.Config = append(c.spec.Config, "execution.state-recovery.path=latest")
	ctx2, cancel2 := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel2()
	if err := c.runJob(ctx2); err != nil {
		t.Fatal(err)
	}
	if n := jm2.Attempts(); n != 1 {
		t.Fatalf("the second job manager deployed %d attempts, want 1 (the task managers refused its attempt ids?)", n)
	}
	if err := jobs.VerifyCounterOutput(committed(t, filepath.Join(dir, "out")), 60_000, 97); err != nil {
		t.Fatal(err)
	}
}
