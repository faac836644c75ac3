package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/doctor"
	"github.com/weirstream/weir/internal/rest"
)

// doctorCommand is `weir doctor`.
func (a *app) doctorCommand() *cobra.Command {
	var (
		last    int
		asJSON  bool
		logFile string
	)
	cf := &controlFlags{}
	c := &cobra.Command{
		Use:   "doctor <job>|<checkpoint dir> [flags]",
		Short: "Explain why a job's checkpoints are slow or fail, and what to change",
		Long: `Diagnose the last checkpoints of a job: which phase makes them slow (start
delay under backpressure, alignment under skew, the synchronous or the
asynchronous phase), which checkpoints expired or were declined and why, and
whether the state grows; each finding names the subtask and the remedy, with
the configuration keys to change. docs/doctor.md lists the rules.

<job> is a running job: the doctor asks its REST server (GET
/jobs/<jobid>/doctor). ` + findHelp + `
A running job's report includes the failed checkpoints and the current task
metrics. A job that is not running but has checkpoints under --dir is read
from them.

<checkpoint dir> is a checkpoint directory (execution.checkpointing.dir) or
one job's directory in it, <dir>/<job>, as a path, file:// or blob URL: the
doctor reads the _metadata of the retained checkpoints
(execution.checkpointing.num-retained; 1 by default, too few to see trends).
Failed checkpoints leave no _metadata: pass the job's log with --log to see
them.

With --json standard output holds exactly one JSON object, the report.`,
		Example: `  weir doctor weir-data/checkpoints/troubled
  weir doctor weir-data/checkpoints/troubled --log job.log --last 20
  weir doctor troubled
  weir doctor 3f2a9c1e --url http://127.0.0.1:8081 --json`,
		Args: cobra.ArbitraryArgs,
		RunE: func(c *cobra.Command, args []string) error {
			problems := a.controlProblems(c, cf)
			if err := oneJobArg(c, args); err != nil {
				problems = append(problems, err)
			}
			if last < 1 {
				problems = append(problems, fmt.Errorf("--last %d: must be at least 1", last))
			}
			if len(problems) > 0 {
				return usageError(problems...)
			}
			rep, err := a.diagnose(c.Context(), cf, args[0], last, logFile)
			if err != nil {
				return err
			}
			if asJSON {
				if err := json.NewEncoder(a.stdout).Encode(rep); err != nil {
					return failure(fmt.Errorf("write result: %w", err))
				}
				return nil
			}
			if _, err := io.WriteString(a.stdout, rep.Text()); err != nil {
				return failure(fmt.Errorf("write result: %w", err))
			}
			return nil
		},
	}
	f := c.Flags()
	f.IntVar(&last, "last", doctor.DefaultLast, "examine the last `N` checkpoints")
	f.BoolVar(&asJSON, "json", false, "print the report as one JSON object")
	f.StringVar(&logFile, "log", "", "the job's log `file`, for the failed checkpoints of a job read from its checkpoint directory")
	a.addControlFlags(c, cf)
	return c
}

// diagnose returns the report on the job or checkpoint directory arg
// names.
func (a *app) diagnose(ctx context.Context, cf *controlFlags, arg string, last int, logFile string) (doctor.Report, error) {
	if cf.url == "" && isCheckpointLocation(arg) {
		return diagnoseOffline(ctx, arg, "", last, logFile)
	}
	hc, release, err := cf.httpClient(requestTimeout)
	if err != nil {
		return doctor.Report{}, err
	}
	defer release()
	t, err := a.findJob(ctx, cf, hc, arg)
	if err != nil {
		// Not running: its checkpoints may still be there.
		if cf.url == "" && rest.StatusOf(err) == 0 {
			rep, oerr := diagnoseOffline(ctx, cf.dir, arg, last, logFile)
			if oerr == nil {
				return rep, nil
			}
			// Its checkpoints are there but cannot be read: that is the
			// news, not that no server knows the job.
			if errors.Is(oerr, doctor.ErrUnreadable) {
				return doctor.Report{}, oerr
			}
			var ee *exitError
			if errors.As(err, &ee) && ee.code == ExitUsage {
				return doctor.Report{}, fmt.Errorf("%w; nor has it checkpoints under %s: pass a checkpoint directory, "+
					"or the job's REST server with --url", err, cf.dir)
			}
		}
		return doctor.Report{}, err
	}
	if logFile != "" {
		fmt.Fprintln(a.stderr, "warning: --log is ignored: a running job reports its failed checkpoints itself")
	}
	token := cf.bearer()
	if cf.url == "" {
		token = cf.bearerFor(t.client.URL()) // a discovered server: not just anyone's
	}
	rep, err := fetchReport(ctx, hc, t.client.URL(), token, t.job.JID, last)
	if rest.StatusOf(err) == http.StatusNotFound {
		return rep, failure(fmt.Errorf("the REST server at %s has no checkpoint doctor for job %s: %w", t.client.URL(), t.job.JID, err))
	}
	if err != nil {
		return rep, unreachable(t.client.URL(), err)
	}
	return rep, nil
}

// diagnoseOffline diagnoses the checkpoints of job under dir (of the job
// dir names if job is empty).
func diagnoseOffline(ctx context.Context, dir, job string, last int, logFile string) (doctor.Report, error) {
	if logFile != "" {
		if _, err := os.Stat(logFile); err != nil {
			return doctor.Report{}, usageError(fmt.Errorf("--log: %w", err))
		}
	}
	in, err := doctor.FromCheckpoints(ctx, dir, job, last, logFile)
	switch {
	case errors.Is(err, doctor.ErrLog):
		return doctor.Report{}, usageError(err)
	case errors.Is(err, doctor.ErrNoCheckpoints), errors.Is(err, doctor.ErrAmbiguous), errors.Is(err, doctor.ErrUnreadable),
		errors.Is(err, storage.ErrNotFound):
		return doctor.Report{}, refused(err)
	case err != nil:
		return doctor.Report{}, failure(err)
	}
	return doctor.Diagnose(in, doctor.Options{}), nil
}

// isCheckpointLocation reports whether arg names a checkpoint directory
// rather than a job: a URL other than http(s), an existing local path, or
// anything that looks like a path.
func isCheckpointLocation(arg string) bool {
	if i := strings.Index(arg, "://"); i > 0 {
		scheme := strings.ToLower(arg[:i])
		return scheme != "http" && scheme != "https"
	}
	_, err := os.Stat(arg)
	return err == nil || strings.ContainsRune(arg, filepath.Separator) || strings.HasPrefix(arg, ".")
}

// fetchReport asks the REST server at base for the doctor's report on job
// id, over the last checkpoints. A non-2xx answer is a *rest.APIError.
func fetchReport(ctx context.Context, hc *http.Client, base, token, id string, last int) (doctor.Report, error) {
	path := "/jobs/" + url.PathEscape(id) + "/doctor"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(base, "/")+path+"?last="+strconv.Itoa(last), nil)
	if err != nil {
		return doctor.Report{}, err
	}
	req.Header.Set("Accept", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return doctor.Report{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return doctor.Report{}, fmt.Errorf("GET %s: read the answer: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		ae := &rest.APIError{Method: http.MethodGet, Path: path, Status: resp.StatusCode}
		var er rest.ErrorResponse
		if json.Unmarshal(body, &er) == nil && len(er.Errors) > 0 {
			ae.Errors = er.Errors
		} else if text := strings.TrimSpace(string(body)); text != "" {
			ae.Errors = []string{text}
		}
		return doctor.Report{}, ae
	}
	var rep doctor.Report
	if err := json.Unmarshal(body, &rep); err != nil {
		return doctor.Report{}, fmt.Errorf("GET %s: decode the report: %w", path, err)
	}
	return rep, nil
}
