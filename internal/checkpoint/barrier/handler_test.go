package barrier

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/weirstream/weir/internal/checkpoint"
)

// TestHandlerScripts runs the scripts in testdata. Commands:
//
//	init channels=N mode=exactly-once|at-least-once
//	barrier ch=C id=I trigger=T [now=N]   barrier I (triggered at T) on C
//	pbarrier ch=C id=I trigger=T [now=N]  the same as a priority event (unaligned)
//	tbarrier ch=C id=I trigger=T timeout=D [now=N]  a barrier of an unaligned
//	                                      checkpoint that starts aligned for D ms
//	tick now=N                            OnTick
//	cancel ch=C id=I [now=N]              cancellation barrier I on C
//	eop ch=C [now=N]                      end of partition on C
//	abort id=I reason=WORD                AbortFromTask(I, errors.New(WORD))
//
// now is a script clock in milliseconds that keeps its value until set again.
// Every command prints the actions, one a line, then the handler's state,
// after checking its invariants. Regenerate with -rewrite.
func TestHandlerScripts(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		var h *Handler
		var now int64
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			arg := func(key string) int64 {
				var v int64
				d.ScanArgs(t, key, &v)
				return v
			}
			if d.HasArg("now") {
				now = arg("now")
			}
			switch d.Cmd {
			case "init":
				var mode string
				d.ScanArgs(t, "mode", &mode)
				m := map[string]Mode{"exactly-once": ExactlyOnce, "at-least-once": AtLeastOnce}[mode]
				if m.String() != mode {
					t.Fatalf("%s: unknown mode %q", d.Pos, mode)
				}
				h = New(int(arg("channels")), m)
				now = 0
			case "barrier":
				h.OnBarrier(int(arg("ch")), arg("id"), arg("trigger"), checkpoint.Options{}, now)
			case "tbarrier":
				h.OnBarrier(int(arg("ch")), arg("id"), arg("trigger"), checkpoint.Options{Unaligned: true, AlignedTimeout: time.Duration(arg("timeout")) * time.Millisecond}, now)
			case "tick":
				h.OnTick(now)
			case "pbarrier":
				h.OnPriorityBarrier(int(arg("ch")), arg("id"), arg("trigger"), checkpoint.Options{}, now)
			case "cancel":
				h.OnCancelBarrier(int(arg("ch")), arg("id"), now)
			case "eop":
				h.OnEndOfPartition(int(arg("ch")), now)
			case "abort":
				var reason string
				d.ScanArgs(t, "reason", &reason)
				h.AbortFromTask(arg("id"), errors.New(reason))
			default:
				t.Fatalf("%s: unknown command %q", d.Pos, d.Cmd)
			}
			if err := h.check(); err != nil {
				t.Fatalf("%s: invariant broken: %v", d.Pos, err)
			}
			var sb strings.Builder
			for _, a := range h.Actions() {
				fmt.Fprintln(&sb, a)
			}
			if len(h.Actions()) != 0 {
				t.Fatalf("%s: Actions did not forget what it returned", d.Pos)
			}
			fmt.Fprintln(&sb, h)
			return sb.String()
		})
	})
}

func TestFailWraps(t *testing.T) {
	h := New(2, ExactlyOnce)
	h.OnBarrier(0, 1, 0, checkpoint.Options{}, 0)
	h.OnBarrier(0, 1, 0, checkpoint.Options{}, 0)
	acts := h.Actions()
	f, ok := acts[len(acts)-1].(Fail)
	if !ok || !errors.Is(f.Err, ErrDuplicateBarrier) {
		t.Fatalf("want a Fail wrapping ErrDuplicateBarrier, got %v", acts)
	}
	h.OnEndOfPartition(1, 0) // completes checkpoint 1
	h.OnEndOfPartition(1, 0)
	acts = h.Actions()
	f, ok = acts[len(acts)-1].(Fail)
	if !ok || !errors.Is(f.Err, ErrChannelEnded) {
		t.Fatalf("want a Fail wrapping ErrChannelEnded, got %v", acts)
	}
}

func TestAbortCarriesCause(t *testing.T) {
	h := New(2, AtLeastOnce)
	cause := errors.New("snapshot failed")
	h.OnBarrier(0, 4, 0, checkpoint.Options{}, 0)
	h.AbortFromTask(4, cause)
	acts := h.Actions()
	if len(acts) != 2 {
		t.Fatalf("got %v", acts)
	}
	if a, ok := acts[0].(Abort); !ok || a.ID != 4 || a.Reason != ReasonTask || !errors.Is(a.Cause, cause) {
		t.Fatalf("got %v", acts)
	}
	if f, ok := acts[1].(ForwardCancelBarrier); !ok || f.ID != 4 {
		t.Fatalf("got %v", acts)
	}
}

func TestTooManyPending(t *testing.T) {
	h := New(2, AtLeastOnce)
	for id := int64(1); id <= MaxTrackedCheckpoints+1; id++ {
		h.OnBarrier(0, id, 0, checkpoint.Options{}, 0)
	}
	acts := h.Actions()
	if len(acts) != 2 {
		t.Fatalf("got %v", acts)
	}
	if a, ok := acts[0].(Abort); !ok || a.ID != 1 || a.Reason != ReasonTooManyPending {
		t.Fatalf("got %v", acts)
	}
	h.OnBarrier(1, 1, 0, checkpoint.Options{}, 0) // given up: ignored
	if acts := h.Actions(); len(acts) != 0 {
		t.Fatalf("got %v", acts)
	}
	if err := h.check(); err != nil {
		t.Fatal(err)
	}
}
