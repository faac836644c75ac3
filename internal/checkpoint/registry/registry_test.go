package registry

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
)

// TestOverlappingIncrementalReuse is finding 1 of issue 12: checkpoint 5
// re-uploads an SST (b) because 4 is not confirmed yet; 4's completion
// reaches the task before barrier 6, so 6 reuses 4's upload (a); then 5
// completes and subsumes 4. The old registry freed a there, and 6
// referenced a missing file.
func TestOverlappingIncrementalReuse(t *testing.T) {
	g := New()
	g.Running()
	g.Adopt(3, nil)
	g.Triggered(4, 3)
	g.Triggered(5, 3)
	g.Acked(4, []string{"shared/a"})
	g.Completed(4, []string{"shared/a"})
	g.Triggered(6, 4) // the task knows 4 when it snapshots 6: it reuses a
	g.Acked(5, []string{"shared/b"})
	g.Completed(5, []string{"shared/b"})
	g.Released(3)
	g.Released(4) // retained 1: 5 subsumes 4
	if got := g.Collect(); slices.Contains(got, "shared/a") {
		t.Fatalf("Collect = %v: deleted a, which pending checkpoint 6 (triggered knowing 4) may still reference", got)
	}
	g.Acked(6, []string{"shared/a"})
	g.Completed(6, []string{"shared/a"})
	g.Released(5)
	if got := g.Collect(); !slices.Equal(got, []string{"shared/b"}) {
		t.Fatalf("after 6 completed and 5 was released: Collect = %v, want [shared/b]", got)
	}
	if !g.Retained("shared/a") {
		t.Fatal("shared/a is not retained by 6")
	}
}

// A file that only a completed-then-released checkpoint used goes once
// every pending checkpoint was triggered after a newer completion.
func TestReleasedFileWaitsForOlderTriggers(t *testing.T) {
	g := New()
	g.Running()
	g.Triggered(1, 0)
	g.Acked(1, []string{"shared/x"})
	g.Completed(1, []string{"shared/x"})
	g.Triggered(2, 1) // may reuse x
	g.Triggered(3, 1)
	g.Acked(3, []string{"shared/y"})
	g.Completed(3, []string{"shared/y"}) // 2 is still pending (overtaken)
	g.Released(1)
	if got := g.Collect(); len(got) != 0 {
		t.Fatalf("Collect = %v while checkpoint 2 (triggered knowing 1) is pending", got)
	}
	g.Aborted(2)
	if got := g.Collect(); !slices.Equal(got, []string{"shared/x"}) {
		t.Fatalf("after 2 was aborted: Collect = %v, want [shared/x]", got)
	}
	if got := g.Collect(); len(got) != 0 {
		t.Fatalf("second Collect = %v, want nothing (files are forgotten once returned)", got)
	}
}

// A changelog segment of an aborted checkpoint stays: the subtask's next
// snapshot references it again, as long as no newer checkpoint completed
// without it.
func TestAbortedAckKeepsFileUntilANewerCompletion(t *testing.T) {
	g := New()
	g.Running()
	g.Triggered(1, 0)
	g.Acked(1, []string{"shared/seg-1"})
	g.Aborted(1)
	if got := g.Collect(); len(got) != 0 {
		t.Fatalf("Collect = %v: no checkpoint completed since seg-1 was used, the log may still build on it", got)
	}
	g.Triggered(2, 0)
	g.Acked(2, []string{"shared/seg-2"}) // a materialization retired seg-1
	g.Completed(2, []string{"shared/seg-2"})
	if got := g.Collect(); !slices.Equal(got, []string{"shared/seg-1"}) {
		t.Fatalf("Collect = %v, want [shared/seg-1]", got)
	}
	// A late acknowledgement of an aborted checkpoint: its files are the
	// registry's and go by the same rule.
	g.Acked(1, []string{"shared/late"})
	if got := g.Collect(); !slices.Equal(got, []string{"shared/late"}) {
		t.Fatalf("late ack: Collect = %v, want [shared/late]", got)
	}
}

func TestIdleAndSweep(t *testing.T) {
	g := New()
	g.Running()
	g.Triggered(1, 0)
	g.Acked(1, []string{"shared/a", "shared/b"})
	g.Completed(1, []string{"shared/a"})
	g.Triggered(2, 1)
	g.Acked(2, []string{"shared/c"})
	if _, err := g.Sweep(nil, nil); err == nil {
		t.Fatal("Sweep while running: no error")
	}
	if got := g.Collect(); len(got) != 0 {
		t.Fatalf("Collect = %v while running, want nothing", got)
	}
	g.Idle()
	got, err := g.Sweep([]string{"shared/a", "shared/b", "shared/c", "shared/orphan", "shared/old-run"},
		map[string]bool{"shared/old-run": true})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"shared/b", "shared/c", "shared/orphan"}; !slices.Equal(got, want) {
		t.Fatalf("Sweep = %v, want %v", got, want)
	}
}

// TestRandomSchedules drives the registry with random interleavings of a
// model job: subtasks reuse only files of the newest completion they know
// (at least the trigger's LastCompleted, sometimes a newer one that reached
// them first), checkpoints complete out of order and subsume, some abort.
// After every step no retained or pending-and-acknowledged checkpoint may
// reference a deleted file, and no snapshot may reuse one.
func TestRandomSchedules(t *testing.T) {
	for run := 0; run < 200; run++ {
		seed := uint64(run)
		rng := rand.New(rand.NewPCG(seed, 42))
		randomSchedule(t, rng, seed)
	}
}

func randomSchedule(t *testing.T, rng *rand.Rand, seed uint64) {
	g := New()
	g.Running()
	deleted := map[string]bool{}
	type pend struct {
		id, lastCompleted int64
		acked             bool
		files             []string
	}
	var (
		next      int64 = 1
		completed       = map[int64][]string{}
		retained  []int64
		pending   []*pend
		newest    int64
		known     int64 // newest completion the (single) subtask processed
		fileSeq   int
	)
	newFile := func() string { fileSeq++; return "shared/f" + strconv.Itoa(fileSeq) }
	check := func(step string) {
		for _, id := range retained {
			for _, f := range completed[id] {
				if deleted[f] {
					t.Fatalf("seed %d, %s: retained checkpoint %d references deleted %s", seed, step, id, f)
				}
			}
		}
		for _, p := range pending {
			for _, f := range p.files {
				if deleted[f] {
					t.Fatalf("seed %d, %s: pending checkpoint %d references deleted %s", seed, step, p.id, f)
				}
			}
		}
	}
	for step := 0; step < 60; step++ {
		switch r := rng.IntN(10); {
		case r < 3 && len(pending) < 3:
			g.Triggered(next, newest)
			pending = append(pending, &pend{id: next, lastCompleted: newest})
			next++
		case r < 6 && len(pending) > 0:
			// A subtask snapshots and acknowledges a pending checkpoint. It
			// knows at least the trigger's LastCompleted; its reuse is the
			// newest completion it knows, plus one new upload.
			p := pending[rng.IntN(len(pending))]
			if p.acked {
				continue
			}
			k := max(known, p.lastCompleted)
			if rng.IntN(2) == 0 {
				k = max(k, newest) // a newer notification came first
			}
			known = k
			files := []string{newFile()}
			if k > 0 {
				old := completed[k]
				for _, f := range old {
					if rng.IntN(3) > 0 {
						if deleted[f] {
							t.Fatalf("seed %d: snapshot of %d reuses deleted %s of %d", seed, p.id, f, k)
						}
						files = append(files, f)
					}
				}
			}
			p.acked, p.files = true, files
			g.Acked(p.id, files)
		case r < 8 && len(pending) > 0:
			i := rng.IntN(len(pending))
			p := pending[i]
			if !p.acked {
				continue
			}
			pending = slices.Delete(pending, i, i+1)
			// Completion aborts older pending checkpoints.
			var keep []*pend
			for _, q := range pending {
				if q.id < p.id {
					g.Aborted(q.id)
					continue
				}
				keep = append(keep, q)
			}
			pending = keep
			if p.id < newest {
				g.Aborted(p.id)
				break
			}
			completed[p.id] = p.files
			g.Completed(p.id, p.files)
			newest = p.id
			retained = append(retained, p.id)
			if len(retained) > 1+rng.IntN(2) {
				g.Released(retained[0])
				retained = retained[1:]
			}
		case len(pending) > 0:
			i := rng.IntN(len(pending))
			g.Aborted(pending[i].id)
			pending = slices.Delete(pending, i, i+1)
		}
		for _, f := range g.Collect() {
			deleted[f] = true
		}
		check("step " + strconv.Itoa(step))
	}
}

// A checkpoint aborted while its _metadata was written, whose directory
// could not be deleted, may be complete on disk: Keep holds its files
// without holding back the deletion of others; the sweep decides later.
func TestKeepHoldsOnlyTheUndeletedCheckpointsFiles(t *testing.T) {
	g := New()
	g.Running()
	g.Triggered(1, 0)
	g.Acked(1, []string{"shared/a"})
	g.Completed(1, []string{"shared/a"})
	g.Triggered(2, 1)
	g.Acked(2, []string{"shared/b"})
	g.Keep(2) // its chk-2 could not be deleted
	g.Triggered(3, 1)
	g.Acked(3, []string{"shared/c"})
	g.Completed(3, []string{"shared/c"})
	g.Released(1)
	if got := g.Collect(); !slices.Equal(got, []string{"shared/a"}) {
		t.Fatalf("Collect = %v, want [shared/a]: kept b, and a kept checkpoint must not block other deletions", got)
	}
	g.Idle()
	g.DropKept()
	got, err := g.Sweep([]string{"shared/b", "shared/c"}, nil)
	if err != nil || !slices.Equal(got, []string{"shared/b"}) {
		t.Fatalf("Sweep = %v, %v; want [shared/b] once the sweep found chk-2 gone", got, err)
	}
}
