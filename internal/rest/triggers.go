package rest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/weirstream/weir/internal/monitor"
)

// Asynchronous operations: checkpoints and savepoints triggered through
// the API run in the background; the trigger answers a request id at once
// (Flink's TriggerResponse) and a status endpoint of the operation's kind
// answers IN_PROGRESS until its result is there.

// maxFinishedTriggers is how many finished triggers the server remembers,
// of every kind together; the oldest are forgotten first. Running ones
// are always kept.
const maxFinishedTriggers = 100

// maxRunningTriggers bounds the triggers of one kind waiting for their
// result at once: a client hammering POST /checkpoints while the job
// restarts must not pile up goroutines.
const maxRunningTriggers = 16

// triggerKind tells the asynchronous operations apart: as in Flink, a
// trigger id is known only to the status endpoint of its kind.
type triggerKind int

const (
	checkpointTrigger triggerKind = iota
	// savepointTrigger is a savepoint, with or without stopping the job
	// (POST /savepoints and /stop, both polled at /savepoints/{triggerid}).
	savepointTrigger
	numTriggerKinds
)

// String is the kind's name in messages and paths: "checkpoint",
// "savepoint".
func (k triggerKind) String() string {
	if k == savepointTrigger {
		return "savepoint"
	}
	return "checkpoint"
}

// triggerKey names a trigger: Flink keys asynchronous operations by job
// and trigger id.
type triggerKey struct {
	kind triggerKind
	job  string
	id   string
}

// outcome is what a triggered operation ended with: err, or the
// checkpoint's id or the savepoint.
type outcome struct {
	checkpoint int64
	savepoint  monitor.SavepointResult
	err        error
}

// trigger is an operation triggered through the API.
type trigger struct {
	done    chan struct{} // closed once result is set
	result  outcome
	running bool
}

// triggerState is a copy of a trigger's state.
type triggerState struct {
	done   bool
	result outcome
	// finished is closed once the operation finished.
	finished <-chan struct{}
}

// triggers are the operations triggered through the API.
type triggers struct {
	mu       sync.Mutex
	byKey    map[triggerKey]*trigger
	finished []triggerKey // oldest first
	running  [numTriggerKinds]int
}

func newTriggers() *triggers { return &triggers{byKey: map[triggerKey]*trigger{}} }

// newTriggerID returns a fresh trigger id: 32 random hex digits, as
// Flink's trigger ids.
func newTriggerID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// parseTriggerID checks a trigger id a client chose: 32 hex digits, as
// Flink's TriggerId; the result is lower case.
func parseTriggerID(id string) (string, error) {
	if len(id) != 32 {
		return "", fmt.Errorf("triggerId %q is not a trigger id: want 32 hex digits (or leave it out for a "+
			"generated one)", id)
	}
	if _, err := hex.DecodeString(id); err != nil {
		return "", fmt.Errorf("triggerId %q is not a trigger id: want 32 hex digits (or leave it out for a "+
			"generated one)", id)
	}
	return strings.ToLower(id), nil
}

// errTooManyTriggers is returned by add when limit triggers of the kind
// are running.
var errTooManyTriggers = errors.New("too many running triggers")

// add records a new running trigger under k and reports true, or reports
// false if there is one already (a client-given trigger id, repeated).
// With limit triggers of k's kind running it returns errTooManyTriggers.
func (t *triggers) add(k triggerKey, limit int) (bool, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.byKey[k]; ok {
		return false, nil
	}
	if t.running[k.kind] >= limit {
		return false, errTooManyTriggers
	}
	t.byKey[k] = &trigger{done: make(chan struct{}), running: true}
	t.running[k.kind]++
	return true, nil
}

// has reports whether trigger k is known.
func (t *triggers) has(k triggerKey) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.byKey[k]
	return ok
}

// finish records a trigger's result.
func (t *triggers) finish(k triggerKey, r outcome) {
	t.mu.Lock()
	defer t.mu.Unlock()
	tr := t.byKey[k]
	if tr == nil || !tr.running {
		return
	}
	tr.running, tr.result = false, r
	close(tr.done)
	t.running[k.kind]--
	t.finished = append(t.finished, k)
	if n := len(t.finished) - maxFinishedTriggers; n > 0 {
		for _, old := range t.finished[:n] {
			delete(t.byKey, old)
		}
		t.finished = slices.Delete(t.finished, 0, n)
	}
}

// get returns a copy of trigger k's state.
func (t *triggers) get(k triggerKey) (triggerState, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	tr, ok := t.byKey[k]
	if !ok {
		return triggerState{}, false
	}
	return triggerState{done: !tr.running, result: tr.result, finished: tr.done}, true
}

// launch runs op in the background as trigger k and answers k's id with
// 202 (Flink's TriggerResponse). If trigger k exists already (a client
// repeated its trigger id) nothing starts and its id is answered: the
// same operation, as Flink does. Beyond maxRunningTriggers of k's kind it
// answers 429; once the server is closing, 503. op gets the server's
// context, which Close cancels.
func (s *Server) launch(k triggerKey, op func(ctx context.Context) outcome) (any, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, errorf(http.StatusServiceUnavailable, "The server is shutting down")
	}
	added, err := s.triggers.add(k, maxRunningTriggers)
	if err != nil {
		s.mu.Unlock()
		return nil, errorf(http.StatusTooManyRequests, "%d %s triggers are still running: wait for one "+
			"to finish (GET /jobs/%s/%ss/<triggerid>)", maxRunningTriggers, k.kind, k.job, k.kind)
	}
	if added {
		s.wg.Add(1)
	}
	s.mu.Unlock()
	if added {
		go func() {
			defer s.wg.Done()
			s.triggers.finish(k, op(s.ctx))
		}()
	}
	return withStatus{status: http.StatusAccepted, body: TriggerResponse{RequestID: k.id}}, nil
}
