package watermark

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// cop is one Combiner call and its expected result.
type cop struct {
	kind     byte // 'u' Update, 'i' SetIdle(true), 'a' SetIdle(false), 'e' End
	input    int
	wm       int64 // for 'u'
	want     int64
	advanced bool
	allIdle  bool
}

func u(in int, wm, want int64, adv bool) cop {
	return cop{kind: 'u', input: in, wm: wm, want: want, advanced: adv}
}
func idle(in int, want int64, adv bool) cop {
	return cop{kind: 'i', input: in, want: want, advanced: adv}
}
func act(in int, want int64, adv bool) cop {
	return cop{kind: 'a', input: in, want: want, advanced: adv}
}
func end(in int, want int64, adv bool) cop {
	return cop{kind: 'e', input: in, want: want, advanced: adv}
}

// allIdle marks the op as expected to leave the output idle.
func (o cop) outputIdle() cop { o.allIdle = true; return o }

func TestCombiner(t *testing.T) {
	const no = NoWatermark
	for _, c := range []struct {
		name   string
		inputs int
		ops    []cop
	}{
		{"single input", 1, []cop{
			u(0, 5, 5, true), u(0, 5, 5, false), u(0, 3, 5, false), u(0, 9, 9, true),
		}},
		{"minimum over inputs", 3, []cop{
			u(0, 10, no, false), u(1, 20, no, false), u(2, 5, 5, true),
			u(2, 30, 10, true), u(0, 25, 20, true), u(1, 40, 25, true),
		}},
		{"out of order per input is ignored", 2, []cop{
			u(0, 10, no, false), u(1, 10, 10, true),
			u(0, 7, 10, false), u(1, 3, 10, false), u(0, 12, 10, false), u(1, 11, 11, true),
		}},
		{"equal watermarks advance once", 2, []cop{
			u(0, 10, no, false), u(1, 10, 10, true), u(0, 10, 10, false),
		}},
		{"NoWatermark update is ignored", 1, []cop{u(0, no, no, false)}},
		{"idle input is ignored", 2, []cop{
			u(0, 10, no, false),
			idle(1, 10, true), // 1 had no watermark; now only 0 counts
			u(0, 20, 20, true),
			idle(1, 20, false), // again: no-op
		}},
		{"idle input holding the minimum releases it", 3, []cop{
			u(0, 10, no, false), u(1, 30, no, false), u(2, 20, 10, true),
			idle(0, 20, true), idle(2, 30, true),
		}},
		{"all idle: no advance, output idle", 2, []cop{
			u(0, 10, no, false), u(1, 20, 10, true),
			idle(0, 20, true),
			idle(1, 20, false).outputIdle(),
			u(1, 50, 20, false).outputIdle(), // kept for later, not counted
			act(1, 50, true),                 // resumes with its later watermark
		}},
		{"rejoining behind does not hold back the others", 2, []cop{
			u(0, 100, no, false), u(1, 10, 10, true),
			idle(1, 100, true),
			act(1, 100, false), // behind at 10: not aligned
			u(0, 200, 200, true),
			u(1, 150, 200, false), // still behind
			u(1, 200, 200, false), // caught up: aligned, holds the minimum
			u(0, 300, 200, false),
			u(1, 250, 250, true),
		}},
		{"all active inputs behind: no advance until one catches up", 2, []cop{
			u(0, 10, no, false), u(1, 100, 10, true),
			idle(0, 100, true),
			idle(1, 100, false).outputIdle(),
			act(0, 100, false), // 0 at 10, behind
			u(0, 50, 100, false),
			u(0, 120, 120, true),
		}},
		{"end of input", 2, []cop{
			u(0, 10, no, false), u(1, 20, 10, true),
			end(0, 20, true),
			u(0, 100, 20, false), // updates of an ended input are ignored
			end(0, 20, false),
			u(1, 30, 30, true),
			end(1, MaxWatermark, true),
			end(1, MaxWatermark, false),
		}},
		{"end with the others idle does not emit MaxWatermark", 2, []cop{
			u(0, 10, no, false), u(1, 20, 10, true),
			idle(1, 10, false),
			end(0, 10, false).outputIdle(),
			act(1, 20, true), // 1 at 20 is ahead: aligned at once
			u(1, 40, 40, true),
			end(1, MaxWatermark, true),
		}},
		{"end of an idle input", 2, []cop{
			u(0, 10, no, false),
			idle(1, 10, true),
			end(1, 10, false),
			act(1, 10, false), // ignored after end
			end(0, MaxWatermark, true),
		}},
		{"end before any watermark", 3, []cop{
			end(0, no, false), end(1, no, false), end(2, MaxWatermark, true),
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cb := NewCombiner(c.inputs)
			for i, o := range c.ops {
				var got int64
				var adv bool
				switch o.kind {
				case 'u':
					got, adv = cb.Update(o.input, o.wm)
				case 'i':
					got, adv = cb.SetIdle(o.input, true)
				case 'a':
					got, adv = cb.SetIdle(o.input, false)
				case 'e':
					got, adv = cb.End(o.input)
				}
				if got != o.want || adv != o.advanced {
					t.Fatalf("op %d (%c input %d wm %d) = %d, %v; want %d, %v", i, o.kind, o.input, o.wm, got, adv, o.want, o.advanced)
				}
				if w := cb.Watermark(); w != got {
					t.Fatalf("op %d: Watermark() = %d, but the call returned %d", i, w, got)
				}
				if ai := cb.AllIdle(); ai != o.allIdle {
					t.Fatalf("op %d: AllIdle() = %v, want %v", i, ai, o.allIdle)
				}
			}
		})
	}
}

func TestCombinerAllIdle(t *testing.T) {
	c := NewCombiner(3)
	check := func(want bool) {
		t.Helper()
		if got := c.AllIdle(); got != want {
			t.Fatalf("AllIdle() = %v, want %v", got, want)
		}
	}
	check(false)
	c.SetIdle(0, true)
	c.SetIdle(1, true)
	check(false)
	c.End(2)
	check(true) // the inputs left are all idle
	c.SetIdle(1, false)
	check(false)
	c.End(0)
	c.End(1)
	check(false) // ended, not idle
}

func TestCombinerPanics(t *testing.T) {
	for name, f := range map[string]func(){
		"zero inputs":  func() { NewCombiner(0) },
		"input range":  func() { NewCombiner(2).Update(2, 1) },
		"negative idx": func() { NewCombiner(2).SetIdle(-1, true) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("did not panic")
				}
			}()
			f()
		})
	}
}

// TestCombinerInvariants runs random calls and checks the properties that
// hold whatever the order: the output never decreases, advanced is set
// exactly when it increases, it never passes an active aligned input, and
// it reaches MaxWatermark exactly when all inputs have ended.
func TestCombinerInvariants(t *testing.T) {
	for seed := range uint64(50) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			n := 1 + rng.IntN(5)
			c := NewCombiner(n)
			wms := make([]int64, n)
			for i := range wms {
				wms[i] = NoWatermark
			}
			ended := make([]bool, n)
			last := NoWatermark
			for i := range 500 {
				in := rng.IntN(n)
				var got int64
				var adv bool
				switch r := rng.IntN(20); {
				case r < 14:
					wm := int64(i) + rng.Int64N(20) - 10
					got, adv = c.Update(in, wm)
					if !ended[in] {
						wms[in] = max(wms[in], wm)
					}
				case r < 19:
					got, adv = c.SetIdle(in, rng.IntN(2) == 0)
				default:
					got, adv = c.End(in)
					ended[in] = true
				}
				if got < last || adv != (got > last) {
					t.Fatalf("op %d: went from %d to %d with advanced=%v", i, last, got, adv)
				}
				allEnded := true
				for j := range n {
					allEnded = allEnded && ended[j]
					if !ended[j] && got > wms[j] && !c.inputs[j].idle && c.inputs[j].wm >= last {
						t.Fatalf("op %d: output %d passed aligned input %d at %d", i, got, j, wms[j])
					}
				}
				if (got == MaxWatermark) != allEnded {
					t.Fatalf("op %d: output %d with all ended = %v", i, got, allEnded)
				}
				last = got
			}
		})
	}
}
