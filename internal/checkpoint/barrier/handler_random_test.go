package barrier

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/checkpoint"
)

// TestRandomInterleavings feeds handlers random interleavings of barriers,
// cancellation barriers, skipped checkpoints, ends of partition and task
// aborts, delivering from a channel only while it is not blocked (as the gate
// does) and, per channel, in checkpoint order (as the network guarantees). It
// checks after every input:
//
//   - Block only in exactly-once mode, of the channel that just delivered a
//     barrier, never twice; Unblock only of a blocked channel;
//   - a channel is never left blocked for a checkpoint that triggered or
//     aborted, and blocked channels never stall the run;
//   - each id triggers at most once and is never both triggered and aborted;
//     each Abort is followed by its ForwardCancelBarrier;
//   - TriggerSnapshot n only after every live channel delivered barrier n;
//   - what goes downstream (triggered barriers, forwarded cancellations) has
//     strictly increasing ids, so ids trigger in increasing order;
//   - at the end nothing is pending or blocked, and in runs without skips,
//     cancellations or task aborts every checkpoint seen triggered.
//
// In exactly-once runs some channels deliver their barriers as priority
// events (unaligned checkpoints; the others are pointwise edges that stay
// aligned). Then also:
//
//   - an unaligned TriggerSnapshot comes only at a priority barrier, and
//     from it on every live channel that has not delivered the barrier
//     persists (StartPersisting) until its barrier arrives or it ends
//     (StopPersisting), never longer, and the triggering channel persists
//     what its barrier overtook (PersistOvertaken, priority barriers only);
//   - ChannelStateComplete comes once per unaligned trigger, when no
//     channel persists any more, unless the checkpoint was aborted first.
func TestRandomInterleavings(t *testing.T) {
	runs := 3000
	if testing.Short() {
		runs = 300
	}
	for seed := uint64(0); seed < uint64(runs); seed++ {
		if err := randomRun(seed); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
	}
}

type step struct {
	kind byte // 'b' barrier, 'c' cancellation barrier, 'e' end of partition
	id   int64
}

func randomRun(seed uint64) (err error) {
	rng := rand.New(rand.NewPCG(seed, 0x6261727269657221))
	channels := 1 + rng.IntN(5)
	checkpoints := 1 + rng.IntN(8)
	mode := ExactlyOnce
	if rng.IntN(2) == 1 {
		mode = AtLeastOnce
	}
	clean := true // no skips, cancellations or task aborts
	var opts checkpoint.Options
	if mode == ExactlyOnce && rng.IntN(3) == 0 {
		opts = checkpoint.Options{Unaligned: true, AlignedTimeout: time.Duration(1+rng.IntN(8)) * time.Millisecond}
	}
	priority := make([]bool, channels)
	if mode == ExactlyOnce && rng.IntN(3) > 0 {
		for ch := range priority {
			priority[ch] = rng.IntN(4) > 0
		}
	}

	scripts := make([][]step, channels)
	for ch := range scripts {
		last := checkpoints
		if rng.IntN(3) == 0 {
			last = rng.IntN(checkpoints + 1) // ends early
		}
		for id := int64(1); id <= int64(last); id++ {
			switch r := rng.IntN(100); {
			case r < 80:
				scripts[ch] = append(scripts[ch], step{'b', id})
			case r < 90:
				scripts[ch] = append(scripts[ch], step{'c', id})
				clean = false
			default:
				clean = false // skipped
			}
		}
		scripts[ch] = append(scripts[ch], step{kind: 'e'})
	}

	var log []string
	defer func() {
		if err != nil {
			err = fmt.Errorf("%s, %d channels (priority %v, %v): %w\nscripts: %v\nlog:\n%s", mode, channels, priority, opts, err, scripts, joinLines(log))
		}
	}()

	h := New(channels, mode)
	pos := make([]int, channels)
	ended := make([]bool, channels)
	blocked := make([]bool, channels)
	blockedFor := make([]int64, channels)
	delivered := make([]map[int64]bool, channels)
	for ch := range delivered {
		delivered[ch] = map[int64]bool{}
	}
	triggered := map[int64]bool{}
	aborted := map[int64]bool{}
	unaligned := map[int64]bool{}         // triggered unaligned, channel state not complete
	persisting := make([]int64, channels) // checkpoint a channel persists for, 0: none
	seen := map[int64]bool{}
	var downstream int64
	now := int64(1000)

	for {
		now += int64(rng.IntN(3))
		var ready []int
		for ch := range scripts {
			if pos[ch] < len(scripts[ch]) && !blocked[ch] {
				ready = append(ready, ch)
			}
		}
		stepCh := -1
		var st step
		switch {
		case opts.AlignedTimeout > 0 && rng.IntN(5) == 0:
			log = append(log, fmt.Sprintf("tick @%d", now))
			h.OnTick(now)
		case rng.IntN(40) == 0:
			id := 1 + rng.Int64N(int64(checkpoints)+1)
			clean = false
			log = append(log, fmt.Sprintf("abort-from-task %d", id))
			h.AbortFromTask(id, errors.New("random"))
		case len(ready) == 0:
			for ch := range blocked {
				if blocked[ch] {
					return fmt.Errorf("channel %d stays blocked for %d and nothing else can be delivered", ch, blockedFor[ch])
				}
			}
			if len(h.pending) != 0 {
				return fmt.Errorf("all channels ended with checkpoints pending: %s", h)
			}
			if len(unaligned) != 0 {
				return fmt.Errorf("unaligned checkpoints without complete channel state: %v", unaligned)
			}
			if clean {
				for id := range seen {
					if !triggered[id] {
						return fmt.Errorf("clean run: checkpoint %d seen but never triggered", id)
					}
				}
			}
			return nil
		default:
			stepCh = ready[rng.IntN(len(ready))]
			st = scripts[stepCh][pos[stepCh]]
			pos[stepCh]++
			log = append(log, fmt.Sprintf("ch%d %c%d @%d", stepCh, st.kind, st.id, now))
			switch st.kind {
			case 'b':
				seen[st.id] = true
				delivered[stepCh][st.id] = true
				if priority[stepCh] {
					h.OnPriorityBarrier(stepCh, st.id, st.id*100, opts, now)
				} else {
					h.OnBarrier(stepCh, st.id, st.id*100, opts, now)
				}
			case 'c':
				h.OnCancelBarrier(stepCh, st.id, now)
			case 'e':
				ended[stepCh] = true
				h.OnEndOfPartition(stepCh, now)
			}
		}
		if err := h.check(); err != nil {
			return err
		}

		acts := h.Actions()
		for i := 0; i < len(acts); i++ {
			log = append(log, "  "+acts[i].String())
			switch a := acts[i].(type) {
			case Block:
				if mode != ExactlyOnce || a.Ch != stepCh || st.kind != 'b' || blocked[a.Ch] || ended[a.Ch] {
					return fmt.Errorf("unexpected %v", a)
				}
				blocked[a.Ch], blockedFor[a.Ch] = true, st.id
			case Unblock:
				if !blocked[a.Ch] {
					return fmt.Errorf("%v of a channel that is not blocked", a)
				}
				blocked[a.Ch] = false
			case TriggerSnapshot:
				if triggered[a.ID] || aborted[a.ID] {
					return fmt.Errorf("%v of a settled checkpoint", a)
				}
				if a.Unaligned {
					atPriority := stepCh >= 0 && st.kind == 'b' && priority[stepCh] && st.id == a.ID
					timedOut := opts.AlignedTimeout > 0 && now >= a.TriggerTime+opts.AlignedTimeout.Milliseconds()
					if !atPriority && !timedOut {
						return fmt.Errorf("%v neither at a priority barrier nor after its aligned timeout", a)
					}
					unaligned[a.ID] = true
				}
				for ch := range delivered {
					if a.Unaligned {
						break
					}
					if !ended[ch] && !delivered[ch][a.ID] {
						return fmt.Errorf("%v before live channel %d delivered it", a, ch)
					}
				}
				if a.ID <= downstream {
					return fmt.Errorf("%v after %d went downstream", a, downstream)
				}
				if a.TriggerTime != a.ID*100 || a.StartDelay < 0 || a.Alignment < 0 {
					return fmt.Errorf("bad statistics in %v", a)
				}
				triggered[a.ID], downstream = true, a.ID
			case Abort:
				// An unaligned checkpoint triggered (its barrier went
				// downstream) may still be aborted until its channel
				// state is complete.
				if (triggered[a.ID] && !unaligned[a.ID]) || aborted[a.ID] {
					return fmt.Errorf("%v of a settled checkpoint", a)
				}
				if a.ID < downstream || (a.ID == downstream && !unaligned[a.ID]) {
					return fmt.Errorf("%v after %d went downstream", a, downstream)
				}
				if i+1 == len(acts) || acts[i+1] != (ForwardCancelBarrier{ID: a.ID}) {
					return fmt.Errorf("%v not followed by its ForwardCancelBarrier", a)
				}
				i++
				log = append(log, "  "+acts[i].String())
				aborted[a.ID], downstream = true, a.ID
				if unaligned[a.ID] {
					// The task drops the channel state collected for it.
					delete(unaligned, a.ID)
					for ch := range persisting {
						if persisting[ch] == a.ID {
							persisting[ch] = 0
						}
					}
				}
			case StartPersisting:
				if !unaligned[a.ID] || persisting[a.Ch] != 0 || ended[a.Ch] ||
					(delivered[a.Ch][a.ID] && (a.Ch != stepCh || st.id != a.ID)) {
					return fmt.Errorf("unexpected %v", a)
				}
				persisting[a.Ch] = a.ID
			case PersistOvertaken:
				if persisting[a.Ch] != a.ID || a.Ch != stepCh || st.kind != 'b' || st.id != a.ID || !priority[a.Ch] {
					return fmt.Errorf("unexpected %v", a)
				}
			case StopPersisting:
				if persisting[a.Ch] != a.ID || a.Ch != stepCh || !((st.kind == 'b' && st.id == a.ID) || st.kind == 'e') {
					return fmt.Errorf("unexpected %v", a)
				}
				persisting[a.Ch] = 0
			case ScheduleTimer:
				if opts.AlignedTimeout == 0 || a.At != a.ID*100+opts.AlignedTimeout.Milliseconds() {
					return fmt.Errorf("unexpected %v", a)
				}
			case ChannelStateComplete:
				if !unaligned[a.ID] {
					return fmt.Errorf("unexpected %v", a)
				}
				for ch, id := range persisting {
					if id != 0 {
						return fmt.Errorf("%v while channel %d persists for %d", a, ch, id)
					}
				}
				delete(unaligned, a.ID)
			default:
				return fmt.Errorf("unexpected %v", a)
			}
		}
		for ch, b := range blocked {
			if b && (triggered[blockedFor[ch]] || aborted[blockedFor[ch]]) {
				return fmt.Errorf("channel %d left blocked after checkpoint %d settled", ch, blockedFor[ch])
			}
		}
		for id := range unaligned {
			for ch := range persisting {
				if !ended[ch] && !delivered[ch][id] && persisting[ch] != id {
					return fmt.Errorf("channel %d owes barrier %d of an unaligned checkpoint and does not persist", ch, id)
				}
			}
		}
	}
}

func joinLines(lines []string) string {
	s := ""
	for _, l := range lines {
		s += l + "\n"
	}
	return s
}
