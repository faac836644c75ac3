package cli

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/checkpoint/metadata"
	"github.com/weirstream/weir/internal/checkpoint/pins"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/jobs"
	"github.com/weirstream/weir/internal/rest"
	"github.com/weirstream/weir/internal/rest/resttest"
)

// savepointTriggerID is the request id the fake savepoint endpoints
// answer.
const savepointTriggerID = "5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a"

// fakeSavepoints stands in for the savepoint endpoints of the fixture job
// (POST /savepoints, POST /stop, GET /savepoints/{id}) in front of the
// REST fixture, which serves everything else: the job lookup, and the
// savepoint endpoints of the finished job. The monitor.Job behind the
// fixture does not expose its savepoint control to the server yet (see
// rest.jobSavepointer), so the CLI tests cannot reach resttest's fake
// control through the real endpoints.
type fakeSavepoints struct {
	t    *testing.T
	real *rest.Server

	mu sync.Mutex
	// posts are the bodies POSTed, by path suffix ("savepoints", "stop").
	posts []fakePost
	// gets are the raw queries of the status requests.
	gets []string
	// trigger, if set, answers the POSTs instead of 202.
	trigger func(w http.ResponseWriter)
	// status answers the n-th status request (from 0).
	status func(w http.ResponseWriter, r *http.Request, n int)
	// onPost runs after a POST was recorded.
	onPost func()
}

type fakePost struct {
	op   string
	body map[string]any
}

// savepointFixture serves fakeSavepoints in front of the REST fixture
// until the test ends; the fake answers 202 and then, for each status
// request, IN_PROGRESS once and COMPLETED with location.
func savepointFixture(t *testing.T, location string) (*httptest.Server, *fakeSavepoints) {
	t.Helper()
	s, _ := restFixture(t, "")
	f := &fakeSavepoints{t: t, real: s}
	f.status = func(w http.ResponseWriter, _ *http.Request, n int) {
		st := rest.SavepointTriggerStatus{Status: rest.QueueStatus{ID: rest.OperationInProgress}}
		if n > 0 {
			st = rest.SavepointTriggerStatus{Status: rest.QueueStatus{ID: rest.OperationCompleted},
				Operation: &rest.SavepointOperation{Location: location}}
		}
		writeTestJSON(w, http.StatusOK, st)
	}
	hs := httptest.NewServer(f)
	t.Cleanup(hs.Close)
	return hs, f
}

func writeTestJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (f *fakeSavepoints) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	prefix := "/jobs/" + resttest.JobID + "/"
	sub, ok := strings.CutPrefix(r.URL.Path, prefix)
	switch {
	case !ok:
	case r.Method == http.MethodPost && (sub == "savepoints" || sub == "stop"):
		var body map[string]any
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &body); err != nil {
			f.t.Errorf("POST %s: body %q: %v", r.URL.Path, b, err)
		}
		f.mu.Lock()
		f.posts = append(f.posts, fakePost{op: sub, body: body})
		trigger, onPost := f.trigger, f.onPost
		f.mu.Unlock()
		if onPost != nil {
			onPost()
		}
		if trigger != nil {
			trigger(w)
			return
		}
		writeTestJSON(w, http.StatusAccepted, rest.TriggerResponse{RequestID: savepointTriggerID})
		return
	case r.Method == http.MethodGet && sub == "savepoints/"+savepointTriggerID:
		f.mu.Lock()
		n := len(f.gets)
		f.gets = append(f.gets, r.URL.RawQuery)
		status := f.status
		f.mu.Unlock()
		status(w, r, n)
		return
	}
	f.real.ServeHTTP(w, r)
}

// recorded returns the POSTs and status requests so far.
func (f *fakeSavepoints) recorded() ([]fakePost, []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fakePost(nil), f.posts...), append([]string(nil), f.gets...)
}

// wantPost checks that the fake got exactly one POST, to op, with body.
func (f *fakeSavepoints) wantPost(t *testing.T, op string, body map[string]any) {
	t.Helper()
	posts, _ := f.recorded()
	if len(posts) != 1 {
		t.Fatalf("%d POSTs %+v, want one", len(posts), posts)
	}
	if posts[0].op != op || !jsonEqual(posts[0].body, body) {
		t.Errorf("POST %s %v, want POST %s %v", posts[0].op, posts[0].body, op, body)
	}
	f.mu.Lock()
	f.posts, f.gets = nil, nil
	f.mu.Unlock()
}

func jsonEqual(a, b map[string]any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

func TestSavepointCommand(t *testing.T) {
	const loc = "/sp/savepoint-0a1b2c-0123456789ab"
	hs, f := savepointFixture(t, loc)

	r := runCLI(t, "savepoint", "orders", "/sp", "--type", "NATIVE", "--url", hs.URL)
	r.want(t, ExitOK, "Triggered the savepoint of job "+resttest.JobID+" (orders)")
	if r.stdout != "Savepoint completed. Path: "+loc+"\n" {
		t.Errorf("stdout %q", r.stdout)
	}
	_, gets := f.recorded()
	if len(gets) != 2 || gets[0] != "wait=10000" {
		t.Errorf("status requests %q, want two asking the server to wait", gets)
	}
	f.wantPost(t, "savepoints", map[string]any{"target-directory": "/sp", "formatType": "NATIVE"})

	// Found through the discovery files; the default directory and type;
	// a relative target is made absolute.
	dir := discoveryDir(t, hs.URL)
	r = runCLI(t, "savepoint", "orders", "--dir", dir)
	r.want(t, ExitOK)
	f.wantPost(t, "savepoints", map[string]any{"formatType": "CANONICAL"})
	wd := t.TempDir()
	t.Chdir(wd)
	r = runCLI(t, "savepoint", resttest.JobID[:4], "backups", "-t", "canonical", "--url", hs.URL)
	r.want(t, ExitOK)
	f.wantPost(t, "savepoints", map[string]any{"target-directory": filepath.Join(wd, "backups"), "formatType": "CANONICAL"})

	// --detached: the request id, no waiting.
	r = runCLI(t, "savepoint", "orders", "s3://b/sp", "--detached", "--url", hs.URL)
	r.want(t, ExitOK)
	if r.stdout != "Savepoint triggered. Request id: "+savepointTriggerID+"\n" {
		t.Errorf("--detached: %q", r.stdout)
	}
	if _, gets := f.recorded(); len(gets) != 0 {
		t.Errorf("--detached asked for the status: %q", gets)
	}
	f.wantPost(t, "savepoints", map[string]any{"target-directory": "s3://b/sp", "formatType": "CANONICAL"})

	// The savepoint fails: exit 1 with the cause.
	f.status = func(w http.ResponseWriter, _ *http.Request, _ int) {
		writeTestJSON(w, http.StatusOK, rest.SavepointTriggerStatus{Status: rest.QueueStatus{ID: rest.OperationCompleted},
			Operation: &rest.SavepointOperation{FailureCause: &rest.SerializedThrowable{Class: "weir.CheckpointException",
				StackTrace: "savepoint declined: task not ready"}}})
	}
	r = runCLI(t, "savepoint", "orders", "--url", hs.URL)
	r.want(t, ExitFailure, "the savepoint of job "+resttest.JobID+" (orders) failed: savepoint declined: task not ready")
	if r.stdout != "" {
		t.Errorf("stdout of a failed savepoint: %q", r.stdout)
	}
	f.wantPost(t, "savepoints", map[string]any{"formatType": "CANONICAL"})

	// The job cannot take savepoints, or has ended: exit 1 with the
	// server's reason.
	f.trigger = func(w http.ResponseWriter) {
		writeTestJSON(w, http.StatusConflict, rest.ErrorResponse{Errors: []string{"Job " + resttest.JobID +
			" cannot take savepoints: checkpointing is off"}})
	}
	r = runCLI(t, "savepoint", "orders", "--url", hs.URL)
	r.want(t, ExitFailure, "no savepoint of job "+resttest.JobID+" (orders): Job "+resttest.JobID+
		" cannot take savepoints: checkpointing is off")
	f.wantPost(t, "savepoints", map[string]any{"formatType": "CANONICAL"})
	r = runCLI(t, "savepoint", "done", "--url", hs.URL) // the real server answers for this one
	r.want(t, ExitFailure, "no savepoint of job "+doneJobID+" (done)", "terminal state FINISHED")

	// Usage problems, collected; nothing is triggered.
	r = runCLI(t, "savepoint", "orders", "--type", "full", "--url", hs.URL)
	r.want(t, ExitUsage, `--type "full": must be canonical`, "or native")
	r = runCLI(t, "savepoint", "--url", hs.URL)
	r.want(t, ExitUsage, "missing argument", "job id")
	r = runCLI(t, "savepoint", "orders", "/a", "/b", "--type", "x", "--url", hs.URL)
	r.want(t, ExitUsage, "2 problems", `unexpected argument "/b"`, `--type "x"`)
	r = runCLI(t, "savepoint", "orders", "", "--url", hs.URL)
	r.want(t, ExitUsage, "target directory must not be empty")
	r = runCLI(t, "savepoint", "nope", "--url", hs.URL)
	r.want(t, ExitUsage, `job "nope" not found`)
	if posts, _ := f.recorded(); len(posts) != 0 {
		t.Errorf("triggered by bad command lines: %+v", posts)
	}
}

func TestStopCommand(t *testing.T) {
	const loc = "/sp/savepoint-0a1b2c-0123456789ab"
	hs, f := savepointFixture(t, loc)

	r := runCLI(t, "stop", "orders", "--savepoint-path", "/sp", "--drain", "--type", "native", "--url", hs.URL)
	r.want(t, ExitOK, "Triggered the stop-with-savepoint of job "+resttest.JobID+" (orders)")
	if r.stdout != "Savepoint completed. Path: "+loc+"\n" {
		t.Errorf("stdout %q", r.stdout)
	}
	f.wantPost(t, "stop", map[string]any{"targetDirectory": "/sp", "drain": true, "formatType": "NATIVE"})

	r = runCLI(t, "stop", "orders", "-p", "s3://b/sp", "-d", "--detached", "--url", hs.URL)
	r.want(t, ExitOK)
	if r.stdout != "Stop-with-savepoint triggered. Request id: "+savepointTriggerID+"\n" {
		t.Errorf("--detached: %q", r.stdout)
	}
	f.wantPost(t, "stop", map[string]any{"targetDirectory": "s3://b/sp", "drain": true, "formatType": "CANONICAL"})

	r = runCLI(t, "stop", resttest.JobID, "--url", hs.URL)
	r.want(t, ExitOK)
	f.wantPost(t, "stop", map[string]any{"formatType": "CANONICAL"})

	// The job stopped and its process took the server along before the
	// answer came: the message says where to look for the savepoint.
	f.status = func(w http.ResponseWriter, _ *http.Request, _ int) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		conn.Close()
	}
	r = runCLI(t, "stop", "orders", "-p", "/sp", "--url", hs.URL)
	r.want(t, ExitFailure, "stopped answering while the job stopped with a savepoint", "savepoint-0a1b2c-*",
		"in /sp")
	f.wantPost(t, "stop", map[string]any{"targetDirectory": "/sp", "formatType": "CANONICAL"})

	// The stop fails.
	f.status = func(w http.ResponseWriter, _ *http.Request, _ int) {
		writeTestJSON(w, http.StatusOK, rest.SavepointTriggerStatus{Status: rest.QueueStatus{ID: rest.OperationCompleted},
			Operation: &rest.SavepointOperation{FailureCause: &rest.SerializedThrowable{Class: "weir.CheckpointException",
				StackTrace: "sink refused to commit"}}})
	}
	r = runCLI(t, "stop", "orders", "--url", hs.URL)
	r.want(t, ExitFailure, "the stop-with-savepoint of job "+resttest.JobID+" (orders) failed: sink refused to commit")
	f.wantPost(t, "stop", map[string]any{"formatType": "CANONICAL"})

	// Interrupted while the server holds the status request.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.status = func(_ http.ResponseWriter, r *http.Request, _ int) { <-r.Context().Done() }
	f.onPost = func() { time.AfterFunc(50*time.Millisecond, cancel) }
	r = runWith(t, ctx, jobs.Builtin(), "stop", "orders", "--url", hs.URL)
	r.want(t, ExitInterrupted, "interrupted while waiting for the stop-with-savepoint; it goes on (request id "+
		savepointTriggerID+")")
	f.onPost = nil
	f.wantPost(t, "stop", map[string]any{"formatType": "CANONICAL"})

	r = runCLI(t, "stop", "done", "--url", hs.URL)
	r.want(t, ExitFailure, "no savepoint of job "+doneJobID+" (done)", "terminal state FINISHED")
	r = runCLI(t, "stop", "orders", "extra", "--type", "full", "--savepoint-path=", "--url", hs.URL)
	r.want(t, ExitUsage, "3 problems", `unexpected argument "extra"`, `--type "full"`, "--savepoint-path: must not be empty")
	if posts, _ := f.recorded(); len(posts) != 0 {
		t.Errorf("triggered by bad command lines: %+v", posts)
	}
}

// makeSavepoint writes a savepoint directory into root, as the runtime
// makes one: a data file and _metadata. It returns its path.
func makeSavepoint(t *testing.T, root string) string {
	t.Helper()
	ctx := t.Context()
	store, err := storage.Open(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	name := storage.NewSavepointName(resttest.JobID)
	w, err := store.CreateSavepointFile(ctx, name, "state-0")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("keyed state")); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	payload, err := metadata.Encode(&metadata.Checkpoint{Job: "orders", ID: 1, Savepoint: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.WriteSavepointMetadata(ctx, name, payload); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, name)
}

func TestSavepointDispose(t *testing.T) {
	root := t.TempDir()
	sp := makeSavepoint(t, root)
	keep := makeSavepoint(t, root)

	r := runCLI(t, "savepoint", "--dispose", sp)
	r.want(t, ExitOK)
	if r.stdout != "Savepoint '"+sp+"' disposed.\n" {
		t.Errorf("stdout %q", r.stdout)
	}
	if _, err := os.Stat(sp); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the savepoint directory is still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(keep, storage.MetadataName)); err != nil {
		t.Errorf("the other savepoint was touched: %v", err)
	}
	// Gone now: a clear error.
	r = runCLI(t, "savepoint", "--dispose", sp)
	r.want(t, ExitUsage, "--dispose "+sp+": no savepoint there")
	r = runCLI(t, "savepoint", "-d", filepath.Join(t.TempDir(), "nope", "savepoint-x"))
	r.want(t, ExitUsage, "no savepoint there")
	// By its _metadata file, with -d.
	r = runCLI(t, "savepoint", "-d", filepath.Join(keep, storage.MetadataName))
	r.want(t, ExitOK)
	if _, err := os.Stat(keep); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the savepoint given by its _metadata is still there: %v", err)
	}

	// A checkpoint is not a savepoint, nor a directory holding a
	// checkpoint's metadata: nothing is deleted.
	ctx := t.Context()
	store, err := storage.Open(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	payload, err := metadata.Encode(&metadata.Checkpoint{Job: "orders", ID: 3})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.WriteMetadata(ctx, "orders", 3, payload); err != nil {
		t.Fatal(err)
	}
	chk := filepath.Join(root, "orders", "chk-3")
	r = runCLI(t, "savepoint", "--dispose", chk)
	r.want(t, ExitUsage, "this is checkpoint 3 (orders/chk-3), not a savepoint", "nothing deleted",
		"'weir checkpoints delete'")
	if err := store.WriteSavepointMetadata(ctx, "copied", payload); err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, "savepoint", "--dispose", filepath.Join(root, "copied"))
	r.want(t, ExitUsage, `that of checkpoint 3 of job "orders", not of a savepoint`, "nothing deleted")
	if err := store.WriteSavepointMetadata(ctx, "garbage", []byte("{")); err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, "savepoint", "--dispose", filepath.Join(root, "garbage"))
	r.want(t, ExitUsage, "is not a savepoint's that this weir can read", "nothing deleted")
	for _, p := range []string{chk, filepath.Join(root, "copied"), filepath.Join(root, "garbage")} {
		if _, err := os.Stat(filepath.Join(p, storage.MetadataName)); err != nil {
			t.Errorf("%s was touched: %v", p, err)
		}
	}

	// --dispose takes no job and no control flags.
	r = runCLI(t, "savepoint", "orders", "--dispose", chk, "--type", "native", "--url", "http://127.0.0.1:1")
	r.want(t, ExitUsage, "3 problems", `unexpected argument "orders"`, "--type does not go with --dispose",
		"--url does not go with --dispose")
	r = runCLI(t, "savepoint", "--dispose=")
	r.want(t, ExitUsage, "--dispose: the savepoint path must not be empty")
}

// --dispose refuses, and deletes nothing, while a job restored from the
// savepoint in NO_CLAIM mode has no checkpoint of its own yet; once its
// record is released the savepoint goes.
func TestSavepointDisposeRefusesWhileHeld(t *testing.T) {
	root := t.TempDir()
	sp := makeSavepoint(t, root)
	ctx := t.Context()
	s, err := storage.Open(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := pins.Write(ctx, s, "copy", pins.Restore{Root: storage.LocationOf(root), Path: filepath.Base(sp), Mode: pins.ModeNoClaim, JobID: "run1"}); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, "savepoint", "--dispose", sp)
	r.want(t, ExitUsage, "refusing to delete savepoint", "job copy")
	if _, err := os.Stat(filepath.Join(sp, storage.MetadataName)); err != nil {
		t.Fatalf("the held savepoint was touched: %v", err)
	}
	if err := pins.Release(ctx, s, "copy", 7); err != nil {
		t.Fatal(err)
	}
	runCLI(t, "savepoint", "--dispose", sp).want(t, ExitOK)
	if _, err := os.Stat(sp); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the released savepoint is still there: %v", err)
	}
}
