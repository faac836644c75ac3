package cli

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/rest"
	"github.com/weirstream/weir/internal/runner"
)

// TokenEnv is the environment variable the control commands read the REST
// server's bearer token from when --token is not given.
const TokenEnv = "WEIR_REST_TOKEN"

// Timeouts of the control commands' requests: listRequestTimeout bounds
// each server's answer to `weir list` (a stale one must not hold up the
// listing), requestTimeout every other request.
const (
	listRequestTimeout = 3 * time.Second
	requestTimeout     = 30 * time.Second
)

// checkpointPollInterval is how often `weir checkpoint --wait` asks
// whether the checkpoint completed.
const checkpointPollInterval = 100 * time.Millisecond

// shownCheckpoints is how many of the latest checkpoints `weir status`
// shows.
const shownCheckpoints = 5

// controlFlags are the flags of the commands that talk to running jobs
// through their REST servers.
type controlFlags struct {
	url, token, dir, caCert string
}

// defaultCheckpointDir is execution.checkpointing.dir's default.
func defaultCheckpointDir() string {
	if o, ok := config.Lookup("execution.checkpointing.dir"); ok {
		return o.Default
	}
	return "weir-data/checkpoints"
}

func (a *app) addControlFlags(c *cobra.Command, cf *controlFlags) {
	f := c.Flags()
	f.StringVar(&cf.url, "url", "", "base `URL` of the job's REST server, such as http://127.0.0.1:8081 "+
		"(default: found through the discovery files under --dir)")
	f.StringVar(&cf.token, "token", "", "bearer `token` of the REST server (rest.auth.token; default $"+TokenEnv+")")
	f.StringVar(&cf.dir, "dir", defaultCheckpointDir(), "checkpoint `directory` (execution.checkpointing.dir) whose "+
		"<job>/_rest files name the running jobs' servers")
	f.StringVar(&cf.caCert, "cacert", "", "PEM `file` of the certificate (authority) to trust for an https server")
	a.deferErrors(f)
}

// controlProblems checks the control flags of c and returns the usage
// problems.
func (a *app) controlProblems(c *cobra.Command, cf *controlFlags) []error {
	problems := a.flagProblemsOf(c.Flags())
	if _, err := newLogger(a.stderr, a.logFormat, a.logLevel, slog.LevelWarn); err != nil {
		problems = append(problems, err)
	}
	if cf.url != "" && !strings.HasPrefix(cf.url, "http://") && !strings.HasPrefix(cf.url, "https://") {
		problems = append(problems, fmt.Errorf("--url %q: must start with http:// or https://", cf.url))
	}
	if cf.dir == "" {
		problems = append(problems, errors.New("--dir: must not be empty"))
	}
	return problems
}

// bearer is the token to send: --token, else $WEIR_REST_TOKEN.
func (cf *controlFlags) bearer() string {
	if cf.token != "" {
		return cf.token
	}
	return os.Getenv(TokenEnv)
}

// bearerFor is the token to send to a server whose URL came from a
// discovery file: only over TLS or to this machine's loopback interface.
// Anyone who can write to the checkpoint directory (a shared bucket) can
// plant a discovery file; the token must not follow it to their host.
// A URL given with --url gets the token whatever it is.
func (cf *controlFlags) bearerFor(discovered string) string {
	u, err := url.Parse(discovered)
	if err != nil {
		return ""
	}
	if u.Scheme == "https" || rest.IsLoopback(u.Hostname()) {
		return cf.bearer()
	}
	return ""
}

// httpClient returns the client of the commands' requests, trusting
// --cacert if given, and a function that releases its connections.
func (cf *controlFlags) httpClient(timeout time.Duration) (*http.Client, func(), error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if cf.caCert != "" {
		pem, err := os.ReadFile(cf.caCert)
		if err != nil {
			return nil, nil, usageError(fmt.Errorf("--cacert: %w", err))
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, nil, usageError(fmt.Errorf("--cacert %s: no PEM certificate in the file", cf.caCert))
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return &http.Client{Transport: tr, Timeout: timeout}, tr.CloseIdleConnections, nil
}

// controlTarget is a job found on a REST server.
type controlTarget struct {
	client *rest.Client
	job    rest.JobOverview
}

// candidate is a job a command's argument may name.
type candidate struct {
	id, name, url string
}

func (c candidate) String() string {
	s := fmt.Sprintf("%s (%s)", c.id, c.name)
	if c.url != "" {
		s += " at " + c.url
	}
	return s
}

// matchJob finds the job arg names among cands: by its id, its name, or a
// prefix of its id that no other job shares. where says where the jobs
// were found, for the messages.
func matchJob(cands []candidate, arg, where string) (candidate, error) {
	list := func(cs []candidate) string {
		var b strings.Builder
		for _, c := range cs {
			b.WriteString("\n  " + c.String())
		}
		return b.String()
	}
	if len(cands) == 0 {
		return candidate{}, usageError(fmt.Errorf("job %q not found: no jobs %s", arg, where))
	}
	for _, c := range cands {
		if c.id == arg {
			return c, nil
		}
	}
	var named, prefixed []candidate
	for _, c := range cands {
		if c.name == arg {
			named = append(named, c)
		}
		if strings.HasPrefix(c.id, arg) {
			prefixed = append(prefixed, c)
		}
	}
	for _, m := range [][]candidate{named, prefixed} {
		switch len(m) {
		case 0:
			continue
		case 1:
			return m[0], nil
		}
		return candidate{}, usageError(fmt.Errorf("job %q is ambiguous: it names several jobs %s; give the job id:%s",
			arg, where, list(m)))
	}
	return candidate{}, usageError(fmt.Errorf("job %q not found: the jobs %s are (give an id, a unique id prefix "+
		"or a name):%s", arg, where, list(cands)))
}

// unreachable describes a server that did not answer.
func unreachable(url string, err error) error {
	switch rest.StatusOf(err) {
	case 0:
		return failure(fmt.Errorf("the REST server at %s does not answer: %w", url, err))
	case http.StatusUnauthorized:
		return usageError(fmt.Errorf("the REST server at %s refused the request: %w; pass its token with --token "+
			"or $%s", url, err, TokenEnv))
	}
	return failure(fmt.Errorf("the REST server at %s: %w", url, err))
}

// findJob finds the job arg names: on the server --url names, or through
// the discovery files under --dir.
func (a *app) findJob(ctx context.Context, cf *controlFlags, hc *http.Client, arg string) (controlTarget, error) {
	if cf.url != "" {
		client := rest.NewClient(cf.url, cf.bearer(), hc)
		jobs, err := client.Jobs(ctx)
		if err != nil {
			return controlTarget{}, unreachable(cf.url, err)
		}
		var cands []candidate
		for _, j := range jobs {
			cands = append(cands, candidate{id: j.JID, name: j.Name})
		}
		c, err := matchJob(cands, arg, "at "+cf.url)
		if err != nil {
			return controlTarget{}, err
		}
		i := slices.IndexFunc(jobs, func(j rest.JobOverview) bool { return j.JID == c.id })
		return controlTarget{client: client, job: jobs[i]}, nil
	}

	found, err := a.discover(ctx, cf)
	if err != nil {
		return controlTarget{}, err
	}
	var cands []candidate
	for _, d := range found {
		cands = append(cands, candidate{id: d.JobID, name: d.JobName, url: d.URL})
	}
	c, err := matchJob(cands, arg, fmt.Sprintf("with a discovery file (<job>/%s) under %s", rest.DiscoveryName, cf.dir))
	if err != nil {
		return controlTarget{}, err
	}
	client := rest.NewClient(c.url, cf.bearerFor(c.url), hc)
	jobs, err := client.Jobs(ctx)
	if err != nil {
		if rest.StatusOf(err) == 0 {
			return controlTarget{}, failure(fmt.Errorf("job %s (%s) was last served at %s, which does not answer: "+
				"the job is probably not running any more (stale discovery file under %s): %w", c.id, c.name, c.url,
				cf.dir, err))
		}
		return controlTarget{}, unreachable(c.url, err)
	}
	i := slices.IndexFunc(jobs, func(j rest.JobOverview) bool { return j.JID == c.id })
	if i < 0 {
		return controlTarget{}, failure(fmt.Errorf("job %s (%s) is not served at %s any more: the discovery file "+
			"under %s is stale (another process now listens there)", c.id, c.name, c.url, cf.dir))
	}
	return controlTarget{client: client, job: jobs[i]}, nil
}

// discover reads the discovery files under --dir. A missing directory is
// a usage error: nothing ran there.
func (a *app) discover(ctx context.Context, cf *controlFlags) ([]rest.Discovery, error) {
	found, err := rest.FindDiscovery(ctx, cf.dir)
	// Runs without checkpoints register in the user's runtime directory.
	local, lerr := rest.FindLocalDiscovery()
	if lerr != nil {
		return nil, failure(lerr)
	}
	if errors.Is(err, storage.ErrNotFound) && len(local) > 0 {
		return local, nil
	}
	if err == nil {
		found = append(found, local...)
	}
	if errors.Is(err, storage.ErrNotFound) {
		return nil, usageError(fmt.Errorf("no running jobs found: checkpoint directory %s does not exist; pass "+
			"--dir (the jobs' execution.checkpointing.dir) or --url", cf.dir))
	}
	if err != nil {
		return nil, failure(err)
	}
	return found, nil
}

// oneJobArg checks that args hold exactly one job.
func oneJobArg(c *cobra.Command, args []string) error {
	switch {
	case len(args) == 0:
		return fmt.Errorf("missing argument: '%s' takes a job id, a unique id prefix or a job name (see 'weir list')",
			c.CommandPath())
	case len(args) > 1:
		return fmt.Errorf("unexpected argument %q: '%s' takes one job", args[1], c.CommandPath())
	case args[0] == "":
		return errors.New("the job must not be empty")
	}
	return nil
}

// controlCommand builds a command taking one job: run is called with the
// job found.
func (a *app) controlCommand(c *cobra.Command, cf *controlFlags,
	run func(ctx context.Context, t controlTarget) error) *cobra.Command {
	c.Args = cobra.ArbitraryArgs
	c.RunE = func(c *cobra.Command, args []string) error {
		problems := a.controlProblems(c, cf)
		if err := oneJobArg(c, args); err != nil {
			problems = append(problems, err)
		}
		if len(problems) > 0 {
			return usageError(problems...)
		}
		return a.withJob(c.Context(), cf, args[0], run)
	}
	a.addControlFlags(c, cf)
	return c
}

const findHelp = `The job is given by its id, a prefix of its id that no other job shares, or
its name. With --url the command asks that server; otherwise it looks the job
up in the discovery files that running jobs write to their checkpoint
directory (<dir>/<job>/_rest, --dir defaults to execution.checkpointing.dir's
default). A server with rest.auth.token needs --token or $WEIR_REST_TOKEN;
--cacert trusts a self-signed https server's certificate.`

func (a *app) listCommand() *cobra.Command {
	cf := &controlFlags{}
	c := &cobra.Command{
		Use:   "list [flags]",
		Short: "List the running jobs with their state, duration and REST URL",
		Long: `List the jobs whose REST servers the discovery files under --dir name
(<dir>/<job>/_rest, written by every running job with rest.enabled), or the
jobs of the server --url names: id, name, state, how long they have run and
the server's URL. A job whose server does not answer is listed as
"stale (not responding)": it ended without removing its file (killed), or
its server is unreachable from here.`,
		Example: `  weir list
  weir list --dir s3://bucket/checkpoints
  weir list --url http://127.0.0.1:8081`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if problems := a.controlProblems(c, cf); len(problems) > 0 {
				return usageError(problems...)
			}
			return a.listJobs(c.Context(), cf, c.Flags().Changed("dir"))
		},
	}
	a.addControlFlags(c, cf)
	return c
}

// listedJob is one row of `weir list`.
type listedJob struct {
	id, name, state, duration, url string
}

func (a *app) listJobs(ctx context.Context, cf *controlFlags, dirGiven bool) error {
	hc, release, err := cf.httpClient(listRequestTimeout)
	if err != nil {
		return err
	}
	defer release()
	var rows []listedJob
	if cf.url != "" {
		jobs, err := rest.NewClient(cf.url, cf.bearer(), hc).Jobs(ctx)
		if err != nil {
			return unreachable(cf.url, err)
		}
		for _, j := range jobs {
			rows = append(rows, listedJob{j.JID, j.Name, j.State, formatJobDuration(j.Duration), cf.url})
		}
	} else {
		found, err := rest.FindDiscovery(ctx, cf.dir)
		local, lerr := rest.FindLocalDiscovery()
		if lerr != nil {
			return failure(lerr)
		}
		if errors.Is(err, storage.ErrNotFound) && !dirGiven && len(local) == 0 {
			_, err := fmt.Fprintf(a.stdout, "no jobs found: no checkpoint directory %s here (pass --dir or --url)\n", cf.dir)
			return err
		}
		if errors.Is(err, storage.ErrNotFound) && dirGiven {
			return usageError(fmt.Errorf("--dir: checkpoint directory %s does not exist", cf.dir))
		}
		if err != nil && !errors.Is(err, storage.ErrNotFound) {
			return failure(err)
		}
		rows = a.probe(ctx, cf, hc, append(found, local...))
	}
	if len(rows) == 0 {
		where := "at " + cf.url
		if cf.url == "" {
			where = "under " + cf.dir
		}
		_, err := fmt.Fprintf(a.stdout, "no jobs found %s\n", where)
		return err
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tSTATE\tDURATION\tURL")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.id, r.name, r.state, r.duration, r.url)
	}
	if err := tw.Flush(); err != nil {
		return failure(fmt.Errorf("write result: %w", err))
	}
	return nil
}

// probe asks every discovered job's server, at the same time, how its job
// is doing.
func (a *app) probe(ctx context.Context, cf *controlFlags, hc *http.Client, found []rest.Discovery) []listedJob {
	rows := make([]listedJob, len(found))
	var wg sync.WaitGroup
	for i, d := range found {
		wg.Go(func() {
			row := listedJob{id: d.JobID, name: d.JobName, duration: "-", url: d.URL}
			jobs, err := rest.NewClient(d.URL, cf.bearerFor(d.URL), hc).Jobs(ctx)
			switch {
			case err == nil:
				k := slices.IndexFunc(jobs, func(j rest.JobOverview) bool { return j.JID == d.JobID })
				if k < 0 {
					row.state = "stale (job not served there)"
					break
				}
				row.state, row.duration = jobs[k].State, formatJobDuration(jobs[k].Duration)
			case rest.StatusOf(err) == http.StatusUnauthorized:
				row.state = "unauthorized (pass --token or $" + TokenEnv + ")"
			case rest.StatusOf(err) != 0:
				row.state = fmt.Sprintf("error (%d)", rest.StatusOf(err))
			default:
				row.state = "stale (not responding)"
			}
			rows[i] = row
		})
	}
	wg.Wait()
	return rows
}

// formatJobDuration formats milliseconds to the second.
func formatJobDuration(ms int64) string {
	if ms < 0 {
		return "-"
	}
	return (time.Duration(ms) * time.Millisecond).Round(time.Second).String()
}

// formatMillis formats milliseconds exactly.
func formatMillis(ms int64) string {
	if ms < 0 {
		return "-"
	}
	return (time.Duration(ms) * time.Millisecond).String()
}

// formatTime formats Unix milliseconds in UTC.
func formatTime(ms int64) string {
	if ms <= 0 {
		return "-"
	}
	return time.UnixMilli(ms).UTC().Format(time.RFC3339)
}

func (a *app) cancelCommand() *cobra.Command {
	cf := &controlFlags{}
	return a.controlCommand(&cobra.Command{
		Use:   "cancel <job> [flags]",
		Short: "Cancel a running job",
		Long: `Cancel a running job through its REST server (Flink's PATCH
/jobs/<id>?mode=cancel): its checkpoints in flight are aborted, completed
ones are kept as execution.checkpointing.externalized-checkpoint-retention
says. The command returns once the job has started cancelling.

` + findHelp + `

Exit codes: 0 the job is cancelling; 1 it could not be cancelled (it had
already ended) or its server does not answer; 2 usage problems, an unknown
job or a refused token.`,
		Example: `  weir cancel orders
  weir cancel 0a1b2c3d --url http://127.0.0.1:8081`,
	}, cf, func(ctx context.Context, t controlTarget) error {
		if err := t.client.CancelJob(ctx, t.job.JID); err != nil {
			if rest.StatusOf(err) == http.StatusConflict {
				var ae *rest.APIError
				errors.As(err, &ae)
				return failure(fmt.Errorf("job %s (%s) was not cancelled: %s", t.job.JID, t.job.Name, ae.Message()))
			}
			return unreachable(t.client.URL(), err)
		}
		_, err := fmt.Fprintf(a.stdout, "cancelling job %s (%s)\n", t.job.JID, t.job.Name)
		return err
	})
}

func (a *app) checkpointCommand() *cobra.Command {
	cf := &controlFlags{}
	var wait bool
	c := a.controlCommand(&cobra.Command{
		Use:   "checkpoint <job> [flags]",
		Short: "Trigger a checkpoint of a running job",
		Long: `Trigger a checkpoint of a running job through its REST server (Flink's POST
/jobs/<id>/checkpoints) and print the request id. With --wait the command
waits until the checkpoint completed and prints its id, duration and sizes,
or fails with the reason the checkpoint failed.

` + findHelp + `

Exit codes: 0 triggered (with --wait: completed); 1 the checkpoint failed or
could not be triggered (the job ended), or the server does not answer; 2
usage problems, an unknown job or a refused token.`,
		Example: `  weir checkpoint orders
  weir checkpoint orders --wait`,
	}, cf, func(ctx context.Context, t controlTarget) error {
		id, err := t.client.TriggerCheckpoint(ctx, t.job.JID)
		if err != nil {
			var ae *rest.APIError
			if errors.As(err, &ae) && ae.Status == http.StatusConflict {
				return failure(fmt.Errorf("no checkpoint of job %s (%s): %s", t.job.JID, t.job.Name, ae.Message()))
			}
			return unreachable(t.client.URL(), err)
		}
		if _, err := fmt.Fprintf(a.stdout, "triggered a checkpoint of job %s (%s): request-id %s\n",
			t.job.JID, t.job.Name, id); err != nil || !wait {
			return err
		}
		cp, err := t.client.AwaitCheckpoint(ctx, t.job.JID, id, checkpointPollInterval)
		var failed *rest.CheckpointFailedError
		switch {
		case errors.As(err, &failed):
			return failure(fmt.Errorf("the checkpoint of job %s (%s) failed: %s", t.job.JID, t.job.Name, failed.Message))
		case errors.Is(err, context.Canceled):
			return interrupted(errors.New("interrupted while waiting for the checkpoint; it goes on"))
		case err != nil:
			return unreachable(t.client.URL(), err)
		}
		line := fmt.Sprintf("checkpoint %d completed", cp)
		// Its figures, if the server still has them in its history.
		if d, err := t.client.CheckpointDetails(ctx, t.job.JID, cp); err == nil {
			line += fmt.Sprintf(" in %s: %s checkpointed, %s full", formatMillis(d.EndToEndDuration),
				runner.FormatBytes(d.CheckpointedSize), runner.FormatBytes(d.StateSize))
		}
		_, err = fmt.Fprintln(a.stdout, line)
		return err
	})
	c.Flags().BoolVar(&wait, "wait", false, "wait until the checkpoint completed (or failed) and print its id")
	a.deferErrors(c.Flags())
	return c
}

func (a *app) statusCommand() *cobra.Command {
	cf := &controlFlags{}
	return a.controlCommand(&cobra.Command{
		Use:   "status <job> [flags]",
		Short: "Show a job's state, vertices, backpressure and latest checkpoints",
		Long: `Show one screen about a job, from its REST server: its state and how long it
has run; its last failure, if any; every vertex with its parallelism, the
records it read and wrote, the share of time it was busy, backpressured and
idle (the largest over its subtasks, over the last seconds) and its
backpressure level (ok up to 10% backpressured, low up to 50%, high above);
the checkpoint counts and the latest checkpoints with their status,
duration, checkpointed and full size, and why they failed.

` + findHelp,
		Example: `  weir status orders`,
	}, cf, func(ctx context.Context, t controlTarget) error {
		return a.printStatus(ctx, t)
	})
}

// percent formats a ratio (0 to 1) as a percentage.
func percent(r float64) string { return fmt.Sprintf("%d%%", int(math.Round(r*100))) }

func (a *app) printStatus(ctx context.Context, t controlTarget) error {
	d, err := t.client.Job(ctx, t.job.JID)
	if err != nil {
		return unreachable(t.client.URL(), err)
	}
	cps, err := t.client.Checkpoints(ctx, t.job.JID)
	if err != nil {
		return unreachable(t.client.URL(), err)
	}
	ex, err := t.client.JobExceptions(ctx, t.job.JID)
	if err != nil {
		return unreachable(t.client.URL(), err)
	}
	bps := make([]rest.VertexBackPressure, len(d.Vertices))
	for i, v := range d.Vertices {
		if bps[i], err = t.client.Backpressure(ctx, t.job.JID, v.ID); err != nil {
			return unreachable(t.client.URL(), err)
		}
	}

	var b strings.Builder
	fmt.Fprintf(&b, "job %s (%s): %s for %s, since %s\n", d.Name, d.JID, d.State, formatJobDuration(d.Duration),
		formatTime(d.StartTime))
	if d.EndTime > 0 {
		fmt.Fprintf(&b, "ended %s\n", formatTime(d.EndTime))
	}
	fmt.Fprintf(&b, "server %s\n", t.client.URL())
	if ex.RootException != nil {
		msg, _, _ := strings.Cut(*ex.RootException, "\n")
		var at int64
		if ex.Timestamp != nil {
			at = *ex.Timestamp
		}
		fmt.Fprintf(&b, "last failure (%s): %s\n", formatTime(at), msg)
	}

	b.WriteByte('\n')
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "VERTEX\tPARALLELISM\tRECORDS IN\tRECORDS OUT\tBUSY\tBACKPRESSURED\tIDLE\tBACKPRESSURE")
	for i, v := range d.Vertices {
		busy, bp, idle, level := "-", "-", "-", "-"
		if subs := bps[i].Subtasks; len(subs) > 0 {
			var mb, mp, mi float64
			for _, s := range subs {
				mb, mp, mi = max(mb, s.BusyRatio), max(mp, s.Ratio), max(mi, s.IdleRatio)
			}
			busy, bp, idle, level = percent(mb), percent(mp), percent(mi), bps[i].Level
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%s\t%s\t%s\n", v.Name, v.Parallelism, v.Metrics.ReadRecords,
			v.Metrics.WriteRecords, busy, bp, idle, level)
	}
	tw.Flush()

	c := cps.Counts
	fmt.Fprintf(&b, "\ncheckpoints: %d triggered, %d completed, %d failed, %d in progress", c.Total, c.Completed,
		c.Failed, c.InProgress)
	if r := cps.Latest.Restored; r != nil {
		fmt.Fprintf(&b, "; restored from %d", r.ID)
	}
	b.WriteByte('\n')
	if len(cps.History) > 0 {
		tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tSTATUS\tTRIGGERED\tDURATION\tCHECKPOINTED\tFULL\tFAILURE")
		for _, h := range cps.History[:min(len(cps.History), shownCheckpoints)] {
			status := h.Status
			if h.IsSavepoint {
				status += " (savepoint)"
			}
			why := "-"
			if h.FailureMessage != nil {
				why = *h.FailureMessage
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", h.ID, status, formatTime(h.TriggerTimestamp),
				formatMillis(h.EndToEndDuration), runner.FormatBytes(h.CheckpointedSize),
				runner.FormatBytes(h.StateSize), why)
		}
		tw.Flush()
	}
	if _, err := io.WriteString(a.stdout, b.String()); err != nil {
		return failure(fmt.Errorf("write result: %w", err))
	}
	return nil
}

// withJob finds the running job arg names, through the REST server's
// client the control flags describe, and runs run with it.
func (a *app) withJob(ctx context.Context, cf *controlFlags, arg string, run func(context.Context, controlTarget) error) error {
	hc, release, err := cf.httpClient(requestTimeout)
	if err != nil {
		return err
	}
	defer release()
	t, err := a.findJob(ctx, cf, hc, arg)
	if err != nil {
		return err
	}
	return run(ctx, t)
}
