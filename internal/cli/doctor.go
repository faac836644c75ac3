package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/doctor"
)

// doctorCommand is `weir doctor`.
func (a *app) doctorCommand() *cobra.Command {
	var (
		last              int
		asJSON            bool
		rawURL, token     string
		logFile, checkDir string
	)
	defaultDir := "weir-data/checkpoints"
	if o, ok := config.Lookup("execution.checkpointing.dir"); ok {
		defaultDir = o.Default
	}
	c := &cobra.Command{
		Use:   "doctor <jobid>|<checkpoint dir> [flags]",
		Short: "Explain why a job's checkpoints are slow or fail, and what to change",
		Long: `Diagnose the last checkpoints of a job: which phase makes them slow (start
delay under backpressure, alignment under skew, the synchronous or the
asynchronous phase), which checkpoints expired or were declined and why, and
whether the state grows; each finding names the subtask and the remedy, with
the configuration keys to change. docs/doctor.md lists the rules.

<jobid> is a running job: its id, or its name. The doctor asks the job's REST
server (GET /jobs/<jobid>/doctor), found with --url or through the _rest file
the job leaves in its checkpoint directory (--dir). A running job's report
includes the failed checkpoints and the current task metrics.

<checkpoint dir> is a checkpoint directory (execution.checkpointing.dir) or
one job's directory in it, <dir>/<job>, as a path, file:// or blob URL: the
doctor reads the _metadata of the retained checkpoints
(execution.checkpointing.num-retained; 1 by default, too few to see trends).
Failed checkpoints leave no _metadata: pass the job's log with --log to see
them.

With --json standard output holds exactly one JSON object, the report.`,
		Example: `  weir doctor weir-data/checkpoints/troubled
  weir doctor weir-data/checkpoints/troubled --log job.log --last 20
  weir doctor 3f2a9c1e5b7d4a6f8e0c2b4d6f8a0c1e --url http://127.0.0.1:8081 --json`,
		Args: cobra.ArbitraryArgs,
		RunE: func(c *cobra.Command, args []string) error {
			problems := a.flagProblemsOf(c.Flags())
			if _, err := newLogger(a.stderr, a.logFormat, a.logLevel, slog.LevelWarn); err != nil {
				problems = append(problems, err)
			}
			switch {
			case len(args) == 0:
				problems = append(problems, fmt.Errorf("missing argument: '%s' takes a job id or a checkpoint directory", c.CommandPath()))
			case len(args) > 1:
				problems = append(problems, fmt.Errorf("unexpected argument %q: '%s' takes one job id or directory", args[1], c.CommandPath()))
			case args[0] == "":
				problems = append(problems, errors.New("the job id or directory must not be empty"))
			}
			if last < 1 {
				problems = append(problems, fmt.Errorf("--last %d: must be at least 1", last))
			}
			if rawURL != "" {
				if u, err := url.Parse(rawURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
					problems = append(problems, fmt.Errorf("--url %q: want the REST server's base URL, such as http://127.0.0.1:8081", rawURL))
				}
			}
			if len(problems) > 0 {
				return usageError(problems...)
			}
			rep, err := a.diagnose(c.Context(), doctorRequest{target: args[0], last: last, url: rawURL, token: token,
				log: logFile, dir: checkDir})
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
	f.StringVar(&rawURL, "url", "", "base `URL` of the job's REST server (default: found through <dir>/<job>/_rest)")
	f.StringVar(&token, "token", "", "bearer `token` of the REST server (rest.auth.token)")
	f.StringVar(&logFile, "log", "", "the job's log `file`, for the failed checkpoints of a job read from its checkpoint directory")
	f.StringVar(&checkDir, "dir", defaultDir, "checkpoint `directory` whose _rest files locate running jobs")
	a.deferErrors(f)
	return c
}

// doctorRequest is what `weir doctor` was asked.
type doctorRequest struct {
	target     string
	last       int
	url, token string
	log, dir   string
}

// diagnose returns the report on the running job or the checkpoint
// directory req.target names.
func (a *app) diagnose(ctx context.Context, req doctorRequest) (doctor.Report, error) {
	if req.url != "" {
		if req.log != "" {
			fmt.Fprintln(a.stderr, "warning: --log is ignored: a running job reports its failed checkpoints itself")
		}
		return fetchReport(ctx, req.url, req.target, req.token, req.last)
	}
	if isCheckpointLocation(req.target) {
		if req.log != "" {
			if _, err := os.Stat(req.log); err != nil {
				return doctor.Report{}, usageError(fmt.Errorf("--log: %w", err))
			}
		}
		in, err := doctor.FromCheckpoints(ctx, req.target, "", req.last, req.log)
		switch {
		case errors.Is(err, doctor.ErrNoCheckpoints), errors.Is(err, doctor.ErrAmbiguous), errors.Is(err, doctor.ErrUnreadable),
			errors.Is(err, storage.ErrNotFound):
			return doctor.Report{}, refused(err)
		case err != nil:
			return doctor.Report{}, failure(err)
		}
		return doctor.Diagnose(in, doctor.Options{}), nil
	}
	base, id, err := findRunningJob(req.dir, req.target)
	if err != nil {
		return doctor.Report{}, refused(err)
	}
	if req.log != "" {
		fmt.Fprintln(a.stderr, "warning: --log is ignored: a running job reports its failed checkpoints itself")
	}
	return fetchReport(ctx, base, id, req.token, req.last)
}

// isCheckpointLocation reports whether target names a checkpoint
// directory rather than a job: a URL other than http(s), or an existing
// local path.
func isCheckpointLocation(target string) bool {
	if i := strings.Index(target, "://"); i > 0 {
		scheme := strings.ToLower(target[:i])
		return scheme != "http" && scheme != "https"
	}
	_, err := os.Stat(target)
	return err == nil || strings.ContainsRune(target, filepath.Separator) || strings.HasPrefix(target, ".")
}

// restDiscovery is the part of a job's _rest file the doctor reads. The
// REST server writes the file (rest.FindDiscovery will read it); until
// that lands, this local reader accepts the url field and the job id
// under any of the names a Flink-style file may use.
type restDiscovery struct {
	URL   string `json:"url"`
	ID    string `json:"id"`
	JobID string `json:"jobId"`
	JID   string `json:"jid"`
	Job   string `json:"job"`
}

func (d restDiscovery) jobID() string {
	for _, s := range []string{d.JobID, d.JID, d.ID} {
		if s != "" {
			return s
		}
	}
	return ""
}

// restFile is the discovery file's name in a job's checkpoint directory.
const restFile = "_rest"

// findRunningJob finds the REST server of the running job target (an id
// or a name) through the _rest files under the checkpoint directory dir:
// <dir>/<target>/_rest for a name, else the file whose job id is target.
// It returns the server's base URL and the job's id ("" if the file
// does not say: then the server's only job).
func findRunningJob(dir, target string) (string, string, error) {
	read := func(p string) (restDiscovery, bool) {
		b, err := os.ReadFile(p)
		if err != nil {
			return restDiscovery{}, false
		}
		var d restDiscovery
		if json.Unmarshal(b, &d) != nil || d.URL == "" {
			return restDiscovery{}, false
		}
		return d, true
	}
	if sj, err := storage.SanitizeJob(target); err == nil {
		if d, ok := read(filepath.Join(dir, sj, restFile)); ok {
			return d.URL, d.jobID(), nil
		}
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*", restFile))
	slices.Sort(files)
	for _, p := range files {
		if d, ok := read(p); ok && (d.jobID() == target || d.Job == target) {
			id := d.jobID()
			if id == "" {
				id = target
			}
			return d.URL, id, nil
		}
	}
	return "", "", fmt.Errorf("unknown job %q: it is not a checkpoint directory, and no running job of that id or name "+
		"left a %s file under %s: pass the REST server with --url, the checkpoint directory with --dir, or a "+
		"checkpoint directory instead of a job", target, restFile, dir)
}

// doctorTimeout bounds the request to a job's REST server.
const doctorTimeout = 30 * time.Second

// fetchReport asks the REST server at base for the doctor's report on job
// id (the server's only job if id is empty).
func fetchReport(ctx context.Context, base, id, token string, last int) (doctor.Report, error) {
	client := &http.Client{Timeout: doctorTimeout, Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	base = strings.TrimRight(base, "/")
	get := func(path string, out any) (int, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		if err != nil {
			return 0, err
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
		if err != nil {
			return resp.StatusCode, err
		}
		if resp.StatusCode != http.StatusOK {
			var e struct {
				Errors []string `json:"errors"`
			}
			msg := strings.TrimSpace(string(body))
			if json.Unmarshal(body, &e) == nil && len(e.Errors) > 0 {
				msg = strings.Join(e.Errors, "; ")
			}
			return resp.StatusCode, errors.New(msg)
		}
		return resp.StatusCode, json.Unmarshal(body, out)
	}
	if id == "" {
		var jobs struct {
			Jobs []struct {
				ID string `json:"id"`
			} `json:"jobs"`
		}
		if _, err := get("/jobs", &jobs); err != nil {
			return doctor.Report{}, failure(fmt.Errorf("list the jobs of %s: %w", base, err))
		}
		if len(jobs.Jobs) != 1 {
			return doctor.Report{}, refused(fmt.Errorf("%s runs %d jobs: name the job's id", base, len(jobs.Jobs)))
		}
		id = jobs.Jobs[0].ID
	}
	var rep doctor.Report
	code, err := get("/jobs/"+url.PathEscape(id)+"/doctor?last="+strconv.Itoa(last), &rep)
	switch {
	case code == http.StatusNotFound:
		return rep, refused(fmt.Errorf("unknown job %q at %s: %w", id, base, err))
	case code == http.StatusUnauthorized:
		return rep, refused(fmt.Errorf("%s wants a bearer token: pass the job's rest.auth.token with --token: %w", base, err))
	case err != nil:
		return rep, failure(fmt.Errorf("ask %s about job %s: %w", base, id, err))
	}
	return rep, nil
}
