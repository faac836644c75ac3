package coordinator

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/weirstream/weir/internal/checkpoint"
)

// base is time zero of the scripts: t=1200ms means base + 1.2s.
var base = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// TestScripts runs testdata/*.txt. Commands (t is an offset from base, every
// duration in Go syntax):
//
//	init tasks=(0/0,0/1) [interval= min-pause= max-concurrent= timeout=
//	     tolerable= retained= first-id= job=]
//	restore latest=N [retained=(ids)]
//	tick t=
//	trigger t=                                  manual trigger
//	savepoint t= [format=canonical|native] [stop] [drain]
//	ack t= id= task= [handle= start-delay= alignment= sync= async= bytes=]
//	written t= id=                              _metadata is durable
//	metadata-failed t= id= [err=]
//	decline t= id= task= [kind=declined] [err=]
//	shutdown t= [reason=job-canceled]
//	state
//
// In err values, "+" stands for a space.
//
// Every command prints the actions it produced, then one state line:
// pending ids, retained ids, the failure count and NextTick as an offset.
// Regenerate with -rewrite.
func TestScripts(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		var c *Coordinator[string]
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			str := func(key, def string) string {
				if a, ok := d.Arg(key); ok {
					return a.SingleVal(t)
				}
				return def
			}
			dur := func(key string, def time.Duration) time.Duration {
				s := str(key, "")
				if s == "" {
					return def
				}
				v, err := time.ParseDuration(s)
				if err != nil {
					t.Fatalf("%s: %s: %v", d.Pos, key, err)
				}
				return v
			}
			num := func(key string, def int64) int64 {
				s := str(key, "")
				if s == "" {
					return def
				}
				v, err := strconv.ParseInt(s, 10, 64)
				if err != nil {
					t.Fatalf("%s: %s: %v", d.Pos, key, err)
				}
				return v
			}
			now := func() time.Time { return base.Add(dur("t", 0)) }
			task := func() TaskID {
				id, err := ParseTaskID(str("task", ""))
				if err != nil {
					t.Fatalf("%s: %v", d.Pos, err)
				}
				return id
			}
			var out strings.Builder
			switch d.Cmd {
			case "init":
				cfg := Config{
					Interval:          dur("interval", 0),
					MinPause:          dur("min-pause", 0),
					MaxConcurrent:     int(num("max-concurrent", 0)),
					Timeout:           dur("timeout", 0),
					TolerableFailures: int(num("tolerable", 0)),
					NumRetained:       int(num("retained", 0)),
					JobName:           str("job", "J"),
					Unaligned:         d.HasArg("unaligned"),
				}
				if a, ok := d.Arg("tasks"); ok {
					for _, v := range a.Vals {
						id, err := ParseTaskID(v)
						if err != nil {
							t.Fatalf("%s: %v", d.Pos, err)
						}
						cfg.Tasks = append(cfg.Tasks, id)
					}
				}
				var err error
				c, err = New[string](cfg, base, num("first-id", 1))
				if err != nil {
					return "error: " + err.Error() + "\n"
				}
			case "restore":
				var ids []int64
				if a, ok := d.Arg("retained"); ok {
					for _, v := range a.Vals {
						id, err := strconv.ParseInt(v, 10, 64)
						if err != nil {
							t.Fatalf("%s: %v", d.Pos, err)
						}
						ids = append(ids, id)
					}
				}
				if err := c.Restore(num("latest", 0), ids); err != nil {
					fmt.Fprintf(&out, "error: %v\n", err)
				}
			case "tick":
				c.Tick(now())
			case "trigger":
				id, err := c.TriggerManual(now(), checkpoint.FormatConfigured)
				if err != nil {
					fmt.Fprintf(&out, "error: %v\n", err)
				} else {
					fmt.Fprintf(&out, "id=%d\n", id)
				}
			case "savepoint":
				o := checkpoint.Options{Format: checkpoint.FormatCanonical, Synchronous: d.HasArg("stop"), Drain: d.HasArg("drain")}
				if str("format", "canonical") == "native" {
					o.Format = checkpoint.FormatNative
				}
				id, err := c.TriggerSavepoint(now(), o)
				if err != nil {
					fmt.Fprintf(&out, "error: %v\n", err)
				} else {
					fmt.Fprintf(&out, "id=%d\n", id)
				}
			case "ack":
				st := TaskStats{
					StartDelay: dur("start-delay", 0),
					Alignment:  dur("alignment", 0),
					Sync:       dur("sync", 0),
					Async:      dur("async", 0),
					Bytes:      num("bytes", 0),
				}
				tk := task()
				c.Ack(now(), num("id", 0), tk, st, str("handle", "h"+strconv.FormatInt(num("id", 0), 10)+"-"+tk.String()))
			case "written":
				c.MetadataWritten(now(), num("id", 0))
			case "metadata-failed":
				c.MetadataFailed(now(), num("id", 0), errors.New(strings.ReplaceAll(str("err", "disk full"), "+", " ")))
			case "decline":
				kind, err := ParseReason(str("kind", "declined"))
				if err != nil {
					t.Fatalf("%s: %v", d.Pos, err)
				}
				c.Decline(now(), num("id", 0), task(), errors.New(strings.ReplaceAll(str("err", "snapshot failed"), "+", " ")), kind)
			case "shutdown":
				var reason Reason
				if s := str("reason", ""); s != "" {
					var err error
					if reason, err = ParseReason(s); err != nil {
						t.Fatalf("%s: %v", d.Pos, err)
					}
				}
				c.Shutdown(now(), reason)
			case "state":
			default:
				t.Fatalf("%s: unknown command %q", d.Pos, d.Cmd)
			}
			if c == nil {
				return out.String()
			}
			for _, a := range c.Actions() {
				out.WriteString(a.String())
				out.WriteByte('\n')
			}
			next := "none"
			if nt := c.NextTick(); !nt.IsZero() {
				next = "+" + nt.Sub(base).String()
			}
			fmt.Fprintf(&out, "state: pending=%v retained=%v failures=%d next-tick=%s", c.Pending(), c.Retained(), c.Failures(), next)
			if c.Stopped() {
				out.WriteString(" stopped")
			}
			out.WriteByte('\n')
			return out.String()
		})
	})
}

func TestConfigValidate(t *testing.T) {
	cfg := Config{Interval: -1, MinPause: -1, MaxConcurrent: -1, Timeout: -1, TolerableFailures: -1, NumRetained: -1,
		Tasks: []TaskID{{0, 0}, {0, 0}}}
	cfg.EnsureDefaults()
	err := cfg.Validate()
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"interval", "min-pause", "max-concurrent", "timeout", "tolerable", "num-retained", "listed twice"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	var def Config
	def.Tasks = []TaskID{{0, 0}}
	def.EnsureDefaults()
	if err := def.Validate(); err != nil {
		t.Fatal(err)
	}
	if def.MaxConcurrent != 1 || def.Timeout != 10*time.Minute || def.NumRetained != 1 || def.TolerableFailures != 0 {
		t.Fatalf("defaults: %+v", def)
	}
	if _, err := New[string](Config{}, base, 1); err == nil {
		t.Fatal("New accepted a config without tasks")
	}
	if _, err := New[string](def, base, 0); err == nil {
		t.Fatal("New accepted first id 0")
	}
}
