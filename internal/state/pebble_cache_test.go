package state

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

// The write-back cache in front of Pebble behaves like a plain map under
// random sets, deletes, merges (concatenation), gets, full scans and batch
// writes that bypass it, with a limit small enough that it flushes every
// few writes: every read and scan sees the latest value of every key.
func TestCachedDBMatchesModel(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	b := openPebbleForTest(t, Options{})
	c := b.db
	c.limit = 64
	model := map[string][]byte{}
	key := func() []byte { return []byte(fmt.Sprintf("k%02d", rng.IntN(40))) }
	val := func() []byte { return []byte(fmt.Sprintf("v%d;", rng.IntN(1000))) }
	for step := range 20_000 {
		switch op := rng.IntN(100); {
		case op < 30:
			k, v := key(), val()
			pebbleMust(t, c.Set(k, v, pebble.NoSync))
			model[string(k)] = v
		case op < 40:
			k := key()
			pebbleMust(t, c.Delete(k, pebble.NoSync))
			delete(model, string(k))
		case op < 55:
			k, v := key(), val()
			pebbleMust(t, c.Merge(k, v, pebble.NoSync))
			model[string(k)] = append(append([]byte(nil), model[string(k)]...), v...)
		case op < 90:
			k := key()
			got, closer, err := c.Get(k)
			want, ok := model[string(k)]
			if !ok {
				if err != pebble.ErrNotFound {
					t.Fatalf("step %d: get %s: %q, %v; want not found", step, k, got, err)
				}
				continue
			}
			pebbleMust(t, err)
			if !bytes.Equal(got, want) {
				t.Fatalf("step %d: get %s = %q, want %q", step, k, got, want)
			}
			pebbleMust(t, closer.Close())
		case op < 95:
			// A batch that bypasses the cache (as map Clear and restores
			// do) deletes one key and sets another.
			k1, k2, v := key(), key(), val()
			batch, err := c.NewBatch()
			pebbleMust(t, err)
			pebbleMust(t, batch.Delete(k1, nil))
			pebbleMust(t, batch.Set(k2, v, nil))
			pebbleMust(t, batch.Commit(pebble.NoSync))
			pebbleMust(t, batch.Close())
			delete(model, string(k1))
			model[string(k2)] = v
		default:
			it, err := c.NewIter(nil)
			pebbleMust(t, err)
			n := 0
			for valid := it.First(); valid; valid = it.Next() {
				want, ok := model[string(it.Key())]
				if !ok || !bytes.Equal(it.Value(), want) {
					t.Fatalf("step %d: scan %s = %q, model has %q (%v)", step, it.Key(), it.Value(), want, ok)
				}
				n++
			}
			pebbleMust(t, it.Close())
			if n != len(model) {
				t.Fatalf("step %d: scan saw %d keys, model has %d", step, n, len(model))
			}
		}
	}
}

// A failed flush breaks the cache for good: every later write, read,
// snapshot or batch returns the error instead of losing the writes it held
// silently (a snapshot without them would complete a checkpoint that
// misses state).
func TestCachedDBFailedFlushIsSticky(t *testing.T) {
	b := openPebbleForTest(t, Options{})
	c := b.db
	pebbleMust(t, c.Set([]byte("k"), []byte("v"), pebble.NoSync))
	broken := fmt.Errorf("injected commit failure")
	c.err = broken // as flush records a failed batch commit
	if err := c.Set([]byte("k2"), []byte("v"), pebble.NoSync); err != broken {
		t.Errorf("Set after a failed flush: %v", err)
	}
	if _, _, err := c.Get([]byte("k")); err != broken {
		t.Errorf("Get after a failed flush: %v", err)
	}
	if _, err := c.NewSnapshot(); err != broken {
		t.Errorf("NewSnapshot after a failed flush: %v", err)
	}
	if _, err := c.NewBatch(); err != broken {
		t.Errorf("NewBatch after a failed flush: %v", err)
	}
	if _, err := c.NewIter(nil); err != broken {
		t.Errorf("NewIter after a failed flush: %v", err)
	}
	if err := c.Merge([]byte("k"), []byte("v"), pebble.NoSync); err != broken {
		t.Errorf("Merge after a failed flush: %v", err)
	}
}
