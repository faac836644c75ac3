package network

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// TestCreditScripts runs the scripts in testdata/credit*.txt. Commands:
//
//	init channels=N exclusive=E floating=F
//	buffer ch=C backlog=B      a data buffer arrived
//	backlog ch=C backlog=B     the sender announced its backlog
//	release ch=C               the consumer finished a buffer
//	eop ch=C                   end of partition on C
//	grants                     drain the credit owed to senders
//
// Every command prints the gate's state (or the error) after checking the
// accounting invariants. Regenerate with -rewrite.
func TestCreditScripts(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		if !strings.Contains(path, "credit") {
			t.Skip("not a credit script")
		}
		var g *CreditGate
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			arg := func(key string) int {
				var v int
				d.ScanArgs(t, key, &v)
				return v
			}
			var out string
			switch d.Cmd {
			case "init":
				g = NewCreditGate(arg("channels"), arg("exclusive"), arg("floating"))
			case "buffer":
				if err := g.OnBuffer(arg("ch"), arg("backlog")); err != nil {
					return "error: " + err.Error() + "\n"
				}
			case "backlog":
				g.OnBacklog(arg("ch"), arg("backlog"))
			case "release":
				g.OnRelease(arg("ch"))
			case "eop":
				g.OnEndOfPartition(arg("ch"))
			case "grants":
				var sb strings.Builder
				for _, gr := range g.Grants(nil) {
					fmt.Fprintf(&sb, "ch%d +%d\n", gr.Channel, gr.N)
				}
				if sb.Len() == 0 {
					sb.WriteString("none\n")
				}
				out = sb.String()
			default:
				t.Fatalf("unknown command %q", d.Cmd)
			}
			if err := g.Check(); err != nil {
				t.Fatalf("%s: invariant broken: %v", d.Pos, err)
			}
			if out != "" {
				return out
			}
			return g.String()
		})
	})
}
