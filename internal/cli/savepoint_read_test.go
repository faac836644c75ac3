package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/weirstream/weir/internal/jobs"
	fx "github.com/weirstream/weir/internal/stateread/statereadtest"
)

// runSavepointRead runs 'weir savepoint read args...' in process. The
// read command hangs under the 'weir savepoint' group; if the root
// command has no such group (or it lacks read), a minimal one is added
// here, so that the test does not depend on where the group is declared.
func runSavepointRead(t *testing.T, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	a := &app{stdout: &syncWriter{w: &stdout}, stderr: &syncWriter{w: &stderr}, registry: jobs.Builtin(), badFlags: map[string]bool{}}
	root := a.rootCommand()
	var group *cobra.Command
	for _, c := range root.Commands() {
		if c.Name() == "savepoint" {
			group = c
		}
	}
	if group == nil {
		group = &cobra.Command{Use: "savepoint", Args: cobra.ArbitraryArgs, RunE: a.groupRunE("command")}
		root.AddCommand(group)
	}
	hasRead := false
	for _, c := range group.Commands() {
		hasRead = hasRead || c.Name() == "read"
	}
	if !hasRead {
		group.AddCommand(a.savepointReadCommand())
	}
	root.SetArgs(append([]string{"savepoint", "read"}, args...))
	root.SetIn(strings.NewReader(""))
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	cmd, err := root.ExecuteContextC(context.Background())
	r := result{code: ExitOK}
	if err != nil {
		r.code = a.report(cmd, err)
	}
	r.stdout, r.stderr = stdout.String(), stderr.String()
	for _, bad := range []string{"goroutine ", "panic"} {
		if strings.Contains(r.stderr, bad) {
			t.Errorf("weir savepoint read %s: stderr contains %q:\n%s", strings.Join(args, " "), bad, r.stderr)
		}
	}
	return r
}

func TestSavepointReadListing(t *testing.T) {
	for _, native := range []bool{false, true} {
		loc := fx.Write(t, t.TempDir(), fx.Options{Native: native})
		r := runSavepointRead(t, loc)
		r.want(t, ExitOK)
		for _, want := range []string{
			`checkpoint 3 of job "fixture" (fixture/chk-3)`,
			`operator "count" (KeyedProcess): parallelism 2, max parallelism 8, key codec string`,
			"  count        value  -    5        5      key string, value int64\n",
			"  seen         list   -    5        15     key string, value string\n",
			"  timers: 5 event time, 0 processing time\n",
			`operator "numbers" (Source: numbers): parallelism 2, max parallelism 8`,
			"  splits          split         2\n",
		} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("native %v: listing lacks %q:\n%s", native, want, r.stdout)
			}
		}
		if r.stderr != "" {
			t.Errorf("stderr: %s", r.stderr)
		}

		r = runSavepointRead(t, filepath.Join(loc, "_metadata"), "--json")
		r.want(t, ExitOK)
		var l struct {
			Snapshot struct {
				Job string `json:"job"`
				ID  int64  `json:"checkpointId"`
			} `json:"snapshot"`
			Operators []struct {
				UID         string `json:"uid"`
				KeyedStates []struct {
					Name    string `json:"name"`
					Entries int    `json:"entries"`
					Items   int    `json:"items"`
				} `json:"keyedStates"`
			} `json:"operators"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &l); err != nil {
			t.Fatalf("--json output: %v\n%s", err, r.stdout)
		}
		if l.Snapshot.Job != fx.Job || l.Snapshot.ID != 3 || len(l.Operators) != 2 || l.Operators[0].UID != "count" ||
			len(l.Operators[0].KeyedStates) != 6 || l.Operators[0].KeyedStates[4].Name != "seen" || l.Operators[0].KeyedStates[4].Items != 15 {
			t.Errorf("native %v: JSON listing %+v", native, l)
		}
	}
}

func TestSavepointReadOperator(t *testing.T) {
	loc := fx.Write(t, t.TempDir(), fx.Options{Native: true})
	r := runSavepointRead(t, loc, "--uid", "count", "--state", "count", "--json")
	r.want(t, ExitOK)
	var d struct {
		KeyedStates []struct {
			Name    string `json:"name"`
			Total   int    `json:"total"`
			Entries []struct {
				KeyGroup int `json:"keyGroup"`
				Key      struct {
					Value string `json:"value"`
				} `json:"key"`
				Value struct {
					Value int64 `json:"value"`
				} `json:"value"`
			} `json:"entries"`
		} `json:"keyedStates"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &d); err != nil {
		t.Fatalf("--json output: %v\n%s", err, r.stdout)
	}
	if len(d.KeyedStates) != 1 || d.KeyedStates[0].Total != 5 || len(d.KeyedStates[0].Entries) != 5 {
		t.Fatalf("dump %+v", d)
	}
	got := map[string]int64{}
	for _, e := range d.KeyedStates[0].Entries {
		got[e.Key.Value] = e.Value.Value
		if e.KeyGroup != fx.KeyGroup(e.Key.Value) {
			t.Errorf("key %q in key group %d", e.Key.Value, e.KeyGroup)
		}
	}
	for i, k := range fx.Keys {
		if got[k] != int64(i+1) {
			t.Errorf("count of %s = %d, want %d (all: %v)", k, got[k], i+1, got)
		}
	}

	// Text, limited.
	r = runSavepointRead(t, loc, "--uid", "count", "--state", "seen", "--limit", "2")
	r.want(t, ExitOK)
	for _, want := range []string{
		`keyed state "seen": list, 5 entries; codecs: key string, value string`,
		"  KEY GROUP  KEY      ELEMENTS\n",
		`"alice"  ["k0-0"]`,
		"  ... 3 more\n",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("text dump lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "timers") || strings.Contains(r.stdout, `"count"`+":") {
		t.Errorf("--state seen printed more:\n%s", r.stdout)
	}
	// Operator list state.
	r = runSavepointRead(t, loc, "--uid", "numbers", "--state", "names")
	r.want(t, ExitOK)
	if !strings.Contains(r.stdout, `1        0x7265616465722031 "reader 1"`) {
		t.Errorf("operator list state:\n%s", r.stdout)
	}
}

func TestSavepointReadErrors(t *testing.T) {
	loc := fx.Write(t, t.TempDir(), fx.Options{})
	runSavepointRead(t).want(t, ExitUsage, "missing argument: 'weir savepoint read' takes the path of a savepoint or checkpoint")
	runSavepointRead(t, loc, "other").want(t, ExitUsage, `unexpected argument "other"`)
	runSavepointRead(t, loc, "--state", "count").want(t, ExitUsage, "--state needs --uid")
	runSavepointRead(t, loc, "--uid", "count", "--limit", "-1").want(t, ExitUsage, "--limit -1: must be 0 (no limit) or more")
	runSavepointRead(t, loc, "--limit", "many").want(t, ExitUsage, "--limit")
	runSavepointRead(t, filepath.Join(t.TempDir(), "gone")).want(t, ExitUsage, "no _metadata")
	runSavepointRead(t, loc, "--uid", "nosuch").want(t, ExitUsage, `unknown operator "nosuch": the snapshot has state of the operators "count", "numbers"`)
	runSavepointRead(t, loc, "--uid", "count", "--state", "nosuch").want(t, ExitUsage,
		`unknown state "nosuch": operator "count" has the states "count" (keyed value), "point" (keyed value), "recent" (keyed list)`)

	cl := fx.Write(t, t.TempDir(), fx.Options{Changelog: true})
	runSavepointRead(t, cl, "--uid", "count").want(t, ExitUsage, "changelog checkpoints cannot be read: take a savepoint first")
	r := runSavepointRead(t, cl)
	r.want(t, ExitOK)
	if !strings.Contains(r.stdout, "4 changelog records after the materialized snapshot, not read") {
		t.Errorf("changelog listing:\n%s", r.stdout)
	}

	// A damaged data file fails the read and is named.
	kst := filepath.Join(loc, "op-count-1.kst")
	data, err := os.ReadFile(kst)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)-6] ^= 1
	if err := os.WriteFile(kst, data, 0o644); err != nil {
		t.Fatal(err)
	}
	runSavepointRead(t, loc, "--uid", "count").want(t, ExitFailure, `operator "count" subtask 1: keyed state chk-3/op-count-1.kst: `, "checksum")
}
