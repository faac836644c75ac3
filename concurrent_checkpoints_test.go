package weir_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/internal/checkpoint/metadata"
)

// Overlapping checkpoints (execution.checkpointing.max-concurrent-checkpoints
// 2 and 3, 10 ms intervals) on incremental and changelog checkpoints, with
// failures in the middle: after every completed checkpoint every file it
// references exists (clEnv.checkLive), after every run shared/ holds
// exactly what the retained checkpoints reference (clEnv.checkFiles), and
// the output is exactly once. This is finding 1 / bug A of issue 12: a
// checkpoint reused an upload that the completion of an overlapping one
// had just released, and referenced a deleted file.
func TestConcurrentCheckpointsKeepReferencedFiles(t *testing.T) {
	t.Parallel()
	const n, keys = 20_000, 5_000 // many keys: many SST files change per checkpoint
	modes := []struct {
		name        string
		backend     string
		incremental bool
		changelog   bool
	}{
		{"pebble-incremental", weir.BackendPebble, true, false},
		{"hashmap-changelog", weir.BackendHashMap, false, true},
		{"pebble-incremental-changelog", weir.BackendPebble, true, true},
	}
	for _, m := range modes {
		for _, concurrent := range []int{2, 3} {
			t.Run(fmt.Sprintf("%s/max-concurrent-%d", m.name, concurrent), func(t *testing.T) {
				t.Parallel()
				seed := rand.Uint64()
				t.Logf("seed %d", seed)
				rng := rand.New(rand.NewPCG(seed, 12))
				var mu sync.Mutex
				chance := func(p float64) bool {
					mu.Lock()
					defer mu.Unlock()
					return rng.Float64() < p
				}
				e := newCLEnv(t, "counter")
				c := clCfg{p: 2, backend: m.backend, incremental: m.incremental, n: n, keys: keys,
					interval: 10 * time.Millisecond, concurrent: concurrent, tolerable: 1000, retained: 1,
					restart: weir.RestartOptions{Type: "fixed-delay", FixedDelayAttempts: 1000, FixedDelay: time.Millisecond},
					timeout: 3 * time.Minute}
				if m.changelog {
					c.changelog = weir.ChangelogOptions{Enabled: true, MaterializeInterval: 150 * time.Millisecond}
				}
				// Upload failures decline checkpoints now and then; a
				// failure in the count function restarts the job (a kill of
				// its tasks) a few times.
				var completed, overlapped, failures atomic.Int64
				var inFlight sync.Map
				c.hooks = weir.TestHooks{
					Upload: func(_, _ int, id int64) error {
						inFlight.Store(id, true)
						if chance(0.03) {
							return errors.New("injected upload failure")
						}
						return nil
					},
					Completed: func(id int64, cp *metadata.Checkpoint) {
						completed.Add(1)
						inFlight.Range(func(k, _ any) bool {
							if k.(int64) > id {
								overlapped.Add(1)
								return false
							}
							return true
						})
					},
				}
				c.build = func(env *weir.Environment, c *clCfg, out weir.Sink[string]) {
					counterJobWith(env, c.n, c.keys, out, counterHooks{
						// Every record of the last quarter is slow until
						// the scenario happened (a loaded machine may
						// otherwise end the input first).
						throttle: func(i int64) bool {
							return i%50 == 0 || i > 3*n/4 && (completed.Load() < 3 || overlapped.Load() == 0)
						},
						fail: func(_ int, i int64) bool {
							return i > 0 && i%(n/4) == 0 && failures.Add(1) <= 3
						},
					})
				}
				r := e.run(c)
				if r.err != nil {
					t.Fatalf("run: %v", r.err)
				}
				e.checkFiles("after the run")
				checkCounterOutput(t, e.out(), n, keys)
				if completed.Load() < 3 || overlapped.Load() == 0 || r.res.Restarts == 0 {
					t.Fatalf("scenario did not happen: %d checkpoints completed, %d while a newer one was in flight, %d restarts",
						completed.Load(), overlapped.Load(), r.res.Restarts)
				}
				t.Logf("%d checkpoints completed, %d with a newer one in flight, %d restarts", completed.Load(), overlapped.Load(), r.res.Restarts)
			})
		}
	}
}
